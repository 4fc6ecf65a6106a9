"""Exact propagation of the computational states through piecewise-constant coupler pulses.

Only the images of the computational states are tracked, sector by sector (see ``hamiltonian``):
the N=1 images of |010> and |100> (two 3-vectors) and the N=2 image of |110> (a 6-vector); |000>
has energy 0 and never moves. Those 12 complex amplitudes are the whole state: they give the gate
(``metrics.realised_gate``) and the observation.

Each sample applies exp(-i H(u_k) dt) exactly. On a 2-core CPU a batched ``eigh`` of 3x3 and 6x6
blocks is dominated by the fixed cost of each small LAPACK call, so the exponential is applied to
the states directly, in real arithmetic, as a truncated Taylor series of the block shifted to the
centre of its Gershgorin interval:

    exp(-i H dt) psi = exp(-i c dt) sum_{k=0}^{m} (-i (H - c) dt)^k psi / k!

With theta >= ||(H - c) dt||_2 (the Gershgorin half-width bounds it: the block is symmetric) the
remainder is below theta^(m+1)/(m+1)! * e^theta, and the degree m (and, for long samples, a number
of sub-steps) is chosen so that this is below 2^-54 for the largest theta the caller declares.
The result is exact to rounding: it agrees with a dense 27x27 ``scipy.linalg.expm`` to ~1e-14 and
stays unitary to ~1e-14 over 1000 samples (tests/quantgate_env/physics/test_physics.py). A sample
whose Gershgorin bound exceeds the declared theta returns NaN rather than a silently inexact
state. ``bench/propagation.py`` measures this against eigh and dense expm.

**Bound.** A plan takes at most ``MAX_SUBSTEPS`` = 64 sub-steps of theta <= 3, so it covers
theta <= ``MAX_THETA`` = 192 per sample; ``taylor_plan`` refuses more (the sub-steps are unrolled
at trace time, so an unbounded count never finishes compiling). theta is the spread of the
sample's spectrum times dt, i.e. how many radians the fastest beat of the device turns during one
piecewise-constant sample. The paper's settings give 1.8 (dt = 50 ps, |u| <= 20 rad/ns, spectral
half-width 36.7 rad/ns, i.e. 16.7 + |u|); with the callers' safety margins 192 admits samples up
to ~4.7 ns at that amplitude bound (arbitrary waveform generators sample at >= 1 GS/s, i.e.
<= 1 ns), amplitudes up to ~165 rad/ns (26 GHz, far beyond any coupler's tuning range) with 1 ns
samples, and ~3600 rad/ns at the paper's 50 ps. Beyond it a "sample" holds the Hamiltonian for
tens of periods of its fastest beat, which no instrument plays as one step, and the cost per
sample (64 sub-steps of degree 29 are ~77x the paper's work) would grow without limit. The callers (``mdp.plan.plan_for``, ``tools.pulses.pulse_plan``, ``refine_pulse``)
check the bound first and name the option, argument or CSV row responsible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .device import DeviceParams
from .hamiltonian import SECTOR1_CONTROL, SECTOR2_CONTROL, SectorDrift, sector_drift

__all__ = [
    "MAX_SUBSTEPS",
    "MAX_THETA",
    "SectorState",
    "TaylorPlan",
    "initial_sector_state",
    "taylor_plan",
    "theta_bound",
    "theta_bound_lines",
    "propagate_sample",
    "propagate_samples",
    "propagate_samples_lines",
    "renormalise",
]

# Target truncation error per sample, relative to a unit vector: half an ulp of float64.
_TAYLOR_TOL = 2.0**-54
# Largest theta per sub-step: the series' terms grow to ~e^theta / sqrt(theta) before they cancel,
# so rounding costs ~eps e^theta (1e-7 at theta = 31, a 0.83 ns sample at 20 rad/ns, when one
# sub-step minimised the work); at 3 that is ~4e-15.
_MAX_THETA_PER_SUBSTEP = 3.0
#: Most sub-steps per sample a plan may take (they are unrolled when the step is traced).
MAX_SUBSTEPS = 64
#: Largest theta = ||(H - c) dt|| per sample a plan covers (192; see the module docstring).
MAX_THETA = MAX_SUBSTEPS * _MAX_THETA_PER_SUBSTEP


class SectorState(NamedTuple):
    """Images of the computational states under the propagator so far.

    Attributes:
        psi1: (3, 2) complex: columns are the images of |010> and |100> in the N=1 basis
            (|001>, |010>, |100>).
        psi2: (6,) complex: the image of |110> in the N=2 basis
            (|002>, |011>, |020>, |101>, |110>, |200>).
    """

    psi1: jnp.ndarray
    psi2: jnp.ndarray


class TaylorPlan(NamedTuple):
    """Static parameters of the truncated-Taylor exponential (hashable: used at trace time).

    Attributes:
        theta_max: largest ||(H - c) dt|| the plan is exact for (dimensionless).
        substeps: number of equal sub-steps per sample.
        degree: Taylor degree per sub-step.
    """

    theta_max: float
    substeps: int
    degree: int


def initial_sector_state(dtype=None) -> SectorState:
    """The identity propagator: |010>, |100> and |110> map to themselves.

    Args:
        dtype: complex dtype (default: JAX's default complex, complex128 under x64).
    """
    dtype = jnp.result_type(complex) if dtype is None else dtype
    psi1 = jnp.zeros((3, 2), dtype=dtype).at[1, 0].set(1.0).at[2, 1].set(1.0)
    psi2 = jnp.zeros((6,), dtype=dtype).at[4].set(1.0)
    return SectorState(psi1, psi2)


def _degree_for(theta: float) -> int:
    """Smallest m with theta^(m+1)/(m+1)! * e^theta below the tolerance."""
    m, term = 0, theta  # term = theta^(m+1)/(m+1)!
    while term * math.exp(theta) > _TAYLOR_TOL:
        m += 1
        term *= theta / (m + 1)
    return max(m, 1)


def taylor_plan(theta_max: float) -> TaylorPlan:
    """Choose sub-steps and degree minimising the work for samples up to ``theta_max``.

    Args:
        theta_max: bound on ||(H - c) dt||_2 (dimensionless, in (0, ``MAX_THETA``]).

    Raises:
        ValueError: theta_max not positive and finite, or above ``MAX_THETA`` (callers check the
            bound first with a message naming the user's option; this is the last line).
    """
    if not (math.isfinite(theta_max) and theta_max > 0):
        raise ValueError(f"theta_max: expected a positive finite number, got {theta_max!r}")
    if theta_max > MAX_THETA:
        raise ValueError(
            f"theta_max: expected at most {MAX_THETA:g} (the exact propagator's {MAX_SUBSTEPS} sub-steps "
            f"of theta <= {_MAX_THETA_PER_SUBSTEP:g} per sample), got {theta_max:.4g}"
        )
    fewest = math.ceil(theta_max / _MAX_THETA_PER_SUBSTEP)
    best = min(
        (s * _degree_for(theta_max / s), s) for s in range(fewest, MAX_SUBSTEPS + 1)
    )
    substeps = best[1]
    return TaylorPlan(float(theta_max), substeps, _degree_for(theta_max / substeps))


def _gershgorin(h: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Centre and half-width of an interval containing the spectrum of a symmetric matrix."""
    diag = jnp.diagonal(h, axis1=-2, axis2=-1)
    radius = jnp.sum(jnp.abs(h), axis=-1) - jnp.abs(diag)
    lo = jnp.min(diag - radius, axis=-1)
    hi = jnp.max(diag + radius, axis=-1)
    return 0.5 * (lo + hi), 0.5 * (hi - lo)


def theta_bound(device: DeviceParams, u_max: float, dt: float) -> float:
    """Largest Gershgorin half-width x dt over both blocks for |u| <= u_max (concrete numbers).

    The half-width is convex in u (a maximum of affine functions minus a minimum of affine
    functions), so its maximum over [-u_max, u_max] is at an end point.
    """
    return theta_bound_lines(device, [(SECTOR1_CONTROL, SECTOR2_CONTROL, u_max)], dt)


def theta_bound_lines(
    device: DeviceParams, lines: Sequence[tuple[np.ndarray, np.ndarray, float]], dt: float
) -> float:
    """``theta_bound`` for several control lines, each with its own bound |u_line| <= u_max.

    The half-width is convex in the amplitude vector (same argument as for one line), so its
    maximum over the box of bounds is at one of its 2^n_lines corners.

    Args:
        device: concrete device parameters (GHz).
        lines: (diagonal in the N=1 block (3,), in the N=2 block (6,), u_max rad/ns) per line.
        dt: sample duration, ns.
    """
    # float64 whatever the caller's setting: a plan (and the env's hash) must not depend on it
    # (an overflowing bound gives inf, reported as such; numpy's warning would only add noise)
    with jax.enable_x64(True), np.errstate(over="ignore", invalid="ignore"):
        drift = jax.tree.map(np.asarray, sector_drift(jax.tree.map(np.asarray, device)))
        worst = 0.0
        for signs in itertools.product((-1.0, 1.0), repeat=len(lines)):
            for block, h in enumerate((drift.h1, drift.h2)):
                shift = sum(s * u_max * np.asarray(diags[block]) for s, (*diags, u_max) in zip(signs, lines))
                _, half_width = _gershgorin(np.asarray(h) + np.diag(shift))
                theta = float(np.max(half_width)) * dt
                if not math.isfinite(theta):  # e.g. a bound of 1e308 overflows; max() would drop a NaN
                    return math.inf
                worst = max(worst, theta)
    return worst


class _PreparedBlock(NamedTuple):
    """One block's per-sample quantities, shared by the exact and the fast series.

    Attributes:
        generator: (n, n) real (H - c) tau, tau = dt / substeps (dimensionless).
        centre: () Gershgorin centre c, rad/ns.
        half_width: () Gershgorin half-width, rad/ns.
        tau: sub-step duration, ns.
    """

    generator: jnp.ndarray
    centre: jnp.ndarray
    half_width: jnp.ndarray
    tau: float


def _prepare_block(h: jnp.ndarray, shift: jnp.ndarray, dt, plan: TaylorPlan) -> _PreparedBlock:
    """The shifted, scaled generator of exp(-i (h + diag(shift)) dt) and its Gershgorin interval."""
    hu = h + jnp.diag(shift)
    centre, half_width = _gershgorin(hu)
    tau = dt / plan.substeps
    return _PreparedBlock((hu - centre * jnp.eye(h.shape[0], dtype=h.dtype)) * tau, centre, half_width, tau)


def _finish_block(re: jnp.ndarray, im: jnp.ndarray, block: _PreparedBlock, dt, plan: TaylorPlan) -> jnp.ndarray:
    """The series' real and imaginary parts times exp(-i c dt), NaN where the sample exceeds the plan."""
    out = jax.lax.complex(re, im) * jnp.exp(-1j * block.centre * dt)
    exact = block.half_width * block.tau <= plan.theta_max / plan.substeps * (1.0 + 1e-9)
    return jnp.where(exact, out, jnp.nan)


def _expm_apply(h: jnp.ndarray, control: np.ndarray, u, dt, psi: jnp.ndarray, plan: TaylorPlan):
    """exp(-i (h + u diag(control)) dt) @ psi for a real symmetric block, in real arithmetic.

    Args:
        h: (n, n) real drift block, rad/ns.
        control: (n,) diagonal of the control operator in the block.
        u: scalar control amplitude, rad/ns.
        dt: sample duration, ns.
        psi: (n, k) complex states.
        plan: static Taylor plan.

    Returns:
        (n, k) complex propagated states (NaN if the sample exceeds the plan's theta).
    """
    return _expm_apply_shifted(h, u * jnp.asarray(control, dtype=h.dtype), dt, psi, plan)


def _expm_apply_shifted(h: jnp.ndarray, shift: jnp.ndarray, dt, psi: jnp.ndarray, plan: TaylorPlan):
    """exp(-i (h + diag(shift)) dt) @ psi: ``_expm_apply`` with the controls already summed.

    All control lines are number operators, hence diagonal in the blocks, so any number of lines
    enters as one (n,) diagonal shift = sum_line u_line * diagonal_line (rad/ns).
    """
    return _expm_apply_blocks(((h, shift, psi),), dt, plan)[0]


def _expm_apply_blocks(blocks, dt, plan: TaylorPlan):
    """``_expm_apply_shifted`` of several independent blocks, their series in one loop.

    Args:
        blocks: tuple of (h (n, n) real drift block rad/ns, shift (n,) rad/ns, psi (n, k) complex).
        dt: sample duration, ns.
        plan: static Taylor plan.

    Returns:
        tuple of the (n, k) propagated states, in ``blocks`` order.

    Each block's arithmetic is op for op that of a loop of its own; one loop for both sectors
    halves the loop iterations, whose fixed cost dominates a step at batch 1 (bench/env_throughput.py).
    """
    prepared = tuple(_prepare_block(h, shift, dt, plan) for h, shift, _ in blocks)
    generators = tuple(block.generator for block in prepared)

    def add_term(k, carry):
        out = []
        for a, (re, im, term_re, term_im) in zip(generators, carry):
            # next Taylor term: (-i a / k)(x + i y) = (a y - i a x) / k
            term_re, term_im = (a @ term_im) / k, -(a @ term_re) / k
            out.append((re + term_re, im + term_im, term_re, term_im))
        return tuple(out)

    parts = tuple((jnp.real(psi), jnp.imag(psi)) for _, _, psi in blocks)
    for _ in range(plan.substeps):
        # a rolled loop compiles ~3x faster than the unrolled series, and an unrolled one rounds
        # differently (XLA fuses across terms): the rolled form is the one the results are pinned to
        carry = jax.lax.fori_loop(1, plan.degree + 1, add_term, tuple((re, im, re, im) for re, im in parts))
        parts = tuple((re, im) for re, im, _, _ in carry)
    return tuple(_finish_block(re, im, block, dt, plan) for (re, im), block in zip(parts, prepared))


def propagate_sample(state: SectorState, drift: SectorDrift, u, dt, plan: TaylorPlan) -> SectorState:
    """Apply one piecewise-constant sample of amplitude ``u`` (rad/ns) for ``dt`` ns."""
    psi1 = _expm_apply(drift.h1, SECTOR1_CONTROL, u, dt, state.psi1, plan)
    psi2 = _expm_apply(drift.h2, SECTOR2_CONTROL, u, dt, state.psi2[:, None], plan)[:, 0]
    return SectorState(psi1, psi2)


def renormalise(state: SectorState) -> SectorState:
    """Pull the sector states back onto the unit sphere (float32 mode; the exact map is unitary).

    In float32 each sample's rounding changes the norms by ~1e-7, and over hundreds of samples the
    random walk reaches ~1e-6 in the unitarity U, hence in J_T = 1 - (C + 3U)/4. One Newton step
    towards the polar factor, psi <- psi (3 - psi^dag psi) / 2 (Loewdin orthonormalisation to
    first order; the deviation is ~1e-7, so the second-order remainder is ~1e-14), removes it
    without an eigendecomposition: the images of |010>, |100> become orthonormal again and the
    image of |110> normalised. Leakage (population outside the computational states) is physical
    and untouched: only the norm of the whole sector vector is restored.
    """
    overlap = jnp.conj(state.psi1).T @ state.psi1  # (2, 2), identity up to rounding
    psi1 = state.psi1 @ (1.5 * jnp.eye(2, dtype=overlap.dtype) - 0.5 * overlap)
    psi2 = state.psi2 * (1.5 - 0.5 * jnp.sum(jnp.abs(state.psi2) ** 2))
    return SectorState(psi1, psi2)


def propagate_samples_lines(
    state: SectorState, drift: SectorDrift, amps: jnp.ndarray, diagonals: tuple[np.ndarray, np.ndarray], dt,
    plan: TaylorPlan, renormalised: bool = False, expm_blocks=None, unroll: int | bool = 1,
) -> tuple[SectorState, SectorState]:
    """``propagate_samples`` for several control lines played at once.

    Args:
        state: initial state.
        drift: sector drift blocks (rad/ns).
        amps: (n_samples, n_lines) amplitudes in rad/ns.
        diagonals: the lines' diagonals in the N=1 block (n_lines, 3) and N=2 block (n_lines, 6)
            (rows from ``hamiltonian.line_diagonals``, in the column order of ``amps``).
        dt: sample duration, ns.
        plan: static Taylor plan covering the lines' bounds (``theta_bound_lines``).
        renormalised: apply ``renormalise`` after every sample (the float32 mode; static).
        expm_blocks: the block exponential, ``_expm_apply_blocks``'s signature (static; None: the
            exact series; ``fast_propagation`` passes its own).
        unroll: ``lax.scan``'s unroll over samples (static; 1 keeps the exact path's program).

    Returns:
        (final state, stacked states with a leading n_samples axis).
    """
    expm_blocks = _expm_apply_blocks if expm_blocks is None else expm_blocks
    d1, d2 = np.asarray(diagonals[0]), np.asarray(diagonals[1])

    def shift(u, d):
        # u_0 d_0 + u_1 d_1 + ...: with one line exactly the product propagate_sample forms, so
        # a coupler-only pulse propagates bit for bit as in the single-line path
        total = u[0] * jnp.asarray(d[0], dtype=amps.dtype)
        for line in range(1, d.shape[0]):
            total = total + u[line] * jnp.asarray(d[line], dtype=amps.dtype)
        return total

    def body(carry, u):
        psi1, psi2 = expm_blocks(((drift.h1, shift(u, d1), carry.psi1),
                                  (drift.h2, shift(u, d2), carry.psi2[:, None])), dt, plan)
        nxt = SectorState(psi1, psi2[:, 0])
        if renormalised:
            nxt = renormalise(nxt)
        return nxt, nxt

    return jax.lax.scan(body, state, amps, unroll=unroll)


def propagate_samples(
    state: SectorState, drift: SectorDrift, amps: jnp.ndarray, dt, plan: TaylorPlan
) -> tuple[SectorState, SectorState]:
    """Apply samples one after another; return the final state and the state after each sample.

    Args:
        state: initial state.
        drift: sector drift blocks (rad/ns).
        amps: (n_samples,) amplitudes u_k in rad/ns.
        dt: sample duration, ns.
        plan: static Taylor plan covering max |u|.

    Returns:
        (final state, stacked states with a leading n_samples axis).
    """

    def body(carry, u):
        nxt = propagate_sample(carry, drift, u, dt, plan)
        return nxt, nxt

    return jax.lax.scan(body, state, amps)
