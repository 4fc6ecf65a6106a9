"""Evaluation protocol (spec 5.6): one deterministic episode on the environment's evaluation params.

`evaluate_episode` is a pure function (jit/vmap it): mean actions, ``env.eval_params`` (the nominal
device, no drift), a fixed number of scanned steps (``env.max_episode_steps``) with an ``alive`` mask
recorded *before* each step, so the step that ends the episode counts as alive. Once the episode has
ended (terminated or truncated) the state is frozen, so the masked tail stays finite.

`eval_summary` turns one recorded episode (numpy) into the progress-row fields; it only needs the
keys "reward" and "alive", and adds the gate fields when the episode has JT / t / unitarity /
concurrence, so any evaluator (e.g. sb3-bridge's Gymnasium loop) can print the same summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["evaluate_episode", "eval_summary", "format_eval_line", "EVAL_FIELDS"]

# Summary fields, in the order they are printed (gate fields only when the env reports them).
EVAL_FIELDS = ("eval_return", "eval_len", "eval_JT_min", "eval_t_JT_min", "eval_JT_end",
               "eval_1mU_at_best", "eval_t_first_PE")

# Concurrence 1 means the gate is a perfect entangler (inside the PE polyhedron).
PE_CONCURRENCE = 1.0


def evaluate_episode(model, actor_params, env, env_params, key) -> dict:
    """Run one deterministic episode.

    Args:
        model: `ActorCritic`.
        actor_params: ``params["actor"]``.
        env: functional environment.
        env_params: usually ``env.eval_params``.
        key: PRNG key for reset / step (deterministic environments ignore it).

    Returns:
        dict of arrays with leading axis T = env.max_episode_steps: "reward" (T,), "alive" (T,) bool,
        "action" (T, *action_shape) (unclipped mean actions), and every info leaf (T, ...) except
        "final_obs" (for the gate env: JT, concurrence, unitarity, tv_penalty, oob, t, amps).
    """
    k_reset, k_steps = jax.random.split(key)
    obs, state = env.reset(k_reset, env_params)

    def body(carry, k):
        obs, state, alive = carry
        action = model.mode(actor_params, obs)
        next_obs, next_state, reward, term, trunc, info = env.step(k, state, action, env_params)
        record = {k_: v for k_, v in dict(info).items() if k_ != "final_obs"}
        record.update(reward=reward, alive=alive, action=action)
        still = alive & ~(term | trunc)
        # Freeze the finished episode instead of stepping past its end.
        next_state = jax.tree_util.tree_map(lambda a, b: jnp.where(still, a, b), next_state, state)
        next_obs = jnp.where(still, next_obs, obs)
        return (next_obs, next_state, still), record

    keys = jax.random.split(k_steps, env.max_episode_steps)
    _, episode = jax.lax.scan(body, (obs, state, jnp.asarray(True)), keys)
    return episode


def _nan_if_empty(fn, x):
    return float(fn(x)) if x.size else math.nan


def eval_summary(episode: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Summary fields of one recorded episode.

    Args:
        episode: arrays with leading axis T: "reward" (T,), "alive" (T,) bool (True for the steps of
            the episode, including the one that ended it); optional "JT", "t" (ns, end of the step),
            "unitarity", "concurrence" (T,).

    Returns:
        eval_return = sum(reward * alive); eval_len = sum(alive); and when the keys exist:
        eval_JT_min (min J_T over alive steps, NaN-aware), eval_t_JT_min (t of that step),
        eval_JT_end (J_T at the last alive step), eval_1mU_at_best (1 - U at the best step),
        eval_t_first_PE (t of the first alive step with concurrence >= 1, NaN if none).
    """
    alive = np.asarray(episode["alive"], bool)
    reward = np.asarray(episode["reward"], np.float64)
    out = {"eval_return": float(np.sum(np.where(alive, reward, 0.0))),
           "eval_len": int(alive.sum())}
    idx = np.flatnonzero(alive)
    if "JT" in episode:
        jt = np.asarray(episode["JT"], np.float64)[idx]
        if jt.size and not np.all(np.isnan(jt)):
            best = idx[int(np.nanargmin(jt))]
            out["eval_JT_min"] = float(np.asarray(episode["JT"])[best])
            if "t" in episode:
                out["eval_t_JT_min"] = float(np.asarray(episode["t"])[best])
            if "unitarity" in episode:
                out["eval_1mU_at_best"] = float(1.0 - np.asarray(episode["unitarity"])[best])
        else:
            out["eval_JT_min"] = math.nan
            if "t" in episode:
                out["eval_t_JT_min"] = math.nan
            if "unitarity" in episode:
                out["eval_1mU_at_best"] = math.nan
        out["eval_JT_end"] = float(np.asarray(episode["JT"])[idx[-1]]) if idx.size else math.nan
    if "concurrence" in episode and "t" in episode:
        c = np.asarray(episode["concurrence"], np.float64)[idx]
        pe = np.flatnonzero(c >= PE_CONCURRENCE)
        out["eval_t_first_PE"] = float(np.asarray(episode["t"])[idx[pe[0]]]) if pe.size else math.nan
    return out


def format_eval_line(step: int, wall: float, summary: Mapping[str, float]) -> str:
    """One human line: ``[step] wall R= minJT=..@..ns firstPE=..ns 1-U=..`` (fields present only).

    ``firstPE=none yet`` when the episode never reached a perfect entangler (eval_t_first_PE NaN).
    """
    parts = [f"[{step:>10d}] {wall:7.0f}s", f"R={summary['eval_return']:9.3f}"]
    if "eval_JT_min" in summary:
        s = f"minJT={summary['eval_JT_min']:.3e}"
        if "eval_t_JT_min" in summary:
            s += f"@{summary['eval_t_JT_min']:.1f}ns"
        parts.append(s)
    if "eval_t_first_PE" in summary:
        t_pe = summary["eval_t_first_PE"]
        # NaN means no step of the episode reached a perfect entangler: say so in words.
        parts.append("firstPE=none yet" if math.isnan(t_pe) else f"firstPE={t_pe:.2f}ns")
    if "eval_1mU_at_best" in summary:
        parts.append(f"1-U={summary['eval_1mU_at_best']:.1e}")
    return "  ".join(parts)
