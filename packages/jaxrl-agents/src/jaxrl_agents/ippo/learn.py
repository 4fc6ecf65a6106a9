"""IPPO's learning step: PPO's (`ppo.learner`) vmapped over the stacked agents of a group.

Vmapped rather than agents folded into the batch (JaxMARL's choice, which shares one network):
every agent here has its own actor, critic (IPPO-Lagrangian: and cost critic) and Adam state, and
its own permutations and minibatches, as separate per-agent loops would.

Per agent, before PPO's step: GAE with separate terminated and done flags
(`common.gae.gae_next_values`) on V(obs_t) and V(next_obs_t) of the critic that collected the
rollout. IPPO-Lagrangian is then an advantage transform, (A_r' - lambda A_c') / (1 + lambda)
(`losses.lagrangian_advantage`; lambda stepped beforehand by `losses.dual_step`), and the cost
critic's value loss on cost lambda-returns, added with weight vf_coef.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..common.gae import gae_next_values
from ..common.losses import ppo_loss, value_loss
from ..common.optimizer import linear_lr, make_optimizer
from ..common.rollout import flatten_time_env
from ..common.state import stack_trees
from ..ppo.learner import make_learner
from .config import IPPOConfig
from .losses import lagrangian_advantage

__all__ = ["init_agent_params", "init_group_state", "learn_groups", "make_agent_learn",
           "make_group_learn", "minibatch_count", "steps_per_update"]


def minibatch_count(batch_size: int, requested: int) -> int:
    """Largest divisor of `batch_size` not above `requested`: the minibatch count actually used.

    It differs from `requested` when a rollout of `batch_size` transitions cannot be split into
    `requested` equal minibatches.
    """
    for d in range(min(requested, batch_size), 0, -1):
        if batch_size % d == 0:
            return d
    return 1


def steps_per_update(size: int, cfg: IPPOConfig) -> int:
    """Optimiser applications of one update over `size` transitions.

    Their sum over a run's rollouts is the denominator of the learning-rate annealing.
    """
    return cfg.n_epochs * minibatch_count(size, cfg.n_minibatches)


def init_agent_params(model, key: jax.Array, lagrangian: bool) -> dict:
    """``{"actor", "critic"}`` (+ ``"cost_critic"`` with the critic's definition for IPPO-Lagrangian)."""
    k_main, k_cost = jax.random.split(key)
    params = model.init(k_main)
    if lagrangian:
        params["cost_critic"] = model.init(k_cost)["critic"]
    return params


def init_group_state(agent_spaces, agents, groups, key: jax.Array, cfg: IPPOConfig,
                     lagrangian: bool):
    """Independent initial parameters per agent, and each group's optimiser state.

    Agent i's parameters come from ``fold_in(key, i)``; they are stacked per group. Both IPPO paths
    call it, so the same seed gives the same initial parameters.

    Returns:
        (group_params, group_opt): lists aligned with ``groups``, leaves ``(G, ...)``.
    """
    tx = make_optimizer(cfg.adam_eps, cfg.max_grad_norm)
    params = {a: init_agent_params(agent_spaces[a].model, jax.random.fold_in(key, i), lagrangian)
              for i, a in enumerate(agents)}
    group_params = [stack_trees([params[a] for a in g.agents]) for g in groups]
    return group_params, [jax.vmap(tx.init)(p) for p in group_params]


def make_agent_learn(model, cfg: IPPOConfig, lagrangian: bool):
    """One agent's learning step (pure); `make_group_learn` vmaps it over a group's agents.

    The function is ``learn(params, opt_state, batch, lam, key, step0, total_steps) -> (params,
    opt_state, stats)``.

    Args of the returned function:
        params: the agent's parameters (`init_agent_params`).
        opt_state: its optimiser state.
        batch: dict of (T, N, ...) arrays: obs, next_obs (obs_dim), action, logp, reward,
            terminated, done, optionally mask (n_outputs) and (Lagrangian) cost.
        lam: () multiplier used in this update (ignored without `lagrangian`).
        key: PRNG key for the minibatch permutations.
        step0: () int, optimiser applications done before this update.
        total_steps: () int, optimiser applications of the whole run (annealing denominator).

    Stats (scalars): pg_loss, v_loss, entropy, approx_kl, clip_frac (means over minibatches), lr
    (last step), and for IPPO-Lagrangian cost_v_loss and discounted_cost_return (mean cost
    lambda-return, the cost critic's target).
    """
    tx = make_optimizer(cfg.adam_eps, cfg.max_grad_norm)
    # IPPO-Lagrangian standardises A_r over the whole rollout before mixing in the cost; a second
    # per-minibatch normalisation would undo the lambda weighting.
    per_mb_norm = cfg.normalize_advantage and not lagrangian

    def loss_fn(p, mb):
        loss, stats = ppo_loss(model, p, mb, cfg.clip_eps, cfg.vf_coef, cfg.ent_coef, per_mb_norm)
        if lagrangian:
            c_loss = value_loss(model, p["cost_critic"], mb["obs"], mb["ret_c"])
            loss = loss + cfg.vf_coef * c_loss
            stats = {**stats, "cost_v_loss": c_loss}
        return loss, stats

    def gae_of(critic, rewards, batch):
        return gae_next_values(rewards, model.value(critic, batch["obs"]),
                               model.value(critic, batch["next_obs"]), batch["terminated"],
                               batch["done"], cfg.gamma, cfg.gae_lambda)

    def learn(params, opt_state, batch, lam, key, step0, total_steps):
        t, n = batch["reward"].shape[:2]
        n_mb = minibatch_count(t * n, cfg.n_minibatches)  # static: shapes are known at trace time
        adv, ret = gae_of(params["critic"], batch["reward"], batch)
        data = {"obs": batch["obs"], "action": batch["action"], "logp": batch["logp"], "ret": ret}
        if "mask" in batch:
            data["mask"] = batch["mask"]
        extra = {}
        if lagrangian:
            adv_c, ret_c = gae_of(params["cost_critic"], batch["cost"], batch)
            adv = lagrangian_advantage(adv, adv_c, lam, cfg.center_cost_advantage)
            data["ret_c"] = ret_c
            extra["discounted_cost_return"] = ret_c.mean()
        data["adv"] = adv
        data = jax.tree_util.tree_map(flatten_time_env, data)

        def lr_at(step):
            frac = jnp.asarray(step, jnp.float32) / jnp.asarray(total_steps, jnp.float32)
            return linear_lr(cfg.lr, frac) if cfg.anneal_lr else jnp.float32(cfg.lr)

        params, opt_state, stats = make_learner(loss_fn, tx, cfg.n_epochs, n_mb)(
            params, opt_state, data, key, step0, lr_at)
        del stats["grad_steps"]  # no KL stop: always n_epochs x n_mb, the rows keep their columns
        stats.update(extra)
        return params, opt_state, stats

    return learn


def make_group_learn(model, cfg: IPPOConfig, lagrangian: bool):
    """`make_agent_learn` vmapped over a group's G stacked agents (jit it).

    Per-agent arguments and results gain a leading axis G (params, opt_state, batch, lam, key,
    stats); ``step0`` and ``total_steps`` are shared.
    """
    return jax.vmap(make_agent_learn(model, cfg, lagrangian), in_axes=(0, 0, 0, 0, 0, None, None))


def learn_groups(learns, groups, agents, params, opt_state, batches, lam, key, step0, total_steps):
    """Every group's learning step (both IPPO paths), with the stats gathered per agent.

    Args:
        learns: per group, its `make_group_learn` (jitted or traced).
        groups: the `agent_axis.AgentGroup`s.
        agents: every agent id, in the env's order.
        params: per group, the parameters (leaves (G, ...)).
        opt_state: per group, their optimiser state.
        batches: per group, the batch of `make_agent_learn` with leaves (G, T, N, ...).
        lam: (A,) multipliers in agent order (zeros without the Lagrangian).
        key: this update's key; group gi's agents draw from ``split(fold_in(key, gi), G)``.
        step0: as `make_agent_learn`.
        total_steps: as `make_agent_learn`.

    Returns:
        (per group new parameters, per group new optimiser state, stats {name: (A,)}).
    """
    new_params, new_opt, per_agent = [], [], {}
    for gi, (g, learn) in enumerate(zip(groups, learns)):
        idx = [agents.index(a) for a in g.agents]
        keys = jax.random.split(jax.random.fold_in(key, gi), len(g.agents))
        p, o, st = learn(params[gi], opt_state[gi], batches[gi], jnp.asarray(lam)[jnp.asarray(idx)],
                         keys, step0, total_steps)
        new_params.append(p)
        new_opt.append(o)
        for k, v in st.items():
            per_agent.setdefault(k, [None] * len(agents))
            for j, a_i in enumerate(idx):
                per_agent[k][a_i] = v[j]
    return new_params, new_opt, {k: jnp.stack(v) for k, v in per_agent.items()}
