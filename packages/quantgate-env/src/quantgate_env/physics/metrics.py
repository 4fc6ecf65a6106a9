"""Gate metrics: the realised gate, Weyl-chamber coordinates, concurrence, unitarity, J_T, sqrt(iSWAP) fidelity.

The sqrt(iSWAP) fidelity allows free virtual-Z corrections.

Conventions (spec 1.4): the gate basis is |00>, |01>, |10>, |11> with the first digit q0. The
*realised* gate G follows the paper's v1 code, G_ij = <psi_i(t)|b_j> = conj(<b_j|U|b_i>), i.e.
G = M^dag with M the physical gate. Because the excitation sectors never mix, G is block diagonal,
diag(1, V, e), and its Weyl coordinates have a closed form (no general eigensolver in the hot loop).

All functions are pure JAX and traceable (they are used inside the compiled environment step);
``gate_metrics`` is the numpy-facing entry point for a user's own 4x4 gate.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .propagation import SectorState

__all__ = [
    "WEYL_DIGITS",
    "SQRT_ISWAP",
    "GateBlocks",
    "gate_blocks",
    "realised_gate",
    "weyl_coordinates",
    "weyl_coordinates_blocks",
    "concurrence",
    "unitarity",
    "pe_cost",
    "sqrt_iswap_fidelity_blocks",
    "gate_metrics",
    "OBJECTIVES",
    "StateMetrics",
    "state_metrics",
]

#: Weyl coordinates are rounded to 8 digits like weylchamber's default, so that numerically
#: perfect entanglers land exactly inside the PE polyhedron (concurrence exactly 1).
WEYL_DIGITS = 8

#: sqrt(iSWAP) in the basis |00>, |01>, |10>, |11>.
SQRT_ISWAP = np.array(
    [
        [1, 0, 0, 0],
        [0, 1 / np.sqrt(2), 1j / np.sqrt(2), 0],
        [0, 1j / np.sqrt(2), 1 / np.sqrt(2), 0],
        [0, 0, 0, 1],
    ],
    dtype=complex,
)


class GateBlocks(NamedTuple):
    """The realised block-diagonal gate G = diag(g00, [[a, b], [c, d]], e) (complex scalars)."""

    g00: jnp.ndarray
    a: jnp.ndarray
    b: jnp.ndarray
    c: jnp.ndarray
    d: jnp.ndarray
    e: jnp.ndarray


def gate_blocks(state: SectorState) -> GateBlocks:
    """The realised gate's blocks from the propagated sector states (v1 overlap convention)."""
    psi1 = jnp.conj(state.psi1)  # columns: images of |010>, |100>; rows |001>, |010>, |100>
    one = jnp.ones((), dtype=psi1.dtype)
    return GateBlocks(
        g00=one,
        a=psi1[1, 0],  # conj <010|U|010>
        b=psi1[2, 0],  # conj <100|U|010>
        c=psi1[1, 1],  # conj <010|U|100>
        d=psi1[2, 1],  # conj <100|U|100>
        e=jnp.conj(state.psi2[4]),  # conj <110|U|110>
    )


def realised_gate(blocks: GateBlocks) -> jnp.ndarray:
    """The (4, 4) complex realised gate G (v1 convention; the physical gate is G^dag)."""
    zero = jnp.zeros_like(blocks.a)
    return jnp.array(
        [
            [blocks.g00, zero, zero, zero],
            [zero, blocks.a, blocks.b, zero],
            [zero, blocks.c, blocks.d, zero],
            [zero, zero, zero, blocks.e],
        ]
    )


def _weyl_from_eigenvalues(eigs: jnp.ndarray, digits: int | None) -> jnp.ndarray:
    """Childs et al. (PRA 68, 052311) coordinates from the 4 eigenvalues of G G~ / sqrt(det G)."""
    two_s = jnp.angle(eigs) / jnp.pi
    two_s = jnp.where(two_s <= -0.5, two_s + 2.0, two_s)
    s = jnp.sort(two_s / 2.0)[::-1]
    n = jnp.round(jnp.sum(s)).astype(jnp.int32)
    idx = jnp.arange(4)
    s = s - (idx < n)
    s = s[(idx + n) % 4]  # roll left by n
    c1, c2, c3 = s[0] + s[1], s[0] + s[2], s[1] + s[2]
    c1 = jnp.where(c3 < 0, 1.0 - c1, c1)
    c3 = jnp.abs(c3)
    coords = jnp.stack([c1, c2, c3])
    if digits is not None:
        coords = jnp.round(coords, digits) + 0.0
    return coords


def weyl_coordinates_blocks(blocks: GateBlocks, digits: int | None = WEYL_DIGITS) -> jnp.ndarray:
    """Weyl coordinates (c1, c2, c3), units of pi, of a block-diagonal gate in closed form.

    For G = diag(g00, [[a, b], [c, d]], e), G (sy x sy) G^T (sy x sy) is block diagonal with
    eigenvalues g00 e (twice) and ad + bc +- 2 sqrt(abcd); they are divided by sqrt(det G),
    det G = g00 e (ad - bc), as weylchamber does.

    Args:
        blocks: the gate's blocks.
        digits: rounding (8 like weylchamber); None for unrounded, differentiable coordinates.

    Returns:
        (3,) float array.
    """
    g, a, b, c, d, e = blocks
    ge = g * e
    root = 2.0 * jnp.sqrt(a * b * c * d)
    eigs = jnp.stack([ge, a * d + b * c + root, a * d + b * c - root, ge])
    eigs = eigs / jnp.sqrt(ge * (a * d - b * c))
    return _weyl_from_eigenvalues(eigs, digits)


_SY_SY = np.kron(np.array([[0, -1j], [1j, 0]]), np.array([[0, -1j], [1j, 0]]))


def weyl_coordinates(gate: np.ndarray, digits: int | None = WEYL_DIGITS) -> np.ndarray:
    """Weyl coordinates (c1, c2, c3), units of pi, of any (4, 4) gate (general eigensolver)."""
    gate = np.asarray(gate, dtype=complex)
    tilde = _SY_SY @ gate.T @ _SY_SY
    eigs = np.linalg.eigvals(gate @ tilde / np.sqrt(complex(np.linalg.det(gate))))
    return np.asarray(_weyl_from_eigenvalues(jnp.asarray(eigs), digits))


def concurrence(coords: jnp.ndarray) -> jnp.ndarray:
    """Gate concurrence from Weyl coordinates (units of pi), as weylchamber defines it.

    Exactly 1 inside the perfect-entangler polyhedron (flat there); otherwise the largest
    |sin(pi m)| over m in {c1-c3, c2-c1, c3-c2, c1+c3, c2+c1, c3+c2}.
    """
    c1, c2, c3 = coords[..., 0], coords[..., 1], coords[..., 2]
    inside = (c1 + c2 >= 0.5) & (c1 - c2 <= 0.5) & (c2 + c3 <= 0.5)
    m = jnp.stack([c1 - c3, c2 - c1, c3 - c2, c1 + c3, c2 + c1, c3 + c2], axis=-1)
    outside = jnp.max(jnp.abs(jnp.sin(jnp.pi * m)), axis=-1)
    return jnp.where(inside, 1.0, outside)


def unitarity(blocks: GateBlocks) -> jnp.ndarray:
    """Tr(G^dag G)/4 = sum |G_ij|^2 / 4 (1 without leakage)."""
    return sum(jnp.abs(x) ** 2 for x in blocks) / 4.0


def pe_cost(conc, unit, concurrence_weight: float = 1.0, unitarity_weight: float = 3.0):
    """The paper's J_T = 1 - (w_C C + w_U U)/(w_C + w_U) (default 1 - (C + 3U)/4)."""
    total = concurrence_weight + unitarity_weight
    return 1.0 - (concurrence_weight * conc + unitarity_weight * unit) / total


# ---- sqrt(iSWAP) fidelity with free virtual-Z corrections ------------------------------------

# Phase pattern of Tr(W^dag D_a P D_b) for a block-diagonal P: the six non-zero entries
# (00, 11, 12, 21, 22, 33) pick up phases 0, x, y, z, y+z-x, y+z of (x, y, z) =
# (a1+b1, a1+b0, a0+b1) (spec 2.4).
_BLOCK_ENTRIES = ((0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 3))
_BLOCK_EXPONENTS = np.array(
    [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [-1, 1, 1], [0, 1, 1]], dtype=float
)
_GRID_POINTS = 10
_NEWTON_STEPS = 8


def _maximise_phase_trace(coeffs: jnp.ndarray, exponents: np.ndarray) -> jnp.ndarray:
    """Max over phases p of |sum_k coeffs_k exp(i exponents_k . p)|^2.

    A 10-point-per-axis grid on [-pi, pi) finds the basin, then modified Newton steps (Hessian
    eigenvalues capped below -1e-6 (1 + max|w|), so every step ascends) polish it. The phases are
    found on stop-gradient copies; the returned value is re-evaluated with live coefficients, so
    its gradient is exact at the optimum (envelope theorem).
    """
    n_phases = exponents.shape[1]
    real = jnp.real(coeffs).dtype  # float32 environments stay float32 under x64
    exps = jnp.asarray(exponents, real)
    frozen = jax.lax.stop_gradient(coeffs)

    def objective(phases, cs):
        return jnp.abs(jnp.sum(cs * jnp.exp(1j * (exps @ phases)))) ** 2

    axis = jnp.linspace(-jnp.pi, jnp.pi, _GRID_POINTS, endpoint=False, dtype=real)
    grid = jnp.stack(jnp.meshgrid(*([axis] * n_phases), indexing="ij"), axis=-1).reshape(-1, n_phases)
    values = jax.vmap(objective, in_axes=(0, None))(grid, frozen)
    phases = grid[jnp.argmax(values)]

    grad = jax.grad(objective)
    hess = jax.hessian(objective)

    def newton(p, _):
        w, v = jnp.linalg.eigh(hess(p, frozen))
        cap = -1e-6 * (1.0 + jnp.max(jnp.abs(w)))
        w = jnp.minimum(w, cap)
        step = -(v @ ((v.T @ grad(p, frozen)) / w))
        return p + step, None

    phases, _ = jax.lax.scan(newton, phases, None, length=_NEWTON_STEPS)
    return objective(jax.lax.stop_gradient(phases), coeffs)


def sqrt_iswap_fidelity_blocks(blocks: GateBlocks) -> jnp.ndarray:
    """Average gate fidelity to sqrt(iSWAP) with optimal virtual-Z corrections (leakage included).

    F = (Tr(M M^dag) + |Tr M|^2)/20 (Pedersen et al. 2007, d = 4) with M = W^dag D_a P D_b,
    P = G^dag the physical gate and D local Z rotations chosen to maximise |Tr M|.
    """
    physical = jnp.conj(realised_gate(blocks)).T
    coeffs = jnp.stack([jnp.asarray(np.conj(SQRT_ISWAP[i, j]), physical.dtype) * physical[i, j] for i, j in _BLOCK_ENTRIES])
    best = _maximise_phase_trace(coeffs, _BLOCK_EXPONENTS)
    return (4.0 * unitarity(blocks) + best) / 20.0


def _general_exponents() -> np.ndarray:
    """Phase pattern of Tr(W^dag D_a P D_b) for a general P over (a0, a1, b0, b1)."""
    local = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=float)  # D = diag(1, e^{i p1}, ...)
    return np.array([np.concatenate([local[i], local[j]]) for i, j in itertools.product(range(4), range(4))])


def gate_metrics(gate, *, physical: bool = False) -> dict[str, float | np.ndarray]:
    """Metrics of any 4x4 gate (basis |00>, |01>, |10>, |11>, first digit q0).

    Args:
        gate: (4, 4) complex array.
        physical: True if ``gate`` is the physical matrix M (M_jk = <b_j|U|b_k>); False (default)
            if it is in the v1 overlap convention G = M^dag that ``rollout_pulse`` reports.

    Returns:
        dict with ``weyl`` (3,), ``concurrence``, ``unitarity``, ``JT`` (the PE cost) and
        ``sqrt_iswap_fidelity`` (optimal virtual Z).
    """
    gate = np.asarray(gate, dtype=complex)
    if gate.shape != (4, 4) or not np.all(np.isfinite(gate)):
        raise ValueError(f"gate: expected a finite (4, 4) complex array, got shape {gate.shape}")
    realised = gate.conj().T if physical else gate
    with jax.enable_x64(True):  # scoped: the caller's JAX precision setting is left alone
        coords = weyl_coordinates(realised)
        conc = float(concurrence(jnp.asarray(coords)))
        unit = float(np.sum(np.abs(realised) ** 2) / 4.0)
        coeffs = (SQRT_ISWAP.conj() * realised.conj().T).reshape(-1)
        best = float(_maximise_phase_trace(jnp.asarray(coeffs), _general_exponents()))
    return {
        "weyl": coords,
        "concurrence": conc,
        "unitarity": unit,
        "JT": float(pe_cost(conc, unit)),
        "sqrt_iswap_fidelity": (4.0 * unit + best) / 20.0,
    }


OBJECTIVES = ("pe", "sqrt_iswap")


class StateMetrics(NamedTuple):
    """Metrics of the gate realised so far (scalars, or arrays under vmap/scan).

    Attributes:
        JT: cost of the active objective (PE cost J_T, or 1 - F for sqrt(iSWAP)).
        concurrence: gate concurrence C.
        unitarity: U = Tr(G^dag G)/4.
    """

    JT: jnp.ndarray
    concurrence: jnp.ndarray
    unitarity: jnp.ndarray


def state_metrics(
    state: SectorState,
    objective: str = "pe",
    concurrence_weight: float = 1.0,
    unitarity_weight: float = 3.0,
    weyl_digits: int | None = WEYL_DIGITS,
) -> StateMetrics:
    """Cost, concurrence and unitarity of the gate realised by ``state`` (traceable).

    Args:
        state: propagated sector state.
        objective: "pe" (the paper's J_T) or "sqrt_iswap" (1 - F with free virtual Z).
        concurrence_weight: weight w_C of the concurrence in the PE cost
            J_T = 1 - (w_C C + w_U U)/(w_C + w_U) (``pe_cost``).
        unitarity_weight: weight w_U of the unitarity in the PE cost.
        weyl_digits: rounding of the Weyl coordinates (the environment's); None keeps them
            unrounded, which gradients need (rounding has zero derivative).
    """
    blocks = gate_blocks(state)
    conc = concurrence(weyl_coordinates_blocks(blocks, digits=weyl_digits))
    unit = unitarity(blocks)
    if objective == "pe":
        cost = pe_cost(conc, unit, concurrence_weight, unitarity_weight)
    elif objective == "sqrt_iswap":
        cost = 1.0 - sqrt_iswap_fidelity_blocks(blocks)
    else:
        raise ValueError(f"objective: expected one of {OBJECTIVES}, got {objective!r}")
    return StateMetrics(cost, conc, unit)
