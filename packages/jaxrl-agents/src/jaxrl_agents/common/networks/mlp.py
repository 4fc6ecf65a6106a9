"""The default tower: an MLP as a Flax linen module, its activations and its initialisation.

The layer pieces that `ActorCritic` (``networks/__init__.py``) builds its default actor and critic towers from,
one concept kept in its own module apart from the actor-critic definition and the resolution of
user networks (``networks/__init__.py``), so that each stays short and readable: the `ACTIVATIONS` table,
the orthogonal gains of SB3's ``ActorCriticPolicy`` (sqrt(2) hidden, 0.01 policy head, 1 value
head), `orthogonal`, `mlp_init` (the host-QR initialisation that makes a seed's parameters
bit-identical to earlier releases), the `MLP` module and `mlp_apply`. The SB3 bridge maps torch
activations onto `ACTIVATIONS` and SB3's layers onto `MLP`'s ``dense_i`` names.

Parameters are float32 whatever the global precision; inputs are cast to float32 on entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["ACTIVATIONS", "HIDDEN_GAIN", "POLICY_HEAD_GAIN", "VALUE_HEAD_GAIN", "MLP", "mlp_init",
           "mlp_apply", "orthogonal"]

Params = dict[str, Any]


def _leaky_relu(x):
    return jax.nn.leaky_relu(x, negative_slope=0.01)


def _gelu(x):
    # Exact (erf) GELU, as torch.nn.GELU: policies imported from SB3 must give the same actions.
    return jax.nn.gelu(x, approximate=False)


ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "leaky_relu": _leaky_relu, "gelu": _gelu}

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


class MLP(nn.Module):
    """The default tower: Dense layers ``dense_0 .. dense_{L}`` with `activation` between them.

    Its own initialisers are flax's orthogonal ones (gain sqrt(2) hidden, `head_gain` last) and
    zero biases, so ``MLP(...).init`` works anywhere (also under `jit`). `ActorCritic.init` instead
    fills the default towers with `mlp_init`, which splits the key per layer and does the QR on
    the host exactly as before the towers were Flax modules: the same seed gives bit-identical
    parameters (and paper runs), and no XLA QR is compiled.

    Attributes:
        features: output widths of the layers, ``(h0, ..., h_{L-1}, n_out)``.
        activation: one of `ACTIVATIONS`, applied after every layer but the last.
        head_gain: orthogonal gain of the last layer (0.01 policy head, 1 value head).
    """

    features: Sequence[int]
    activation: str = "tanh"
    head_gain: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """X (B..., in) -> (B..., features[-1]) float32; no activation after the last layer."""
        act = ACTIVATIONS[self.activation]
        h = x.astype(jnp.float32)
        n_layers = len(self.features)
        for i, width in enumerate(self.features):
            gain = self.head_gain if i == n_layers - 1 else HIDDEN_GAIN
            h = nn.Dense(width, name=f"dense_{i}", kernel_init=nn.initializers.orthogonal(gain),
                         bias_init=nn.initializers.zeros, param_dtype=jnp.float32)(h)
            if i < n_layers - 1:
                h = act(h)
        return h


def mlp_apply(net: Params, x: jax.Array, activation: str) -> jax.Array:
    """Apply the default tower to its parameters `net` (as built by `mlp_init`).

    x (B..., in) -> (B..., out). The widths are read from the kernels.
    """
    features = tuple(net[f"dense_{i}"]["kernel"].shape[1] for i in range(len(net)))
    return MLP(features, activation).apply({"params": net}, x)

