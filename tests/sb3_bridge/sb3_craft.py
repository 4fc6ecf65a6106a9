"""Build SB3-style checkpoints byte by byte, without torch, for the bad-input and safety tests.

``torch_state_dict_bytes`` writes the same zip layout torch's serializer does (``archive/data.pkl``
with ``_rebuild_tensor_v2`` over persistent storages, ``archive/data/<key>``, ``archive/byteorder``),
emitting the pickle opcodes directly: pickling a reference to ``torch._utils._rebuild_tensor_v2``
with the ``pickle`` module would need torch importable, and these tests must run without it.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile

from pathlib import Path

import numpy as np

#: The committed checkpoints (see fixtures/regenerate.py).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHECKPOINTS = ("ppo_box", "ppo_discrete", "a2c_box", "trpo_box")

_DTYPE_TO_STORAGE = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
                     "int64": "LongStorage", "int32": "IntStorage", "uint8": "ByteStorage",
                     "bool": "BoolStorage"}


class Op:
    """Tiny pickle protocol-2 opcode writer (only what a state_dict needs, plus hostile globals)."""

    def __init__(self):
        self.buf = bytearray(b"\x80\x02")

    def global_(self, module: str, name: str):
        self.buf += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
        return self

    def str_(self, s: str):
        b = s.encode()
        self.buf += b"X" + struct.pack("<I", len(b)) + b
        return self

    def int_(self, v: int):
        self.buf += b"J" + struct.pack("<i", v)
        return self

    def tuple_(self, items):
        self.buf += b"("
        for it in items:
            self.int_(it) if isinstance(it, int) else self.str_(it)
        self.buf += b"t"
        return self

    def raw(self, b: bytes):
        self.buf += b
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf) + b"."


def state_dict_pickle(tensors: dict, storages: dict, *, hostile_global=None) -> bytes:
    """Pickle opcodes of an OrderedDict of tensors.

    Args:
        tensors: name -> (storage_key, offset, size tuple, stride tuple).
        storages: storage_key -> (storage class name, numel).
        hostile_global: optional ``(module, name, arg)``: adds an entry whose value is
            ``module.name(arg)`` (e.g. ``("os", "system", "touch /tmp/x")``).
    """
    op = Op().global_("collections", "OrderedDict").raw(b")R(")
    for name, (key, offset, size, stride) in tensors.items():
        stype, numel = storages[key]
        op.str_(name).global_("torch._utils", "_rebuild_tensor_v2").raw(b"((")
        op.str_("storage").global_("torch", stype).str_(key).str_("cpu").int_(numel).raw(b"tQ")
        op.int_(offset).tuple_(size).tuple_(stride).raw(b"\x89")  # requires_grad=False
        op.global_("collections", "OrderedDict").raw(b")R")  # backward_hooks
        op.raw(b"tR")
    if hostile_global is not None:
        module, fn, arg = hostile_global
        op.str_("evil").global_(module, fn).raw(b"(").str_(arg).raw(b"tR")
    op.raw(b"u")
    return op.bytes()


def torch_state_dict_bytes(arrays: dict, *, byteorder: str = "little", prefix: str = "archive",
                           hostile_global=None, pickle_bytes: bytes | None = None) -> bytes:
    """A torch-format ``.pth`` (zip) holding ``arrays`` (name -> np.ndarray), one storage each."""
    tensors, storages, blobs = {}, {}, {}
    order = "<" if byteorder == "little" else ">"
    for i, (name, a) in enumerate(arrays.items()):
        a = np.array(a, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        key = str(i)
        storages[key] = (_DTYPE_TO_STORAGE[a.dtype.name], int(a.size))
        stride = tuple(int(s // a.itemsize) for s in a.strides) if a.ndim else ()
        tensors[name] = (key, 0, tuple(int(s) for s in a.shape), stride)
        blobs[key] = a.astype(a.dtype.newbyteorder(order)).tobytes() if a.dtype.itemsize > 1 else a.tobytes()
    pkl = pickle_bytes if pickle_bytes is not None else state_dict_pickle(
        tensors, storages, hostile_global=hostile_global)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{prefix}/data.pkl", pkl)
        zf.writestr(f"{prefix}/byteorder", byteorder)
        for key, blob in blobs.items():
            zf.writestr(f"{prefix}/data/{key}", blob)
        zf.writestr(f"{prefix}/version", "3\n")
    return out.getvalue()


def rewrite_checkpoint(src, dst, *, data=None, policy_pth=None, drop=(), extra=None) -> None:
    """Copy the SB3 zip ``src`` to ``dst`` replacing/dropping members.

    Args:
        data: new ``data`` (dict -> JSON, or raw bytes).
        policy_pth: new ``policy.pth`` bytes.
        drop: member names to leave out.
        extra: ``{name: bytes}`` members to add.
    """
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if item.filename in drop:
                continue
            blob = zin.read(item.filename)
            if item.filename == "data" and data is not None:
                blob = data if isinstance(data, bytes) else json.dumps(data, indent=4).encode()
            if item.filename == "policy.pth" and policy_pth is not None:
                blob = policy_pth
            zout.writestr(item.filename, blob)
        for name, blob in (extra or {}).items():
            zout.writestr(name, blob)


def read_member(path, name: str) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return zf.read(name)


def read_data(path) -> dict:
    return json.loads(read_member(path, "data"))


# ------------------------------------------------------------------------ hostile sizes (bombs)
def write_zeros(zf: zipfile.ZipFile, name: str, size: int, chunk: int = 1 << 20) -> None:
    """Write ``size`` zero bytes as member ``name`` of ``zf`` without holding them in memory.

    With ``zf`` opened as ``ZIP_DEFLATED`` a member inflating to 64 MB takes ~64 KB on disk: the
    shape of a decompression bomb.
    """
    block = bytes(min(chunk, size))
    with zf.open(name, "w", force_zip64=size >= 1 << 31) as fh:
        left = size
        while left:
            n = min(left, len(block))
            fh.write(block[:n])
            left -= n


def bomb_checkpoint(src, dst, member: str, size: int) -> None:
    """Copy the SB3 zip ``src`` to ``dst`` with ``member`` replaced by ``size`` deflated zero bytes."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if item.filename == member:
                write_zeros(zout, member, size)
            else:
                zout.writestr(item.filename, zin.read(item.filename))


def zeros_torch_archive(tensors: dict) -> bytes:
    """A torch ``.pth`` whose storages are deflated zeros (torch itself stores them uncompressed).

    Args:
        tensors: name -> ``(numel, entry_bytes)``: a 1-D float32 tensor of ``numel`` elements whose
            storage entry holds ``entry_bytes`` zero bytes (``4 * numel`` for an honest file).
    """
    spec, storages = {}, {}
    for i, (name, (numel, _)) in enumerate(tensors.items()):
        storages[str(i)] = ("FloatStorage", numel)
        spec[name] = (str(i), 0, (numel,), (1,))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", state_dict_pickle(spec, storages))
        zf.writestr("archive/byteorder", "little")
        for i, (_, nbytes) in enumerate(tensors.values()):
            write_zeros(zf, f"archive/data/{i}", nbytes)
    return out.getvalue()


def declare_size(blob: bytes, name: str, size: int) -> bytes:
    """Rewrite the uncompressed size that the zip ``blob`` declares for ``name`` (central directory
    and local header), leaving the compressed data alone: a member that lies about its size."""
    buf = bytearray(blob)
    encoded = name.encode()
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        central = zf.start_dir  # scan the directory only: the data may hold the same bytes
    found = False
    while buf[central:central + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", buf, central + 28)
        if bytes(buf[central + 46: central + 46 + name_len]) == encoded:
            struct.pack_into("<I", buf, central + 24, size)
            local = struct.unpack_from("<I", buf, central + 42)[0]
            struct.pack_into("<I", buf, local + 22, size)
            found = True
        central += 46 + name_len + extra_len + comment_len
    if not found:
        raise KeyError(name)
    return bytes(buf)
