"""`Policy`: a trained actor-critic, whatever produced it (PPO, TRPO, IPPO, sb3-bridge).

On disk a policy is a directory with two files:

- ``policy.json``: ``{"format": "jaxrl_agents.Policy", "format_version": 1 or 2, "network": {...},
  "metadata": {...}}`` where ``network`` is `ActorCritic.to_dict()`, what rebuilds the Flax modules:
  obs_dim, action_kind, action_shape and either hidden + activation (the default towers, format 1,
  as written before the towers were Flax modules) or ``network`` ("module:factory") +
  ``network_options`` (a user network, format 2: the factory is imported again on load);
  ``metadata`` is free-form JSON (algorithm, step, seed, ...);
- ``params.npz``: the float32 Flax variables (the towers' ``"params"`` collections under
  ``actor/net`` and ``critic/net``, plus ``actor/log_std``) flattened to arrays keyed by their
  path, e.g. ``actor/net/dense_0/kernel`` (kernels are (in, out)), ``critic/net/dense_2/bias``.

Loading uses ``np.load(..., allow_pickle=False)`` and checks every shape against the network
definition, so a policy file can never execute code.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from .fileio import atomic_savez, atomic_write_json, flatten_dict, load_npz, unflatten_dict
from .networks import ActorCritic, as_float32

__all__ = ["Policy", "load_policy", "POLICY_FORMAT", "BEST_POLICY_DIR", "LAST_POLICY_DIR"]

POLICY_FORMAT = "jaxrl_agents.Policy"
POLICY_FORMAT_VERSION = 2  # the newest this code reads; 2 = a user network (module:factory)
POLICY_JSON = "policy.json"
PARAMS_NPZ = "params.npz"
# Sub-directories of a training run directory (see run/trainer.py).
BEST_POLICY_DIR = "best_policy"
LAST_POLICY_DIR = "last_policy"


@functools.partial(jax.jit, static_argnums=0)
def _mode(model, actor_params, obs, mask):
    return model.mode(actor_params, obs, mask)


@functools.partial(jax.jit, static_argnums=0)
def _sample(model, actor_params, obs, key, mask):
    return model.sample(actor_params, obs, key, mask)[0]


@functools.partial(jax.jit, static_argnums=0)
def _value(model, critic_params, obs):
    return model.value(critic_params, obs)


@functools.partial(jax.jit, static_argnums=0)
def _probs(model, actor_params, obs, mask):
    return model.head.probs(model.dist(actor_params, obs, mask))


class Policy:
    """A deterministic-or-stochastic policy with its value function.

    Args:
        model: the network definition.
        params: ``{"actor": ..., "critic": ...}`` as built by ``model.init`` (layout in networks.py).
        metadata: JSON-serialisable information saved with the policy (algorithm, step, seed...).

    Observations are float arrays (obs_dim,) or batches (B, obs_dim), or a PettingZoo-style dict
    ``{"observation": ..., "action_mask": ...}``. Gaussian actions are returned unclipped: the
    environment clips them to its action space (as during training).
    """

    def __init__(self, model: ActorCritic, params: Mapping, metadata: Mapping | None = None):
        if not isinstance(model, ActorCritic):
            raise TypeError(f"model: expected an ActorCritic, got {type(model).__name__}")
        _check_params(params, model.param_shapes())
        self.model = model
        self.params = as_float32(params)
        self.metadata = dict(metadata or {})

    # ------------------------------------------------------------------------------ helpers
    def _split_obs(self, obs, action_mask):
        if isinstance(obs, Mapping):
            if action_mask is None:
                action_mask = obs.get("action_mask")
            obs = obs["observation"]
        obs = np.asarray(obs, np.float32)
        if obs.shape[-1:] != (self.model.obs_dim,):
            raise ValueError(
                f"obs: expected shape (obs_dim,) or (batch, obs_dim) with obs_dim="
                f"{self.model.obs_dim}, got {obs.shape}")
        if action_mask is not None:
            if not self.model.is_discrete:
                raise ValueError("action_mask: only discrete policies accept an action mask")
            action_mask = np.asarray(action_mask, bool)
        return obs, action_mask

    # ---------------------------------------------------------------------------- public API
    def act(self, obs, key: jax.Array | None = None, deterministic: bool | None = None,
            action_mask=None, *, rng: jax.Array | None = None) -> np.ndarray:
        """Choose actions.

        Args:
            obs: (obs_dim,) or (B, obs_dim) observations, or a dict with "observation" and
                "action_mask".
            key: PRNG key, required when ``deterministic=False``.
            deterministic: mean (Gaussian) or arg-max (discrete) action when True. Default: True,
                except with `rng`.
            action_mask: boolean (n_outputs,) or (B, n_outputs), True = allowed (discrete only).
            rng: the IPPO spelling (``act(obs, rng=None)``): a key given as `rng` samples unless
                ``deterministic=True``; ``act(obs)`` stays deterministic.

        Returns:
            (A,) / (B, A) float32 for Gaussian policies, int32 () / (B,) for categorical,
            (D,) / (B, D) for multi-categorical.
        """
        if rng is not None:
            if key is not None:
                raise ValueError("rng: an alias of key; pass one of them, got both")
            key = rng
        if deterministic is None:
            deterministic = rng is None
        obs, mask = self._split_obs(obs, action_mask)
        if deterministic:
            out = _mode(self.model, self.params["actor"], obs, mask)
        else:
            if key is None:
                raise ValueError("key: act(deterministic=False) needs a PRNG key, got None; "
                                 "pass key=jax.random.PRNGKey(...)")
            out = _sample(self.model, self.params["actor"], obs, key, mask)
        return np.asarray(out)

    def value(self, obs) -> np.ndarray:
        """State value V(obs): () for one observation, (B,) for a batch (float32)."""
        obs, _ = self._split_obs(obs, None)
        return np.asarray(_value(self.model, self.params["critic"], obs))

    def action_probs(self, obs, action_mask=None):
        """Action probabilities of a discrete policy, per component.

        Returns:
            categorical: (..., n). Multi-categorical with ``nvec = (n, ..., n)`` (every component
            the same size): (..., D, n), row d the probabilities of component d. Unequal
            components cannot be stacked: a tuple of D arrays (..., n_d). (The mask stays one
            flat (..., sum(nvec)) vector, the network's layout.)
        """
        if not self.model.is_discrete:
            raise ValueError("action_probs: only defined for discrete (categorical) policies; this "
                             "policy is Gaussian")
        obs, mask = self._split_obs(obs, action_mask)
        probs = np.asarray(_probs(self.model, self.params["actor"], obs, mask))
        nvec = getattr(self.model.head, "nvec", None)
        if nvec is None:  # one categorical
            return probs
        if len(set(nvec)) == 1:
            return probs.reshape(probs.shape[:-1] + (len(nvec), nvec[0]))
        return tuple(np.split(probs, np.cumsum(nvec)[:-1], axis=-1))

    def save(self, directory: str) -> None:
        """Write ``policy.json`` and ``params.npz`` into `directory` (created if needed)."""
        os.makedirs(directory, exist_ok=True)
        atomic_savez(os.path.join(directory, PARAMS_NPZ),
                     flatten_dict(jax.device_get(self.params)), compress=False)
        atomic_write_json(os.path.join(directory, POLICY_JSON), {
            # Version 1 for the default towers with one width list: their files stay readable by
            # older releases (which know neither user networks nor a critic of its own widths).
            "format": POLICY_FORMAT,
            "format_version": 1 if self.model.network is None and self.model.critic_hidden is None else 2,
            "network": self.model.to_dict(), "metadata": _jsonable(self.metadata)})

    @classmethod
    def load(cls, directory: str) -> Policy:
        """Rebuild a policy written by `save` (no pickle).

        Raises:
            FileNotFoundError: `directory` holds no policy.json.
            ValueError: policy.json or params.npz is corrupt, truncated, of another format or
                does not fit the network it declares; the message names the file.
        """
        path = os.path.join(directory, POLICY_JSON)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"directory: expected a policy directory containing "
                                    f"{POLICY_JSON}, got {directory!r}")
        try:
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not a UTF-8 text file ({e.reason})") from None
        except json.JSONDecodeError as e:  # the parser's message alone names no file
            raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column "
                             f"{e.colno}); a truncated or edited policy file") from None
        if not isinstance(spec, dict):
            raise ValueError(f"{path}: expected a JSON object, got {type(spec).__name__}")
        if spec.get("format") != POLICY_FORMAT:
            raise ValueError(f"{path}: expected format {POLICY_FORMAT!r}, got {spec.get('format')!r}")
        version = spec.get("format_version", 0)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"{path}: format_version expected an integer, got {version!r}")
        if version > POLICY_FORMAT_VERSION:
            raise ValueError(f"{path}: format_version {spec['format_version']} is newer than this "
                             f"jaxrl-agents understands ({POLICY_FORMAT_VERSION}); upgrade it")
        network, metadata = spec.get("network"), spec.get("metadata", {})
        if not isinstance(network, dict):
            raise ValueError(f"{path}: 'network' expected a JSON object of the network's fields, "
                             f"got {network!r}")
        if not isinstance(metadata, dict):
            raise ValueError(f"{path}: 'metadata' expected a JSON object, got {metadata!r}")
        try:
            model = ActorCritic(**network)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: 'network' does not define a network ({e})") from None
        params = unflatten_dict(load_npz(os.path.join(directory, PARAMS_NPZ)))
        try:
            return cls(model, params, metadata)
        except ValueError as e:  # shapes that do not fit the declared network
            raise ValueError(f"{os.path.join(directory, PARAMS_NPZ)}: does not fit the network of "
                             f"{POLICY_JSON} ({e})") from None

    def __repr__(self) -> str:
        return f"Policy({self.model!r}, metadata={self.metadata!r})"


def _check_params(params: Mapping, expected: Mapping, path: str = "params") -> None:
    if not isinstance(params, Mapping):
        raise ValueError(f"{path}: expected a dict, got {type(params).__name__}")
    missing = set(expected) - set(params)
    extra = set(params) - set(expected)
    if missing or extra:
        raise ValueError(f"{path}: expected keys {sorted(expected)}, got {sorted(params)}")
    for k, exp in expected.items():
        if isinstance(exp, Mapping):
            _check_params(params[k], exp, f"{path}/{k}")
        elif tuple(np.shape(params[k])) != tuple(exp):
            raise ValueError(f"{path}/{k}: expected shape {tuple(exp)}, got "
                             f"{tuple(np.shape(params[k]))}")


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.generic, np.ndarray)) or hasattr(x, "__jax_array__"):
        return np.asarray(x).tolist()
    return x


def load_policy(run_dir: str, which: str = "best") -> Policy:
    """Load the policy of a training run (or a policy directory itself).

    Args:
        run_dir: a run directory written by ``jaxrl-train`` or a directory containing policy.json.
        which: "best" (best evaluation so far) or "last" (latest evaluation).
    """
    if os.path.isfile(os.path.join(run_dir, POLICY_JSON)):
        return Policy.load(run_dir)
    sub = {"best": BEST_POLICY_DIR, "last": LAST_POLICY_DIR}.get(which)
    if sub is None:
        raise ValueError(f"which: expected 'best' or 'last', got {which!r}")
    target = os.path.join(run_dir, sub)
    if not os.path.isfile(os.path.join(target, POLICY_JSON)):
        raise FileNotFoundError(f"run_dir: no {which} policy in {run_dir!r} (looked for "
                                f"{os.path.join(sub, POLICY_JSON)}); has the run evaluated yet?")
    return Policy.load(target)
