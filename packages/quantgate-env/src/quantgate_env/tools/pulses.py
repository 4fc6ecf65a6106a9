"""Fixed pulses: reading the paper's pulse files and applying a pulse sample by sample."""

from __future__ import annotations

import array
import csv
import functools
import math
import os
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..physics.device import DeviceParams, nominal_device, validate_device
from ..physics.hamiltonian import sector_drift
from ..physics.metrics import OBJECTIVES, state_metrics
from ..physics.propagation import (
    MAX_THETA,
    TaylorPlan,
    initial_sector_state,
    propagate_samples,
    taylor_plan,
    theta_bound,
)
from ..precision import x64_scope
from ..validation import choice, finite_array, positive_number
from .files import atomic_open

__all__ = ["PLAN_MARGIN", "load_pulse_csv", "paper_pulse", "paper_pulse_path", "save_pulse_csv", "rollout_pulse", "pulse_metrics", "pulse_plan", "PulseTrace"]


class PulseTrace(NamedTuple):
    """Metrics after every sample of a pulse (each (n_samples,), or batched under vmap)."""

    JT: jnp.ndarray
    concurrence: jnp.ndarray
    unitarity: jnp.ndarray


#: Line of a pulse file that holds sample 0 of ``load_pulse_csv``'s amps (line 1 is the header,
#: line 2 the t = 0 row that is never applied); sample k is on line k + CSV_FIRST_SAMPLE_LINE.
CSV_FIRST_SAMPLE_LINE = 3

# Margin added to a fixed pulse's plan bound so that small parameter changes (drift, robustness
# maps) under vmap stay inside it; a sample outside it reports NaN (see propagation).
PLAN_MARGIN = 1.05


def pulse_plan(amps: np.ndarray, dt: float, devices: Sequence[DeviceParams], *, amp_bound: float | None = None,
               csv_path: str | os.PathLike | None = None) -> TaylorPlan:
    """Taylor plan covering every sample of a pulse on every given device (concrete numbers).

    A pulse beyond what the exact propagator covers (``propagation.MAX_THETA``: samples up to
    ~5 ns at 20 rad/ns, see there) is refused before anything compiles: if even the reference
    amplitude (0, or ``amp_bound``) is too much the error names ``dt``, otherwise the first sample
    beyond the bound (``amps[k]``, or its line in ``csv_path``) and the largest |u| allowed.

    Args:
        amps: (n_samples,) finite amplitudes, rad/ns.
        dt: sample duration, ns (positive).
        devices: concrete devices (GHz) the pulse will be played on.
        amp_bound: cover every |u| <= amp_bound instead of the pulse's own peak (rad/ns), for
            callers whose iterates move (GRAPE).
        csv_path: the file ``amps`` came from (``load_pulse_csv``), to name lines in errors.

    Raises:
        ValueError: as above, naming dt, the sample or the CSV line.
    """
    def theta(u: float) -> float:
        return PLAN_MARGIN * max(theta_bound(device, u, dt) for device in devices)

    peak = float(np.max(np.abs(amps))) if amp_bound is None else float(amp_bound)
    worst = theta(peak)
    if worst <= MAX_THETA:
        return taylor_plan(worst)
    reference = 0.0 if amp_bound is None else float(amp_bound)
    base = theta(reference)
    if not base <= MAX_THETA:
        at = "even at u = 0" if amp_bound is None else f"at |u| <= {amp_bound:g} rad/ns"
        name = "dt" if csv_path is None else f"{os.fspath(csv_path)!r} time step (tlist)"
        raise ValueError(
            f"{name}: samples of {dt:.4g} ns have a phase spread theta = {base:.4g} rad {at}, beyond the "
            f"{MAX_THETA:g} the exact propagator covers (see quantgate_env.physics.propagation); expected dt <= "
            f"{MAX_THETA / base * dt:.3g} ns"
        )
    # theta grows with |u|, so the first offending sample is the first whose |u| exceeds the
    # largest allowed magnitude; bisect for that magnitude (only on this error path). Bracket it
    # first by doubling from 1 rad/ns: a bisection of [0, peak] alone cannot reach a bound of
    # ~3600 rad/ns from a peak of 1e30 in 60 halvings (it reported "|u| <= 0" and sample 0).
    lo, hi = 0.0, 1.0
    while hi < peak and theta(hi) <= MAX_THETA:
        lo, hi = hi, 2.0 * hi
    hi = min(hi, peak)
    for _ in range(60):  # hi - lo halves each time: from at most lo (a doubling) to 1e-18 of it
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if theta(mid) <= MAX_THETA else (lo, mid)
    k = int(np.argmax(np.abs(amps) > lo))
    where = f"amps[{k}]" if csv_path is None else f"{os.fspath(csv_path)!r} line {k + CSV_FIRST_SAMPLE_LINE} (amplist)"
    raise ValueError(
        f"{where}: {float(amps[k])!r} rad/ns for dt = {dt:g} ns has a phase spread theta = {theta(abs(float(amps[k]))):.4g} "
        f"rad, beyond the {MAX_THETA:g} the exact propagator covers (see quantgate_env.physics.propagation); expected "
        f"|u| <= {lo:.4g} rad/ns at this dt"
    )


#: Longest line a pulse file may have, in characters. A row holds a few numbers (time, amplitude,
#: perhaps a pandas index and a ``guess`` column): well under 200 characters. The cap bounds the
#: memory of a wrong file: a 200 MB one-line text was read whole and split into fields (574 MB).
MAX_CSV_LINE = 4096


def _bounded_lines(handle, name: str):
    """The lines of ``handle``, each read with a cap, so no line is ever held longer than the cap."""
    number = 0
    while line := handle.readline(MAX_CSV_LINE + 1):
        number += 1
        if len(line) > MAX_CSV_LINE:
            raise ValueError(
                f"path: {name!r} line {number} is longer than {MAX_CSV_LINE} characters; expected a pulse "
                f"CSV file (a few numbers per row, columns 'tlist' and 'amplist')"
            )
        yield line


def _csv_rows(path: str | os.PathLike):
    """Yield (line number, fields) of every row, reading line by line; text errors name the file."""
    name = os.fspath(path)
    try:
        # utf-8-sig: a spreadsheet's byte-order mark must not become part of the first column name
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(_bounded_lines(handle, name))
            for row in reader:
                yield reader.line_num, row
    except UnicodeDecodeError as err:
        raise ValueError(
            f"path: {name!r} is not a text CSV file (byte {err.start} is not UTF-8); expected columns 'tlist' and 'amplist'"
        ) from None
    except csv.Error as err:  # e.g. a NUL byte: a binary file that happens to decode
        raise ValueError(f"path: {name!r} is not a CSV file ({err}); expected columns 'tlist' and 'amplist'") from None


def _column_value(name: str, line: int, row: list[str], column: str, index: int) -> float:
    """The number in one field of a data row, or a ValueError naming the file, line and column."""
    if index >= len(row):
        raise ValueError(
            f"{name!r} line {line}: expected a value in column {column!r} (field {index + 1}), "
            f"got a row of {len(row)} field(s)"
        )
    text = row[index].strip()
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name!r} line {line}: expected a number in column {column!r}, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name!r} line {line}: expected a finite number in column {column!r}, got {text!r}")
    return value


def _blank(row: list[str]) -> bool:
    return not any(field.strip() for field in row)


def load_pulse_csv(path: str | os.PathLike) -> tuple[np.ndarray, float]:
    """Read a pulse file in the paper's format.

    The file has columns ``tlist`` (ns) and ``amplist`` (rad/ns), possibly beside an unnamed
    pandas index column or a ``guess`` column. ``amplist[0]`` is the value at t = 0 and is never
    applied; sample k holds ``amplist[k + 1]`` on (t_k, t_{k+1}] and sits on line
    k + ``CSV_FIRST_SAMPLE_LINE`` of the file. Trailing blank lines are ignored. The file is read
    line by line and each row is parsed as it arrives (memory: the numbers, ~24 bytes per row);
    a line longer than ``MAX_CSV_LINE`` characters is refused before the rest of it is read.

    Returns:
        (amps, dt): amps (len - 1,) float64 in rad/ns, dt in ns (= tlist[1] - tlist[0]).

    Raises:
        ValueError: naming the file (and the line, where there is one): not a UTF-8 text CSV file,
            a line longer than ``MAX_CSV_LINE``, missing columns, fewer than two data rows, a blank
            or short row, non-numeric or non-finite values, or a time grid that is not uniform.
        OSError: the file cannot be opened.
    """
    name = os.fspath(path)
    rows = _csv_rows(path)
    first = next(rows, None)
    if first is None or (_blank(first[1]) and all(_blank(row) for _, row in rows)):
        raise ValueError(f"path: {name!r} is empty; expected columns 'tlist' and 'amplist'")
    header = [field.strip() for field in first[1]]
    missing = [col for col in ("tlist", "amplist") if col not in header]
    if missing:
        raise ValueError(f"path: {name!r} lacks column(s) {missing}; expected 'tlist' and 'amplist', got {header}")
    t_col, a_col = header.index("tlist"), header.index("amplist")
    tlist, amplist, lines = array.array("d"), array.array("d"), array.array("q")
    blank = None  # the first blank line: an error only if data follows (trailing ones are ignored)
    for line, row in rows:
        if _blank(row):
            blank = blank or line
            continue
        if blank is not None:
            raise ValueError(f"{name!r} line {blank}: expected a data row, got a blank line (only trailing ones are ignored)")
        tlist.append(_column_value(name, line, row, "tlist", t_col))
        amplist.append(_column_value(name, line, row, "amplist", a_col))
        lines.append(line)
    if len(tlist) < 2:
        raise ValueError(f"path: {name!r} has {len(tlist)} data rows; expected at least 2")
    tlist, amplist = np.frombuffer(tlist, np.float64), np.frombuffer(amplist, np.float64).copy()
    steps = np.diff(tlist)
    dt = float(steps[0])
    uneven = np.flatnonzero(np.abs(steps - dt) > 1e-6 * abs(dt))
    if dt <= 0 or uneven.size:
        where = f" (first at line {lines[1 + int(uneven[0])]})" if dt > 0 else ""
        raise ValueError(
            f"path: {name!r} has an uneven or decreasing time grid{where}: steps range "
            f"{steps.min():.6g}..{steps.max():.6g} ns; expected a uniform positive step"
        )
    return amplist[1:], dt


def paper_pulse_path() -> str:
    """The path of the paper's RL pulse shipped with the package (``quantgate_env/data/RL_pulse.csv``).

    A byte-exact copy of the paper's stored pulse (provenance and licence in
    ``quantgate_env/data/SOURCES.md``), in the paper's format: pass it to `load_pulse_csv` or to
    ``quantgate-robustness --pulse`` / ``quantgate-refine``. Installed wheels hold it as a plain
    file, so the path can be given to any command.
    """
    from importlib.resources import files

    return os.fspath(files("quantgate_env").joinpath("data", "RL_pulse.csv"))


def paper_pulse() -> tuple[np.ndarray, float]:
    """The paper's RL pulse: ``(amps, dt)`` = (999,) float64 rad/ns and 0.05 ns (`load_pulse_csv`).

    Its best gate: J_T = 9.4857e-5 at 17.25 ns (sample 345), the figure the README's tour reproduces.
    """
    return load_pulse_csv(paper_pulse_path())


def save_pulse_csv(path: str | os.PathLike, amps, dt: float, *, overwrite: bool = False) -> None:
    """Write a pulse in the paper's format, so that :func:`load_pulse_csv` reads it back exactly.

    Columns: an unnamed index, ``amplist`` (rad/ns) and ``tlist`` (ns), n_samples + 1 rows: the
    first row is t = 0 with amplitude 0 (never applied, as in the paper's files), then row k + 1
    holds sample k at t = (k + 1) dt. Floats are written with ``repr`` (shortest exact form).

    Args:
        path: file to create.
        amps: (n_samples,) finite amplitudes, rad/ns.
        dt: sample duration, ns.
        overwrite: replace an existing file (default False: FileExistsError).

    Raises:
        ValueError: amps not a non-empty finite 1-D array, or dt not a positive number.
        FileExistsError: ``path`` exists and ``overwrite`` is False.
        OSError: the file cannot be written; an existing file is then unchanged.
    """
    amps = finite_array("amps", amps, ndim=1)
    if amps.size == 0:
        raise ValueError("amps: expected at least one sample, got an empty array")
    dt = positive_number("dt", dt)
    amplist = np.concatenate([[0.0], amps])
    tlist = dt * np.arange(amps.size + 1)
    with atomic_open(path, overwrite=overwrite) as handle:  # never a half-written pulse file
        writer = csv.writer(handle)
        writer.writerow(["", "amplist", "tlist"])
        for k, (amp, t) in enumerate(zip(amplist, tlist)):
            writer.writerow([k, repr(float(amp)), repr(float(t))])


def pulse_metrics(amps, device: DeviceParams, dt: float, plan: TaylorPlan, objective: str = "pe") -> PulseTrace:
    """Traceable core of :func:`rollout_pulse`: metrics after each sample (vmap over pulses/devices).

    Args:
        amps: (n_samples,) amplitudes, rad/ns.
        device: device parameters (GHz), possibly traced.
        dt: sample duration, ns (static).
        plan: Taylor plan covering max |u| and the device (see ``propagation.taylor_plan``).
        objective: "pe" or "sqrt_iswap" (static).
    """
    _, states = propagate_samples(initial_sector_state(), sector_drift(device), amps, dt, plan)
    metrics = jax.vmap(lambda s: state_metrics(s, objective))(states)
    return PulseTrace(*metrics)


@functools.partial(jax.jit, static_argnames=("dt", "plan", "objective"))
def _rollout(amps, device, dt, plan, objective):
    return pulse_metrics(amps, device, dt, plan, objective)


def rollout_pulse(amps, *, dt: float = 0.05, params: DeviceParams | None = None, objective: str = "pe") -> dict[str, np.ndarray]:
    """Apply a pulse sample by sample and report the gate metrics after every sample.

    Runs in float64 whatever the caller's JAX setting (the compiled call is scoped).

    Args:
        amps: (n_samples,) coupler shifts u_k in rad/ns; sample k is held on (t_k, t_{k+1}].
        dt: sample duration in ns.
        params: device parameters (GHz); the paper's nominal device if None.
        objective: "pe" (J_T = 1 - (C + 3U)/4) or "sqrt_iswap" (1 - F).

    Returns:
        dict of (n_samples,) float64 numpy arrays: ``JT`` (the objective's cost), ``concurrence``,
        ``unitarity`` and ``t`` (ns at the end of each sample).
    """
    amps = finite_array("amps", amps, ndim=1)
    if amps.size == 0:
        raise ValueError("amps: expected at least one sample, got an empty array")
    dt = positive_number("dt", dt)
    objective = choice("objective", objective, OBJECTIVES)
    device = validate_device(nominal_device() if params is None else params)
    plan = pulse_plan(amps, dt, [device])
    with x64_scope():
        trace = _rollout(jnp.asarray(amps), device, dt, plan, objective)
        out = {key: np.asarray(value) for key, value in trace._asdict().items()}
    out["t"] = dt * np.arange(1, amps.size + 1)
    return out
