"""The opt-in fast propagation (``propagation="fast"``): the exact path's series, laid out for speed.

Same mathematics as ``propagation`` (the truncated Taylor series of the Gershgorin-shifted 3x3 and
6x6 blocks, the same plan, degree and NaN check, through the shared ``_prepare_block`` and
``_finish_block``), in the form that measured fastest for batched environments:

* each matrix-vector product is n broadcast multiply-adds instead of a ``dot`` (XLA's CPU backend
  runs every small batched dot as a call of its own);
* under ``jax.vmap`` the batch axis is moved behind the matrix axes (a ``custom_vmap`` rule), so the
  multiply-adds run over the contiguous batch rather than strided over tiny matrices;
* each term is scaled by 1/k (a multiplication) instead of divided by k.

Measured and not adopted (bench/README.md, issue 16): unrolling the Taylor series or the scan over
a step's samples (2-3x slower: XLA's CPU fusion of the long chain), ``fori_loop(unroll=2..8)``
(within noise). At batch 1 the series is ~15 % of a step (the observation, metrics and dispatch
are the rest), so this mode mainly helps vector envs and training rollouts.

The result is the same exponential to rounding, but the floating-point operations are ordered
differently, so the last bits differ from the exact path (~1e-15 per sample;
tests/quantgate_env/physics/test_fast_propagation.py checks it against dense 27x27 ``scipy.linalg.expm``
products over whole episodes). Hence opt-in: the default ``"exact"`` path is the one the paper's
configurations reproduce bit for bit. No gradients are defined through the ``custom_vmap`` rule
(the environment step is never differentiated; GRAPE uses the exact path).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .propagation import (
    SectorState,
    TaylorPlan,
    _finish_block,
    _prepare_block,
    propagate_samples_lines,
)

__all__ = ["expm_apply_blocks_fast", "propagate_samples_lines_fast"]


def _matvec(a: jnp.ndarray, x: jnp.ndarray) -> jnp.ndarray:
    """Matrix-vector product over the two leading axes, any trailing batch axes: (n, n, *b) x (n, k, *b) -> (n, k, *b).

    Broadcast multiply-adds, not a ``dot``: XLA's CPU backend runs every (batched) dot of these
    3x3 and 6x6 blocks as a call of its own, while multiply-adds over a trailing batch axis are
    contiguous vector loops that fuse with the rest of the Taylor term.
    """
    out = a[:, 0][:, None] * x[0][None]
    for j in range(1, a.shape[0]):
        out = out + a[:, j][:, None] * x[j][None]
    return out


def _series_batch_last(generators, parts, plan: TaylorPlan):
    """The Taylor series of each block, matrix axes leading and any batch axes trailing.

    Args:
        generators: per block (n, n, *b) real (H - c) tau (``propagation._prepare_block``).
        parts: per block (re, im), each (n, k, *b): the states' real and imaginary parts.
        plan: static Taylor plan (sub-steps and degree).

    Returns:
        per block (re, im) of sum_k (-i a)^k psi / k!, applied ``plan.substeps`` times.
    """

    def add_term(k, carry):
        inv_k = 1.0 / k  # one scalar division per term, then multiplications
        out = []
        for a, (re, im, term_re, term_im) in zip(generators, carry):
            # next Taylor term: (-i a / k)(x + i y) = (a y - i a x) / k
            term_re, term_im = _matvec(a, term_im) * inv_k, -_matvec(a, term_re) * inv_k
            out.append((re + term_re, im + term_im, term_re, term_im))
        return tuple(out)

    for _ in range(plan.substeps):
        # rolled over terms: the unrolled series measured slower (and compiles ~3x slower)
        carry = jax.lax.fori_loop(1, plan.degree + 1, add_term, tuple((re, im, re, im) for re, im in parts))
        parts = tuple((re, im) for re, im, _, _ in carry)
    return parts


@functools.cache
def _series(plan: TaylorPlan):
    """``_series_batch_last`` whose vmap moves the batch axis last instead of first (one per plan).

    Under ``jax.vmap`` (the vector envs, a training rollout) JAX would put the batch axis first,
    making every element-wise product a strided loop over tiny matrices; the rule below moves it
    behind the matrix axes, so each product runs over the contiguous batch. Outer vmaps (nested
    batches) batch the rule itself as ordinary JAX code.
    """
    series = jax.custom_batching.custom_vmap(lambda generators, parts: _series_batch_last(generators, parts, plan))

    @series.def_vmap
    def _batch_last_rule(axis_size, in_batched, generators, parts):
        def last(x, batched):
            return jnp.moveaxis(x, 0, -1) if batched else jnp.broadcast_to(x[..., None], x.shape + (axis_size,))

        generators, parts = jax.tree.map(last, (generators, parts), tuple(in_batched))
        out = jax.tree.map(lambda x: jnp.moveaxis(x, -1, 0), _series_batch_last(generators, parts, plan))
        return out, jax.tree.map(lambda _: True, out)

    return series


def expm_apply_blocks_fast(blocks, dt, plan: TaylorPlan):
    """``propagation._expm_apply_blocks`` with element-wise products and the batch axis last.

    Args:
        blocks: tuple of (h (n, n) real drift block rad/ns, shift (n,) rad/ns, psi (n, k) complex).
        dt: sample duration, ns.
        plan: static Taylor plan (the exact path's: same sub-steps, degree and theta bound).

    Returns:
        tuple of the (n, k) propagated states, in ``blocks`` order (NaN where a sample exceeds
        the plan's theta, as in the exact path).
    """
    prepared = tuple(_prepare_block(h, shift, dt, plan) for h, shift, _ in blocks)
    parts = tuple((jnp.real(psi), jnp.imag(psi)) for _, _, psi in blocks)
    parts = _series(plan)(tuple(block.generator for block in prepared), parts)
    return tuple(_finish_block(re, im, block, dt, plan) for (re, im), block in zip(parts, prepared))


def propagate_samples_lines_fast(
    state: SectorState, drift, amps: jnp.ndarray, diagonals, dt, plan: TaylorPlan, renormalised: bool = False,
) -> tuple[SectorState, SectorState]:
    """``propagation.propagate_samples_lines`` with ``expm_apply_blocks_fast`` and the samples unrolled.

    Args and returns as ``propagate_samples_lines``: amps (n_samples, n_lines) rad/ns, dt ns.
    """
    # the scan over samples stays rolled: unrolling it measured slower at every batch size
    return propagate_samples_lines(state, drift, amps, diagonals, dt, plan, renormalised,
                                   expm_blocks=expm_apply_blocks_fast)
