"""One run directory -> a small committed summary (JSON) and its best pulses (CSV).

Everything the results page shows comes from these files, so they carry what the page needs:
the best evaluation gate and the best one no longer than the paper's 17.25 ns, each re-propagated
from its CSV; steps and wall-clock to J_T < 1e-2, 1e-3, 1e-4 and the paper's 9.486e-5 with the
measured steps/s; the
gate-time frontier (best J_T at each gate time, by RL alone and after GRAPE); optional robustness
maps; a learning curve cut to a few hundred points; the code version and the command.

A pure-RL pulse is exactly what the deterministic policy played in an evaluation episode
(evals.npz ``amps``, 3 samples a step), cut at its gate time: no GRAPE and no edits. Its CSV is in
the paper's format (``tlist``, ``amplist``; ``amplist[0]`` is not applied), so any propagator
reads it.

A staged entry's seed is one staged run (``jaxrl-train --preset gate``: a top directory whose
attempts are ordinary run directories); `summarize_staged` writes the same summary from it, over
its attempts end to end (`jaxrl_agents.stages.timeline`: steps and wall-clock from the run's start,
set-aside attempts included), with the same gate, frontier and robustness code as a single run.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess

import numpy as np
from jaxrl_agents.common.fileio import atomic_write_json
from jaxrl_agents.run.run_files import EVALS_NPZ, RUN_CONFIG, read_run_config

from .rundirs import read_progress as _read_progress
from .rundirs import read_staged_run, restart_overhead, run_status, score_column
from .rundirs import to_float as _float
from .spec import DEFAULT_FRONTIER_NS

__all__ = ["PAPER_GATE_NS", "PAPER_JT", "THRESHOLDS", "threshold_key", "summary_paths",
           "write_summary", "summarize_run", "summarize_staged", "code_version"]

SUMMARY_FORMAT = "quantgate.campaign_summary"
PAPER_GATE_NS = 17.25  # the paper agent's gate time: the aim is a better gate no longer than this
# Cited, not measured here (../shared/spec/reference-results.md, section 7).
PAPER_JT = 9.486e-5  # the paper's stored pulse, re-propagated exactly in float64
# J_T a summary records the first crossing of (summaries written before PAPER_JT joined lack it).
THRESHOLDS = (1e-2, 1e-3, 1e-4, PAPER_JT)
GRAPE_ITERATIONS = 200  # the refinement the paper's RL pulse got in the reference (7.3e-6)
CURVE_POINTS = 300  # learning-curve points kept in a summary
# A robustness entry maps the one of these kept policies that does best on VALIDATION_DEVICES
# devices drawn (VALIDATION_SEED) from the recool range: see `_robustness`.
ROBUST_CANDIDATES = ("best", "last")
VALIDATION_DEVICES = 128
VALIDATION_SEED = 0
# Per-update diagnostics kept as medians over the second half of a run, when the run has them.
DIAGNOSTICS = ("approx_kl", "clip_frac", "kl", "std", "v_loss", "entropy", "grad_steps")
_TIME_EPS = 1e-9  # ns: gate times are sums of dt, compared with a grid value
_EVAL_FIELDS = ("step", "JT", "t", "alive", "amps", "unitarity", "concurrence")  # of evals.npz
_NO_OVERHEAD = {"steps": 0, "wall_s": 0.0}


def threshold_key(threshold: float) -> str:
    """The key of `threshold` in a summary's ``thresholds``: the fewest digits that give it back.

    ``1e-02``, ``1e-03``, ``1e-04``, ``9.486e-05``.
    """
    for digits in range(17):
        key = f"{threshold:.{digits}e}"
        if float(key) == threshold:
            return key
    return repr(threshold)


def summary_paths(campaign, entry, seed: int) -> dict[str, str]:
    """Where the summary of (`entry`, `seed`) and its pulses live in the committed folder."""
    folder = os.path.join(campaign.summaries, entry.name)
    return {"folder": folder, "json": os.path.join(folder, f"s{seed}.json"),
            "best_csv": os.path.join(folder, f"s{seed}_best.csv"),
            "short_csv": os.path.join(folder, f"s{seed}_best_within_{PAPER_GATE_NS:g}ns.csv")}


def code_version(cwd: str | None = None, ignore: tuple[str, ...] = ()) -> str:
    """``git describe --always --abbrev=10`` at `cwd`, ``-dirty`` if a tracked file changed.

    ``unknown`` outside git. Changes under the paths of `ignore` do not count: a campaign rewrites its own tracked summaries
    while it runs, which says nothing of the code that trained.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        top = git("rev-parse", "--show-toplevel")
        skip = [f":(top,exclude){os.path.relpath(os.path.abspath(p), top)}" for p in ignore]
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", *skip)
        return git("describe", "--always", "--abbrev=10") + ("-dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _finite_or_none(x):
    return None if x is None or not math.isfinite(x) else float(x)


def _gate(evals, e: int, k: int, dt: float) -> dict:
    """The gate of evaluation `e` at step `k`: its pulse (rad/ns) and its metrics there."""
    amps = np.asarray(evals["amps"][e, :k + 1], dtype=np.float64).reshape(-1)
    return {"JT": float(evals["JT"][e, k]), "t_ns": float(evals["t"][e, k]),
            "one_minus_U": float(1.0 - evals["unitarity"][e, k]),
            "concurrence": float(evals["concurrence"][e, k]),
            "step": int(evals["step"][e]), "n_samples": int(amps.size), "dt_ns": dt, "amps": amps}


def _best_gate(evals, t_max: float, dt: float) -> dict | None:
    """The lowest J_T over every evaluation episode at gate times <= `t_max` (alive steps only)."""
    jt = np.where(evals["alive"] & (evals["t"] <= t_max + _TIME_EPS), evals["JT"], np.nan)
    if np.all(np.isnan(jt)):
        return None
    e, k = np.unravel_index(np.nanargmin(jt), jt.shape)
    return _gate(evals, int(e), int(k), dt)


def _repropagate(gate: dict) -> float:
    """J_T of the gate's pulse propagated afresh, sample by sample (independent of the MDP)."""
    from quantgate_env import rollout_pulse

    return float(rollout_pulse(gate["amps"], dt=gate["dt_ns"])["JT"][-1])


def _frontier(evals, dt: float, refine: bool, gate_times=DEFAULT_FRONTIER_NS) -> dict:
    """Best J_T with gate time <= T for each T of `gate_times` (ns), by RL and, if `refine`, after GRAPE.

    GRAPE (`quantgate_env.refine_pulse`, `GRAPE_ITERATIONS` Adam steps) starts from the pulse of
    the evaluation episode whose J_T at a time <= T is lowest, cut at exactly T, and keeps T.
    """
    from quantgate_env import refine_pulse

    rl, grape, rl_t = [], [], []
    for t_gate in gate_times:
        gate = _best_gate(evals, t_gate, dt)
        rl.append(None if gate is None else gate["JT"])
        rl_t.append(None if gate is None else gate["t_ns"])
        if not refine or gate is None:
            grape.append(None)
            continue
        e = int(np.flatnonzero(evals["step"] == gate["step"])[0])
        n = int(round(t_gate / dt))  # samples up to T
        per_step = evals["amps"].shape[-1]
        k = (n + per_step - 1) // per_step - 1  # the MDP step that plays sample n
        if k >= evals["alive"].shape[1] or not evals["alive"][e, k]:
            grape.append(None)  # the episode ended (out of bounds or its own end) before T
            continue
        amps = np.asarray(evals["amps"][e, :k + 1], dtype=np.float64).reshape(-1)[:n]
        grape.append(float(refine_pulse(amps, dt=dt, n_iter=GRAPE_ITERATIONS).JT_best))
    return {"gate_time_ns": list(gate_times), "rl_JT": rl, "rl_t_ns": rl_t,
            "grape_JT": grape if refine else None,
            "grape_iterations": GRAPE_ITERATIONS if refine else 0}


def _thresholds(rows: list[dict], score: str, overhead: dict, thresholds=THRESHOLDS) -> dict:
    """Steps and wall-clock to each threshold, counting the failed attempts before the run."""
    out = {}
    for threshold in thresholds:
        hit = next((r for r in rows if _float(r.get(score)) < threshold), None)
        out[threshold_key(threshold)] = None if hit is None else {
            "steps": int(_float(hit["step"])) + overhead["steps"],
            "wall_s": _float(hit.get("wall")) + overhead["wall_s"]}
    return out


def _curve(rows: list[dict], score: str) -> dict:
    """The best-so-far evaluation J_T against steps, thinned to at most `CURVE_POINTS` points."""
    evals = [(int(_float(r["step"])), _float(r.get(score))) for r in rows
             if not math.isnan(_float(r.get(score)))]
    if not evals:
        return {"step": [], "best_JT": []}
    steps = np.array([s for s, _ in evals])
    best = np.fmin.accumulate(np.array([j for _, j in evals]))
    keep = np.unique(np.linspace(0, len(steps) - 1, min(CURVE_POINTS, len(steps))).astype(int))
    return {"step": steps[keep].tolist(), "best_JT": best[keep].tolist()}


def _diagnostics(rows: list[dict]) -> dict:
    """Medians of the `DIAGNOSTICS` a run logs, over the second half of its progress rows."""
    late = rows[len(rows) // 2:]
    return {k: statistics.median(_float(r.get(k)) for r in late)
            for k in DIAGNOSTICS if any(k in r for r in rows)}


def _load_evals(run_dir: str) -> dict | None:
    """A run's evaluation episodes (evals.npz; None before its first), ``alive`` as booleans."""
    path = os.path.join(run_dir, EVALS_NPZ)
    if not os.path.isfile(path):
        return None
    with np.load(path) as z:
        evals = {k: z[k] for k in _EVAL_FIELDS}
    evals["alive"] = evals["alive"].astype(bool)
    return evals


def _gates(evals: dict, dt: float, refine: bool, gate_times) -> tuple[dict, dict]:
    """The best gate and the best short one of a run's evaluation episodes, and their fields.

    Returns ({name: gate}, each re-propagated; the summary fields ``evaluations``, ``frontier``).
    """
    gates = {}
    for name, t_max in (("best", math.inf), ("short", PAPER_GATE_NS)):
        gate = _best_gate(evals, t_max, dt)
        if gate is not None:
            gate["JT_repropagated"] = _repropagate(gate)
            gates[name] = gate
    # evals.npz may hold evaluations a later resume recomputes: counted as they are
    return gates, {"evaluations": len(evals["step"]),
                   "frontier": _frontier(evals, dt, refine, gate_times)}


def _robustness(run_dir: str, rc: dict) -> dict:
    """A domain-randomised run's policy, closed loop, over the 11 x 11 recool detuning grid.

    Of the run's two kept policies, "best" (ranked by its evaluations, on the nominal device only)
    and "last", the one mapped is the one with the lower worst J_T on `policy_validation`'s
    devices: drawn from the same range, none of them on the grid but the nominal one, so the
    choice is not made on the map it reports. The nominal ranking alone can keep a policy tuned to
    the nominal device (ppo-dr-short-tft s1's "best": worst 7.2e-3 on the grid, its "last" 1.8e-3).
    """
    from jaxrl_agents import load_policy
    from quantgate_env import make
    from quantgate_env.tools.robustness import policy_robustness, policy_validation

    env = make(**{**rc.get("env_options", {}), "oob_mode": "clip"})
    acts, validation = {}, {}
    for which in ROBUST_CANDIDATES:
        policy = load_policy(run_dir, which)
        acts[which] = lambda obs, policy=policy: policy.act(obs, deterministic=True)
        validation[which] = policy_validation(acts[which], env=env, half_width_mhz="recool",
                                              count=VALIDATION_DEVICES, seed=VALIDATION_SEED)
    chosen = min(ROBUST_CANDIDATES, key=lambda which: validation[which]["worst_JT"])  # "best" on ties
    result = policy_robustness(acts[chosen], env=env, half_width_mhz="recool", n=11)
    return {**result.summary(), "n": result.n, "policy": chosen, "validation": validation,
            "offsets_mhz": np.asarray(result.offsets_mhz).tolist(),
            "jt_at_gate_time": np.asarray(result.jt_at_gate_time).tolist()}


def _json_clean(x):
    """`x` with every non-finite float as None: summaries are strict JSON, readable anywhere."""
    if isinstance(x, dict):
        return {k: _json_clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


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
        rows = _read_progress(init["path"])
        at = next(r for r in rows if int(_float(r["step"])) == init.get("step"))
        overhead = restart_overhead(init["path"])  # a restarted source's failed attempts
        out["wall_s"] = _float(at.get("wall")) + overhead["wall_s"]
        if out["step"] is not None:
            out["step"] += overhead["steps"]
    except (OSError, StopIteration):  # the source directory is gone: steps only
        out["wall_s"] = None
    try:
        upstream = _source(read_run_config(os.path.join(init["path"], RUN_CONFIG)))
    except (OSError, ValueError):  # the source directory is gone: this link only
        upstream = None
    if upstream is not None:
        out["chain"] += upstream["chain"]
        if out["step"] is not None and upstream["step"] is not None:
            out["step"] += upstream["step"]
        out["wall_s"] = (None if out["wall_s"] is None or upstream["wall_s"] is None
                         else out["wall_s"] + upstream["wall_s"])
    return out


def summarize_run(run_dir: str, *, refine: bool, robustness: bool,
                  gate_times=DEFAULT_FRONTIER_NS, status: tuple | None = None) -> tuple[dict, dict]:
    """(summary, {name: pulse gate}) of one run directory, finished or not.

    Args:
        run_dir: a jaxrl-train run directory on the gate environment.
        refine: compute the GRAPE frontier too (about a minute of CPU).
        robustness: map the best policy over the recool grid.
        gate_times: the frontier's gate times, ns.
        status: `run_status(run_dir)` if the caller has it (it reads the whole checkpoint).
    """
    rc = read_run_config(os.path.join(run_dir, RUN_CONFIG))
    rows = _read_progress(run_dir)
    score = score_column(rc)
    overhead = restart_overhead(run_dir)
    env_cfg = rc["env_config"]["config"]
    dt = env_cfg["T"] / env_cfg["pulse_length"]
    status, done, budget = run_status(run_dir) if status is None else status
    done = int(_float(rows[-1]["step"])) if rows else 0  # progress may run past the checkpoint
    wall = _float(rows[-1].get("wall")) if rows else math.nan
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
    evals = _load_evals(run_dir)
    if evals is not None:
        gates, fields = _gates(evals, dt, refine, gate_times)
        summary.update(fields)
    for name, gate in gates.items():
        summary[name] = {k: v for k, v in gate.items() if k != "amps"}
    if robustness and "best" in gates:
        summary["robustness"] = _robustness(run_dir, rc)
    return summary, gates


def summarize_staged(top: str, *, refine: bool, robustness: bool, gate_times=DEFAULT_FRONTIER_NS,
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
        gate_times: the frontier's gate times, ns.
        thresholds: J_T whose first crossing the summary records.

    Raises:
        ValueError: no attempt has started yet (nothing to summarise), or the record is not a
            staged run's.
    """
    from jaxrl_agents.stages.recipe import Recipe
    from jaxrl_agents.stages.timeline import score_of, timeline

    record = read_staged_run(top)
    attempts = record["attempts"]
    recipe = Recipe.from_dict(record["recipe"])
    started = [a for a in attempts if os.path.isfile(os.path.join(top, a["dir"], RUN_CONFIG))]
    if not started:
        raise ValueError(f"{top}: no attempt of the staged run has started; nothing to summarise")
    rc = read_run_config(os.path.join(top, started[0]["dir"], RUN_CONFIG))
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
        summary["robustness"] = {**_robustness(run_dir, read_run_config(os.path.join(run_dir, RUN_CONFIG))),
                                 "run": gates["best"]["run"]}
    return summary, gates


def _staged_evals(top: str, attempts: list[dict], offsets: dict[int, int]) -> dict | None:
    """Every attempt's evaluation episodes in one table (None before the first evaluation).

    ``step`` is on the run's clock (`offsets`: each attempt's first step there) and ``attempt``
    is the index of the attempt that played the episode.
    """
    parts = []
    for i, offset in offsets.items():
        evals = _load_evals(os.path.join(top, attempts[i]["dir"]))
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


def write_summary(campaign, entry, seed: int, run_dir: str, version: str | None = None) -> str:
    """Write (replace) the committed summary and pulse CSVs of (`entry`, `seed`); returns the JSON path.

    `run_dir` is the run directory, or a staged entry's staged run (its top directory). The GRAPE
    frontier (and a robustness map) is computed once the run has finished. The summary keeps every
    code version that contributed to the run (one per session that advanced it).
    """
    import json

    from quantgate_env import save_pulse_csv

    paths = summary_paths(campaign, entry, seed)
    os.makedirs(paths["folder"], exist_ok=True)
    if entry.staged:
        finished = bool(read_staged_run(run_dir)["finished"])
        summary, gates = summarize_staged(run_dir, refine=finished,
                                          robustness=entry.robustness and finished,
                                          gate_times=campaign.frontier_ns)
    else:
        status = run_status(run_dir)
        finished = status[0] == "finished"
        summary, gates = summarize_run(run_dir, refine=finished,
                                       robustness=entry.robustness and finished,
                                       gate_times=campaign.frontier_ns, status=status)
    version = version or code_version(os.path.dirname(os.path.abspath(__file__)),
                                      ignore=(campaign.summaries,))
    previous = []
    if os.path.isfile(paths["json"]):
        with open(paths["json"]) as handle:
            old = json.load(handle)
        if old.get("run") == summary["run"]:
            previous = old.get("code_versions", [])
    summary["code_versions"] = previous + ([version] if version not in previous else [])
    summary.update(campaign=campaign.name, entry=entry.name, description=entry.description)
    for name, key in (("best", "best_csv"), ("short", "short_csv")):
        if name not in gates:
            continue
        gate = gates[name]
        if name == "short" and "best" in gates and gates["best"]["step"] == gate["step"] \
                and gates["best"]["n_samples"] == gate["n_samples"]:
            summary[name]["pulse_csv"] = summary["best"]["pulse_csv"]  # the same gate: one file
            if os.path.isfile(paths[key]):
                os.remove(paths[key])  # an earlier summary's, superseded
            continue
        save_pulse_csv(paths[key], gate["amps"], gate["dt_ns"], overwrite=True)  # regenerated
        summary[name]["pulse_csv"] = os.path.basename(paths[key])
    atomic_write_json(paths["json"], _json_clean(summary))
    return paths["json"]
