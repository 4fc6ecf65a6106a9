"""Loading never executes code from a checkpoint, and never needs torch."""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sb3_craft import read_data, read_member, rewrite_checkpoint, torch_state_dict_bytes

import sb3_bridge
from sb3_bridge import UnsafeCheckpointError


def _state(path):
    from sb3_bridge.torch_archive import read_state_dict
    return read_state_dict(read_member(path, "policy.pth"), path)


@pytest.mark.parametrize("module,name", [("os", "system"), ("posix", "system"), ("builtins", "exec"),
                                         ("subprocess", "call")])
def test_pickle_that_runs_a_command_is_rejected_and_never_runs(ppo_box, tmp_path, module, name):
    marker = tmp_path / "pwned"
    command = f"touch {marker}" if name != "exec" else f"open({str(marker)!r}, 'w').close()"
    if name == "call":
        command = f"touch {marker}"  # subprocess.call("touch ...") would need shell=True; the name alone must be refused
    evil = tmp_path / "evil.zip"
    rewrite_checkpoint(ppo_box, evil, policy_pth=torch_state_dict_bytes(
        _state(ppo_box), hostile_global=(module, name, command)))
    for fn in (sb3_bridge.load, sb3_bridge.inspect):
        with pytest.raises(UnsafeCheckpointError) as err:
            fn(evil)
        msg = str(err.value)
        assert f"'{module}.{name}'" in msg and "policy.pth" in msg and str(evil) in msg
        assert "nothing from it was executed" in msg
    assert not marker.exists()


def test_hostile_global_in_the_storage_slot_is_rejected(ppo_box, tmp_path):
    # The storage type is also looked up through find_class: the allow-list covers it too.
    marker = tmp_path / "pwned"
    blob = torch_state_dict_bytes(_state(ppo_box))
    with zipfile.ZipFile(__import__("io").BytesIO(blob)) as zf:
        pkl = zf.read("archive/data.pkl")
    pkl = pkl.replace(b"ctorch\nFloatStorage\n", b"cos\nsystem\n", 1)
    evil = tmp_path / "evil.zip"
    rewrite_checkpoint(ppo_box, evil, policy_pth=torch_state_dict_bytes(_state(ppo_box), pickle_bytes=pkl))
    with pytest.raises(UnsafeCheckpointError, match="os.system"):
        sb3_bridge.load(evil)
    assert not marker.exists()


def test_standard_pickle_exploit_is_rejected(ppo_box, tmp_path):
    # The textbook exploit, built with pickle itself: __reduce__ returning (os.system, (cmd,)).
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    import io
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"log_std": Exploit()}, protocol=2))
        zf.writestr("archive/byteorder", "little")
    evil = tmp_path / "evil.zip"
    rewrite_checkpoint(ppo_box, evil, policy_pth=out.getvalue())
    with pytest.raises(UnsafeCheckpointError, match=r"refusing to unpickle global '(posix|os)\.system'"):
        sb3_bridge.load(evil)
    assert not marker.exists()


def test_serialized_blobs_in_data_are_never_unpickled(ppo_box, tmp_path):
    # Every ":serialized:" entry replaced by a cloudpickle-style payload that would create a file.
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = base64.b64encode(pickle.dumps(Exploit())).decode()
    data = read_data(ppo_box)
    for value in data.values():
        if isinstance(value, dict) and ":serialized:" in value:
            value[":serialized:"] = payload
    evil = tmp_path / "evil_data.zip"
    rewrite_checkpoint(ppo_box, evil, data=data)
    policy = sb3_bridge.load(evil)  # the readable fields are enough
    sb3_bridge.inspect(evil)
    assert policy.model.obs_dim == 3
    assert not marker.exists()


def test_load_and_inspect_work_with_torch_and_sb3_unimportable(fixtures_dir, tmp_path):
    # A meta-path finder that fails any import of torch / SB3 and records the attempt, in a fresh
    # interpreter, so nothing imported by the test session leaks in.
    script = textwrap.dedent(f"""
        import sys
        attempts = []
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "stable_baselines3", "sb3_contrib"):
                    attempts.append(name)
                    raise ImportError(f"blocked import of {{name}}")
                return None
        sys.meta_path.insert(0, Block())
        import numpy as np
        import sb3_bridge
        for name in ("ppo_box", "ppo_discrete", "a2c_box", "trpo_box"):
            info = sb3_bridge.inspect({str(fixtures_dir)!r} + f"/{{name}}.zip")
            policy = sb3_bridge.load({str(fixtures_dir)!r} + f"/{{name}}.zip")
            policy.act(np.zeros(policy.model.obs_dim, np.float32))
        assert not attempts, attempts
        assert not any(m.split(".")[0] in ("torch", "stable_baselines3", "sb3_contrib") for m in sys.modules)
        print("OK")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")


def test_importing_the_package_imports_neither_jax_nor_torch():
    script = ("import sys, sb3_bridge; bad = [m for m in ('torch', 'jax', 'stable_baselines3') "
              "if m in sys.modules]; print(bad)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
