"""Hostile sizes and shapes: decompression bombs, lying sizes, deep JSON, truncation, and `inspect`
running the same checks as `load`.

Memory is shown to stay bounded by counting what is inflated: every read of a zip member, outer or
nested inside ``policy.pth``, goes through ``zipfile.ZipExtFile.read``, so the ``inflated`` fixture
sums the bytes those reads return. A refused bomb must be refused before more than the cap is read
(no timing, no RSS sampling).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest
from sb3_craft import (Op, bomb_checkpoint, declare_size, read_member, rewrite_checkpoint,
                       torch_state_dict_bytes, zeros_torch_archive)

import sb3_bridge
from sb3_bridge import CheckpointError, archive
from sb3_bridge.cli import main
from sb3_bridge.torch_archive import read_state_dict

MiB = 1 << 20


@pytest.fixture
def inflated(monkeypatch):
    """``{"bytes": n}``: total bytes returned by zip member reads since the fixture started."""
    counter = {"bytes": 0}
    original = zipfile.ZipExtFile.read

    def counting_read(self, n=-1):
        out = original(self, n)
        counter["bytes"] += len(out)
        return out

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting_read)
    return counter


def _error(fn, path, inflated=None) -> CheckpointError:
    if inflated is not None:
        inflated["bytes"] = 0  # count only what `fn` reads (building the file read members too)
    with pytest.raises(CheckpointError) as err:
        fn(path)
    assert err.value.path == str(path)
    return err.value


# ------------------------------------------------------------------------------- bombs
@pytest.mark.parametrize("fn", [sb3_bridge.load, sb3_bridge.inspect])
def test_data_bomb_is_refused_before_inflating(ppo_box, tmp_path, inflated, fn):
    # ~64 KB on disk, 64 MiB inflated: over the 16 MiB cap on `data` (SB3 writes ~10 KB).
    path = tmp_path / "bomb.zip"
    bomb_checkpoint(ppo_box, path, "data", 64 * MiB)
    assert path.stat().st_size < MiB
    import jaxrl_agents  # noqa: F401  (load imports it: keep jax's own allocations out of the peak)
    tracemalloc.start()
    try:
        err = _error(fn, path, inflated)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.member == "data"
    assert f"declares {64 * MiB} bytes" in err.reason and str(archive.MAX_DATA_BYTES) in err.reason
    assert inflated["bytes"] == 0  # the declared size was checked before anything was inflated
    assert peak < MiB


def test_storages_count_against_one_cap_per_checkpoint(ppo_box, tmp_path, inflated, monkeypatch):
    # Three 3 MiB storages, each under any per-member cap, 9 MiB together: over an 8 MiB cap
    # for the checkpoint. Deflated inside policy.pth, the whole file is ~40 KB.
    monkeypatch.setattr(archive, "MAX_CHECKPOINT_BYTES", 8 * MiB, raising=False)
    n = 3 * MiB // 4
    path = tmp_path / "storages.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=zeros_torch_archive(
        {"a": (n, 4 * n), "b": (n, 4 * n), "c": (n, 4 * n)}))
    assert path.stat().st_size < MiB
    err = _error(sb3_bridge.load, path, inflated)
    assert err.member == "policy.pth:archive/data/2"
    assert f"declares {3 * MiB} bytes" in err.reason and f"{8 * MiB}-byte limit" in err.reason
    assert 6 * MiB <= inflated["bytes"] <= 8 * MiB  # two storages read, the third refused


def test_large_storage_is_refused_before_inflating(ppo_box, tmp_path, inflated, monkeypatch):
    monkeypatch.setattr(archive, "MAX_CHECKPOINT_BYTES", 8 * MiB, raising=False)
    path = tmp_path / "storage.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=zeros_torch_archive({"a": (4 * MiB, 16 * MiB)}))
    err = _error(sb3_bridge.load, path, inflated)
    assert err.member == "policy.pth:archive/data/0" and "declares" in err.reason
    assert inflated["bytes"] < MiB


def test_storage_larger_than_its_tensor_is_refused_before_inflating(ppo_box, tmp_path, inflated):
    # The pickle says 1 float32, the entry inflates to 64 MiB: the size check comes first.
    path = tmp_path / "storage.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=zeros_torch_archive({"a": (1, 64 * MiB)}))
    err = _error(sb3_bridge.load, path, inflated)
    assert err.member == "policy.pth:archive/data/0"
    assert f"declares {64 * MiB} bytes, expected 1 x 4" in err.reason
    assert inflated["bytes"] < MiB


def test_member_lying_about_its_size_is_read_no_further(ppo_box, tmp_path, inflated):
    # `data` declares 1000 bytes but inflates to 64 MiB: reading stops at the declared size.
    src = tmp_path / "bomb.zip"
    bomb_checkpoint(ppo_box, src, "data", 64 * MiB)
    path = tmp_path / "liar.zip"
    path.write_bytes(declare_size(src.read_bytes(), "data", 1000))
    err = _error(sb3_bridge.load, path, inflated)
    assert err.member == "data" and "corrupt" in err.reason
    assert inflated["bytes"] <= 1001


def test_default_cap_admits_the_committed_checkpoints(fixtures_dir):
    for name in ("ppo_box", "ppo_discrete", "a2c_box", "trpo_box"):
        assert sb3_bridge.inspect(fixtures_dir / f"{name}.zip").supported


# ----------------------------------------------------------------------------- deep nesting
@pytest.mark.parametrize("fn", [sb3_bridge.load, sb3_bridge.inspect])
def test_deeply_nested_json_is_a_checkpoint_error(ppo_box, tmp_path, fn):
    path = tmp_path / "deep.zip"
    rewrite_checkpoint(ppo_box, path, data=b'{"policy_kwargs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    err = _error(fn, path)
    assert err.member == "data" and "nested too deeply" in err.reason


def test_cli_reports_deep_json_in_one_line(ppo_box, tmp_path, capsys):
    path = tmp_path / "deep.zip"
    rewrite_checkpoint(ppo_box, path, data=b"[" * 100_000)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sb3-bridge inspect: error: ") and err.count("\n") == 1
    assert "nested too deeply" in err


def _archive_with_pickle(pkl: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
    return out.getvalue()


def test_deeply_nested_pickle_is_refused_before_unpickling(tmp_path):
    # {(((...),),): 1} with the tuple nested a million times: 1 MB. Unpickling it hashes the key,
    # which recurses in C without a depth guard and kills the interpreter (SIGSEGV), so run it in
    # a child process and require a clean CheckpointError there.
    pkl = Op().raw(b"}" + b")" + b"\x85" * 1_000_000 + b"K\x01s").bytes()
    blob = tmp_path / "deep.pth"
    blob.write_bytes(_archive_with_pickle(pkl))
    script = textwrap.dedent(f"""
        from pathlib import Path
        from sb3_bridge import CheckpointError
        from sb3_bridge.torch_archive import read_state_dict
        try:
            read_state_dict(Path({str(blob)!r}).read_bytes(), "m.zip")
        except CheckpointError as exc:
            print(exc.member, "|", exc.reason)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.startswith("policy.pth:archive/data.pkl |")
    assert "more than 64 levels deep" in result.stdout


def test_state_dict_key_that_is_not_a_string_is_named_by_type():
    pkl = Op().raw(b"}" + b"K\x01" * 3 + b"\x87" + b"K\x01s").bytes()  # {(1, 1, 1): 1}
    with pytest.raises(CheckpointError, match="state_dict entry of type tuple as its name"):
        read_state_dict(_archive_with_pickle(pkl), "m.zip")


# --------------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("end", ["policy.pth", "policy.optimizer.pth", "_stable_baselines3_version"])
def test_truncation_after_a_nested_archive_is_named_truncation(ppo_box, tmp_path, end):
    # SB3 stores policy.pth (itself a zip) uncompressed: cut the file just after one, and the last
    # zip directory left in it is the nested one.
    with zipfile.ZipFile(ppo_box) as zf:
        info = zf.getinfo(end)
    cut = info.header_offset + 30 + len(info.filename) + info.compress_size
    path = tmp_path / "cut.zip"
    path.write_bytes(ppo_box.read_bytes()[:cut])
    for fn in (sb3_bridge.load, sb3_bridge.inspect):
        err = _error(fn, path)
        assert err.member is None
        assert "truncated" in err.reason and "nested" in err.reason and "member missing" not in err.reason


def test_torch_archive_cut_inside_policy_pth_is_named(ppo_box, tmp_path):
    blob = read_member(ppo_box, "policy.pth")
    with pytest.raises(CheckpointError) as err:
        read_state_dict(blob[: len(blob) - 30], "m.zip")
    assert err.value.member == "policy.pth" and "truncated" in err.value.reason


# ------------------------------------------------------------------- inspect == load's checks
def _state(path):
    return read_state_dict(read_member(path, "policy.pth"), path)


def _nan_state(ppo_box):
    state = _state(ppo_box)
    state["action_net.weight"][0, 0] = np.nan
    return state


@pytest.mark.parametrize("make_state,match", [
    (lambda src: {}, "missing ["),
    (_nan_state, "non-finite"),
    (lambda src: {"encoder.weight": np.zeros((2, 3), np.float32)}, "unexpected ['encoder.weight']"),
])
def test_inspect_reports_what_load_refuses(ppo_box, tmp_path, make_state, match, capsys):
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=torch_state_dict_bytes(make_state(ppo_box)))
    load_err = _error(sb3_bridge.load, path)
    assert match in load_err.reason
    info = sb3_bridge.inspect(path)
    assert not info.supported
    assert any(load_err.reason in p for p in info.problems)
    assert main(["inspect", str(path)]) == 3
    assert "NOT LOADABLE" in capsys.readouterr().out


def test_inspect_reports_data_disagreeing_with_weights(ppo_box, tmp_path):
    data = json.loads(read_member(ppo_box, "data"))
    data["observation_space"]["_shape"] = [5]
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, data=data)
    info = sb3_bridge.inspect(path)
    assert not info.supported and "data's observation_space has shape [5]" in " ".join(info.problems)
