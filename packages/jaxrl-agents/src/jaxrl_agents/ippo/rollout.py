"""Collecting multi-agent experience from a PettingZoo ``ParallelEnv`` stepped from Python.

The runner keeps the environment, the current observations and the running episode totals between
rollouts, so an episode that straddles a rollout boundary continues in the next rollout (its
completed cost counts once, when it ends). Every transition stores the *true* next observation the
environment returned (also the last observation of a finished episode), with separate terminated
and done flags, which is what common.gae.gae_next_values needs.

Actions are chosen for all agents sharing a network definition in one compiled call (a vmap over
their stacked, still independent, parameters).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from .agent_axis import AgentGroup
from .spaces import AgentSpaces, split_mask_obs

__all__ = ["ActionRewriteError", "ParallelRunner", "check_parallel_env"]


class ActionRewriteError(RuntimeError):
    """The environment executed a different action than the policy proposed."""


def check_parallel_env(env, hint: str = "") -> list:
    """Check that `env` is a PettingZoo ParallelEnv with unique agent ids; return possible_agents.

    `hint` ends the message of an env of another kind (where that kind can go instead).
    """
    from pettingzoo import ParallelEnv

    if not isinstance(env, ParallelEnv):
        raise ValueError(f"env: expected a pettingzoo.ParallelEnv (AEC envs: wrap them with "
                         f"pettingzoo.utils.aec_to_parallel), got {type(env).__name__}"
                         + (f"; {hint}" if hint else ""))
    agents = getattr(env, "possible_agents", None)
    if agents is None or isinstance(agents, (str, bytes)):
        raise ValueError(f"env.possible_agents: expected a non-empty list of agent ids, got {agents!r}")
    agents = list(agents)
    if not agents:
        raise ValueError("env.possible_agents: expected at least one agent, got an empty list")
    try:
        unique = len(set(agents)) == len(agents)
    except TypeError as e:
        raise ValueError(f"env.possible_agents: expected hashable agent ids, got {agents!r}") from e
    if not unique:
        raise ValueError(f"env.possible_agents: expected unique agent ids, got {agents!r}")
    return agents


@functools.partial(jax.jit, static_argnums=0)
def _act_group(model, actor, obs, key, counter, mask):
    """Sample for the G agents of a group.

    obs (G, obs_dim), mask (G, n) or None -> (actions (G, ...), logp (G,)).
    """
    keys = jax.random.split(jax.random.fold_in(key, counter), obs.shape[0])
    if mask is None:
        return jax.vmap(lambda a, o, k: model.sample(a, o, k))(actor, obs, keys)
    return jax.vmap(model.sample)(actor, obs, keys, mask)


class ParallelRunner:
    """Steps one ParallelEnv with the current policies and returns rollouts per agent group.

    Args:
        env: the PettingZoo ParallelEnv (checked by `check_parallel_env`).
        agent_spaces: agent id -> `AgentSpaces`, for every possible agent.
        groups: `group_agents(agent_spaces)`.
        seed: seed of the first ``env.reset`` (later resets continue the env's own generator).
    """

    def __init__(self, env, agent_spaces: Mapping[Any, AgentSpaces], groups: list[AgentGroup],
                 seed: int):
        self.env, self.spaces, self.groups, self.seed = env, dict(agent_spaces), groups, seed
        self.agents = list(agent_spaces)
        self._obs = None  # raw observations of the current step (None: reset needed)
        self._infos: dict = {}
        self._ep_return = {a: 0.0 for a in self.agents}
        self._ep_cost = {a: 0.0 for a in self.agents}
        self._first_reset = True
        self.counter = 0  # environment steps taken (feeds the action key)

    # ------------------------------------------------------------------------------- env I/O
    def _reset(self):
        if self._first_reset:
            obs, infos = self.env.reset(seed=self.seed)
            self._first_reset = False
        else:
            obs, infos = self.env.reset()
        missing = [a for a in self.agents if a not in obs]
        if missing:
            raise ValueError(f"env.reset: expected an observation for every possible agent; missing "
                             f"{missing} (the IPPO trainer needs all agents active in every episode)")
        self._obs, self._infos = obs, dict(infos or {})
        self._ep_return = {a: 0.0 for a in self.agents}
        self._ep_cost = {a: 0.0 for a in self.agents}

    def _mask(self, agent) -> np.ndarray | None:
        """The agent's current action mask: observation dict, then info, then env.action_mask()."""
        sp = self.spaces[agent]
        if not sp.model.is_discrete:
            return None
        _, mask = split_mask_obs(self._obs[agent])
        if mask is None:
            mask = (self._infos.get(agent) or {}).get("action_mask")
        if mask is None and callable(getattr(self.env, "action_mask", None)):
            mask = self.env.action_mask(agent)
        mask = sp.flatten_mask(mask)
        return sp.all_allowed() if mask is None else mask

    def _check_executed(self, proposed: dict) -> None:
        executed = getattr(self.env, "last_executed_actions", None)
        if executed is None:
            return
        for agent, action in proposed.items():
            if agent not in executed or not self.spaces[agent].same_action(executed[agent], action):
                got = executed.get(agent, "<missing>") if isinstance(executed, Mapping) else executed
                raise ActionRewriteError(
                    f"env.last_executed_actions[{agent!r}]: expected the proposed action "
                    f"{np.asarray(action).tolist()}, got {np.asarray(got).tolist()}; the rollout is "
                    f"rejected because its stored log-probabilities would describe a different action "
                    f"(fix the wrapper so it masks actions instead of rewriting them)")

    # -------------------------------------------------------------------------------- collect
    def collect(self, group_params: list, n_steps: int, key: jax.Array) -> tuple[list[dict], dict]:
        """Roll the current policies out for `n_steps` environment steps.

        Args:
            group_params: per group, the stacked parameters (leading axis G).
            n_steps: T, environment steps.
            key: base PRNG key of the action sampling (folded with the step counter).

        Returns:
            (per group a batch dict of numpy arrays (G, T, 1, ...): obs, next_obs, action, logp,
            reward, cost, terminated, done, and mask for discrete heads;
            episode dict: per agent lists ``returns`` and ``costs`` of the episodes completed in
            this rollout).
        """
        buf = {a: {k: [] for k in ("obs", "next_obs", "action", "logp", "mask", "reward", "cost",
                                   "terminated", "done")} for a in self.agents}
        episodes = {"returns": {a: [] for a in self.agents}, "costs": {a: [] for a in self.agents}}
        for _ in range(n_steps):
            if self._obs is None:
                self._reset()
            flat = {a: self.spaces[a].flatten_obs(self._obs[a]) for a in self.agents}
            masks = {a: self._mask(a) for a in self.agents}
            env_actions, net_actions, logps = {}, {}, {}
            for g, params in zip(self.groups, group_params):
                obs_g = np.stack([flat[a] for a in g.agents])
                mask_g = None if masks[g.agents[0]] is None else np.stack([masks[a] for a in g.agents])
                act, logp = _act_group(g.model, params["actor"], obs_g, key, self.counter, mask_g)
                act, logp = np.asarray(act), np.asarray(logp)
                for i, a in enumerate(g.agents):
                    net_actions[a], logps[a] = act[i], logp[i]
                    env_actions[a] = self.spaces[a].to_env(act[i])
            self.counter += 1
            obs2, rewards, terms, truncs, infos = self.env.step(env_actions)
            self._check_executed(env_actions)
            infos = dict(infos or {})
            done = {}
            for a in self.agents:
                for what, d in (("observations", obs2), ("rewards", rewards),
                                ("terminations", terms), ("truncations", truncs)):
                    if a not in d:
                        raise ValueError(f"env.step: {what} has no entry for agent {a!r}; the IPPO "
                                         f"trainer needs every agent until the episode ends")
                done[a] = bool(terms[a]) or bool(truncs[a])
            if any(done.values()) and not all(done.values()):
                ended = sorted(str(a) for a, d in done.items() if d)
                raise ValueError(
                    f"env.step: asynchronous agent termination (agents {ended} ended while others "
                    f"continue); the single-environment IPPO trainer requires all agents to end an "
                    f"episode together, because resetting the shared environment would cut the "
                    f"remaining agents' trajectories")
            for a in self.agents:
                cost = float((infos.get(a) or {}).get("cost", 0.0))
                b = buf[a]
                b["obs"].append(flat[a])
                b["next_obs"].append(self.spaces[a].flatten_obs(obs2[a]))
                b["action"].append(net_actions[a])
                b["logp"].append(logps[a])
                b["mask"].append(masks[a])
                b["reward"].append(float(rewards[a]))
                b["cost"].append(cost)
                b["terminated"].append(bool(terms[a]))
                b["done"].append(done[a])
                self._ep_return[a] += float(rewards[a])
                self._ep_cost[a] += cost
            if all(done.values()):
                for a in self.agents:
                    episodes["returns"][a].append(self._ep_return[a])
                    episodes["costs"][a].append(self._ep_cost[a])
                self._obs = None
            else:
                self._obs, self._infos = obs2, infos
        batches = []
        for g in self.groups:
            batch = {}
            for k in buf[g.agents[0]]:
                if k == "mask" and not g.model.is_discrete:
                    continue
                arr = np.stack([np.stack(buf[a][k]) for a in g.agents])  # (G, T, ...)
                if k in ("obs", "next_obs", "reward", "cost", "logp"):
                    arr = arr.astype(np.float32)
                batch[k] = arr[:, :, None]  # (G, T, N=1, ...)
            batches.append(batch)
        return batches, episodes

