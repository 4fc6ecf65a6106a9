"""Output files that are never half-written and never replace a file unless asked.

Every file quantgate-env writes (pulse CSVs, robustness maps and their figures) goes through
`atomic_open`: the content goes to a temporary file in the target's directory, is flushed to disk,
and only then takes the target's name. A crash or a full disk leaves the old file (or none) in
place, never a truncated one. Without ``overwrite`` the final step is a hard link, which fails if
the name appeared in the meantime, so two writers cannot clobber each other either.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from typing import IO

__all__ = ["atomic_open", "describe_os_error"]


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
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
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
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def describe_os_error(err: OSError) -> str:
    """One line for an OSError: ``<file>: <reason>`` (no ``[Errno N]`` prefix)."""
    reason = err.strerror or str(err)
    return f"{os.fsdecode(err.filename)}: {reason}" if err.filename is not None else reason
