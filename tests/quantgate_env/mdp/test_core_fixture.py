"""The one core reproduces what GateEnv and MultiGateEnv did before they were merged (issue 13).

``fixtures/core_outputs.npz`` was recorded by ``fixtures/record_core.py`` on the code of commit
0f0f207, before the single- and multi-line environments became views of ``quantgate_env.mdp.core``.
Here the same seeded action sequences are replayed on the current code. Tolerances: flags,
masks and integer entries exactly; every float 1e-12 absolute (the recording is float64; another
CPU or XLA build may round differently in the last bits, and over 24 steps of ~30 dense matrix
products such differences stay around 1e-15). On the recording machine the replay is bit for bit
(``np.array_equal``; see the CHANGELOG of issue 13).
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np
import pytest

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
_spec = importlib.util.spec_from_file_location("record_core", FIXTURES / "record_core.py")
record_core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record_core)


@pytest.fixture(scope="module")
def recorded():
    with np.load(FIXTURES / "core_outputs.npz") as data:
        return {key: data[key] for key in data.files}


@pytest.mark.parametrize("case", sorted(record_core.CASES))
def test_replay_matches_the_recording_of_the_old_environments(recorded, case):
    with jax.enable_x64(True):
        outputs = record_core.run_case(case)
    expected = {key[len(case) + 1:]: value for key, value in recorded.items() if key.startswith(case + "/")}
    assert sorted(outputs) == sorted(expected), "the info entries changed"
    for key, want in expected.items():
        got = outputs[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=key)
    # the cases exercise what they claim: episode ends (auto-reset), truncation, clipping
    if record_core.CASES[case][2] == "step_autoreset":
        assert (expected["terminated"] | expected["truncated"]).sum() >= 2, case
