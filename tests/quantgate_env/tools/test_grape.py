"""GRAPE refinement of a fixed pulse (quantgate_env.tools.grape) and the quantgate-refine command.

The refinement of the paper's RL pulse is compiled and run once (module fixture) and reused.
"""

import importlib.metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quantgate_env import RefineResult, load_pulse_csv, nominal_device, refine_pulse, rollout_pulse, save_pulse_csv
from quantgate_env.physics.propagation import taylor_plan, theta_bound
from quantgate_env.tools.grape import AMP_BOUND, _log_cost_and_grad
from quantgate_env.tools.pulses import PLAN_MARGIN
from quantgate_env.tools.refine_cli import main as refine_main

from .. import reference_model

GATE_SAMPLES = 345  # 17.25 ns, the paper pulse's best time


@pytest.fixture(scope="module")
def rl_gate(pulse_dir):
    amps, dt = load_pulse_csv(pulse_dir / "RL_pulse.csv")
    return amps[:GATE_SAMPLES], dt


@pytest.fixture(scope="module")
def refined(rl_gate):
    amps, dt = rl_gate
    before = jax.config.read("jax_enable_x64")
    result = refine_pulse(amps, dt=dt, n_iter=200, lr=3e-4)
    assert jax.config.read("jax_enable_x64") == before  # float64 is scoped, never switched globally
    return result


def test_gradient_matches_central_differences():
    """d log10 J_T / d u_37 of a random 120-sample pulse against central differences (step 1e-6)."""
    amps = np.random.default_rng(7).uniform(-15.0, 15.0, size=120)
    device = nominal_device()
    plan = taylor_plan(PLAN_MARGIN * theta_bound(device, AMP_BOUND, 0.05))
    k, h = 37, 1e-6

    def value_and_grad(a):
        (loss, jt), grad = _log_cost_and_grad(jnp.asarray(a), device, dt=0.05, plan=plan, objective="pe")
        return float(loss), float(jt), np.asarray(grad)

    with jax.enable_x64(True):
        _, jt, grad = value_and_grad(amps)
        up, down = amps.copy(), amps.copy()
        up[k] += h
        down[k] -= h
        fd = (value_and_grad(up)[0] - value_and_grad(down)[0]) / (2 * h)
    # a random pulse is no perfect entangler (C < 1), so the gradient runs through the
    # unrounded Weyl coordinates and the concurrence, not only the unitarity
    assert jt > 0.01
    assert grad.dtype == np.float64
    assert abs(grad[k] - fd) <= 1e-6 * max(1.0, abs(fd)), (grad[k], fd)


def test_refines_the_paper_pulse(rl_gate, refined):
    amps, dt = rl_gate
    assert isinstance(refined, RefineResult)
    assert refined.JT_initial == pytest.approx(9.4857e-5, rel=1e-4)
    # measured 3.26e-9 (the reference: 7e-9 with lr 3e-4 in 200 iterations)
    assert refined.JT_best < 2e-8
    assert refined.iterations == 200
    assert refined.amps.shape == (GATE_SAMPLES,) and refined.amps.dtype == np.float64
    assert np.all(np.abs(refined.amps) <= AMP_BOUND)
    history = refined.JT_history
    assert history.shape == (201,) and history[0] == refined.JT_initial
    # the returned iterate is the best of the history
    assert refined.JT_best == history.min() == history[refined.best_iteration]
    assert np.minimum.accumulate(history)[-1] == refined.JT_best
    # the returned amplitudes realise JT_best (the environment's metrics, rounded coordinates)
    assert rollout_pulse(refined.amps, dt=dt)["JT"][-1] == pytest.approx(refined.JT_best, rel=1e-9)


def test_refined_pulse_checked_by_the_dense_reference(rl_gate, refined):
    """J_T of the refined pulse from the independent 27x27 expm model and weylchamber.

    At J_T ~ 3e-9 the cost is 1 - (C + 3U)/4 with U = 1 - 4e-9, so the ~1e-14 rounding of either
    propagator over 345 samples shows in J_T: measured |difference| 5.4e-15 = 1.7e-6 relative.
    1e-9 relative is out of reach at this J_T in float64; the absolute agreement is the test.
    """
    _, dt = rl_gate
    gate = reference_model.realised_gate(reference_model.propagator(refined.amps, dt))
    jt, conc, _ = reference_model.pe_metrics(gate)
    assert conc == 1.0
    assert abs(jt - refined.JT_best) < 2e-14, (jt, refined.JT_best)
    # and the starting pulse, as a check of the reference itself
    start = reference_model.realised_gate(reference_model.propagator(rl_gate[0], dt))
    assert reference_model.pe_metrics(start)[0] == pytest.approx(refined.JT_initial, rel=1e-9)


def test_zero_iterations_only_evaluates(rl_gate, refined):
    amps, dt = rl_gate
    result = refine_pulse(amps, dt=dt, n_iter=0)
    assert result.JT_history.shape == (1,) and result.iterations == 0
    assert result.JT_best == result.JT_initial == refined.JT_initial
    np.testing.assert_allclose(result.amps, amps, rtol=0, atol=1e-12)


def test_one_compiled_step_per_pulse_length():
    """The start's state has the dtypes the step returns, so the step compiles once, not twice
    (a weak-typed start once compiled the whole GRAPE program again on its second iteration)."""
    from quantgate_env.tools.grape import _adam_step

    # a sample duration no other test uses (dt is static), so no earlier test compiled this program
    dt = 0.037
    before = _adam_step._cache_size()
    first = refine_pulse(np.full(7, 3.0), dt=dt, n_iter=2)
    assert _adam_step._cache_size() == before + 1
    again = refine_pulse(np.full(7, -2.0), dt=dt, n_iter=3)  # other values: no new program
    assert _adam_step._cache_size() == before + 1
    assert first.JT_history.shape == (3,) and again.JT_history.shape == (4,)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(amps=np.zeros((2, 3))), r"amps: expected a 1-D array, got shape \(2, 3\)"),
        (dict(amps=[]), r"amps: expected at least one sample"),
        (dict(amps=[0.0, np.nan]), r"amps: expected finite values, got nan at index 1"),
        (dict(amps=[1.0, -20.5]), r"amps: expected \|u\| <= 20 rad/ns .*got -20.5 at index 1"),
        (dict(amps=[1.0], n_iter=-1), r"n_iter: expected a non-negative integer, got -1"),
        (dict(amps=[1.0], n_iter=2.5), r"n_iter: expected a non-negative integer, got 2.5"),
        (dict(amps=[1.0], lr=0.0), r"lr: expected a positive number, got 0.0"),
        (dict(amps=[1.0], lr=-1e-3), r"lr: expected a positive number"),
        (dict(amps=[1.0], dt=-0.05), r"dt: expected a positive number"),
        (dict(amps=[1.0], objective="cnot"), r"objective: expected one of \('pe', 'sqrt_iswap'\), got 'cnot'"),
        (dict(amps=[1.0], params={"omega_q": 5.0}), r"params: expected quantgate_env.DeviceParams"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    amps = kwargs.pop("amps")
    with pytest.raises(ValueError, match=match):
        refine_pulse(amps, **kwargs)


def test_pulse_csv_round_trip(tmp_path, rl_gate):
    amps, dt = rl_gate
    path = tmp_path / "p.csv"
    save_pulse_csv(path, amps, dt)
    assert path.read_text().splitlines()[:2] == [",amplist,tlist", "0,0.0,0.0"]
    again, dt_again = load_pulse_csv(path)
    np.testing.assert_array_equal(again, amps)
    assert dt_again == dt
    with pytest.raises(FileExistsError):
        save_pulse_csv(path, amps, dt)


def test_cli_refines_writes_and_refuses_to_overwrite(tmp_path, pulse_dir, capsys):
    assert importlib.metadata.entry_points(group="console_scripts", name="quantgate-refine")
    amps, dt = load_pulse_csv(pulse_dir / "RL_pulse.csv")
    source = tmp_path / "rl_360.csv"
    save_pulse_csv(source, amps[:360], dt)  # the best time (17.25 ns) lies inside
    out = tmp_path / "refined.csv"
    assert refine_main([str(source), "--iters", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "gate time 17.25 ns (345 samples" in printed
    assert "J_T before 9.4857e-05" in printed and "after " in printed
    written, dt_written = load_pulse_csv(out)
    assert written.shape == (GATE_SAMPLES,) and dt_written == dt
    after = float(printed.split("after ")[1].split()[0])
    assert after < 9.4857e-5
    assert rollout_pulse(written, dt=dt)["JT"][-1] == pytest.approx(after, rel=1e-3)

    before = out.read_bytes()
    assert refine_main([str(source), "--gate-time", "17.25", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "already exists" in err
    assert out.read_bytes() == before

    assert refine_main([str(source), "--gate-time", "17.26", "--out", str(tmp_path / "x.csv")]) == 2
    assert "--gate-time: expected a multiple" in capsys.readouterr().err
    assert refine_main([str(source), "--iters", "-1", "--out", str(tmp_path / "x.csv")]) == 2
    assert "--iters: expected a number of Adam updates from 0" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
