"""Registry of the on-policy algorithms and their compiled, seed-vmapped programs.

Every algorithm module exposes the same surface: a config class, ``init(seed_key, model, env,
env_params, cfg)``, ``make_phases(model, env, cfg)`` (rollout half, learning half) and
``make_update(model, env, cfg)`` (the two chained, for one seed), so the trainer, the CLI and the
benchmark never branch on the algorithm.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from . import ppo, trpo
from .config import AlgoConfig
from .evaluation import evaluate_episode
from .networks import ActorCritic

__all__ = ["ALGORITHMS", "get_algorithm", "make_config", "Compiled", "compile_algorithm",
           "model_for"]

ALGORITHMS = {"ppo": (ppo, ppo.PPOConfig), "trpo": (trpo, trpo.TRPOConfig)}


def get_algorithm(name: str):
    """(module, config class) of algorithm `name`; ValueError listing the choices otherwise."""
    if name not in ALGORITHMS:
        raise ValueError(f"algo: expected one of {sorted(ALGORITHMS)}, got {name!r}")
    return ALGORITHMS[name]


def make_config(name: str, config: AlgoConfig | dict | None = None) -> AlgoConfig:
    """Validated config of algorithm `name` from a config object, a dict of fields or None."""
    _, cls = get_algorithm(name)
    if config is None:
        return cls()
    if isinstance(config, dict):
        return cls.from_dict(config)
    if not isinstance(config, cls):
        raise ValueError(f"config: expected a {cls.__name__} for algo {name!r}, got "
                         f"{type(config).__name__}")
    return config


def model_for(env, cfg: AlgoConfig) -> ActorCritic:
    """The actor-critic definition for `env`'s spaces with the config's hidden sizes/activation."""
    return ActorCritic.from_spaces(env.observation_space, env.action_space, cfg.hidden,
                                   cfg.activation)


class Compiled(NamedTuple):
    """Jitted programs over a leading seed axis S.

    Attributes:
        model: the `ActorCritic` definition.
        init: (S, 2) seed keys, env_params -> TrainState with leaves (S, ...) (eager, per seed).
        update: (TrainState (S, ...), env_params) -> (TrainState, stats dict of (S,) arrays);
            the input state is donated (its buffers are reused).
        evaluate: (actor params (S, ...), env_params, key) -> episode dict of (S, T, ...) arrays.
    """

    model: ActorCritic
    init: Any
    update: Any
    evaluate: Any


@functools.lru_cache(maxsize=16)
def compile_algorithm(name: str, env, cfg: AlgoConfig) -> Compiled:
    """Build (and cache, keyed on the hashable env and config) the seed-vmapped programs.

    Compilation itself happens lazily at the first call, under the caller's precision setting.
    """
    module, _ = get_algorithm(name)
    model = model_for(env, cfg)

    def init(seed_keys, env_params):
        states = [module.init(k, model, env, env_params, cfg) for k in seed_keys]
        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)

    rollout_phase, learn_phase = module.make_phases(model, env, cfg)

    def update(states, env_params):
        states, batches = jax.vmap(rollout_phase, in_axes=(0, None))(states, env_params)
        # Learning runs seed after seed (lax.map) inside the same program: the rollout gains from
        # a wider vmap, but XLA's CPU batched matmuls made a vmapped learning phase about twice as
        # slow per seed as one seed's (measured with the paper's PPO config on 2 cores).
        return jax.lax.map(lambda sb: learn_phase(*sb), (states, batches))

    update = jax.jit(update, donate_argnums=0)
    evaluate = jax.jit(jax.vmap(lambda a, p, k: evaluate_episode(model, a, env, p, k),
                                in_axes=(0, None, None)))
    return Compiled(model, init, update, evaluate)
