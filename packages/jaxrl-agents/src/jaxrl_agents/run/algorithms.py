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

from .. import ppo, trpo
from ..common.config import AlgoConfig
from ..common.evaluation import evaluate_episode
from ..common.networks import ActorCritic

__all__ = ["ALGORITHMS", "get_algorithm", "make_config", "Compiled", "compile_algorithm",
           "model_for", "FINITE_STAT", "all_finite"]

# Stats key of the per-seed flag "parameters, optimiser state and losses are all finite".
FINITE_STAT = "finite"

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
            the input state is donated (its buffers are reused). ``stats[FINITE_STAT]`` (S,) bool
            says whether the seed's new parameters, optimiser state and learning losses are all
            finite.
        evaluate: (actor params (S, ...), env_params, key) -> episode dict of (S, T, ...) arrays.
    """

    model: ActorCritic
    init: Any
    update: Any
    evaluate: Any


def all_finite(tree) -> jax.Array:
    """(S,) bool: whether every floating leaf of `tree` (leaves with leading seed axis S) is finite
    for each seed."""
    flags = [jnp.isfinite(x).reshape(x.shape[0], -1).all(axis=1)
             for x in jax.tree_util.tree_leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return functools.reduce(jnp.logical_and, flags)


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
        states, stats = jax.lax.map(lambda sb: learn_phase(*sb), (states, batches))
        # One flag per seed, reduced here: the trainer reads it with the stats at the host sync
        # it already does, so the check costs a reduction and no extra transfer. Rollout stats
        # (rewards, J_T) are left out: an environment may report NaN there by design.
        losses = {k: v for k, v in stats.items() if k not in batches[1]}
        stats[FINITE_STAT] = all_finite((states.params, states.opt_state, losses))
        return states, stats

    update = jax.jit(update, donate_argnums=0)
    evaluate = jax.jit(jax.vmap(lambda a, p, k: evaluate_episode(model, a, env, p, k),
                                in_axes=(0, None, None)))
    return Compiled(model, init, update, evaluate)
