"""RunDir: the one reader of a run directory (what a run is, how far it got, what it found).

The trainer writes a run directory (`trainer` module docstring: config.json, progress.csv,
evals.npz, checkpoint.npz, best_policy/, last_policy/); everything that reads one afterwards goes
through `RunDir`: ``jaxrl-plot``, the sweep's summary, a staged run's timeline, the campaign and
quantgate-analysis' pages. It reads with the trainer's own format checks (`run_files`,
`checkpoint`), so a corrupt file is named, never a raw traceback, and it never writes.

    rd = RunDir("runs/ppo_20250101-120000_s1")
    rd.config                 # config.json (checked as a resume checks it; rd.record: as written)
    rd.spec                   # RunSpec (config.json, also one written before RunSpec existed)
    rd.status()               # RunStatus: finished / interrupted / incomplete, steps of budget,
                              #   and who holds the directory when a process is running it
    rd.rows()                 # progress.csv rows (strings, as written)
    rd.evaluations()          # evals.npz arrays (None before the first evaluation)
    rd.best_policy            # path of best_policy/ (None before the first evaluation)
    rd.to_threshold(1e-3)     # Crossing: steps and wall seconds to the first score past 1e-3

The score is the environment's declared evaluation score (config.json's ``"evaluation"``, written
from `common.contracts.describe_evaluation`): its field (progress.csv column ``eval_<field>``) and
whether lower or higher is better.

`attempt_dirs` lists the runs a restart rule set aside beside one (``<run>.attempt-<n>``);
`set_aside_dirs` those and the runs set aside because they died before their first checkpoint
(``<run>.incomplete-<n>``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..common.fileio import load_npz, lock_holder
from .run_files import (
    CHECKPOINT,
    EVALS_NPZ,
    PROGRESS_CSV,
    RUN_CONFIG,
    read_json_object,
    read_progress,
    read_run_config,
)

__all__ = ["RunDir", "RunStatus", "Crossing", "GENERIC_EVALUATION", "to_float", "ATTEMPT_MARK",
           "INCOMPLETE_MARK", "attempt_dirs", "set_aside_dirs"]

#: The evaluation of an environment that describes none (and of run directories written before
#: config.json recorded it): the episode return, higher is better.
GENERIC_EVALUATION: Mapping[str, Any] = {"score": "return", "score_mode": "max", "plots": {}}

#: A failed attempt a restart rule set aside is renamed ``<run>.attempt-<n>`` in its folder (kept).
ATTEMPT_MARK = ".attempt-"
#: A run that died before its first checkpoint is renamed ``<run>.incomplete-<n>`` (kept) when
#: it is started again (a campaign does this).
INCOMPLETE_MARK = ".incomplete-"


def to_float(text) -> float:
    """A progress.csv cell as a float (NaN for an empty, missing or unreadable cell)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


@dataclasses.dataclass(frozen=True)
class RunStatus:
    """How far a run got.

    Attributes:
        state: ``"finished"`` (the checkpoint reached the budget), ``"interrupted"`` (a
            checkpoint short of it: ``jaxrl-train --resume`` continues) or ``"incomplete"`` (no
            checkpoint: stopped before the first, or a run that cannot checkpoint and did not end).
        steps: environment steps done (the checkpoint's; progress.csv may hold rows past it, which
            a resume recomputes).
        budget: environment steps of the whole run (whole updates).
        holder: ``"process N"`` while a process holds the directory's lock (a run training or
            resuming it), else None.
    """

    state: str
    steps: int
    budget: int
    holder: str | None = None

    @property
    def running(self) -> bool:
        """Whether a process holds the run directory now."""
        return self.holder is not None

    @property
    def label(self) -> str:
        """``"running"`` while locked, else `state`."""
        return "running" if self.running else self.state


@dataclasses.dataclass(frozen=True)
class Crossing:
    """The first evaluation past a threshold.

    Attributes:
        step: environment steps when it was evaluated.
        wall: seconds of training by then (progress.csv's ``wall``).
        score: its score, in the environment's own sign.
    """

    step: int
    wall: float
    score: float


class RunDir:
    """A run directory, read on demand (nothing is read when it is built; it never writes).

    Args:
        path: the run directory.
        fallback_evaluation: the evaluation description of a run directory whose config.json
            records none (written before it did, or unreadable): `GENERIC_EVALUATION` unless the
            caller knows its runs (quantgate's are scored by ``JT_min``, lower is better).
    """

    def __init__(self, path: str | os.PathLike, fallback_evaluation: Mapping[str, Any] = GENERIC_EVALUATION):
        self.path = os.fspath(path)
        self._fallback = dict(fallback_evaluation)

    def __repr__(self) -> str:
        return f"RunDir({self.path!r})"

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def name(self) -> str:
        """The directory's name (``<algo>_<stamp>_s<seed>[_<tag>]``)."""
        return os.path.basename(os.path.normpath(self.path))

    # ------------------------------------------------------------------------- config.json
    @functools.cached_property
    def config(self) -> dict[str, Any]:
        """config.json as written, checked as a resume checks it (`run_files.read_run_config`).

        Raises:
            ValueError: not a run directory, or config.json unreadable or missing a key (named).
        """
        path = self._file(RUN_CONFIG)
        if not os.path.isfile(path):
            raise ValueError(f"{self.path}: not a run directory (no {RUN_CONFIG})")
        return read_run_config(path)

    @functools.cached_property
    def record(self) -> dict[str, Any]:
        """config.json as written, only checked to be a JSON object.

        Also a run that steps its environment from Python, whose config.json has no seed group.

        Raises:
            ValueError: no config.json, or not a JSON object (named).
        """
        path = self._file(RUN_CONFIG)
        if not os.path.isfile(path):
            raise ValueError(f"{self.path}: not a run directory (no {RUN_CONFIG})")
        return read_json_object(path)

    @functools.cached_property
    def spec(self):
        """The run's `spec.RunSpec` (`RunSpec.from_run_config`).

        Raises:
            ValueError: as `config`, or a recorded value fails its check (the file named).
        """
        from .spec import RunSpec

        try:
            return RunSpec.from_run_config(self.config)
        except ValueError as e:
            raise ValueError(f"{self._file(RUN_CONFIG)}: {e}") from None

    @functools.cached_property
    def evaluation(self) -> dict[str, Any]:
        """config.json's ``"evaluation"`` (score, score_mode, plots), or the fallback.

        Lenient: a missing or unreadable config.json gives the fallback, so a plot of a damaged
        run still draws what it can.
        """
        try:
            desc = read_json_object(self._file(RUN_CONFIG)).get("evaluation")
        except (OSError, ValueError):
            desc = None
        return desc if isinstance(desc, dict) else dict(self._fallback)

    @property
    def score_field(self) -> str:
        """The evaluation field the run ranks its policies by (``"JT_min"``, ``"return"``)."""
        return self.evaluation.get("score", self._fallback.get("score", "return"))

    @property
    def score_mode(self) -> str:
        """``"min"`` or ``"max"``: whether a lower or a higher score is better."""
        return self.evaluation.get("score_mode", self._fallback.get("score_mode", "max"))

    @property
    def score_column(self) -> str:
        """The progress.csv column of the score (``eval_<score_field>``)."""
        return f"eval_{self.score_field}"

    # ------------------------------------------------------------------------- status
    def status(self) -> RunStatus:
        """How far the run got (`RunStatus`), from config.json and the checkpoint's header.

        Raises:
            ValueError: config.json or the checkpoint unreadable (named).
        """
        from .algorithms import make_config
        from .checkpoint import read_checkpoint

        rc = self.record
        holder = lock_holder(self.path)
        if rc.get("checkpointed") is False:  # IPPO on a ParallelEnv: no checkpoint, no resume
            budget = int(rc.get("timesteps") or rc["algo_config"]["total_steps"])
            rows = self.rows()
            done = int(rows[-1]["step"]) if rows else 0
            return RunStatus("finished" if done >= budget else "incomplete", done, budget, holder)
        rc = self.config
        cfg = make_config(rc["algo"], rc["algo_config"])
        budget = cfg.n_updates * cfg.rollout_size
        ckpt = self._file(CHECKPOINT)
        if not os.path.isfile(ckpt):
            return RunStatus("incomplete", 0, budget, holder)
        _, header = read_checkpoint(ckpt)
        done = int(header["meta"]["step"])
        return RunStatus("finished" if done >= budget else "interrupted", done, budget, holder)

    # ------------------------------------------------------------------------- records
    def rows(self) -> list[dict[str, str]]:
        """progress.csv's rows as strings, empty cells left out ([] if there is none yet).

        Raises:
            ValueError: the file is not a progress table (named, with the row).
        """
        return read_progress(self._file(PROGRESS_CSV))

    def scores(self) -> list[tuple[int, float, float]]:
        """(step, wall s, score) of every evaluated row with a number for the score, in order."""
        out = []
        for r in self.rows():
            score = to_float(r.get(self.score_column))
            if not math.isnan(score):
                out.append((int(r["step"]), to_float(r.get("wall")), score))
        return out

    def evaluations(self) -> dict[str, np.ndarray] | None:
        """evals.npz: ``step`` (E,) and per-step records (E, T, ...) of every evaluation episode.

        Returns None before the first evaluation (no file).

        Raises:
            ValueError: the file is not a readable .npz archive (named).
        """
        path = self._file(EVALS_NPZ)
        if not os.path.isfile(path):
            return None
        return load_npz(path)

    @property
    def best_policy(self) -> str | None:
        """The path of ``best_policy/`` (the best evaluation's policy), or None if none yet."""
        from ..common.policy import BEST_POLICY_DIR  # late: reading a run needs no JAX

        path = self._file(BEST_POLICY_DIR)
        return path if os.path.isdir(path) else None

    def best(self) -> tuple[int, float] | None:
        """(step, score) of the best evaluation in progress.csv (the earliest of equals), or None."""
        scores = self.scores()
        if not scores:
            return None
        sign = 1.0 if self.score_mode == "min" else -1.0
        step, _, score = min(scores, key=lambda s: sign * s[2])
        return step, score

    def to_threshold(self, threshold: float) -> Crossing | None:
        """The first evaluation strictly past `threshold`, with its steps and wall time.

        Past is below `threshold` for a score to minimise, above it for one to maximise.

        Args:
            threshold: a score in the environment's own units (e.g. J_T = 1e-3).

        Returns:
            The `Crossing`, or None if no evaluation is past `threshold` yet.
        """
        below = self.score_mode == "min"
        for step, wall, score in self.scores():
            if (score < threshold) if below else (score > threshold):
                return Crossing(step, wall, score)
        return None

    def verdict(self, threshold: float, within_steps: int) -> str:
        """Whether the run got past `threshold` within `within_steps` steps (an early test).

        Returns:
            ``"pass"`` (an evaluation at or before `within_steps` is past it), ``"fail"`` (the
            rows reached `within_steps` without one), or ``"open"`` (not decided yet).
        """
        below = self.score_mode == "min"
        for r in self.rows():
            step = to_float(r.get("step"))
            if step > within_steps:
                return "fail"
            score = to_float(r.get(self.score_column))
            if (score < threshold) if below else (score > threshold):
                return "pass"
            if step == within_steps:
                return "fail"
        return "open"


def attempt_dirs(parent: str) -> list[str]:
    """The failed attempts a restart rule set aside in `parent` (``*.attempt-<n>``), in order."""
    if not os.path.isdir(parent):
        return []
    found = [e.path for e in os.scandir(parent) if e.is_dir() and ATTEMPT_MARK in e.name]
    return sorted(found, key=lambda p: int(p.rsplit(ATTEMPT_MARK, 1)[1]))


def set_aside_dirs(parent: str) -> list[str]:
    """Every run set aside in `parent`: failed attempts and never-checkpointed runs alike, sorted.

    A folder holding any of them has this machine's history of a run, even when no live run
    directory is left in it.
    """
    if not os.path.isdir(parent):
        return []
    return sorted(e.path for e in os.scandir(parent)
                  if e.is_dir() and (INCOMPLETE_MARK in e.name or ATTEMPT_MARK in e.name))
