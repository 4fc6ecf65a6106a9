"""Checkpoints: one atomic .npz per save, no pickle.

Format (``checkpoint.npz``, read with ``np.load(..., allow_pickle=False)``):

- ``leaf_00000``, ``leaf_00001``, ...: every array leaf of the saved pytree (for training: the
  `TrainState` of all seeds stacked on a leading seed axis: parameters, optimiser state, environment
  states, observations, PRNG keys, update counter), in `jax.tree_util.tree_flatten_with_path` order;
- ``__meta__``: a uint8 array holding UTF-8 JSON ``{"format": "jaxrl_agents.checkpoint",
  "format_version": 1, "paths": [...], "shapes": [...], "dtypes": [...], "meta": {...}}`` where
  ``paths`` are the key paths of the leaves (e.g. ``.params['actor']['net']['dense_0']['kernel']``)
  and ``meta`` is free-form progress information (update index, wall time, best evaluation...).

Loading needs a *template* pytree of the same structure (a freshly initialised state): its tree
structure is reused, and every path, shape and dtype is checked against the file, so a checkpoint can
only ever fill arrays into a known structure.
"""

from __future__ import annotations

import json
from typing import Any

import jax
import numpy as np

from .fileio import atomic_savez

__all__ = ["save_checkpoint", "load_checkpoint", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "jaxrl_agents.checkpoint"
CHECKPOINT_VERSION = 1
_META = "__meta__"


def save_checkpoint(path: str, tree: Any, meta: dict | None = None) -> None:
    """Atomically write `tree` (a pytree of arrays) and JSON `meta` to `path`."""
    leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path(jax.device_get(tree))
    arrays = {}
    paths, shapes, dtypes = [], [], []
    for i, (p, leaf) in enumerate(leaves_with_paths):
        a = np.asarray(leaf)
        arrays[f"leaf_{i:05d}"] = a
        paths.append(jax.tree_util.keystr(p))
        shapes.append(list(a.shape))
        dtypes.append(a.dtype.str)
    header = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, "paths": paths,
              "shapes": shapes, "dtypes": dtypes, "meta": meta or {}}
    arrays[_META] = np.frombuffer(json.dumps(header, allow_nan=True).encode(), np.uint8)
    atomic_savez(path, arrays, compress=False)


def load_checkpoint(path: str, template: Any) -> tuple[Any, dict]:
    """Read a checkpoint into the structure of `template`.

    Returns:
        (tree, meta): numpy leaves in `template`'s structure, and the saved meta dict.

    Raises:
        ValueError: not a checkpoint, or its structure, shapes or dtypes differ from the template.
    """
    with np.load(path, allow_pickle=False) as z:
        if _META not in z.files:
            raise ValueError(f"{path}: not a jaxrl-agents checkpoint (no {_META} entry)")
        header = json.loads(z[_META].tobytes().decode())
        if header.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path}: expected format {CHECKPOINT_FORMAT!r}, got "
                             f"{header.get('format')!r}")
        leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
        expected = [jax.tree_util.keystr(p) for p, _ in leaves_with_paths]
        if header["paths"] != expected:
            diff = sorted(set(header["paths"]) ^ set(expected))[:5]
            raise ValueError(f"{path}: checkpoint structure differs from this run's state "
                             f"(first differing paths: {diff}); was it written by another "
                             f"algorithm, network or environment configuration?")
        leaves = []
        for i, (p, t) in enumerate(leaves_with_paths):
            a = z[f"leaf_{i:05d}"]
            # Template leaves may be arrays or jax.ShapeDtypeStruct: both have shape and dtype.
            if a.shape != tuple(t.shape) or a.dtype != np.dtype(t.dtype):
                raise ValueError(f"{path}: leaf {jax.tree_util.keystr(p)} is {a.dtype}{list(a.shape)}, "
                                 f"expected {np.dtype(t.dtype)}{list(t.shape)}")
            leaves.append(a)
    return jax.tree_util.tree_unflatten(treedef, leaves), header["meta"]
