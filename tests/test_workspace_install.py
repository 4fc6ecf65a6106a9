"""What each of the README's two commands installs (issue 12).

`uv run --locked jaxrl-train` (the main command) must install the runtime of the three packages and
nothing of the test stack; `uv run --locked --group test pytest` (the test command, which `.ci/run`
runs verbatim) must install the clients the tests import. Both are read off `uv export` of the
committed lock, which is exactly what `uv run` installs from: no environment is built here.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
# The test stack: clients and cross-checks the tests and benches use, never the packages' runtime.
TEST_ONLY = {"torch", "stable-baselines3", "sb3-contrib", "weylchamber", "matplotlib", "pytest", "qutip", "pygame"}
# GPU wheels that a CUDA torch drags in.
NVIDIA_PREFIX = "nvidia-"


def _locked_names(*args: str) -> set[str]:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    proc = subprocess.run(
        [uv, "export", "--locked", "--no-hashes", "--no-header", "--no-annotate", "--no-emit-workspace", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"uv export {' '.join(args)} failed:\n{proc.stderr}"
    names = set()
    for line in proc.stdout.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line.strip())
        if match:
            names.add(match.group(1).lower().replace("_", "-"))
    return names


def test_main_command_installs_no_test_stack():
    runtime = _locked_names()  # what `uv run --locked jaxrl-train` installs (default-groups = [])
    assert {"jax", "jaxlib", "optax", "gymnasium", "pettingzoo", "numpy"} <= runtime
    leaked = sorted(n for n in runtime if n in TEST_ONLY or n.startswith(NVIDIA_PREFIX))
    assert not leaked, f"the main command's environment would hold test-only packages: {leaked}"


def test_the_analysis_command_installs_no_test_stack():
    """`uv run --locked --package quantgate-analysis quantgate-results page ...` (the results page, a
    campaign): the analysis and its runtime, matplotlib included, but nothing of the test stack."""
    analysis = _locked_names("--package", "quantgate-analysis")
    assert {"jax", "flax", "matplotlib", "numpy"} <= analysis
    leaked = sorted(n for n in analysis if (n in TEST_ONLY and n != "matplotlib") or n.startswith(NVIDIA_PREFIX))
    assert not leaked, f"the analysis command's environment would hold test-only packages: {leaked}"


def test_ray_comes_only_with_the_campaign_and_sweep_extras():
    """The README's main command (`uv run --locked jaxrl-train ...`) installs no Ray; the campaign
    command (`uv run --locked --package quantgate-analysis --extra campaign jaxrl-campaign run`)
    installs Ray and the analysis, and still nothing of the test stack (issue 35 part 3)."""
    assert "ray" not in _locked_names()
    assert "ray" not in _locked_names("--package", "quantgate-analysis")
    for args in (("--package", "quantgate-analysis", "--extra", "campaign"),
                 ("--extra", "campaign")):  # the second: what jaxrl-campaign suggests under uv
        campaign = _locked_names(*args)
        assert {"ray", "jax", "matplotlib"} <= campaign, args
        leaked = sorted(n for n in campaign
                        if (n in TEST_ONLY and n != "matplotlib") or n.startswith(NVIDIA_PREFIX))
        assert not leaked, f"{args} would install test-only packages: {leaked}"


def test_test_command_installs_the_test_clients():
    with_tests = _locked_names("--group", "test")
    missing = sorted({"pytest", "torch", "stable-baselines3", "sb3-contrib", "weylchamber", "scipy"} - with_tests)
    assert not missing, f"`--group test` lacks {missing}"


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    commands = re.findall(r"^pip install uv && (uv run [^\n]*pytest[^\n]*)$", readme, flags=re.M)
    assert len(commands) == 1, f"README.md should give one test command, found {commands}"
    ci_lines = [line.strip() for line in ci.splitlines() if line.strip().startswith("uv run")]
    assert ci_lines == [commands[0]], f".ci/run runs {ci_lines}, README.md says {commands[0]!r}"
