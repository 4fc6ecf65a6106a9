"""TRPO following sb3_contrib.TRPO.train, one compiled function per update.

Actor: one natural-gradient step. The direction solves (F + damping I) s = g by conjugate gradient,
with F the Hessian of the mean KL (Fisher-vector products by double differentiation, the matrix is
never formed); the maximal step makes the quadratic KL model equal 2 * target_kl; a backtracking line
search over 0.8^k (k = 0..9, all candidates evaluated at once with vmap) keeps the first candidate
with KL < target_kl and a surrogate better than before, or the old parameters if none qualifies.
Critic: n_critic_updates epochs of Adam on the value MSE (minibatches of batch_size), learning rate
with harmonic decay, constant within an update (SB3 sets it once per update).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .cg import conjugate_gradient
from .config import AlgoConfig, cfg_field
from .gae import gae
from .optim import apply_adam, harmonic_lr, make_adam
from .rollout import collect, flatten_time_env, rollout_stats
from .state import TrainState, init_train_state

__all__ = ["TRPOConfig", "actor_step", "kl_hessian_vector_product", "init", "make_phases", "make_update", "make_optimizer"]


@dataclasses.dataclass(frozen=True)
class TRPOConfig(AlgoConfig):
    """TRPO hyper-parameters; defaults are the paper's (spec 5.4, sb3-contrib defaults)."""

    n_envs: int = cfg_field(4, "pos_int", "parallel environments")
    n_steps: int = cfg_field(2048, "pos_int", "steps per environment per update")
    activation: str = cfg_field("relu", "activation", "hidden activation")
    batch_size: int = cfg_field(128, "pos_int", "critic minibatch size (must divide the rollout)")
    n_critic_updates: int = cfg_field(10, "pos_int", "critic epochs per update")
    target_kl: float = cfg_field(0.01, "pos_float", "KL limit of the actor step")
    cg_max_steps: int = cfg_field(15, "pos_int", "conjugate-gradient iterations")
    cg_damping: float = cfg_field(0.1, "nonneg_float", "damping added to the Fisher matrix")
    cg_residual_tol: float = cfg_field(1e-10, "nonneg_float", "CG stop on squared residual norm")
    line_search_shrinking_factor: float = cfg_field(0.8, "open_unit", "line-search step shrink")
    line_search_max_iter: int = cfg_field(10, "pos_int", "line-search candidates")
    normalize_advantage: bool = cfg_field(True, "bool", "normalise advantages over the rollout")

    def _check_consistency(self) -> None:
        super()._check_consistency()
        if self.rollout_size % self.batch_size:
            raise ValueError(
                f"batch_size: expected a divisor of the rollout n_envs * n_steps = "
                f"{self.rollout_size}, got {self.batch_size}")

    # TRPO's `batch_size` is the critic minibatch (SB3's name), not the rollout size.
    @property
    def n_minibatches(self) -> int:
        return self.rollout_size // self.batch_size


def make_optimizer(cfg: TRPOConfig):
    """Adam for the critic only (SB3's TRPO does not clip critic gradients)."""
    return make_adam(cfg.adam_eps)


def kl_hessian_vector_product(model, unravel, flat0, obs):
    """v -> H v, H the Hessian at flat0 of theta -> mean KL(pi_theta || pi_flat0) over `obs`.

    At theta = flat0 the KL's gradient with respect to the distribution parameters d vanishes, so
    H = J^T (d^2 KL / dd^2) J exactly (the generalised Gauss-Newton form), with J the Jacobian of
    the distribution parameters. The network is linearised once (`jax.linearize`, `jax.vjp`) and
    each product costs one linear forward and one linear backward pass, instead of the
    differentiate-twice product (grad of grad . v) that re-runs the network every CG iteration.

    Args:
        model: `ActorCritic`.
        unravel: flat vector -> actor params.
        flat0: (P,) flat actor parameters.
        obs: (B, obs_dim).

    Returns:
        A function (P,) -> (P,).
    """
    def dist_fn(flat):
        return model.dist(unravel(flat), obs)

    dist0, jvp_fn = jax.linearize(dist_fn, flat0)
    _, vjp_fn = jax.vjp(dist_fn, flat0)
    dist_old = jax.lax.stop_gradient(dist0)
    grad_kl_d = jax.grad(lambda d: jnp.mean(model.kl(d, dist_old)))

    def hvp(v):
        u = jvp_fn(v)
        hu = jax.jvp(grad_kl_d, (dist0,), (u,))[1]
        return vjp_fn(hu)[0]

    return hvp


def actor_step(model, actor_params, obs, action, logp_old, adv, cfg: TRPOConfig):
    """One trust-region step of the actor.

    Args:
        model: `ActorCritic`.
        actor_params: ``params["actor"]``.
        obs: (B, obs_dim); action: (B, *action_shape); logp_old: (B,) log-probs at collection;
        adv: (B,) advantages (already normalised if configured).
        cfg: `TRPOConfig`.

    Returns:
        (new actor params, stats) with stats policy_objective, kl (KL(new || old) of the accepted
        step, 0 if none), line_search_success (0/1), improvement (surrogate gain).
    """
    flat0, unravel = ravel_pytree(actor_params)
    dist_old = jax.lax.stop_gradient(model.dist(actor_params, obs))

    def surrogate(flat):
        logp = model.logp(model.dist(unravel(flat), obs), action)
        return jnp.mean(adv * jnp.exp(logp - logp_old))

    def kl(flat):
        return jnp.mean(model.kl(model.dist(unravel(flat), obs), dist_old))

    obj0, g = jax.value_and_grad(surrogate)(flat0)
    hvp = kl_hessian_vector_product(model, unravel, flat0, obs)

    def fvp(v):
        return hvp(v) + cfg.cg_damping * v

    step_dir = conjugate_gradient(fvp, g, cfg.cg_max_steps, cfg.cg_residual_tol)
    shs = step_dir @ fvp(step_dir)
    # shs <= 0 only if the direction is degenerate (g = 0): take no step rather than NaN.
    max_step = jnp.where(shs > 0, jnp.sqrt(2.0 * cfg.target_kl / jnp.where(shs > 0, shs, 1.0)), 0.0)
    coeffs = cfg.line_search_shrinking_factor ** jnp.arange(cfg.line_search_max_iter,
                                                            dtype=jnp.float32)
    candidates = flat0[None] + (coeffs * max_step)[:, None] * step_dir[None]
    objs = jax.vmap(surrogate)(candidates)
    kls = jax.vmap(kl)(candidates)
    ok = (kls < cfg.target_kl) & (objs > obj0)
    first = jnp.argmax(ok)
    success = ok.any()
    new_flat = jnp.where(success, candidates[first], flat0)
    stats = {"policy_objective": jnp.where(success, objs[first], obj0),
             "kl": jnp.where(success, kls[first], 0.0),
             "line_search_success": success.astype(jnp.float32),
             "improvement": jnp.where(success, objs[first] - obj0, 0.0)}
    return unravel(new_flat), stats


def init(seed_key, model, env, env_params, cfg: TRPOConfig) -> TrainState:
    """Initial train state for one seed; the optimiser state covers the critic only."""
    tx = make_optimizer(cfg)
    return init_train_state(seed_key, model, env, env_params, cfg.n_envs,
                            lambda params: tx.init(params["critic"]))


def make_phases(model, env, cfg: TRPOConfig):
    """The update's two halves (pure, single seed), as `ppo.make_phases`: ``rollout_phase(state,
    env_params) -> (state, batch)`` (rollout, GAE, advantage normalisation) and
    ``learn_phase(state, batch) -> (state, stats)`` (actor step, critic epochs).
    """
    tx = make_optimizer(cfg)

    def value_loss(critic, obs, ret):
        return ((ret - model.value(critic, obs)) ** 2).mean()

    def rollout_phase(state: TrainState, env_params):
        params = state.params
        (env_state, obs_next, key), traj = collect(model, env, env_params, params, state.env_state,
                                                   state.obs, state.key, cfg.n_steps, cfg.gamma)
        last_value = model.value(params["critic"], obs_next)
        adv, ret = gae(traj.reward, traj.value, traj.done, last_value, cfg.gamma, cfg.gae_lambda)
        obs, action, logp_old, adv, ret = map(
            flatten_time_env, (traj.obs, traj.action, traj.logp, adv, ret))
        if cfg.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        data = {"obs": obs, "action": action, "logp": logp_old, "adv": adv, "ret": ret}
        state = state._replace(env_state=env_state, obs=obs_next, key=key)
        return state, (data, rollout_stats(traj))

    def learn_phase(state: TrainState, batch):
        data, roll_stats = batch
        params = state.params
        actor, stats = actor_step(model, params["actor"], data["obs"], data["action"],
                                  data["logp"], data["adv"], cfg)
        lr = harmonic_lr(cfg.lr, cfg.lr_decay, state.update / cfg.n_updates)
        key, k_perm = jax.random.split(state.key)

        def epoch(carry, k):
            perm = jax.random.permutation(k, cfg.rollout_size)
            mbs = jax.tree_util.tree_map(
                lambda x: x[perm].reshape((cfg.n_minibatches, cfg.batch_size) + x.shape[1:]),
                (data["obs"], data["ret"]))

            def minibatch(carry, mb):
                critic, opt_state = carry
                loss, grads = jax.value_and_grad(value_loss)(critic, *mb)
                return apply_adam(tx, grads, opt_state, critic, lr), loss

            return jax.lax.scan(minibatch, carry, mbs)

        (critic, opt_state), v_losses = jax.lax.scan(
            epoch, (params["critic"], state.opt_state),
            jax.random.split(k_perm, cfg.n_critic_updates))
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
    frac_done, min_JT (if the env reports JT), std (Gaussian).
    """
    rollout_phase, learn_phase = make_phases(model, env, cfg)

    def update(state: TrainState, env_params):
        return learn_phase(*rollout_phase(state, env_params))

    return update
