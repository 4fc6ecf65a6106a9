"""What a run returns (`TrainResult`), how it stops on non-finite values (`NonFiniteError`) or Ctrl-C."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["TrainResult", "NonFiniteError", "TrainingInterrupted"]


@dataclasses.dataclass
class TrainResult:
    """What `train` / `resume` return.

    Attributes:
        run_dirs: one run directory per seed.
        state: final `TrainState` with leaves stacked over seeds (numpy).
        rows: per seed, the progress rows (dicts of strings, as written to progress.csv).
        finished: False if stopped early by ``stop_after``.
        best: per seed, the environment's evaluation line of its best evaluation and the step
            it was made at (``minJT=3.1e-03@17.3ns  firstPE=9.10ns  1-U=2.0e-03 at step
            2457600`` for the gate env), or None where the run has no best evaluation on record.
    """

    run_dirs: list[str]
    state: Any
    rows: list[list[dict[str, str]]]
    finished: bool
    best: list[str | None] = dataclasses.field(default_factory=list)


class NonFiniteError(FloatingPointError):
    """An update produced non-finite parameters, optimiser state or losses; the run was stopped.

    Nothing of the failed update was written: ``checkpoint.npz`` is the last finite state.

    Attributes:
        update: the 1-based index of the update that went wrong.
        step: environment steps at its end.
        seeds: the seeds whose state became non-finite.
        checkpoint_update: the update of the checkpoint kept on disk (0: none was written yet).
        run_dirs: the run directories of the group.
    """

    def __init__(self, message: str, update: int, step: int, seeds: list[int],
                 checkpoint_update: int, run_dirs: list[str]):
        super().__init__(message)
        self.update, self.step, self.seeds = update, step, seeds
        self.checkpoint_update, self.run_dirs = checkpoint_update, run_dirs



class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) while a run trained: where it stands, so the command can say how to go on.

    A KeyboardInterrupt still (``except KeyboardInterrupt`` catches it). Every file on disk is
    whole (atomic writes); the updates after the last checkpoint are recomputed by a resume, bit
    for bit.

    Attributes:
        run_dirs: the run directories of the group (or the staged run's directory).
        checkpoint_step: environment steps of the checkpoint a resume starts from (0: none yet:
            the run must start again).
    """

    def __init__(self, run_dirs: list[str], checkpoint_step: int):
        super().__init__(f"interrupted; checkpoint at step {checkpoint_step}")
        self.run_dirs, self.checkpoint_step = list(run_dirs), checkpoint_step
