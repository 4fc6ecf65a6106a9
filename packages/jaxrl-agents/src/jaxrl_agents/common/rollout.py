"""Collecting on-policy experience, and the rollout half of the PPO and TRPO updates.

Collection is a `lax.scan` over the vmapped auto-resetting environment step; the rollout half of
an update is rollout + GAE.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .contracts import evaluation_of
from .gae import gae
from .losses import standardize

__all__ = ["Transition", "collect", "flatten_time_env", "rollout_stats", "make_rollout_phase"]


class Transition(NamedTuple):
    """One step of every environment; in a rollout each leaf has leading axes (T, N).

    Attributes:
        obs: (T, N, obs_dim) observation the action was taken in.
        action: (T, N, *action_shape) unclipped sampled action.
        logp: (T, N) log-probability of `action` at collection time.
        value: (T, N) V(obs) at collection time.
        reward: (T, N) float32 reward, with the truncation bootstrap added.
        done: (T, N) bool, episode ended at this step (terminated or truncated).
        info: the environment's info dict without ``final_obs``; leaves (T, N, ...).
    """

    obs: jax.Array
    action: jax.Array
    logp: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array
    info: dict


def collect(model, env, env_params, params, env_state, obs, key, n_steps: int, gamma: float,
            bootstrap_truncation: bool = True):
    """Roll the current policy out for `n_steps` in every environment.

    Truncation bootstrap (Stable-Baselines3 behaviour): when an episode is cut short (truncated and
    not terminated) the reward of that step gets + gamma * V(final_obs), the value of the last
    observation of the cut episode, instead of treating the lost future as zero. With
    ``bootstrap_truncation=False`` the reward is left as the env gave it, and so is the info
    (IPPO's GAE bootstraps from each transition's own next observation instead, which its
    `ippo.agent_axis.JointEnv` puts in the info).

    The policy and the environment may be pytree-valued: IPPO passes `ippo.agent_axis.AgentAxis`
    and `ippo.agent_axis.JointEnv`, whose observations are dicts over agents and whose rewards and
    flags carry a trailing agent axis (N, A).

    Args:
        model: `ActorCritic`.
        env: functional environment (docs/contracts.md).
        env_params: environment parameter pytree (shared by all N environments).
        params: network parameters ``{"actor", "critic"}``.
        env_state: (N, ...) batched environment state.
        obs: (N, obs_dim) current observations.
        key: PRNG key.
        n_steps: T, steps per environment.
        gamma: discount of the bootstrap.
        bootstrap_truncation: add the truncation bootstrap (and take ``final_obs`` out of the
            info).

    Returns:
        ((env_state, obs, key) after the rollout, Transition with leaves (T, N, ...)).
    """
    v_step = jax.vmap(env.step_autoreset, in_axes=(0, 0, 0, None))

    def body(carry, _):
        env_state, obs, key = carry
        key, k_act, k_env = jax.random.split(key, 3)
        action, logp = model.sample(params["actor"], obs, k_act)
        value = model.value(params["critic"], obs)
        n = jax.tree_util.tree_leaves(obs)[0].shape[0]
        next_obs, env_state, reward, term, trunc, info = v_step(
            jax.random.split(k_env, n), env_state, action, env_params)
        info = dict(info)
        if bootstrap_truncation:
            final_obs = info.pop("final_obs")
            bootstrap = model.value(params["critic"], final_obs)
            reward = reward.astype(jnp.float32) + gamma * bootstrap * (trunc & ~term)
        tr = Transition(obs, action, logp, value, reward, term | trunc, info)
        return (env_state, next_obs, key), tr

    return jax.lax.scan(body, (env_state, obs, key), None, length=n_steps)


def flatten_time_env(x: jax.Array) -> jax.Array:
    """(T, N, ...) -> (T * N, ...)."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def rollout_stats(traj: Transition, env=None) -> dict[str, Any]:
    """Scalar diagnostics of a rollout: mean_reward, frac_done, and the env's own.

    The env's own are ``env.evaluation.rollout_stats`` of the rollout's info (docs/contracts.md).
    """
    stats = {"mean_reward": traj.reward.mean(), "frac_done": traj.done.astype(jnp.float32).mean()}
    if env is not None:
        stats.update(evaluation_of(env).rollout_stats(traj.info))
    return stats


def make_rollout_phase(model, env, n_steps: int, gamma: float, gae_lambda: float,
                       normalize_advantage: bool = False):
    """The rollout half of a PPO/TRPO update, for one seed (pure; the trainer vmaps it over seeds).

    ``rollout_phase(state, env_params) -> (state, (data, stats))`` collects `n_steps` in each of
    the state's environments with its policy, computes GAE bootstrapped with V(last obs), and
    returns the state advanced past the rollout (environments, observations, key) with

    - data: dict of (n_steps * n_envs, ...) arrays obs, action, logp, adv, ret;
    - stats: `rollout_stats` of the rollout.

    Args:
        model: `ActorCritic`.
        env: functional environment.
        n_steps: steps per environment.
        gamma: discount factor.
        gae_lambda: GAE lambda.
        normalize_advantage: standardise `adv` over the whole rollout (TRPO; PPO and IPPO
            standardise per minibatch in the loss instead).
    """

    def rollout_phase(state, env_params):
        (env_state, obs, key), traj = collect(model, env, env_params, state.params,
                                              state.env_state, state.obs, state.key, n_steps, gamma)
        last_value = model.value(state.params["critic"], obs)
        adv, ret = gae(traj.reward, traj.value, traj.done, last_value, gamma, gae_lambda)
        data = {"obs": traj.obs, "action": traj.action, "logp": traj.logp, "adv": adv, "ret": ret}
        data = jax.tree_util.tree_map(flatten_time_env, data)
        if normalize_advantage:
            data["adv"] = standardize(data["adv"])
        state = state._replace(env_state=env_state, obs=obs, key=key)
        return state, (data, rollout_stats(traj, env))

    return rollout_phase
