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
import os
import sys

import numpy as np

from .env import make
from .pulses import load_pulse_csv
from .robustness import policy_robustness, pulse_robustness

__all__ = ["main"]


def _parse_option(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--env-option: expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _load_object(spec: str):
    module, _, name = spec.partition(":")
    if not module or not name:
        raise SystemExit(f"--policy-loader: expected MODULE:FUNCTION, got {spec!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise SystemExit(f"--policy-loader: cannot import {spec!r} ({err})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quantgate-robustness", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pulse", help="pulse CSV in the paper's format (tlist, amplist)")
    source.add_argument("--policy", help="a policy directory (or file) for --policy-loader")
    parser.add_argument("--policy-loader", default="jaxrl_agents:load_policy")
    parser.add_argument("--range", default="recool", help="half-width in MHz or a named range (in_cooldown, recool, fab_targeting)")
    parser.add_argument("--n", type=int, default=11, help="grid points per axis (default 11)")
    parser.add_argument("--gate-time", type=float, default=None, help="stop time of a pulse, ns (default: nominal best)")
    parser.add_argument("--env-option", type=_parse_option, action="append", default=[], metavar="KEY=VALUE",
                        help="option of the environment the policy was trained on (repeatable)")
    parser.add_argument("--out", required=True, help="output directory (created; existing files are not overwritten)")
    args = parser.parse_args(argv)

    half_width = args.range
    try:
        half_width = float(half_width)
    except ValueError:
        pass
    if os.path.exists(os.path.join(args.out, "robustness.npz")):
        parser.error(f"--out: {args.out!r} already holds a robustness map; choose a new directory")
    if args.pulse:
        amps, dt = load_pulse_csv(args.pulse)
        result = pulse_robustness(amps, dt=dt, half_width_mhz=half_width, n=args.n, gate_time=args.gate_time)
    else:
        policy = _load_object(args.policy_loader)(args.policy)
        env = make(**dict(args.env_option))
        result = policy_robustness(lambda obs: policy.act(obs, deterministic=True), env=env,
                                   half_width_mhz=half_width, n=args.n)
    os.makedirs(args.out, exist_ok=True)
    result.save_npz(os.path.join(args.out, "robustness.npz"))
    summary = dict(result.summary(), source=args.pulse or args.policy, half_width=half_width, n=args.n)
    with open(os.path.join(args.out, "robustness.json"), "w") as handle:
        json.dump(summary, handle, indent=2)
    try:
        result.save_png(os.path.join(args.out, "robustness.png"))
    except ImportError as err:
        print(f"(no PNG: {err})", file=sys.stderr)
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
