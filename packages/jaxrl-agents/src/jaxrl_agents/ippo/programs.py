"""IPPO / IPPO-Lagrangian on `n_envs` copies of a functional multi-agent core, as pure programs.

One update is PPO's: `common.rollout.collect` over the agent axis (`agent_axis.AgentAxis` and
`agent_axis.JointEnv`), then, per agent group, PPO's learning step vmapped over the group's agents
(`learn.make_group_learn`). IPPO-Lagrangian first takes the dual step (`losses.dual_step`: once per
update, only where an episode completed, against the completed undiscounted episodic cost).
Evaluation is `common.evaluation.evaluate_episode` over the same views. `run.algorithms` compiles
these programs over a leading seed axis.

Partial episodes carry across updates (`IPPOState.ep_return`, ``ep_cost``); an environment's episode
ends when any agent's does, which cuts every agent's trace there.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..common.evaluation import evaluate_episode
from ..common.rollout import collect
from ..common.state import stack_trees
from .agent_axis import AgentAxis, JointEnv, core_spaces, group_agents, params_by_agent
from .learn import init_group_state, learn_groups, make_group_learn, steps_per_update
from .losses import dual_step

__all__ = ["IPPOState", "Programs", "programs", "group_params", "agent_params"]


class IPPOState(NamedTuple):
    """The IPPO train state of one seed (a pytree; `run.checkpoint` saves it as it is).

    Attributes:
        params: ``{"actor": [...], "critic": [...]}`` (+ ``"cost_critic"`` for IPPO-Lagrangian),
            one entry per agent group, each stacked over the group's G agents: ``(G, ...)``.
            Keyed by network part first, so ``params["actor"]`` is every actor, as in PPO.
        opt_state: per group, the Adam state of the group's parameters (leaves ``(G, ...)``).
        env_state: the N environments' states (leaves ``(N, ...)``).
        obs: agent -> ``(N, obs_dim)`` float32 current observations.
        masks: agent -> ``(N, n_outputs)`` bool masks of those observations (None: continuous).
        ep_return, ep_cost: ``(A, N)`` running totals of the unfinished episodes.
        lam: ``(A,)`` Lagrange multipliers (zeros for IPPO).
        key: PRNG key.
        update: ``()`` int32, updates done.
    """

    params: dict
    opt_state: list
    env_state: Any
    obs: dict
    masks: dict
    ep_return: jax.Array
    ep_cost: jax.Array
    lam: jax.Array
    key: jax.Array
    update: jax.Array


def group_params(params: dict, gi: int) -> dict:
    """Group `gi`'s parameters ``{"actor", "critic", ...}`` from `IPPOState.params`."""
    return {k: v[gi] for k, v in params.items()}


def _by_part(per_group: list) -> dict:
    return {k: [gp[k] for gp in per_group] for k in per_group[0]}


def _episode_totals(ep_ret, ep_cost, reward, cost, done):
    """Running and completed episode totals over a rollout, accumulated step by step.

    Args:
        ep_ret: (A, N) returns of the episodes running before the rollout.
        ep_cost: (A, N) their costs.
        reward: (T, A, N) rewards.
        cost: (T, A, N) costs.
        done: (T, A, N) the environment's episode ended at this step.

    Returns:
        (ep_ret, ep_cost) after the rollout, and the (A, N) sums of the completed episodes'
        returns, costs and their count.
    """
    def step(c, x):
        ep_ret, ep_cost, done_ret, done_cost, n_done = c
        r, k, d = x
        ep_ret, ep_cost = ep_ret + r, ep_cost + k
        done_ret = done_ret + jnp.where(d, ep_ret, 0.0)
        done_cost = done_cost + jnp.where(d, ep_cost, 0.0)
        n_done = n_done + d.astype(jnp.float32)
        return (jnp.where(d, 0.0, ep_ret), jnp.where(d, 0.0, ep_cost), done_ret, done_cost,
                n_done), None

    z = jnp.zeros_like(ep_ret)
    c, _ = jax.lax.scan(step, (ep_ret, ep_cost, z, z, z), (reward, cost, done))
    return c


class Programs(NamedTuple):
    """The programs of one (core, config, algorithm), one seed.

    Attributes:
        agent_spaces: agent -> `AgentSpaces`, in the core's agent order.
        groups: the agent groups (one network definition each).
        apps_per_update: optimiser applications per update.
        init: (seed_key, params_env) -> `IPPOState` (eager; the key splits as the ParallelEnv
            path's, so a seed gives the same initial networks).
        update: (state, params_env, total_apps) -> (state, stats {name: (A,)}).
        evaluate: ``(IPPOState.params["actor"], params_env, key) -> episode``.

        update and evaluate are not jitted: the trainer maps or vmaps them over seeds first.
    """

    agent_spaces: dict
    groups: list
    apps_per_update: int
    init: Any
    update: Any
    evaluate: Any


def programs(core, cfg, lagrangian: bool) -> Programs:
    """The programs of one seed (`Programs`) of a functional multi-agent core.

    `cfg` is the algorithm's config (the trainer's, whose budget it does not read). The stats
    of ``update`` are per agent ``(A,)``: the learning step's, mean_reward, mean_cost, episodes,
    episode_return and, for IPPO-Lagrangian, the dual step's diagnostics.
    """
    agent_spaces = core_spaces(core, cfg)
    agents = tuple(core.agents)
    groups = group_agents(agent_spaces)
    axis, env = AgentAxis(tuple(groups)), JointEnv(core, agent_spaces)
    group_learns = [make_group_learn(g.model, cfg, lagrangian) for g in groups]
    apps_per_update = steps_per_update(cfg.n_envs * cfg.n_steps, cfg)

    def init(seed_key, params_env):
        k_init, key, _ = jax.random.split(seed_key, 3)
        g_params, g_opt = init_group_state(agent_spaces, agents, groups, k_init, cfg, lagrangian)
        lam0 = (jnp.full((len(agents),), cfg.lagrangian_init, jnp.float32) if lagrangian
                else jnp.zeros((len(agents),), jnp.float32))
        return _init_env(key, params_env, _by_part(g_params), g_opt, lam0)

    @jax.jit
    def _init_env(key, params_env, params, opt, lam0):
        k_reset, key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_reset, cfg.n_envs), params_env)
        zeros = jnp.zeros((len(agents), cfg.n_envs), jnp.float32)
        return IPPOState(params, opt, state, obs["obs"], _masks(obs), zeros, zeros, lam0, key,
                         jnp.zeros((), jnp.int32))

    def _masks(obs):  # None for continuous agents, as IPPOState.masks
        return {a: obs["mask"].get(a) for a in agents}

    def update(s: IPPOState, params_env, total_apps):
        key, k_roll, k_upd = jax.random.split(s.key, 3)
        obs = {"obs": s.obs, "mask": {a: m for a, m in s.masks.items() if m is not None}}
        (env_state, obs, _), traj = collect(axis, env, params_env, s.params, s.env_state, obs,
                                            k_roll, cfg.n_steps, cfg.gamma,
                                            bootstrap_truncation=False)
        rewards, costs = traj.info["reward"], traj.info["cost"]  # {agent: (T, N)}
        ep_ret, ep_cost, done_ret, done_cost, n_done = _episode_totals(
            s.ep_return, s.ep_cost, jnp.stack([rewards[a] for a in agents], axis=1),
            jnp.stack([costs[a] for a in agents], axis=1), jnp.swapaxes(traj.done, 1, 2))
        completed = n_done.sum(axis=1)  # (A,) episodes completed in this update, over envs
        stats = {"mean_reward": jnp.stack([rewards[a].mean() for a in agents]),
                 "mean_cost": jnp.stack([costs[a].mean() for a in agents]),
                 "episodes": completed,
                 "episode_return": done_ret.sum(axis=1) / jnp.where(completed > 0, completed,
                                                                     jnp.nan)}
        lam = s.lam
        if lagrangian:
            lam, diag = dual_step(lam, done_cost.sum(axis=1), completed, cfg)
            stats.update(diag)

        def agent_batch(a):
            i = agents.index(a)
            b = {"obs": traj.obs["obs"][a], "next_obs": traj.info["next_obs"][a],
                 "action": traj.action[a], "logp": traj.logp[a], "reward": rewards[a],
                 "cost": costs[a], "terminated": traj.info["terminated"][..., i],
                 "done": traj.done[..., i]}
            if a in traj.obs["mask"]:
                b["mask"] = traj.obs["mask"][a]
            return b

        batches = [stack_trees([agent_batch(a) for a in g.agents]) for g in groups]
        new_params, new_opt, learn_stats = learn_groups(
            group_learns, groups, agents, [group_params(s.params, gi) for gi in range(len(groups))],
            s.opt_state, batches, lam, k_upd, s.update * apps_per_update, total_apps)
        stats.update(learn_stats)
        return IPPOState(_by_part(new_params), new_opt, env_state, obs["obs"], _masks(obs), ep_ret,
                         ep_cost, lam, key, s.update + 1), stats

    def evaluate(actors, params_env, key):
        """One deterministic episode of every agent (`evaluate_episode` over the agent axis).

        Returns:
            dict of (T, ...) arrays: the team view ``"reward"`` (mean over agents), ``"alive"``
            and ``"action"`` (every agent's flattened action, concatenated in agent order, as
            float32); what the core's evaluation description records; and per agent
            ``"<agent>/reward"``, ``"<agent>/action"``.
        """
        # A batch of one environment, as the rollout's (the same shapes, the same numbers).
        episode = jax.vmap(evaluate_episode, in_axes=(None, None, None, None, 0))(
            axis, actors, env, params_env, key[None])
        episode = jax.tree_util.tree_map(lambda x: x[0], episode)
        rewards, actions = episode.pop("reward"), episode.pop("action")
        for i, a in enumerate(agents):
            episode[f"{a}/reward"] = rewards[:, i]
            episode[f"{a}/action"] = actions[a]
        episode["reward"] = rewards.mean(axis=-1)
        episode["action"] = jnp.concatenate(
            [actions[a].reshape(actions[a].shape[0], -1).astype(jnp.float32) for a in agents],
            axis=1)
        return episode

    return Programs(agent_spaces, groups, apps_per_update, init, update, evaluate)


def agent_params(prog: Programs, params: dict) -> dict:
    """Agent -> its own parameters ``{"actor", "critic", ...}`` from `IPPOState.params`."""
    return params_by_agent(prog.groups, [group_params(params, gi) for gi in range(len(prog.groups))])
