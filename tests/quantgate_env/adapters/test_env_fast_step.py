"""The packed fast paths of issue 16 give exactly the numbers of the functional core.

The Gymnasium env carries its key and state as one packed vector and returns a step's results as
another (``quantgate_env.adapters.packing``); the two sector series share one loop. Neither may change a bit.
"""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import quantgate_env  # noqa: F401  (registers ZCQPEE-v0)
import scipy.linalg
from quantgate_env import make
from quantgate_env.adapters.gymnasium import GateGymEnv, GateVectorEnv
from quantgate_env.adapters.packing import FlatLayout
from quantgate_env.physics.device import nominal_device
from quantgate_env.physics.hamiltonian import SECTOR1_CONTROL, SECTOR2_CONTROL, sector_drift
from quantgate_env.physics.propagation import _expm_apply_blocks, _expm_apply_shifted, taylor_plan, theta_bound

SHORT = dict(pulse_length=30, T=1.5)  # 10 steps of 3 samples


def _bits(x) -> bytes:
    x = np.asarray(x)
    return x.dtype.str.encode() + str(x.shape).encode() + x.tobytes()


class _Reference:
    """GateGymEnv's documented behaviour spelled out with the functional core, one jit per call."""

    def __init__(self, **options):
        self.core = make(**options)
        self.params = self.core.default_params
        self.key = self.state = None
        self._step, self._reset, self._next = jax.jit(self.core.step), jax.jit(self.core.reset), jax.jit(self.core.next_episode)

    def reset(self, seed=None):
        if seed is not None or self.key is None:
            self.rng, _ = gymnasium.utils.seeding.np_random(seed)
            self.key = jax.random.PRNGKey(int(self.rng.integers(2**31)))
        with jax.enable_x64(True):
            self.key, sub = jax.random.split(self.key)
            if self.state is None:
                obs, self.state = self._reset(sub, self.params)
            else:
                obs, self.state = self._next(sub, self.state, self.params)
        return np.asarray(obs).astype(np.float32)

    def step(self, action):
        with jax.enable_x64(True):
            self.key, sub = jax.random.split(self.key)
            obs, self.state, reward, term, trunc, info = self._step(sub, self.state, np.asarray(action, np.float64), self.params)
        return (np.asarray(obs).astype(np.float32), float(reward), bool(term), bool(trunc),
                jax.tree.map(np.asarray, info))


@pytest.mark.parametrize("options", [dict(SHORT), dict(SHORT, oob_mode="clip"),
                                     dict(SHORT, qubit_drift_mhz="recool", g_drift_mhz=1.0, resample_drift=False),
                                     dict(SHORT, max_drift=1e-3)])
def test_gym_env_equals_the_core_bit_for_bit_across_episodes(options):
    """Full episodes, terminations, oob truncations, resets with and without seeds."""
    rng = np.random.default_rng(3)
    seeds = [5, None, None, 17, None, None]
    ends = {"terminated": 0, "truncated": 0}
    env, ref = GateGymEnv(**options), _Reference(**options)
    for seed in seeds:
        assert _bits(env.reset(seed=seed)[0]) == _bits(ref.reset(seed))
        std = 0.9 if seed is None else 0.05
        for _ in range(12):
            action = rng.normal(0, std, 3).astype(np.float32)
            got, want = env.step(action), ref.step(action)
            assert _bits(got[0]) == _bits(want[0])
            assert got[1:4] == want[1:4] and all(type(g) is type(w) for g, w in zip(got[1:4], want[1:4]))
            assert sorted(got[4]) == sorted(want[4])
            for key in want[4]:
                assert _bits(got[4][key]) == _bits(want[4][key]), key
            if got[2] or got[3]:
                ends["terminated" if got[2] else "truncated"] += 1
                break
    assert ends["terminated"] > 0
    if options.get("oob_mode", "terminate") == "terminate":
        assert ends["truncated"] > 0


def test_gym_env_state_and_params_views():
    """The packed carry still reads as the core's state and parameters."""
    env = GateGymEnv(**SHORT)
    assert env._state is None
    env.reset(seed=0)
    ref = _Reference(**SHORT)
    ref.reset(0)
    for got, want in zip(jax.tree.leaves(env._state), jax.tree.leaves(ref.state)):
        assert _bits(got) == _bits(want)
    for got, want in zip(jax.tree.leaves(env.params), jax.tree.leaves(ref.params)):
        assert _bits(got) == _bits(want)


def test_vector_env_next_step_autoreset_equals_the_core():
    """GateVectorEnv against vmap(core.step) with Gymnasium's next-step autoreset written out."""
    n, core = 3, make(**SHORT)
    venv = GateVectorEnv(num_envs=n, **SHORT)
    obs, _ = venv.reset(seed=4)
    rng, _ = gymnasium.utils.seeding.np_random(4)
    key = jax.random.PRNGKey(int(rng.integers(2**31)))
    params = core.default_params
    with jax.enable_x64(True):
        key, sub = jax.random.split(key)
        want_obs, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(sub, n), params)
        assert _bits(obs) == _bits(np.asarray(want_obs).astype(np.float32))
        step = jax.jit(jax.vmap(core.step, in_axes=(0, 0, 0, None)))
        nxt = jax.jit(jax.vmap(core.next_episode, in_axes=(0, 0, None)))
        done, ends = np.zeros(n, bool), 0
        actions = np.random.default_rng(0).normal(0, 0.5, (25, n, 3))
        for a in actions:
            got = venv.step(a)
            key, sub = jax.random.split(key)
            keys = jax.random.split(sub, n)
            o, new, r, te, tr, info = step(keys, state, a, params)
            ro, rs = nxt(keys, state, params)
            def pick(x, y, done=done):
                return np.where(done.reshape(done.shape + (1,) * (np.ndim(x) - 1)), x, y)

            state = jax.tree.map(pick, rs, new)
            want = (pick(ro, o).astype(np.float32), np.where(done, 0.0, r), np.asarray(te) & ~done,
                    np.asarray(tr) & ~done, jax.tree.map(np.asarray, info))
            for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
                assert _bits(g) == _bits(w)
            done = want[2] | want[3]
            ends += int(done.sum())
    assert ends >= n  # episodes of 10 steps: every env ended and was auto-reset at least once


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_flat_layout_round_trip_is_exact(dtype):
    """Every leaf kind the adapters carry comes back bit for bit (inside jit and on the host)."""
    cdtype = np.complex128 if dtype == np.float64 else np.complex64
    rng = np.random.default_rng(0)
    tree = {"psi": (rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))).astype(cdtype),
            "idx": np.int32(2**30 + 7), "key": np.array([2**32 - 1, 12345], np.uint32),
            "flag": np.array([True, False]), "x": np.array([rng.normal(), -0.0, np.finfo(dtype).tiny, np.finfo(dtype).max], dtype)}
    with jax.enable_x64(True):
        layout = FlatLayout.of(tree)
        flat = jax.jit(layout.pack)(tree)
        assert flat.shape == (layout.size,) and flat.dtype == jnp.float64
        back = jax.jit(layout.unpack)(flat)
    for key in tree:
        assert _bits(back[key]) == _bits(tree[key]), key
    real = {k: v for k, v in tree.items() if k != "psi"}
    real_layout = FlatLayout.of(real)
    with jax.enable_x64(True):
        host = real_layout.host_unpacker()(np.asarray(jax.jit(real_layout.pack)(real)))
    for key in real:
        assert _bits(host[key]) == _bits(real[key]), key
    with pytest.raises(ValueError, match="complex"):
        layout.host_unpacker()


def test_blocks_in_one_loop_equal_separate_loops_and_dense_expm():
    """``_expm_apply_blocks`` rounds exactly as one loop per block, and is the exact exponential."""
    with jax.enable_x64(True):
        drift = sector_drift(nominal_device())
        plan = taylor_plan(1.05 * theta_bound(nominal_device(), 20.0, 0.05))
        rng = np.random.default_rng(1)
        psi1 = jnp.asarray(rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2)))
        psi2 = jnp.asarray(rng.normal(size=(6, 1)) + 1j * rng.normal(size=(6, 1)))
        for u in (-20.0, -3.3, 0.0, 17.5):
            s1, s2 = u * jnp.asarray(SECTOR1_CONTROL), u * jnp.asarray(SECTOR2_CONTROL)
            both = jax.jit(lambda a, b, s1, s2: _expm_apply_blocks(((drift.h1, s1, a), (drift.h2, s2, b)), 0.05, plan))(
                psi1, psi2, s1, s2)
            one = jax.jit(lambda a, s: _expm_apply_shifted(drift.h1, s, 0.05, a, plan))(psi1, s1)
            two = jax.jit(lambda b, s: _expm_apply_shifted(drift.h2, s, 0.05, b, plan))(psi2, s2)
            assert _bits(both[0]) == _bits(one) and _bits(both[1]) == _bits(two)
            for h, s, psi, out in ((drift.h1, s1, psi1, one), (drift.h2, s2, psi2, two)):
                dense = scipy.linalg.expm(-1j * 0.05 * (np.asarray(h) + np.diag(np.asarray(s)))) @ np.asarray(psi)
                np.testing.assert_allclose(np.asarray(out), dense, atol=1e-13, rtol=0)
