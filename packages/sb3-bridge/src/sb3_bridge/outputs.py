"""The overwrite policy of every file sb3-bridge writes.

An existing file is kept unless the caller asks for it to be replaced (``overwrite=True``,
``--force`` on the command line).

The writes themselves go through ``jaxrl_agents.common.fileio.atomic_write`` (temporary file in the same
directory, then ``os.replace``), so a replaced file is whole before or after, never half written.
"""

from __future__ import annotations

import os

__all__ = ["refuse_existing"]


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
