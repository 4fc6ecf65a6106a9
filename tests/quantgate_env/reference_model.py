"""An independent dense model of the device, written for the tests from the spec alone.

Plain numpy and scipy: the 27x27 Hamiltonian from creation operators, exact propagators by
``scipy.linalg.expm``, the realised gate by overlaps in the full space (v1's convention), and Weyl
coordinates / concurrence from the ``weylchamber`` package. Nothing here imports quantgate_env.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

TWO_PI = 2 * np.pi
DIM = 3

# The paper run's device, GHz (code pairing: q0 carries -324 MHz and g = 100 MHz).
NOMINAL = dict(
    omega_q=(5.0311, 5.8899), alpha_q=(-0.324, -0.235), g=(0.100, 0.0714),
    omega_c=7.445, alpha_c=-0.230, omega_r=6.0,
)

# Computational kets |q0 q1 c>: 00 -> |000>, 01 -> |010>, 10 -> |100>, 11 -> |110>.
BASIS_IDX = (0, 3, 9, 12)


def _op(single: np.ndarray, mode: int) -> np.ndarray:
    mats = [np.eye(DIM)] * 3
    mats[mode] = single
    return np.kron(np.kron(mats[0], mats[1]), mats[2])


def annihilators() -> list[np.ndarray]:
    a = np.zeros((DIM, DIM))
    for n in range(1, DIM):
        a[n - 1, n] = np.sqrt(n)
    return [_op(a, m) for m in range(3)]


def hamiltonians(device: dict = NOMINAL) -> tuple[np.ndarray, np.ndarray]:
    """(drift, control) 27x27 in rad/ns: H(u) = drift + u * control."""
    a0, a1, b = annihilators()
    r = device["omega_r"]
    h = np.zeros((27, 27))
    for a, w, al in ((a0, device["omega_q"][0], device["alpha_q"][0]),
                     (a1, device["omega_q"][1], device["alpha_q"][1]),
                     (b, device["omega_c"], device["alpha_c"])):
        h += TWO_PI * (w - r) * a.T @ a + np.pi * al * a.T @ a.T @ a @ a
    for a, g in ((a0, device["g"][0]), (a1, device["g"][1])):
        h += TWO_PI * g * (a @ b.T + a.T @ b)
    return h, b.T @ b


def excitation_number() -> np.ndarray:
    return np.array([q0 + q1 + c for q0 in range(DIM) for q1 in range(DIM) for c in range(DIM)])


def propagator(amps, dt: float, device: dict = NOMINAL) -> np.ndarray:
    """Product of exact sample propagators, 27x27 complex."""
    drift, control = hamiltonians(device)
    u_total = np.eye(27, dtype=complex)
    for u in np.asarray(amps):
        u_total = scipy.linalg.expm(-1j * (drift + u * control) * dt) @ u_total
    return u_total


def realised_gate(u_total: np.ndarray) -> np.ndarray:
    """v1 convention: G_ij = <psi_i | b_j> with psi_i = U |b_i>."""
    gate = np.zeros((4, 4), dtype=complex)
    for i, bi in enumerate(BASIS_IDX):
        for j, bj in enumerate(BASIS_IDX):
            gate[i, j] = np.conj(u_total[bj, bi])
    return gate


def pe_metrics(gate: np.ndarray) -> tuple[float, float, float]:
    """(J_T, concurrence, unitarity) of a realised gate, with weylchamber's coordinates."""
    import weylchamber

    c = float(weylchamber.concurrence(*weylchamber.c1c2c3(gate)))
    u = float(np.sum(np.abs(gate) ** 2) / 4)
    return 1 - (c + 3 * u) / 4, c, u
