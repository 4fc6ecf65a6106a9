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

from ..common.fileio import atomic_savez, load_npz

__all__ = ["save_checkpoint", "load_checkpoint", "read_checkpoint", "replace_checkpoint_meta",
           "CHECKPOINT_FORMAT"]

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
    _write(path, arrays, header)


def _write(path: str, leaves: dict[str, np.ndarray], header: dict) -> None:
    """Atomically write the ``leaf_*`` arrays and the JSON `header` as `path`."""
    arrays = dict(leaves)
    arrays[_META] = np.frombuffer(json.dumps(header, allow_nan=True).encode(), np.uint8)
    atomic_savez(path, arrays, compress=False)


def replace_checkpoint_meta(path: str, meta: dict) -> None:
    """Rewrite the checkpoint at `path` with the same leaves and `meta` in place of its own.

    For tools that migrate or repair the progress record of a checkpoint (and tests that write
    one as an older trainer did); the leaves are copied as they are. The write is atomic.

    Raises:
        ValueError: `path` is not a readable checkpoint (`read_checkpoint`).
    """
    arrays, header = read_checkpoint(path)
    _write(path, arrays, dict(header, meta=meta))


def read_checkpoint(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """Read and check a checkpoint file without a template (nothing is compiled).

    Returns:
        (arrays, header): every array of the file by name, and the parsed ``__meta__`` header
        (``paths``, ``shapes``, ``dtypes`` of the leaves and the free-form ``meta`` dict).

    Raises:
        ValueError: the file is not a readable .npz, has no valid header, or lacks a leaf the
            header lists; the message names the file.
    """
    arrays = load_npz(path)
    if _META not in arrays:
        raise ValueError(f"{path}: not a jaxrl-agents checkpoint (no {_META} entry)")
    try:
        header = json.loads(arrays.pop(_META).tobytes().decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: corrupt checkpoint header ({e})") from None
    if not isinstance(header, dict) or header.get("format") != CHECKPOINT_FORMAT:
        got = header.get("format") if isinstance(header, dict) else type(header).__name__
        raise ValueError(f"{path}: expected format {CHECKPOINT_FORMAT!r}, got {got!r}")
    version = header.get("format_version")
    if not isinstance(version, int) or version > CHECKPOINT_VERSION:
        raise ValueError(f"{path}: format_version {version!r} is not one this jaxrl-agents reads "
                         f"(<= {CHECKPOINT_VERSION}); upgrade jaxrl-agents")
    lists = [header.get(k) for k in ("paths", "shapes", "dtypes")]
    if not all(isinstance(x, list) for x in lists) or len({len(x) for x in lists}) != 1 \
            or not isinstance(header.get("meta"), dict):
        raise ValueError(f"{path}: corrupt checkpoint header (expected equally long lists 'paths', "
                         f"'shapes', 'dtypes' and a dict 'meta')")
    missing = [f"leaf_{i:05d}" for i in range(len(lists[0])) if f"leaf_{i:05d}" not in arrays]
    if missing:
        raise ValueError(f"{path}: corrupt checkpoint, the header lists {len(lists[0])} leaves but "
                         f"{missing[:3]} are missing")
    return arrays, header


def load_checkpoint(path: str, template: Any) -> tuple[Any, dict]:
    """Read a checkpoint into the structure of `template`.

    Returns:
        (tree, meta): numpy leaves in `template`'s structure, and the saved meta dict.

    Raises:
        ValueError: not a checkpoint, or its structure, shapes or dtypes differ from the template.
    """
    arrays, header = read_checkpoint(path)
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    expected = [jax.tree_util.keystr(p) for p, _ in leaves_with_paths]
    if header["paths"] != expected:
        diff = sorted(set(map(str, header["paths"])) ^ set(expected))[:5]
        raise ValueError(f"{path}: checkpoint structure differs from this run's state "
                         f"(first differing paths: {diff}); was it written by another "
                         f"algorithm, network or environment configuration?")
    leaves = []
    for i, (p, t) in enumerate(leaves_with_paths):
        a = arrays[f"leaf_{i:05d}"]
        # Template leaves may be arrays or jax.ShapeDtypeStruct: both have shape and dtype.
        if a.shape != tuple(t.shape) or a.dtype != np.dtype(t.dtype):
            raise ValueError(f"{path}: leaf {jax.tree_util.keystr(p)} is {a.dtype}{list(a.shape)}, "
                             f"expected {np.dtype(t.dtype)}{list(t.shape)}")
        leaves.append(a)
    return jax.tree_util.tree_unflatten(treedef, leaves), header["meta"]
