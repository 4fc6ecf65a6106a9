"""Fixed pulses: reading the paper's pulse files and applying a pulse sample by sample."""

from __future__ import annotations

import csv
import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .device import DeviceParams, nominal_device, validate_device
from .hamiltonian import sector_drift
from .metrics import OBJECTIVES, state_metrics
from .precision import x64_scope
from .propagation import TaylorPlan, initial_sector_state, propagate_samples, taylor_plan, theta_bound
from .validation import choice, finite_array, positive_number

__all__ = ["load_pulse_csv", "save_pulse_csv", "rollout_pulse", "pulse_metrics", "PulseTrace"]

# Margin added to a plan's bound so that small parameter changes (drift, robustness maps) under
# vmap stay inside it; a sample outside it reports NaN (see propagation).
PLAN_MARGIN = 1.05


class PulseTrace(NamedTuple):
    """Metrics after every sample of a pulse (each (n_samples,), or batched under vmap)."""

    JT: jnp.ndarray
    concurrence: jnp.ndarray
    unitarity: jnp.ndarray


def load_pulse_csv(path: str | os.PathLike) -> tuple[np.ndarray, float]:
    """Read a pulse file in the paper's format.

    The file has columns ``tlist`` (ns) and ``amplist`` (rad/ns), possibly beside an unnamed
    pandas index column or a ``guess`` column. ``amplist[0]`` is the value at t = 0 and is never
    applied; sample k holds ``amplist[k + 1]`` on (t_k, t_{k+1}].

    Returns:
        (amps, dt): amps (len - 1,) float64 in rad/ns, dt in ns (= tlist[1] - tlist[0]).

    Raises:
        ValueError: missing columns, fewer than two rows, non-numeric or non-finite values, or a
            time grid that is not uniform.
    """
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise ValueError(f"path: {os.fspath(path)!r} is empty; expected columns 'tlist' and 'amplist'")
    header = [name.strip() for name in rows[0]]
    missing = [col for col in ("tlist", "amplist") if col not in header]
    if missing:
        raise ValueError(f"path: {os.fspath(path)!r} lacks column(s) {missing}; expected 'tlist' and 'amplist', got {header}")
    if len(rows) < 3:
        raise ValueError(f"path: {os.fspath(path)!r} has {len(rows) - 1} data rows; expected at least 2")
    t_col, a_col = header.index("tlist"), header.index("amplist")
    try:
        tlist = np.array([float(row[t_col]) for row in rows[1:]])
        amplist = np.array([float(row[a_col]) for row in rows[1:]])
    except (ValueError, IndexError) as err:
        raise ValueError(f"path: {os.fspath(path)!r} has a malformed row ({err})") from None
    finite_array(f"{os.fspath(path)!r} column tlist", tlist)
    finite_array(f"{os.fspath(path)!r} column amplist", amplist)
    steps = np.diff(tlist)
    dt = float(steps[0])
    if dt <= 0 or np.max(np.abs(steps - dt)) > 1e-6 * dt:
        raise ValueError(
            f"path: {os.fspath(path)!r} has an uneven or decreasing time grid: steps range "
            f"{steps.min():.6g}..{steps.max():.6g} ns; expected a uniform positive step"
        )
    return amplist[1:], dt


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
    """
    amps = finite_array("amps", amps, ndim=1)
    if amps.size == 0:
        raise ValueError("amps: expected at least one sample, got an empty array")
    dt = positive_number("dt", dt)
    amplist = np.concatenate([[0.0], amps])
    tlist = dt * np.arange(amps.size + 1)
    with open(path, "w" if overwrite else "x", newline="") as handle:
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
    plan = taylor_plan(PLAN_MARGIN * theta_bound(device, float(np.max(np.abs(amps))), dt))
    with x64_scope():
        trace = _rollout(jnp.asarray(amps), device, dt, plan, objective)
        out = {key: np.asarray(value) for key, value in trace._asdict().items()}
    out["t"] = dt * np.arange(1, amps.size + 1)
    return out
