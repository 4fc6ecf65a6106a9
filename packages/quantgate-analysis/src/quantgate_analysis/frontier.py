"""The gate-time frontier: the best J_T with gate time <= T, for each T, by RL alone and after GRAPE.

`run_frontier` computes a run's frontier from its evaluation episodes (a summary's ``frontier``);
`best_frontier` combines the frontiers of many summaries into the results page's.
"""

from __future__ import annotations

import math

import numpy as np

from .gates import best_gate

__all__ = ["GRAPE_ITERATIONS", "run_frontier", "best_frontier", "running_min"]

GRAPE_ITERATIONS = 200  # the refinement the paper's RL pulse got in the reference (7.3e-6)


def run_frontier(evals: dict, dt: float, refine: bool, gate_times) -> dict:
    """Best J_T with gate time <= T for each T of `gate_times` (ns), by RL and, if `refine`, after GRAPE.

    GRAPE (`quantgate_env.refine_pulse`, `GRAPE_ITERATIONS` Adam steps) starts from the pulse of
    the evaluation episode whose J_T at a time <= T is lowest, cut at exactly T, and keeps T.

    Args:
        evals: the run's evaluation episodes (`rundir.load_evals`).
        dt: ns per pulse sample.
        refine: compute the GRAPE column too (about a minute of CPU).
        gate_times: the gate times T, ns, in increasing order.

    Returns:
        {"gate_time_ns": [T, ...], "rl_JT", "rl_t_ns": [float | None per T], "grape_JT": [float |
        None per T] or None without `refine`, "grape_iterations": int}.
    """
    from quantgate_env import refine_pulse

    rl, grape, rl_t = [], [], []
    for t_gate in gate_times:
        gate = best_gate(evals, t_gate, dt)
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


def best_frontier(summaries: dict[str, list[dict]]) -> dict:
    """Best J_T over every run at each gate time of the summaries' frontiers, by RL and after GRAPE.

    Args:
        summaries: {entry key: [summary, ...]}; summaries without a frontier are skipped.

    Returns:
        {"t": [T, ...] (ns, increasing), "rl": [J_T | None per T], "grape": [J_T | None per T]}.
    """
    best: dict[str, dict[float, float]] = {"rl": {}, "grape": {}}
    for runs in summaries.values():
        for s in runs:
            f = s.get("frontier") or {}
            for key, values in (("rl", f.get("rl_JT")), ("grape", f.get("grape_JT"))):
                for t, value in zip(f.get("gate_time_ns", []), values or []):
                    if value is not None and value < best[key].get(t, math.inf):
                        best[key][t] = value
    times = sorted({*best["rl"], *best["grape"]})
    # A gate no longer than T is also one no longer than any later T: each row is a running
    # minimum. (GRAPE at T refines the best RL pulse cut at T, which can start from a pulse that
    # refines worse than an earlier T's: 3e-6 at 18 ns after 6.7e-10 at 17 ns.)
    return {"t": times, **{k: running_min([best[k].get(t) for t in times]) for k in best}}


def running_min(values: list) -> list:
    """Each value replaced by the least of it and those before it (None: no value yet)."""
    out, low = [], None
    for v in values:
        low = v if low is None or (v is not None and v < low) else low
        out.append(low)
    return out
