"""Read a torch ``state_dict`` file (what SB3 writes as ``policy.pth``) into numpy.

It needs no torch and runs no code from the file.

Format (torch >= 1.6 "zipfile" serialization, the only one SB3 2.x writes): a zip whose members all
sit under one folder (``archive/`` when written to a stream, as SB3 does):

- ``<prefix>/data.pkl``: a pickle of the state_dict. Tensors are pickled as
  ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks)``
  where ``storage`` is a *persistent id* ``("storage", torch.FloatStorage, key, location, numel)``.
- ``<prefix>/data/<key>``: the raw bytes of storage ``key``, ``numel`` elements.
- ``<prefix>/byteorder``: ``"little"`` or ``"big"`` (absent in old files: little).

The pickle is read with an allow-list ``Unpickler``: ``find_class`` returns our own stand-ins for
exactly the globals a state_dict needs and raises ``UnsafeCheckpointError`` for anything else, before
the name is imported. That is the same policy as ``torch.load(weights_only=True)``, minus torch.
"""

from __future__ import annotations

import io
import math
import pickle
from collections import OrderedDict

import numpy as np

from . import archive
from .errors import CheckpointError, UnsafeCheckpointError, UnsupportedCheckpointError
from .pickle_depth import MAX_PICKLE_DEPTH, pickle_depth

__all__ = ["read_state_dict", "ALLOWED_GLOBALS"]

# torch storage class name -> numpy dtype (byte order applied later). bfloat16 has no numpy dtype:
# it is read as uint16 and widened exactly to float32 (bfloat16 is the top half of a float32).
_STORAGE_DTYPES = {
    "FloatStorage": "f4",
    "DoubleStorage": "f8",
    "HalfStorage": "f2",
    "BFloat16Storage": "bf16",
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "b1",
}

#: Every global the reader accepts, as ``(module, name)``. Anything else is rejected.
ALLOWED_GLOBALS = frozenset(
    {("collections", "OrderedDict"),
     ("torch._utils", "_rebuild_tensor_v2"),
     ("torch._utils", "_rebuild_parameter")}
    | {("torch", name) for name in _STORAGE_DTYPES}
)


class _StorageType:
    """Stand-in for ``torch.FloatStorage`` etc.: carries only the element type."""

    __slots__ = ("name", "code")

    def __init__(self, name: str):
        self.name = name
        self.code = _STORAGE_DTYPES[name]

    def __repr__(self):
        return f"torch.{self.name}"


class _Storage:
    """A storage read from ``<prefix>/data/<key>``: a flat numpy array."""

    __slots__ = ("array", "key")

    def __init__(self, array: np.ndarray, key: str):
        self.array = array
        self.key = key


def read_state_dict(blob: bytes, path, member: str = "policy.pth", *,
                    budget: archive.ReadBudget | None = None) -> OrderedDict[str, np.ndarray]:
    """Parse a torch-saved state_dict without torch.

    Args:
        blob: the bytes of the ``.pth`` member.
        path: the checkpoint path, for error messages.
        member: the member name of ``blob`` inside the checkpoint, for error messages.
        budget: the checkpoint's ``archive.ReadBudget`` (default: a new one): every entry read
            from the archive is charged to it, after its declared size has been checked.

    Returns:
        ``OrderedDict`` of parameter name -> ``np.ndarray`` (C-contiguous, writeable, dtype of the
        storage; bfloat16 widened to float32), in the order torch saved them. A tensor that is a
        contiguous run of its storage is a view of it (no copy), so tensors sharing a storage
        share memory, as in torch.

    Raises:
        UnsafeCheckpointError: the pickle references a global outside ``ALLOWED_GLOBALS``.
        UnsupportedCheckpointError: legacy (pre-zip) torch serialization.
        CheckpointError: any structural problem (missing storage, wrong sizes, not a state_dict).
    """
    if blob[:4] != b"PK\x03\x04":
        if blob[:1] == b"\x80":
            raise UnsupportedCheckpointError(
                path, member, "legacy (non-zip) torch serialization, written by torch < 1.6 or with "
                "_use_new_zipfile_serialization=False; supported: the zip format SB3 2.x writes. "
                "Re-save the model with a current SB3/torch.")
        raise CheckpointError(path, member, f"not a torch zip archive (first bytes {blob[:4]!r})")
    budget = budget if budget is not None else archive.ReadBudget(path)
    zf = archive.open_zip(io.BytesIO(blob), path, member, "torch archive")
    with zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise CheckpointError(path, member, f"expected exactly one '<prefix>/data.pkl' in the torch "
                                  f"archive, found {pkl or 'none'} among {len(names)} entries")
        prefix = pkl[0][: -len("data.pkl")]
        byteorder = "little"
        if prefix + "byteorder" in names:
            byteorder = _read(zf, budget, member, prefix + "byteorder", cap=16)
            byteorder = byteorder.decode("ascii", "replace").strip()
            if byteorder not in ("little", "big"):
                raise CheckpointError(path, f"{member}:{prefix}byteorder", f"unknown byte order {byteorder!r}")
        pickled = _read(zf, budget, member, pkl[0], cap=archive.MAX_PICKLE_BYTES,
                        cap_name="sb3_bridge.archive.MAX_PICKLE_BYTES")
        try:
            depth = pickle_depth(pickled)
        except ValueError as exc:  # an opcode pickletools cannot decode
            raise CheckpointError(path, f"{member}:{pkl[0]}", f"malformed state_dict pickle ({exc})") from None
        if depth > MAX_PICKLE_DEPTH:
            raise CheckpointError(path, f"{member}:{pkl[0]}", f"the pickle nests objects more than "
                                  f"{MAX_PICKLE_DEPTH} levels deep (a state_dict needs about 8); refused "
                                  f"before unpickling, as such nesting can crash the interpreter")
        unpickler = _StateDictUnpickler(
            io.BytesIO(pickled), zf=zf, budget=budget, prefix=prefix, byteorder=byteorder,
            path=path, member=member)
        try:
            obj = unpickler.load()
        except CheckpointError:
            raise
        except Exception as exc:  # malformed pickle opcodes, wrong argument types, ...
            raise CheckpointError(path, f"{member}:{pkl[0]}",
                                  f"malformed state_dict pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise CheckpointError(path, f"{member}:{pkl[0]}",
                              f"expected a state_dict (a dict of tensors), found {type(obj).__name__}")
    out: OrderedDict[str, np.ndarray] = OrderedDict()
    for key, value in obj.items():
        if not isinstance(key, str):
            # Only the type: the repr of a crafted key could be huge or recurse without end.
            raise CheckpointError(path, f"{member}:{pkl[0]}", f"state_dict entry of type "
                                  f"{type(key).__name__} as its name, expected str keys")
        if not isinstance(value, np.ndarray):
            raise CheckpointError(path, f"{member}:{pkl[0]}", f"state_dict entry {key[:200]!r} is a "
                                  f"{type(value).__name__}, expected a tensor")
        out[key] = value
    return out


def _read(zf, budget, member: str, name: str, **limits) -> bytes:
    try:
        return budget.read(zf, name, f"{member}:{name}", **limits)
    except KeyError:
        raise CheckpointError(budget.path, f"{member}:{name}", "entry missing from the torch archive") from None


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickler that knows only state_dict globals; storages come from the enclosing archive."""

    def __init__(self, file, *, zf, budget, prefix, byteorder, path, member):
        super().__init__(file)
        self._zf = zf
        self._budget = budget
        self._prefix = prefix
        self._order = "<" if byteorder == "little" else ">"
        self._path = path
        self._member = member
        self._storages: dict[str, _Storage] = {}

    def find_class(self, module, name):
        # Checked before anything is imported: a rejected name never reaches importlib/getattr.
        if (module, name) not in ALLOWED_GLOBALS:
            raise UnsafeCheckpointError(
                self._path, f"{self._member}:{self._prefix}data.pkl",
                f"refusing to unpickle global '{module}.{name}': a state_dict only needs "
                f"{sorted(f'{m}.{n}' for m, n in ALLOWED_GLOBALS)}. The file may be malicious or not "
                f"a plain state_dict; nothing from it was executed.")
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if name == "_rebuild_tensor_v2":
            return self._rebuild_tensor_v2
        if name == "_rebuild_parameter":
            return _rebuild_parameter
        return _StorageType(name)

    def persistent_load(self, pid):
        where = f"{self._member}:{self._prefix}data.pkl"
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(self._path, where, f"unexpected persistent id {pid!r:.200}")
        _, stype, key, _location, numel = pid
        if not isinstance(stype, _StorageType) or not isinstance(key, str) or type(numel) is not int \
                or numel < 0:
            raise CheckpointError(self._path, where, f"malformed storage reference {pid!r:.200}")
        if key in self._storages:
            return self._storages[key]
        entry = f"{self._prefix}data/{key}"
        code = stype.code
        itemsize = {"bf16": 2, "b1": 1}.get(code) or np.dtype(code).itemsize
        try:
            declared = self._zf.getinfo(entry).file_size
        except KeyError:
            declared = None  # reported as missing by _read
        if declared is not None and declared != numel * itemsize:
            # Checked before inflating: a storage is exactly numel elements.
            raise CheckpointError(self._path, f"{self._member}:{entry}",
                                  f"storage declares {declared} bytes, expected {numel} x {itemsize} "
                                  f"({stype}); the archive is truncated, corrupt or crafted")
        # A bytearray, so tensors that view it (below) are writeable like torch's.
        raw = _read(self._zf, self._budget, self._member, entry, mutable=True)
        if code == "bf16":
            bits = np.frombuffer(raw, dtype=self._order + "u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif code == "b1":
            array = np.frombuffer(raw, dtype=np.bool_)
        else:
            array = np.frombuffer(raw, dtype=self._order + code)
        storage = _Storage(array, key)
        self._storages[key] = storage
        return storage

    def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False,
                           backward_hooks=None, metadata=None):
        where = f"{self._member}:{self._prefix}data.pkl"
        if not isinstance(storage, _Storage):
            raise CheckpointError(self._path, where, "tensor without a storage")
        ok = (type(storage_offset) is int and storage_offset >= 0
              and isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
              and all(type(v) is int and v >= 0 for v in size + stride))
        if not ok:
            raise CheckpointError(self._path, where, f"malformed tensor (offset={storage_offset!r:.50}, "
                                  f"size={size!r:.80}, stride={stride!r:.80})")
        base = storage.array
        n = math.prod(size)  # exact: int64 products of crafted sizes wrap around
        if n > base.size:
            # A state_dict never broadcasts (stride 0); refusing keeps a crafted size from
            # allocating far more memory than the file holds.
            raise CheckpointError(self._path, f"{self._member}:{self._prefix}data/{storage.key}",
                                  f"tensor of size {size} has {n} elements, more than its storage "
                                  f"({base.size})")
        if n:
            last = storage_offset + sum((s - 1) * st for s, st in zip(size, stride))
            if last >= base.size:
                raise CheckpointError(
                    self._path, f"{self._member}:{self._prefix}data/{storage.key}",
                    f"tensor of size {size} with stride {stride} at offset {storage_offset} reaches "
                    f"element {last}, but the storage has only {base.size} elements")
            contiguous = tuple(math.prod(size[i + 1:]) for i in range(len(size)))
            if all(st == c for s, st, c in zip(size, stride, contiguous) if s > 1):
                # The usual case (each parameter its own storage): a view, not a second copy.
                return base[storage_offset:storage_offset + n].reshape(size)
            view = np.lib.stride_tricks.as_strided(
                base[storage_offset:], shape=size,
                strides=tuple(st * base.itemsize for st in stride), writeable=False)
            return np.array(view, order="C")
        return np.zeros(size, dtype=base.dtype)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    # nn.Parameter wraps a tensor; numpy has no such distinction.
    return data
