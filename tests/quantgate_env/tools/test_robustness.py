"""Robustness maps of pulses and policies over a qubit-detuning grid."""

import json
import subprocess
import sys

import numpy as np
import pytest
from quantgate_env import load_pulse_csv, nominal_device, rollout_pulse
from quantgate_env.tools.robustness import (
    detuning_grid,
    detuning_sample,
    policy_robustness,
    policy_validation,
    pulse_robustness,
)


@pytest.fixture(scope="module")
def rl_pulse(pulse_dir):
    return load_pulse_csv(pulse_dir / "RL_pulse.csv")


def test_grid_is_centred_on_the_nominal_device():
    devices, offsets = detuning_grid(10.0, n=3)
    assert offsets.shape == (9, 2) and np.allclose(offsets[0], [-10, -10])
    np.testing.assert_allclose(devices.omega_q[4], nominal_device().omega_q, atol=0)
    np.testing.assert_allclose(devices.omega_q[0], nominal_device().omega_q - 0.010)
    assert detuning_grid("recool", n=2)[1].max() == 5.7


def test_rl_pulse_recool_map_matches_reference_figures(rl_pulse):
    amps, dt = rl_pulse
    result = pulse_robustness(amps, dt=dt, half_width_mhz="recool", n=11)
    s = result.summary()
    assert s["gate_time_ns"] == pytest.approx(17.25)
    assert s["nominal_JT"] == pytest.approx(rollout_pulse(amps, dt=dt)["JT"][344], rel=1e-10)
    # reference (docs/results/robustness.md): RL pulse at 17.25 ns, recool mean 1.5e-3, worst 4.0e-3
    assert s["mean_JT"] == pytest.approx(1.5e-3, rel=0.05)
    assert s["worst_JT"] == pytest.approx(4.0e-3, rel=0.05)
    # an off-centre point equals an independent rollout on that device
    i = 7
    device = nominal_device()._replace(omega_q=nominal_device().omega_q + 1e-3 * result.offsets_mhz[i])
    assert result.jt_at_gate_time[i] == pytest.approx(rollout_pulse(amps[:345], dt=dt, params=device)["JT"][-1], rel=1e-10)
    assert np.all(result.jt_best <= result.jt_at_gate_time + 1e-15)


def test_in_cooldown_range_barely_moves_the_gate(rl_pulse):
    amps, dt = rl_pulse
    s = pulse_robustness(amps, dt=dt, half_width_mhz="in_cooldown", n=3).summary()
    assert s["worst_JT"] == pytest.approx(1.0e-4, rel=0.1)  # reference: in-cooldown worst 1.0e-4


def test_policy_map_of_a_replaying_policy_equals_the_pulse_map(rl_pulse):
    """A 'policy' that replays the pulse's deltas open loop must give the pulse's own map."""
    amps, dt = rl_pulse
    deltas = np.diff(np.concatenate([[0.0], amps])).reshape(333, 3) / 20.0
    calls = iter(range(333))

    def replay(obs_batch):
        step = next(calls)
        return np.broadcast_to(deltas[step], (obs_batch.shape[0], 3))

    policy_map = policy_robustness(replay, half_width_mhz=4.0, n=3)
    pulse_map = pulse_robustness(amps, dt=dt, half_width_mhz=4.0, n=3)
    assert policy_map.gate_time == pytest.approx(pulse_map.gate_time)
    np.testing.assert_allclose(policy_map.jt_at_gate_time, pulse_map.jt_at_gate_time, rtol=1e-9)


def test_drawn_devices_start_at_the_nominal_one_and_stay_in_range():
    devices, offsets = detuning_sample("recool", count=50, seed=3)
    assert offsets.shape == (51, 2) and np.all(offsets[0] == 0) and np.abs(offsets).max() <= 5.7
    np.testing.assert_allclose(devices.omega_q[0], nominal_device().omega_q, atol=0)
    np.testing.assert_allclose(devices.omega_q, nominal_device().omega_q + 1e-3 * offsets, atol=0)
    assert np.array_equal(detuning_sample("recool", count=50, seed=3)[1], offsets)  # the same seed
    assert not np.array_equal(detuning_sample("recool", count=50, seed=4)[1], offsets)
    grid = detuning_grid("recool", n=11)[1]
    assert not any((np.abs(grid - o).sum(axis=1) == 0).any() for o in offsets[1:])  # none on the grid


def test_validation_of_a_replaying_policy_is_the_pulse_on_each_drawn_device(rl_pulse):
    """Played open loop, the policy's validation is the pulse's J_T at the nominal best time on
    each drawn device, computed here by independent rollouts."""
    amps, dt = rl_pulse
    deltas = np.diff(np.concatenate([[0.0], amps])).reshape(333, 3) / 20.0
    calls = iter(range(333))

    def replay(obs_batch):
        return np.broadcast_to(deltas[next(calls)], (obs_batch.shape[0], 3))

    got = policy_validation(replay, half_width_mhz=4.0, count=4, seed=1)
    _, offsets = detuning_sample(4.0, count=4, seed=1)
    nominal = rollout_pulse(amps, dt=dt)["JT"]
    stop = int(np.argmin(nominal[2::3]))  # the env's steps end at samples 3, 6, ...
    jt = [rollout_pulse(amps, dt=dt, params=nominal_device()._replace(
        omega_q=nominal_device().omega_q + 1e-3 * o))["JT"][2::3][stop] for o in offsets[1:]]
    assert got["gate_time_ns"] == pytest.approx(dt * 3 * (stop + 1))
    assert got["worst_JT"] == pytest.approx(max(jt), rel=1e-9)
    assert got["median_JT"] == pytest.approx(np.median(jt), rel=1e-9)
    with pytest.raises(ValueError, match="count: expected an integer from 1"):
        policy_validation(replay, count=0)


def test_policy_map_stops_counting_after_truncation():
    def reckless(obs_batch):
        return np.ones((obs_batch.shape[0], 3))  # leaves the bound at step 1 on every device

    result = policy_robustness(reckless, half_width_mhz=1.0, n=3)
    assert np.all(result.jt_at_gate_time == result.jt_best)
    assert result.gate_time == pytest.approx(0.15)


def test_cli_writes_map_summary_and_png_and_never_overwrites(tmp_path, pulse_dir):
    out = tmp_path / "map"
    cmd = [sys.executable, "-m", "quantgate_env.tools.robustness_cli", "--pulse", str(pulse_dir / "RL_pulse.csv"),
           "--range", "4.0", "--n", "3", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "robustness.json").read_text())
    assert summary["gate_time_ns"] == pytest.approx(17.25) and summary["n"] == 3
    assert (out / "robustness.png").stat().st_size > 1000
    with np.load(out / "robustness.npz") as data:
        assert data["jt_at_gate_time"].shape == (9,)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode != 0 and "already holds robustness.npz, robustness.json, robustness.png" in again.stderr


@pytest.mark.parametrize("bad, match", [("lunar", "half_width_mhz: expected a number or one of"), (-1.0, "half_width_mhz: expected a positive")])
def test_bad_ranges(bad, match):
    with pytest.raises(ValueError, match=match):
        detuning_grid(bad)


SHORT_ENV = dict(pulse_length=30, T=1.5)


def _zeros(obs):
    return np.zeros((obs.shape[0], 3))


@pytest.mark.parametrize("case, match", [
    ("nan", r"^act: at step 0, for a \(5, 28\) batch of observations: expected finite actions, got NaN or inf "
            r"for 5 of 5 devices"),
    ("shape", r"^act: at step 0, for a \(5, 28\) batch of observations: expected actions of shape \(5, 3\) .*"
              r"got shape \(3,\)"),
    ("multi", r"^env: expected a single-line quantgate_env.GateEnv .* got MultiGateEnv .*one policy per line"),
    ("string", r"^env: expected a single-line quantgate_env.GateEnv .* got str 'quantgate_env:make' \(a name"),
    ("not callable", r"^act: expected a callable .* got ndarray"),
])
def test_policy_tools_name_the_bad_argument(case, match):
    """Issue 37 row 14: a NaN policy, a (3,)-shaped act, a multi-line env or a string env gave
    numpy's ("All-NaN slice encountered") or jax's (vmap sizes, AttributeError) messages."""
    from quantgate_env import make, make_multi

    act, env = _zeros, make(**SHORT_ENV)
    if case == "nan":
        act = lambda obs: np.full((obs.shape[0], 3), np.nan)  # noqa: E731
    elif case == "shape":
        act = lambda obs: np.zeros(3)  # noqa: E731
    elif case == "multi":
        env = make_multi(**SHORT_ENV)
    elif case == "string":
        env = "quantgate_env:make"
    elif case == "not callable":
        act = np.zeros(3)
    with pytest.raises(ValueError, match=match):
        policy_validation(act, env=env, count=4)
    if case in ("multi", "string", "not callable"):  # the map checks the same arguments
        with pytest.raises(ValueError, match=match):
            policy_robustness(act, env=env, n=1)
