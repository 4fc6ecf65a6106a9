"""A fine-tuning start: a new run whose networks begin as another run's saved policy.

``jaxrl-train --init-from RUN_DIR`` (or a policy directory) starts a fresh run, with its own
config, seed, optimiser state, schedule and run directory, from the best policy of an earlier
run: the usual second phase of a long search, with a lower learning rate, a smaller policy std
or a larger batch. The run directory records where its parameters came from (config.json's
``init_from``), and a resume continues from its own checkpoints, never from the source again.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from ..common.policy import POLICY_JSON, load_policy

__all__ = ["load_init_params"]


def load_init_params(init_from: Any, model) -> tuple[dict, dict]:
    """The parameters a fine-tuning run starts from, checked against the run's network.

    Args:
        init_from: a run directory (its best policy is taken) or a policy directory
            (holding policy.json).
        model: the new run's `ActorCritic`; the saved policy must have the same network (towers,
            widths, activation, action head).

    Returns:
        (params, record): ``{"actor", "critic"}`` numpy parameters of one seed, and the
        JSON-able record config.json keeps (absolute path, the source policy's algorithm, seed,
        step and evaluation).

    Raises:
        ValueError: naming ``init_from``, when it is not a path, holds no policy, or its
            network differs from the run's (before anything is created or compiled).
    """
    if not isinstance(init_from, (str, os.PathLike)) or isinstance(init_from, bytes):
        raise ValueError(f"init_from: expected a run or policy directory path, got {init_from!r}")
    path = os.path.abspath(os.fspath(init_from))
    if not os.path.isdir(path):
        raise ValueError(f"init_from: expected a run or policy directory, got {path!r} (no such "
                         f"directory)")
    try:
        policy = load_policy(path, "best")
    except FileNotFoundError as e:
        raise ValueError(f"init_from: {e}") from None
    source, wanted = policy.model.to_dict(), model.to_dict()
    if source != wanted:
        differ = sorted(k for k in {*source, *wanted} if source.get(k) != wanted.get(k))
        raise ValueError(f"init_from: the policy in {path!r} has a different network from this "
                         f"run's ({', '.join(f'{k}: {source.get(k)!r} there, {wanted.get(k)!r} here' for k in differ)}); "
                         f"pass the source run's --hidden/--activation/--network")
    params = jax.tree_util.tree_map(np.asarray, policy.params)
    template = model.init(jax.random.PRNGKey(0))  # eager (a host QR), small: shapes only
    got = jax.tree_util.tree_map(lambda x: (x.shape, str(x.dtype)), params)
    expected = jax.tree_util.tree_map(lambda x: (tuple(x.shape), str(x.dtype)), template)
    if got != expected:
        raise ValueError(f"init_from: the parameters in {path!r} do not have the shapes this "
                         f"run's network expects")
    policy_dir = path if os.path.isfile(os.path.join(path, POLICY_JSON)) else None
    meta = policy.metadata or {}
    record = {"path": path, "policy_dir": policy_dir or "best_policy",
              **{k: meta[k] for k in ("algo", "seed", "step", "eval") if k in meta}}
    return params, record
