"""``jaxrl-train``: train PPO, TRPO or IPPO on an environment named ``module:factory``.

Examples::

    jaxrl-train                                   # ~5 min PPO demo: a perfect entangler forms
    jaxrl-train --minutes 3                       # the same, stopped cleanly after 3 minutes
    jaxrl-train --tensorboard                     # also TensorBoard event files (RUN/tensorboard/)
    jaxrl-train --preset fast --seed 7            # J_T < 1e-3 in about 10 minutes on 2 cores
    jaxrl-train --algo trpo --preset paper --seed 123 --tag paper   # the paper's run, 20M steps
    jaxrl-train --algo ppo --seeds 1 2 3 --activation relu --env-option max_drift=0.05
    jaxrl-train --resume runs/ppo_20250101-120000_s1
    jaxrl-train --resume runs/trpo_20250101-120000_s1 --total-steps 40000000   # extend a run
    jaxrl-train --preset fast --init-from runs/ppo_..._s1 --lr 1e-4 --log-std-init -4   # fine-tune
    jaxrl-train --algo trpo --help                # lists TRPO's fields and presets
    jaxrl-train --spec run.json                   # the run a RunSpec file describes

A preset (presets.py) sets the hyper-parameters, the step budget and the evaluation cadence:
``demo`` (the default), ``fast`` and ``paper`` (each config's defaults are the paper's
hyper-parameters). Every field of the algorithm's config is a flag (``--n-envs``, ``--lr``,
``--hidden 128 128``, ...) and overrides the preset. The flags and the preset become one
`jaxrl_agents.run.spec.RunSpec` (`spec_of_flags`); ``--spec FILE.json`` reads one instead
(``RunSpec.to_dict`` as JSON), and refuses run flags typed beside it.

The output: evaluation lines above one live status line (plain status lines when stdout is not a
terminal), then a summary block: steps, wall time, steps/s, the best evaluation, the run directory
and its files, and the commands to plot, watch (``--tensorboard``) or continue the run, spelled for
uv under ``uv run`` and for pip otherwise (run_summary.py, commands.py).

Every run goes through the trainer (`jaxrl_agents.run`), except IPPO on a PettingZoo ParallelEnv
stepped from Python, which cannot be checkpointed: one call of `IPPO.train`, written into a run
directory without checkpoints (parallel_env_run.py).

Errors are one line on stderr: exit 2 for bad input, a corrupt or incomplete run directory, or a run
directory in use by another process; exit 1 when training stopped on non-finite values or a file
could not be written.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time

from ..common.envs import parse_env_options
from ..common.fileio import describe_os_error
from ..run.algorithms import ALGORITHMS, ALIASES, canonical_name, get_algorithm
from .flags import ConfigHelpFormatter, add_config_flags
from .presets import DEFAULT_PRESET, PRESETS, preset_spec

__all__ = ["main", "build_parser", "interrupted_line", "spec_of_flags"]

PROGRESS_CHOICES = ("auto", "bar", "lines", "off")
# Options a resume takes from its own command line; the rest comes from the run's config.json.
RESUME_OPTIONS = {"--resume", "--progress", "--total-steps", "--timesteps", "--minutes"}


def build_parser(algo: str) -> argparse.ArgumentParser:
    """Parser with the run options plus every field of `algo`'s config as a flag."""
    entry = get_algorithm(algo)
    cfg_cls = entry.config
    p = argparse.ArgumentParser(
        prog="jaxrl-train", description=__doc__.split("\n\n")[0],
        formatter_class=ConfigHelpFormatter)
    run = p.add_argument_group("run")
    run.add_argument("--algo", choices=sorted([*ALGORITHMS, *ALIASES]), default="ppo",
                     help="algorithm (ippo_lag: ippo_lagrangian)")
    run.add_argument("--env", default=entry.default_env,
                     help="environment factory as module:factory (IPPO: a functional "
                          "multi-agent core, compiled, or a PettingZoo ParallelEnv)")
    run.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                     help="keyword option of the env factory (repeatable; VALUE parsed as JSON)")
    run.add_argument("--seed", type=int, default=123, help="random seed")
    run.add_argument("--seeds", type=int, nargs="+", default=None, metavar="N",
                     help="several seeds trained together in one compiled program (overrides --seed)")
    presets = PRESETS[canonical_name(algo)]
    from ..stages.recipes import RECIPES

    recipes = RECIPES if entry.fine_tunes else {}
    run.add_argument("--preset", choices=sorted([*presets, *recipes]), default=DEFAULT_PRESET,
                     help="starting point of the run: " + "; ".join(
                         f"{n}: {p.summary} ({p.total_steps:,} steps)"
                         for n, p in sorted(presets.items())) + "".join(
                         f"; {n} (staged, its own algorithms; takes --seed, --env, --env-option, "
                         f"--out, --tag, --minutes): {r.summary} (up to {r.total_steps:,} steps)"
                         for n, r in sorted(recipes.items())))
    run.add_argument("--total-steps", "--timesteps", dest="total_steps", type=int, default=None,
                     help="environment steps (default: the preset's)")
    run.add_argument("--eval-every", type=int, default=None,
                     help="environment steps between deterministic evaluations (default: the "
                          "preset's; demo, fast and paper evaluate after every update)")
    run.add_argument("--report-every", type=int, default=None,
                     help="environment steps between printed evaluation lines (default: about "
                          "25 over the run; a new best below a power of ten is always printed)")
    run.add_argument("--checkpoint-every", type=int, default=25, help="updates between checkpoints")
    run.add_argument("--out", default="runs", help="parent directory of run directories")
    run.add_argument("--tag", default="", help="suffix of the run directory name")
    run.add_argument("--progress", choices=PROGRESS_CHOICES, default="auto",
                     help="progress display (auto: one live status line when stdout is a "
                          "terminal, plain lines otherwise; bar: the live line)")
    run.add_argument("--minutes", type=float, default=None, metavar="M",
                     help="wall-clock budget of this command: stop at the first block boundary "
                          "(an evaluation, a checkpoint, or every 4 updates) after M minutes, on a "
                          "checkpoint (--resume RUN continues it "
                          "bit-identically)")
    run.add_argument("--tensorboard", action="store_true",
                     help="also write TensorBoard event files into RUN/tensorboard/ (evaluation "
                          "fields, losses, KL, entropy or std, steps/s against env steps; needs "
                          "the extra jaxrl-agents[tensorboard]); a resume keeps writing them")
    run.add_argument("--init-from", metavar="DIR", default=None,
                     help="start every seed from this run's best policy (or a policy directory): "
                          "a fine-tuning phase with its own config, optimiser and run directory; "
                          "the policy's learned std is kept (a preset's log_std_init does not "
                          "apply), and only a typed nonzero --log-std-init replaces it")
    run.add_argument("--spec", metavar="FILE.json", default=None,
                     help="run the RunSpec in FILE.json (jaxrl_agents.run.spec: algo, env, "
                          "env_options, config, seeds, cadences, out, tag, ...); only "
                          "--progress and --minutes may be typed beside it")
    run.add_argument("--resume", metavar="RUN_DIR", default=None,
                     help="continue an interrupted run from its last checkpoint (other options "
                          "are taken from its config.json; --total-steps extends its budget)")
    run.add_argument("--compile-cache", metavar="DIR", default=None,
                     help="JAX's persistent compilation cache: a later run with the same config "
                          "(another seed, a resume) loads its programs instead of compiling them "
                          "(default: $JAXRL_COMPILE_CACHE, else JAX_COMPILATION_CACHE_DIR as JAX "
                          "reads it, else ~/.cache/jaxrl-agents/jax; 'off': none). It applies to "
                          "this command only; the run's results are the same bits either way")
    changes = "; ".join(f"{n}: " + ", ".join(f"{k}={v}" for k, v in sorted(pr.config.items()))
                        for n, pr in sorted(presets.items()) if pr.config)
    fields = p.add_argument_group(
        f"{algo} config ({cfg_cls.__name__})",
        "defaults below are the paper's (--preset paper)" + (
            f"; the other presets change them ({changes})" if changes else ""))
    from ..common.networks.mlp import ACTIVATIONS

    add_config_flags(fields, cfg_cls, skip=("total_steps",), activation_choices=sorted(ACTIVATIONS))
    return p


def interrupted_line(e: KeyboardInterrupt) -> str:
    """What ``jaxrl-train`` prints on Ctrl-C: where the run stands and the command that continues it."""
    from ..terminal.commands import suggest

    run_dirs = getattr(e, "run_dirs", None)
    if not run_dirs:
        return "jaxrl-train: interrupted before the run started (nothing was written)"
    step = getattr(e, "checkpoint_step", 0)
    if not step:
        return (f"jaxrl-train: interrupted before the first checkpoint of {run_dirs[0]}: "
                f"nothing to resume; start the run again")
    return (f"jaxrl-train: interrupted; {run_dirs[0]} resumes from its checkpoint at step "
            f"{step:,} (bit-identically): {suggest(['jaxrl-train', '--resume', run_dirs[0]]).text}")


# Options that may be typed beside --spec FILE: how this command shows and limits the run.
SPEC_OPTIONS = {"--spec", "--progress", "--minutes"}


def _typed_options(argv: list[str], allowed: set[str], prefix: str) -> tuple[list[str], list[str]]:
    """(every option typed in `argv`, those not in `allowed`), as typed (``--x=1`` as ``--x``).

    An option is an argument that starts with `prefix`.
    """
    typed = [a.split("=")[0] for a in argv if a.startswith(prefix)]
    return typed, [a for a in typed if a not in allowed]


def _spec_file(path: str, argv: list[str]):
    """The `RunSpec` of ``--spec FILE``, after refusing flags that would contradict it.

    Raises:
        ValueError: a run flag typed beside it, or the file unreadable or not a valid spec; one
            line naming the file.
    """
    from ..run.spec import RunSpec

    typed, others = _typed_options(argv, SPEC_OPTIONS, "-")
    if others:
        raise ValueError(f"--spec {path}: the run's settings come from {path}; drop {others} "
                         f"(or change them in the file); only --progress and --minutes apply "
                         f"beside it")
    spec = RunSpec.load(path)
    if "--minutes" in typed and spec.time_budget is not None:
        raise ValueError(f"--spec {path}: the file sets time_budget ({spec.time_budget:g} s); "
                         f"drop --minutes or remove time_budget from the file")
    return spec


def spec_of_flags(args: argparse.Namespace):
    """The `RunSpec` of ``jaxrl-train``'s flags: the preset, then every typed field over it.

    Raises:
        ValueError: a preset, field or run option that fails its check (named).
    """
    typed = {f.name: getattr(args, f"cfg_{f.name}")
             for f in dataclasses.fields(get_algorithm(args.algo).config)
             if f.name != "total_steps" and getattr(args, f"cfg_{f.name}") is not None}
    return preset_spec(
        args.algo, args.preset, typed, total_steps=args.total_steps, eval_every=args.eval_every,
        init_from=args.init_from, env=args.env, env_options=parse_env_options(args.env_option),
        seeds=tuple(args.seeds) if args.seeds is not None else (args.seed,),
        checkpoint_every=args.checkpoint_every, report_every=args.report_every, out=args.out,
        tag=args.tag, tensorboard=args.tensorboard)


def _without_option(argv: list[str], option: str) -> list[str]:
    """`argv` without `option` and its value (typed as ``OPT VALUE`` or ``OPT=VALUE``)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            out.append(arg)
    return out


def _is_staged_run(path: str) -> bool:
    from ..stages.staged_run import is_staged_run

    return is_staged_run(path)


def main(argv: list[str] | None = None, record_argv: list[str] | None = None) -> int:
    """Entry point of ``jaxrl-train``. Returns the process exit code.

    Args:
        argv: the arguments (default: the command line's).
        record_argv: the command line a new run's config.json records (default: ``jaxrl-train``
            and `argv`). A campaign runs ``--spec FILE`` with the flags that build the same
            spec here, so its summaries show a command a reader can type.
    """
    started = time.monotonic()  # --minutes counts from here: what the user waits for
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--algo", default="ppo")
    pre.add_argument("--resume", default=None)
    pre.add_argument("--preset", default=None)
    pre.add_argument("--spec", default=None)
    pre.add_argument("--compile-cache", default=None)
    known, _ = pre.parse_known_args(argv)
    # How this machine compiles, not what the run is: no run file records it, so it is taken out
    # here and every later check of the typed options (a resume's, a recipe's, --spec's) never
    # sees it.
    argv = _without_option(argv, "--compile-cache")
    spec = None
    if known.spec is not None:  # the file says what the run is; the flags may not say otherwise
        try:
            spec = _spec_file(known.spec, argv)
        except ValueError as e:
            print(f"jaxrl-train: error: {e}", file=sys.stderr)
            return 2
        known.algo = spec.algo
    from ..stages.cli import is_recipe, staged_main

    if is_recipe(known.preset) or known.resume is not None and _is_staged_run(known.resume):
        # a recipe of stages, each an ordinary run
        return staged_main(argv, started, compile_cache=known.compile_cache)
    if canonical_name(known.algo) not in ALGORITHMS:
        print(f"jaxrl-train: error: --algo: expected one of {sorted(ALGORITHMS)}, got "
              f"{known.algo!r}", file=sys.stderr)
        return 2
    parser = build_parser(known.algo)
    args = parser.parse_args(argv)
    progress = None if args.progress == "auto" else args.progress
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        print(f"jaxrl-train: error: --minutes: expected a positive number of minutes, got "
              f"{args.minutes!r}", file=sys.stderr)
        return 2
    if spec is not None and spec.time_budget is not None:  # the file's budget is this command's
        args.minutes = spec.time_budget / 60

    from ..run import trainer  # imported late: `--help` stays instant
    from ..run.host import small_loops
    from ..run.host.compile_cache import configure_for_command
    from ..run.run_files import RUN_CONFIG
    from ..run.session import plan_run

    # The budget left after parsing; spent already (a tiny --minutes), the run still trains one
    # update: the loop checks the deadline after each update, never before the first.
    budget = (None if args.minutes is None
              else max(1e-9, 60 * args.minutes - (time.monotonic() - started)))
    try:
        # Both before JAX's backend starts: XLA reads its flags once (the cache probe's key too).
        small_loops.configure_for_command(None if args.resume is None
                                          else os.path.join(args.resume, RUN_CONFIG))
        configure_for_command(known.compile_cache, "jaxrl-train")  # before anything compiles
        if args.resume is not None:
            typed, others = _typed_options(argv, RESUME_OPTIONS, "--")
            if others:
                # --tensorboard included: config.json says whether the run writes event files.
                raise ValueError(f"--resume: takes its settings from the run's config.json "
                                 f"(only --total-steps may extend it; --minutes and --progress "
                                 f"apply to this command); drop {others}")
            extend = args.total_steps if {"--total-steps", "--timesteps"} & set(typed) else None
            result = trainer.resume(args.resume, progress=progress, total_steps=extend,
                                    time_budget=budget)
        else:
            if spec is None:
                spec = spec_of_flags(args)
            if args.minutes is not None and spec.time_budget is None:
                spec = spec.replace(time_budget=60 * args.minutes)  # recorded in config.json
            plan = plan_run(spec, progress=progress,
                            argv=["jaxrl-train", *argv] if record_argv is None else record_argv)
            if plan.steps_from_python:  # IPPO on a ParallelEnv: one call, no checkpoints
                from .parallel_env_run import train_parallel

                result = train_parallel(plan)
            else:
                result = trainer.train_planned(plan, time_budget=budget)
    except ValueError as e:  # bad input, a corrupt run file, a run directory in use
        print(f"jaxrl-train: error: {e}", file=sys.stderr)
        return 2
    except trainer.NonFiniteError as e:
        print(f"jaxrl-train: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C: one line, and how to go on (exit 130, as a shell's)
        print(interrupted_line(e), file=sys.stderr, flush=True)
        return 130
    except OSError as e:  # --out not writable, a full disk: atomic writes lost nothing
        print(f"jaxrl-train: error: {describe_os_error(e)} (every file written before is "
              f"intact)", file=sys.stderr)
        return 1
    from .run_summary import summary_block

    print(summary_block(result.run_dirs, result.rows, result.best, result.finished,
                        args.minutes if not result.finished else None), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
