"""The functional multi-actuator core: line physics, equivalence with the single-agent env, sound
masks, costs on hand-built cases, batching, and configuration errors."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import quantgate_env
import scipy.linalg
from quantgate_env import QUBIT_AMP_BOUND, MultiGateConfig, make_multi
from quantgate_env.physics.device import nominal_device
from quantgate_env.physics.hamiltonian import (
    SECTOR1_CONTROL,
    SECTOR2_CONTROL,
    full_drift_hamiltonian,
    line_diagonals,
    sector_drift,
)
from quantgate_env.physics.propagation import (
    _gershgorin,
    initial_sector_state,
    propagate_samples_lines,
    taylor_plan,
    theta_bound,
    theta_bound_lines,
)

from ..marl_shared import CLIP, CONTINUOUS, DISCRETE, SHORT, core_functions

KEY = jax.random.PRNGKey(0)


@pytest.fixture(scope="module", autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


# ---- physics of the lines ---------------------------------------------------------------------


def test_line_diagonals_are_the_occupations_of_each_mode():
    assert np.array_equal(line_diagonals("coupler")[0], SECTOR1_CONTROL)
    assert np.array_equal(line_diagonals("coupler")[1], SECTOR2_CONTROL)
    # N=1: |001>, |010>, |100>; N=2: |002>, |011>, |020>, |101>, |110>, |200>
    assert np.array_equal(line_diagonals("q0")[0], [0, 0, 1])
    assert np.array_equal(line_diagonals("q0")[1], [0, 0, 0, 1, 1, 2])
    assert np.array_equal(line_diagonals("q1")[0], [0, 1, 0])
    assert np.array_equal(line_diagonals("q1")[1], [0, 1, 2, 0, 1, 0])
    with pytest.raises(ValueError, match="line: expected one of"):
        line_diagonals("q2")


def _number_operator(mode):
    n = np.diag([0.0, 1.0, 2.0])
    factors = [np.eye(3)] * 3
    factors[mode] = n
    return np.kron(np.kron(factors[0], factors[1]), factors[2])


@pytest.mark.parametrize("dt", [0.05, 0.5], ids=["paper-dt", "long-samples"])
def test_multi_line_propagation_matches_dense_expm(dt):
    """Exact against a dense 27x27 expm of H = drift + sum_line u_line n_line (independent ops);
    0.5 ns samples (theta ~ 19) need sub-steps, else the series loses ~1e-12..1e-7 to rounding."""
    device = nominal_device()
    bounds = (20.0, QUBIT_AMP_BOUND, QUBIT_AMP_BOUND)
    names = ("coupler", "q0", "q1")
    amps = np.random.default_rng(3).uniform(-1, 1, (12, 3)) * np.array(bounds)
    diags = (np.stack([line_diagonals(n)[0] for n in names]), np.stack([line_diagonals(n)[1] for n in names]))
    plan = taylor_plan(1.02 * theta_bound_lines(device, [(*line_diagonals(n), b) for n, b in zip(names, bounds)], dt))
    final, _ = propagate_samples_lines(initial_sector_state(), sector_drift(device), jnp.asarray(amps), diags, dt, plan)

    drift = np.asarray(full_drift_hamiltonian(device))
    ops = [_number_operator(m) for m in (2, 0, 1)]  # coupler, q0, q1
    u_full = np.eye(27, dtype=complex)
    for row in amps:
        u_full = scipy.linalg.expm(-1j * (drift + sum(a * op for a, op in zip(row, ops))) * dt) @ u_full
    np.testing.assert_allclose(np.asarray(final.psi1[:, 0]), u_full[[1, 3, 9], 3], atol=1e-12)  # image of |010>
    np.testing.assert_allclose(np.asarray(final.psi1[:, 1]), u_full[[1, 3, 9], 9], atol=1e-12)  # image of |100>
    np.testing.assert_allclose(np.asarray(final.psi2), u_full[[2, 4, 6, 10, 12, 18], 12], atol=1e-12)
    assert abs(u_full[0, 0] - 1) < 1e-14  # |000> has no excitation: untouched by any line


def test_theta_bound_lines_covers_the_whole_box():
    device, dt = nominal_device(), 0.05
    coupler = (*line_diagonals("coupler"), 20.0)
    assert theta_bound_lines(device, [coupler], dt) == theta_bound(device, 20.0, dt)
    lines = [coupler, (*line_diagonals("q0"), 2.0), (*line_diagonals("q1"), 3.0)]
    bound = theta_bound_lines(device, lines, dt)
    assert bound > theta_bound(device, 20.0, dt)
    drift = sector_drift(device)
    for u in np.random.default_rng(0).uniform(-1, 1, (300, 3)) * np.array([20.0, 2.0, 3.0]):
        for block, h in enumerate((drift.h1, drift.h2)):
            shift = sum(a * line[block] for a, line in zip(u, lines))
            _, half_width = _gershgorin(np.asarray(h) + np.diag(shift))
            assert half_width * dt <= bound + 1e-12


# ---- equivalence with the single-agent environment ---------------------------------------------


@pytest.mark.parametrize("options", [CONTINUOUS, CLIP], ids=["terminate", "clip"])
def test_coupler_only_is_the_single_agent_env(options):
    single = quantgate_env.make(**options)
    multi, reset, step, _ = core_functions(actuators=("coupler",), **options)
    s_reset, s_step = jax.jit(single.reset), jax.jit(single.step)
    params = single.default_params
    for seed, scale in ((0, 0.3), (1, 1.0)):
        actions = np.random.default_rng(seed).uniform(-scale, scale, (single.max_episode_steps, 3))
        obs1, state1 = s_reset(KEY, params)
        obs2, state2, _ = reset(KEY, params)
        np.testing.assert_array_equal(np.asarray(obs1), np.asarray(obs2["coupler"]))
        for action in actions:
            obs1, state1, r1, term1, trunc1, info1 = s_step(KEY, state1, action, params)
            obs2, state2, r2, term2, trunc2, info2 = step(KEY, state2, {"coupler": action}, params)
            np.testing.assert_allclose(np.asarray(obs2["coupler"]), np.asarray(obs1), rtol=0, atol=1e-12)
            assert abs(float(r2["coupler"]) - float(r1)) <= 1e-12
            assert (bool(term2["coupler"]), bool(trunc2["coupler"])) == (bool(term1), bool(trunc1))
            for key in ("JT", "unitarity", "tv_penalty", "oob", "amps"):
                np.testing.assert_allclose(np.asarray(info2["coupler"][key], float), np.asarray(info1[key], float), rtol=0, atol=1e-12)
            if term1 or trunc1:
                break
        if options is CONTINUOUS and seed == 1:
            assert bool(trunc1), "the large actions were meant to leave the bound"


# ---- discrete masks ----------------------------------------------------------------------------


def _state_with_amps(state, last_amps):
    amps = np.zeros(state.amps.shape)
    amps[:, -1] = last_amps
    return state._replace(amps=jnp.asarray(amps))


def test_masks_never_allow_an_out_of_bounds_move():
    core, reset, step, masks_fn = core_functions(**DISCRETE)
    bounds = np.array([core.config.bound(a) for a in core.agents])
    n, k = core.config.n_levels, core.config.env.n_time_steps
    all_combos = np.array(list(itertools.product(range(n), repeat=k)))  # (n^K, K)
    _, state0, _ = reset(KEY, core.default_params)
    batched_step = jax.jit(jax.vmap(step, in_axes=(None, None, 0, None)))
    rng = np.random.default_rng(0)
    starts = [np.zeros(3), bounds, -bounds, 0.999 * bounds, -0.55 * bounds] + [rng.uniform(-1, 1, 3) * bounds for _ in range(3)]
    for start in starts:
        state = _state_with_amps(state0, start)
        masks = {a: np.asarray(m) for a, m in masks_fn(state).items()}
        actions = {}
        for agent in core.agents:
            m = masks[agent]
            assert m[:, n // 2].all(), "hold (level 0) must always be allowed"
            allowed = all_combos[np.all(m[np.arange(k), all_combos], axis=1)]
            actions[agent] = allowed[np.arange(len(all_combos)) % len(allowed)]  # pad by cycling
        out = batched_step(KEY, state, actions, core.default_params)
        for agent in core.agents:
            info = out[5][agent]
            assert np.all(np.asarray(info["excess"]) == 0.0), (start, agent)
            assert not np.any(np.asarray(info["masked_action"]))
        assert not np.any(np.asarray(out[4][core.agents[0]]))  # never truncated
        # ... and the masks are not vacuous: every level outside them does leave the bound from
        # the worst allowed history (here: the first sample, where the history is fixed)
        for i, agent in enumerate(core.agents):
            first = masks[agent][0]
            u = start[i] + core.config.levels * core.config.delta(agent)
            assert np.array_equal(first, np.abs(u) <= bounds[i])


def test_masked_action_is_played_as_proposed_and_flagged():
    core, reset, step, masks_fn = core_functions(**DISCRETE)
    _, state, _ = reset(KEY, core.default_params)
    state = _state_with_amps(state, [20.0, 0.0, 0.0])  # coupler at its bound
    top = core.config.n_levels - 1
    actions = {"coupler": np.array([top, 2, 2]), "q0": np.array([2, 2, 2]), "q1": np.array([2, 2, 2])}
    assert not np.asarray(masks_fn(state)["coupler"])[0, top]
    out = step(KEY, state, actions, core.default_params)
    info = out[5]
    assert bool(info["coupler"]["masked_action"]) and not bool(info["q0"]["masked_action"])
    assert float(info["coupler"]["excess"]) == pytest.approx(3 * 8.0 / 20.0)  # 28/20 - 1, three samples
    assert bool(out[4]["q1"])  # terminate mode: every agent is truncated together


# ---- costs and reward on hand-built cases ------------------------------------------------------


def test_cost_is_own_excess_plus_shared_leakage_increase():
    core, reset, step, _ = core_functions(**CLIP)
    params = core.default_params
    _, state, infos = reset(KEY, params)
    assert all(float(infos[a]["cost"]) == 0.0 for a in core.agents)
    # q0 all ones from reset: u = B, 2B, 3B -> clipped at B, excess 0 + 1 + 2 = 3 (spec 4.2 example)
    ones, zeros = np.ones(3), np.zeros(3)
    obs, state, rewards, term, trunc, infos = step(KEY, state, {"coupler": zeros, "q0": ones, "q1": zeros}, params)
    leak = 1.0 - float(infos["q0"]["unitarity"])  # leakage before the step was 0 (identity)
    assert leak > 0
    assert float(infos["q0"]["excess"]) == pytest.approx(3.0, abs=1e-12)
    assert float(infos["q0"]["cost"]) == pytest.approx(3.0 + leak, abs=1e-12)
    for agent in ("coupler", "q1"):
        assert float(infos[agent]["excess"]) == 0.0
        assert float(infos[agent]["cost"]) == pytest.approx(leak, abs=1e-15)
    np.testing.assert_allclose(np.asarray(infos["q0"]["amps"]), [QUBIT_AMP_BOUND] * 3)
    # team reward: the single-agent formula with the excess and TV summed over lines (log_lim = 0)
    expected = -np.log10(float(infos["q0"]["JT"])) - float(infos["q0"]["tv_penalty"]) - 3.0
    assert len({float(r) for r in rewards.values()}) == 1
    assert float(rewards["q1"]) == pytest.approx(expected, abs=1e-12)
    assert not bool(trunc["q0"])  # clip mode continues

    # over an episode the leakage part telescopes: sum of costs = sum of excess + final leakage
    rng = np.random.default_rng(5)
    totals = dict.fromkeys(core.agents, 0.0)
    excess = dict.fromkeys(core.agents, 0.0)
    _, state, _ = reset(KEY, params)
    for _ in range(core.max_episode_steps):
        actions = {a: rng.uniform(-1, 1, 3) for a in core.agents}
        _, state, _, term, _, infos = step(KEY, state, actions, params)
        for a in core.agents:
            totals[a] += float(infos[a]["cost"])
            excess[a] += float(infos[a]["excess"])
    assert bool(term["coupler"])
    final_leak = 1.0 - float(infos["coupler"]["unitarity"])
    assert max(excess.values()) > 0
    for a in core.agents:
        assert totals[a] == pytest.approx(excess[a] + final_leak, abs=1e-10)


def test_terminate_mode_truncates_everyone_with_the_penalty():
    core, reset, step, _ = core_functions(**CONTINUOUS)
    params = core.default_params
    _, state, _ = reset(KEY, params)
    zeros, full = np.zeros(3), np.array([1.0, 0.0, 0.0])
    # a full action from 0 lands exactly on each bound: in bounds (|u| <= B is allowed)
    _, state, _, _, trunc, infos = step(KEY, state, {"coupler": full, "q0": full, "q1": -full}, params)
    assert not any(bool(t) for t in trunc.values())
    assert [float(infos[a]["amps"][-1]) for a in core.agents] == [20.0, QUBIT_AMP_BOUND, -QUBIT_AMP_BOUND]
    assert all(float(infos[a]["excess"]) == 0.0 for a in core.agents)
    _, state, _ = reset(KEY, params)
    _, state, _, _, trunc, _ = step(KEY, state, {"coupler": zeros, "q0": zeros, "q1": zeros}, params)
    assert not any(bool(t) for t in trunc.values())
    _, state, rewards, _, trunc, infos = step(KEY, state, {"coupler": zeros, "q0": zeros, "q1": np.full(3, -1.0)}, params)
    assert all(bool(t) for t in trunc.values())
    assert all(bool(infos[a]["oob"]) for a in core.agents)
    # penalty -20 (1 - t_start / T) with t_start = 3 samples of 30
    assert all(float(r) == pytest.approx(-20.0 * (1 - 3 / 30)) for r in rewards.values())
    assert float(infos["q1"]["excess"]) == pytest.approx(3.0) and float(infos["q0"]["excess"]) == 0.0


def test_observation_is_shared_gate_features_plus_own_line():
    core, reset, step, _ = core_functions(**CONTINUOUS)
    params = core.default_params
    _, state, _ = reset(KEY, params)
    actions = {"coupler": np.array([0.1, 0.2, 0.3]), "q0": np.array([0.5, 0.0, -0.25]), "q1": np.array([-0.4, 0.0, 0.0])}
    obs, state, *_ = step(KEY, state, actions, params)
    scale = core.config.env.obs_scale
    for agent in core.agents:
        expected_u = np.cumsum(actions[agent])  # deltas are in units of the line's bound here
        np.testing.assert_allclose(np.asarray(obs[agent][24:27]), scale * expected_u, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(obs[agent][:24]), np.asarray(obs["coupler"][:24]))
        assert np.asarray(obs[agent]).shape == core.observation_space(agent).shape
    assert float(obs["q0"][-1]) == float(obs["coupler"][-1]) == -scale  # time before the advance


# ---- batching: vmap, scan, autoreset -----------------------------------------------------------


def test_vmap_scan_autoreset_over_many_envs():
    core = make_multi(**DISCRETE)
    params = core.default_params
    n_envs, n_steps = 4, core.max_episode_steps + 3

    @jax.jit
    def run(key):
        keys = jax.random.split(key, n_envs)
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(keys, params)

        def body(carry, key):
            state = carry
            masks = jax.vmap(core.action_masks)(state)
            subkeys = jax.random.split(key, len(core.agents))
            # sample uniformly among allowed levels: Gumbel-max over masked logits
            actions = {
                a: jnp.argmax(jnp.where(masks[a], jax.random.gumbel(k, masks[a].shape), -jnp.inf), axis=-1)
                for a, k in zip(core.agents, subkeys)
            }
            obs, state, rew, term, trunc, info = jax.vmap(core.step_autoreset, in_axes=(None, 0, 0, None))(key, state, actions, params)
            return state, (obs, rew, term, trunc, info)

        return jax.lax.scan(body, state, jax.random.split(key, n_steps))

    _, (obs, rew, term, trunc, info) = run(KEY)
    t = core.max_episode_steps - 1
    assert np.all(np.asarray(term["q0"])[t]) and not np.any(np.asarray(term["q0"])[:t])
    assert not np.any(np.asarray(trunc["q1"]))  # masked play never leaves the bound
    assert not np.any(np.asarray(info["q0"]["masked_action"]))
    # after the end the observation is the reset one (time -0.9), final_obs the last of the episode
    assert np.allclose(np.asarray(obs["coupler"])[t, :, -1], -0.9)
    assert np.allclose(np.asarray(info["coupler"]["final_obs"])[t, :, -1], 0.9 * (2 * 27 / 30 - 1))
    assert np.all(np.asarray(info["q1"]["action_mask"])[t][:, 0, :])  # reset state: all allowed at sample 0
    # reset_info has the structure of step's infos (scan-able), minus final_obs
    _, state = core.reset(KEY, params)
    step_keys = set(jax.tree.map(np.asarray, info)["q0"]) - {"final_obs"}
    assert set(core.reset_info(state)["q0"]) == step_keys


# ---- configuration errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(actuators=("coupler", "q2")), "actuators: expected one of"),
        (dict(actuators=("q0", "q0")), "actuators: expected distinct"),
        (dict(actuators=()), "actuators: expected a non-empty"),
        (dict(actuators="coupler"), "actuators: expected a non-empty tuple"),
        (dict(n_levels=4), "n_levels: expected an odd integer"),
        (dict(n_levels=1), "n_levels: expected an odd integer"),
        (dict(n_levels=5.0), "n_levels: expected an odd integer"),
        (dict(q0_amp_bound=0.0), "q0_amp_bound: expected a positive bound"),
        (dict(q1_amp_bound=float("nan")), "q1_amp_bound: expected a finite number"),
        (dict(action_mode="binary"), "action_mode: expected one of"),
        (dict(mask_in_obs=True), r"mask_in_obs: an option of the PettingZoo adapter"),
        (dict(masked_action="execute"), r"masked_action: an option of the PettingZoo adapter"),
        (dict(pulse_lenght=30), r"unknown environment option\(s\) \['pulse_lenght'\]"),
        (dict(oob_mode="wrap"), "oob_mode: expected one of"),
    ],
)
def test_bad_configuration_names_the_field(options, message):
    with pytest.raises(ValueError, match=message):
        make_multi(**options)


def test_missing_agent_action_and_x64_requirement():
    core = make_multi(**SHORT)
    _, state = core.reset(KEY, core.default_params)
    with pytest.raises(ValueError, match=r"actions: expected one action per agent .* \(missing \['q1'\]\)"):
        core.step(KEY, state, {"coupler": np.zeros(3), "q0": np.zeros(3)}, core.default_params)
    with pytest.raises(ValueError, match="agent: expected one of"):
        core.action_space("q2")
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="MultiGateEnv.reset needs float64"):
            core.reset(KEY, core.default_params)


def test_default_qubit_bound_and_deltas():
    cfg = MultiGateConfig()
    assert cfg.bound("q0") == cfg.bound("q1") == pytest.approx(2 * np.pi * 0.3)
    assert cfg.bound("coupler") == 20.0 and cfg.delta("coupler") == 20.0
    assert cfg.delta("q0") == pytest.approx(QUBIT_AMP_BOUND)  # one unit of action = one bound
    assert np.array_equal(MultiGateConfig(n_levels=5).levels, [-1.0, -0.5, 0.0, 0.5, 1.0])
