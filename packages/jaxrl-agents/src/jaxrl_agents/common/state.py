"""The train state every on-policy algorithm carries from one update to the next."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["TrainState", "init_train_state", "stack_trees", "unstack_tree"]


class TrainState(NamedTuple):
    """Everything an update needs; a pytree, so it vmaps over seeds and checkpoints leaf by leaf.

    Attributes:
        params: network parameters ``{"actor", "critic"}`` (float32).
        opt_state: optimiser state (optax pytree).
        env_state: (n_envs, ...) environment states.
        obs: (n_envs, obs_dim) current observations.
        key: PRNG key (raw uint32 (2,), so it saves as a plain array).
        update: int32 scalar, number of updates done.
    """

    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array
    key: jax.Array
    update: jax.Array


def stack_trees(trees):
    """Pytrees of one structure stacked leaf by leaf on a new leading axis (seeds, agents)."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def unstack_tree(stacked, n: int) -> list:
    """The `n` pytrees of `stack_trees`, from its result."""
    return [jax.tree_util.tree_map(lambda x, i=i: x[i], stacked) for i in range(n)]


@functools.partial(jax.jit, static_argnums=0)
def _reset_all(env, keys, env_params):
    return jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)


def init_train_state(seed_key: jax.Array, model, env, env_params, n_envs: int, opt_init,
                     log_std_init: float = 0.0, params=None) -> TrainState:
    """Fresh state: the seed key splits into (network, environments, training) keys.

    Runs eagerly (network init uses a host QR); the environment resets are one jitted call.

    Args:
        seed_key: ``jax.random.PRNGKey(seed)``.
        model: `ActorCritic`.
        env: functional environment.
        env_params: parameters the training environments are reset with.
        n_envs: number of parallel environments.
        opt_init: params -> optimiser state (the algorithm decides what it optimises).
        log_std_init: initial log standard deviation of a Gaussian head (every action
            dimension); 0 keeps the initial parameters' own (std 1 for a fresh network, the
            learned std for `params`).
        params: initial ``{"actor", "critic"}`` parameters (a fine-tuning start, laid out as
            ``model.init``'s); None: a fresh network. The seed key is split the same way either
            way, so the environments and the training key do not depend on where the
            parameters came from.
    """
    k_net, k_env, key = jax.random.split(seed_key, 3)
    if params is None:
        params = model.init(k_net)
    else:  # a private copy: the log-std override below must not write into the caller's tree
        params = jax.tree_util.tree_map(jnp.asarray, params)
        params = {"actor": dict(params["actor"]), "critic": params["critic"]}
    if log_std_init != 0.0 and "log_std" in params["actor"]:
        log_std = params["actor"]["log_std"]
        params["actor"]["log_std"] = jnp.full(log_std.shape, log_std_init, log_std.dtype)
    obs, env_state = _reset_all(env, jax.random.split(k_env, n_envs), env_params)
    return TrainState(params, opt_init(params), env_state, obs, key, jnp.zeros((), jnp.int32))
