"""The torch-free state_dict reader: dtypes, byte order, offsets/strides, storages shared by views."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from sb3_craft import Op, torch_state_dict_bytes

from sb3_bridge import CheckpointError, UnsupportedCheckpointError
from sb3_bridge.torch_archive import read_state_dict


@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_dtypes_and_byte_order_round_trip(byteorder):
    rng = np.random.default_rng(0)
    arrays = {
        "w32": rng.standard_normal((3, 4)).astype(np.float32),
        "w64": rng.standard_normal((5,)),
        "w16": rng.standard_normal((2, 2)).astype(np.float16),
        "i64": np.arange(7, dtype=np.int64),
        "flag": np.array([True, False, True]),
        "scalar": np.array(1.5, dtype=np.float32),
    }
    blob = torch_state_dict_bytes(arrays, byteorder=byteorder, prefix="policy")
    got = read_state_dict(blob, "x.zip")
    assert list(got) == list(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype.newbyteorder("=") or got[name].dtype.name == a.dtype.name
        assert got[name].shape == a.shape
        np.testing.assert_array_equal(got[name], a)


def _manual_archive(pkl: bytes, storages: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/byteorder", "little")
        for key, blob in storages.items():
            zf.writestr(f"archive/data/{key}", blob)
    return out.getvalue()


def _tensor(op: Op, name, stype, key, numel, offset, size, stride):
    op.str_(name).global_("torch._utils", "_rebuild_tensor_v2").raw(b"((")
    op.str_("storage").global_("torch", stype).str_(key).str_("cpu").int_(numel).raw(b"tQ")
    op.int_(offset).tuple_(size).tuple_(stride).raw(b"\x89")
    op.global_("collections", "OrderedDict").raw(b")RtR")


def test_offset_stride_and_shared_storage():
    # Two tensors viewing one storage: a transposed (non-contiguous) view and an offset slice,
    # as torch writes views of a parameter.
    base = np.arange(12, dtype=np.float32)
    op = Op().global_("collections", "OrderedDict").raw(b")R(")
    _tensor(op, "t", "FloatStorage", "0", 12, 0, (4, 3), (1, 4))  # base.reshape(3, 4).T
    _tensor(op, "tail", "FloatStorage", "0", 12, 8, (2, 2), (2, 1))  # base[8:12].reshape(2, 2)
    got = read_state_dict(_manual_archive(op.raw(b"u").bytes(), {"0": base.tobytes()}), "x.zip")
    np.testing.assert_array_equal(got["t"], base.reshape(3, 4).T)
    np.testing.assert_array_equal(got["tail"], base[8:12].reshape(2, 2))
    assert got["t"].flags.c_contiguous


def test_bfloat16_is_widened_exactly():
    values = np.array([1.0, -2.5, 3.140625], dtype=np.float32)  # exactly representable in bf16
    bf16 = (values.view(np.uint32) >> 16).astype("<u2")
    op = Op().global_("collections", "OrderedDict").raw(b")R(")
    _tensor(op, "b", "BFloat16Storage", "0", 3, 0, (3,), (1,))
    got = read_state_dict(_manual_archive(op.raw(b"u").bytes(), {"0": bf16.tobytes()}), "x.zip")
    assert got["b"].dtype == np.float32
    np.testing.assert_array_equal(got["b"], values)


def test_view_reaching_past_its_storage_is_rejected():
    op = Op().global_("collections", "OrderedDict").raw(b")R(")
    _tensor(op, "w", "FloatStorage", "0", 4, 2, (2, 2), (2, 1))  # needs 6 elements
    with pytest.raises(CheckpointError, match=r"archive/data/0.*reaches element 5.*only 4"):
        read_state_dict(_manual_archive(op.raw(b"u").bytes(), {"0": np.zeros(4, np.float32).tobytes()}),
                        "x.zip")


def test_broadcast_size_cannot_allocate_more_than_the_file_holds():
    op = Op().global_("collections", "OrderedDict").raw(b")R(")
    _tensor(op, "w", "FloatStorage", "0", 1, 0, (100000, 100000), (0, 0))
    with pytest.raises(CheckpointError, match="more than its storage"):
        read_state_dict(_manual_archive(op.raw(b"u").bytes(), {"0": np.zeros(1, np.float32).tobytes()}),
                        "x.zip")


def test_legacy_serialization_is_named():
    with pytest.raises(UnsupportedCheckpointError, match="legacy .*torch serialization"):
        read_state_dict(b"\x80\x02\x8a\x0alegacy-magic", "x.zip")


def test_matches_torch_load_on_views_and_dtypes():
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    sd = {"t": base.t(), "slice": base[1:3, 2:5], "f32": torch.randn(3, 3),
          "half": torch.randn(4).half(), "bf16": torch.randn(5).bfloat16(), "long": torch.arange(3)}
    buf = io.BytesIO()
    torch.save(sd, buf)
    got = read_state_dict(buf.getvalue(), "x.zip")
    for k, v in sd.items():
        ref = v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy()
        np.testing.assert_array_equal(got[k], ref)
