"""Gate metrics against published values, weylchamber and brute force."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import weylchamber
from quantgate_env import gate_metrics
from quantgate_env.physics.device import nominal_device
from quantgate_env.physics.hamiltonian import sector_drift
from quantgate_env.physics.metrics import (
    SQRT_ISWAP,
    GateBlocks,
    concurrence,
    gate_blocks,
    realised_gate,
    sqrt_iswap_fidelity_blocks,
    state_metrics,
    weyl_coordinates_blocks,
)
from quantgate_env.physics.propagation import initial_sector_state, propagate_samples, taylor_plan, theta_bound

from .. import reference_model as ref

S2 = 1 / np.sqrt(2)
# (gate in the physical convention, published Weyl point in units of pi, concurrence)
STANDARD_GATES = {
    "identity": (np.eye(4), (0, 0, 0), 0.0),
    "CNOT": (np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]), (0.5, 0, 0), 1.0),
    "CZ": (np.diag([1, 1, 1, -1]), (0.5, 0, 0), 1.0),
    "iSWAP": (np.array([[1, 0, 0, 0], [0, 0, 1j, 0], [0, 1j, 0, 0], [0, 0, 0, 1]]), (0.5, 0.5, 0), 1.0),
    "sqrt_iSWAP": (SQRT_ISWAP, (0.25, 0.25, 0), 1.0),
    "SWAP": (np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]), (0.5, 0.5, 0.5), 0.0),
    "CPHASE(pi/3)": (np.diag([1, 1, 1, np.exp(1j * np.pi / 3)]), (1 / 6, 0, 0), 0.5),
}


def _same_weyl_point(a, b, atol):
    """Equal coordinates, allowing the c3 = 0 face identification (c1, c2, 0) ~ (1 - c1, c2, 0)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if np.allclose(a, b, atol=atol, rtol=0):
        return True
    return abs(a[2]) < atol and abs(b[2]) < atol and np.allclose([1 - a[0], a[1]], b[:2], atol=atol, rtol=0)


def _blocks_of(gate):
    g = np.asarray(gate, complex)
    return GateBlocks(*(jnp.asarray(x) for x in (g[0, 0], g[1, 1], g[1, 2], g[2, 1], g[2, 2], g[3, 3])))


@pytest.mark.parametrize("name", list(STANDARD_GATES))
def test_standard_gates_have_published_weyl_points_and_concurrence(name):
    gate, point, conc = STANDARD_GATES[name]
    metrics = gate_metrics(gate, physical=True)
    assert _same_weyl_point(metrics["weyl"], point, 1e-8), metrics["weyl"]
    assert metrics["concurrence"] == pytest.approx(conc, abs=1e-8)
    assert metrics["unitarity"] == pytest.approx(1.0, abs=1e-14)
    block_diagonal = np.allclose(np.asarray(gate)[[0, 0, 3, 3], [1, 2, 1, 2]], 0)
    if block_diagonal:  # the closed form used in the environment agrees with the general path
        with jax.enable_x64(True):
            closed = np.asarray(weyl_coordinates_blocks(_blocks_of(np.conj(gate).T)))
            assert _same_weyl_point(closed, point, 1e-8), closed
            assert float(concurrence(jnp.asarray(closed))) == pytest.approx(conc, abs=1e-8)


#: pulse lengths of the random gates: each length is one compiled propagation (compiling, not
#: propagating, is what the fixture costs: 20 lengths and plans took ~19 s of CPU, these ~3 s)
LENGTHS = (20, 117, 299)


@functools.partial(jax.jit, static_argnums=1)
def _final_state(amps, plan):
    return propagate_samples(initial_sector_state(), sector_drift(nominal_device()), amps, 0.05, plan)[0]


def _random_pulse_states(n_pulses=20, seed=0):
    rng = np.random.default_rng(seed)
    # One Taylor plan for every pulse: it covers |u| <= 20 rad/ns, the largest amplitude drawn.
    plan = taylor_plan(1.05 * theta_bound(nominal_device(), 20.0, 0.05))
    out = []
    for _ in range(n_pulses):
        n = int(rng.choice(LENGTHS))
        amps = rng.uniform(-20, 20, size=n) * rng.uniform(0.1, 1.0)
        with jax.enable_x64(True):
            final = _final_state(jnp.asarray(amps), plan)
        out.append((amps, final))
    return out


@pytest.fixture(scope="module")
def random_gates():
    return _random_pulse_states()


def test_realised_gate_and_metrics_match_dense_model_and_weylchamber(random_gates):
    for amps, final in random_gates[:8]:  # dense expm is slow: the convention check needs a few
        with jax.enable_x64(True):
            gate = np.asarray(realised_gate(gate_blocks(final)))
        expected = ref.realised_gate(ref.propagator(amps, 0.05))
        np.testing.assert_allclose(gate, expected, atol=1e-10, rtol=0)
    for _, final in random_gates:
        with jax.enable_x64(True):
            blocks = gate_blocks(final)
            gate = np.asarray(realised_gate(blocks))
            coords = np.asarray(weyl_coordinates_blocks(blocks))
            jt, conc, unit = (float(x) for x in state_metrics(final))
        expected_coords = weylchamber.c1c2c3(gate)
        assert _same_weyl_point(coords, expected_coords, 1e-7), (coords, expected_coords)
        ref_jt, ref_c, ref_u = ref.pe_metrics(gate)
        assert conc == pytest.approx(ref_c, abs=1e-7)
        assert unit == pytest.approx(ref_u, abs=1e-12)
        assert jt == pytest.approx(ref_jt, abs=1e-7)


def test_sqrt_iswap_and_its_z_equivalents_have_unit_fidelity():
    rng = np.random.default_rng(5)
    for _ in range(5):
        p = rng.uniform(-np.pi, np.pi, size=5)
        za = np.diag([1, np.exp(1j * p[0]), np.exp(1j * p[1]), np.exp(1j * (p[0] + p[1]))])
        zb = np.diag([1, np.exp(1j * p[2]), np.exp(1j * p[3]), np.exp(1j * (p[2] + p[3]))])
        physical = np.exp(1j * p[4]) * za @ SQRT_ISWAP @ zb
        with jax.enable_x64(True):
            f = float(sqrt_iswap_fidelity_blocks(_blocks_of(physical.conj().T)))
        assert abs(f - 1) < 1e-12
        assert abs(gate_metrics(physical, physical=True)["sqrt_iswap_fidelity"] - 1) < 1e-12
    with jax.enable_x64(True):
        assert abs(float(sqrt_iswap_fidelity_blocks(_blocks_of(SQRT_ISWAP))) - 1) < 1e-12  # the adjoint


def _brute_force_fidelity(physical):
    """max over 4 independent Z phases (a0, a1, b0, b1) by BFGS from many starts."""

    def d(p0, p1):
        return np.diag([1, np.exp(1j * p1), np.exp(1j * p0), np.exp(1j * (p0 + p1))])

    def neg(p):
        m = SQRT_ISWAP.conj().T @ d(p[0], p[1]) @ physical @ d(p[2], p[3])
        return -abs(np.trace(m)) ** 2

    rng = np.random.default_rng(0)
    best = min(scipy.optimize.minimize(neg, rng.uniform(-np.pi, np.pi, 4), method="BFGS", options={"gtol": 1e-12}).fun for _ in range(40))
    return (np.sum(np.abs(physical) ** 2) - best) / 20


def test_fidelity_matches_brute_force_on_pulse_gates(random_gates):
    for _, final in random_gates[:3]:
        with jax.enable_x64(True):
            blocks = gate_blocks(final)
            f = float(sqrt_iswap_fidelity_blocks(blocks))
            physical = np.asarray(realised_gate(blocks)).conj().T
        assert abs(f - _brute_force_fidelity(physical)) < 1e-9


def test_gate_metrics_rejects_bad_gates():
    with pytest.raises(ValueError, match=r"gate: expected a finite \(4, 4\)"):
        gate_metrics(np.eye(3))
    with pytest.raises(ValueError, match="gate"):
        gate_metrics(np.full((4, 4), np.nan))
