"""TensorBoard event files of a run (``jaxrl-train --tensorboard``), written with tensorboardX.

Each seed's run directory gets ``tensorboard/`` with one event file per process that trained it.
Every progress row becomes scalars against environment steps (the row's ``step``):

- ``eval/<field>``: the evaluation fields the row carries (``eval_return``, ``eval_len`` and every
  field of the environment's own evaluation summary, ``env.evaluation``), on evaluation rows;
- ``train/<stat>``: every statistic of the update (losses, KL, clip fraction, entropy, std, the
  learning rate, ...; IPPO's per-agent ``<agent>/<stat>`` columns as ``train/<agent>/<stat>``);
- ``time/steps_per_s``: environment steps per second of wall-clock over the update, from the
  second update a process trains on (the first one includes compilation).

The rows are the ones progress.csv records, so the agents stay gate-agnostic: what the environment
describes is what is plotted. tensorboardX needs numpy and protobuf only (no TensorFlow, no torch);
it is the optional extra ``jaxrl-agents[tensorboard]``.

**Resume.** Events are written as the run goes (flushed every `FLUSH_SECS` seconds and before each
checkpoint is written, so every step up to a checkpoint is on disk when the checkpoint is), which
means a run killed after its last checkpoint leaves events of steps that the resume computes again.
The resumed process opens a new event file that starts with a ``SessionLog.START`` at the
checkpoint's step + 1 (tensorboardX's ``purge_step``): TensorBoard's loaders (its default data
server, ``event_accumulator``) then drop every event of a larger step written before it, so each
curve continues from the checkpoint with no step twice. A reader that ignores that marker (the
application's ``--load_fast=false`` path, measured) sees those steps twice with the same values (a
resume is bit-identical), except ``time/steps_per_s``.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os

from ..terminal.commands import install_extra

__all__ = ["TENSORBOARD_DIR", "FLUSH_SECS", "require_tensorboardx", "row_scalars",
           "TensorBoardLog"]

TENSORBOARD_DIR = "tensorboard"  # inside each run directory
FLUSH_SECS = 10  # a live TensorBoard sees new points at least this often

_OPENED = itertools.count()  # event files this process opened
_NOT_SCALARS = ("step", "update", "wall")  # the x axis, its index, and TensorBoard's own clock


def require_tensorboardx(argument: str = "tensorboard", command: list[str] | None = None) -> None:
    """Raise ValueError naming `argument` if tensorboardX is not installed.

    Called where the arguments are checked: before a run directory exists or anything compiles.

    Args:
        argument: what asked for TensorBoard files (the message's first words).
        command: the command to run once the extra is installed (the hint repeats it: for a
            resume, the resume, not a new run); default ``jaxrl-train --tensorboard``.
    """
    if importlib.util.find_spec("tensorboardX") is None:
        command = ["jaxrl-train", "--tensorboard"] if command is None else command
        raise ValueError(f"{argument}: TensorBoard files need tensorboardX, the extra "
                         f"jaxrl-agents[tensorboard]; install it with: "
                         f"{install_extra('tensorboard', command)}")


def row_scalars(row: dict[str, str]) -> dict[str, float]:
    """The TensorBoard scalars of one progress row: ``{tag: value}`` (see the module docstring).

    Empty cells (fields an evaluation row has and others lack) and non-finite values (a
    first-entangler time before there is one) give no scalar: a gap in the curve, where
    tensorboardX would print a warning for each.
    """
    out = {}
    for name, text in row.items():
        if name in _NOT_SCALARS or text == "":
            continue
        try:
            value = float(text)
        except ValueError:  # not a number: nothing to plot
            continue
        if not math.isfinite(value):
            continue
        if name.startswith("eval_"):
            out[f"eval/{name[5:]}"] = value
        else:
            out[f"train/{name}"] = value
    return out


class TensorBoardLog:
    """The event file one process writes for one seed's run directory.

    Args:
        run_dir: the seed's run directory (events go to ``run_dir/tensorboard/``).
        resume_step: environment steps of the checkpoint the process resumed from; None for a new
            run. Events of larger steps written before are dropped by TensorBoard's loader.
    """

    def __init__(self, run_dir: str, resume_step: int | None = None):
        from tensorboardX import SummaryWriter

        # tensorboardX names a file by the second it opens it and the host: a resume within the
        # same second (in one process: a session reopened) would append to the file it purges.
        # The pid and a per-process count keep the files apart and, within a process, in order
        # (TensorBoard reads a directory's files in name order).
        self._writer = SummaryWriter(
            os.path.join(run_dir, TENSORBOARD_DIR), flush_secs=FLUSH_SECS,
            filename_suffix=f".{os.getpid()}.{next(_OPENED):04d}",
            purge_step=None if resume_step is None else resume_step + 1)
        self._previous: tuple[int, float] | None = None  # (step, wall) of this process's last row

    def add_row(self, row: dict[str, str]) -> None:
        """Write the scalars of one progress row (strings, as in progress.csv)."""
        step, wall = int(row["step"]), float(row["wall"])
        for tag, value in row_scalars(row).items():
            self._writer.add_scalar(tag, value, step)
        if self._previous is not None and wall > self._previous[1]:
            rate = (step - self._previous[0]) / (wall - self._previous[1])
            if math.isfinite(rate):
                self._writer.add_scalar("time/steps_per_s", rate, step)
        self._previous = (step, wall)

    def flush(self) -> None:
        """Write every queued event to the file (before a checkpoint: see the module docstring)."""
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()
