"""One timeline over a staged run's attempts: steps and wall time from the start of the run.

Each attempt is an ordinary run directory whose ``step`` and ``wall`` columns start at zero. The
run's own clock puts them end to end in the order they ran, set-aside attempts included (their time
was spent), so "steps and wall time to J_T < 1e-4" counts everything a user waited for. Each
attempt's files are read through `run.rundir.RunDir`. An attempt of a population scores each update
by its best member; its steps are one member's (the members trained in the same updates).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from ..run.rundir import RunDir

__all__ = ["StagedResult", "TimelineRow", "timeline", "crossings", "staged_result", "score_of",
           "describe"]


@dataclasses.dataclass(frozen=True)
class TimelineRow:
    """One evaluated update of a staged run, on the run's clock.

    Attributes:
        step: environment steps since the run started (every attempt before it included).
        wall: seconds of training since the run started.
        score: the evaluation score of this update (the env's, to minimise).
        attempt: index of the attempt in staged_run.json's ``attempts``.
        row: the attempt's progress row (strings, as progress.csv holds them); for a
            population, the row of the member with the best score at this update.
    """

    step: int
    wall: float
    score: float
    attempt: int
    row: dict


def _score(row: dict, score_field: str, sign: float) -> float:
    v = row.get(score_field, "")
    return math.nan if v in ("", None) else sign * float(v)


def timeline(top: str, attempts: list[dict], score: str = "JT_min", score_mode: str = "min"
             ) -> list[TimelineRow]:
    """Every evaluated update of the run's attempts, in the order they ran.

    Args:
        top: the staged run's directory.
        attempts: staged_run.json's ``attempts`` entries.
        score: the env's evaluation score field (progress.csv column ``eval_<score>``).
        score_mode: ``"min"`` or ``"max"``; scores come back to minimise.

    Raises:
        ValueError: an attempt's progress.csv is unreadable (named).
    """
    sign = 1.0 if score_mode == "min" else -1.0
    out: list[TimelineRow] = []
    step0, wall0 = 0, 0.0
    for i, a in enumerate(attempts):
        # A population's members trained in one program: row k of each is the same update.
        members = [RunDir(os.path.join(top, d)).rows() for d in a.get("members") or [a["dir"]]]
        rows = members[0]
        for k, r in enumerate(rows):
            scored = [(_score(m[k], f"eval_{score}", sign), m[k]) for m in members if k < len(m)]
            scored = [(s, row) for s, row in scored if not math.isnan(s)]
            if scored:
                s, row = min(scored, key=lambda sr: sr[0])  # the update's best member
                out.append(TimelineRow(step0 + int(r["step"]), wall0 + float(r["wall"]), s, i,
                                       row))
        if rows:
            step0 += int(rows[-1]["step"])
            wall0 += float(rows[-1]["wall"])
    return out


def crossings(rows: list[TimelineRow], thresholds) -> dict[float, tuple[int, float] | None]:
    """For each threshold, (steps, wall s) of the first evaluation strictly below it, or None."""
    out: dict[float, tuple[int, float] | None] = {t: None for t in thresholds}
    for r in rows:
        for t in thresholds:
            if out[t] is None and r.score < t:
                out[t] = (r.step, r.wall)
    return out


@dataclasses.dataclass
class StagedResult:
    """What a staged run has done so far.

    Attributes:
        top: the staged run's directory.
        finished: whether every stage has ended.
        attempts: staged_run.json's ``attempts`` entries.
        steps: environment steps trained (every attempt).
        wall: seconds of training (every attempt).
        best: the best evaluation score (to minimise), or inf.
        best_row: its `TimelineRow` (None before the first evaluation).
        thresholds: threshold -> (steps, wall s) of its first crossing, or None; the recipe's
            thresholds plus its reference score.
    """

    top: str
    finished: bool
    attempts: list[dict]
    steps: int
    wall: float
    best: float
    best_row: TimelineRow | None
    thresholds: dict[float, tuple[int, float] | None]


def score_of(top: str, attempts: list[dict]) -> tuple[str, str]:
    """(score field, score mode) of the env the run trains on, from its first attempt's config.json.

    ("return", "max") before any attempt exists (the score of envs that describe none).
    """
    if not attempts:
        return "return", "max"
    first = RunDir(os.path.join(top, attempts[0]["dir"]))
    if first.config.get("evaluation") is None:  # checked: a damaged config.json is named
        return "return", "max"
    return first.score_field, first.score_mode


def staged_result(top: str, recipe, attempts: list[dict], finished: bool) -> StagedResult:
    """The `StagedResult` of a staged run from its records on disk."""
    rows = timeline(top, attempts, *score_of(top, attempts))
    thresholds = list(recipe.thresholds)
    if recipe.reference is not None and recipe.reference[0] not in thresholds:
        thresholds.append(recipe.reference[0])
    best_row = min(rows, key=lambda r: r.score) if rows else None
    steps = sum(int(a["steps"]) for a in attempts)
    wall = sum(float(a["wall"]) for a in attempts)
    return StagedResult(top, finished, attempts, steps, wall,
                        best_row.score if best_row else math.inf, best_row,
                        crossings(rows, sorted(thresholds, reverse=True)))


def describe(result: StagedResult, recipe) -> dict[str, Any]:
    """JSON-able figures of a result (for benches and summaries)."""
    return {"finished": result.finished, "steps": result.steps, "wall_s": result.wall,
            "best": result.best if math.isfinite(result.best) else None,
            "thresholds": {f"{t:g}": None if v is None else {"steps": v[0], "wall_s": v[1]}
                           for t, v in result.thresholds.items()},
            "attempts": len(result.attempts), "recipe": recipe.name}
