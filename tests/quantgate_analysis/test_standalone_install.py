"""quantgate-analysis installs and builds a results page without the test stack (issue 35).

Builds the wheels of quantgate-analysis and of the two workspace packages it depends on
(quantgate-env, jaxrl-agents), installs them into a fresh virtual environment outside the workspace
with the versions of ``uv.lock`` as constraints, checks that neither torch, SB3 nor pytest came
with them, and runs ``quantgate-results page`` there on a tiny campaign (tiny_campaign.py): the page
must be the one the workspace builds from the same files, byte for byte. Rebuilding the results
page (or summarising a campaign) used to need ``uv run --group test``: torch and SB3, 6.5 GB.

The install resolves against the index constrained to the lock, as
tests/quantgate_env/test_standalone_install.py does (see there why not ``--offline``).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..outside_workspace import run_outside_workspace
from .tiny_campaign import write_tiny_campaign

REPO = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = ("torch", "stable_baselines3", "sb3_contrib", "pytest")
WORKSPACE = ("quantgate-analysis", "quantgate-env", "jaxrl-agents")


def _run(cmd: list[str], cwd: pathlib.Path, what: str) -> subprocess.CompletedProcess:
    return run_outside_workspace(cmd, cwd, what, timeout_s=900)


def test_the_wheel_builds_the_page_in_a_fresh_venv_without_the_test_stack(tmp_path_factory):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: it is needed to build the wheels and create the isolated venv")
    root = tmp_path_factory.mktemp("analysis-standalone")
    assert REPO not in root.parents, "the fresh venv must live outside the workspace"

    # 1. The wheels, as `pip install quantgate-analysis` would receive them (its workspace
    #    dependencies are not on an index: their own wheels go in with it).
    dist = root / "dist"
    for package in WORKSPACE:
        _run([uv, "build", "--package", package, "--wheel", "--out-dir", str(dist)], REPO, f"uv build {package}")
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == len(WORKSPACE), f"expected one wheel per package in {dist}, got {wheels}"
    (analysis,) = [w for w in wheels if w.name.startswith("quantgate_analysis-")]
    with zipfile.ZipFile(analysis) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line.split(":", 1)[1].strip() for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
        entry_points = archive.read(metadata.replace("METADATA", "entry_points.txt")).decode()
    required = {canonicalize_name(Requirement(r).name) for r in requires}
    assert required == {"quantgate-env", "jaxrl-agents", "numpy", "matplotlib"}, requires
    assert "quantgate-results = quantgate_analysis.cli:main" in entry_points

    # 2. Versions pinned by the lock, as constraints; 3. a fresh venv outside the workspace.
    constraints = root / "constraints.txt"
    export = _run([uv, "export", "--frozen", "--package", "quantgate-analysis", "--no-dev", "--no-emit-workspace",
                   "--no-hashes", "--no-header", "--no-annotate"], REPO, "uv export")
    constraints.write_text(export.stdout)
    venv = root / "venv"
    _run([uv, "venv", str(venv), "--python", f"{sys.version_info.major}.{sys.version_info.minor}"], root, "uv venv")
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([uv, "pip", "install", "--python", str(python), "--constraint", str(constraints), *map(str, wheels)],
         root, "uv pip install")

    # 4. Nothing of the test stack came with it.
    probe = _run([str(python), "-I", "-c", "import importlib.util, sys, quantgate_analysis\n"
                  f"print([n for n in {FORBIDDEN!r} if importlib.util.find_spec(n) is not None])\n"
                  "print(quantgate_analysis.__file__)"], root, "probing the fresh venv")
    present, package_file = probe.stdout.strip().splitlines()[-2:]
    assert present == "[]", f"the fresh venv holds {present}: quantgate-analysis pulls in the test stack"
    assert pathlib.Path(package_file).is_relative_to(venv), f"imported from {package_file}, not the fresh venv"

    # 5. The page of a tiny campaign there, and here, from the same files.
    work = root / "work"
    work.mkdir()
    write_tiny_campaign(work)
    results = venv / ("Scripts/quantgate-results.exe" if os.name == "nt" else "bin/quantgate-results")
    _run([str(results), "page", "tiny.toml", "--out", "fresh.md", "--figures", "figs"], work,
         "quantgate-results page in the fresh venv")
    from quantgate_analysis.cli import main

    old = os.getcwd()
    os.chdir(work)
    try:
        assert main(["page", "tiny.toml", "--out", "here.md", "--figures", "figs-here"]) == 0
    finally:
        os.chdir(old)
    fresh = (work / "fresh.md").read_text()
    assert "| 2 | finished" in fresh
    assert fresh == (work / "here.md").read_text().replace("figs-here", "figs")
    for png in ("learning_curves_tiny-ppo.png", "frontier.png"):
        assert (work / "figs" / png).stat().st_size > 1000
