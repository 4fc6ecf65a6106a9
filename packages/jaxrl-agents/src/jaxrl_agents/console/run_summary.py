"""The block ``jaxrl-train`` prints when a run stops: what it did, where it is, what to run next.

::

    run finished: 4,505,600 of 4,505,600 steps in 4m41s (16,030 steps/s, compilation included)
      best   minJT=3.1e-03@17.3ns  firstPE=9.10ns  1-U=2.0e-03 at step 2457600
      run    runs/ppo_20260101-120000_s123
      files  best_policy/  checkpoint.npz  config.json  evals.npz  last_policy/  progress.csv
      plot   uv run --extra plot jaxrl-plot runs/ppo_20260101-120000_s123

A run stopped by ``--minutes`` says so and adds the command that continues it; a run with
``--tensorboard`` adds the command that shows its curves. Each command comes from `commands.py`,
spelled for the tool that started this process (uv or pip), and `next_commands` returns them as
argument lists so that a test can parse them with the real parsers.
"""

from __future__ import annotations

import json
import os

from ..run.algorithms import make_config
from ..run.run_files import RUN_CONFIG
from ..run.tensorboard import TENSORBOARD_DIR
from ..terminal.commands import Suggestion, suggest, suggest_viewer
from ..terminal.progress import format_duration

__all__ = ["summary_block", "next_commands"]

_HIDDEN = (".lock",)  # the run-directory lock file: no file of the user's


def _config(run_dir: str) -> dict:
    """config.json as written (every kind of run: also IPPO on a ParallelEnv, which has no group)."""
    with open(os.path.join(run_dir, RUN_CONFIG), encoding="utf-8") as f:
        return json.load(f)


def _files(run_dir: str) -> str:
    names = sorted(os.listdir(run_dir))
    return "  ".join(n + "/" if os.path.isdir(os.path.join(run_dir, n)) else n
                     for n in names if n not in _HIDDEN)


def next_commands(run_dir: str, finished: bool, minutes: float | None = None
                  ) -> list[tuple[str, Suggestion]]:
    """The commands to suggest after a run: ``[(label, Suggestion), ...]``.

    Args:
        run_dir: the run directory (as the user named it: the commands repeat it verbatim).
        finished: whether the run trained its whole budget.
        minutes: the ``--minutes`` budget the run stopped at (repeated in the resume command).
    """
    out = [("plot", suggest(["jaxrl-plot", run_dir], extra="plot"))]
    if os.path.isdir(os.path.join(run_dir, TENSORBOARD_DIR)):
        # The parent: TensorBoard lists every run beside this one, to compare them.
        out.append(("curves", suggest_viewer(os.path.dirname(os.path.normpath(run_dir)) or ".")))
    if not finished:
        again = ["--minutes", f"{minutes:g}"] if minutes is not None else []
        out.append(("resume", suggest(["jaxrl-train", "--resume", run_dir, *again])))
    return out


def summary_block(run_dirs: list[str], rows: list[list[dict[str, str]]],
                  best: list[str | None], finished: bool,
                  minutes: float | None = None) -> str:
    """The final block of ``jaxrl-train`` for a seed group (see the module docstring).

    Args:
        run_dirs: the group's run directories.
        rows: per seed, its progress rows (`TrainResult.rows`).
        best: per seed, its best evaluation line (`TrainResult.best`).
        finished: whether the run trained its whole budget.
        minutes: the ``--minutes`` budget, when the run stopped at it.
    """
    rc = _config(run_dirs[0])
    try:  # whole updates: what the run trains
        cfg = make_config(rc["algo"], rc["algo_config"])
        total = cfg.n_updates * cfg.rollout_size
    except (ValueError, AttributeError, KeyError):  # a run kind without updates of fixed size
        total = rc["algo_config"].get("total_steps", 0)
    last = rows[0][-1] if rows and rows[0] else {"step": "0", "wall": "0"}
    step, wall = int(last["step"]), float(last["wall"])
    rate = f" ({step / wall:,.0f} steps/s, compilation included)" if wall > 0 else ""
    head = ("run finished" if finished else
            f"stopped at the time budget (--minutes {minutes:g})" if minutes is not None else
            "stopped")
    lines = [f"{head}: {step:,} of {total:,} steps in {format_duration(wall)}{rate}"]
    several = len(run_dirs) > 1
    for d, b in zip(run_dirs, best or [None] * len(run_dirs)):
        seed = _config(d)["seed"] if several else None
        if several:
            lines.append(f"  seed {seed}")
        lines.append(f"  best   {b or 'no evaluation recorded'}")
        lines.append(f"  run    {d}")
        lines.append(f"  files  {_files(d)}")
        for label, cmd in next_commands(d, finished, minutes):
            lines.append(f"  {label:<6} {cmd.text}")
    return "\n".join(lines)
