"""The compiled IPPO / IPPO-Lagrangian path: `n_envs` copies of a functional multi-agent core and the
whole update (rollout, dual step, GAE, every agent's PPO epochs) in one jitted function.

The functional multi-agent core (pure functions over dicts keyed by agent id, the multi-agent
analogue of the step contract in docs/contracts.md)::

    core.agents                                  tuple of agent ids
    core.observation_space(agent)                flat (1-D) Box; core.action_space(agent)
    core.default_params                          pytree of arrays
    core.reset(key, params)                      -> (obs {agent: (obs_dim,)}, state)
    core.step_autoreset(key, state, actions {agent: action}, params)
        -> (obs, state, rewards {agent: ()}, terminated {agent: ()}, truncated {agent: ()}, info)

`info` carries per-agent fields either field-major (``info["cost"][agent]``) or agent-major
(``info[agent]["cost"]``): ``final_obs`` (required: the last observation of a finished episode,
equal to obs otherwise), ``cost`` (optional, default 0) and ``action_mask`` (optional: the mask of
the *returned* observation; the mask of the first observation comes from
``core.reset_info(state)`` or ``core.action_masks(state)`` if the core has either, else everything
is allowed). quantgate_env.marl.MultiGateEnv is such a core; a ParallelEnv that exposes its core as
``env.core`` is trained on it when ``n_envs > 1``.

Semantics are the Python path's: the same one-agent update (update.make_agent_update), the
same dual update (losses.dual_step) (once per update, before the actor step, only where an episode completed, against
the completed undiscounted episodic cost), true next observations (final_obs) for GAE with separate
terminated/done flags, and partial episodes carried across updates. An environment's episode ends
when any of its agents is done (the core resets the whole environment), which cuts every agent's
trace there.

Budget: `timesteps` is rounded down to whole updates of ``n_steps * n_envs`` environment steps
(static shapes; at least one update is required).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from .losses import dual_step
from .rollout import group_agents, unstack_params
from .spaces import AgentSpaces
from .update import init_group_state, make_agent_update, steps_per_update

__all__ = ["train_compiled", "make_compiled_ippo", "info_field"]


def info_field(info: Mapping, agent, name: str):
    """Per-agent field of a core's info, field-major or agent-major; None if absent."""
    if name in info and isinstance(info[name], Mapping):
        return info[name].get(agent)
    sub = info.get(agent)
    if isinstance(sub, Mapping):
        return sub.get(name)
    return None


def _core_spaces(core, cfg) -> dict:
    agents = tuple(core.agents)
    if not agents or len(set(agents)) != len(agents):
        raise ValueError(f"env.agents: expected unique agent ids, got {agents!r}")
    out = {}
    for a in agents:
        obs_space = core.observation_space(a)
        if not isinstance(obs_space, spaces.Box) or len(obs_space.shape) != 1:
            raise ValueError(f"env.observation_space({a!r}): the compiled path needs a 1-D Box "
                             f"(flat observations), got {obs_space!r}")
        out[a] = AgentSpaces.build(a, obs_space, core.action_space(a), cfg.hidden, cfg.activation)
    return out


def _to_env_action(sp: AgentSpaces, action):
    """jnp version of AgentSpaces.to_env for one environment's action (no batch axis)."""
    space = sp.action_space
    if isinstance(space, spaces.Discrete):
        return action + int(space.start)
    if isinstance(space, spaces.MultiDiscrete):
        return action.reshape(space.shape) + jnp.asarray(space.start)
    return jnp.clip(action.reshape(space.shape), space.low, space.high)


def make_compiled_ippo(core, cfg, lagrangian: bool, agent_spaces: dict):
    """Build (init_carry, update) for the compiled path.

    ``update(carry, params_env, update_index, total_apps) -> (carry, stats)`` is pure: jit it.
    carry = (group_params, group_opt, env_state (N...), obs {agent: (N, obs_dim)},
    masks {agent: (N, n) or None}, ep_return (A, N), ep_cost (A, N), lam (A,), key).
    Stats: per agent (A,) arrays of the update's losses plus mean_reward, mean_cost, episodes,
    episode_return, cost_return_budget, constraint_violation, dual_update_applied.
    """
    agents = tuple(core.agents)
    groups = group_agents(agent_spaces)
    n_envs, n_steps = cfg.n_envs, cfg.n_steps
    agent_updates = [jax.vmap(make_agent_update(g.model, cfg, lagrangian),
                              in_axes=(0, 0, 0, 0, 0, None, None)) for g in groups]
    apps_per_update = steps_per_update(n_envs * n_steps, cfg)
    v_step = jax.vmap(core.step_autoreset, in_axes=(0, 0, 0, None))

    def masks_from(info, state):
        """Masks of the current observations; `info` None means "just reset": the core's
        reset_info(state) or action_masks(state), if it has either, else all allowed."""
        if info is None and callable(getattr(core, "reset_info", None)):
            info = jax.vmap(core.reset_info)(state)
        elif info is None and callable(getattr(core, "action_masks", None)):
            masks = jax.vmap(core.action_masks)(state)
            info = {"action_mask": masks}
        out = {}
        for a in agents:
            if not agent_spaces[a].model.is_discrete:
                out[a] = None
                continue
            m = None if info is None else info_field(info, a, "action_mask")
            n = agent_spaces[a].model.head.n_outputs
            out[a] = (jnp.ones((n_envs, n), bool) if m is None
                      else jnp.asarray(m).reshape(n_envs, n).astype(bool))
        return out

    def init_carry(key, params_env, group_params, group_opt, lam0):
        k_reset, key = jax.random.split(key)
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(k_reset, n_envs),
                                                            params_env)
        obs = {a: obs[a].astype(jnp.float32) for a in agents}
        zeros = jnp.zeros((len(agents), n_envs), jnp.float32)
        return (group_params, group_opt, state, obs, masks_from(None, state), zeros,
                zeros, lam0, key)

    def rollout(group_params, state, obs, masks, ep_ret, ep_cost, key, params_env):
        def body(c, _):
            state, obs, masks, ep_ret, ep_cost, done_ret, done_cost, n_done, key = c
            key, k_act, k_env = jax.random.split(key, 3)
            net_act, logp = {}, {}
            for gi, (g, p) in enumerate(zip(groups, group_params)):
                obs_g = jnp.stack([obs[a] for a in g.agents])  # (G, N, obs_dim)
                keys = jax.random.split(jax.random.fold_in(k_act, gi), len(g.agents) * n_envs)
                keys = keys.reshape((len(g.agents), n_envs) + keys.shape[1:])
                if g.model.is_discrete:
                    mask_g = jnp.stack([masks[a] for a in g.agents])
                    act, lp = jax.vmap(jax.vmap(g.model.sample, in_axes=(None, 0, 0, 0)))(
                        p["actor"], obs_g, keys, mask_g)
                else:
                    act, lp = jax.vmap(jax.vmap(g.model.sample, in_axes=(None, 0, 0)))(
                        p["actor"], obs_g, keys)
                for i, a in enumerate(g.agents):
                    net_act[a], logp[a] = act[i], lp[i]
            env_act = {a: jax.vmap(functools.partial(_to_env_action, agent_spaces[a]))(net_act[a])
                       for a in agents}
            obs2, state, rew, term, trunc, info = v_step(jax.random.split(k_env, n_envs), state,
                                                         env_act, params_env)
            env_done = functools.reduce(jnp.logical_or, [term[a] | trunc[a] for a in agents])
            final = {a: info_field(info, a, "final_obs") for a in agents}
            cost = {}
            for a in agents:
                c_a = info_field(info, a, "cost")
                cost[a] = (jnp.zeros((n_envs,), jnp.float32) if c_a is None
                           else jnp.asarray(c_a, jnp.float32).reshape(n_envs))
            rew_arr = jnp.stack([jnp.asarray(rew[a], jnp.float32) for a in agents])  # (A, N)
            cost_arr = jnp.stack([cost[a] for a in agents])
            ep_ret, ep_cost = ep_ret + rew_arr, ep_cost + cost_arr
            done_ret = done_ret + jnp.where(env_done, ep_ret, 0.0)
            done_cost = done_cost + jnp.where(env_done, ep_cost, 0.0)
            n_done = n_done + env_done.astype(jnp.float32)
            ep_ret = jnp.where(env_done, 0.0, ep_ret)
            ep_cost = jnp.where(env_done, 0.0, ep_cost)
            tr = {a: {"obs": obs[a], "next_obs": final[a].astype(jnp.float32), "action": net_act[a],
                      "logp": logp[a], "reward": rew_arr[i], "cost": cost_arr[i],
                      "terminated": term[a], "done": env_done}
                  for i, a in enumerate(agents)}
            for a in agents:
                if masks[a] is not None:
                    tr[a]["mask"] = masks[a]
            obs2 = {a: obs2[a].astype(jnp.float32) for a in agents}
            masks2 = masks_from(info, state)
            return (state, obs2, masks2, ep_ret, ep_cost, done_ret, done_cost, n_done, key), tr

        z = jnp.zeros((len(agents), n_envs), jnp.float32)
        c0 = (state, obs, masks, ep_ret, ep_cost, z, z, z, key)
        c, traj = jax.lax.scan(body, c0, None, length=n_steps)
        return c, traj

    def update(carry, params_env, update_index, total_apps):
        group_params, group_opt, state, obs, masks, ep_ret, ep_cost, lam, key = carry
        key, k_roll, k_upd = jax.random.split(key, 3)
        (state, obs, masks, ep_ret, ep_cost, done_ret, done_cost, n_done, _), traj = rollout(
            group_params, state, obs, masks, ep_ret, ep_cost, k_roll, params_env)
        completed = n_done.sum(axis=1)  # (A,) episodes completed in this update, over envs
        stats = {"mean_reward": jnp.stack([traj[a]["reward"].mean() for a in agents]),
                 "mean_cost": jnp.stack([traj[a]["cost"].mean() for a in agents]),
                 "episodes": completed,
                 "episode_return": done_ret.sum(axis=1) / jnp.where(completed > 0, completed,
                                                                     jnp.nan)}
        if lagrangian:
            lam, diag = dual_step(lam, done_cost.sum(axis=1), completed, cfg)
            stats.update(diag)
        step0 = update_index * apps_per_update
        new_params, new_opt, per_agent = [], [], {}
        for gi, (g, upd) in enumerate(zip(groups, agent_updates)):
            idx = [agents.index(a) for a in g.agents]
            batch = {k: jnp.stack([traj[a][k] for a in g.agents]) for k in traj[g.agents[0]]}
            keys = jax.random.split(jax.random.fold_in(k_upd, gi), len(g.agents))
            p, o, st = upd(group_params[gi], group_opt[gi], batch, lam[jnp.asarray(idx)], keys,
                           step0, total_apps)
            new_params.append(p)
            new_opt.append(o)
            for k, v in st.items():
                per_agent.setdefault(k, [None] * len(agents))
                for j, a_i in enumerate(idx):
                    per_agent[k][a_i] = v[j]
        stats.update({k: jnp.stack(v) for k, v in per_agent.items()})
        carry = (new_params, new_opt, state, obs, masks, ep_ret, ep_cost, lam, key)
        return carry, stats

    return init_carry, update, groups, apps_per_update


def train_compiled(cfg, seed: int, lagrangian: bool, core, timesteps: int, progress_callback):
    """Train IPPO (IPPO-Lagrangian with ``lagrangian``) on `cfg.n_envs` copies of `core`.

    The core is traced with float64 enabled, as the PPO/TRPO trainer does (docs/contracts.md: the
    physics runs in float64, the caller of the functional API enables it); networks stay float32.

    Returns:
        (params {agent: parameters}, agent_spaces {agent: AgentSpaces}, history, steps taken (the
        budget rounded down to whole updates, summed over environments), final multipliers (A,)
        or None without ``lagrangian``, agents): what `train.IPPO` builds its result from.
    """
    with jax.enable_x64(True):
        return _train_compiled(cfg, seed, lagrangian, core, timesteps, progress_callback)


def _train_compiled(cfg, seed, lagrangian, core, timesteps, progress_callback):
    per_update = cfg.n_envs * cfg.n_steps
    n_updates = timesteps // per_update
    if n_updates < 1:
        raise ValueError(f"timesteps: the compiled path runs whole updates of n_envs * n_steps = "
                         f"{per_update} environment steps; expected at least that, got {timesteps}")
    agent_spaces, init_carry, update, groups, apps_per_update = _compiled(core, cfg,
                                                                          lagrangian)
    agents = list(agent_spaces)
    # Same key split as the Python path: the same seed gives the same initial parameters.
    k_init, k_run, _ = jax.random.split(jax.random.PRNGKey(seed), 3)
    group_params, group_opt = init_group_state(agent_spaces, agents, groups, k_init, cfg, lagrangian)
    lam0 = (jnp.full((len(agents),), cfg.lagrangian_init, jnp.float32) if lagrangian
            else jnp.zeros((len(agents),), jnp.float32))
    params_env = core.default_params
    carry = init_carry(k_run, params_env, group_params, group_opt, lam0)
    total_apps = n_updates * apps_per_update
    history = []
    for i in range(n_updates):
        carry, stats = update(carry, params_env, jnp.int32(i), jnp.int32(total_apps))
        stats = jax.device_get(stats)
        row = {}
        for j, a in enumerate(agents):
            r = {k: float(v[j]) for k, v in stats.items()}
            for k in ("dual_update_applied",):
                if k in r:
                    r[k] = bool(r[k])
            for k in ("episodes", "completed_episodes"):
                if k in r:
                    r[k] = int(r[k])
            row[a] = r
        step = (i + 1) * per_update
        history.append({"step": step, "agents": row})
        if progress_callback is not None:
            progress_callback(step, n_updates * per_update)
    group_params, lam = carry[0], np.asarray(carry[7])
    params = {}
    for g, p in zip(groups, group_params):
        for a, pa in zip(g.agents, unstack_params(p, len(g.agents))):
            params[a] = jax.device_get(pa)
    return (params, agent_spaces, history, n_updates * per_update, lam if lagrangian else None,
            agents)


@functools.lru_cache(maxsize=16)
def _compiled(core, cfg, lagrangian: bool):
    """Cached jitted programs per (core, config, algorithm): compiling is the expensive part, and
    the core and config are hashable (frozen dataclasses)."""
    agent_spaces = _core_spaces(core, cfg)
    init_carry, update, groups, apps = make_compiled_ippo(core, cfg, lagrangian, agent_spaces)
    return agent_spaces, jax.jit(init_carry), jax.jit(update, donate_argnums=0), groups, apps

