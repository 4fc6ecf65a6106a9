"""Sector propagation against an independent dense 27x27 model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quantgate_env.physics.device import DeviceParams, nominal_device
from quantgate_env.physics.hamiltonian import SECTOR1_IDX, SECTOR2_IDX, full_drift_hamiltonian, sector_drift
from quantgate_env.physics.propagation import initial_sector_state, propagate_samples, taylor_plan, theta_bound

from .. import reference_model as ref

DT = 0.05


def _plan(amps, device=None):
    return taylor_plan(1.05 * theta_bound(device or nominal_device(), float(np.max(np.abs(amps))), DT))


def _propagate(amps, device=None):
    device = device or nominal_device()
    with jax.enable_x64(True):
        final, _ = propagate_samples(initial_sector_state(), sector_drift(device), jnp.asarray(amps), DT, _plan(amps, device))
        return jax.tree.map(np.asarray, final)


def test_drift_hamiltonian_matches_independent_construction():
    with jax.enable_x64(True):
        h = np.asarray(full_drift_hamiltonian(nominal_device()))
    expected, _ = ref.hamiltonians()
    np.testing.assert_allclose(h, expected, atol=1e-12, rtol=0)


def test_hamiltonian_conserves_excitation_number():
    drift, control = ref.hamiltonians()
    n = ref.excitation_number()
    different = n[:, None] != n[None, :]
    assert np.count_nonzero(drift[different]) == 0
    assert np.count_nonzero(control[different]) == 0
    assert np.count_nonzero(drift) > 27  # the couplings are there, inside the blocks
    # the blocks the package propagates are exactly the N=1 and N=2 subspaces
    assert sorted(SECTOR1_IDX.tolist()) == np.flatnonzero(n == 1).tolist()
    assert sorted(SECTOR2_IDX.tolist()) == np.flatnonzero(n == 2).tolist()


def test_sector_propagation_matches_dense_expm():
    rng = np.random.default_rng(7)
    amps = rng.uniform(-20, 20, size=64)
    final = _propagate(amps)
    full = ref.propagator(amps, DT)
    np.testing.assert_allclose(final.psi1, full[np.ix_(SECTOR1_IDX, [3, 9])], atol=1e-10, rtol=0)
    np.testing.assert_allclose(final.psi2, full[SECTOR2_IDX, 12], atol=1e-10, rtol=0)
    # nothing leaves the sectors in the dense model either
    assert np.abs(full[np.ix_(np.setdiff1d(np.arange(27), SECTOR1_IDX), [3, 9])]).max() < 1e-12


def test_propagation_on_a_drifted_device_matches_dense_expm():
    rng = np.random.default_rng(3)
    amps = rng.uniform(-15, 15, size=40)
    device = dict(ref.NOMINAL, omega_q=(5.04, 5.88), g=(0.09, 0.08), omega_c=7.3)
    params = DeviceParams(
        omega_q=np.array(device["omega_q"]), alpha_q=np.array(device["alpha_q"]), g=np.array(device["g"]),
        omega_c=np.array(device["omega_c"]), alpha_c=np.array(device["alpha_c"]), omega_r=np.array(6.0),
    )
    final = _propagate(amps, params)
    full = ref.propagator(amps, DT, device)
    np.testing.assert_allclose(final.psi2, full[SECTOR2_IDX, 12], atol=1e-10, rtol=0)


def test_states_stay_orthonormal_over_1000_samples():
    amps = np.random.default_rng(1).uniform(-20, 20, size=1000)
    final = _propagate(amps)
    gram = final.psi1.conj().T @ final.psi1
    np.testing.assert_allclose(gram, np.eye(2), atol=1e-12, rtol=0)
    assert abs(np.linalg.norm(final.psi2) - 1) < 1e-12


def test_vmap_over_pulses_and_devices_equals_one_by_one():
    rng = np.random.default_rng(2)
    amps = rng.uniform(-20, 20, size=(3, 50))
    base = nominal_device()
    devices = DeviceParams(*[np.stack([np.asarray(f)] * 3) for f in base])
    devices = devices._replace(omega_q=devices.omega_q + np.array([[0.0, 0.0], [0.005, 0.0], [0.0, -0.005]]))
    plan = _plan(amps)
    with jax.enable_x64(True):
        batched = jax.vmap(lambda a, d: propagate_samples(initial_sector_state(), sector_drift(d), a, DT, plan)[0])(
            jnp.asarray(amps), devices
        )
        batched = np.asarray(batched.psi2)
    for i in range(3):
        device = DeviceParams(*[np.asarray(f[i]) for f in devices])
        np.testing.assert_allclose(batched[i], _propagate(amps[i], device).psi2, atol=1e-13, rtol=0)
    assert np.abs(batched[0] - batched[1]).max() > 1e-3  # the devices really differ


def test_sample_outside_the_plan_is_nan_not_wrong():
    plan = _plan(np.array([5.0]))  # exact only up to |u| = 5 rad/ns
    with jax.enable_x64(True):
        final, _ = propagate_samples(initial_sector_state(), sector_drift(nominal_device()), jnp.array([4.0, 40.0]), DT, plan)
    assert np.all(np.isnan(np.asarray(final.psi2)))


@pytest.mark.parametrize("theta", [0.1, 1.0, 2.0, 5.0])
def test_taylor_plan_error_bound(theta):
    import math

    plan = taylor_plan(theta)
    t = theta / plan.substeps
    assert t ** (plan.degree + 1) / math.factorial(plan.degree + 1) * math.exp(t) <= 2.0**-54


def test_plan_does_not_depend_on_the_callers_precision():
    from quantgate_env import make

    with jax.enable_x64(False):
        plan32 = make().plan
    with jax.enable_x64(True):
        plan64 = make().plan
    assert plan32 == plan64
