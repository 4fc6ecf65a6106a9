"""The RWA Hamiltonian of two transmons and a tunable coupler, and its excitation-number sectors.

Kets are |q0 q1 c> with 3 levels per mode, full-space index 9*q0 + 3*q1 + c (27 states). In the
frame rotating at omega_r (all energies in rad/ns, time in ns):

    H(u) = sum_x [ 2 pi (omega_x - omega_r) n_x + pi alpha_x a_x^dag^2 a_x^2 ]
           + sum_j 2 pi g_j (a_j b^dag + a_j^dag b) + u b^dag b

with u the coupler frequency shift in rad/ns (no 2 pi: the control operator is the bare number
operator). The exchange terms conserve N = n_q0 + n_q1 + n_c, so H is block diagonal in N and the
computational states live in three small blocks: |000> (N=0, energy 0), the N=1 block spanned by
|001>, |010>, |100> and the N=2 block spanned by |002>, |011>, |020>, |101>, |110>, |200>. Both
blocks are real symmetric, which the propagation exploits.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .device import DeviceParams

__all__ = [
    "LEVELS",
    "SECTOR1_IDX",
    "SECTOR2_IDX",
    "SECTOR1_CONTROL",
    "SECTOR2_CONTROL",
    "CONTROL_LINES",
    "line_diagonals",
    "SectorDrift",
    "full_drift_hamiltonian",
    "full_control_hamiltonian",
    "sector_drift",
]

LEVELS = 3
#: Full-space indices of the N=1 block: |001>, |010>, |100>.
SECTOR1_IDX = np.array([1, 3, 9])
#: Full-space indices of the N=2 block: |002>, |011>, |020>, |101>, |110>, |200>.
SECTOR2_IDX = np.array([2, 4, 6, 10, 12, 18])
#: Diagonal of the control operator b^dag b inside each block (the coupler occupation).
SECTOR1_CONTROL = np.array([1.0, 0.0, 0.0])
SECTOR2_CONTROL = np.array([2.0, 1.0, 0.0, 1.0, 0.0, 0.0])

_TWO_PI = 2.0 * np.pi
_ANNIHILATE = np.diag(np.sqrt(np.arange(1.0, LEVELS)), k=1)
_IDENTITY = np.eye(LEVELS)


def _embed(op: np.ndarray, mode: int) -> np.ndarray:
    """Embed a single-mode operator on mode 0 (q0), 1 (q1) or 2 (coupler) into the 27-dim space."""
    factors = [_IDENTITY] * 3
    factors[mode] = op
    return np.kron(np.kron(factors[0], factors[1]), factors[2])


_A = [_embed(_ANNIHILATE, mode) for mode in range(3)]
_NUMBER = [a.T @ a for a in _A]
_KERR = [a.T @ a.T @ a @ a for a in _A]  # a^dag^2 a^2
_EXCHANGE = [_A[j] @ _A[2].T + _A[j].T @ _A[2] for j in range(2)]  # a_j b^dag + a_j^dag b


class SectorDrift(NamedTuple):
    """Drift Hamiltonians of the two propagated blocks, rad/ns.

    Attributes:
        h1: (3, 3) real symmetric N=1 block.
        h2: (6, 6) real symmetric N=2 block.
    """

    h1: jnp.ndarray
    h2: jnp.ndarray


def full_drift_hamiltonian(device: DeviceParams, dtype=None) -> jnp.ndarray:
    """The 27x27 drift Hamiltonian H(u=0) in rad/ns (real symmetric).

    Args:
        device: parameters in GHz; fields may be traced arrays.
        dtype: float dtype of the result (default: JAX's default float, float64 under x64); the
            float32 environments pass float32 so that nothing is promoted under x64.

    Returns:
        (27, 27) float array.
    """
    # Constant operators take the dtype of the parameters, so the same code traces in float64
    # (the default) or in float32 (only to measure the float32 error, spec 1.5).
    dtype = jnp.result_type(float) if dtype is None else dtype
    omegas = (device.omega_q[0], device.omega_q[1], device.omega_c)
    alphas = (device.alpha_q[0], device.alpha_q[1], device.alpha_c)
    h = jnp.zeros((27, 27), dtype=dtype)
    for mode in range(3):
        h = h + _TWO_PI * (omegas[mode] - device.omega_r) * jnp.asarray(_NUMBER[mode], dtype)
        h = h + np.pi * alphas[mode] * jnp.asarray(_KERR[mode], dtype)
    for j in range(2):
        h = h + _TWO_PI * device.g[j] * jnp.asarray(_EXCHANGE[j], dtype)
    return h


#: Control lines, each the bare number operator of one mode (u in rad/ns, no 2 pi): the coupler
#: (u_c b^dag b, the paper's control) and the two qubits (frequency shifts u_j a_j^dag a_j).
CONTROL_LINES = ("coupler", "q0", "q1")
_LINE_MODE = {"q0": 0, "q1": 1, "coupler": 2}


def line_diagonals(line: str) -> tuple[np.ndarray, np.ndarray]:
    """Diagonals of a control line's number operator in the N=1 and N=2 blocks.

    Number operators conserve N, so inside each block a line is just a diagonal: e.g. q0 is
    (0, 0, 1) on (|001>, |010>, |100>) and (0, 0, 0, 1, 1, 2) on the N=2 block. Read off the
    27-dim operator, like the drift blocks, so they cannot disagree with the model.

    Args:
        line: one of ``CONTROL_LINES``.

    Returns:
        ((3,), (6,)) float arrays; for "coupler" equal to SECTOR1_CONTROL, SECTOR2_CONTROL.
    """
    if line not in _LINE_MODE:
        raise ValueError(f"line: expected one of {CONTROL_LINES}, got {line!r}")
    # occupations are integers; a^dag a built from sqrt(n) entries reads 2.0000000000000004
    number = np.rint(np.diagonal(_NUMBER[_LINE_MODE[line]]))
    return number[SECTOR1_IDX].copy(), number[SECTOR2_IDX].copy()


def full_control_hamiltonian() -> np.ndarray:
    """The 27x27 control operator b^dag b (multiplies u in rad/ns)."""
    return _NUMBER[2].copy()


def sector_drift(device: DeviceParams, dtype=None) -> SectorDrift:
    """Restrict the full drift Hamiltonian to the N=1 and N=2 blocks.

    Built from the full 27-dim operator rather than by hand so that the blocks cannot drift from
    the model they claim to be; it runs once per device (per reset), never per sample.
    """
    h = full_drift_hamiltonian(device, dtype)
    return SectorDrift(h1=h[np.ix_(SECTOR1_IDX, SECTOR1_IDX)], h2=h[np.ix_(SECTOR2_IDX, SECTOR2_IDX)])
