"""Actor-critic MLPs in plain JAX (parameters are nested dicts of float32 arrays).

Mirrors Stable-Baselines3's ``ActorCriticPolicy`` as the paper used it: separate policy and value MLPs
(no shared trunk), orthogonal initialisation with gain sqrt(2) for hidden layers, 0.01 for the policy
head and 1 for the value head, zero biases, and for continuous actions a state-independent log-std
initialised at 0 (std 1).

Parameter pytree (``L = len(hidden)``; kernels are ``(in, out)``, i.e. ``y = x @ kernel + bias``)::

    {"actor":  {"net": {"dense_0": {"kernel": (obs_dim, h0), "bias": (h0,)},
                        ...,
                        "dense_L": {"kernel": (h_{L-1}, n_outputs), "bias": (n_outputs,)}},
                "log_std": (action_dim,)},          # Gaussian heads only
     "critic": {"net": {"dense_0": ..., "dense_L": {"kernel": (h_{L-1}, 1), "bias": (1,)}}}}

Parameters are float32 whatever the global precision: the environment may run in float64 (the trainer
enables x64), the networks never do; observations are cast to float32 on entry.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .distributions import Categorical, DiagGaussian, MultiCategorical

__all__ = ["ACTIVATIONS", "ACTION_KINDS", "ActorCritic", "mlp_init", "mlp_apply", "orthogonal"]

Params = dict[str, Any]


def _leaky_relu(x):
    return jax.nn.leaky_relu(x, negative_slope=0.01)


def _gelu(x):
    # Exact (erf) GELU, as torch.nn.GELU: policies imported from SB3 must give the same actions.
    return jax.nn.gelu(x, approximate=False)


ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "leaky_relu": _leaky_relu, "gelu": _gelu}
ACTION_KINDS = ("gaussian", "categorical", "multi_categorical")

HIDDEN_GAIN = math.sqrt(2.0)
POLICY_HEAD_GAIN = 0.01
VALUE_HEAD_GAIN = 1.0


def orthogonal(key: jax.Array, shape: tuple[int, int], gain: float) -> jax.Array:
    """Orthogonal (in, out) float32 matrix times `gain` (Saxe et al.; the scheme of SB3 / flax).

    The Gaussian draw uses `key`; the QR decomposition runs in numpy on the host: XLA's QR takes
    seconds to compile on CPU (ten under vmap), for a step that runs once per training run.
    """
    n_in, n_out = shape
    big, small = max(n_in, n_out), min(n_in, n_out)
    a = np.asarray(jax.random.normal(key, (big, small), jnp.float32), np.float64)
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))  # unique decomposition -> uniformly distributed q
    if n_in < n_out:
        q = q.T
    return jnp.asarray(gain * q, jnp.float32)


def mlp_init(key: jax.Array, sizes: tuple[int, ...], head_gain: float) -> Params:
    """Initialise an MLP with layer sizes ``(in, h0, ..., out)`` (eagerly: not jit-able).

    Hidden kernels get orthogonal init with gain sqrt(2), the last one ``head_gain``; biases are zero.
    Returns ``{"dense_i": {"kernel": (sizes[i], sizes[i+1]) float32, "bias": (sizes[i+1],) float32}}``.
    """
    n_layers = len(sizes) - 1
    keys = jax.random.split(key, n_layers)
    net = {}
    for i in range(n_layers):
        gain = head_gain if i == n_layers - 1 else HIDDEN_GAIN
        net[f"dense_{i}"] = {
            "kernel": orthogonal(keys[i], (sizes[i], sizes[i + 1]), gain),
            "bias": jnp.zeros((sizes[i + 1],), jnp.float32),
        }
    return net


def mlp_apply(net: Params, x: jax.Array, activation: str) -> jax.Array:
    """Apply an MLP built by `mlp_init`: x (B..., in) -> (B..., out). No activation after the head."""
    act = ACTIVATIONS[activation]
    n_layers = len(net)
    h = x.astype(jnp.float32)
    for i in range(n_layers):
        layer = net[f"dense_{i}"]
        h = h @ layer["kernel"] + layer["bias"]
        if i < n_layers - 1:
            h = act(h)
    return h


@dataclasses.dataclass(frozen=True)
class ActorCritic:
    """Definition of an actor-critic network (hashable, so it can be a static `jit` argument).

    Attributes:
        obs_dim: length of the flat observation vector.
        action_kind: "gaussian" (Box actions), "categorical" (Discrete) or "multi_categorical"
            (MultiDiscrete).
        action_shape: (action_dim,) for "gaussian", (n,) for "categorical", nvec for
            "multi_categorical".
        hidden: hidden layer widths, shared by actor and critic.
        activation: one of `ACTIVATIONS`.
    """

    obs_dim: int
    action_kind: str
    action_shape: tuple[int, ...]
    hidden: tuple[int, ...] = (128, 128)
    activation: str = "tanh"

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "action_shape", tuple(int(a) for a in self.action_shape))
        if not isinstance(self.obs_dim, (int, np.integer)) or self.obs_dim <= 0:
            raise ValueError(f"obs_dim: expected a positive int, got {self.obs_dim!r}")
        object.__setattr__(self, "obs_dim", int(self.obs_dim))
        if self.action_kind not in ACTION_KINDS:
            raise ValueError(f"action_kind: expected one of {ACTION_KINDS}, got {self.action_kind!r}")
        if not self.action_shape or any(a <= 0 for a in self.action_shape):
            raise ValueError(f"action_shape: expected positive sizes, got {self.action_shape!r}")
        if self.action_kind in ("gaussian", "categorical") and len(self.action_shape) != 1:
            raise ValueError(
                f"action_shape: {self.action_kind} expects one entry, got {self.action_shape!r}")
        if not self.hidden or any(h <= 0 for h in self.hidden):
            raise ValueError(f"hidden: expected positive layer widths, got {self.hidden!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation: expected one of {sorted(ACTIVATIONS)}, got {self.activation!r}")

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_spaces(cls, observation_space, action_space, hidden=(128, 128), activation="tanh"):
        """Build the network definition for gymnasium spaces (1-D Box observations;
        Box, Discrete or MultiDiscrete actions)."""
        from gymnasium import spaces

        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(
                "observation_space: expected a 1-D gymnasium.spaces.Box, got "
                f"{observation_space!r}; flatten observations in the environment")
        obs_dim = observation_space.shape[0]
        if isinstance(action_space, spaces.Box):
            if len(action_space.shape) != 1:
                raise ValueError(f"action_space: expected a 1-D Box, got {action_space!r}")
            return cls(obs_dim, "gaussian", action_space.shape, hidden, activation)
        if isinstance(action_space, spaces.Discrete):
            return cls(obs_dim, "categorical", (int(action_space.n),), hidden, activation)
        if isinstance(action_space, spaces.MultiDiscrete):
            return cls(obs_dim, "multi_categorical", tuple(action_space.nvec.ravel()), hidden,
                       activation)
        raise ValueError(
            "action_space: expected gymnasium Box, Discrete or MultiDiscrete, got "
            f"{type(action_space).__name__}")

    def to_dict(self) -> dict:
        """JSON-serialisable description; ``ActorCritic(**d)`` rebuilds it."""
        return {"obs_dim": self.obs_dim, "action_kind": self.action_kind,
                "action_shape": list(self.action_shape), "hidden": list(self.hidden),
                "activation": self.activation}

    @property
    def head(self):
        """The distribution head (`DiagGaussian`, `Categorical` or `MultiCategorical`)."""
        if self.action_kind == "gaussian":
            return DiagGaussian(self.action_shape[0])
        if self.action_kind == "categorical":
            return Categorical(self.action_shape[0])
        return MultiCategorical(self.action_shape)

    @property
    def is_discrete(self) -> bool:
        return self.action_kind != "gaussian"

    # ------------------------------------------------------------------------------ params
    def param_shapes(self) -> Params:
        """The parameter pytree with shapes (tuples) as leaves, without drawing anything."""
        def net(n_out):
            sizes = (self.obs_dim, *self.hidden, n_out)
            return {f"dense_{i}": {"kernel": (sizes[i], sizes[i + 1]), "bias": (sizes[i + 1],)}
                    for i in range(len(sizes) - 1)}

        actor = {"net": net(self.head.n_outputs)}
        if self.action_kind == "gaussian":
            actor["log_std"] = (self.action_shape[0],)
        return {"actor": actor, "critic": {"net": net(1)}}

    def init(self, key: jax.Array) -> Params:
        """Fresh float32 parameters ``{"actor": ..., "critic": ...}`` (layout in the module doc).

        Runs eagerly (the orthogonal init uses a host QR), so call it outside `jit`/`vmap`.
        """
        k_actor, k_critic = jax.random.split(key)
        actor = {"net": mlp_init(k_actor, (self.obs_dim, *self.hidden, self.head.n_outputs),
                                 POLICY_HEAD_GAIN)}
        if self.action_kind == "gaussian":
            actor["log_std"] = jnp.zeros((self.action_shape[0],), jnp.float32)
        critic = {"net": mlp_init(k_critic, (self.obs_dim, *self.hidden, 1), VALUE_HEAD_GAIN)}
        return {"actor": actor, "critic": critic}

    # ----------------------------------------------------------------------------- forward
    def dist(self, actor_params: Params, obs: jax.Array, mask: jax.Array | None = None) -> dict:
        """Distribution parameters for observations (B..., obs_dim).

        Args:
            actor_params: ``params["actor"]``.
            obs: (B..., obs_dim), any float dtype (cast to float32).
            mask: discrete heads only, boolean (B..., n_outputs), True = allowed.

        Returns:
            ``{"mean", "log_std"}`` (B..., A) for Gaussian heads, ``{"logits"}`` (B..., N) otherwise.
        """
        out = mlp_apply(actor_params["net"], obs, self.activation)
        return self.head.params_from_head(out, actor_params.get("log_std"), mask)

    def value(self, critic_params: Params, obs: jax.Array) -> jax.Array:
        """State values V(obs): (B..., obs_dim) -> (B...,) float32."""
        return mlp_apply(critic_params["net"], obs, self.activation)[..., 0]

    def sample(self, actor_params, obs, key, mask=None):
        """Sample actions and their log-probabilities: returns ((B..., *action), (B...,))."""
        d = self.dist(actor_params, obs, mask)
        action = self.head.sample(key, d)
        return action, self.head.logp(d, action)

    def mode(self, actor_params, obs, mask=None):
        """Deterministic actions: Gaussian mean or most likely choice(s)."""
        return self.head.mode(self.dist(actor_params, obs, mask))

    def logp(self, dist, action):
        """Log-probability of `action` under distribution parameters `dist`: (B...,)."""
        return self.head.logp(dist, action)

    def entropy(self, dist):
        """Entropy of `dist`: (B...,)."""
        return self.head.entropy(dist)

    def kl(self, dist_p, dist_q):
        """KL(p || q): (B...,)."""
        return self.head.kl(dist_p, dist_q)
