"""TRPO following sb3_contrib.TRPO.train, one compiled function per update.

Actor: one natural-gradient step. The direction solves (F + damping I) s = g by conjugate gradient,
with F the Hessian of the mean KL (Fisher-vector products by double differentiation, the matrix is
never formed); the maximal step makes the quadratic KL model equal 2 * target_kl; a backtracking line
search over 0.8^k (k = 0..9, all candidates evaluated at once with vmap; or one at a time, stopping
at the first accepted, with ``sequential_line_search``) keeps the first candidate with KL < target_kl
and a surrogate better than before, or the old parameters if none qualifies.
Critic: n_critic_updates epochs of Adam on the value MSE (minibatches of batch_size), learning rate
with harmonic decay, constant within an update (SB3 sets it once per update).

target_kl enters the learning half as an argument (`traced_settings`), as PPO's KL limit does
(`ppo.update` says why the learning-rate schedule stays compiled in).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..common.cg import conjugate_gradient
from ..common.losses import value_loss
from ..common.minibatch import minibatch_epochs
from ..common.optimizer import apply_adam, harmonic_lr, make_optimizer
from ..common.rollout import make_rollout_phase
from ..common.state import TrainState, init_train_state
from .config import TRPOConfig
from .losses import kl_hessian_vector_product, mean_kl, surrogate

__all__ = ["actor_step", "init", "make_phases", "make_update", "traced_settings"]


def actor_step(model, actor_params, obs, action, logp_old, adv, cfg: TRPOConfig, target_kl=None):
    """One trust-region step of the actor.

    Args:
        model: `ActorCritic`.
        actor_params: ``params["actor"]``.
        obs: (B, obs_dim) observations.
        action: (B, *action_shape) actions taken.
        logp_old: (B,) log-probs at collection.
        adv: (B,) advantages (already normalised if configured).
        cfg: `TRPOConfig` (everything but target_kl, when that is given).
        target_kl: () float32 KL limit (``traced_settings(cfg)["target_kl"]``); None: cfg's.

    Returns:
        (new actor params, stats) with stats policy_objective, kl (KL(new || old) of the accepted
        step, 0 if none), line_search_success (0/1), improvement (surrogate gain).
    """
    if target_kl is None:
        target_kl = traced_settings(cfg)["target_kl"]
    flat0, unravel = ravel_pytree(actor_params)
    dist_old = jax.lax.stop_gradient(model.dist(actor_params, obs))

    def objective(flat):
        return surrogate(model, unravel(flat), obs, action, logp_old, adv)

    def kl(flat):
        return mean_kl(model, unravel(flat), obs, dist_old)

    obj0, g = jax.value_and_grad(objective)(flat0)
    hvp = kl_hessian_vector_product(model, unravel, flat0, obs)

    def fvp(v):
        return hvp(v) + cfg.cg_damping * v

    step_dir = conjugate_gradient(fvp, g, cfg.cg_max_steps, cfg.cg_residual_tol)
    shs = step_dir @ fvp(step_dir)
    # shs <= 0 only if the direction is degenerate (g = 0): take no step rather than NaN.
    max_step = jnp.where(shs > 0, jnp.sqrt(2.0 * target_kl / jnp.where(shs > 0, shs, 1.0)), 0.0)
    coeffs = cfg.line_search_shrinking_factor ** jnp.arange(cfg.line_search_max_iter,
                                                            dtype=jnp.float32)
    steps = coeffs * max_step
    if cfg.sequential_line_search:
        success, first, obj, kl_new = _first_accepted(objective, kl, flat0, steps, step_dir,
                                                      obj0, target_kl)
        new_flat = jnp.where(success, flat0 + steps[first] * step_dir, flat0)
    else:
        candidates = flat0[None] + steps[:, None] * step_dir[None]
        objs = jax.vmap(objective)(candidates)
        kls = jax.vmap(kl)(candidates)
        ok = (kls < target_kl) & (objs > obj0)
        first = jnp.argmax(ok)
        success = ok.any()
        obj, kl_new = objs[first], kls[first]
        new_flat = jnp.where(success, candidates[first], flat0)
    stats = {"policy_objective": jnp.where(success, obj, obj0),
             "kl": jnp.where(success, kl_new, 0.0),
             "line_search_success": success.astype(jnp.float32),
             "improvement": jnp.where(success, obj - obj0, 0.0)}
    return unravel(new_flat), stats


def _first_accepted(objective, kl, flat0, steps, step_dir, obj0, target_kl):
    """Sequential backtracking: the first k with KL < target_kl and a better surrogate.

    Candidate k is flat0 + steps[k] * step_dir, evaluated only if no earlier one was accepted
    (a `lax.while_loop`, so an accepted full step costs one actor pass instead of len(steps)).

    Returns:
        (success () bool, k () int32 (meaningful if success), objective and KL of candidate k).
    """
    def cond(carry):
        k, found, _, _ = carry
        return ~found & (k < steps.shape[0])

    def body(carry):
        k, _, _, _ = carry
        cand = flat0 + steps[k] * step_dir
        obj, kl_k = objective(cand), kl(cand)
        return k + 1, (kl_k < target_kl) & (obj > obj0), obj, kl_k

    init = (jnp.int32(0), jnp.bool_(False), obj0, jnp.zeros_like(obj0))
    k, found, obj, kl_k = jax.lax.while_loop(cond, body, init)
    return found, k - 1, obj, kl_k


def init(seed_key, model, env, env_params, cfg: TRPOConfig, params=None) -> TrainState:
    """Initial train state for one seed; the optimiser state covers the critic only.

    `params`: a fine-tuning start (see `init_train_state`); None: a fresh network.
    """
    tx = make_optimizer(cfg.adam_eps)  # the critic's (SB3's TRPO does not clip its gradients)
    return init_train_state(seed_key, model, env, env_params, cfg.n_envs,
                            lambda p: tx.init(p["critic"]), cfg.log_std_init, params)


def traced_settings(cfg: TRPOConfig) -> dict[str, np.ndarray]:
    """The config's numbers the learning half takes as arguments (``learn_phase``'s `settings`).

    Returns:
        target_kl: () float32, the actor step's KL limit.
    """
    return {"target_kl": np.float32(cfg.target_kl)}


def make_phases(model, env, cfg: TRPOConfig):
    """The update's two halves (pure, single seed), as `ppo.update.make_phases`.

    ``rollout_phase(state, env_params) -> (state, batch)`` (rollout, GAE, advantage normalisation)
    and ``learn_phase(state, batch, settings) -> (state, stats)`` (actor step, critic epochs), with
    `settings` = ``traced_settings(cfg)``.
    """
    tx = make_optimizer(cfg.adam_eps)  # the critic's (SB3's TRPO does not clip its gradients)
    rollout_phase = make_rollout_phase(model, env, cfg.n_steps, cfg.gamma, cfg.gae_lambda,
                                       cfg.normalize_advantage)

    def learn_phase(state: TrainState, batch, settings):
        data, roll_stats = batch
        params = state.params
        actor, stats = actor_step(model, params["actor"], data["obs"], data["action"],
                                  data["logp"], data["adv"], cfg, settings["target_kl"])
        lr = harmonic_lr(cfg.lr, cfg.lr_decay, state.update / cfg.n_updates)
        key, k_perm = jax.random.split(state.key)

        def minibatch(carry, mb, e, m):
            critic, opt_state = carry
            loss, grads = jax.value_and_grad(lambda c, o, r: value_loss(model, c, o, r))(critic, *mb)
            return apply_adam(tx, grads, opt_state, critic, lr), loss

        (critic, opt_state), v_losses = minibatch_epochs(
            minibatch, (params["critic"], state.opt_state), (data["obs"], data["ret"]), k_perm,
            cfg.n_critic_updates, cfg.n_minibatches)
        stats.update(value_loss=v_losses.mean(), lr=lr, **roll_stats)
        if "log_std" in actor:
            stats["std"] = jnp.exp(actor["log_std"]).mean()
        new_params = {"actor": actor, "critic": critic}
        return TrainState(new_params, opt_state, state.env_state, state.obs, key,
                          state.update + 1), stats

    return rollout_phase, learn_phase


def make_update(model, env, cfg: TRPOConfig):
    """Build ``update(state, env_params) -> (state, stats)`` for one seed (pure; jit/vmap it).

    Stats: policy_objective, kl, line_search_success, improvement, value_loss, lr, mean_reward,
    frac_done, the env's rollout statistics (docs/contracts.md), std (Gaussian).
    """
    rollout_phase, learn_phase = make_phases(model, env, cfg)
    settings = traced_settings(cfg)

    def update(state: TrainState, env_params):
        return learn_phase(*rollout_phase(state, env_params), settings)

    return update
