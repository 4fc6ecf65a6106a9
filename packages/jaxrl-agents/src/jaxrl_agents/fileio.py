"""Safe file output: atomic writes and pickle-free storage of nested parameter dicts.

Every file the package writes goes through `atomic_write`: the content is written to a temporary file
in the same directory, flushed and fsync'ed, then moved over the target with `os.replace` (atomic on
POSIX), and the directory is fsync'ed. A reader (or a resumed run after ``kill -9``) therefore sees the
old file or the new one, never half of one.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["atomic_write", "atomic_write_json", "atomic_savez", "flatten_dict", "unflatten_dict",
           "load_npz"]

SEP = "/"


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some filesystems do not allow opening directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file + fsync + os.replace)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def atomic_write_json(path: str, obj: Any) -> None:
    """Write `obj` as indented JSON, atomically."""
    atomic_write(path, (json.dumps(obj, indent=2, sort_keys=False, allow_nan=True) + "\n").encode())


def atomic_savez(path: str, arrays: Mapping[str, np.ndarray], compress: bool = True) -> None:
    """`np.savez(_compressed)` to `path`, atomically. Object arrays are refused (no pickle)."""
    buf = io.BytesIO()
    clean = {}
    for k, v in arrays.items():
        a = np.asarray(v)
        if a.dtype == object:
            raise TypeError(f"atomic_savez: array {k!r} has dtype object, which would need pickle")
        clean[k] = a
    (np.savez_compressed if compress else np.savez)(buf, **clean)
    atomic_write(path, buf.getvalue())


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Load every array of an .npz file with ``allow_pickle=False``."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def flatten_dict(tree: Mapping, prefix: str = "") -> dict[str, np.ndarray]:
    """Nested dict of arrays -> flat dict with "a/b/c" keys (numpy arrays)."""
    out = {}
    for k, v in tree.items():
        if SEP in str(k):
            raise ValueError(f"flatten_dict: key {k!r} contains {SEP!r}")
        key = f"{prefix}{SEP}{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten_dict(v, key))
        else:
            out[key] = np.asarray(v)
    return out


def unflatten_dict(flat: Mapping[str, Any]) -> dict:
    """Inverse of `flatten_dict`."""
    tree: dict = {}
    for key, v in flat.items():
        node = tree
        *parents, leaf = key.split(SEP)
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v
    return tree
