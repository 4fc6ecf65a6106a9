"""One run (or staged run) -> the dict of its summary, and the pulses of its best gates.

What the results page shows comes from these summaries, so they carry what it needs: the best
evaluation gate and the best one no longer than the paper's gate time, each re-propagated
(`gates`); steps and wall-clock to each of `THRESHOLDS` (J_T < 1e-2, 1e-3, 1e-4 and the paper's)
with the measured steps/s; the gate-time frontier (`frontier`); optionally a robustness map
(`robustness`); a learning curve cut to a few hundred points; the run's code versions and
command. `campaign.summarise` writes them (JSON) and the pulses (CSV) into a campaign's folder.

A staged run (``jaxrl-train --preset gate``: a top directory whose attempts are ordinary run
directories) is summarised over its attempts end to end (`jaxrl_agents.stages.timeline`: steps and
wall-clock from the run's start, set-aside attempts included), with the same gates, frontier and
robustness code as a single run.
"""

from __future__ import annotations

import math
import os
import statistics

import numpy as np
from jaxrl_agents.run.run_files import RUN_CONFIG

from .frontier import run_frontier
from .gates import best_gates
from .robustness import policy_map
from .rundir import load_evals, read_progress, restart_overhead, run_status, to_float
from .rundir import run_dir as rundir_of
from .thresholds import THRESHOLDS, threshold_key

__all__ = ["SUMMARY_FORMAT", "summarize_run", "summarize_staged"]

SUMMARY_FORMAT = "quantgate.campaign_summary"
CURVE_POINTS = 300  # learning-curve points kept in a summary
# Per-update diagnostics kept as medians over the second half of a run, when the run has them.
DIAGNOSTICS = ("approx_kl", "clip_frac", "kl", "std", "v_loss", "entropy", "grad_steps")
_NO_OVERHEAD = {"steps": 0, "wall_s": 0.0}


def _thresholds(rows: list[dict], score: str, overhead: dict, thresholds=THRESHOLDS) -> dict:
    """Steps and wall-clock to each threshold, counting the failed attempts before the run."""
    out = {}
    for threshold in thresholds:
        hit = next((r for r in rows if to_float(r.get(score)) < threshold), None)
        out[threshold_key(threshold)] = None if hit is None else {
            "steps": int(to_float(hit["step"])) + overhead["steps"],
            "wall_s": to_float(hit.get("wall")) + overhead["wall_s"]}
    return out


def _curve(rows: list[dict], score: str) -> dict:
    """The best-so-far evaluation J_T against steps, thinned to at most `CURVE_POINTS` points."""
    evals = [(int(to_float(r["step"])), to_float(r.get(score))) for r in rows
             if not math.isnan(to_float(r.get(score)))]
    if not evals:
        return {"step": [], "best_JT": []}
    steps = np.array([s for s, _ in evals])
    best = np.fmin.accumulate(np.array([j for _, j in evals]))
    keep = np.unique(np.linspace(0, len(steps) - 1, min(CURVE_POINTS, len(steps))).astype(int))
    return {"step": steps[keep].tolist(), "best_JT": best[keep].tolist()}


def _diagnostics(rows: list[dict]) -> dict:
    """Medians of the `DIAGNOSTICS` a run logs, over the second half of its progress rows."""
    late = rows[len(rows) // 2:]
    return {k: statistics.median(to_float(r.get(k)) for r in late)
            for k in DIAGNOSTICS if any(k in r for r in rows)}


def _gates(evals: dict, dt: float, refine: bool, gate_times) -> tuple[dict, dict]:
    """The best gate and the best short one of a run's evaluation episodes, and their fields.

    Returns ({name: gate}, each re-propagated; the summary fields ``evaluations``, ``frontier``).
    """
    # evals.npz may hold evaluations a later resume recomputes: counted as they are
    return best_gates(evals, dt), {"evaluations": len(evals["step"]),
                                   "frontier": run_frontier(evals, dt, refine, gate_times)}


def _source(rc: dict) -> dict | None:
    """Where a fine-tuning run started: the source run and the wall/steps it took to its best.

    A source that is itself a fine-tune counts its own source too (``chain``: the runs from the
    nearest source back to the fresh one), so steps and wall-clock are those from scratch.
    """
    init = rc.get("init_from")
    if not init:
        return None
    out = {"run": os.path.basename(init["path"]), "step": init.get("step"),
           "chain": [os.path.basename(init["path"])]}
    try:
        rows = read_progress(init["path"])
        at = next(r for r in rows if int(to_float(r["step"])) == init.get("step"))
        overhead = restart_overhead(init["path"])  # a restarted source's failed attempts
        out["wall_s"] = to_float(at.get("wall")) + overhead["wall_s"]
        if out["step"] is not None:
            out["step"] += overhead["steps"]
    except (OSError, StopIteration):  # the source directory is gone: steps only
        out["wall_s"] = None
    try:
        upstream = _source(rundir_of(init["path"]).config)
    except (OSError, ValueError):  # the source directory is gone: this link only
        upstream = None
    if upstream is not None:
        out["chain"] += upstream["chain"]
        if out["step"] is not None and upstream["step"] is not None:
            out["step"] += upstream["step"]
        out["wall_s"] = (None if out["wall_s"] is None or upstream["wall_s"] is None
                         else out["wall_s"] + upstream["wall_s"])
    return out


def summarize_run(run_dir: str, *, refine: bool, robustness: bool, gate_times,
                  status: tuple | None = None) -> tuple[dict, dict]:
    """(summary, {name: pulse gate}) of one run directory, finished or not.

    Args:
        run_dir: a jaxrl-train run directory on the gate environment.
        refine: compute the GRAPE frontier too (about a minute of CPU).
        robustness: map the best policy over the recool grid.
        gate_times: the frontier's gate times, ns (a campaign's ``frontier_ns``).
        status: `rundir.run_status(run_dir)` if the caller has it (it reads the whole checkpoint).

    Returns:
        The summary (JSON-able but for non-finite floats, which the writer turns into null) and
        the gates "best" and "short" (`gates.best_gates`: their pulses as (n_samples,) rad/ns).
    """
    run = rundir_of(run_dir)
    rc = run.config
    rows = run.rows()
    score = run.score_column
    overhead = restart_overhead(run_dir)
    env_cfg = rc["env_config"]["config"]
    dt = env_cfg["T"] / env_cfg["pulse_length"]
    status, done, budget = run_status(run_dir) if status is None else status
    done = int(to_float(rows[-1]["step"])) if rows else 0  # progress may run past the checkpoint
    wall = to_float(rows[-1].get("wall")) if rows else math.nan
    summary = {
        "format": SUMMARY_FORMAT, "format_version": 1,
        "run": os.path.basename(os.path.normpath(run_dir)), "status": status,
        "algo": rc["algo"], "seed": rc["seed"], "preset": rc.get("preset"),
        "algo_config": rc["algo_config"], "env_options": rc.get("env_options", {}),
        "episode_ns": env_cfg["T"], "command": " ".join(rc.get("argv") or []),
        "extensions": rc.get("extensions", []), "versions": rc.get("versions", {}),
        "created": rc.get("created"), "steps_done": done, "budget": budget, "wall_s": wall,
        "steps_per_s": done / wall if wall and wall > 0 else None,
        "thresholds": _thresholds(rows, score, overhead), "curve": _curve(rows, score),
        "diagnostics": _diagnostics(rows), "init_from": _source(rc),
    }
    if overhead["attempts"]:  # steps_done, wall_s and the curve are this (the kept) run's own
        summary["restarts"] = overhead
    gates = {}
    evals = load_evals(run_dir)
    if evals is not None:
        gates, fields = _gates(evals, dt, refine, gate_times)
        summary.update(fields)
    for name, gate in gates.items():
        summary[name] = {k: v for k, v in gate.items() if k != "amps"}
    if robustness and "best" in gates:
        summary["robustness"] = policy_map(run_dir, rc)
    return summary, gates


def summarize_staged(top: str, *, refine: bool, robustness: bool, gate_times,
                     thresholds=THRESHOLDS) -> tuple[dict, dict]:
    """(summary, {name: pulse gate}) of a staged run (its top directory), finished or not.

    The summary is a single run's (`summarize_run`) over the staged run's attempts end to end, as
    `jaxrl_agents.stages.timeline` puts them: ``steps_done``, ``wall_s``, ``thresholds`` and
    ``curve`` count every attempt from the run's start, set-aside ones included; the gates and the
    frontier are over every attempt's evaluation episodes (their ``step`` on the run's clock, with
    the attempt's ``run`` and its own ``run_step``); ``diagnostics`` are the last attempt's;
    ``attempts`` lists each attempt (stage, seed, how it ended, its steps, wall-clock and best J_T);
    ``robustness`` maps the kept policies ("best" and "last") of the attempt that gave the best
    gate. ``budget`` is the sum of the recipe's stage budgets (a stage that ends early, or a
    restart, changes what the run trains).

    Args:
        top: the staged run's top directory (it holds staged_run.json).
        refine: compute the GRAPE frontier too.
        robustness: map the best attempt's kept policies over the recool grid.
        gate_times: the frontier's gate times, ns (a campaign's ``frontier_ns``).
        thresholds: J_T whose first crossing the summary records.

    Raises:
        ValueError: no attempt has started yet (nothing to summarise), or the record is not a
            staged run's.
    """
    from jaxrl_agents.stages.recipe import Recipe
    from jaxrl_agents.stages.staged_run import read_staged_run
    from jaxrl_agents.stages.timeline import score_of, timeline

    record = read_staged_run(top)
    attempts = record["attempts"]
    recipe = Recipe.from_dict(record["recipe"])
    started = [a for a in attempts if os.path.isfile(os.path.join(top, a["dir"], RUN_CONFIG))]
    if not started:
        raise ValueError(f"{top}: no attempt of the staged run has started; nothing to summarise")
    rc = rundir_of(os.path.join(top, started[0]["dir"])).config
    env_cfg = rc["env_config"]["config"]
    dt = env_cfg["T"] / env_cfg["pulse_length"]
    rows = timeline(top, attempts, *score_of(top, attempts))
    listed, offsets, diagnostics = [], {}, {}
    for i, a in enumerate(attempts):
        own = [r for r in rows if r.attempt == i]
        if own:  # every update of a stage is evaluated: its last row is where the attempt got
            offsets[i] = own[0].step - int(own[0].row["step"])
            diagnostics = _diagnostics([r.row for r in own])  # the last attempt's stay
        stage = recipe.stages[a["stage"]]
        listed.append({"stage": a["stage"], "stage_name": stage.name, "algo": stage.algo,
                       "attempt": a["attempt"], "seed": a["seed"], "end": a["end"],
                       "run": os.path.basename(a["dir"]),
                       "steps": int(own[-1].row["step"]) if own else 0,
                       "wall_s": float(own[-1].row["wall"]) if own else 0.0,
                       "best_JT": min(r.score for r in own) if own else None})
    done = sum(a["steps"] for a in listed)
    wall = sum(a["wall_s"] for a in listed)
    scores = [{"step": r.step, "wall": r.wall, "score": r.score} for r in rows]
    summary = {
        "format": SUMMARY_FORMAT, "format_version": 1,
        "run": os.path.basename(os.path.normpath(top)),
        "status": "finished" if record["finished"] else "interrupted",
        "algo": "staged", "seed": record["seed"], "preset": recipe.name,
        "recipe": recipe.to_dict(), "env_options": record["env_options"],
        "episode_ns": env_cfg["T"], "command": " ".join(record.get("argv") or []),
        "extensions": rc.get("extensions", []), "versions": rc.get("versions", {}),
        "created": record.get("created"), "steps_done": done, "budget": recipe.total_steps,
        "wall_s": wall, "steps_per_s": done / wall if wall > 0 else None,
        "thresholds": _thresholds(scores, "score", _NO_OVERHEAD, thresholds),
        "curve": _curve(scores, "score"), "diagnostics": diagnostics, "init_from": None,
        "attempts": listed,
    }
    gates = {}
    evals = _staged_evals(top, attempts, offsets)
    if evals is not None:
        gates, fields = _gates(evals, dt, refine, gate_times)
        summary.update(fields)
        for gate in gates.values():  # which attempt played it, and where in its own run
            i = int(evals["attempt"][np.flatnonzero(evals["step"] == gate["step"])[0]])
            gate.update(run=os.path.basename(attempts[i]["dir"]), run_step=gate["step"] - offsets[i])
    for name, gate in gates.items():
        summary[name] = {k: v for k, v in gate.items() if k != "amps"}
    if robustness and "best" in gates:
        best_run = next(a["dir"] for a in attempts if os.path.basename(a["dir"]) == gates["best"]["run"])
        run_dir = os.path.join(top, best_run)
        summary["robustness"] = {**policy_map(run_dir, rundir_of(run_dir).config),
                                 "run": gates["best"]["run"]}
    return summary, gates


def _staged_evals(top: str, attempts: list[dict], offsets: dict[int, int]) -> dict | None:
    """Every attempt's evaluation episodes in one table (None before the first evaluation).

    ``step`` is on the run's clock (`offsets`: each attempt's first step there) and ``attempt``
    is the index of the attempt that played the episode.
    """
    parts = []
    for i, offset in offsets.items():
        evals = load_evals(os.path.join(top, attempts[i]["dir"]))
        if evals is not None:
            evals["step"] = evals["step"] + offset
            evals["attempt"] = np.full(len(evals["step"]), i)
            parts.append(evals)
    if not parts:
        return None
    shapes = {p["JT"].shape[1:] + p["amps"].shape[1:] for p in parts}
    if len(shapes) > 1:
        raise ValueError(f"{top}: the attempts' evaluation episodes differ in shape ({sorted(shapes)}); "
                         f"a staged run trains every stage on one environment")
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
