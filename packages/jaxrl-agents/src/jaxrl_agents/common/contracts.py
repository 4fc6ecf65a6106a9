"""The contracts jaxrl-agents trains on, as `typing.Protocol`s (their checker is `env_check`).

Three structural types (nothing to inherit: an environment package never imports jaxrl-agents;
docs/contracts.md is the prose version):

- `FunctionalEnv`: the single-agent step contract (reset / step / step_autoreset over explicit
  pytrees, ``terminated`` and ``truncated`` separate, ``info["final_obs"]`` in the auto-resetting
  step).
- `MultiAgentEnv`: its multi-agent analogue (dicts keyed by agent id), trained by compiled IPPO.
- `Evaluation`: how an environment describes its own evaluation episode (``env.evaluation``):
  which per-step quantities to record, how to summarise them into named scalars, how to print
  them, which scalar ranks evaluations, what to reduce over a training rollout, how to plot it.
  An environment without one gets `ReturnEvaluation` (episode return and length only).

`env_check.check_env(env)` verifies an environment against them and raises `ContractError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np

__all__ = ["FunctionalEnv", "MultiAgentEnv", "Evaluation", "ReturnEvaluation", "ContractError",
           "evaluation_of", "describe_evaluation", "info_field", "RESERVED_RECORD_KEYS"]

# Keys the evaluation episode records itself; an env's `Evaluation.record` must not reuse them.
RESERVED_RECORD_KEYS = ("reward", "alive", "action", "step")
# Summary fields every evaluation has (``eval_return``, ``eval_len``); an env's summary adds more.
GENERIC_SUMMARY_KEYS = ("return", "len")
SCORE_MODES = ("min", "max")


class ContractError(ValueError):
    """An environment does not follow the contract.

    Attributes:
        part: the part of the contract that fails, e.g. ``"members"``, ``"hashable"``,
            ``"observation_space"``, ``"reset"``, ``"step"``, ``"step_autoreset"``,
            ``"terminated/truncated"``, ``"final_obs"``, ``"state"``, ``"info"``, ``"jit"``,
            ``"vmap"``, ``"agents"``, ``"evaluation"``.
    """

    def __init__(self, name: str, part: str, message: str):
        super().__init__(f"{name}: contract part '{part}': {message} (docs/contracts.md)")
        self.part = part


# ------------------------------------------------------------------------------ protocols
@runtime_checkable
class Evaluation(Protocol):
    """An environment's description of its evaluation episode (``env.evaluation``).

    Attributes:
        score: the summary field that ranks evaluations (the best policy is the best score);
            one of `summarise`'s keys, or ``"return"`` (the episode return).
        score_mode: ``"min"`` or ``"max"``.
        plots: JSON-able hints for ``jaxrl-plot`` (written into the run directory):
            ``{"curve": {"field", "label", "scale"}, "x": {"key", "label"},
            "panels": [{"key", "label", "scale", "kind": "line"|"stairs", "complement": bool}]}``;
            any part may be missing (the plot falls back to return / step / action).
    """

    score: str
    score_mode: str
    plots: Mapping[str, Any]

    def record(self, info: Any) -> Mapping[str, jax.Array]:
        """Per-step quantities to record, from one step's info (traced: pure jax).

        Args:
            info: the info of one ``step`` (single-agent: a dict; multi-agent: keyed by agent
                or by field).

        Returns:
            flat dict name -> array; the evaluation episode stacks them to (T, ...) and
            ``evals.npz`` stores them as (n_evals, T, ...). Names other than
            `RESERVED_RECORD_KEYS`.
        """

    def summarise(self, episode: Mapping[str, np.ndarray]) -> Mapping[str, float]:
        """Named scalars of one recorded episode (numpy).

        Args:
            episode: the recorded arrays (T, ...) plus ``reward`` (T,), ``alive`` (T,) bool (True
                for the steps of the episode, including the one that ended it) and ``action``.

        Returns:
            name -> float (NaN for "not reached"); the trainer writes them as ``eval_<name>``.
        """

    def format(self, summary: Mapping[str, float]) -> str:
        """One short line of `summarise`'s fields for progress output (``""`` for none)."""

    def rollout_stats(self, info: Any) -> Mapping[str, jax.Array]:
        """Scalar diagnostics of a training rollout (traced); written to progress.csv each update.

        Args:
            info: the info of the rollout's steps, with leading axes (T, N, ...).

        Returns:
            dict name -> scalar array.
        """


@runtime_checkable
class FunctionalEnv(Protocol):
    """The single-agent functional step contract (docs/contracts.md).

    ``evaluation`` (an `Evaluation`) is optional and not part of the structural check.
    """

    observation_space: Any
    action_space: Any
    max_episode_steps: int
    default_params: Any
    eval_params: Any

    def reset(self, key, params):
        """Start an episode (pure, jit- and vmap-able).

        Args:
            key: PRNG key.
            params: the environment parameters (``default_params`` or ``eval_params``).

        Returns:
            ``(obs, state)``: obs an array of ``observation_space.shape`` (1-D) with a float or integer
            dtype; state any pytree, the structure, shapes and dtypes every step returns.
        """

    def step(self, key, state, action, params):
        """Advance one step without resetting (pure).

        Args:
            key: PRNG key.
            state: the state from `reset` or a previous step.
            action: an unclipped action of ``action_space``'s shape; the environment clips it.
            params: the environment parameters.

        Returns:
            ``(obs, state, reward, terminated, truncated, info)``: obs as from `reset`, state of reset's
            structure, a float scalar reward, bool scalars ``terminated`` (natural end) and
            ``truncated`` (cut short), kept separate, and a dict info of the same structure every step.
        """

    def step_autoreset(self, key, state, action, params):
        """As `step`, but a finished episode is reset inside (pure).

        Args:
            key: PRNG key.
            state: the state from `reset` or a previous step.
            action: an unclipped action of ``action_space``'s shape.
            params: the environment parameters.

        Returns:
            `step`'s six values, with obs the new episode's first observation where the episode
            ended, and ``info["final_obs"]`` the finished episode's last observation (equal to obs
            where not done); without ``final_obs`` the info has `step`'s structure.
        """


@runtime_checkable
class MultiAgentEnv(Protocol):
    """The functional multi-agent core (dicts keyed by agent id; docs/contracts.md).

    Optional: ``step`` (without reset), ``reset_info(state)`` / ``action_masks(state)``,
    ``max_episode_steps``, ``eval_params``, ``evaluation``.
    """

    agents: tuple
    default_params: Any

    def observation_space(self, agent):
        """The flat (1-D) gymnasium Box observation space of `agent`."""

    def action_space(self, agent):
        """The action space of `agent`: a gymnasium Discrete, MultiDiscrete or Box."""

    def reset(self, key, params):
        """Start an episode (pure).

        Args:
            key: PRNG key.
            params: the environment parameters (``default_params``).

        Returns:
            ``(obs, state)``: obs a dict agent -> (obs_dim,) array; state any pytree, the structure
            every step returns.
        """

    def step_autoreset(self, key, state, actions, params):
        """Advance one step of all agents; finished episodes restart inside (pure).

        Args:
            key: PRNG key.
            state: the state from `reset` or a previous step.
            actions: dict agent -> action of that agent's ``action_space``.
            params: the environment parameters.

        Returns:
            ``(obs, state, rewards, terminated, truncated, infos)``, the first five dicts keyed by
            agent (rewards float scalars, terminated and truncated bool scalars); infos keyed by agent
            (or by field) with each agent's ``final_obs`` (last observation of a finished episode),
            optionally ``cost`` and the ``action_mask`` of the returned observation.
        """


def info_field(info: Mapping, agent, field: str):
    """A multi-agent core's per-agent info field, field-major or agent-major; None if absent.

    ``info[field][agent]`` if ``info[field]`` is a dict, else ``info[agent][field]``.
    """
    if isinstance(info.get(field), Mapping):
        return info[field].get(agent)
    sub = info.get(agent)
    return sub.get(field) if isinstance(sub, Mapping) else None


# ------------------------------------------------------------------- the generic evaluation
class ReturnEvaluation:
    """The evaluation of an environment that describes none: episode return and length only."""

    score = "return"
    score_mode = "max"
    plots: Mapping[str, Any] = {}

    def record(self, info) -> dict:
        """Nothing to record beyond the reserved fields: ``{}``."""
        return {}

    def summarise(self, episode) -> dict:
        """No fields beyond the episode return and length: ``{}``."""
        return {}

    def format(self, summary) -> str:
        """No extra progress output: ``""``."""
        return ""

    def rollout_stats(self, info) -> dict:
        """No rollout diagnostics: ``{}``."""
        return {}


def evaluation_of(env) -> Evaluation:
    """``env.evaluation`` if the environment describes one, else `ReturnEvaluation()`."""
    ev = getattr(env, "evaluation", None)
    return ReturnEvaluation() if ev is None else ev


def describe_evaluation(evaluation: Evaluation) -> dict:
    """What the run directory keeps of an evaluation (config.json ``"evaluation"``).

    Score, score_mode and the plot hints, so tools read field names without importing the env.
    """
    return {"score": evaluation.score, "score_mode": evaluation.score_mode,
            "plots": dict(evaluation.plots or {})}
