"""`pip install quantgate-env` works on its own (issue 3).

Builds the package's wheel, installs it into a fresh virtual environment outside the workspace and
steps ``gymnasium.make("quantgate_env:ZCQPEE-v0")`` there. The point is that quantgate-env's declared
dependencies (jax, numpy, gymnasium, pettingzoo) are enough: nothing of the agents' stack (flax,
optax) or of the test clients (torch, stable-baselines3) may be needed, or even present, for the
environment to run.

The install resolves against PyPI, constrained to the versions pinned in ``uv.lock``, so that on a
CI machine every wheel comes out of the uv cache that ``uv sync --locked`` just filled (only index
metadata is fetched). ``--offline`` does not work for this: ``uv sync`` installs from the lock's
URLs and leaves no cached index pages for ``uv pip install`` to resolve from.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..outside_workspace import run_outside_workspace

REPO = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = ("flax", "optax", "torch", "stable_baselines3")

STEP_SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, math, sys

    absent = [name for name in {forbidden!r} if importlib.util.find_spec(name) is None]

    import gymnasium
    import jax
    import numpy as np
    import quantgate_env

    env = gymnasium.make("quantgate_env:ZCQPEE-v0")
    obs, info = env.reset(seed=0)
    shapes, rewards, flags = [list(obs.shape)], [], []
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(np.array([0.1, 0.05, -0.15], dtype=np.float32))  # net 0: stays in bounds
        shapes.append(list(obs.shape))
        rewards.append(float(reward))
        flags.append([bool(terminated), bool(truncated)])
    amps, dt = quantgate_env.paper_pulse()  # package data (issue 37 row 6), read from the wheel
    print(json.dumps({{
        "paper_pulse": [quantgate_env.paper_pulse_path(), len(amps), dt],
        "absent": absent,
        "package_file": quantgate_env.__file__,
        "obs_dtype": str(obs.dtype),
        "obs_finite": bool(np.all(np.isfinite(obs))),
        "shapes": shapes,
        "rewards": rewards,
        "flags": flags,
        "JT": float(info["JT"]),
        "x64_left_on": bool(jax.config.read("jax_enable_x64")),
    }}))
    """
).format(forbidden=FORBIDDEN)


def _run(cmd: list[str], cwd: pathlib.Path, what: str) -> subprocess.CompletedProcess:
    return run_outside_workspace(cmd, cwd, what, timeout_s=600)


def test_wheel_installs_and_steps_in_a_fresh_venv(tmp_path_factory):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: it is needed to build the wheel and create the isolated venv")
    root = tmp_path_factory.mktemp("standalone")
    assert REPO not in root.parents, "the fresh venv must live outside the workspace"

    # 1. The wheel, as `pip install quantgate-env` would receive it.
    dist = root / "dist"
    _run([uv, "build", "--package", "quantgate-env", "--wheel", "--out-dir", str(dist)], REPO, "uv build")
    wheels = sorted(dist.glob("quantgate_env-*.whl"))
    assert len(wheels) == 1, f"expected one quantgate_env wheel in {dist}, got {wheels}"
    wheel = wheels[0]
    with zipfile.ZipFile(wheel) as archive:
        # the paper's pulse and its provenance and licence ship with the package (issue 37 row 6)
        assert {"quantgate_env/data/RL_pulse.csv", "quantgate_env/data/SOURCES.md"} <= set(archive.namelist())
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line.split(":", 1)[1].strip() for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    # Base requirements only: optional extras (e.g. a plotting extra) are not installed by default.
    parsed = [Requirement(req) for req in requires]
    required = {canonicalize_name(r.name) for r in parsed if r.marker is None or r.marker.evaluate({"extra": ""})}
    assert required == {"jax", "numpy", "gymnasium", "pettingzoo"}, f"unexpected runtime dependencies: {requires}"

    # 2. Versions pinned by the lock, as constraints (cache-friendly, see the module docstring).
    constraints = root / "constraints.txt"
    export = _run(
        [uv, "export", "--frozen", "--package", "quantgate-env", "--no-dev", "--no-emit-workspace",
         "--no-hashes", "--no-header", "--no-annotate"],
        REPO, "uv export",
    )
    constraints.write_text(export.stdout)

    # 3. A fresh venv outside the workspace (same interpreter version as this test run).
    venv = root / "venv"
    _run([uv, "venv", str(venv), "--python", f"{sys.version_info.major}.{sys.version_info.minor}"], root, "uv venv")
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([uv, "pip", "install", "--python", str(python), "--constraint", str(constraints), str(wheel)], root, "uv pip install")

    # 4. Step the registered Gymnasium env there, from a directory outside the workspace.
    script = root / "step_env.py"
    script.write_text(STEP_SCRIPT)
    proc = _run([str(python), "-I", str(script)], root, "stepping ZCQPEE-v0 in the fresh venv")
    result = json.loads(proc.stdout.strip().splitlines()[-1])

    assert sorted(result["absent"]) == sorted(FORBIDDEN), (
        f"{sorted(set(FORBIDDEN) - set(result['absent']))} importable in the fresh venv: the wheel pulls in more than the env needs"
    )
    assert pathlib.Path(result["package_file"]).is_relative_to(venv), (
        f"quantgate_env was imported from {result['package_file']}, not from the fresh venv {venv}"
    )
    pulse_file, n_samples, dt = result["paper_pulse"]
    assert pathlib.Path(pulse_file).is_relative_to(venv) and n_samples == 999 and dt == 0.05
    assert result["shapes"] == [[28]] * 6
    assert result["obs_dtype"] == "float32" and result["obs_finite"]
    assert len(result["rewards"]) == 5 and all(map(_finite, result["rewards"]))
    assert result["flags"] == [[False, False]] * 5
    assert 0.0 <= result["JT"] <= 1.0
    assert not result["x64_left_on"], "the Gymnasium env left JAX's global x64 switch on"


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")
