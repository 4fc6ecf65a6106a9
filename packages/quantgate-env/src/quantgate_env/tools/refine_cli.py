"""``quantgate-refine``: polish a stored pulse with GRAPE (gradient refinement of its final gate).

    quantgate-refine RL_pulse.csv --out RL_refined.csv                  # stop at the pulse's best time
    quantgate-refine RL_pulse.csv --gate-time 17.25 --iters 200 --lr 3e-4 --out RL_refined.csv

Reads a pulse in the paper's CSV format (columns ``tlist``, ``amplist``), truncates it at the gate
time (default: the time of its minimum J_T on the nominal device), refines it with
``quantgate_env.refine_pulse`` and writes the refined, truncated pulse in the same format. An
existing output file is never overwritten, and ``--out`` is checked (exists? can its directory take a
new file?) before the pulse is read or GRAPE compiles.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from ..physics.device import nominal_device
from .files import check_writable, describe_os_error
from .grape import AMP_BOUND, refine_pulse
from .pulses import CSV_FIRST_SAMPLE_LINE, load_pulse_csv, pulse_plan, rollout_pulse, save_pulse_csv

__all__ = ["main"]


#: Most Adam updates one command runs (~35 ms each at 345 samples: about an hour); more is almost
#: certainly a typo, and the history of every iterate is kept in memory.
MAX_ITERS = 100_000


def _samples_for(gate_time: float, dt: float, n_available: int) -> int:
    """Number of samples ending at ``gate_time`` (ns), checked against the grid and the pulse."""
    n = round(gate_time / dt)
    if abs(n * dt - gate_time) > 1e-6 * dt:
        raise ValueError(f"--gate-time: expected a multiple of the pulse's dt = {dt:g} ns, got {gate_time!r}")
    if not 1 <= n <= n_available:
        raise ValueError(
            f"--gate-time: expected a time between {dt:g} and {n_available * dt:g} ns (the pulse's "
            f"{n_available} samples), got {gate_time!r}"
        )
    return n


def _check_flags(args) -> None:
    """The flags that need no file, before anything is read or compiled."""
    if not 0 <= args.iters <= MAX_ITERS:
        raise ValueError(f"--iters: expected a number of Adam updates from 0 to {MAX_ITERS}, got {args.iters}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise ValueError(f"--lr: expected a positive step size, got {args.lr}")
    if args.gate_time is not None and not (math.isfinite(args.gate_time) and args.gate_time > 0):
        raise ValueError(f"--gate-time: expected a positive time in ns, got {args.gate_time}")
    if os.path.exists(args.out):
        raise ValueError(f"--out: {args.out!r} already exists; choose a new file name")
    try:  # a missing or read-only directory is found now, not after GRAPE's 10-20 s
        check_writable(args.out)
    except OSError as err:
        raise ValueError(f"--out: {describe_os_error(err)}") from None


def _load(path: str) -> tuple[np.ndarray, float]:
    """The pulse file, checked against the propagator's bound; errors name the file and line."""
    try:
        amps, dt = load_pulse_csv(path)
        pulse_plan(amps, dt, [nominal_device()], csv_path=path)  # rollout_pulse's plan
        pulse_plan(amps, dt, [nominal_device()], amp_bound=AMP_BOUND, csv_path=path)  # refine_pulse's
    except (ValueError, OSError) as err:
        message = str(err)
        raise ValueError(f"pulse: {message[len('path: '):] if message.startswith('path: ') else message}") from None
    over = np.flatnonzero(np.abs(amps) > AMP_BOUND)
    if over.size:
        k = int(over[0])
        raise ValueError(
            f"pulse: {path!r} line {k + CSV_FIRST_SAMPLE_LINE} (amplist): expected |u| <= {AMP_BOUND:g} rad/ns "
            f"(the environment's bound, which GRAPE keeps), got {float(amps[k])!r}"
        )
    return amps, dt


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``quantgate-refine``: refine a pulse CSV with GRAPE and write it to ``--out``.

    Args:
        argv: the arguments after the program name (``None``: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 ok (gate time and J_T before/after are printed), 2 a bad argument, an
        unreadable pulse, an ``--out`` that already exists (nothing is written) or a failed write.
    """
    parser = argparse.ArgumentParser(prog="quantgate-refine", description=__doc__.split("\n\n")[0])
    parser.add_argument("pulse", help="pulse CSV in the paper's format (tlist, amplist)")
    parser.add_argument("--gate-time", type=float, default=None,
                        help="stop time, ns, a multiple of the pulse's dt (default: the time of its minimum J_T)")
    parser.add_argument("--iters", type=int, default=200, help=f"Adam updates (default 200, at most {MAX_ITERS})")
    parser.add_argument("--lr", type=float, default=3e-4, help="initial Adam step, cosine-decayed (default 3e-4)")
    parser.add_argument("--out", required=True, help="refined pulse CSV to create (never overwritten)")
    args = parser.parse_args(argv)

    try:
        _check_flags(args)
        amps, dt = _load(args.pulse)
        if args.gate_time is None:
            n = int(np.argmin(rollout_pulse(amps, dt=dt)["JT"])) + 1
        else:
            n = _samples_for(args.gate_time, dt, amps.size)
        start = time.perf_counter()
        result = refine_pulse(amps[:n], dt=dt, n_iter=args.iters, lr=args.lr)
        seconds = time.perf_counter() - start
        save_pulse_csv(args.out, result.amps, dt)
    except FileExistsError as err:  # created by someone else while refining
        print(f"{parser.prog}: error: --out: {args.out!r} already exists ({err.strerror}); nothing written", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a write that failed after the check (a full disk): the file is named
        print(f"{parser.prog}: error: --out: {describe_os_error(err)}", file=sys.stderr)
        return 2
    print(
        f"gate time {n * dt:.4g} ns ({n} samples of {dt:g} ns): J_T before {result.JT_initial:.4e}, "
        f"after {result.JT_best:.4e} (iteration {result.best_iteration} of {result.iterations}, "
        f"{seconds:.1f} s incl. compilation); wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
