"""The agent axis: a functional multi-agent core and its agents' networks as one env and one policy.

`common.rollout.collect` and `common.evaluation.evaluate_episode` step one functional env with one
actor-critic; IPPO runs them unchanged on two views. `AgentAxis` (the policy) samples, picks modes
and values for every agent at once from `IPPOState.params` (per group, stacked over the group's
agents; an `AgentGroup` is computed as one vmap over its still independent parameters).
`JointEnv` (the env) steps the core over agent-keyed network actions with per-agent rewards and
flags; an environment's episode ends when any agent's does (the core resets the whole
environment), so every agent cut without terminating is *truncated*. The core's contract (the
multi-agent analogue of the step contract, per-agent info field-major or agent-major) is in
docs/contracts.md; quantgate_env.MultiGateEnv is such a core.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from gymnasium import spaces

from ..common.contracts import evaluation_of, info_field
from ..common.state import unstack_tree
from .spaces import AgentSpaces

__all__ = ["AgentGroup", "group_agents", "params_by_agent",
           "core_spaces", "AgentAxis", "JointEnv"]


class AgentGroup(NamedTuple):
    """Agents sharing one network definition; their parameters are stacked on a leading axis G.

    Attributes:
        model: the shared `ActorCritic` definition.
        agents: the G agent ids, in stacking order.
    """

    model: Any
    agents: tuple


def group_agents(agent_spaces: Mapping[Any, AgentSpaces]) -> list[AgentGroup]:
    """Group agents by network definition, keeping the environment's agent order."""
    groups: dict[Any, list] = {}
    for agent, sp in agent_spaces.items():
        groups.setdefault(sp.model, []).append(agent)
    return [AgentGroup(model, tuple(agents)) for model, agents in groups.items()]


def params_by_agent(groups, per_group: list) -> dict:
    """Agent -> its own parameters, from each group's parameters stacked over its agents."""
    return {a: p for g, gp in zip(groups, per_group)
            for a, p in zip(g.agents, unstack_tree(gp, len(g.agents)))}


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


@dataclasses.dataclass(frozen=True)
class AgentAxis:
    """Every agent's actor-critic as one policy over the joint observation (see the module).

    Parameters are ``IPPOState.params`` parts: ``actors[gi]`` / ``critics[gi]`` stacked over group
    gi's G agents. Leading batch axes ``B...`` of the observations are kept.
    """

    groups: tuple

    @property
    def agents(self) -> tuple:
        """Agent ids in the groups' order."""
        return tuple(a for g in self.groups for a in g.agents)

    def _group_inputs(self, obs: Mapping, g: AgentGroup):
        obs_g = jnp.stack([obs["obs"][a] for a in g.agents])  # (G, B..., obs_dim)
        mask_g = jnp.stack([obs["mask"][a] for a in g.agents]) if g.model.is_discrete else None
        return obs_g, mask_g

    def sample(self, actors: list, obs: Mapping, key: jax.Array):
        """Sampled network actions {agent: (N, ...)} and log-probabilities {agent: (N,)}.

        Each (agent, environment) pair draws with its own key, split from ``fold_in(key, gi)``.
        """
        act, logp = {}, {}
        for gi, g in enumerate(self.groups):
            obs_g, mask_g = self._group_inputs(obs, g)
            n = obs_g.shape[1]
            keys = jax.random.split(jax.random.fold_in(key, gi), len(g.agents) * n)
            keys = keys.reshape((len(g.agents), n) + keys.shape[1:])
            if g.model.is_discrete:
                act_g, lp = jax.vmap(jax.vmap(g.model.sample, in_axes=(None, 0, 0, 0)))(
                    actors[gi], obs_g, keys, mask_g)
            else:
                act_g, lp = jax.vmap(jax.vmap(g.model.sample, in_axes=(None, 0, 0)))(
                    actors[gi], obs_g, keys)
            for i, a in enumerate(g.agents):
                act[a], logp[a] = act_g[i], lp[i]
        return act, logp

    def mode(self, actors: list, obs: Mapping) -> dict:
        """The most likely action of every agent under its mask, {agent: (B..., ...)}."""
        out = {}
        for gi, g in enumerate(self.groups):
            obs_g, mask_g = self._group_inputs(obs, g)
            act_g = jax.vmap(g.model.mode)(actors[gi], obs_g, mask_g)
            out.update({a: act_g[i] for i, a in enumerate(g.agents)})
        return out

    def value(self, critics: list, obs: Mapping) -> jax.Array:
        """(B..., A) values of every agent, in `agents` order."""
        values = {}
        for gi, g in enumerate(self.groups):
            v_g = jax.vmap(g.model.value)(critics[gi], self._group_inputs(obs, g)[0])
            values.update({a: v_g[i] for i, a in enumerate(g.agents)})
        return jnp.stack([values[a] for a in self.agents], axis=-1)


def _to_env_action(space, action):
    """A network action (one environment) in the agent's action space (start offsets, bounds)."""
    if isinstance(space, spaces.Discrete):
        return action + int(space.start)
    if isinstance(space, spaces.MultiDiscrete):
        return action.reshape(space.shape) + jnp.asarray(space.start)
    return jnp.clip(action.reshape(space.shape), space.low, space.high)


@dataclasses.dataclass(frozen=True)
class JointEnv:
    """A functional multi-agent core as one env over the agent axis (one environment; vmap it).

    Attributes:
        core: the functional multi-agent core.
        agent_spaces: agent -> `AgentSpaces`, in the core's agent order.
    """

    core: Any
    agent_spaces: Mapping

    @property
    def agents(self) -> tuple:
        """The core's agent ids."""
        return tuple(self.core.agents)

    @property
    def max_episode_steps(self) -> int:
        """The core's episode length (the evaluation's scanned steps)."""
        return self.core.max_episode_steps

    @property
    def evaluation(self):
        """The core's evaluation description (what it records, summarises and ranks)."""
        return evaluation_of(self.core)

    def masks(self, info, state) -> dict:
        """{agent: (n_outputs,) bool} masks of the current observation of each discrete agent.

        `info` None means "just reset": the core's ``reset_info(state)`` or
        ``action_masks(state)``, if it has either, else everything allowed.
        """
        if info is None and callable(getattr(self.core, "reset_info", None)):
            info = self.core.reset_info(state)
        elif info is None and callable(getattr(self.core, "action_masks", None)):
            info = {"action_mask": self.core.action_masks(state)}
        out = {}
        for a, sp in self.agent_spaces.items():
            if sp.model.is_discrete:
                m = None if info is None else info_field(info, a, "action_mask")
                k = sp.model.head.n_outputs
                out[a] = jnp.ones((k,), bool) if m is None else jnp.asarray(m).reshape(k).astype(bool)
        return out

    def _joint_obs(self, obs, info, state) -> dict:
        return {"obs": {a: obs[a].astype(jnp.float32) for a in self.agents},
                "mask": self.masks(info, state)}

    def reset(self, key, params):
        """-> (joint observation, core state)."""
        obs, state = self.core.reset(key, params)
        return self._joint_obs(obs, None, state), state

    def _step(self, step_fn, key, state, actions, params):
        env_act = {a: _to_env_action(self.agent_spaces[a].action_space, actions[a])
                   for a in self.agents}
        obs, state, rew, term, trunc, info = step_fn(key, state, env_act, params)
        done = functools.reduce(jnp.logical_or, [term[a] | trunc[a] for a in self.agents])
        term_a = jnp.stack([jnp.asarray(term[a], bool) for a in self.agents])
        reward = jnp.stack([jnp.asarray(rew[a], jnp.float32) for a in self.agents])
        return self._joint_obs(obs, info, state), state, reward, term_a, done & ~term_a, info

    def step(self, key, state, actions, params):
        """One step of the core (no reset). Actions are network actions {agent: ...}.

        Returns:
            (joint observation, state, (A,) float32 rewards, (A,) terminated, (A,) truncated
            (the environment's episode ended without this agent terminating), the core's info).
        """
        return self._step(self.core.step, key, state, actions, params)

    def step_autoreset(self, key, state, actions, params):
        """`step` with the core's auto-reset; info: what IPPO's rollout keeps.

        Info (per environment): ``next_obs`` {agent: (obs_dim,)} (the observation each
        transition reached, the finished episode's last one at a reset), ``reward`` and ``cost``
        {agent: ()} (cost 0 where the core gives none) and ``terminated`` (A,). Rewards and costs
        are per agent so that a rollout holds each agent's as its own (T, N) array: XLA reduces a
        whole array in another order than a slice of the (T, N, A) rewards, and the statistics
        keep the numbers they always had. The returned state is the core's.
        """
        obs, state, reward, term, trunc, info = self._step(self.core.step_autoreset, key, state,
                                                           actions, params)
        cost = {}
        for a in self.agents:
            c_a = info_field(info, a, "cost")
            cost[a] = (jnp.zeros((), jnp.float32) if c_a is None
                       else jnp.asarray(c_a, jnp.float32).reshape(()))
        out = {"next_obs": {a: info_field(info, a, "final_obs").astype(jnp.float32)
                            for a in self.agents},
               "reward": {a: reward[i] for i, a in enumerate(self.agents)}, "cost": cost,
               "terminated": term}
        return obs, state, reward, term, trunc, out

