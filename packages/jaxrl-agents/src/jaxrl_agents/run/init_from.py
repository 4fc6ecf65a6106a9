"""A fine-tuning start: a new run whose networks begin as another run's saved policy.

``jaxrl-train --init-from RUN_DIR`` (or a policy directory) starts a fresh run, with its own
config, seed, optimiser state, schedule and run directory, from the best policy of an earlier
run: the usual second phase of a long search, with a lower learning rate, a smaller policy std
or a larger batch. The run directory records where its parameters came from (config.json's
``init_from``), and a resume continues from its own checkpoints, never from the source again.

The source must be at rest: a run still training (its directory locked, `fileio.lock_directory`)
is refused, since its best policy may be replaced while it is read and would be a snapshot of an
unfinished search nobody chose. A run that starts from a source says so in one line (path, the
policy's algorithm, seed and step), as config.json records it.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from ..common.fileio import lock_holder
from ..common.policy import POLICY_JSON, load_policy

__all__ = ["load_init_params", "describe_init_record"]


def _refuse_in_use(path: str, policy_dir: bool) -> None:
    """ValueError if `path` (or, for a policy directory, the run directory holding it) is locked."""
    run_dir = os.path.dirname(path) if policy_dir else path
    who = lock_holder(run_dir)
    if who is not None:
        raise ValueError(f"init_from: {run_dir} is in use by {who} (a run still training: its best "
                         f"policy can be replaced while this run reads it); wait for that run to "
                         f"finish or stop it, or copy its best_policy directory and pass the copy")


def describe_init_record(record: dict) -> str:
    """The line a run prints when it starts from `record` (`load_init_params`' second value)."""
    where = record["path"] if record.get("policy_dir") != "best_policy" else \
        os.path.join(record["path"], "best_policy")
    parts = [str(record[k]) for k in ("algo",) if k in record]
    parts += [f"{k} {record[k]:,}" if isinstance(record[k], int) else f"{k} {record[k]}"
              for k in ("seed", "step") if k in record]
    return f"init_from: starting from {where}" + (f" ({', '.join(parts)})" if parts else "")


def load_init_params(init_from: Any, model, report: bool = False) -> tuple[dict, dict]:
    """The parameters a fine-tuning run starts from, checked against the run's network.

    Args:
        init_from: a run directory (its best policy is taken) or a policy directory
            (holding policy.json).
        model: the new run's `ActorCritic`; the saved policy must have the same network (towers,
            widths, activation, action head).
        report: print `describe_init_record`'s line (the source and its step) on stdout.

    Returns:
        (params, record): ``{"actor", "critic"}`` numpy parameters of one seed, and the
        JSON-able record config.json keeps (absolute path, the source policy's algorithm, seed,
        step and evaluation).

    Raises:
        ValueError: naming ``init_from``, when it is not a path, holds no policy, its policy
            files are corrupt (naming the file), it belongs to a run still training (locked), or
            its network differs from the run's (before anything is created or compiled).
    """
    if not isinstance(init_from, (str, os.PathLike)) or isinstance(init_from, bytes):
        raise ValueError(f"init_from: expected a run or policy directory path, got {init_from!r}")
    path = os.path.abspath(os.fspath(init_from))
    if not os.path.isdir(path):
        raise ValueError(f"init_from: expected a run or policy directory, got {path!r} (no such "
                         f"directory)")
    policy_dir = path if os.path.isfile(os.path.join(path, POLICY_JSON)) else None
    _refuse_in_use(path, policy_dir is not None)
    try:
        policy = load_policy(path, "best")
    except (FileNotFoundError, ValueError) as e:  # a ValueError names the corrupt file
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
    meta = policy.metadata or {}
    record = {"path": path, "policy_dir": policy_dir or "best_policy",
              **{k: meta[k] for k in ("algo", "seed", "step", "eval") if k in meta}}
    if report:
        print(describe_init_record(record), flush=True)
    return params, record
