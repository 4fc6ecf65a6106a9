"""PPO's learning step: every gradient step of one update, for one learner's parameters.

`n_epochs` passes over a fresh permutation of the batch split into `n_minibatches`, each a
gradient step of a clipped-surrogate loss with one optimiser (global-norm clip, Adam) and a
learning rate scheduled per gradient step. PPO runs it on its rollout; IPPO runs the same step
vmapped over the stacked agents of a group (`ippo.learn`), with its own loss (the Lagrangian
variant adds a cost critic) and schedule.

Optional early stop (SB3 semantics): the first minibatch whose approximate KL to the rollout
policy exceeds ``kl_stop`` is not applied, and every remaining gradient step of the update is
skipped (a `lax.cond`, so skipped steps cost nothing). PPO always compiles the check (``"check"``
when its target_kl is inf, ``"stop"`` otherwise), IPPO never (``None``): the two programs compute
the same values but XLA fuses them differently, and each keeps the bits it had before the learner
was shared. The limit itself is an argument of ``learn``, not a compiled constant, so updates
that differ only in it share one program.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from ..common.minibatch import minibatch_epochs
from ..common.optimizer import apply_adam

__all__ = ["KL_CHECKS", "make_learner"]


#: ``make_learner``'s KL checks: compiled with no stop (PPO with target_kl = inf), or stopping.
KL_CHECKS = ("check", "stop")


def make_learner(loss_fn: Callable, tx: optax.GradientTransformation, n_epochs: int,
                 n_minibatches: int, kl_check: str | None = None):
    """Build ``learn(params, opt_state, data, key, first_step, lr_at[, kl_stop]) -> (params, opt_state, stats)``.

    Args:
        loss_fn: ``loss_fn(params, minibatch) -> (loss, stats)``; stats (scalars) must hold
            ``approx_kl`` (what the KL check reads).
        tx: the optimiser direction (`common.optimizer.make_optimizer`).
        n_epochs: passes over the batch.
        n_minibatches: minibatches per pass (they must divide the batch).
        kl_check: None: no KL check; ``"check"``: a minibatch over ``kl_stop`` is not applied
            (compiled, but the update never stops early: PPO with target_kl = inf, whose
            ``kl_stop`` is inf); ``"stop"``: it also ends the update (`KL_CHECKS`).

    Args of ``learn``:
        params: the learner's parameters (a pytree).
        opt_state: `tx`'s state of `params`.
        data: pytree of (B, ...) arrays, the batch the loss reads.
        key: PRNG key of the permutations.
        first_step: () int, gradient steps scheduled before this update.
        lr_at: ``lr_at(step) -> ()`` float32 learning rate of gradient step `step`.
        kl_stop: () float32 approx-KL limit of the check (required with `kl_check`, unused
            without).

    Returns of ``learn``: the new parameters and optimiser state, and stats (scalars): the
    loss's stats averaged over the minibatches that were evaluated (skipped ones carry NaN),
    ``lr`` (the last scheduled step's) and ``grad_steps`` (gradient steps applied).
    """
    if kl_check is not None and kl_check not in KL_CHECKS:
        raise ValueError(f"kl_check: expected None or one of {KL_CHECKS}, got {kl_check!r}")
    checked = kl_check is not None
    early_stop = kl_check == "stop"
    mean = jnp.nanmean if checked else jnp.mean  # only a checked update can skip minibatches

    def learn(params, opt_state, data, key, first_step, lr_at, kl_stop=None):
        if checked and kl_stop is None:
            raise ValueError(f"kl_stop: expected the () approx-KL limit of kl_check "
                             f"{kl_check!r}, got None")
        def minibatch(carry, mb, e, m):
            params, opt_state, stopped = carry
            lr = lr_at(first_step + e * n_minibatches + m)

            def take_step(_):
                (_, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, mb)
                new_params, new_opt = apply_adam(tx, grads, opt_state, params, lr)
                if not checked:
                    return new_params, new_opt, jnp.bool_(False), stats
                too_far = stats["approx_kl"] > kl_stop
                keep = lambda old, new: jnp.where(too_far, old, new)  # noqa: E731
                return (jax.tree_util.tree_map(keep, params, new_params),
                        jax.tree_util.tree_map(keep, opt_state, new_opt), too_far, stats)

            def skip(_):
                shapes = jax.eval_shape(loss_fn, params, mb)[1]
                nan_stats = {k: jnp.full(v.shape, jnp.nan, v.dtype) for k, v in shapes.items()}
                return params, opt_state, jnp.bool_(True), nan_stats

            if early_stop:
                params, opt_state, stopped, stats = jax.lax.cond(stopped, skip, take_step, None)
            else:
                params, opt_state, stopped, stats = take_step(None)
            applied = jnp.logical_not(stopped).astype(jnp.float32)
            return (params, opt_state, stopped), {**stats, "lr": lr, "grad_steps": applied}

        (params, opt_state, _), stats = minibatch_epochs(
            minibatch, (params, opt_state, jnp.bool_(False)), data, key, n_epochs, n_minibatches)
        lr_last = stats.pop("lr")[-1, -1]
        grad_steps = stats.pop("grad_steps").sum()
        stats = {k: mean(v) for k, v in stats.items()}
        stats["lr"] = lr_last
        stats["grad_steps"] = grad_steps
        return params, opt_state, stats

    return learn
