"""PPO with the clipped surrogate (Stable-Baselines3 semantics), one compiled function per update.

One update = collect n_envs x n_steps transitions, GAE, then the learning step (`learner.py`):
n_epochs passes over a fresh permutation split into n_minibatches, each a gradient step on the
clipped surrogate + value loss with one optimiser for actor and critic (global-norm clip, Adam,
harmonic learning-rate decay per gradient step).

The KL limit enters the learning half as an argument (`traced_settings`), not as a compiled
constant: runs that differ only in it (a sweep over target_kl) run one compiled program, with the
bits the constant gave. The learning rate, its decay and the run's gradient-step count stay
compiled in: XLA folds those constants into the schedule's arithmetic (a division by the count
becomes a multiplication by its reciprocal, combined with the decay), so traced they would move
float32 runs' learning rates by an ulp and old runs would not resume bit for bit.

Optional early stop (``target_kl``, SB3 semantics): the first minibatch whose approximate KL to the
rollout policy exceeds 1.5 x target_kl ends the update. On this environment the paper defaults let
the KL settle near 0.1 with half the samples clipped; the limit is the remedy, off by default.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..common.losses import ppo_loss
from ..common.optimizer import harmonic_lr, make_optimizer
from ..common.rollout import make_rollout_phase
from ..common.state import TrainState, init_train_state
from .config import PPOConfig
from .learner import make_learner

__all__ = ["init", "kl_check", "make_phases", "make_update", "traced_settings"]


def init(seed_key, model, env, env_params, cfg: PPOConfig, params=None) -> TrainState:
    """Initial train state for one seed (see `init_train_state`; `params`: a fine-tuning start)."""
    return init_train_state(seed_key, model, env, env_params, cfg.n_envs,
                            make_optimizer(cfg.adam_eps, cfg.max_grad_norm).init, cfg.log_std_init,
                            params)


def traced_settings(cfg: PPOConfig) -> dict[str, np.ndarray]:
    """The config's numbers the learning half takes as arguments (``learn_phase``'s `settings`).

    Returns:
        kl_stop: () float32, 1.5 x target_kl (inf when off): a minibatch whose approx KL exceeds it
        is not applied.
    """
    return {"kl_stop": np.float32(1.5 * cfg.target_kl)}


def kl_check(cfg: PPOConfig) -> str:
    """The learner's KL check (`learner.KL_CHECKS`): "stop" for a finite target_kl, else "check".

    The check is compiled either way: it is part of a program's structure, its limit is not.
    """
    return "stop" if math.isfinite(cfg.target_kl) else "check"


def make_phases(model, env, cfg: PPOConfig):
    """The update's two halves (pure, single seed): rollout + GAE, then every gradient step.

    ``rollout_phase(state, env_params) -> (state, batch)`` collects and computes GAE;
    ``learn_phase(state, batch, settings) -> (state, stats)`` runs every gradient step, with
    `settings` = ``traced_settings(cfg)`` (or another config's that differs only in those numbers).
    `make_update` chains them; `run.algorithms.compile_algorithm` vmaps the first over seeds and
    maps the second seed by seed inside the same compiled program.
    """
    # One optimiser for actor and critic: global-norm clipping + Adam (lr applied per step).
    tx = make_optimizer(cfg.adam_eps, cfg.max_grad_norm)
    steps_per_update = cfg.n_epochs * cfg.n_minibatches

    def loss_fn(params, batch):
        return ppo_loss(model, params, batch, cfg.clip_eps, cfg.vf_coef, cfg.ent_coef,
                        cfg.normalize_advantage)

    def lr_at(step):
        return harmonic_lr(cfg.lr, cfg.lr_decay, step / cfg.n_grad_steps)

    rollout_phase = make_rollout_phase(model, env, cfg.n_steps, cfg.gamma, cfg.gae_lambda)
    learn = make_learner(loss_fn, tx, cfg.n_epochs, cfg.n_minibatches, kl_check(cfg))

    def learn_phase(state: TrainState, batch, settings):
        data, roll_stats = batch
        key, k_perm = jax.random.split(state.key)
        params, opt_state, stats = learn(state.params, state.opt_state, data, k_perm,
                                         state.update * steps_per_update, lr_at, settings["kl_stop"])
        stats.update(roll_stats)
        if "log_std" in params["actor"]:
            stats["std"] = jnp.exp(params["actor"]["log_std"]).mean()
        new_state = TrainState(params, opt_state, state.env_state, state.obs, key, state.update + 1)
        return new_state, stats

    return rollout_phase, learn_phase


def make_update(model, env, cfg: PPOConfig):
    """Build ``update(state, env_params) -> (state, stats)`` for one seed (pure; jit/vmap it).

    Stats (scalars): pg_loss, v_loss, entropy, approx_kl, clip_frac (means over the evaluated
    minibatches), lr (last scheduled gradient step), grad_steps (gradient steps applied: all
    n_epochs x n_minibatches unless `target_kl` stopped the update early), mean_reward, frac_done, the env's rollout statistics (docs/contracts.md), std (Gaussian).
    """
    rollout_phase, learn_phase = make_phases(model, env, cfg)
    settings = traced_settings(cfg)

    def update(state: TrainState, env_params):
        return learn_phase(*rollout_phase(state, env_params), settings)

    return update
