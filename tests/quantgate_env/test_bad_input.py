"""Bad input and faults (issue 12): every case of the probe is a named error raised in Python before
anything compiles, and the settings a user would reasonably run stay accepted."""

import importlib
import re

import gymnasium
import numpy as np
import pytest
import quantgate_env
from quantgate_env import load_pulse_csv, make, make_multi, refine_pulse, rollout_pulse
from quantgate_env.adapters.gymnasium import GateGymEnv, GateVectorEnv
from quantgate_env.pettingzoo import parallel_env
from quantgate_env.physics.propagation import MAX_SUBSTEPS, MAX_THETA, taylor_plan
from quantgate_env.tools.pulses import pulse_plan
from quantgate_env.tools.refine_cli import main as refine_main
from quantgate_env.tools.robustness import MAX_GRID_N, detuning_grid, pulse_robustness
from quantgate_env.tools.robustness_cli import main as robustness_main

SHORT = dict(pulse_length=30, T=1.5)  # 10 steps of 3 samples


def _csv(path, text: str | bytes):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


# ---- 4. the propagation plan is bounded: no unbounded sub-step count reaches the tracer ----------


def test_taylor_plan_refuses_more_than_its_sub_step_bound():
    plan = taylor_plan(MAX_THETA)
    assert plan.substeps <= MAX_SUBSTEPS
    with pytest.raises(ValueError, match=r"theta_max: expected at most 192"):
        taylor_plan(1.01 * MAX_THETA)


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(T=1e6), r"^T=1000000.0, pulse_length=1000: samples of dt = T / pulse_length = 1000 ns .* keep dt <= "),
        (dict(qubit_drift_mhz=1e9), r"^qubit_drift_mhz=1000000000.0: .*lower the drift"),
        (dict(a_scale=1e308), r"^a_scale=1e\+308, a_norm_max=1.0: .*theta = inf .*lower the amplitude"),
        (dict(a_scale=1e5), r"^a_scale=100000.0, a_norm_max=1.0: .*beyond the 192 the exact propagator covers"),
    ],
)
def test_env_settings_beyond_the_propagator_bound_name_the_option(options, match):
    with pytest.raises(ValueError, match=match):
        make(**options)
    with pytest.raises(ValueError, match=match):
        gymnasium.make("quantgate_env:ZCQPEE-v0", **options)


def test_multi_actuator_bound_names_the_qubit_line_option():
    with pytest.raises(ValueError, match=r"q1_amp_bound=100000.0: .*lower the amplitude"):
        make_multi(q1_amp_bound=1e5)
    with pytest.raises(ValueError, match=r"^T=1000000.0, pulse_length=1000: "):
        parallel_env(T=1e6)


def test_the_papers_and_long_settings_stay_accepted():
    assert make().plan.substeps == 1 and make().plan.degree == 24  # the paper's plan is unchanged
    for options in (dict(T=4000.0), dict(T=1000.0, a_scale=100.0), dict(qubit_drift_mhz="fab_targeting"),
                    dict(max_drift=0.5, coupler_drift_mhz=500.0, g_drift_mhz=50.0)):
        assert make(**options).plan.substeps <= MAX_SUBSTEPS
    assert make_multi(T=4000.0).plan.substeps <= MAX_SUBSTEPS
    # a plan at the bound compiles and stays exact: 4.9 ns samples at the full 20 rad/ns
    trace = rollout_pulse(np.full(8, 20.0), dt=4.9)
    assert np.all(np.isfinite(trace["JT"])) and np.all(trace["unitarity"] <= 1 + 1e-9)


def test_pulse_beyond_the_bound_names_dt_or_the_sample(tmp_path):
    amps = np.array([0.0, 1.0, 1e5, 2.0])
    with pytest.raises(ValueError, match=r"^amps\[2\]: 100000.0 rad/ns for dt = 0.05 ns .*expected \|u\| <= "):
        rollout_pulse(amps, dt=0.05)
    with pytest.raises(ValueError, match=r"^dt: samples of 1e\+06 ns have a phase spread .* even at u = 0"):
        rollout_pulse(np.zeros(3), dt=1e6)
    with pytest.raises(ValueError, match=r"^dt: samples of 1e\+06 ns"):
        pulse_robustness(np.zeros(3), dt=1e6, n=3)
    with pytest.raises(ValueError, match=r"^dt: samples of 1e\+06 ns .* at \|u\| <= 20 rad/ns"):
        refine_pulse(np.zeros(3), dt=1e6)
    path = _csv(tmp_path / "big.csv", "tlist,amplist\n0,0\n0.05,1\n0.1,1e5\n0.15,1\n")
    amps, dt = load_pulse_csv(path)
    with pytest.raises(ValueError, match=r"big.csv' line 4 \(amplist\): 100000.0 rad/ns"):
        pulse_plan(amps, dt, [quantgate_env.nominal_device()], csv_path=path)


def test_a_huge_sample_names_its_own_line_value_and_the_real_bound(tmp_path, capsys):
    # Issue 37 row 13: the bisection for the largest |u| ran 60 halvings of [0, peak], which for a
    # peak of 1e30 never got below ~1e12: the error named sample 0's line, its value, and
    # "expected |u| <= 0".
    path = _csv(tmp_path / "huge.csv", "tlist,amplist\n0,0\n0.05,1\n0.1,2\n0.15,1e30\n0.2,1\n")
    amps, dt = load_pulse_csv(path)
    for peak in (1e30, 1e300):
        amps[2] = peak
        with pytest.raises(ValueError, match=rf"huge.csv' line 5 \(amplist\): {re.escape(repr(peak))} rad/ns .*"
                                             rf"expected \|u\| <= 3640 rad/ns at this dt$"):
            pulse_plan(amps, dt, [quantgate_env.nominal_device()], csv_path=path)
    amps[2] = 1e30
    with pytest.raises(ValueError, match=r"^amps\[2\]: 1e\+30 rad/ns .*expected \|u\| <= 3640 rad/ns"):
        rollout_pulse(amps, dt=dt)
    # and the command a user runs: one line naming the flag, the file, the line and the bound
    assert refine_main([str(path), "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err
    assert f"pulse: '{path}' line 5 (amplist): 1e+30 rad/ns" in err
    assert "expected |u| <= 3640 rad/ns" in err


# ---- 8. the command-line tools: one-line errors naming the flag, before anything compiles -------


@pytest.fixture()
def paper_pulse(pulse_dir):
    return str(pulse_dir / "RL_pulse.csv")


def _robustness_error(argv, capsys) -> str:
    assert robustness_main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("quantgate-robustness: error: ")
    return err


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--range", "bogus"], "--range: expected a half-width in MHz or one of"),
        (["--range", "-3"], "--range: expected a positive number"),
        (["--range", "1e9"], "--range: expected less than the lower qubit frequency"),
        (["--n", "0"], f"--n: expected grid points per axis from 1 to {MAX_GRID_N}, got 0"),
        (["--n", "1000000"], "--n: expected grid points per axis from 1 to 101, got 1000000"),
        (["--gate-time", "nan"], "--gate-time: expected a positive time in ns, got nan"),
        (["--env-option", "T=40"], "--env-option: applies to --policy only"),
    ],
)
def test_robustness_cli_rejects_bad_flags_with_one_line(flags, expected, paper_pulse, tmp_path, capsys):
    out = tmp_path / "map"
    err = _robustness_error(["--pulse", paper_pulse, *flags, "--out", str(out)], capsys)
    assert expected in err
    assert not out.exists()


def test_robustness_cli_names_the_pulse_file_and_line(tmp_path, capsys):
    cases = {
        "nan.csv": ("tlist,amplist\n0,0\n0.05,nan\n0.1,1\n", "--pulse: '{}' line 3: expected a finite number in column 'amplist'"),
        "big.csv": ("tlist,amplist\n0,0\n0.05,1e5\n0.1,1\n", "--pulse: '{}' line 3 (amplist): 100000.0 rad/ns"),
        "dt.csv": ("tlist,amplist\n0,0\n1e6,1\n2e6,1\n", "--pulse: '{}' time step (tlist): samples of 1e+06 ns"),
        "bin.csv": (bytes(range(256)), "--pulse: '{}' is not a text CSV file"),
    }
    for name, (text, expected) in cases.items():
        path = _csv(tmp_path / name, text)
        err = _robustness_error(["--pulse", str(path), "--out", str(tmp_path / "map")], capsys)
        assert expected.format(path) in err
    err = _robustness_error(["--pulse", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "map")], capsys)
    assert "--pulse: " in err and "missing.csv" in err


@pytest.mark.parametrize(
    "options, expected",
    [
        (['T="50"'], "--env-option: T: expected a finite real number (int or float), got str '50'"),
        (["bogus=1"], "--env-option: unknown environment option(s) ['bogus']"),
        (["T=1e6"], "--env-option: T=1000000.0, pulse_length=1000: samples of dt"),
    ],
)
def test_robustness_cli_checks_env_options_before_loading_the_policy(options, expected, tmp_path, capsys):
    flags = [x for option in options for x in ("--env-option", option)]
    err = _robustness_error(["--policy", str(tmp_path / "no_such_run"), *flags, "--out", str(tmp_path / "m")], capsys)
    assert expected in err


def _refine_error(argv, capsys) -> str:
    assert refine_main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("quantgate-refine: error: ")
    return err


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--gate-time", "nan"], "--gate-time: expected a positive time in ns, got nan"),
        (["--gate-time", "inf"], "--gate-time: expected a positive time in ns, got inf"),
        (["--iters", "1000000000"], "--iters: expected a number of Adam updates from 0 to 100000"),
        (["--lr", "-1"], "--lr: expected a positive step size"),
    ],
)
def test_refine_cli_rejects_bad_flags_with_one_line(flags, expected, paper_pulse, tmp_path, capsys):
    out = tmp_path / "refined.csv"
    assert expected in _refine_error([paper_pulse, *flags, "--out", str(out)], capsys)
    assert not out.exists()


def test_refine_cli_names_the_pulse_file_and_line(tmp_path, capsys):
    cases = {
        "short.csv": ("tlist,amplist\n0,0\n0.05\n0.1,1\n", "pulse: '{}' line 3: expected a value in column 'amplist'"),
        "over.csv": ("tlist,amplist\n0,0\n0.05,1\n0.1,25\n", "pulse: '{}' line 4 (amplist): expected |u| <= 20 rad/ns"),
        "dt.csv": ("tlist,amplist\n0,0\n1e6,1\n2e6,1\n", "pulse: '{}' time step (tlist): samples of 1e+06 ns"),
        "bin.csv": (b"\x89PNG\r\n\x1a\n\xff\xfe", "pulse: '{}' is not a text CSV file"),
    }
    for name, (text, expected) in cases.items():
        path = _csv(tmp_path / name, text)
        assert expected.format(path) in _refine_error([str(path), "--out", str(tmp_path / "r.csv")], capsys)
    assert not (tmp_path / "r.csv").exists()


# ---- 9. pulse files --------------------------------------------------------------------------


def test_pulse_csv_errors_name_the_file_and_line(tmp_path):
    binary = _csv(tmp_path / "binary.csv", bytes(range(128, 256)))
    with pytest.raises(ValueError, match=r"binary.csv' is not a text CSV file"):
        load_pulse_csv(binary)
    with pytest.raises(ValueError, match=r"short.csv' line 4: expected a value in column 'amplist' \(field 2\), got a row of 1"):
        load_pulse_csv(_csv(tmp_path / "short.csv", "tlist,amplist\n0,0\n0.05,1\n0.1\n"))
    with pytest.raises(ValueError, match=r"gap.csv' line 3: expected a data row, got a blank line"):
        load_pulse_csv(_csv(tmp_path / "gap.csv", "tlist,amplist\n0,0\n\n0.05,1\n0.1,2\n"))
    with pytest.raises(ValueError, match=r"nan.csv' line 4: expected a finite number in column 'tlist', got 'nan'"):
        load_pulse_csv(_csv(tmp_path / "nan.csv", "tlist,amplist\n0,0\n0.05,1\nnan,2\n"))
    with pytest.raises(ValueError, match=r"uneven.csv' has an uneven or decreasing time grid \(first at line 4\)"):
        load_pulse_csv(_csv(tmp_path / "uneven.csv", "tlist,amplist\n0,0\n0.05,1\n0.2,2\n0.25,2\n"))


@pytest.mark.parametrize("tail", ["\n", "\n\n", "\r\n", ",\n", "  \n"])
def test_pulse_csv_trailing_blank_lines_are_ignored(tmp_path, tail):
    path = _csv(tmp_path / "p.csv", "tlist,amplist\n0,0\n0.05,1.5\n0.1,-2.5\n" + tail)
    amps, dt = load_pulse_csv(path)
    np.testing.assert_array_equal(amps, [1.5, -2.5])
    assert dt == pytest.approx(0.05)


def test_pulse_csv_with_a_byte_order_mark_reads(tmp_path):
    path = _csv(tmp_path / "bom.csv", "\ufefftlist,amplist\n0,0\n0.05,1.5\n0.1,-2.5\n".encode("utf-8"))
    np.testing.assert_array_equal(load_pulse_csv(path)[0], [1.5, -2.5])


# ---- 10. stepping a finished Gymnasium episode ---------------------------------------------------


def test_gym_step_after_truncation_or_termination_raises_until_reset():
    env = GateGymEnv(**SHORT)
    env.reset(seed=0)
    *_, truncated, _ = env.step(np.ones(3))  # 20, 40, 60 rad/ns: out of bounds at once
    assert truncated
    with pytest.raises(RuntimeError, match="after the episode ended .* call reset"):
        env.step(np.zeros(3))
    env.reset()
    for _ in range(10):
        _, _, terminated, truncated, _ = env.step(np.zeros(3))
    assert terminated and not truncated  # 10 steps of 3 samples end the 30-sample pulse
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(np.zeros(3))
    wrapped = gymnasium.make("quantgate_env:ZCQPEE-v0", **SHORT)  # through Gymnasium's wrappers
    wrapped.reset(seed=0)
    wrapped.step(np.ones(3))
    with pytest.raises(RuntimeError, match="after the episode ended"):
        wrapped.step(np.zeros(3))
    env.reset()
    assert env.step(np.zeros(3))[0].shape == (28,)


def test_vector_env_keeps_auto_resetting_after_an_episode_ends():
    venv = GateVectorEnv(num_envs=2, **SHORT)
    venv.reset(seed=0)
    _, _, _, truncated, _ = venv.step(np.ones((2, 3)))
    assert truncated.all()
    obs, reward, terminated, truncated, _ = venv.step(np.zeros((2, 3)))  # the reset step
    assert np.all(reward == 0) and not terminated.any() and not truncated.any()
    assert np.all(obs[:, -1] == pytest.approx(-0.9))
    obs, reward, *_ = venv.step(np.zeros((2, 3)))  # and the new episode runs
    assert np.all(reward > 0)


# ---- 11. no coercion of strings, bools or complex numbers ----------------------------------------


@pytest.mark.parametrize(
    "options, expected",
    [
        (dict(T="50"), "T: expected a finite real number (int or float), got str '50'"),
        (dict(T=True), "T: expected a finite real number (int or float), got bool True"),
        (dict(T=np.True_), "T: expected a finite real number (int or float), got bool"),
        (dict(a_scale=20 + 0j), "a_scale: expected a finite real number (int or float), got complex (20+0j)"),
        (dict(oob_penalty=np.complex128(1.0)), "oob_penalty: expected a finite real number (int or float), got complex128"),
        (dict(obs_scale=1e300), "obs_scale: expected a number in [1.18e-38, 3.4e+38] (observations are float32"),
        (dict(obs_scale=1e-300), "obs_scale: expected a number in [1.18e-38, 3.4e+38]"),
    ],
)
def test_env_options_are_not_coerced(options, expected):
    for factory in (make, make_multi, parallel_env, lambda **o: gymnasium.make("quantgate_env:ZCQPEE-v0", **o)):
        with pytest.raises(ValueError) as info:
            factory(**options)
        assert expected in str(info.value)


def test_qubit_line_bound_is_not_coerced_and_numpy_numbers_are_accepted():
    with pytest.raises(ValueError, match=r"q0_amp_bound: expected a finite real number \(int or float\), got str"):
        make_multi(q0_amp_bound="1.0")
    env = make(T=np.float64(50), a_scale=np.int64(20), obs_scale=np.float32(0.9))
    assert env.config == make().config.__class__(T=50.0, a_scale=20.0, obs_scale=float(np.float32(0.9)))


@pytest.mark.parametrize(
    "action",
    [["0.1", "0", "0"], np.array([True, False, True]), np.array([0.1 + 1j, 0, 0]), [0.1, None, 0.0]],
)
def test_actions_are_not_coerced(action):
    env = GateGymEnv(**SHORT)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action: expected an array of real numbers"):
        env.step(action)
    venv = GateVectorEnv(num_envs=1, **SHORT)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="actions: expected an array of real numbers"):
        venv.step([action])
    penv = parallel_env(**SHORT)
    penv.reset(seed=0)
    actions = {agent: np.zeros(3) for agent in penv.agents}
    with pytest.raises(ValueError, match=r"actions\['coupler'\]: expected an array of real numbers"):
        penv.step(dict(actions, coupler=action))
    assert penv.last_executed_actions == {}
    env.step(np.zeros(3, dtype=np.int64))  # integer actions are numbers


def test_detuning_grid_is_capped():
    with pytest.raises(ValueError, match=r"n: expected an integer from 1 to 101 \(grid points per axis\), got 102"):
        detuning_grid(5.7, n=MAX_GRID_N + 1)
    with pytest.raises(ValueError, match=r"half_width_mhz: expected less than the lower qubit frequency, 5031.1 MHz"):
        detuning_grid(6000.0, n=3)


# ---- 12. reset options (issue 25 row 5) -----------------------------------------------------------


@pytest.mark.parametrize("options, match", [
    ({"bogus": 1}, r"options: expected None or a dict with no keys .*got unknown key\(s\) \['bogus'\]"),
    (5, r"options: expected None or a dict with no keys .*got int 5"),
    ("drift", r"options: expected None or a dict .*got str 'drift'"),
])
def test_reset_options_that_would_be_ignored_are_refused(options, match):
    # Before, the Gymnasium adapters accepted them silently.
    env = GateGymEnv(**SHORT)
    with pytest.raises(ValueError, match=match):
        env.reset(seed=0, options=options)
    wrapped = gymnasium.make("quantgate_env:ZCQPEE-v0", **SHORT)  # through Gymnasium's wrappers
    with pytest.raises(ValueError, match=match):
        wrapped.reset(seed=0, options=options)
    with pytest.raises(ValueError, match=match):
        GateVectorEnv(num_envs=1, **SHORT).reset(seed=0, options=options)
    # PettingZoo's own parallel_api_test resets with options={"options": 1} and requires that to
    # work, so the PettingZoo env keeps ignoring them (test_pettingzoo runs that API test).
    # None and {} (what gymnasium's check_env passes) still reset
    assert env.reset(seed=0, options={})[0].shape == (28,)
    assert env.reset(options=None)[0].shape == (28,)


# ---- 13. a large file that is not a pulse file: bounded memory (issue 25 row 8) --------------------


def test_pulse_csv_refuses_a_long_line_without_holding_it(tmp_path):
    import tracemalloc

    # 2 MB on one line (the case was 200 MB: it peaked at 574 MB, the line held whole
    # and split into fields). Reading line by line with a cap holds at most one capped line.
    path = tmp_path / "one_line.txt"
    path.write_text("tlist,amplist\n" + "0.05," * 400_000 + "\n")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"one_line.txt' line 2 is longer than \d+ characters; expected a pulse CSV"):
            load_pulse_csv(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 500_000, peak  # the line is 2 MB; before, the peak was several times that


def test_pulse_csv_keeps_numbers_not_rows_of_strings(tmp_path):
    import tracemalloc

    # A long legitimate pulse: 100000 samples. The rows are parsed as they are read, so memory is
    # the numbers (two float64 and a line number per row), not the strings of every row.
    n = 100_000
    path = tmp_path / "long.csv"
    path.write_text("tlist,amplist\n" + "".join(f"{0.05 * i:.6f},{np.sin(i) * 3:.9f}\n" for i in range(n + 1)))
    tracemalloc.start()
    try:
        amps, dt = load_pulse_csv(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert amps.shape == (n,) and dt == pytest.approx(0.05)
    assert peak < 64 * n, peak  # rows of strings and Python floats took ~250 bytes per row


# ---- 14. what the README says a user needs: check_env, and a NaN action inside jit (rows 6, 7) -----

README = (__import__("pathlib").Path(quantgate_env.__file__).resolve().parents[2] / "README.md")
CHECK_ENV_CALL = 'check_env(gymnasium.make("quantgate_env:ZCQPEE-v0", oob_mode="clip").unwrapped)'
NAN_CHECK = "bad = ~jnp.isfinite(reward) | ~jnp.all(jnp.isfinite(obs), axis=-1)"


def test_gymnasiums_check_env_passes_with_the_documented_arguments():
    import warnings

    from gymnasium.utils.env_checker import check_env

    assert CHECK_ENV_CALL in README.read_text()  # where a user looks (the package README)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "passes" means no warning either
        exec(CHECK_ENV_CALL, {"check_env": check_env, "gymnasium": gymnasium})


def test_a_nan_action_inside_jit_is_detected_as_the_readme_says():
    import jax
    import jax.numpy as jnp

    from quantgate_env import gymnax as qg

    assert NAN_CHECK in README.read_text()

    def detect(obs, reward):
        scope = {"jnp": jnp, "obs": obs, "reward": reward}
        exec(NAN_CHECK, scope)
        return np.asarray(scope["bad"])

    with jax.enable_x64(True):
        core = make(**SHORT)
        step = jax.jit(core.step)
        obs, state = core.reset(jax.random.PRNGKey(0), core.default_params)
        key, flags = jax.random.PRNGKey(1), []
        for i in range(10):  # the whole 10-step pulse, a NaN action at step 3
            action = jnp.full((3,), jnp.nan if i == 2 else 0.0)
            obs, state, reward, terminated, truncated, info = step(key, state, action, core.default_params)
            flags.append((bool(detect(obs, reward)), bool(terminated), bool(truncated), bool(info["oob"])))
        # finite before, flagged from the NaN action on; never truncated or out of bounds; ends at the pulse end
        assert [f[0] for f in flags] == [False] * 2 + [True] * 8
        assert not any(f[2] or f[3] for f in flags) and [f[1] for f in flags] == [False] * 9 + [True]

        env = qg.make(**SHORT)  # gymnax: the same check works batched and in an auto-resetting step
        params = env.default_params
        keys = jax.random.split(jax.random.PRNGKey(2), 2)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        actions = jnp.array([[0.0, 0.0, 0.0], [0.0, jnp.nan, 0.0]])
        obs, state, reward, terminated, truncated, info = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(
            keys, state, actions, params)
        assert detect(obs, reward).tolist() == [False, True]
        assert not np.asarray(terminated | truncated).any()



# ---- typed boundaries: a config, environment or state of the wrong type is named, in Python --------


def _module(name: str):
    """quantgate_env.<name>, imported by the case that needs it (the adapters are optional)."""
    return importlib.import_module(f"quantgate_env.{name}")


def _gymnax_step_on(state):
    env = _module("gymnax").make(**SHORT)
    action = np.zeros(env.action_space(env.default_params).shape, np.float32)
    return env.step_env(None, state, action, env.default_params)


def _marl_step_on(state):
    return _module("jaxmarl").GateMARLEnv(make_multi(**SHORT)).step_env(None, state, {})


TYPED_BOUNDARIES = {
    "GateEnv config": (lambda: quantgate_env.GateEnv(config=quantgate_env.MultiGateConfig()),
                       "config: expected quantgate_env.EnvConfig, got MultiGateConfig"),
    "MultiGateEnv config": (lambda: quantgate_env.MultiGateEnv(config=quantgate_env.EnvConfig()),
                            "config: expected quantgate_env.MultiGateConfig, got EnvConfig"),
    "GateCore config": (lambda: _module("mdp.core").GateCore(config=quantgate_env.EnvConfig()),
                        "config: expected quantgate_env.MultiGateConfig, got EnvConfig"),
    "MultiGateConfig env": (lambda: quantgate_env.MultiGateConfig(env={"T": 5.0}),
                            "env: expected quantgate_env.EnvConfig, got dict"),
    "gymnax single-line core": (lambda: _module("gymnax").GateGymnaxEnv(core=make_multi(**SHORT)),
                                "core: expected quantgate_env.GateEnv (quantgate_env.make(...)), got MultiGateEnv"),
    "gymnax multi-line core": (lambda: _module("gymnax").MultiLineGymnaxEnv(core=make(**SHORT)),
                               "core: expected quantgate_env.MultiGateEnv (quantgate_env.make_multi(...)), got GateEnv"),
    "gymnax legacy view": (lambda: _module("gymnax").LegacyStepView(make(**SHORT)),
                           "env: expected a quantgate_env.gymnax environment (quantgate_env.gymnax.make(...)), got GateEnv"),
    "JaxMARL core": (lambda: _module("jaxmarl").GateMARLEnv(make(**SHORT)),
                     "core: expected quantgate_env.MultiGateEnv (quantgate_env.make_multi(...)), got GateEnv"),
    "JaxMARL params": (lambda: _module("jaxmarl").GateMARLEnv(make_multi(**SHORT), params=make(**SHORT).default_params.device),
                       "params: expected quantgate_env.EnvParams (e.g. core.default_params), got DeviceParams"),
    "gymnax state": (lambda: _gymnax_step_on({"t": 0}),
                     "state: expected quantgate_env.gymnax.GymnaxState (from env.reset), got dict"),
    "JaxMARL state": (lambda: _marl_step_on({"t": 0}),
                      "state: expected quantgate_env.jaxmarl.GateMARLState (from env.reset), got dict"),
}


@pytest.mark.parametrize("boundary", list(TYPED_BOUNDARIES))
def test_a_wrong_type_at_a_typed_boundary_is_named_with_what_was_expected(boundary):
    build, message = TYPED_BOUNDARIES[boundary]
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        build()
