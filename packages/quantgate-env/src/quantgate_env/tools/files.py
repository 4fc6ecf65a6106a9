"""Output files that are never half-written and never replace a file unless asked.

Every file quantgate-env writes (pulse CSVs, robustness maps and their figures) goes through
`atomic_open`: the content goes to a temporary file in the target's directory, is flushed to disk,
and only then takes the target's name. A crash or a full disk leaves the old file (or none) in
place, never a truncated one. Without ``overwrite`` the final step is a hard link, which fails if
the name appeared in the meantime, so two writers cannot clobber each other either.

JSON goes out as strict JSON (`json_text`): a NaN or infinite number is written as ``null``, never
as the bare ``NaN`` that Python's `json` writes by default and other parsers reject.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

__all__ = ["atomic_open", "check_writable", "describe_os_error", "json_text"]


def _user_file_mode() -> int:
    # mkstemp creates files 0600 whatever the umask; give outputs the user's normal permissions.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, *, overwrite: bool = False, binary: bool = False) -> Iterator[IO]:
    """Open a temporary file that becomes ``path`` when the ``with`` block ends without error.

    Args:
        path: the file to create.
        overwrite: replace an existing ``path`` (default False: FileExistsError, nothing written).
        binary: open in binary mode (default text, UTF-8, ``newline=""`` as csv needs).

    Yields:
        The open temporary file.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is False (checked before and after writing).
        OSError: the directory is missing, read-only or full; ``path`` is then unchanged.
    """
    path = os.fspath(path)
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, "already exists; refusing to overwrite it", path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as err:  # a missing or read-only directory: the temporary name means nothing
        raise _named(err, path, temp=True) from None
    try:
        os.fchmod(fd, _user_file_mode())
        handle = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # no-clobber: fails if another writer created path meanwhile
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "already exists; refusing to overwrite it", path) from None
            except OSError as err:  # a filesystem without hard links: the checked replace is next best
                if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                if os.path.lexists(path):
                    raise FileExistsError(errno.EEXIST, "already exists; refusing to overwrite it", path) from None
                os.replace(tmp, path)
    except OSError as err:
        # A full disk fails in write/flush/fsync/close with no file name ("No space left on
        # device" alone); the message must say which file it was (`<file>: <reason>`).
        if err.filename is None or os.fspath(err.filename) == tmp:
            raise _named(err, path, temp=err.filename is not None) from None
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def check_writable(path: str | os.PathLike) -> None:
    """Check that `atomic_open(path)` can create its file, before expensive work (GRAPE, a map).

    Behaviour, not permission bits: it creates and removes the temporary file the write would
    create, so a missing directory, a read-only filesystem or a path through a file are found,
    also for root (for whom ``os.access`` says yes to a read-only mount).

    Raises:
        OSError: naming `path` (not the temporary file), e.g. ``out/r.csv: cannot write it
            (Read-only file system)`` through `describe_os_error`.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as err:
        raise _named(err, path, temp=True) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _named(err: OSError, path: str, *, temp: bool = False) -> OSError:
    """`err` (same type and errno) naming `path`, the file the user asked for."""
    reason = err.strerror or str(err)
    if temp:
        reason = f"cannot write it ({reason})"
    return type(err)(err.errno, reason, path)


def describe_os_error(err: OSError) -> str:
    """One line for an OSError: ``<file>: <reason>`` (no ``[Errno N]`` prefix)."""
    reason = err.strerror or str(err)
    return f"{os.fsdecode(err.filename)}: {reason}" if err.filename is not None else reason


def _json_ready(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_ready(v) for v in obj]
    if isinstance(obj, (np.generic, np.ndarray)):
        return _json_ready(np.asarray(obj).tolist())
    return obj


def json_text(obj: Any, *, indent: int | None = 2) -> str:
    """`obj` as strict JSON text: NaN and infinities (Python or numpy) as ``null``, numpy as Python."""
    return json.dumps(_json_ready(obj), indent=indent, allow_nan=False)
