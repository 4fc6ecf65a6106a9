"""Safe file output: atomic writes, directory locks and pickle-free storage of nested parameter dicts.

Every file the package writes goes through `atomic_write`: the content is written to a temporary file
in the same directory, flushed and fsync'ed, then moved over the target with `os.replace` (atomic on
POSIX), and the directory is fsync'ed. A reader (or a resumed run after ``kill -9``) therefore sees the
old file or the new one, never half of one. Files get the user's normal permissions
(``0o666 & ~umask``, as ``open(path, "w")`` would give), not the 0600 of `tempfile.mkstemp`.

JSON files are strict JSON (`json_text`): a NaN or infinite number is written as ``null``, never as the
bare ``NaN`` / ``Infinity`` that Python's `json` writes by default and that other parsers (JavaScript's
``JSON.parse``, Go, Rust, jq) reject. Python's `json` still reads the files written before, with
``NaN`` in them.

`lock_directory` holds an OS-level lock (``fcntl.flock``) on a ``.lock`` file inside a directory
for as long as a run uses it. The kernel releases the lock when the process ends, however it ends
(``kill -9`` included), so a lock is never stale; a second process that asks for it gets a
`DirectoryLockedError` naming the directory at once, instead of silently overwriting the first
one's files.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import secrets
import tomllib
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows): runs still work, unlocked
    fcntl = None

__all__ = ["read_toml", "atomic_write", "atomic_write_json", "json_ready", "json_text", "atomic_savez", "flatten_dict", "unflatten_dict",
           "load_npz", "lock_directory", "lock_holder", "DirectoryLockedError", "LOCK_FILE", "describe_os_error",
           "refuse_existing", "check_writable"]

SEP = "/"
LOCK_FILE = ".lock"
_FILE_MODE = 0o666  # the kernel applies the umask, as for any file the user creates


class DirectoryLockedError(ValueError):
    """Another process holds the lock of a directory (`lock_directory`).

    A ValueError, so every command that reports bad arguments reports this one the same way.
    """


def read_toml(path: str, argument: str, what: str) -> dict[str, Any]:
    """Read a TOML file whose every failure is one line naming it (a campaign or sweep file).

    Args:
        path: the file.
        argument: the name the user gave it under (``campaign``), for errors before it is read.
        what: what it should be, as the errors say it (``a campaign file``).

    Raises:
        ValueError: a directory, no such file, not UTF-8 text, not TOML, or unreadable.
    """
    if os.path.isdir(path):
        raise ValueError(f"{argument}: expected {what} (TOML), got {path!r}, a directory")
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ValueError(f"{argument}: expected {what}, got {path!r} (no such file)") from None
    except UnicodeDecodeError:  # tomllib decodes UTF-8 first: a binary file ends here
        raise ValueError(f"{path}: expected {what} (TOML, UTF-8 text), got a file that is not "
                         f"UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e})") from None
    except OSError as e:  # unreadable: permissions, a FIFO that fails, ...
        raise ValueError(f"{argument}: cannot read {path!r} ({e.strerror or e})") from None


def describe_os_error(e: OSError) -> str:
    """One line for an OSError: ``<file>: <reason>``, without the ``[Errno N]`` prefix.

    E.g. ``runs/x/evals.npz: No space left on device``.
    """
    reason = e.strerror or str(e)
    if e.filename is not None:
        return f"{os.fsdecode(e.filename)}: {reason}"
    return reason


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


def _create_temp(directory: str, name: str) -> tuple[int, str]:
    """A new file next to the target, created with ``O_EXCL`` and mode 0o666 (minus the umask)."""
    while True:
        tmp = os.path.join(directory, f".tmp-{secrets.token_hex(6)}-{name}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE), tmp
        except FileExistsError:  # a 48-bit name collision: draw another
            continue


def refuse_existing(paths, *, overwrite: bool) -> None:
    """Raise unless every path in ``paths`` is free to write, or ``overwrite`` is set.

    Args:
        paths: the files about to be written (``str`` / ``os.PathLike``), all checked before any
            is written, so a refused command leaves a directory as it was.
        overwrite: replace existing files.

    Raises:
        FileExistsError: the first path that exists (a file, a directory or a link), named in the
            message with how to replace it.
    """
    if overwrite:
        return
    for path in paths:
        path = os.fspath(path)
        if os.path.lexists(path):
            raise FileExistsError(f"{path} already exists; refusing to overwrite it (pass "
                                  f"overwrite=True, or --force on the command line, to replace it)")


def _target_error(e: OSError, path: str) -> OSError:
    """`e` renamed after the file the user asked for (not the temporary file next to it)."""
    return type(e)(e.errno, f"cannot write it ({e.strerror or e})", path)


def check_writable(path: str) -> None:
    """Check that `atomic_write(path, ...)` can create its file, before expensive work.

    Behaviour, not permission bits: it creates and removes the temporary file the write would
    create, so a read-only filesystem, a missing directory or a directory that is not one are all
    found, also for root (for whom ``os.access`` says yes to a read-only mount).

    Raises:
        OSError: naming `path` (not the temporary file) with the reason.
    """
    path = os.fspath(path)
    try:
        fd, tmp = _create_temp(os.path.dirname(os.path.abspath(path)), os.path.basename(path))
    except OSError as e:
        raise _target_error(e, path) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def atomic_write(path: str, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file + fsync + os.replace).

    The file gets mode ``0o666 & ~umask``. On any failure (a full or read-only disk, a missing
    directory) the temporary file is removed and `path` keeps its previous content.

    Raises:
        OSError: the write failed, naming `path` (`describe_os_error` formats it as one line).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = _create_temp(directory, os.path.basename(path))
    except OSError as e:  # the temporary file's name means nothing to the user: name the target
        raise _target_error(e, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        # A full disk fails in write/fsync with no file name at all ("No space left on device"),
        # or names the temporary file: either way the message must name the user's file.
        if isinstance(e, OSError) and (e.filename is None or os.fspath(e.filename) == tmp):
            raise type(e)(e.errno, e.strerror or str(e), path) from None
        raise
    _fsync_dir(directory)


def json_ready(obj: Any) -> Any:
    """`obj` with every non-finite float replaced by None, numpy and JAX values as Python ones.

    NaN, inf and -inf (Python or numpy floats, also inside arrays) become None, which JSON writes
    as ``null``: strict JSON has no NaN or Infinity. Mappings, lists and tuples are walked;
    numpy scalars and arrays (and JAX arrays) become Python numbers and lists; anything else is
    returned as it is (`json.dumps` judges it).
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, (np.generic, np.ndarray)) or hasattr(obj, "__jax_array__"):
        return json_ready(np.asarray(obj).tolist())
    return obj


def json_text(obj: Any, *, indent: int | None = 2, default=None) -> str:
    """`obj` as strict JSON text (`json_ready`: NaN and infinities as ``null``), no newline added.

    Args:
        obj: JSON-able data; numpy/JAX numbers and arrays are converted.
        indent: as for `json.dumps` (None: one line).
        default: as for `json.dumps`, for other objects (e.g. ``str``).
    """
    return json.dumps(json_ready(obj), indent=indent, allow_nan=False, default=default)


def atomic_write_json(path: str, obj: Any) -> None:
    """Write `obj` as indented strict JSON (`json_text`: NaN and infinities as ``null``), atomically."""
    atomic_write(path, (json_text(obj) + "\n").encode())


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


@contextlib.contextmanager
def lock_directory(path: str) -> Iterator[None]:
    """Hold an exclusive OS-level lock on directory `path` for the duration of a ``with`` block.

    The lock is ``fcntl.flock`` on ``path/.lock`` (created with the user's permissions and left in
    place: deleting it could let two processes lock two different files). It is tied to the open
    file, so the kernel releases it when the process exits or is killed; it never goes stale. The
    file holds the pid of the holder, for the error message of the next process. Separate
    `lock_directory` calls exclude each other also within one process.

    Args:
        path: an existing directory.

    Raises:
        DirectoryLockedError: another process (or another `lock_directory` call) holds the lock.
        OSError: the lock file cannot be created (e.g. a read-only directory).
    """
    lock_path = os.path.join(path, LOCK_FILE)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, _FILE_MODE)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                who = _holder(fd)
                raise DirectoryLockedError(
                    f"{path}: in use by {who} (it holds {LOCK_FILE}); two processes writing one "
                    f"run directory would overwrite each other's files; wait for that one to "
                    f"finish or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the last descriptor of the open file releases the flock


def _holder(fd: int) -> str:
    holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f"process {holder}" if holder.isdigit() else "another process"


def lock_holder(path: str) -> str | None:
    """Who holds the lock of directory `path` (`lock_directory`): ``"process N"``, or None if free.

    For readers of a run directory that must not read it while a run writes it (a fine-tuning
    start reading another run's best policy). It asks for a shared lock without waiting and drops
    it at once; it creates nothing (a directory without ``.lock`` was never locked, and a
    read-only directory can be probed). A process that asks for the exclusive lock in that same
    instant is refused as if the directory were in use: the window is one system call.
    """
    if fcntl is None:  # pragma: no cover (Windows): no locks
        return None
    try:
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDONLY)
    except OSError:  # no lock file: never locked (or unreadable, which no run could lock either)
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            return _holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Load every array of an .npz file with ``allow_pickle=False``.

    Raises:
        ValueError: the file is not a readable .npz archive (empty, truncated, corrupt, another
            format, or holding object arrays, which would need pickle); the message names the file.
        OSError: the file is missing or unreadable (FileNotFoundError, PermissionError, ...).
    """
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip archive's local header or empty zip
        what = "an empty file" if not magic else "not a zip archive"
        raise ValueError(f"{path}: not a readable .npz file ({what})")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except ValueError as e:
        # numpy's own advice here ("allow_pickle=True") would be unsafe: say what the file is.
        reason = ("it holds pickled objects, which are never loaded" if "pickle" in str(e)
                  else str(e))
        raise ValueError(f"{path}: not a readable .npz file ({reason})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, KeyError, OSError) as e:
        raise ValueError(f"{path}: not a readable .npz file, truncated or corrupt "
                         f"({type(e).__name__}: {e})") from None


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
