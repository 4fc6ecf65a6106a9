"""Shared fixtures of the jaxrl-agents tests: the toy environment and tiny configurations.

Tests that compile an update reuse these exact configs so jaxrl_agents.run.algorithms'
compilation cache serves them all (compiling is what costs time on a 2-core machine).
"""

import jax
import pytest

from .toy_envs import Reach

TOY_ENV = "tests.jaxrl_agents.toy_envs:make_reach"
TOY_OPTIONS = {}
SEEDS = (1, 2)

# One config per algorithm for every test that compiles an update (one update, determinism, run
# directory, resume, learning): compiling dominates the cost, running 30 toy updates does not.
PPO_CFG = dict(n_envs=16, n_steps=32, n_epochs=4, n_minibatches=4, hidden=(32, 32),
               total_steps=512 * 30, lr=3e-3)
TRPO_CFG = dict(n_envs=8, n_steps=64, batch_size=64, n_critic_updates=5, hidden=(32, 32),
                total_steps=512 * 30, lr=3e-3, target_kl=0.02)
CFG = {"ppo": PPO_CFG, "trpo": TRPO_CFG}


@pytest.fixture
def x64():
    """Run the test body with float64 enabled, as the trainer does."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def toy_env():
    return Reach(**TOY_OPTIONS)
