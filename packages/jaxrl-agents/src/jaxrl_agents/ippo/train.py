"""IPPO: independent PPO learners, one per agent, on a PettingZoo ParallelEnv.

Or on a functional multi-agent core, through the compiled programs the trainer runs (programs.py).

Each agent has its own actor, critic and Adam state: nothing is shared. Agents whose spaces give the
same network definition are *computed* together (their parameters stacked and the update vmapped),
which changes nothing mathematically. One training cycle = collect a rollout of `n_steps`
environment steps, then update every agent on its own transitions (learn.make_group_learn).

Budget: ``train(env, timesteps)`` takes `timesteps` environment steps (each gives one transition per
agent). The last rollout is shortened to end exactly at the budget, and the learning-rate annealing
divides by the exact number of optimiser applications of the whole run, including that short
rollout and any reduced minibatch count (learn.optimizer_applications).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .agent_axis import group_agents, params_by_agent
from .config import IPPOConfig, validate_ippo_config
from .learn import init_group_state, learn_groups, make_group_learn, optimizer_applications, steps_per_update
from .losses import dual_step
from .programs import agent_params, history_row, programs
from .rollout import ParallelRunner, check_parallel_env
from .spaces import AgentSpaces, agent_policies

__all__ = ["IPPO", "IPPO_Lagrangian", "IPPOResult", "TrainResult", "check_budget", "functional_core",
           "is_functional_marl_env"]


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


def is_functional_marl_env(env) -> bool:
    """Whether `env` offers the functional multi-agent core (pure reset / step_autoreset)."""
    from pettingzoo import ParallelEnv

    return (not isinstance(env, ParallelEnv) and callable(getattr(env, "reset", None))
            and callable(getattr(env, "step_autoreset", None)) and hasattr(env, "agents")
            and hasattr(env, "default_params"))


def functional_core(env, n_envs: int):
    """The functional multi-agent core to compile for `env`, or None (a ParallelEnv for Python).

    `env` itself if it is one; a ParallelEnv exposing its core as ``env.core`` is trained on that
    core when ``n_envs > 1``.
    """
    core = getattr(env, "core", None) if n_envs > 1 else None
    return next((c for c in (core, env) if is_functional_marl_env(c)), None)


@functools.lru_cache(maxsize=32)
def _compiled_group_update(model, cfg: IPPOConfig, lagrangian: bool):
    """The jitted `learn.make_group_learn` (PPO's learning step vmapped over a group's agents)."""
    return jax.jit(make_group_learn(model, cfg, lagrangian))


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
            env: a PettingZoo ``ParallelEnv`` (stepped from Python, ``n_envs`` must be 1) or a
                functional multi-agent core (compiled with the update, ``n_envs`` copies); a
                ParallelEnv exposing its functional core as ``env.core`` is trained on that core
                when ``n_envs > 1``.
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
        core = functional_core(env, cfg.n_envs)
        if core is not None:
            with jax.enable_x64(True):  # as the trainer: the physics is float64 (design.md)
                return self._train_core(core, timesteps, progress_callback)
        agents = check_parallel_env(env)
        if cfg.n_envs != 1:
            raise ValueError(f"n_envs: expected 1 for a PettingZoo ParallelEnv without a functional "
                             f"core (one environment stepped from Python), got {cfg.n_envs}; pass a "
                             f"functional multi-agent core (or an env exposing it as env.core) to "
                             f"run many environments compiled")
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
        total_apps = optimizer_applications(sizes, cfg.n_epochs, cfg.n_minibatches)
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
        return self._result(jax.device_get(params_by_agent(groups, group_params)), spaces_, history,
                            timesteps, lam, agents)

    def _train_core(self, core, timesteps, progress_callback) -> IPPOResult:
        """The trainer's programs (`programs.programs`) for one seed; whole updates only."""
        cfg = self.cfg
        per_update = cfg.n_envs * cfg.n_steps
        n_updates = timesteps // per_update
        if n_updates < 1:
            raise ValueError(f"timesteps: the compiled path runs whole updates of n_envs * n_steps "
                             f"= {per_update} environment steps; expected at least that, got "
                             f"{timesteps}")
        prog = programs(core, cfg, self.lagrangian)
        agents = list(prog.agent_spaces)
        state = prog.init(jax.random.PRNGKey(self.seed), core.default_params)
        total_apps = jnp.int32(n_updates * prog.apps_per_update)
        history = []
        for i in range(n_updates):
            state, stats = prog.update(state, core.default_params, total_apps)
            history.append({"step": (i + 1) * per_update,
                            "agents": history_row(agents, jax.device_get(stats))})
            if progress_callback is not None:
                progress_callback((i + 1) * per_update, n_updates * per_update)
        return self._result(agent_params(prog, jax.device_get(state.params)), prog.agent_spaces,
                            history, n_updates * per_update, np.asarray(state.lam), agents)

    def _result(self, params, spaces_, history, timesteps, lam, agents) -> IPPOResult:
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

