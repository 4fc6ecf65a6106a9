"""The one core reproduces what GateEnv and MultiGateEnv did before they were merged (issue 13).

``fixtures/core_outputs.npz`` was recorded by ``fixtures/record_core.py`` on the code of commit
0f0f207, before the single- and multi-line environments became views of ``quantgate_env.mdp.core``.
Here the same seeded action sequences are replayed on the current code. On the recording machine the
replay is bit for bit (``np.array_equal``; see the CHANGELOG of issue 13); on another CPU, or under
``XLA_FLAGS=--xla_cpu_max_isa=AVX`` / ``SSE4_2``, XLA rounds differently in the last bits. So flags,
masks and integer entries are compared exactly, and every float within a bound derived from the
rounding of its dtype (`_bounds`), never a number measured on one machine.
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np
import pytest
import quantgate_env

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
_spec = importlib.util.spec_from_file_location("record_core", FIXTURES / "record_core.py")
record_core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record_core)


@pytest.fixture(scope="module")
def recorded():
    """The recording, by key ``<case>/<path>``."""
    with np.load(FIXTURES / "core_outputs.npz") as data:
        return {key: data[key] for key in data.files}


EPS64 = float(np.finfo(np.float64).eps)  # 2^-52
EPS32 = float(np.finfo(np.float32).eps)  # 2^-23
BLOCK = 6  # the largest block the physics propagates (two excitations: 6x6, spec 1.2)


def _bounds(case: str, expected: dict) -> dict[str, np.ndarray]:
    """Per float entry, the largest difference another CPU's rounding can make (broadcastable).

    float64 physics: every step applies K exact sample propagators (eigen-decompositions and
    products of real symmetric blocks of size <= BLOCK); each rounds the gate by at most about
    BLOCK * EPS64 (backward error of a length-BLOCK dot product or of eigh), and the errors of the
    n_steps * K samples add up, on quantities of magnitude <= max(|value|, 1) (gate entries, J_T,
    concurrence and unitarity are <= 1; amplitudes, costs and rewards are O(10)):
    ``unit = n_steps * K * BLOCK * EPS64`` (~1e-13 here) times ``max(|value|, 1)``. The reward,
    ``-rew_scale * log10(J_T) - ...``, also carries J_T's error through the logarithm, whose
    condition is ``rew_scale / (ln 10 * J_T)``: ``unit * (max(|reward|, 1) + rew_scale / (ln 10 * J_T))``.

    The out-of-bounds penalty of terminate mode, ``terminal_penalty * (1 - idx / pulse_length)``,
    is computed in float32 by the environment (JAX divides an int32 index in float32 even under
    x64), recorded as float64: three float32 roundings (divide, subtract, multiply), each at most
    EPS32 of a term no larger than |terminal_penalty|, so on the truncated steps the reward gets
    ``3 * EPS32 * |terminal_penalty|`` (7.2e-6 for -20). That is the environment's precision there,
    not the test's: a float64 penalty would also lie within it.
    """
    multi, options, _, n_steps, _ = record_core.CASES[case]
    env = quantgate_env.make_multi(**options) if multi else quantgate_env.make(**options)
    cfg = env.config.env if multi else env.config
    float64_unit = n_steps * cfg.n_time_steps * BLOCK * EPS64
    bounds = {}
    for key, want in expected.items():
        if want.dtype.kind == "f":
            bounds[key] = float64_unit * max(float(np.abs(want).max()), 1.0)
    jt = np.min([v for k, v in expected.items() if k.endswith("/JT")], axis=0)  # (n_steps,), every line's
    bounds["reward"] = bounds["reward"] + float64_unit * cfg.rew_scale / (np.log(10) * np.maximum(jt, cfg.jt_floor))
    if cfg.oob_mode == "terminate":  # truncated <=> the step went out of bounds and got the penalty
        penalty = 3 * EPS32 * abs(cfg.terminal_penalty)
        bounds["reward"] = np.where(expected["truncated"], penalty, bounds["reward"])
    return bounds


@pytest.mark.parametrize("case", sorted(record_core.CASES))
def test_replay_matches_the_recording_of_the_old_environments(recorded, case):
    """Exact flags and integers; floats within the rounding bound of their dtype (`_bounds`)."""
    with jax.enable_x64(True):
        outputs = record_core.run_case(case)
    expected = {key[len(case) + 1:]: value for key, value in recorded.items() if key.startswith(case + "/")}
    assert sorted(outputs) == sorted(expected), "the info entries changed"
    bounds = _bounds(case, expected)
    for key, want in expected.items():
        got = outputs[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            err = np.abs(got - want)
            bad = ~(err <= bounds[key])  # NaN fails too
            steps = np.flatnonzero(bad.reshape(len(bad), -1).any(axis=1))
            assert not bad.any(), (f"{key}: steps {steps.tolist()} differ by up to {err[bad].max():.3g}, beyond "
                                   f"the rounding bound {np.broadcast_to(bounds[key], err.shape)[bad].min():.3g}")
    # the cases exercise what they claim: episode ends (auto-reset), truncation, clipping
    if record_core.CASES[case][2] == "step_autoreset":
        assert (expected["terminated"] | expected["truncated"]).sum() >= 2, case
