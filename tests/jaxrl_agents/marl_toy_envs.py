"""Small PettingZoo ParallelEnvs (and one functional multi-agent core) for the IPPO tests.

- `SpacesEnv`: three agents with a Discrete action with a start offset, a rank-2 MultiDiscrete with
  start offsets and a rank-2 Box; observations as a Discrete, a rank-2 Box and a mask dict. It records
  what it received and checks every action against its space, can mask actions through the info, the
  observation dict or an ``action_mask(agent)`` method, can end one agent early (asynchronous
  termination) and can rewrite actions (``last_executed_actions`` then differs).
- `RiskyCore` / `RiskyEnv`: a constrained task. Each step every agent picks safe (reward 0, cost 0)
  or risky (reward 1, cost 1); episodes last `horizon` steps. Unconstrained, the optimum is always
  risky (episodic cost = horizon); a budget below that forces a mixed policy. `RiskyCore` is the
  functional multi-agent core (pure reset/step/step_autoreset over agent-keyed dicts), `RiskyEnv`
  the thin ParallelEnv adapter over it, so both IPPO paths train on the same problem.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class SpacesEnv(ParallelEnv):
    metadata = {"name": "spaces_env_v0"}

    def __init__(self, horizon=4, mask_source="info", async_end=False, rewrite=False):
        self.possible_agents = ["disc", "multi", "box"]
        self.horizon, self.mask_source = horizon, mask_source
        self.async_end, self.rewrite = async_end, rewrite
        self._act = {
            "disc": spaces.Discrete(3, start=-1),
            "multi": spaces.MultiDiscrete(np.array([[2, 3], [3, 2]]), start=np.array([[1, 1], [5, 5]])),
            "box": spaces.Box(-1.0, 1.0, (2, 2), np.float32),
        }
        self._obs_base = {
            "disc": spaces.Discrete(5),
            "multi": spaces.Box(-1.0, 1.0, (2, 3), np.float32),
            "box": spaces.Box(-1.0, 1.0, (3,), np.float32),
        }
        self.received = []
        self.last_executed_actions = {}

    # The disc agent's mask forbids choice 0 (env action -1); the multi agent's mask forbids the
    # last choice of its first component.
    DISC_MASK = np.array([0, 1, 1], np.int8)
    MULTI_MASK = np.concatenate([[1, 0], [1, 1, 1], [1, 1, 1], [1, 1]]).astype(np.int8)

    def observation_space(self, agent):
        base = self._obs_base[agent]
        if agent != "box" and self.mask_source == "obs":
            n = {"disc": 3, "multi": 10}[agent]
            return spaces.Dict({"observation": base, "action_mask": spaces.MultiBinary(n)})
        return base

    def action_space(self, agent):
        return self._act[agent]

    def action_mask(self, agent):
        if self.mask_source != "method":
            return None
        return {"disc": self.DISC_MASK, "multi": self.MULTI_MASK}.get(agent)

    def _observe(self):
        t = self.t
        obs = {"disc": t % 5, "multi": np.full((2, 3), t / self.horizon, np.float32),
               "box": np.array([t / self.horizon, 1.0, -1.0], np.float32)}
        if self.mask_source == "obs":
            obs["disc"] = {"observation": obs["disc"], "action_mask": self.DISC_MASK}
            obs["multi"] = {"observation": obs["multi"], "action_mask": self.MULTI_MASK}
        return obs

    def _infos(self):
        if self.mask_source == "info":
            return {"disc": {"action_mask": self.DISC_MASK}, "multi": {"action_mask": self.MULTI_MASK},
                    "box": {}}
        return {a: {} for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._observe(), self._infos()

    def step(self, actions):
        for a in self.agents:
            assert self._act[a].contains(np.asarray(actions[a], self._act[a].dtype)), (a, actions[a])
        if self.mask_source != "none":
            assert actions["disc"] != -1, "masked disc action executed"
            assert actions["multi"][0, 0] != 2, "masked multi action executed"
        self.received.append({a: np.array(actions[a]) for a in self.agents})
        executed = dict(actions)
        if self.rewrite:
            executed["disc"] = 1 if actions["disc"] != 1 else 0
        self.last_executed_actions = executed
        self.t += 1
        end = self.t >= self.horizon
        rewards = {a: float(self.t) for a in self.agents}
        terms = {a: end for a in self.agents}
        truncs = {a: False for a in self.agents}
        if self.async_end and self.t == 2:
            terms["disc"] = True
        obs, infos = self._observe(), self._infos()
        if end:
            self.agents = []
        return obs, rewards, terms, truncs, infos


@dataclasses.dataclass(frozen=True)
class RiskyCore:
    """Functional multi-agent core: reset/step/step_autoreset over dicts keyed by agent.

    info = {"cost": {agent: ()}, "final_obs": {agent: (1,)}} (final_obs: step_autoreset only).
    """

    horizon: int = 8
    n_agents: int = 2
    forbid_risky: tuple = ()  # agents whose action mask always forbids "risky"
    # Traced under x64 like the gate core it stands for: the committed IPPO run
    # (tests/data/ippo-runs) was made so, and its checkpoint's dtypes are compared with today's.
    requires_x64 = True

    @property
    def agents(self):
        return tuple(f"a{i}" for i in range(self.n_agents))

    @property
    def max_episode_steps(self):
        return self.horizon

    @property
    def default_params(self):
        return {"risky_reward": jnp.asarray(1.0, jnp.float32)}

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self, t):
        o = jnp.asarray(t, jnp.float32)[None] / self.horizon
        return {a: o for a in self.agents}

    def reset(self, key, params):
        t = jnp.zeros((), jnp.int32)
        return self._obs(t), {"t": t}

    def step(self, key, state, actions, params):
        t = state["t"] + 1
        risky = {a: (jnp.asarray(actions[a]) == 1).astype(jnp.float32) for a in self.agents}
        reward = sum(risky.values()) * params["risky_reward"] / self.n_agents  # team reward
        end = t >= self.horizon
        rewards = {a: reward for a in self.agents}
        term = {a: end for a in self.agents}
        trunc = {a: jnp.zeros((), bool) for a in self.agents}
        info = {"cost": risky}
        if self.forbid_risky:
            info["action_mask"] = self.action_masks({"t": t})
        return self._obs(t), {"t": t}, rewards, term, trunc, info

    def action_masks(self, state):
        """Masks of the current observation: {agent: (2,) bool}."""
        return {a: jnp.asarray([True, a not in self.forbid_risky]) for a in self.agents}

    def step_autoreset(self, key, state, actions, params):
        obs, state, rewards, term, trunc, info = self.step(key, state, actions, params)
        done = term[self.agents[0]]
        obs0, state0 = self.reset(key, params)
        info = {**info, "final_obs": obs}
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), state0, state)
        obs = {a: jnp.where(done, obs0[a], obs[a]) for a in self.agents}
        return obs, state, rewards, term, trunc, info


class RiskyEnv(ParallelEnv):
    """ParallelEnv adapter over `RiskyCore` (holds the state, converts to numpy)."""

    metadata = {"name": "risky_v0"}

    def __init__(self, horizon=8, n_agents=2, forbid_risky=()):
        self.core = RiskyCore(horizon, n_agents, tuple(forbid_risky))
        self.possible_agents = list(self.core.agents)
        self.params = self.core.default_params
        self._step = jax.jit(self.core.step)

    def observation_space(self, agent):
        return self.core.observation_space(agent)

    def action_space(self, agent):
        return self.core.action_space(agent)

    def reset(self, seed=None, options=None):
        obs, self.state = self.core.reset(jax.random.PRNGKey(seed or 0), self.params)
        self.agents = list(self.possible_agents)
        masks = self.core.action_masks(self.state) if self.core.forbid_risky else {}
        return ({a: np.asarray(o) for a, o in obs.items()},
                {a: ({"action_mask": np.asarray(masks[a])} if a in masks else {})
                 for a in self.agents})

    def step(self, actions):
        obs, self.state, r, term, trunc, info = self._step(
            jax.random.PRNGKey(0), self.state, {a: jnp.asarray(actions[a]) for a in self.agents},
            self.params)
        infos = {a: {"cost": float(info["cost"][a])} for a in self.agents}
        for a, m in info.get("action_mask", {}).items():
            infos[a]["action_mask"] = np.asarray(m)
        out = ({a: np.asarray(o) for a, o in obs.items()}, {a: float(x) for a, x in r.items()},
               {a: bool(x) for a, x in term.items()}, {a: bool(x) for a, x in trunc.items()}, infos)
        if all(out[2].values()):
            self.agents = []
        return out


@functools.lru_cache(maxsize=None)
def risky_expected_cost(horizon: int):
    """Observations of one episode, for computing the expected episodic cost from action_probs."""
    return np.arange(horizon, dtype=np.float32)[:, None] / horizon


class CostStreamEnv(ParallelEnv):
    """Two agents; agent "c" reports a hand-built cost stream in its info (cycling through
    `costs`, whatever it does), agent "z" reports no cost at all (counts as 0)."""

    metadata = {"name": "cost_stream_v0"}

    def __init__(self, costs=(1.0,), horizon=8):
        self.possible_agents = ["c", "z"]
        self.costs, self.horizon, self.k = tuple(costs), horizon, 0

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {a: np.array([self.t / self.horizon], np.float32) for a in self.possible_agents}

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        cost = self.costs[self.k % len(self.costs)]
        self.k += 1
        end = self.t >= self.horizon
        out = (self._obs(), {a: 0.0 for a in self.agents}, {a: end for a in self.agents},
               {a: False for a in self.agents}, {"c": {"cost": cost}, "z": {}})
        if end:
            self.agents = []
        return out
