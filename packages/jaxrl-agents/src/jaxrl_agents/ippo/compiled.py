"""The compiled IPPO / IPPO-Lagrangian path: `n_envs` copies of a functional multi-agent core.

The whole update (rollout, dual step, GAE, every agent's PPO epochs) is one jitted function.

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
is allowed). quantgate_env.MultiGateEnv is such a core; a ParallelEnv that exposes its core as
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
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from ..common.contracts import evaluation_of
from .losses import dual_step
from .rollout import group_agents, unstack_params
from .spaces import AgentSpaces
from .update import init_group_state, make_agent_update, steps_per_update

__all__ = ["train_compiled", "make_compiled_ippo", "info_field", "IPPOState",
           "Program", "program", "core_spaces", "group_params", "agent_params", "history_row"]


def info_field(info: Mapping, agent, name: str):
    """Per-agent field of a core's info, field-major or agent-major; None if absent."""
    if name in info and isinstance(info[name], Mapping):
        return info[name].get(agent)
    sub = info.get(agent)
    if isinstance(sub, Mapping):
        return sub.get(name)
    return None


def core_spaces(core, cfg) -> dict:
    """Agent -> `AgentSpaces` of a functional core (1-D Box observations), ValueError otherwise."""
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
    """Jnp version of AgentSpaces.to_env for one environment's action (no batch axis)."""
    space = sp.action_space
    if isinstance(space, spaces.Discrete):
        return action + int(space.start)
    if isinstance(space, spaces.MultiDiscrete):
        return action.reshape(space.shape) + jnp.asarray(space.start)
    return jnp.clip(action.reshape(space.shape), space.low, space.high)


class IPPOState(NamedTuple):
    """The compiled IPPO train state of one seed (a pytree; `run.checkpoint` saves it as it is).

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


def make_compiled_ippo(core, cfg, lagrangian: bool, agent_spaces: dict):
    """Build the pure programs of the compiled path (jit them).

    Returns:
        ``(init, update, evaluate, groups, apps_per_update)``:
        ``init(seed_key, params_env) -> IPPOState`` (parameters from the same key split as the
        Python path, so a seed gives the same initial networks);
        ``update(state, params_env, total_apps) -> (state, stats)`` with stats per agent ``(A,)``
        arrays: the update's losses plus mean_reward, mean_cost, episodes, episode_return and,
        for IPPO-Lagrangian, the dual step's diagnostics;
        ``evaluate(actors, params_env, key) -> episode`` (``IPPOState.params["actor"]``).
    """
    agents = tuple(core.agents)
    groups = group_agents(agent_spaces)
    n_envs, n_steps = cfg.n_envs, cfg.n_steps
    agent_updates = [jax.vmap(make_agent_update(g.model, cfg, lagrangian),
                              in_axes=(0, 0, 0, 0, 0, None, None)) for g in groups]
    apps_per_update = steps_per_update(n_envs * n_steps, cfg)
    v_step = jax.vmap(core.step_autoreset, in_axes=(0, 0, 0, None))

    def masks_from(info, state, n=n_envs):
        """Masks of the current observations.

        `info` None means "just reset": the core's reset_info(state) or action_masks(state), if it has
        either, else all allowed.
        """
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
            k = agent_spaces[a].model.head.n_outputs
            out[a] = (jnp.ones((n, k), bool) if m is None
                      else jnp.asarray(m).reshape(n, k).astype(bool))
        return out

    def init(seed_key, params_env):
        # Same key split as the Python path: the same seed gives the same initial parameters.
        k_init, key, _ = jax.random.split(seed_key, 3)
        g_params, g_opt = init_group_state(agent_spaces, agents, groups, k_init, cfg, lagrangian)
        lam0 = (jnp.full((len(agents),), cfg.lagrangian_init, jnp.float32) if lagrangian
                else jnp.zeros((len(agents),), jnp.float32))
        return _init_env(key, params_env, _by_part(g_params), g_opt, lam0)

    @jax.jit
    def _init_env(key, params_env, params, opt, lam0):
        k_reset, key = jax.random.split(key)
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(k_reset, n_envs),
                                                            params_env)
        obs = {a: obs[a].astype(jnp.float32) for a in agents}
        zeros = jnp.zeros((len(agents), n_envs), jnp.float32)
        return IPPOState(params, opt, state, obs, masks_from(None, state), zeros, zeros, lam0,
                         key, jnp.zeros((), jnp.int32))

    def act(actors, obs, masks, key, deterministic):
        """Network actions {agent: (N, ...)} and log-probabilities of every group's agents.

        `actors` is ``IPPOState.params["actor"]``.
        """
        net_act, logp = {}, {}
        for gi, g in enumerate(groups):
            actor = actors[gi]
            obs_g = jnp.stack([obs[a] for a in g.agents])  # (G, N, obs_dim)
            mask_g = (jnp.stack([masks[a] for a in g.agents]) if g.model.is_discrete else None)
            if deterministic:
                act_g = jax.vmap(g.model.mode)(actor, obs_g, mask_g)
                lp = [None] * len(g.agents)
            else:
                n = obs_g.shape[1]
                keys = jax.random.split(jax.random.fold_in(key, gi), len(g.agents) * n)
                keys = keys.reshape((len(g.agents), n) + keys.shape[1:])
                if g.model.is_discrete:
                    act_g, lp = jax.vmap(jax.vmap(g.model.sample, in_axes=(None, 0, 0, 0)))(
                        actor, obs_g, keys, mask_g)
                else:
                    act_g, lp = jax.vmap(jax.vmap(g.model.sample, in_axes=(None, 0, 0)))(
                        actor, obs_g, keys)
            for i, a in enumerate(g.agents):
                net_act[a], logp[a] = act_g[i], lp[i]
        env_act = {a: jax.vmap(functools.partial(_to_env_action, agent_spaces[a]))(net_act[a])
                   for a in agents}
        return net_act, logp, env_act

    def rollout(params, state, obs, masks, ep_ret, ep_cost, key, params_env):
        def body(c, _):
            state, obs, masks, ep_ret, ep_cost, done_ret, done_cost, n_done, key = c
            key, k_act, k_env = jax.random.split(key, 3)
            net_act, logp, env_act = act(params["actor"], obs, masks, k_act, False)
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

    def update(s: IPPOState, params_env, total_apps):
        key, k_roll, k_upd = jax.random.split(s.key, 3)
        (state, obs, masks, ep_ret, ep_cost, done_ret, done_cost, n_done, _), traj = rollout(
            s.params, s.env_state, s.obs, s.masks, s.ep_return, s.ep_cost, k_roll, params_env)
        completed = n_done.sum(axis=1)  # (A,) episodes completed in this update, over envs
        stats = {"mean_reward": jnp.stack([traj[a]["reward"].mean() for a in agents]),
                 "mean_cost": jnp.stack([traj[a]["cost"].mean() for a in agents]),
                 "episodes": completed,
                 "episode_return": done_ret.sum(axis=1) / jnp.where(completed > 0, completed,
                                                                     jnp.nan)}
        lam = s.lam
        if lagrangian:
            lam, diag = dual_step(lam, done_cost.sum(axis=1), completed, cfg)
            stats.update(diag)
        step0 = s.update * apps_per_update
        new_params, new_opt, per_agent = [], [], {}
        for gi, (g, upd) in enumerate(zip(groups, agent_updates)):
            idx = [agents.index(a) for a in g.agents]
            batch = {k: jnp.stack([traj[a][k] for a in g.agents]) for k in traj[g.agents[0]]}
            keys = jax.random.split(jax.random.fold_in(k_upd, gi), len(g.agents))
            p, o, st = upd(group_params(s.params, gi), s.opt_state[gi], batch,
                           lam[jnp.asarray(idx)], keys, step0, total_apps)
            new_params.append(p)
            new_opt.append(o)
            for k, v in st.items():
                per_agent.setdefault(k, [None] * len(agents))
                for j, a_i in enumerate(idx):
                    per_agent[k][a_i] = v[j]
        stats.update({k: jnp.stack(v) for k, v in per_agent.items()})
        return IPPOState(_by_part(new_params), new_opt, state, obs, masks, ep_ret, ep_cost, lam,
                         key, s.update + 1), stats

    def evaluate(actors, params_env, key):
        """One deterministic episode of every agent (mode actions under the masks) on `params_env`.

        The multi-agent form of `common.evaluation.evaluate_episode`: T = ``core.max_episode_steps``
        scanned steps of ``core.step``, ``alive`` recorded before each step, the state frozen once any
        agent's episode ended.

        Returns:
            dict of (T, ...) arrays: the team view ``"reward"`` (mean over agents),
            ``"alive"`` and ``"action"`` (every agent's flattened action, concatenated in agent
            order, as float32); what the environment's own evaluation description records from each
            step's info (``core.evaluation.record``, `common.contracts.evaluation_of`: nothing
            for a core without one); and per agent ``"<agent>/reward"``, ``"<agent>/action"``.
        """
        record_info = evaluation_of(core).record
        k_reset, k_steps = jax.random.split(key)
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(k_reset[None], params_env)
        obs = {a: obs[a].astype(jnp.float32) for a in agents}
        v_plain = jax.vmap(core.step, in_axes=(0, 0, 0, None))

        def body(carry, k):
            obs, state, masks, alive = carry
            net_act, _, env_act = act(actors, obs, masks, None, True)
            obs2, state2, rew, term, trunc, info = v_plain(k[None], state, env_act, params_env)
            done = functools.reduce(jnp.logical_or, [term[a] | trunc[a] for a in agents])[0]
            rec = dict(record_info(jax.tree_util.tree_map(lambda x: x[0], info)))
            for a in agents:
                rec[f"{a}/reward"] = jnp.asarray(rew[a][0], jnp.float32)
                rec[f"{a}/action"] = net_act[a][0]
            rec["reward"] = jnp.mean(jnp.stack([rec[f"{a}/reward"] for a in agents]))
            rec["action"] = jnp.concatenate([jnp.ravel(net_act[a][0]).astype(jnp.float32)
                                             for a in agents])
            rec["alive"] = alive
            still = alive & ~done
            masks2 = masks_from(info, state2, 1)
            keep = lambda new, old: jax.tree_util.tree_map(  # noqa: E731 (freeze when done)
                lambda x, y: jnp.where(still, x, y), new, old)
            obs2 = {a: obs2[a].astype(jnp.float32) for a in agents}
            return (keep(obs2, obs), keep(state2, state), keep(masks2, masks), still), rec

        keys = jax.random.split(k_steps, core.max_episode_steps)
        c0 = (obs, state, masks_from(None, state, 1), jnp.asarray(True))
        _, episode = jax.lax.scan(body, c0, keys)
        return episode

    return init, update, evaluate, groups, apps_per_update


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
    prog = program(core, cfg, lagrangian)
    agents = list(prog.agent_spaces)
    params_env = core.default_params
    state = prog.init(jax.random.PRNGKey(seed), params_env)
    total_apps = jnp.int32(n_updates * prog.apps_per_update)
    history = []
    for i in range(n_updates):
        state, stats = prog.update(state, params_env, total_apps)
        step = (i + 1) * per_update
        history.append({"step": step, "agents": history_row(agents, jax.device_get(stats))})
        if progress_callback is not None:
            progress_callback(step, n_updates * per_update)
    lam = np.asarray(state.lam)
    return (agent_params(prog, jax.device_get(state.params)), prog.agent_spaces, history,
            n_updates * per_update, lam if lagrangian else None, agents)


def history_row(agents, stats: dict) -> dict:
    """Per-agent python scalars of one update's stats ``{name: (A,)}`` (flags as bool, counts as int).

    They are the rows of `IPPOResult.history`.
    """
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
    return row


def agent_params(prog, params: dict) -> dict:
    """Agent -> its own parameters ``{"actor", "critic", ...}`` from `IPPOState.params`."""
    out = {}
    for gi, g in enumerate(prog.groups):
        for a, pa in zip(g.agents, unstack_params(group_params(params, gi), len(g.agents))):
            out[a] = pa
    return out


class Program(NamedTuple):
    """The jitted programs of the compiled path for one (core, config, algorithm), one seed.

    Attributes:
        agent_spaces: agent -> `AgentSpaces`, in the core's agent order.
        groups: the agent groups (one network definition each).
        apps_per_update: optimiser applications per update.
        init: (seed_key, params_env) -> `IPPOState` (eager: the network init runs in numpy).
        update: (state, params_env, total_apps) -> (state, stats {name: (A,)}); state donated.
        evaluate: (actors ``IPPOState.params["actor"]``, params_env, key) -> episode dict of
            (T, ...) arrays.
        update_fn, evaluate_fn: the same two un-jitted (for callers that vmap or map them).
    """

    agent_spaces: dict
    groups: list
    apps_per_update: int
    init: Any
    update: Any
    evaluate: Any
    update_fn: Any
    evaluate_fn: Any


@functools.lru_cache(maxsize=16)
def program(core, cfg, lagrangian: bool) -> Program:
    """Cached programs per (core, config, algorithm).

    Compiling is the expensive part, and the core and config are hashable (frozen dataclasses).
    `cfg` is the algorithm's config without the run budget (`config.algorithm_config`).
    """
    agent_spaces = core_spaces(core, cfg)
    init, update, evaluate, groups, apps = make_compiled_ippo(core, cfg, lagrangian, agent_spaces)
    return Program(agent_spaces, groups, apps, init, jax.jit(update, donate_argnums=0),
                   jax.jit(evaluate), update, evaluate)
