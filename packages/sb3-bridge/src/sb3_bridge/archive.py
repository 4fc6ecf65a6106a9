"""Reading the members of an SB3 checkpoint zip, with errors that name the file and the member.

An SB3 ``model.save("x.zip")`` writes ``data`` (JSON), ``policy.pth`` (a torch zip archive of the
policy's state_dict), ``policy.optimizer.pth``, ``pytorch_variables.pth``,
``_stable_baselines3_version`` and ``system_info.txt``. sb3-bridge needs only the first two, plus the
version string for display.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from .errors import CheckpointError

__all__ = ["read_members", "open_zip", "ReadBudget", "MAX_CHECKPOINT_BYTES", "MAX_DATA_BYTES",
           "MAX_PICKLE_BYTES"]

# The limits below are read when a checkpoint is read (not bound at import), so a user with an
# unusual file, or a test, can change them on this module.

#: Most bytes inflated into memory per checkpoint: ``data`` + ``policy.pth`` + the entries read from
#: inside ``policy.pth`` (its storages are counted again, since both copies are in memory while the
#: file is read). The paper's 28-128-128-3 networks need ~0.3 MB; 512 MiB admits an MlpPolicy of
#: ~60 million float32 parameters and stops a crafted zip from inflating gigabytes.
MAX_CHECKPOINT_BYTES = 512 << 20

#: Most bytes of the ``data`` member (JSON). SB3 writes ~10 KB of hyperparameters and serialized
#: spaces; the JSON parser's objects take several times the text.
MAX_DATA_BYTES = 16 << 20

#: Most bytes of ``policy.pth``'s ``data.pkl``: it holds only the state_dict's structure (~150 bytes
#: per tensor), the numbers are in the storage entries.
MAX_PICKLE_BYTES = 16 << 20

_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"


class ReadBudget:
    """The bytes inflated so far from one checkpoint, against ``MAX_CHECKPOINT_BYTES``.

    One budget is shared by every member and nested entry of a checkpoint, so many members each
    under a limit cannot add up to more than the limit.
    """

    def __init__(self, path, limit: int | None = None):
        self.path = path
        self.limit = MAX_CHECKPOINT_BYTES if limit is None else int(limit)
        self.used = 0

    def read(self, zf: zipfile.ZipFile, name: str, where: str, *, cap: int | None = None,
             cap_name: str | None = None, expected: int | None = None,
             mutable: bool = False) -> bytes | bytearray:
        """Inflate the entry ``name`` of ``zf``, charging it to this budget.

        The size the zip declares is checked before anything is inflated, and reading stops at
        that size whatever the compressed stream holds, so at most ``min(cap, what is left)``
        bytes are inflated.

        Args:
            zf: the open zip (the checkpoint, or the torch archive inside ``policy.pth``).
            name: the entry name in ``zf``.
            where: the member as error messages name it (``"data"``, ``"policy.pth:archive/data/0"``).
            cap: a tighter limit for this entry (bytes), named ``cap_name`` in the message.
            cap_name: the name of that limit in the error message (``"sb3_bridge.archive.MAX_DATA_BYTES"``).
            expected: the exact size this entry must have (a storage: numel x itemsize).
            mutable: return a ``bytearray`` (filled in place, 1 MiB at a time: no second copy),
                e.g. for numpy arrays that view it and must be writeable; else ``bytes``.

        Raises:
            KeyError: no such entry (the caller names what is missing).
            CheckpointError: the entry declares more than allowed, is not the expected size, is
                truncated, fails its CRC check, or inflates past its declared size.
        """
        info = zf.getinfo(name)
        declared = info.file_size
        left = self.limit - self.used
        if expected is not None and declared != expected:
            raise CheckpointError(self.path, where, f"entry declares {declared} bytes, expected "
                                  f"{expected}; the archive is truncated, corrupt or crafted")
        if cap is not None and declared > cap:
            raise CheckpointError(self.path, where, f"member declares {declared} bytes uncompressed, "
                                  f"more than the {cap}-byte limit for it ({cap_name})")
        if declared > left:
            raise CheckpointError(
                self.path, where, f"member declares {declared} bytes uncompressed, but only {left} of "
                f"the {self.limit}-byte limit per checkpoint are left "
                f"(sb3_bridge.archive.MAX_CHECKPOINT_BYTES); nothing larger was inflated")
        try:
            with zf.open(info) as fh:
                # Never more than declared, whatever the compressed stream holds.
                blob = _read_into(fh, declared) if mutable else fh.read(declared)
                overflow = len(blob) == declared and bool(fh.read(1))
        except CheckpointError:
            raise
        except Exception as exc:  # BadZipFile (CRC), zlib.error, EOFError, unsupported method, ...
            raise CheckpointError(self.path, where, f"cannot read it, the zip is truncated or corrupt "
                                  f"({type(exc).__name__}: {exc})") from None
        self.used += len(blob)
        if len(blob) < declared:
            raise CheckpointError(self.path, where, f"ends after {len(blob)} of its {declared} declared "
                                  f"bytes; the zip is truncated or corrupt")
        if overflow:
            raise CheckpointError(self.path, where, f"inflates past its declared {declared} bytes; the "
                                  f"zip is corrupt or crafted (reading stopped there)")
        return blob


def _read_into(fh, size: int, chunk: int = 1 << 20) -> bytearray:
    buf = bytearray(size)
    with memoryview(buf) as view:
        pos = 0
        while pos < size:
            n = fh.readinto(view[pos:pos + chunk])
            if not n:
                break
            pos += n
    del buf[pos:]  # short read: the caller reports the truncation
    return buf


def open_zip(file, path, member: str | None, what: str, hint: str = "") -> zipfile.ZipFile:
    """Open a zip, telling a truncated file from one with a zip nested inside it.

    SB3 stores ``policy.pth`` (itself a zip) uncompressed. Cut the checkpoint after it, and the
    last zip directory left in the file is the nested one: ``zipfile`` would open that and list
    torch's entries. A checkpoint's first entry starts at byte 0, so a directory whose entries
    all start later belongs to something inside the file.

    Args:
        file: a path or a binary file object (``io.BytesIO`` of a member).
        path: the checkpoint, for error messages.
        member: the member being opened, for error messages (``None``: the checkpoint itself).
        what: ``"zip file"`` or ``"torch archive"``, for error messages.
        hint: appended to the message for content that is not a zip at all.

    Raises:
        CheckpointError: not a zip, or truncated / corrupt.
    """
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as fh:
            head = fh.read(4)
    else:
        head = file.read(4)
        file.seek(0)
    try:
        zf = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        if head in (_ZIP_MAGIC, _EMPTY_ZIP_MAGIC):
            # Starts like a zip but the directory at the end is gone: an interrupted copy or
            # download, the usual way a checkpoint gets damaged.
            raise CheckpointError(path, member, f"truncated or corrupt {what} (starts like a zip, but "
                                  f"{exc}); copy or save the checkpoint again") from None
        raise CheckpointError(path, member, f"not a {what} (first bytes {head!r}){hint}") from None
    infos = zf.infolist()
    if head == _ZIP_MAGIC and infos and min(i.header_offset for i in infos) != 0:
        zf.close()
        first = min(i.header_offset for i in infos)
        raise CheckpointError(path, member, f"truncated {what}: its directory at the end is missing, "
                              f"and the one found there belongs to a zip nested inside it (starting at "
                              f"byte {first}, e.g. the torch archive of policy.pth); copy or save the "
                              f"checkpoint again")
    return zf


def _member_cap(name: str) -> tuple[int | None, str | None]:
    # Looked up per read, so a changed module limit applies to the next checkpoint.
    if name == "data":
        return MAX_DATA_BYTES, "sb3_bridge.archive.MAX_DATA_BYTES"
    if name == "_stable_baselines3_version":
        return 4096, "a version string"
    return None, None


def read_members(path, required: tuple[str, ...], optional: tuple[str, ...] = (), *,
                 budget: ReadBudget | None = None) -> dict[str, bytes]:
    """Read whole members of the checkpoint zip at ``path``.

    Args:
        path: path to the ``.zip`` file (``str`` or ``os.PathLike``).
        required: member names that must exist; a missing one raises ``CheckpointError``.
        optional: member names read when present.
        budget: the checkpoint's ``ReadBudget`` (default: a new one), to share with the reader of
            ``policy.pth``. ``data`` is also held to ``MAX_DATA_BYTES``.

    Returns:
        ``{member name: bytes}`` for every required member and the optional ones found.

    Raises:
        CheckpointError: the file is missing, is a directory, is not a zip, is truncated, lacks a
            required member, a member is larger than its limit, or fails its CRC check /
            decompression.
    """
    p = Path(os.fspath(path))
    if not p.exists():
        raise CheckpointError(p, None, "no such file (expected an SB3 checkpoint .zip written by model.save)")
    if p.is_dir():
        raise CheckpointError(p, None, "is a directory, expected an SB3 checkpoint .zip file "
                              "(a jaxrl-agents run directory loads with jaxrl_agents.load_policy)")
    budget = budget if budget is not None else ReadBudget(p)
    zf = open_zip(p, p, None, "zip file",
                  hint="; SB3 checkpoints are the .zip files written by model.save")
    with zf:
        names = set(zf.namelist())
        out: dict[str, bytes] = {}
        for name in required + optional:
            if name not in names:
                if name in required:
                    raise CheckpointError(
                        p, name, f"member missing from the zip (found: {sorted(names)[:20]}); an SB3 "
                        f"checkpoint has 'data' and 'policy.pth'")
                continue
            cap, cap_name = _member_cap(name)
            out[name] = budget.read(zf, name, name, cap=cap, cap_name=cap_name)
    return out
