"""IPPO: independent PPO learners, one per agent, on a PettingZoo ParallelEnv stepped from Python.

A functional multi-agent core trains through the one trainer instead (``jaxrl_agents.train("ippo",
core, ...)``, `run.session.Session`, ``jaxrl-train --algo ippo``): compiled with the update over
``n_envs`` copies, with a run directory, checkpoints and resume (programs.py).

Each agent has its own actor, critic and Adam state: nothing is shared. Agents whose spaces give the
same network definition are *computed* together (their parameters stacked and the update vmapped),
which changes nothing mathematically. One training cycle = collect a rollout of `n_steps`
environment steps, then update every agent on its own transitions (learn.make_group_learn).

Budget: ``train(env, timesteps)`` takes `timesteps` environment steps (each gives one transition per
agent). The last rollout is shortened to end exactly at the budget, and the learning-rate annealing
divides by the exact number of optimiser applications of the whole run, including that short
rollout and any reduced minibatch count (learn.steps_per_update).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .agent_axis import group_agents, params_by_agent
from .config import IPPOConfig, validate_ippo_config
from .learn import init_group_state, learn_groups, make_group_learn, steps_per_update
from .losses import dual_step
from .rollout import ParallelRunner, check_parallel_env
from .spaces import AgentSpaces, agent_policies

__all__ = ["IPPO", "IPPO_Lagrangian", "IPPOResult", "TrainResult", "check_budget", "history_row"]


@dataclasses.dataclass
class IPPOResult:
    """What `IPPO.train` / `IPPO_Lagrangian.train` return.

    Attributes:
        policies: agent id -> `MARLPolicy` (a jaxrl_agents `Policy`: ``act(obs, rng=None)``,
            ``action_probs(obs)``, ``value(obs)``, ``save``), usable outside training.
        params: agent id -> full trained parameters (IPPO-Lagrangian: with ``cost_critic``).
        history: one dict per rollout/update cycle: ``step`` (environment steps so far) and
            ``agents`` (agent id -> scalar diagnostics).
        timesteps: environment steps taken (= the budget).
        lagrange_multipliers: agent id -> final multiplier (IPPO-Lagrangian only, else empty).
    """

    policies: dict
    params: dict
    history: list
    timesteps: int
    lagrange_multipliers: dict = dataclasses.field(default_factory=dict)


# IPPO's own API calls its result TrainResult (``TrainResult.policies``); the PPO/TRPO trainer's
# result is run.trainer.TrainResult, the one exported by the package.
TrainResult = IPPOResult


def check_budget(timesteps) -> int:
    """A positive integer number of environment steps (ValueError otherwise)."""
    if isinstance(timesteps, bool) or not isinstance(timesteps, (int, np.integer)):
        raise ValueError(f"timesteps: expected a positive integer number of environment steps, got "
                         f"{timesteps!r} ({type(timesteps).__name__})")
    if timesteps <= 0:
        raise ValueError(f"timesteps: expected a positive integer, got {timesteps}")
    return int(timesteps)


@functools.lru_cache(maxsize=32)
def _compiled_group_update(model, cfg: IPPOConfig, lagrangian: bool):
    """The jitted `learn.make_group_learn` (PPO's learning step vmapped over a group's agents)."""
    return jax.jit(make_group_learn(model, cfg, lagrangian))


# Where a functional multi-agent core (or many compiled environments) goes instead.
_COMPILED_HINT = ("a functional multi-agent core (or a ParallelEnv exposing one as env.core) trains "
                  "compiled over n_envs environments through jaxrl_agents.train('ippo', env, ...) "
                  "or jaxrl-train --algo ippo")


def history_row(agents, stats: dict) -> dict:
    """Per-agent python scalars of one update's stats ``{name: (A,)}`` (flags as bool, counts as int).

    They are the rows of `IPPOResult.history`.
    """
    row = {}
    for j, a in enumerate(agents):
        r = {k: float(v[j]) for k, v in stats.items()}
        if "dual_update_applied" in r:
            r["dual_update_applied"] = bool(r["dual_update_applied"])
        for k in ("episodes", "completed_episodes"):
            if k in r:
                r[k] = int(r[k])
        row[a] = r
    return row


def _mean_or_nan(xs) -> float:
    return float(np.mean(xs)) if len(xs) else math.nan


class IPPO:
    """Independent PPO.

    Args:
        cfg: a mapping of `IPPOConfig` fields (validated by `validate_ippo_config`), a config
            object, or None for the defaults.
        seed: integer seed of parameter initialisation, action sampling and the environment's
            first reset.
    """

    lagrangian = False
    algo_name = "ippo"

    def __init__(self, cfg=None, seed: int = 0):
        self.cfg = validate_ippo_config(cfg, lagrangian=self.lagrangian)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed: expected an integer, got {seed!r}")
        self.seed = int(seed)

    # ------------------------------------------------------------------------------- training
    def train(self, env, timesteps: int, *,
              progress_callback: Callable[[int, int], Any] | None = None) -> IPPOResult:
        """Train every agent for `timesteps` environment steps.

        Args:
            env: a PettingZoo ``ParallelEnv``, stepped from Python (``n_envs`` must be 1).
            timesteps: positive integer budget of environment steps.
            progress_callback: called as ``progress_callback(completed_steps, total_steps)`` once
                per rollout/update cycle.

        Returns:
            `IPPOResult`.
        """
        timesteps = check_budget(timesteps)
        if progress_callback is not None and not callable(progress_callback):
            raise ValueError(f"progress_callback: expected a callable or None, got "
                             f"{type(progress_callback).__name__}")
        cfg = self.cfg
        agents = check_parallel_env(env, _COMPILED_HINT)
        if cfg.n_envs != 1:
            raise ValueError(f"n_envs: expected 1 for a PettingZoo ParallelEnv stepped from Python, "
                             f"got {cfg.n_envs}; {_COMPILED_HINT}")
        spaces_ = {a: AgentSpaces.build(a, env.observation_space(a), env.action_space(a),
                                        cfg.hidden, cfg.activation) for a in agents}
        groups = group_agents(spaces_)
        learns = [_compiled_group_update(g.model, cfg, self.lagrangian) for g in groups]
        k_init, k_act, k_upd = jax.random.split(jax.random.PRNGKey(self.seed), 3)
        group_params, group_opt = init_group_state(spaces_, agents, groups, k_init, cfg, self.lagrangian)
        lam = np.full(len(agents), cfg.lagrangian_init if self.lagrangian else 0.0, np.float32)

        sizes = [cfg.n_steps] * (timesteps // cfg.n_steps)
        if timesteps % cfg.n_steps:
            sizes.append(timesteps % cfg.n_steps)
        total_apps = sum(steps_per_update(size, cfg) for size in sizes)
        runner = ParallelRunner(env, spaces_, groups, self.seed)
        history, step, apps = [], 0, 0
        for i, size in enumerate(sizes):
            batches, episodes = runner.collect(group_params, size, jax.random.fold_in(k_act, i))
            by_agent = {a: {k: v[j] for k, v in b.items()}
                        for g, b in zip(groups, batches) for j, a in enumerate(g.agents)}
            means = {k: np.asarray([by_agent[a][k].mean() for a in agents]) for k in ("reward", "cost")}
            stats = {}
            if self.lagrangian:  # the dual step of programs.py, on this rollout's episodes
                costs = [episodes["costs"][a] for a in agents]
                lam, diag = dual_step(lam, np.asarray([float(np.sum(c)) for c in costs]),
                                      np.asarray([len(c) for c in costs]), cfg)
                lam = np.asarray(lam).astype(np.float32)
                stats = {"mean_cost": means["cost"], **diag}
            group_params, group_opt, learn_stats = learn_groups(
                learns, groups, agents, group_params, group_opt, batches, lam,
                jax.random.fold_in(k_upd, i), np.int32(apps), np.int32(total_apps))
            stats.update(learn_stats)
            stats.update(mean_reward=means["reward"], mean_cost=means["cost"],
                         episodes=np.asarray([len(episodes["returns"][a]) for a in agents]),
                         episode_return=np.asarray([_mean_or_nan(episodes["returns"][a])
                                                    for a in agents]))
            apps += steps_per_update(size, cfg)
            step += size
            history.append({"step": step, "agents": history_row(agents, jax.device_get(stats))})
            if progress_callback is not None:
                progress_callback(step, timesteps)
        assert apps == total_apps  # the annealing denominator counted exactly these steps
        params = jax.device_get(params_by_agent(groups, group_params))
        meta = {"algo": self.algo_name, "seed": self.seed, "step": timesteps}
        lams = {a: float(lam[i]) for i, a in enumerate(agents)} if self.lagrangian else {}
        return IPPOResult(agent_policies(spaces_, params, meta), params, history, timesteps, lams)


class IPPO_Lagrangian(IPPO):  # noqa: N801 (the name the requirement uses)
    """Independent PPO-Lagrangian: IPPO with one multiplier per agent for E[episode cost] <= limit.

    Same arguments as `IPPO`, with `IPPOLagrangianConfig`'s fields. Costs are read from
    ``infos[agent]["cost"]`` (missing: 0). Once per rollout, before the update, each multiplier
    takes a projected ascent step against the mean cost of the episodes completed in that rollout
    (`losses.dual_step`, whose diagnostics join the history), and none without one; the update
    then uses (A_r - lambda A_c) / (1 + lambda) with a cost critic (`learn.make_agent_learn`).
    """

    lagrangian = True
    algo_name = "ippo_lag"

