"""How the gate environments describe their evaluation episode to an agent library.

``GateEnv.evaluation`` and ``MultiGateEnv.evaluation`` return these descriptions; they follow the
evaluation protocol of docs/contracts.md (``jaxrl_agents.common.contracts.Evaluation``) by shape
only, so this package imports no agent:

- ``record(info)``: the per-step quantities kept for every evaluation episode (traced);
- ``summarise(episode)``: named scalars of one recorded episode (numpy): ``JT_min`` (best J_T over
  the episode), ``t_JT_min`` (its gate time, ns), ``JT_end``, ``1mU_at_best`` (leakage 1 - U at the
  best step), ``t_first_PE`` (time of the first perfect entangler, NaN if none);
- ``format(summary)``: ``minJT=..@..ns  firstPE=..ns  1-U=..`` (``firstPE=none yet`` before the
  first perfect entangler);
- ``rollout_stats(info)``: ``min_JT`` of a training rollout;
- ``score`` / ``score_mode``: evaluations rank by the lowest ``JT_min``;
- ``plots``: the pulse, J_T, concurrence and 1 - U against t for ``jaxrl-plot``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

__all__ = ["GateEvaluation", "MultiGateEvaluation", "SUMMARY_FIELDS", "summarise_gate_episode",
           "format_gate_summary", "PE_CONCURRENCE"]

# Summary fields, in the order they are printed (written by trainers as eval_<field>).
SUMMARY_FIELDS = ("JT_min", "t_JT_min", "JT_end", "1mU_at_best", "t_first_PE")

# Concurrence 1 means the gate is a perfect entangler (inside the PE polyhedron).
PE_CONCURRENCE = 1.0

# Shared per-step quantities of the multi-line env (equal for every agent: one gate).
_SHARED = ("JT", "concurrence", "unitarity", "tv_penalty", "oob", "t", "leakage_increase")
# Per-line quantities of the multi-line env, stacked in agent order (leading axis n_lines).
_PER_LINE = ("amps", "excess", "cost")

_PLOTS = {
    "curve": {"field": "JT_min", "label": "eval $J_T$ min over the episode", "scale": "log"},
    "x": {"key": "t", "label": "t (ns)"},
    "panels": [
        {"key": "amps", "label": "pulse u(t) (rad/ns)", "kind": "stairs"},
        {"key": "JT", "label": "$J_T$", "scale": "log"},
        {"key": "concurrence", "label": "concurrence"},
        {"key": "unitarity", "label": "1 - U", "scale": "log", "complement": True},
    ],
}


def summarise_gate_episode(episode: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Gate summary of one recorded episode.

    Args:
        episode: arrays with leading axis T: "alive" (T,) bool (True for the steps of the episode,
            including the one that ended it), "JT", "t" (ns, end of the step), "unitarity",
            "concurrence" (T,).

    Returns:
        JT_min (min J_T over alive steps, NaN-aware), t_JT_min (t of that step, ns), JT_end (J_T at
        the last alive step), 1mU_at_best (1 - U at the best step), t_first_PE (t of the first
        alive step with concurrence >= 1, NaN if none).
    """
    alive = np.asarray(episode["alive"], bool)
    idx = np.flatnonzero(alive)
    jt_all, t_all = np.asarray(episode["JT"]), np.asarray(episode["t"])
    out: dict[str, float] = {}
    jt = np.asarray(jt_all, np.float64)[idx]
    if jt.size and not np.all(np.isnan(jt)):
        best = idx[int(np.nanargmin(jt))]
        out["JT_min"] = float(jt_all[best])
        out["t_JT_min"] = float(t_all[best])
        out["1mU_at_best"] = float(1.0 - np.asarray(episode["unitarity"])[best])
    else:
        out["JT_min"] = out["t_JT_min"] = out["1mU_at_best"] = math.nan
    out["JT_end"] = float(jt_all[idx[-1]]) if idx.size else math.nan
    c = np.asarray(episode["concurrence"], np.float64)[idx]
    pe = np.flatnonzero(c >= PE_CONCURRENCE)
    out["t_first_PE"] = float(t_all[idx[pe[0]]]) if pe.size else math.nan
    return {k: out[k] for k in SUMMARY_FIELDS}


def format_gate_summary(summary: Mapping[str, float]) -> str:
    """``minJT=1.234e-03@12.3ns  firstPE=4.50ns  1-U=1.0e-04`` (fields present only)."""
    parts = []
    if "JT_min" in summary:
        s = f"minJT={summary['JT_min']:.3e}"
        if "t_JT_min" in summary:
            s += f"@{summary['t_JT_min']:.1f}ns"
        parts.append(s)
    if "t_first_PE" in summary:
        t_pe = summary["t_first_PE"]
        # NaN means no step of the episode reached a perfect entangler: say so in words.
        parts.append("firstPE=none yet" if math.isnan(t_pe) else f"firstPE={t_pe:.2f}ns")
    if "1mU_at_best" in summary:
        parts.append(f"1-U={summary['1mU_at_best']:.1e}")
    return "  ".join(parts)


@dataclasses.dataclass(frozen=True)
class GateEvaluation:
    """Evaluation description of the single-line ``GateEnv`` (every info field is recorded)."""

    score = "JT_min"
    score_mode = "min"

    @property
    def plots(self) -> dict:
        """The ``jaxrl-plot`` layout: pulse (rad/ns), J_T, concurrence and 1 - U against t (ns)."""
        return _PLOTS

    def record(self, info: Mapping) -> dict:
        """Every per-step info field (JT, concurrence, unitarity, tv_penalty, oob, t, amps (K,))."""
        return {k: v for k, v in info.items() if k != "final_obs"}

    def summarise(self, episode):
        """Named scalars of one recorded episode (``summarise_gate_episode``).

        Args:
            episode: the recorded arrays, leading axis T: ``alive`` (T,) bool, ``JT``, ``t`` (ns),
                ``unitarity``, ``concurrence`` (T,).

        Returns:
            ``{field: float}`` for ``SUMMARY_FIELDS`` (times in ns, NaN where undefined).
        """
        return summarise_gate_episode(episode)

    def format(self, summary):
        """The evaluation line of a summary (``format_gate_summary``): ``minJT=..@..ns  firstPE=..ns  1-U=..``."""
        return format_gate_summary(summary)

    def rollout_stats(self, info: Mapping) -> dict:
        """``min_JT``: the lowest J_T any environment reached during the rollout."""
        return {"min_JT": jnp.min(info["JT"])}


@dataclasses.dataclass(frozen=True)
class MultiGateEvaluation(GateEvaluation):
    """Evaluation description of ``MultiGateEnv`` (infos keyed by agent = control line).

    Records the gate's shared quantities once (JT, concurrence, unitarity, tv_penalty, oob, t,
    leakage_increase) and the per-line ones stacked in agent order: amps (n_lines, K), excess and
    cost (n_lines,). Summary, line, score and rollout statistic are the single line's.
    """

    agents: tuple[str, ...] = ()

    def record(self, info: Mapping) -> dict:
        """The per-step fields of an agent-keyed info, shared ones once and per-line ones stacked.

        Args:
            info: ``{agent: {field: array}}`` as ``MultiGateEnv.step`` returns it.

        Returns:
            The shared fields (()) taken from the first agent, and ``amps`` (n_lines, K), ``excess``
            and ``cost`` (n_lines,) stacked in ``agents`` order.
        """
        first = info[self.agents[0]]
        out = {k: first[k] for k in _SHARED if k in first}
        for k in _PER_LINE:
            if k in first:
                out[k] = jnp.stack([info[a][k] for a in self.agents])
        return out

    def rollout_stats(self, info: Mapping) -> dict:
        """``min_JT``: the lowest J_T any environment reached during the rollout (J_T is shared)."""
        return {"min_JT": jnp.min(info[self.agents[0]]["JT"])}
