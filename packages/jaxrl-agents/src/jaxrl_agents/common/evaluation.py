"""Evaluation protocol: one deterministic episode on the environment's evaluation params.

`evaluate_episode` is a pure function (jit/vmap it): mean actions, ``env.eval_params`` (the nominal
device, no drift), a fixed number of scanned steps (``env.max_episode_steps``) with an ``alive`` mask
recorded *before* each step, so the step that ends the episode counts as alive. Once the episode has
ended (terminated or truncated) the state is frozen, so the masked tail stays finite.

What is recorded besides reward, alive and action, how it is summarised, printed and ranked is the
environment's own description, ``env.evaluation`` (the `contracts.Evaluation` protocol); an
environment without one gets the generic record (return and length). `eval_summary` and
`format_eval_line` take that description, so any evaluator (e.g. sb3-bridge's Gymnasium loop) prints
what the trainer prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .contracts import Evaluation, ReturnEvaluation, evaluation_of

__all__ = ["evaluate_episode", "eval_summary", "format_eval_line", "score_to_minimise",
           "env_fields", "EVAL_PREFIX"]

# Summary fields are written as eval_<name>: eval_return, eval_len, then the env's fields.
EVAL_PREFIX = "eval_"


def evaluate_episode(model, actor_params, env, env_params, key) -> dict:
    """Run one deterministic episode.

    Args:
        model: `ActorCritic` (or any policy with its ``mode``, e.g. IPPO's
            `ippo.agent_axis.AgentAxis` over the agents of a `ippo.agent_axis.JointEnv`).
        actor_params: ``params["actor"]``.
        env: functional environment.
        env_params: usually ``env.eval_params``.
        key: PRNG key for reset / step (deterministic environments ignore it).

    Returns:
        dict of arrays with leading axis T = env.max_episode_steps: "reward" (T,), "alive" (T,) bool,
        "action" (T, *action_shape) (unclipped mean actions), and what ``env.evaluation.record``
        returns for each step's info (T, ...) (nothing more for an env without a description).
    """
    record_info = evaluation_of(env).record
    k_reset, k_steps = jax.random.split(key)
    obs, state = env.reset(k_reset, env_params)

    def body(carry, k):
        obs, state, alive = carry
        action = model.mode(actor_params, obs)
        next_obs, next_state, reward, term, trunc, info = env.step(k, state, action, env_params)
        record = dict(record_info(info))
        record.update(reward=reward, alive=alive, action=action)
        # any(): an env with per-agent flags (IPPO's JointEnv) ends when any agent's episode does.
        still = alive & ~jnp.any(term | trunc)
        # Freeze the finished episode instead of stepping past its end.
        next_state = jax.tree_util.tree_map(lambda a, b: jnp.where(still, a, b), next_state, state)
        next_obs = jax.tree_util.tree_map(lambda a, b: jnp.where(still, a, b), next_obs, obs)
        return (next_obs, next_state, still), record

    keys = jax.random.split(k_steps, env.max_episode_steps)
    _, episode = jax.lax.scan(body, (obs, state, jnp.asarray(True)), keys)
    return episode


def eval_summary(episode: Mapping[str, np.ndarray],
                 evaluation: Evaluation | None = None) -> dict[str, float]:
    """Summary fields of one recorded episode.

    Args:
        episode: arrays with leading axis T: "reward" (T,), "alive" (T,) bool (True for the steps of
            the episode, including the one that ended it), and what the env records.
        evaluation: the env's description (`contracts.evaluation_of(env)`); None: generic only.

    Returns:
        eval_return = sum(reward * alive); eval_len = sum(alive); then ``eval_<name>`` for every
        field of ``evaluation.summarise(episode)``.
    """
    alive = np.asarray(episode["alive"], bool)
    reward = np.asarray(episode["reward"], np.float64)
    out = {"eval_return": float(np.sum(np.where(alive, reward, 0.0))),
           "eval_len": int(alive.sum())}
    if evaluation is not None:
        for k, v in evaluation.summarise(episode).items():
            out[EVAL_PREFIX + k] = v
    return out


def env_fields(summary: Mapping[str, float]) -> dict[str, float]:
    """The env's part of an `eval_summary` (prefix stripped; return and length left out)."""
    return {k[len(EVAL_PREFIX):]: v for k, v in summary.items()
            if k.startswith(EVAL_PREFIX) and k not in ("eval_return", "eval_len")}


def score_to_minimise(summary: Mapping[str, float], score: str, score_mode: str) -> float:
    """The ranking value of an evaluation, as a number to minimise (NaN: cannot rank).

    Args:
        summary: `eval_summary` fields (or a progress row's, as strings).
        score: the env's `Evaluation.score` ("return" or one of its fields).
        score_mode: the env's `Evaluation.score_mode`, "min" / "max".
    """
    value = summary.get(EVAL_PREFIX + score)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if score_mode == "min" else -value


def format_eval_line(step: int, wall: float, summary: Mapping[str, float],
                     evaluation: Evaluation | None = None) -> str:
    """One human line: ``[step] wall R=<return>`` then the env's own line of its fields.

    The env's line is ``evaluation.format``, given the summary without the ``eval_`` prefix.
    """
    parts = [f"[{step:>10d}] {wall:7.0f}s", f"R={summary['eval_return']:9.3f}"]
    extra = (evaluation or ReturnEvaluation()).format(env_fields(summary))
    if extra:
        parts.append(extra)
    return "  ".join(parts)
