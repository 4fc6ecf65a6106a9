"""The ``sb3-bridge`` command: ``inspect`` a checkpoint, ``evaluate`` it deterministically, ``export`` a jaxrl-agents policy back to SB3.

    sb3-bridge inspect MODEL.zip
    sb3-bridge evaluate MODEL.zip [--env MODULE:FACTORY | GYM_ID] [--env-option K=V ...]
                                  [--episodes N] [--seed S] [--activation NAME] [--out DIR [--force]]
    sb3-bridge export POLICY_DIR OUT.zip [--algo ppo|a2c|trpo] [--force]

``evaluate`` prints the trainer's evaluation line per episode (return, then the fields the
environment's evaluation description names: for the gate env best J_T and its time, first perfect
entangler, 1 - U at the best step) and with ``--out`` writes ``evals.npz`` (the trainer's
layout), ``summary.json`` and, when the environment reports its pulse, ``pulse.csv`` in the paper's
format (``pulse_<i>.csv`` for episode i when N > 1). Existing files are replaced only with
``--force``; every file is written atomically.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time

from . import evaluation
from .errors import CheckpointError
from .outputs import refuse_existing

DEFAULT_ENV = "quantgate_env:make"


def _parse_options(items):
    from jaxrl_agents.common.envs import parse_env_options
    return parse_env_options(items)


def build_parser() -> argparse.ArgumentParser:
    """Build the ``sb3-bridge`` argument parser: subcommands ``inspect``, ``evaluate``, ``export``.

    Returns:
        The parser; its description is the first paragraph of this module's docstring.
    """
    parser = argparse.ArgumentParser(prog="sb3-bridge", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="describe an SB3 checkpoint without building it")
    p.add_argument("model", help="SB3 .zip written by model.save")
    p.add_argument("--json", action="store_true", help="print the description as JSON")

    p = sub.add_parser("evaluate", help="run deterministic episodes of an SB3 checkpoint in JAX")
    p.add_argument("model", help="SB3 .zip written by model.save")
    p.add_argument("--env", default=DEFAULT_ENV,
                   help="'module:factory' (functional JAX env) or a Gymnasium id (default %(default)s, "
                        "evaluated on its nominal device)")
    p.add_argument("--env-option", action="append", default=[], metavar="K=V",
                   help="environment option (VALUE parsed as JSON when possible); repeatable")
    p.add_argument("--episodes", type=int, default=1, help="deterministic episodes (default 1)")
    p.add_argument("--seed", type=int, default=0, help="reset seed / PRNG seed (default 0)")
    p.add_argument("--activation", default=None,
                   help="override the activation read from the checkpoint (tanh, relu, ...)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write evals.npz, summary.json and pulse.csv into DIR")
    p.add_argument("--force", action="store_true",
                   help="replace those files if DIR already holds them (e.g. a training run's evals.npz)")

    p = sub.add_parser("export", help="write a jaxrl-agents policy directory as an SB3 .zip (needs torch)")
    p.add_argument("policy", help="policy directory (policy.json + params.npz) or a jaxrl-train run directory")
    p.add_argument("out", help="output .zip")
    p.add_argument("--algo", default="ppo", choices=("ppo", "a2c", "trpo"))
    p.add_argument("--force", action="store_true", help="replace OUT.zip if it exists")
    return parser


def _fmt(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _evaluate(args) -> int:
    if not args.out:
        return _run_evaluation(args)
    from jaxrl_agents.common.fileio import lock_directory

    # Before anything runs: a refused command costs nothing and leaves DIR as it was.
    refuse_existing([os.path.join(args.out, name) for name in evaluation.output_files(args.episodes)],
                    overwrite=args.force)
    created = not os.path.exists(args.out)
    os.makedirs(args.out, exist_ok=True)
    try:
        # DIR may be a training run's directory: a run in progress holds its lock, and writing
        # evals.npz beside it (even with --force) would race the trainer. Fail now, before loading.
        with lock_directory(args.out):
            return _run_evaluation(args)
    except BaseException:
        if created and set(os.listdir(args.out)) <= {".lock"}:
            shutil.rmtree(args.out, ignore_errors=True)  # leave no empty DIR behind a failed command
        raise


def _run_evaluation(args) -> int:
    from jaxrl_agents.common.evaluation import format_eval_line

    from .load import load

    policy = load(args.model, activation=args.activation)
    options = _parse_options(args.env_option)
    meta = policy.metadata
    print(f"{args.model}: {meta['algorithm']} ({meta['activation']}, hidden {_widths(policy.model)}), "
          f"trained {meta.get('num_timesteps')} steps; env {args.env} {options or ''}".rstrip())
    start = time.perf_counter()
    episodes = evaluation.evaluate(policy, args.env, env_options=options, episodes=args.episodes,
                                   seed=args.seed)
    wall = time.perf_counter() - start
    step = int(meta.get("num_timesteps") or 0)
    described = evaluation.describe_evaluation(args.env, options)  # the env names its fields
    summaries = []
    for ep in episodes:
        summary = evaluation.summarize(ep, described)
        summaries.append(summary)
        print(format_eval_line(step, wall, summary, described))
    if len(summaries) > 1:
        print("mean   " + "  ".join(f"{k}={_fmt(sum(s[k] for s in summaries) / len(summaries))}"
                                    for k in summaries[0]))
    if args.out:
        evals_name, summary_name, *pulse_names = evaluation.output_files(len(episodes))
        evaluation.write_evals(os.path.join(args.out, evals_name), episodes, step=step,
                               overwrite=args.force)
        evaluation.write_summary(os.path.join(args.out, summary_name),
                                 {"model": os.path.abspath(args.model), "env": args.env,
                                  "env_options": options, "seed": args.seed, "episodes": summaries},
                                 overwrite=args.force)
        written = [evals_name, summary_name]
        if "amps" in episodes[0]:
            for name, ep in zip(pulse_names, episodes):
                amps, dt = evaluation.episode_pulse(ep)
                evaluation.write_pulse_csv(os.path.join(args.out, name), amps, dt, overwrite=args.force)
                written.append(name)
        print(f"wrote {', '.join(written)} to {args.out}")
    return 0


def _inspect(args) -> int:
    from .describe import inspect
    info = inspect(args.model)
    if args.json:
        import dataclasses
        d = dataclasses.asdict(info)
        d["supported"] = info.supported
        from jaxrl_agents.common.fileio import json_text
        print(json_text(d, default=str))
    else:
        print(info.summary())
    return 0 if info.supported else 3


def _export(args) -> int:
    from jaxrl_agents.common.policy import load_policy

    from .sb3_export import export
    path = export(load_policy(args.policy), args.out, algo=args.algo, overwrite=args.force)
    print(f"wrote {path} (load with {'sb3_contrib.TRPO' if args.algo == 'trpo' else 'stable_baselines3.' + args.algo.upper()}.load)")
    return 0


def main(argv=None) -> int:
    """Entry point of the ``sb3-bridge`` console script.

    Args:
        argv: the arguments after the program name (``None``: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 ok, 2 bad arguments or checkpoint, an output file that exists (without
        ``--force``) or a failed write, 3 ``inspect`` of an unsupported checkpoint.
    """
    args = build_parser().parse_args(argv)
    try:
        return {"inspect": _inspect, "evaluate": _evaluate, "export": _export}[args.command](args)
    except OSError as exc:
        # FileExistsError from the overwrite policy, and a full or read-only disk: "<file>: <reason>".
        from jaxrl_agents.common.fileio import describe_os_error

        print(f"sb3-bridge {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except (CheckpointError, ValueError, ImportError) as exc:  # DirectoryLockedError is a ValueError
        print(f"sb3-bridge {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _widths(model) -> str:
    """The hidden widths: one list when actor and critic share them, else pi and vf."""
    if model.critic_hidden is None:
        return str(list(model.hidden))
    return f"pi {list(model.hidden)} vf {list(model.critic_hidden)}"


if __name__ == "__main__":
    sys.exit(main())
