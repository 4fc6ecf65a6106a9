"""Shared fixtures of the jaxrl-agents tests: the toy environment and tiny configurations.

Tests that compile an update reuse these exact configs so jaxrl_agents.algorithms'
compilation cache serves them all (compiling is what costs time on a 2-core machine).
"""

import jax
import pytest

from .toy_envs import Reach

TOY_ENV = "tests.jaxrl_agents.toy_envs:make_reach"
TOY_OPTIONS = {"horizon": 8}
SEEDS = (1, 2)

# 4 updates of 128 steps: big enough to exercise every code path, small enough to compile fast.
PPO_TINY = dict(n_envs=8, n_steps=16, n_epochs=2, n_minibatches=4, hidden=(16, 16),
                total_steps=4 * 128, lr=1e-3)
TRPO_TINY = dict(n_envs=8, n_steps=16, batch_size=32, n_critic_updates=2, hidden=(16, 16),
                 total_steps=4 * 128, lr=1e-3)
TINY = {"ppo": PPO_TINY, "trpo": TRPO_TINY}


@pytest.fixture
def x64():
    """Run the test body with float64 enabled, as the trainer does."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def toy_env():
    return Reach(**TOY_OPTIONS)
