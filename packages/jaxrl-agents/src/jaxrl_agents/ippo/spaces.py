"""Per-agent space handling for multi-agent trainers.

Observation flattening, action translation, action masks, and the `MARLPolicy` that speaks the
environment's own formats.

An agent's network always sees a flat float32 observation vector and emits zero-based actions:

- ``Discrete(n, start)``: one categorical head; the environment receives ``index + start``.
- ``MultiDiscrete(nvec, start)`` of any rank: one categorical head per component of
  ``nvec.ravel()`` (log-probabilities and entropies summed over components, see
  distributions.MultiCategorical); the environment receives ``index.reshape(nvec.shape) + start``.
- ``Box(low, high, shape)`` of any rank: a diagonal Gaussian over ``prod(shape)`` values; the
  environment receives the sample clipped to [low, high] and reshaped to ``shape`` (the stored
  sample stays unclipped, so its log-probability is exact, as in Stable-Baselines3).

Observations: a ``Box`` is raveled; any other gymnasium space goes through
``gymnasium.spaces.flatten`` (Discrete -> one-hot, Dict/Tuple -> concatenation). A PettingZoo-style
observation dict ``{"observation", "action_mask"}`` is split: the mask is not part of the input.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence

import numpy as np
from gymnasium import spaces

from ..common.networks import ActorCritic
from ..common.policy import Policy

__all__ = ["AgentSpaces", "MARLPolicy", "AgentPolicies", "agent_policies", "safe_agent_name", "split_mask_obs",
           "space_to_json", "space_from_json"]


def split_mask_obs(obs):
    """(observation, mask or None) from an observation that may be ``{"observation", "action_mask"}``."""
    if isinstance(obs, Mapping) and "observation" in obs and "action_mask" in obs:
        return obs["observation"], obs["action_mask"]
    return obs, None


def space_to_json(space: spaces.Space) -> dict | None:
    """JSON description of a Box / Discrete / MultiDiscrete / MultiBinary / Dict space.

    None for other spaces, which `MARLPolicy.load` then cannot restore.
    """
    if isinstance(space, spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(),
                "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        parts = {k: space_to_json(v) for k, v in space.spaces.items()}
        return None if any(v is None for v in parts.values()) else {"type": "Dict", "spaces": parts}
    return None


def _bound(values, unbounded: float, dtype) -> np.ndarray:
    """A Box bound from JSON: null entries (an infinity written as strict JSON) are `unbounded`."""
    def fill(v):
        if v is None:
            return unbounded
        return [fill(x) for x in v] if isinstance(v, list) else v
    return np.asarray(fill(values), dtype)


def space_from_json(d: dict) -> spaces.Space:
    """Inverse of `space_to_json`."""
    kind = d["type"]
    if kind == "Box":
        dtype = np.dtype(d["dtype"])
        # An unbounded side is written as null (policy.json is strict JSON, `fileio.json_ready`);
        # files written before hold -Infinity / Infinity, which Python's json reads as floats.
        return spaces.Box(_bound(d["low"], -np.inf, dtype), _bound(d["high"], np.inf, dtype),
                          tuple(d["shape"]), dtype)
    if kind == "Discrete":
        return spaces.Discrete(d["n"], start=d["start"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(d["nvec"]), start=np.asarray(d["start"]))
    if kind == "MultiBinary":
        return spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(v) for k, v in d["spaces"].items()})
    raise ValueError(f"space: expected a Box/Discrete/MultiDiscrete/MultiBinary/Dict description, "
                     f"got type {kind!r}")


def _base_obs_space(space: spaces.Space) -> spaces.Space:
    if isinstance(space, spaces.Dict) and "observation" in space.spaces and "action_mask" in space.spaces:
        return space.spaces["observation"]
    return space


@dataclasses.dataclass(frozen=True, eq=False)
class AgentSpaces:
    """How one agent's observations and actions map to and from its network.

    Attributes:
        agent: the agent id (for error messages).
        observation_space: the environment's observation space (mask dict stripped).
        action_space: the environment's action space.
        model: the `ActorCritic` definition built from the spaces.
    """

    agent: str
    observation_space: spaces.Space
    action_space: spaces.Space
    model: ActorCritic

    @classmethod
    def build(cls, agent, observation_space, action_space, hidden, activation) -> AgentSpaces:
        """Infer the network definition of `agent` from its spaces (ValueError if unsupported)."""
        obs_space = _base_obs_space(observation_space)
        try:
            obs_dim = int(spaces.flatdim(obs_space))
        except Exception as e:  # gymnasium raises ValueError / NotImplementedError
            raise ValueError(f"observation_space({agent!r}): expected a flattenable gymnasium space, "
                             f"got {observation_space!r} ({e})") from e
        if isinstance(action_space, spaces.Discrete):
            kind, shape = "categorical", (int(action_space.n),)
        elif isinstance(action_space, spaces.MultiDiscrete):
            kind, shape = "multi_categorical", tuple(int(n) for n in np.ravel(action_space.nvec))
        elif isinstance(action_space, spaces.Box):
            if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
                raise ValueError(f"action_space({agent!r}): expected a Box with finite bounds (the "
                                 f"trainer clips Gaussian samples to them), got {action_space!r}")
            kind, shape = "gaussian", (int(np.prod(action_space.shape)),)
        else:
            raise ValueError(f"action_space({agent!r}): expected Discrete, MultiDiscrete or Box, got "
                             f"{type(action_space).__name__}")
        model = ActorCritic(obs_dim, kind, shape, tuple(hidden), activation)
        return cls(agent, obs_space, action_space, model)

    # --------------------------------------------------------------------------- observations
    def flatten_obs(self, obs) -> np.ndarray:
        """One environment observation -> (obs_dim,) float32."""
        obs, _ = split_mask_obs(obs)
        if isinstance(self.observation_space, spaces.Box):
            flat = np.asarray(obs, np.float32).reshape(-1)
        else:
            flat = np.asarray(spaces.flatten(self.observation_space, obs), np.float32)
        if flat.shape != (self.model.obs_dim,):
            raise ValueError(f"obs[{self.agent!r}]: expected an element of {self.observation_space}, "
                             f"got an array flattening to {flat.shape}")
        return flat

    def flatten_obs_batch(self, obs) -> np.ndarray:
        """A single observation or a batch (B, *obs_shape) (Box only) -> (obs_dim,) / (B, obs_dim)."""
        obs, _ = split_mask_obs(obs)
        if isinstance(self.observation_space, spaces.Box):
            arr = np.asarray(obs, np.float32)
            n = len(self.observation_space.shape)
            if arr.ndim > n and arr.shape[arr.ndim - n:] == self.observation_space.shape:
                return arr.reshape(arr.shape[:arr.ndim - n] + (-1,))
        return self.flatten_obs(obs)

    # ---------------------------------------------------------------------------------- masks
    def flatten_mask(self, mask) -> np.ndarray | None:
        """An environment action mask -> boolean (n_outputs,), True = allowed; None stays None.

        Accepts a flat array of length n (Discrete) or sum(nvec) (MultiDiscrete, components
        concatenated), or for MultiDiscrete a sequence of per-component masks.
        """
        if mask is None:
            return None
        if not self.model.is_discrete:
            raise ValueError(f"action_mask[{self.agent!r}]: masks are only supported for Discrete "
                             f"and MultiDiscrete actions, got one for {self.action_space}")
        if (isinstance(mask, Sequence) and not isinstance(mask, np.ndarray)
                and self.model.action_kind == "multi_categorical"):
            mask = np.concatenate([np.asarray(m).reshape(-1) for m in mask])
        flat = np.asarray(mask).reshape(-1).astype(bool)
        n = self.model.head.n_outputs
        if flat.shape != (n,):
            raise ValueError(f"action_mask[{self.agent!r}]: expected {n} entries (one per choice of "
                             f"{self.action_space}), got shape {np.shape(mask)}")
        parts = np.split(flat, np.cumsum(self.model.action_shape)[:-1])
        if not all(p.any() for p in parts):
            raise ValueError(f"action_mask[{self.agent!r}]: every action component needs at least one "
                             f"allowed choice, got {flat.astype(int).tolist()}")
        return flat

    def all_allowed(self) -> np.ndarray:
        """The mask that forbids nothing: (n_outputs,) True."""
        return np.ones((self.model.head.n_outputs,), bool)

    # -------------------------------------------------------------------------------- actions
    def to_env(self, action) -> np.ndarray:
        """Network action(s) -> environment action(s) with the space's shape, dtype and offsets.

        Args:
            action: int () / (B,) (Discrete), (D,) / (B, D) (MultiDiscrete), (A,) / (B, A) (Box).
        """
        a = np.asarray(action)
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            return (a.astype(np.int64) + int(space.start)).astype(space.dtype)
        batch = a.shape[:-1]
        if isinstance(space, spaces.MultiDiscrete):
            return (a.reshape(batch + space.shape) + space.start).astype(space.dtype)
        return np.clip(a.reshape(batch + space.shape), space.low, space.high).astype(space.dtype)

    def same_action(self, executed, proposed) -> bool:
        """Whether an executed environment action equals the proposal (Box: float tolerance)."""
        executed = np.asarray(executed)
        if executed.shape != np.shape(proposed):
            return False
        if isinstance(self.action_space, spaces.Box):
            return bool(np.allclose(executed, proposed, rtol=1e-5, atol=1e-6))
        return bool(np.array_equal(executed, proposed))


class MARLPolicy(Policy):
    """A `Policy` that accepts the environment's observations and returns its actions.

    Same object as every other jaxrl_agents policy (``value``, ``action_probs``, ``save``; the
    evaluation code does not care where it came from), plus: observations may be in the agent's
    own observation space (any gymnasium space, or the ``{"observation", "action_mask"}`` dict), and
    `act` returns actions in the agent's action space (original MultiDiscrete/Box shape, Gymnasium
    ``start`` offsets added, Box actions clipped). ``action_probs`` stays in network terms:
    probabilities of the zero-based choices, per component (`Policy.action_probs`: (D, n) for a
    MultiDiscrete whose components have the same size, else one array per component).
    """

    def __init__(self, model, params, metadata=None, spaces_: AgentSpaces | None = None):
        metadata = dict(metadata or {})
        if spaces_ is not None:  # saved with the policy so `MARLPolicy.load` can restore them
            obs_json = space_to_json(spaces_.observation_space)
            act_json = space_to_json(spaces_.action_space)
            if obs_json is not None and act_json is not None:
                metadata["spaces"] = {"observation": obs_json, "action": act_json}
        super().__init__(model, params, metadata)
        self.spaces = spaces_

    @classmethod
    def load(cls, directory: str) -> MARLPolicy:
        """Load a saved policy, with its spaces when they were saved.

        With them it speaks env-format observations and actions; without, it behaves like a plain
        `Policy`.
        """
        base = Policy.load(directory)
        sp = None
        saved = base.metadata.get("spaces")
        if saved is not None:
            sp = AgentSpaces(base.metadata.get("agent", "agent"),
                             space_from_json(saved["observation"]),
                             space_from_json(saved["action"]), base.model)
        return cls(base.model, base.params, base.metadata, sp)

    def _split_obs(self, obs, action_mask):
        if self.spaces is not None:
            obs_part, mask = split_mask_obs(obs)
            if action_mask is None and mask is not None:
                action_mask = self.spaces.flatten_mask(mask)
            elif action_mask is not None:
                action_mask = self.spaces.flatten_mask(action_mask)
            arr = np.asarray(obs_part) if not isinstance(obs_part, Mapping) else None
            already_flat = (arr is not None and arr.dtype.kind == "f"
                            and arr.shape[-1:] == (self.model.obs_dim,)
                            and not isinstance(self.spaces.observation_space, spaces.Box))
            obs = arr if already_flat else self.spaces.flatten_obs_batch(obs_part)
        return super()._split_obs(obs, action_mask)

    def act(self, obs, rng=None, deterministic=None, action_mask=None, *, key=None):
        """Actions in the environment's format.

        ``act(obs)`` is deterministic (arg-max / mean); ``act(obs, rng)`` samples with the PRNG key
        `rng` (the IPPO signature: the second positional argument is the sampling key). ``key=`` and
        ``deterministic=`` behave as in `Policy.act`.
        """
        out = super().act(obs, key, deterministic, action_mask, rng=rng)
        return out if self.spaces is None else self.spaces.to_env(out)


def safe_agent_name(agent) -> str:
    """A file-system-safe directory name for agent id `agent` (other characters become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(agent))


class AgentPolicies(dict):
    """Agent id -> its `MARLPolicy`: a dict, that saves as one policy directory per agent.

    What IPPO trains and a run directory keeps (``best_policy/``, ``last_policy/``, ``policies/``):
    `save` gives it the ``save(directory)`` of a single `Policy`, so the code that writes policies
    never asks which kind it holds.
    """

    def save(self, directory: str) -> None:
        """Save each agent's policy into ``directory/<agent>/`` (`safe_agent_name`)."""
        for agent, policy in self.items():
            policy.save(os.path.join(directory, safe_agent_name(agent)))


def agent_policies(agent_spaces: Mapping, params: Mapping, metadata: dict) -> AgentPolicies:
    """Agent -> its `MARLPolicy` (actor and critic; a cost critic stays out), `metadata` + agent id."""
    return AgentPolicies({a: MARLPolicy(agent_spaces[a].model, {"actor": p["actor"], "critic": p["critic"]},
                                        {**metadata, "agent": str(a)}, agent_spaces[a])
                          for a, p in params.items()})

