"""User networks for the tests: factories ``factory(obs_dim, n_outputs, **options)`` named
``"tests.jaxrl_agents.user_networks:<name>"``, and broken ones for the error tests."""

import flax.linen as nn
import jax.numpy as jnp

SPEC = "tests.jaxrl_agents.user_networks:residual_layernorm"


class ResidualTower(nn.Module):
    """Dense -> LayerNorm -> one residual block -> head: what the default MLP cannot express.

    Attributes:
        width: hidden width.
        n_out: output width (head outputs for the actor, 1 for the critic).
    """

    width: int
    n_out: int

    @nn.compact
    def __call__(self, obs):
        """obs (B..., obs_dim) -> (B..., n_out)."""
        h = nn.LayerNorm()(nn.Dense(self.width)(obs))
        h = h + nn.Dense(self.width)(nn.tanh(nn.Dense(self.width)(nn.tanh(h))))  # residual block
        return nn.Dense(self.n_out, kernel_init=nn.initializers.orthogonal(0.01))(nn.tanh(h))


def residual_layernorm(obs_dim, n_outputs, width=16):
    """Actor and critic towers, each a `ResidualTower` (separate parameters)."""
    del obs_dim  # Dense layers infer their input width
    return ResidualTower(width, n_outputs), ResidualTower(width, 1)


def wrong_width(obs_dim, n_outputs):
    """An actor with one output too many."""
    return ResidualTower(8, n_outputs + 1), ResidualTower(8, 1)


def not_modules(obs_dim, n_outputs):
    return "actor", "critic"


class _WithBatchStats(nn.Module):
    @nn.compact
    def __call__(self, obs):
        return nn.Dense(1)(nn.BatchNorm(use_running_average=True)(obs))


def stateful(obs_dim, n_outputs):
    """A critic with a batch_stats collection (not supported: parameters only)."""
    return ResidualTower(8, n_outputs), _WithBatchStats()


def crashes(obs_dim, n_outputs):
    """Towers whose forward pass fails (a matmul of the wrong width)."""

    class Bad(nn.Module):
        @nn.compact
        def __call__(self, obs):
            return obs @ jnp.ones((obs.shape[-1] + 1, n_outputs))

    return Bad(), Bad()
