"""The block ``jaxrl-train`` prints when a staged run stops: the stages, the best beside the bar.

::

    staged run gate stopped at the time budget (--minutes 5): 4,505,600 steps in 5m01s over 1 of 2
    stages (2 attempts)
      stage 1 explore  ppo   attempt 1 set aside at 2,506,752 steps (best 2.30e-02, not < 0.01)
      stage 1 explore  ppo   attempt 2: 1,998,848 steps so far, best 8.10e-04
      best   minJT=8.100e-04@16.9ns  firstPE=5.25ns  1-U=1.1e-03 at step 1998848 of stage 1
             explore (4,505,600 steps into the run)
      bar    the paper's RL gate, J_T 9.486e-5 at 17.25 ns: not yet (8.100e-04)
      reached  0.01 after 3.71M steps, 4m05s | 0.001 after 4.41M steps, 4m55s | ...
      run    runs/gate_20261206-120000_s7
      best policy  runs/gate_20261206-120000_s7/best_policy
      further  uv run jaxrl-train --resume runs/gate_20261206-120000_s7   (the rest of the
               recipe: explore, polish, polish-2; --minutes M for a slice)

(figures illustrative; a finished run has no ``further`` line).
"""

from __future__ import annotations

import math
import os

from ..run.records import best_evaluation_line
from ..terminal.commands import suggest
from ..terminal.progress import format_duration
from .staged_run import BELOW, TEST_FAILED
from .timeline import StagedResult

__all__ = ["staged_summary_block"]


class _Fields:
    """The minimal `contracts.Evaluation` `best_evaluation_line` needs, from config.json's record."""

    def __init__(self, fmt):
        self.format = fmt


def _attempt_line(recipe, a: dict) -> str:
    stage = recipe.stages[a["stage"]]
    best = "no evaluation" if a.get("best") is None else f"best {a['best']:.2e}"
    head = f"  stage {a['stage'] + 1} {stage.name:<8} {stage.algo:<5} attempt {a['attempt']}"
    if a["end"] == TEST_FAILED:
        return (f"{head} set aside at {a['steps']:,} steps ({best}, not < "
                f"{stage.restart.below:g})")
    if a["end"] == BELOW:
        return f"{head}: {a['steps']:,} steps, {best} (< {stage.until_below:g}: next stage)"
    if a["end"] is None:
        return f"{head}: {a['steps']:,} steps so far, {best}"
    return f"{head}: {a['steps']:,} steps (its budget), {best}"


def staged_summary_block(result: StagedResult, recipe, evaluation_format=None,
                         minutes: float | None = None) -> str:
    """The closing block of a staged run (see the module docstring).

    Args:
        result: the run's `StagedResult`.
        recipe: its `Recipe`.
        evaluation_format: the env's ``evaluation.format`` (fields -> one line), or None for the
            generic ``score=...`` line.
        minutes: the ``--minutes`` budget it stopped at, if it did.
    """
    n_att = len(result.attempts)
    head = (f"staged run {recipe.name} finished" if result.finished else
            f"staged run {recipe.name} stopped at the time budget (--minutes {minutes:g})"
            if minutes is not None else f"staged run {recipe.name} stopped")
    lines = [f"{head}: {result.steps:,} steps in {format_duration(result.wall)} over "
             f"{len({a['stage'] for a in result.attempts})} of {len(recipe.stages)} stages "
             f"({n_att} attempt{'s' if n_att != 1 else ''})"]
    lines += [_attempt_line(recipe, a) for a in result.attempts]
    b = result.best_row
    if b is None:
        lines.append("  best   no evaluation recorded")
    else:
        a = result.attempts[b.attempt]
        stage = recipe.stages[a["stage"]]
        text = None
        if evaluation_format is not None:
            text = best_evaluation_line([b.row], int(b.row["step"]), _Fields(evaluation_format))
        text = text or f"score {b.score:.4g} at step {b.row['step']}"
        lines.append(f"  best   {text} of stage {a['stage'] + 1} {stage.name} "
                     f"({b.step:,} steps into the run)")
    if recipe.reference is not None:
        ref, words = recipe.reference
        verdict = (f"beaten ({result.best:.3e} < {ref:g})" if result.best < ref else
                   f"not yet ({result.best:.3e})" if math.isfinite(result.best) else "not yet")
        lines.append(f"  bar    {words}: {verdict}")
    reached = []
    for t, v in result.thresholds.items():
        reached.append(f"{t:g} after {v[0] / 1e6:.2f}M steps, {format_duration(v[1])}"
                       if v is not None else f"{t:g} not yet")
    lines.append("  reached  " + " | ".join(reached))
    lines.append(f"  run    {result.top}")
    lines.append(f"  best policy  {os.path.join(result.top, 'best_policy')}")
    if not result.finished:
        # The command that goes further: the same run, to the end of its recipe (a --minutes
        # budget belongs to the command that typed it, so the resume is not capped).
        ended = {a["stage"] for a in result.attempts if a["end"] not in (None, TEST_FAILED)}
        left = [s.name for i, s in enumerate(recipe.stages) if i not in ended]
        lines.append(f"  further  {suggest(['jaxrl-train', '--resume', result.top]).text}   "
                     f"(the rest of the recipe: {', '.join(left)}; --minutes M for a slice)")
    return "\n".join(lines)
