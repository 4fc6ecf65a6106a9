"""Action distributions: diagonal Gaussian, masked categorical, multi-categorical.

A distribution is described by a small dict of arrays (the *distribution parameters*, a pytree) and a
stateless head object that knows how to sample from it, take its mode, evaluate log-probabilities,
entropies and KL divergences. Keeping the parameters a plain pytree lets rollouts store them, `vmap`
over them and pass them through `lax.scan` without custom classes.

Shapes: ``B`` is any batch shape (possibly empty), ``A`` the number of action dimensions, ``N`` the
number of discrete choices. All log-probabilities are in nats and summed over action dimensions.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp

__all__ = [
    "MASKED_LOGIT",
    "gaussian_logp",
    "gaussian_entropy",
    "gaussian_kl",
    "mask_logits",
    "categorical_logp",
    "categorical_entropy",
    "categorical_kl",
    "categorical_sample",
    "DiagGaussian",
    "Categorical",
    "MultiCategorical",
]

# Logit given to masked-out actions. Large and finite: -inf would turn 0 * log(0) into NaN in the
# entropy and in gradients, while exp(-1e9 - logsumexp) underflows to exactly 0 in float32.
MASKED_LOGIT = -1e9

_HALF_LOG_2PI_E = 0.5 * math.log(2.0 * math.pi * math.e)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------ diagonal Gaussian
def gaussian_logp(mean: jax.Array, log_std: jax.Array, x: jax.Array) -> jax.Array:
    """Log-density of a diagonal Gaussian, summed over the last axis.

    Args:
        mean: (B..., A) means.
        log_std: (A,) or (B..., A) natural log of the standard deviations.
        x: (B..., A) points.

    Returns:
        (B...,) log-densities.
    """
    z = (x - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - _HALF_LOG_2PI, axis=-1)


def gaussian_entropy(log_std: jax.Array) -> jax.Array:
    """Differential entropy sum(log_std + 0.5 log(2 pi e)) over the last axis: (B..., A) -> (B...,)."""
    return jnp.sum(log_std + _HALF_LOG_2PI_E, axis=-1)


def gaussian_kl(mean_p, log_std_p, mean_q, log_std_q) -> jax.Array:
    """KL(p || q) of two diagonal Gaussians, summed over the last axis: (B..., A) -> (B...,)."""
    var_ratio = jnp.exp(2.0 * (log_std_p - log_std_q))
    t = ((mean_p - mean_q) * jnp.exp(-log_std_q)) ** 2
    return jnp.sum(0.5 * (var_ratio + t - 1.0) - (log_std_p - log_std_q), axis=-1)


# ---------------------------------------------------------------------------- masked categorical
def mask_logits(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Replace the logits of forbidden actions by `MASKED_LOGIT`.

    Args:
        logits: (B..., N) unnormalised log-probabilities.
        mask: None (all allowed) or a boolean array broadcastable to `logits`, True = allowed.
    """
    if mask is None:
        return logits
    return jnp.where(jnp.asarray(mask, bool), logits, jnp.asarray(MASKED_LOGIT, logits.dtype))


def categorical_logp(logits: jax.Array, action: jax.Array) -> jax.Array:
    """Log pi(action): logits (B..., N), integer action (B...,) -> (B...,)."""
    logp_all = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(logp_all, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: jax.Array) -> jax.Array:
    """Entropy -sum p log p over the last axis: (B..., N) -> (B...,). Masked actions contribute 0."""
    logp_all = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)


def categorical_kl(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
    """KL(p || q) of two categoricals over the last axis: (B..., N) -> (B...,)."""
    lp = jax.nn.log_softmax(logits_p, axis=-1)
    lq = jax.nn.log_softmax(logits_q, axis=-1)
    return jnp.sum(jnp.exp(lp) * (lp - lq), axis=-1)


def categorical_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """Sample int32 actions (B...,) from logits (B..., N); masked logits are never drawn."""
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


# ------------------------------------------------------------------------------------- heads
@dataclasses.dataclass(frozen=True)
class DiagGaussian:
    """Diagonal Gaussian with parameters ``{"mean": (B..., A), "log_std": (B..., A)}``.

    Samples are unclipped: the log-probability must be that of the sampled action; the environment
    clips to its action space.
    """

    action_dim: int

    @property
    def n_outputs(self) -> int:
        """Outputs the actor head needs: one mean per action dimension (A)."""
        return self.action_dim

    def params_from_head(self, head_out, log_std, mask=None):
        """Distribution parameters from the actor head's output.

        Args:
            head_out: (B..., A) float means.
            log_std: (A,) state-independent log standard deviations, broadcast to (B..., A).
            mask: ignored (continuous actions have no mask).

        Returns:
            ``{"mean": (B..., A), "log_std": (B..., A)}``.
        """
        del mask  # continuous actions have no mask
        return {"mean": head_out, "log_std": jnp.broadcast_to(log_std, head_out.shape)}

    def sample(self, key, dist):
        """Draw an unclipped action mean + exp(log_std) * noise: (B..., A), the dtype of the mean.

        Args:
            key: PRNG key.
            dist: ``{"mean", "log_std"}`` (B..., A).
        """
        noise = jax.random.normal(key, dist["mean"].shape, dist["mean"].dtype)
        return dist["mean"] + jnp.exp(dist["log_std"]) * noise

    def mode(self, dist):
        """The most likely action, the mean: (B..., A)."""
        return dist["mean"]

    def logp(self, dist, action):
        """Log-density of `action` (B..., A), summed over action dimensions: (B...,) nats."""
        return gaussian_logp(dist["mean"], dist["log_std"], action)

    def entropy(self, dist):
        """Differential entropy, summed over action dimensions: (B...,) nats."""
        return gaussian_entropy(dist["log_std"])

    def kl(self, dist_p, dist_q):
        """KL(dist_p || dist_q), summed over action dimensions: (B...,) nats."""
        return gaussian_kl(dist_p["mean"], dist_p["log_std"], dist_q["mean"], dist_q["log_std"])


@dataclasses.dataclass(frozen=True)
class Categorical:
    """Categorical over N choices with parameters ``{"logits": (B..., N)}`` (mask already applied)."""

    n: int

    @property
    def n_outputs(self) -> int:
        """Outputs the actor head needs: one logit per choice (N)."""
        return self.n

    def params_from_head(self, head_out, log_std=None, mask=None):
        """Distribution parameters from the actor head's output.

        Args:
            head_out: (B..., N) float logits.
            log_std: ignored (discrete actions have none).
            mask: None or a boolean (B..., N) array, True = allowed; forbidden logits become
                `MASKED_LOGIT`.

        Returns:
            ``{"logits": (B..., N)}`` with the mask applied.
        """
        return {"logits": mask_logits(head_out, mask)}

    def sample(self, key, dist):
        """Draw int32 actions (B...,) from ``dist["logits"]``; masked choices are never drawn."""
        return categorical_sample(key, dist["logits"])

    def mode(self, dist):
        """The most likely choice, argmax of the logits: int32 (B...,)."""
        return jnp.argmax(dist["logits"], axis=-1).astype(jnp.int32)

    def logp(self, dist, action):
        """Log-probability of the integer `action` (B...,): (B...,) nats."""
        return categorical_logp(dist["logits"], action)

    def entropy(self, dist):
        """Entropy of the categorical: (B...,) nats (masked choices contribute 0)."""
        return categorical_entropy(dist["logits"])

    def kl(self, dist_p, dist_q):
        """KL(dist_p || dist_q) over the N choices: (B...,) nats."""
        return categorical_kl(dist_p["logits"], dist_q["logits"])

    def probs(self, dist):
        """Probabilities softmax(logits): (B..., N), 0 for masked choices."""
        return jax.nn.softmax(dist["logits"], axis=-1)


@dataclasses.dataclass(frozen=True)
class MultiCategorical:
    """Independent categoricals with ``nvec = (N_1, ..., N_D)`` choices.

    Parameters: ``{"logits": (B..., sum(nvec))}`` (components concatenated, mask already applied);
    actions are int32 (B..., D). Log-probabilities, entropies and KLs are summed over components.
    """

    nvec: tuple[int, ...]

    @property
    def n_outputs(self) -> int:
        """Outputs the actor head needs: the logits of all components, sum(nvec)."""
        return int(sum(self.nvec))

    def _split(self, logits):
        # Static split points: nvec is part of the (hashable) network definition.
        cuts = list(itertools.accumulate(self.nvec))[:-1]
        return jnp.split(logits, cuts, axis=-1)

    def params_from_head(self, head_out, log_std=None, mask=None):
        """Distribution parameters from the actor head's output.

        Args:
            head_out: (B..., sum(nvec)) float logits, the components concatenated.
            log_std: ignored (discrete actions have none).
            mask: None or a boolean (B..., sum(nvec)) array, True = allowed; forbidden logits become
                `MASKED_LOGIT`.

        Returns:
            ``{"logits": (B..., sum(nvec))}`` with the mask applied.
        """
        return {"logits": mask_logits(head_out, mask)}

    def sample(self, key, dist):
        """Draw one choice per component, each with its own key: int32 (B..., D).

        Args:
            key: PRNG key, split into D keys.
            dist: ``{"logits": (B..., sum(nvec))}``.
        """
        keys = jax.random.split(key, len(self.nvec))
        parts = [categorical_sample(k, lg) for k, lg in zip(keys, self._split(dist["logits"]))]
        return jnp.stack(parts, axis=-1)

    def mode(self, dist):
        """The most likely choice of each component: int32 (B..., D)."""
        parts = [jnp.argmax(lg, axis=-1).astype(jnp.int32) for lg in self._split(dist["logits"])]
        return jnp.stack(parts, axis=-1)

    def logp(self, dist, action):
        """Log-probability of `action` int (B..., D), summed over components: (B...,) nats."""
        parts = self._split(dist["logits"])
        return sum(categorical_logp(lg, action[..., i]) for i, lg in enumerate(parts))

    def entropy(self, dist):
        """Entropy, summed over components: (B...,) nats."""
        return sum(categorical_entropy(lg) for lg in self._split(dist["logits"]))

    def kl(self, dist_p, dist_q):
        """KL(dist_p || dist_q), summed over components: (B...,) nats."""
        pairs = zip(self._split(dist_p["logits"]), self._split(dist_q["logits"]))
        return sum(categorical_kl(p, q) for p, q in pairs)

    def probs(self, dist):
        """Per-component probabilities, concatenated: (B..., sum(nvec))."""
        return jnp.concatenate([jax.nn.softmax(lg, axis=-1) for lg in self._split(dist["logits"])], -1)
