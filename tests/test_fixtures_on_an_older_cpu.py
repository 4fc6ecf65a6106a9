"""The comparisons with committed fixtures hold when XLA compiles for an older CPU (issue 37).

A fixture holds numbers computed on the CPU that recorded it. XLA compiles for the CPU it runs on:
with AVX-512, AVX2 or only AVX it contracts other fused multiply-adds and sums in other orders, so
float results differ in their last bits from one CPU to another. A test that compared today's run
bit for bit with a committed one (test_ippo_old_runs) passed on the recording machine and failed on
every CPU without AVX-512. The fixture tests now compare exactly only what is computed on both sides
here, and the rest within bounds derived from float32/float64 rounding.

This runs those comparisons again in a subprocess under ``XLA_FLAGS=--xla_cpu_max_isa=AVX`` (no
FMA, AVX2 or AVX-512: XLA rounds as on a 2011 CPU, whatever this one is), so a new exact comparison
with a recorded float fails here, on the recording machine, instead of on someone else's. The
subprocess first checks that the flag took effect: ``a * b + c`` with ``a * b`` not representable
gives 2^-24 when XLA fuses it into an FMA and 0 when it cannot.

`FIXTURE_TESTS` accounts for every test file that reads a committed fixture (the files
``grep -rlE "tests/data|FIXTURE|fixtures" tests`` lists): what of it runs here, or why nothing does.
The selection is the smallest that covers each kind of comparison with a fixture (about 20 s of
CPU; 36 s of wall-clock on 2 cores at a load average of 9).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
ISA_FLAG = "--xla_cpu_max_isa=AVX"
_CORE = "tests/quantgate_env/mdp/test_core_fixture.py::test_replay_matches_the_recording_of_the_old_environments"

#: test file -> node ids run under the restricted ISA, or the reason none is needed
FIXTURE_TESTS: dict[str, list[str] | str] = {
    # the committed IPPO run: layout, continuation and closeness to today's run (one module fixture)
    "tests/jaxrl_agents/test_ippo_old_runs.py": ["tests/jaxrl_agents/test_ippo_old_runs.py"],
    # float64 physics within n_steps*K*6*eps64 and the float32 out-of-bounds penalty within
    # 3*eps32*20: one single-line case with penalties, one multi-line case (the other eight cases
    # compare the same entries with the same bounds)
    "tests/quantgate_env/mdp/test_core_fixture.py": [f"{_CORE}[single_terminate_auto]",
                                                     f"{_CORE}[multi_coupler_only_auto]"],
    # SB3's recorded outputs (expected.npz) within the float32 bound of float32_bound.py
    "tests/sb3_bridge/test_sb3_load.py": ["tests/sb3_bridge/test_sb3_load.py::test_deterministic_actions_match_sb3_predict",
                                          "tests/sb3_bridge/test_sb3_load.py::test_values_match_sb3"],
    "tests/sb3_bridge/test_sb3_bad_input.py": [
        "tests/sb3_bridge/test_sb3_bad_input.py::test_float64_weights_are_accepted_and_cast"],
    "tests/sb3_bridge/test_sb3_evaluate.py": "loads the committed checkpoints; compares with SB3 run in the test",
    "tests/sb3_bridge/test_sb3_export.py": "loads the committed checkpoints; compares with SB3 run in the test",
    "tests/sb3_bridge/test_sb3_limits.py": "reads the committed checkpoints' structure; no recorded number",
    "tests/sb3_bridge/test_sb3_overwrite.py": "runs the CLI on the committed checkpoints; compares files it writes",
    "tests/sb3_bridge/test_sb3_safety.py": "loads the committed checkpoints without torch; no recorded number",
    "tests/jaxrl_agents/test_run_spec.py": "reads the committed IPPO run's config.json into a RunSpec; no recorded number",
}
_READS_A_FIXTURE = re.compile(r"tests/data|FIXTURE|fixtures")


def test_every_test_file_that_reads_a_fixture_is_accounted_for():
    """A new test that reads a committed fixture must say here whether it runs under the older ISA."""
    found = {str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
             if p.resolve() != pathlib.Path(__file__).resolve()
             and _READS_A_FIXTURE.search(p.read_text(encoding="utf-8"))}
    assert found == set(FIXTURE_TESTS), (f"new: {sorted(found - set(FIXTURE_TESTS))}, "
                                         f"gone: {sorted(set(FIXTURE_TESTS) - found)}")


_PROBE_THEN_PYTEST = """
import os, sys
import jax, numpy as np, pytest
a, c = np.float32(1 + 2**-12), np.float32(-(1 + 2**-11))
fused = float(jax.jit(lambda a, b, c: a * b + c)(a, a, c))
if fused != 0.0:
    sys.exit(f"XLA_FLAGS={os.environ['XLA_FLAGS']!r} did not take effect: a*b+c = {fused} (an FMA)")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def test_the_fixture_comparisons_pass_when_xla_compiles_for_an_avx_cpu():
    """The selected fixture tests, in a subprocess with ``XLA_FLAGS=--xla_cpu_max_isa=AVX``."""
    nodes = [node for sel in FIXTURE_TESTS.values() if isinstance(sel, list) for node in sel]
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {ISA_FLAG}".strip())
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-c", _PROBE_THEN_PYTEST, *nodes], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"under XLA_FLAGS={env['XLA_FLAGS']!r}:\n{out[-6000:]}"
    # every selected test ran and passed: none skipped or deselected out of the comparison
    summary = re.search(r"(\d+) passed", out)
    assert summary and int(summary.group(1)) >= len(nodes), out[-2000:]
    assert not re.search(r"\d+ (skipped|deselected|xfailed|xpassed)", out), out[-2000:]
