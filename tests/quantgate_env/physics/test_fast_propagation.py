"""The opt-in ``propagation="fast"`` mode: validated, physically exact to rounding, default untouched.

Tolerances are derived, not fitted. One sample's series has truncation error <= 2^-54 (the plan) and
rounding error <= n e^theta eps per amplitude (terms grow to ~e^theta before they cancel; a product
of an n x n block adds n roundings), n <= 6, theta <= plan.theta_max; errors add at most linearly
over samples (the exact map is unitary), so after S samples a tracked amplitude errs by at most
``S (n e^theta + 2) eps``; the dense 27x27 ``scipy.linalg.expm`` reference adds its own ~eps per sample,
covered by the +2. Metrics follow from that amplitude bound delta (module ``_metric_bounds``).
"""

from __future__ import annotations

import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import quantgate_env
import scipy.linalg
from quantgate_env import gymnax as qg_gymnax
from quantgate_env import jaxmarl as qg_jaxmarl
from quantgate_env import make, make_multi
from quantgate_env.mdp.config import EnvConfig
from quantgate_env.physics.fast_propagation import expm_apply_blocks_fast
from quantgate_env.physics.hamiltonian import (
    SECTOR1_CONTROL,
    SECTOR1_IDX,
    SECTOR2_CONTROL,
    SECTOR2_IDX,
    full_control_hamiltonian,
    full_drift_hamiltonian,
    sector_drift,
)
from quantgate_env.physics.metrics import WEYL_DIGITS, state_metrics
from quantgate_env.physics.propagation import SectorState, _expm_apply_blocks

KET_010, KET_100, KET_110 = 3, 9, 12


def _bits(tree) -> list[bytes]:
    """Dtype and bytes of every leaf (equal lists: equal bit for bit)."""
    return [np.asarray(x).tobytes() + str(np.asarray(x).dtype).encode() for x in jax.tree.leaves(tree)]


def _amplitude_bound(plan, n_samples: int, dtype) -> float:
    """Worst-case error of a tracked amplitude after ``n_samples`` (module docstring)."""
    return n_samples * (6 * math.exp(plan.theta_max) + 2) * float(np.finfo(dtype).eps)


def _dense_hamiltonians(device) -> tuple[np.ndarray, np.ndarray]:
    """The 27x27 drift (float64, built under x64) and control Hamiltonians, rad/ns."""
    with jax.enable_x64(True):
        h0 = np.asarray(full_drift_hamiltonian(jax.tree.map(lambda x: np.asarray(x, np.float64), device)))
    return h0, np.asarray(full_control_hamiltonian())


def _dense_states(device, amps: np.ndarray, dt: float) -> list[SectorState]:
    """Images of |010>, |100>, |110> after each sample: dense 27x27 expm products, float64 numpy."""
    h0, hc = _dense_hamiltonians(device)
    psi = np.eye(27, dtype=complex)[:, [KET_010, KET_100, KET_110]]
    out = []
    for u in amps:
        psi = scipy.linalg.expm(-1j * dt * (h0 + float(u) * hc)) @ psi
        out.append(SectorState(psi[SECTOR1_IDX][:, :2].copy(), psi[SECTOR2_IDX, 2].copy()))
    return out


# ---- the option ---------------------------------------------------------------------------------


def test_default_is_exact():
    """No option, or the config default, is the exact path."""
    assert EnvConfig().propagation == "exact"
    assert make().config == make(propagation="exact").config
    assert make_multi().config.env.propagation == "exact"


@pytest.mark.parametrize("build", [
    lambda **o: make(**o),
    lambda **o: make_multi(**o),
    lambda **o: gymnasium.make("quantgate_env:ZCQPEE-v0", **o),
    lambda **o: qg_gymnax.make(**o),
    lambda **o: qg_jaxmarl.make(**o),
])
@pytest.mark.parametrize("bad", ["quick", "Fast", 1, None])
def test_bad_propagation_is_refused_by_name(build, bad):
    """Every entry point names the option, the choices and what arrived."""
    with pytest.raises(ValueError, match=r"propagation: expected one of \('exact', 'fast'\), got " + repr(bad).replace("(", r"\(")):
        build(propagation=bad)


def test_option_reaches_every_entry_point():
    """The option flows through make, make_multi, Gymnasium (single and vector) and gymnax."""
    assert make(propagation="fast").config.propagation == "fast"
    assert make_multi(propagation="fast").config.env.propagation == "fast"
    assert gymnasium.make("quantgate_env:ZCQPEE-v0", propagation="fast").unwrapped.core.config.propagation == "fast"
    venv = gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=2, vectorization_mode="vector_entry_point",
                              propagation="fast")
    assert venv.unwrapped.core.config.propagation == "fast"
    assert qg_gymnax.make(propagation="fast").core.config.propagation == "fast"


# ---- the default stays the old path ---------------------------------------------------------------


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_default_equals_explicit_exact_bit_for_bit(precision):
    """make() and make(propagation="exact") give the same bits over 20 steps."""
    actions = np.random.default_rng(3).uniform(-0.3, 0.3, size=(20, 3))
    with jax.enable_x64(True):
        outputs = []
        for options in ({}, {"propagation": "exact"}):
            core = make(pulse_length=60, T=3.0, precision=precision, **options)
            params = core.default_params
            obs, state = core.reset(jax.random.PRNGKey(0), params)
            step, run = jax.jit(core.step), [obs]
            for a in actions:
                obs, state, *rest = step(None, state, a, params)
                run.append((obs, state, rest))
            outputs.append(run)
        assert _bits(outputs[0]) == _bits(outputs[1])


def test_exact_series_is_not_the_fast_one():
    """The exact step never traces the fast series (its jaxpr has no custom_vmap), the fast one does."""
    with jax.enable_x64(True):
        for mode, expected in (("exact", False), ("fast", True)):
            core = make(propagation=mode)
            params = core.default_params
            _, state = core.reset(jax.random.PRNGKey(0), params)
            text = str(jax.make_jaxpr(core.step)(None, state, np.zeros(3), params))
            assert ("custom_vmap" in text) is expected, mode


# ---- physics of the fast mode ------------------------------------------------------------------------


@pytest.mark.parametrize("batched", [False, True])
def test_one_sample_propagator_matches_dense_expm(batched):
    """Each sector's propagator column by column against the exact series and a dense expm, |u| <= bound."""
    core = make(propagation="fast")
    plan, dt = core.plan, core.config.dt
    with jax.enable_x64(True):
        device = core.default_params.device
        drift = sector_drift(jax.tree.map(jnp.asarray, device))
        eye1, eye2 = jnp.eye(3, dtype=complex), jnp.eye(6, dtype=complex)
        us = np.linspace(-20.0, 20.0, 9)

        def both(u, fn):
            s1, s2 = u * jnp.asarray(SECTOR1_CONTROL), u * jnp.asarray(SECTOR2_CONTROL)
            return fn(((drift.h1, s1, eye1), (drift.h2, s2, eye2)), dt, plan)

        if batched:
            fast = jax.jit(jax.vmap(lambda u: both(u, expm_apply_blocks_fast)))(us)
        else:
            fast = [jax.jit(lambda u: both(u, expm_apply_blocks_fast))(u) for u in us]
            fast = tuple(np.stack([f[i] for f in fast]) for i in range(2))
        exact = jax.vmap(lambda u: both(u, _expm_apply_blocks))(us)
    h0, hc = _dense_hamiltonians(device)
    bound = _amplitude_bound(plan, 1, np.float64)
    for i, u in enumerate(us):
        dense = scipy.linalg.expm(-1j * dt * (h0 + u * hc))
        for block, idx in enumerate((SECTOR1_IDX, SECTOR2_IDX)):
            ref = dense[np.ix_(idx, idx)]
            assert np.max(np.abs(np.asarray(fast[block][i]) - ref)) <= bound
            assert np.max(np.abs(np.asarray(fast[block][i]) - np.asarray(exact[block][i]))) <= 2 * bound


def _metric_bounds(delta: float) -> tuple[float, float]:
    """Bounds on |dU| and |dJ_T| from an amplitude error delta (4 columns of |psi| <= 1).

    U = sum |G_ij|^2 / 4 over the tracked entries (8 in the gate blocks): |dU| <= 8 (2 delta + delta^2) / 4.
    C: the Weyl coordinates are rounded to 10^-WEYL_DIGITS; a perturbation can move one across a
    rounding boundary, one unit, and C = |sin(pi m)| with m a sum of two coordinates is 2 pi
    Lipschitz in each: |dC| <= 3 * 2 pi * 2 * 10^-WEYL_DIGITS (three coordinates, a unit plus a
    perturbation below a unit). J_T = 1 - (C + 3 U) / 4.
    """
    du = 2.0 * (2 * delta + delta**2)
    dc = 3 * 2 * math.pi * 2 * 10.0**-WEYL_DIGITS
    return du, (dc + 3 * du) / 4


def _angle_diff(a, b):
    """|a - b| on the circle, both in units of pi."""
    return np.abs(np.angle(np.exp(1j * np.pi * (np.asarray(a, np.float64) - np.asarray(b, np.float64))))) / np.pi


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_whole_episode_matches_dense_expm(precision):
    """A full paper episode (333 steps, 1000 samples) with random actions, fast vs dense expm products.

    States, unitarity, J_T, observations and rewards at every step, within bounds derived from the
    amplitude bound (float32: the same formula with float32's eps; its renormalisation only helps).
    """
    core = make(propagation="fast", precision=precision)
    exact64 = make()
    cfg, dtype = core.config, np.float32 if precision == "float32" else np.float64
    rng = np.random.default_rng(7)
    with jax.enable_x64(precision == "float64"):
        params = core.default_params
        obs, state = core.reset(jax.random.PRNGKey(1), params)
        step = jax.jit(core.step)
        records = []
        for _ in range(cfg.n_steps):
            a = rng.normal(0.0, 0.15, size=3)
            obs, state, reward, terminated, truncated, info = step(None, state, (a - a.mean()).astype(dtype), params)
            records.append(jax.device_get((obs, state, reward, info)))
            if terminated or truncated:
                break
    assert terminated and not truncated and len(records) == cfg.n_steps
    amps = np.concatenate([r[3]["amps"] for r in records]).astype(np.float64)
    refs = _dense_states(exact64.default_params.device, amps, cfg.dt)
    delta_worst = _amplitude_bound(core.plan, cfg.pulse_length, dtype)
    worst = 0.0
    with jax.enable_x64(True):
        ref_metrics = jax.jit(lambda s: state_metrics(s, cfg.objective, cfg.concurrence_weight, cfg.unitarity_weight))
        # compiled once (333 eager calls dispatched every operation on its own); it maps the dense
        # reference states to features, so the reference stays the dense expm products
        ref_observe = jax.jit(exact64.observe)
        for i, (obs, state, reward, info) in enumerate(records):
            n_done = (i + 1) * cfg.n_time_steps
            delta = _amplitude_bound(core.plan, n_done, dtype)
            ref = refs[n_done - 1]
            err = max(np.max(np.abs(np.asarray(x, complex) - y)) for x, y in zip(state.sectors, ref))
            assert err <= delta, (i, err, delta)
            worst = max(worst, err)
            m = ref_metrics(SectorState(jnp.asarray(ref.psi1), jnp.asarray(ref.psi2)))
            du, djt = _metric_bounds(delta)
            assert abs(float(info["unitarity"]) - float(m.unitarity)) <= du
            assert abs(float(info["JT"]) - float(m.JT)) <= djt
            # reward = -log10(max(J_T, floor)) + terms independent of the states: |dr| <= dJ / (J ln 10)
            jt = max(min(float(info["JT"]), float(m.JT)) - djt, cfg.jt_floor)
            ref_state = jax.tree.map(np.asarray, state)._replace(sectors=ref)
            ref_reward = (-np.log10(max(float(m.JT), cfg.jt_floor)) * cfg.rew_scale - cfg.reward_offset
                          - float(info["tv_penalty"]))
            assert abs(float(reward) - ref_reward) <= djt / (jt * math.log(10)) * cfg.rew_scale + 4 * float(np.finfo(dtype).eps) * (1 + abs(ref_reward))
            # observations: 2|z| - 1 moves by <= 2 delta, arg z / pi by <= delta / (pi |z|) (on the circle)
            ref_obs = np.asarray(ref_observe(jax.tree.map(jnp.asarray, ref_state)))
            z = np.concatenate([ref.psi1[:, 0], ref.psi1[:, 1], ref.psi2])
            obs_eps = 4 * float(np.finfo(dtype).eps)
            mags, args = np.asarray(obs[:24:2]), np.asarray(obs[1:24:2])
            assert np.all(np.abs(mags - ref_obs[:24:2]) <= cfg.obs_scale * 2 * delta + obs_eps)
            # |z| <= delta: the phase is unconstrained (the cap of 2); the division is then by 0.
            with np.errstate(divide="ignore"):
                arg_tol = cfg.obs_scale * np.minimum(
                    delta / (np.pi * np.maximum(np.abs(z) - delta, 0.0)), 2.0) + obs_eps
            assert np.all(_angle_diff(args / cfg.obs_scale, ref_obs[1:24:2] / cfg.obs_scale) * cfg.obs_scale <= arg_tol)
            assert np.array_equal(np.asarray(obs[24:]), np.asarray(ref_obs[24:]).astype(obs.dtype)) or np.allclose(
                obs[24:], ref_obs[24:], rtol=0, atol=obs_eps)
    assert worst <= delta_worst


def test_batched_fast_episode_matches_unbatched_fast_and_exact():
    """Under vmap (the batch-last rule) and one env give the same physics; both agree with exact to the bound."""
    n, steps = 8, 40
    rng = np.random.default_rng(11)
    actions = rng.uniform(-0.2, 0.2, size=(steps, n, 3))
    with jax.enable_x64(True):
        runs = {}
        for mode in ("exact", "fast"):
            core = make(propagation=mode, max_drift=1e-3)
            params = core.default_params
            _, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), n), params)
            step = jax.jit(jax.vmap(core.step, in_axes=(None, 0, 0, None)))
            for a in actions:
                _, state, *_ = step(None, state, a, params)
            runs[mode] = state
        fast = make(propagation="fast", max_drift=1e-3)
        one = jax.jit(fast.step)
        for env in (0, n - 1):
            state = jax.tree.map(lambda x, env=env: x[env], jax.vmap(fast.reset, in_axes=(0, None))(
                jax.random.split(jax.random.PRNGKey(0), n), fast.default_params)[1])
            for a in actions[:, env]:
                _, state, *_ = one(None, state, a, fast.default_params)
            for x, y in zip(state.sectors, runs["fast"].sectors):
                assert np.max(np.abs(np.asarray(x) - np.asarray(y[env]))) <= 2 * _amplitude_bound(fast.plan, steps * 3, np.float64)
    delta = _amplitude_bound(fast.plan, steps * 3, np.float64)
    for x, y in zip(runs["exact"].sectors, runs["fast"].sectors):
        assert np.max(np.abs(np.asarray(x) - np.asarray(y))) <= 2 * delta


def test_fast_gymnasium_and_multi_run():
    """The fast mode steps through the Gymnasium adapter and the multi-line core."""
    env = gymnasium.make("quantgate_env:ZCQPEE-v0", propagation="fast", pulse_length=30, T=1.5)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.zeros(3, np.float32))
    assert obs.shape == (28,) and np.isfinite(reward) and 0 <= info["JT"] <= 1
    multi = make_multi(propagation="fast", pulse_length=30, T=1.5)
    with jax.enable_x64(True):
        _, state = multi.reset(jax.random.PRNGKey(0), multi.default_params)
        out = jax.jit(multi.step)(None, state, {a: jnp.zeros(3) for a in multi.agents}, multi.default_params)
    assert all(np.all(np.isfinite(np.asarray(r))) for r in jax.tree.leaves(out[2]))
    assert quantgate_env.make(propagation="fast").plan == quantgate_env.make().plan
