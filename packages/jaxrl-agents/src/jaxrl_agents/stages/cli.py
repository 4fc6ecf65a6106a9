"""``jaxrl-train --preset RECIPE`` and ``jaxrl-train --resume STAGED_RUN``: staged runs from the CLI.

A recipe sets every stage's algorithm and config, so its command takes only what a user chooses
about the run itself: the seed, the environment and its options, where the run goes, the progress
display and a ``--minutes`` budget. Any other flag is refused with a line that says so (it would
be ambiguous: which stage's learning rate?).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from .recipes import RECIPES

__all__ = ["staged_main", "is_recipe"]

PROGRESS_CHOICES = ("auto", "bar", "lines", "off")


def is_recipe(name) -> bool:
    """Whether `name` names a staged recipe (rather than a one-run preset)."""
    return isinstance(name, str) and name in RECIPES


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jaxrl-train", description="a staged run: the recipe's stages, one after another, "
        "in one run directory", add_help=False)
    p.add_argument("--preset", choices=sorted(RECIPES))
    p.add_argument("--resume", default=None)
    p.add_argument("--seed", type=int, default=123)
    p.add_argument("--env", default=None)
    p.add_argument("--env-option", action="append", default=[])
    p.add_argument("--out", default="runs")
    p.add_argument("--tag", default="")
    p.add_argument("--checkpoint-every", type=int, default=25)
    p.add_argument("--progress", choices=PROGRESS_CHOICES, default="auto")
    p.add_argument("--minutes", type=float, default=None)
    return p


_RUN_OPTIONS = {"--preset", "--seed", "--env", "--env-option", "--out", "--tag",
                "--checkpoint-every", "--progress", "--minutes"}
_RESUME_OPTIONS = {"--resume", "--progress", "--minutes"}


def staged_main(argv: list[str], started: float | None = None, compile_cache: str | None = None) -> int:
    """Run or resume a staged run from `argv` (``jaxrl-train``'s arguments). Returns the exit code.

    `compile_cache` is ``jaxrl-train --compile-cache``'s value (taken out of `argv` before).
    """
    started = time.monotonic() if started is None else started
    typed = [a.split("=")[0] for a in argv if a.startswith("--")]
    resuming = "--resume" in typed
    allowed = _RESUME_OPTIONS if resuming else _RUN_OPTIONS
    others = [a for a in typed if a not in allowed]
    if others:
        what = ("--resume of a staged run takes its settings from its staged_run.json (only "
                "--minutes and --progress apply to this command)" if resuming else
                "a staged preset sets every stage's algorithm and config; it takes "
                + ", ".join(sorted(_RUN_OPTIONS - {"--preset"})))
        print(f"jaxrl-train: error: {what}; drop {others}", file=sys.stderr)
        return 2
    args, _ = _parser().parse_known_args(argv)
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        print(f"jaxrl-train: error: --minutes: expected a positive number of minutes, got "
              f"{args.minutes!r}", file=sys.stderr)
        return 2
    progress = None if args.progress == "auto" else args.progress

    from ..common.envs import DEFAULT_ENV, parse_env_options
    from ..common.fileio import describe_os_error
    from ..run.results import NonFiniteError
    from .staged_run import STAGED_RUN_JSON, StagedRun
    from .summary import staged_summary_block

    budget = (None if args.minutes is None
              else max(1e-9, 60 * args.minutes - (time.monotonic() - started)))
    run = None
    try:
        from ..run.host import small_loops
        from ..run.host.compile_cache import configure_for_command

        # before the backend starts: a resume compiles under the threshold its stages recorded
        small_loops.configure_for_command(os.path.join(args.resume, STAGED_RUN_JSON) if resuming
                                          else None)
        configure_for_command(compile_cache, "jaxrl-train")  # before anything compiles
        if resuming:
            run = StagedRun.resume(args.resume, progress=progress)
        else:
            run = StagedRun.open(RECIPES[args.preset], args.seed, args.env or DEFAULT_ENV,
                                 parse_env_options(args.env_option), args.out, args.tag,
                                 args.checkpoint_every, progress, ["jaxrl-train", *argv])
        with run:
            result = run.advance(budget)
            fmt = run.evaluation_format()
    except ValueError as e:
        print(f"jaxrl-train: error: {e}", file=sys.stderr)
        return 2
    except NonFiniteError as e:
        print(f"jaxrl-train: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line, and the command that goes on (exit 130)
        from ..terminal.commands import suggest

        top = None if run is None else run.top
        print("jaxrl-train: interrupted before the run started (nothing was written)" if top is None
              else f"jaxrl-train: interrupted; the staged run resumes where its open stage last "
              f"checkpointed (bit-identically): "
              f"{suggest(['jaxrl-train', '--resume', top]).text}", file=sys.stderr, flush=True)
        return 130
    except OSError as e:
        print(f"jaxrl-train: error: {describe_os_error(e)} (every file written before is "
              f"intact)", file=sys.stderr)
        return 1
    print(staged_summary_block(result, run.recipe, fmt,
                               args.minutes if not result.finished else None), flush=True)
    return 0
