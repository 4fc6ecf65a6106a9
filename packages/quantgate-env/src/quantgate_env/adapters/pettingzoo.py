"""PettingZoo adapter: ``quantgate_env.pettingzoo.parallel_env(**options)``.

A thin shell around the functional core ``quantgate_env.mdp.multi_line``: it holds a key and a state, checks
actions in Python (before anything compiled runs), calls compiled core functions scoped to float64
itself, and converts to numpy. No physics, reward, mask or cost logic lives here.

Observations are float32 (24 + K + 1,) per agent (layout in ``quantgate_env.mdp.multi_line``), or with
``mask_in_obs=True`` dicts {"observation", "action_mask"}. Masks (discrete mode) have the form
Gymnasium's ``space.sample(mask=...)`` takes: an int8 (n_levels,) array for Discrete (K = 1), a
tuple of K such arrays for MultiDiscrete; ``action_mask(agent)`` returns the current one.
``last_executed_actions`` holds, after every step, exactly the actions that were played (actions
are never rewritten: anything outside the space or masked raises a ValueError naming the agent).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import gymnasium
import jax
import numpy as np
import pettingzoo  # the PettingZoo package (absolute import; this module is quantgate_env.pettingzoo)

from ..mdp.multi_line import MultiGateEnv, make_multi
from ..precision import x64_scope
from ..validation import choice, real_array

__all__ = ["GateParallelEnv", "parallel_env"]

MASKED_ACTION_MODES = ("raise", "execute")


@functools.cache
def _compiled(core: MultiGateEnv):
    """Compiled reset (with its infos) and step of one configuration, shared across instances."""

    def reset(key, params):
        obs, state = core.reset(key, params)
        return obs, state, core.reset_info(state)

    def next_episode(key, state, params):
        obs, state = core.next_episode(key, state, params)
        return obs, state, core.reset_info(state)

    return jax.jit(reset), jax.jit(next_episode), jax.jit(core.step)


def _numpy_mask(mask: np.ndarray, k: int):
    """(K, n) bool -> the form Gymnasium's Discrete/MultiDiscrete ``sample(mask=...)`` takes."""
    mask = np.asarray(mask, dtype=np.int8)
    return mask[0] if k == 1 else tuple(mask)


class GateParallelEnv(pettingzoo.ParallelEnv):
    """Cooperative multi-actuator gate environment (one agent per control line).

    Build with ``parallel_env(**options)``: options of ``MultiGateConfig`` (actuators,
    q0_amp_bound, q1_amp_bound, action_mode, n_levels), of ``EnvConfig`` (pulse_length, oob_mode,
    drift, precision, ...) and this adapter's own:

    * ``mask_in_obs`` (False): observations become {"observation", "action_mask"} dicts
      (discrete mode only);
    * ``masked_action`` ("raise"): a masked discrete action is a ValueError, never rewritten;
      "execute" plays it as proposed (the oob mode then applies; ``info[agent]["masked_action"]``
      flags it), for tests that sample without masks.
    Every agent receives the team reward; all
    agents end together (terminated at the end of the pulse, truncated when any line leaves its
    bound in ``oob_mode="terminate"``). ``infos[agent]`` holds JT, concurrence, unitarity,
    tv_penalty, oob, t, leakage_increase, amps, excess, cost and, in discrete mode, action_mask
    and masked_action.
    """

    metadata = {"name": "quantgate_marl_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, *, mask_in_obs: bool = False, masked_action: str = "raise", **options):
        self.core: MultiGateEnv = make_multi(**options)
        cfg = self.core.config
        if not isinstance(mask_in_obs, bool):
            raise ValueError(f"mask_in_obs: expected True or False, got {mask_in_obs!r}")
        if mask_in_obs and cfg.action_mode != "discrete":
            raise ValueError('mask_in_obs: action masks exist only with action_mode="discrete"; got action_mode="continuous"')
        choice("masked_action", masked_action, MASKED_ACTION_MODES)
        self.mask_in_obs, self.masked_action = mask_in_obs, masked_action
        self._discrete = cfg.action_mode == "discrete"
        self._k = cfg.env.n_time_steps
        self.possible_agents = list(self.core.agents)
        self.agents: list[str] = []
        self.params = self.core.default_params
        self._action_spaces = {a: self.core.action_space(a) for a in self.possible_agents}
        self._observation_spaces = {a: self._make_observation_space(a) for a in self.possible_agents}
        self._reset, self._next_episode, self._step = _compiled(self.core)
        self._np_random = None
        self._key = None
        self._state = None
        self._masks: dict[str, np.ndarray] = {}
        self.last_executed_actions: dict[str, np.ndarray] = {}

    def _make_observation_space(self, agent: str) -> gymnasium.spaces.Space:
        box = self.core.observation_space(agent)
        if not self.mask_in_obs:
            return box
        n = self.core.config.n_levels
        mask_space = gymnasium.spaces.MultiBinary(n)
        if self._k > 1:
            mask_space = gymnasium.spaces.Tuple([gymnasium.spaces.MultiBinary(n) for _ in range(self._k)])
        return gymnasium.spaces.Dict({"observation": box, "action_mask": mask_space})

    # PettingZoo requires the very same space object on every call.
    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        """Box (24 + K + 1,) float32, or with ``mask_in_obs`` a Dict {"observation", "action_mask"}.

        Raises:
            ValueError: ``agent`` is not one of ``possible_agents``.
        """
        self._check_agent(agent, "observation_space")
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        """Box (K,) in [-1, 1]; discrete: MultiDiscrete([n_levels] * K), or Discrete(n_levels) if K = 1.

        Raises:
            ValueError: ``agent`` is not one of ``possible_agents``.
        """
        self._check_agent(agent, "action_space")
        return self._action_spaces[agent]

    def _check_agent(self, agent: Any, where: str) -> None:
        if agent not in self._action_spaces:
            raise ValueError(f"{where}: unknown agent {agent!r}; expected one of {self.possible_agents}")

    def action_mask(self, agent: str):
        """The agent's current mask (int8 (n_levels,) for Discrete, tuple of K for MultiDiscrete)."""
        self._check_agent(agent, "action_mask")
        if not self._discrete:
            raise ValueError('action_mask: masks exist only with action_mode="discrete"')
        if self._state is None:
            raise RuntimeError("action_mask() called before reset()")
        return _numpy_mask(self._masks[agent], self._k)

    # ---- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode; ``seed`` makes it (and every later unseeded reset) reproducible.

        ``options`` is ignored: PettingZoo's own ``parallel_api_test`` passes ``{"options": 1}`` and
        requires it to be accepted (unlike the Gymnasium adapters, which refuse unknown options).
        """
        if seed is not None or self._np_random is None:
            self._np_random, _ = gymnasium.utils.seeding.np_random(seed)
            self._key = jax.random.PRNGKey(int(self._np_random.integers(2**31)))
        self._key, sub = jax.random.split(self._key)
        with x64_scope():
            if self._state is None:
                obs, self._state, infos = self._reset(sub, self.params)
            else:  # the core's rule: a fresh device (resampled drift) or the same one (fixed drift)
                obs, self._state, infos = self._next_episode(sub, self._state, self.params)
            obs, infos = self._convert(*jax.device_get((obs, infos)))
        self.agents = list(self.possible_agents)
        self.last_executed_actions = {}
        return obs, infos

    def step(self, actions: Mapping[str, Any]):
        """Play one segment of K samples on every line at once.

        Args:
            actions: {agent: action} for every live agent. Continuous: (K,) deltas in units of the
                line's ``delta``, finite and in [-1, 1] (not clipped). Discrete: integer level
                indices of shape (K,) (() if K = 1) in [0, n_levels); a masked level raises unless
                ``masked_action="execute"``.

        Returns:
            obs {agent: (24 + K + 1,) float32 (or the mask dict)}, rewards {agent: float} (the team
            reward), terminated and truncated {agent: bool} (all agents end together), infos
            {agent: dict} (class docstring). ``agents`` is empty once the episode ended.

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
            ValueError: a missing, unknown, misshapen, out-of-space or masked action, naming the agent.
        """
        if self._state is None:
            raise RuntimeError("step() called before reset()")
        if not self.agents:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        checked = self._check_actions(actions)
        self._key, sub = jax.random.split(self._key)
        with x64_scope():
            obs, self._state, rewards, terminated, truncated, infos = self._step(sub, self._state, checked, self.params)
            # one device-to-host transfer for everything (per-leaf conversion costs ~2x the step)
            obs, rewards, terminated, truncated, infos = jax.device_get((obs, rewards, terminated, truncated, infos))
            obs, infos = self._convert(obs, infos)
            rewards = {a: float(r) for a, r in rewards.items()}
            terminated = {a: bool(x) for a, x in terminated.items()}
            truncated = {a: bool(x) for a, x in truncated.items()}
        self.last_executed_actions = {a: checked[a].copy() for a in self.possible_agents}
        if any(terminated.values()) or any(truncated.values()):
            self.agents = []
        return obs, rewards, terminated, truncated, infos

    def close(self):
        """Nothing to release (no renderer, no external resources)."""
        pass

    # ---- boundary checks and conversion -----------------------------------------------------

    def _check_actions(self, actions: Mapping[str, Any]) -> dict[str, np.ndarray]:
        if not isinstance(actions, Mapping):
            raise ValueError(f"actions: expected a dict {{agent: action}}, got {type(actions).__name__}")
        unknown = [a for a in actions if a not in self._action_spaces]
        if unknown:
            raise ValueError(f"actions: unknown agent(s) {unknown}; expected {self.possible_agents}")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"actions: missing action for agent(s) {missing}; every live agent acts each step")
        return {a: self._check_action(a, actions[a]) for a in self.possible_agents}

    def _check_action(self, agent: str, action: Any) -> np.ndarray:
        space = self._action_spaces[agent]
        field = f"actions[{agent!r}]"
        if not self._discrete:
            array = real_array(field, action)  # strings, bools, complex numbers are refused, not coerced
            if array.shape != space.shape:
                raise ValueError(f"{field}: expected shape {space.shape}, got {array.shape}")
            if not np.all(np.isfinite(array)) or np.any(np.abs(array) > 1.0):
                raise ValueError(f"{field}: expected finite values in [-1, 1] (the action space), got {array}")
            return array
        array = np.asarray(action)
        shape = () if self._k == 1 else (self._k,)
        if array.shape != shape or not (np.issubdtype(array.dtype, np.integer) and array.dtype != np.bool_):
            raise ValueError(
                f"{field}: expected integer level indices of shape {shape} ({space}), got {array!r} "
                f"(dtype {array.dtype}, shape {array.shape})"
            )
        n = self.core.config.n_levels
        if np.any((array < 0) | (array >= n)):
            raise ValueError(f"{field}: expected levels in [0, {n}), got {array.tolist()}")
        levels = array.reshape(self._k).astype(np.int64)
        if self.masked_action == "raise":
            mask = self._masks[agent]
            for j, level in enumerate(levels):
                if not mask[j, level]:
                    allowed = np.flatnonzero(mask[j]).tolist()
                    raise ValueError(
                        f"{field}: level {int(level)} of sample {j} is masked (it could leave the {agent} "
                        f"amplitude bound); allowed levels for this sample: {allowed}. Masked actions are "
                        "never rewritten; pass masked_action='execute' to play them under the oob mode."
                    )
        return array.astype(np.int64)

    def _convert(self, obs: dict, infos: dict) -> tuple[dict, dict]:
        """Numpy float32 observations and numpy infos; masks in Gymnasium's sample form."""
        out_obs, out_infos = {}, {}
        for agent in self.possible_agents:
            info = {key: np.asarray(value) for key, value in infos[agent].items()}
            o = np.asarray(obs[agent], dtype=np.float32)
            if self._discrete:
                self._masks[agent] = info["action_mask"]
                info["action_mask"] = _numpy_mask(info["action_mask"], self._k)
                if self.mask_in_obs:
                    o = {"observation": o, "action_mask": _numpy_mask(self._masks[agent], self._k)}
            out_obs[agent], out_infos[agent] = o, info
        return out_obs, out_infos


def parallel_env(**options) -> GateParallelEnv:
    """The multi-actuator gate environment as a ``pettingzoo.ParallelEnv``.

    ``parallel_env()`` = coupler, q0 and q1 agents with continuous deltas;
    ``parallel_env(action_mode="discrete", mask_in_obs=True)`` the masked discrete variant;
    ``parallel_env(actuators=("coupler",))`` the paper's single-agent MDP with one agent.
    """
    return GateParallelEnv(**options)
