"""Reading the members of an SB3 checkpoint zip, with errors that name the file and the member.

An SB3 ``model.save("x.zip")`` writes ``data`` (JSON), ``policy.pth`` (a torch zip archive of the
policy's state_dict), ``policy.optimizer.pth``, ``pytorch_variables.pth``,
``_stable_baselines3_version`` and ``system_info.txt``. sb3-bridge needs only the first two, plus the
version string for display.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

from .errors import CheckpointError

__all__ = ["read_members", "MAX_MEMBER_BYTES"]

#: Largest uncompressed member read into memory. A policy.pth of the paper's 28-128-128-3 networks is
#: ~150 KB; the cap only stops a crafted zip from declaring gigabytes (a decompression bomb).
MAX_MEMBER_BYTES = 1 << 30

_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"


def read_members(path, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Read whole members of the checkpoint zip at ``path``.

    Args:
        path: path to the ``.zip`` file (``str`` or ``os.PathLike``).
        required: member names that must exist; a missing one raises ``CheckpointError``.
        optional: member names read when present.

    Returns:
        ``{member name: bytes}`` for every required member and the optional ones found.

    Raises:
        CheckpointError: the file is missing, is a directory, is not a zip, is truncated, lacks a
            required member, or a member fails its CRC check / decompression.
    """
    p = Path(os.fspath(path))
    if not p.exists():
        raise CheckpointError(p, None, "no such file (expected an SB3 checkpoint .zip written by model.save)")
    if p.is_dir():
        raise CheckpointError(p, None, "is a directory, expected an SB3 checkpoint .zip file "
                              "(a jaxrl-agents run directory loads with jaxrl_agents.load_policy)")
    with open(p, "rb") as fh:
        head = fh.read(4)
    try:
        zf = zipfile.ZipFile(p)
    except zipfile.BadZipFile as exc:
        if head in (_ZIP_MAGIC, _EMPTY_ZIP_MAGIC):
            # Starts like a zip but the central directory at the end is gone: an interrupted
            # copy or download, the usual way a checkpoint gets damaged.
            raise CheckpointError(p, None, f"truncated or corrupt zip (starts like a zip, but {exc}); "
                                  "copy or save the checkpoint again") from None
        raise CheckpointError(p, None, f"not a zip file (first bytes {head!r}); SB3 checkpoints are "
                              "the .zip files written by model.save") from None
    with zf:
        names = set(zf.namelist())
        out: dict[str, bytes] = {}
        for name in required + optional:
            if name not in names:
                if name in required:
                    raise CheckpointError(
                        p, name, f"member missing from the zip (found: {sorted(names)}); an SB3 "
                        f"checkpoint has 'data' and 'policy.pth'")
                continue
            out[name] = _read(zf, p, name)
    return out


def _read(zf: zipfile.ZipFile, path: Path, name: str) -> bytes:
    size = zf.getinfo(name).file_size
    if size > MAX_MEMBER_BYTES:
        raise CheckpointError(path, name, f"member declares {size} bytes uncompressed, more than the "
                              f"{MAX_MEMBER_BYTES}-byte limit (sb3_bridge.archive.MAX_MEMBER_BYTES)")
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError, ValueError) as exc:
        raise CheckpointError(path, name, f"cannot read member, the zip is truncated or corrupt ({exc})") from None
