"""``quantgate-robustness``: the robustness map of a pulse or a policy over a qubit-detuning grid.

    quantgate-robustness --pulse RL_pulse.csv --range recool --n 11 --out maps/rl
    quantgate-robustness --policy runs/ppo_.../best_policy --range recool --out maps/ppo

``--policy`` is loaded by ``--policy-loader MODULE:FUNCTION`` (default ``jaxrl_agents:load_policy``,
which also reads sb3-bridge exports); the loaded object needs ``act(obs_batch)``. Writes
``robustness.npz``, ``robustness.json`` (summary) and ``robustness.png`` (if matplotlib is present).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys

from ..mdp.single_line import make
from ..physics.device import nominal_device
from ..physics.drift import DRIFT_RANGES
from .files import atomic_open, check_writable, describe_os_error, json_text
from .pulses import load_pulse_csv, pulse_plan
from .robustness import MAX_GRID_N, detuning_grid, policy_robustness, pulse_robustness, resolve_half_width

#: What one map writes into --out; none of them is ever replaced.
OUTPUT_FILES = ("robustness.npz", "robustness.json", "robustness.png")

__all__ = ["main"]


def _parse_option(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _load_object(spec: str):
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"--policy-loader: expected MODULE:FUNCTION, got {spec!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"--policy-loader: cannot import {spec!r} ({err})") from None


def _flag(flag: str, check, *args, internal: tuple[str, ...] = (), **kwargs):
    """``check(*args, **kwargs)``, with a ValueError's message re-addressed to the command-line flag.

    A message that starts with one of the library's parameter names in ``internal`` ("path: ...")
    has that name replaced by the flag, so the user reads the flag they typed.
    """
    try:
        return check(*args, **kwargs)
    except OSError as err:  # a file that cannot be read: FileNotFoundError names it
        raise ValueError(f"{flag}: {err}") from None
    except ValueError as err:
        message = str(err)
        for name in internal:
            if message.startswith(f"{name}: "):
                message = message[len(name) + 2:]
        raise ValueError(f"{flag}: {message}") from None


def _half_width(text: str) -> float:
    """--range as MHz: a named range or a positive number below the lower qubit frequency."""
    try:
        value: float | str = float(text)
    except ValueError:
        value = text
    if isinstance(value, str) and value not in DRIFT_RANGES:
        raise ValueError(f"--range: expected a half-width in MHz or one of {tuple(DRIFT_RANGES)}, got {text!r}")
    # detuning_grid checks the number (positive, finite, below the qubit frequency) with n = 1
    _flag("--range", detuning_grid, value, 1, internal=("half_width_mhz",))
    return resolve_half_width(value)


def _check_args(args) -> tuple[float, object]:
    """Every flag, before anything loads or compiles; returns (half-width MHz, the env or None)."""
    half_width = _half_width(args.range)
    if not 1 <= args.n <= MAX_GRID_N:
        raise ValueError(f"--n: expected grid points per axis from 1 to {MAX_GRID_N}, got {args.n}")
    if args.gate_time is not None:
        if not args.pulse:
            raise ValueError("--gate-time: applies to --pulse only (a policy's map stops at its own best time)")
        if not (math.isfinite(args.gate_time) and args.gate_time > 0):
            raise ValueError(f"--gate-time: expected a positive time in ns, got {args.gate_time}")
    env = None
    if args.env_option:
        if not args.policy:
            raise ValueError("--env-option: applies to --policy only (a pulse is played on the nominal device)")
    if args.policy:
        env = _flag("--env-option", make, **dict(args.env_option))
    held = [name for name in OUTPUT_FILES if os.path.lexists(os.path.join(args.out, name))]
    if held:
        raise ValueError(f"--out: {args.out!r} already holds {', '.join(held)} (never overwritten); "
                         "choose a new directory")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out: {args.out!r} exists and is not a directory")
    _check_out_dir(args.out)
    return half_width, env


def _check_out_dir(out: str) -> None:
    """--out can take the map's files: checked now, before anything loads or is computed.

    An existing directory must accept new files; otherwise its nearest existing ancestor must
    accept the first directory `os.makedirs` will create. The probe creates and removes a
    temporary file (`files.check_writable`), so a read-only mount is found also for root.
    """
    target = os.path.abspath(out)
    probe = os.path.join(target, OUTPUT_FILES[0])
    while not os.path.exists(target):
        target, probe = os.path.dirname(target), target
    if not os.path.isdir(target):
        raise ValueError(f"--out: {target!r} is not a directory, so {out!r} cannot be created")
    try:
        check_writable(probe)
    except OSError as err:
        raise ValueError(f"--out: {describe_os_error(err)}") from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``quantgate-robustness``: scan a pulse or a policy and write the map to ``--out``.

    Args:
        argv: the arguments after the program name (``None``: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 ok (the summary is printed on one line), 2 a bad argument, a pulse or
        policy that cannot be loaded, or a failed write.
    """
    parser = argparse.ArgumentParser(prog="quantgate-robustness", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pulse", help="pulse CSV in the paper's format (tlist, amplist)")
    source.add_argument("--policy", help="a policy directory (or file) for --policy-loader")
    parser.add_argument("--policy-loader", default="jaxrl_agents:load_policy")
    parser.add_argument("--range", default="recool", help="half-width in MHz or a named range (in_cooldown, recool, fab_targeting)")
    parser.add_argument("--n", type=int, default=11, help=f"grid points per axis (default 11, at most {MAX_GRID_N})")
    parser.add_argument("--gate-time", type=float, default=None, help="stop time of a pulse, ns (default: nominal best)")
    parser.add_argument("--env-option", type=_parse_option, action="append", default=[], metavar="KEY=VALUE",
                        help="option of the environment the policy was trained on (repeatable)")
    parser.add_argument("--out", required=True, help="output directory (created; existing files are not overwritten)")
    args = parser.parse_args(argv)

    try:
        half_width, env = _check_args(args)
        if args.pulse:
            amps, dt = _flag("--pulse", load_pulse_csv, args.pulse, internal=("path",))
            # the propagator's bound, named by the CSV line (the grid's corners add little to it)
            _flag("--pulse", pulse_plan, amps, dt, [nominal_device()], csv_path=args.pulse)
            result = pulse_robustness(amps, dt=dt, half_width_mhz=half_width, n=args.n, gate_time=args.gate_time)
        else:
            try:
                policy = _load_object(args.policy_loader)(args.policy)
            except (ValueError, OSError) as err:
                raise ValueError(f"--policy: cannot load {args.policy!r} ({err})") from None
            result = policy_robustness(lambda obs: policy.act(obs, deterministic=True), env=env,
                                       half_width_mhz=half_width, n=args.n)
        os.makedirs(args.out, exist_ok=True)
        result.save_npz(os.path.join(args.out, "robustness.npz"))
        summary = dict(result.summary(), source=args.pulse or args.policy, half_width=half_width, n=args.n)
        with atomic_open(os.path.join(args.out, "robustness.json")) as handle:
            handle.write(json_text(summary) + "\n")
        try:
            result.save_png(os.path.join(args.out, "robustness.png"))
        except ImportError as err:  # matplotlib is optional (quantgate-env[plot])
            print(f"(no PNG: {err})", file=sys.stderr)
    except OSError as err:  # a full or read-only disk: every file already written is whole
        print(f"{parser.prog}: error: {describe_os_error(err)}", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
