"""The best gates of a run's evaluation episodes: the pulse a deterministic policy played, cut at a time.

A pure-RL gate is exactly what the policy played in an evaluation episode (evals.npz ``amps``, a few
samples a step), up to the step of its best J_T: no GRAPE and no edits. Its J_T is recorded twice,
as the evaluation measured it and re-propagated afresh from the samples (`quantgate_env.rollout_pulse`,
independent of the MDP), which is what a pulse CSV in the paper's format gives back to any reader.
"""

from __future__ import annotations

import math

import numpy as np

from .paper import PAPER_GATE_NS

__all__ = ["TIME_EPS", "gate_at", "best_index", "best_gate", "repropagate", "best_gates"]

TIME_EPS = 1e-9  # ns: gate times are sums of dt, compared with a grid value


def gate_at(evals: dict, e: int, k: int, dt: float) -> dict:
    """The gate of evaluation `e` at MDP step `k`: its pulse and its metrics there.

    Args:
        evals: evaluation episodes (`rundir.load_evals`).
        e: index of the evaluation.
        k: the MDP step the gate ends on.
        dt: ns per pulse sample.

    Returns:
        {"JT", "t_ns", "one_minus_U", "concurrence", "step" (the run's step of the evaluation),
        "n_samples", "dt_ns", "amps": (n_samples,) float64 rad/ns}.
    """
    amps = np.asarray(evals["amps"][e, :k + 1], dtype=np.float64).reshape(-1)
    return {"JT": float(evals["JT"][e, k]), "t_ns": float(evals["t"][e, k]),
            "one_minus_U": float(1.0 - evals["unitarity"][e, k]),
            "concurrence": float(evals["concurrence"][e, k]),
            "step": int(evals["step"][e]), "n_samples": int(amps.size), "dt_ns": dt, "amps": amps}


def best_index(evals: dict, t_max: float) -> tuple[int, int] | None:
    """(evaluation, MDP step) of the lowest J_T at gate times <= `t_max` ns, alive steps only.

    Args:
        evals: at least "JT", "t" and "alive" (bool), each (n_evaluations, n_steps).
        t_max: the longest gate time, ns.

    Returns:
        The first of equals, or None if no alive step is that short.
    """
    jt = np.where(evals["alive"] & (evals["t"] <= t_max + TIME_EPS), evals["JT"], np.nan)
    if np.all(np.isnan(jt)):
        return None
    e, k = np.unravel_index(np.nanargmin(jt), jt.shape)
    return int(e), int(k)


def best_gate(evals: dict, t_max: float, dt: float) -> dict | None:
    """The lowest J_T over every evaluation episode at gate times <= `t_max` ns (alive steps only).

    Returns:
        `gate_at` of it (the first of equals, `best_index`), or None if no alive step is that short.
    """
    at = best_index(evals, t_max)
    return None if at is None else gate_at(evals, *at, dt)


def repropagate(gate: dict) -> float:
    """J_T of the gate's pulse propagated afresh, sample by sample (independent of the MDP)."""
    from quantgate_env import rollout_pulse

    return float(rollout_pulse(gate["amps"], dt=gate["dt_ns"])["JT"][-1])


def best_gates(evals: dict, dt: float) -> dict[str, dict]:
    """The best gate ("best") and the best no longer than the paper's ("short"), each re-propagated.

    Returns:
        {name: `gate_at` dict plus "JT_repropagated"}; a name is missing when no gate qualifies.
    """
    gates = {}
    for name, t_max in (("best", math.inf), ("short", PAPER_GATE_NS)):
        gate = best_gate(evals, t_max, dt)
        if gate is not None:
            gate["JT_repropagated"] = repropagate(gate)
            gates[name] = gate
    return gates
