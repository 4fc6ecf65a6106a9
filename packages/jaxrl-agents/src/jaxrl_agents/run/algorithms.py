"""Registry of the on-policy algorithms and their compiled, seed-vmapped programs.

Each entry (`Algorithm`) says what the trainer needs: the config class, how to build the
environment and the network definitions, how to compile the seed-vmapped programs, the default
environment and whether runs can start from another run's policy; so the trainer, the CLI, the
sweep and the benchmark never branch on the algorithm. PPO and TRPO modules expose the same
surface: ``init(seed_key, model, env, env_params, cfg)``, ``make_phases(model, env, cfg)`` (rollout
half, learning half), ``traced_settings(cfg)`` (the numbers the learning half takes as arguments)
and ``make_update(model, env, cfg)`` (the two chained, for one seed). IPPO's
module (`ippo.programs`) gives the same update over the agent axis of a multi-agent core.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import ppo, trpo
from ..common.config import AlgoConfig
from ..common.envs import DEFAULT_ENV, check_env, load_env
from ..common.evaluation import evaluate_episode
from ..common.networks import ActorCritic
from ..common.state import stack_trees
from ..ippo import config as ippo_config
from ..ippo import programs as ippo_programs
from ..ippo.agent_axis import core_spaces
from ..ippo.spaces import agent_policies

__all__ = ["ALGORITHMS", "Algorithm", "get_algorithm", "make_config", "Compiled",
           "compile_algorithm", "model_for", "FINITE_STAT", "all_finite", "ALIASES",
           "canonical_name", "AgentNetworks", "DEFAULT_MARL_ENV"]

# Stats key of the per-seed flag "parameters, optimiser state and losses are all finite".
FINITE_STAT = "finite"

# IPPO's default env: the functional multi-agent gate env (compiled, checkpointed).
DEFAULT_MARL_ENV = "quantgate_env:make_multi"
ALIASES = {"ippo_lag": "ippo_lagrangian"}  # an older name, still accepted


def canonical_name(name):
    """The registry name of `name` (``ippo_lag`` -> ``ippo_lagrangian``); other names unchanged."""
    return ALIASES.get(name, name) if isinstance(name, str) else name


def get_algorithm(name: str) -> Algorithm:
    """The registry entry of algorithm `name` (or its alias); ValueError listing the choices."""
    name = canonical_name(name)
    if name not in ALGORITHMS:
        raise ValueError(f"algo: expected one of {sorted(ALGORITHMS)}, got {name!r}")
    return ALGORITHMS[name]


def make_config(name: str, config: AlgoConfig | dict | None = None) -> AlgoConfig:
    """Validated config of algorithm `name` from a config object, a dict of fields or None."""
    cls = get_algorithm(name).config
    if config is not None and not isinstance(config, (cls, dict)):
        raise ValueError(f"config: expected a {cls.__name__} for algo {name!r}, got "
                         f"{type(config).__name__}")
    return cls.coerce(config)


def model_for(env, cfg: AlgoConfig) -> ActorCritic:
    """The actor-critic definition for `env`'s spaces.

    The config's user network (``cfg.network``, ``cfg.network_options``) or the default towers
    (hidden sizes, the critic's own when ``cfg.critic_hidden`` is set, activation).
    """
    return ActorCritic.from_spaces(env.observation_space, env.action_space, cfg.hidden,
                                   cfg.activation, cfg.network, cfg.network_options,
                                   cfg.critic_hidden)


class Compiled(NamedTuple):
    """Jitted programs over a leading seed axis S.

    Attributes:
        model: the `ActorCritic` definition.
        init: (S, 2) seed keys, env_params[, params] -> TrainState with leaves (S, ...) (eager,
            per seed); PPO and TRPO take optional initial parameters of one seed (fine-tuning),
            which every seed starts from.
        update: (TrainState (S, ...), env_params) -> (TrainState, stats dict of (S,) arrays);
            the input state is donated (its buffers are reused). ``stats[FINITE_STAT]`` (S,) bool
            says whether the seed's new parameters, optimiser state and learning losses are all
            finite.
        evaluate: (actor params (S, ...), env_params, key) -> episode dict of (S, T, ...) arrays.
        update_block: (TrainState (S, ...), env_params, count, capacity) -> (TrainState, stats
            dict of (S, capacity) arrays): `update` applied ``count`` times (a traced int32,
            1 <= count <= capacity; `capacity` a static int) in one program, stopping after the
            first update with a non-finite seed. Row j of the stats is update j's; rows past the
            last update run are zeros (their ``FINITE_STAT`` False). The same bits as `count`
            calls of `update` (tests/jaxrl_agents/test_update_blocks.py).
    """

    model: ActorCritic
    init: Any
    update: Any
    evaluate: Any
    # IPPO only (None for PPO/TRPO): (params of one seed (numpy), metadata) -> the agents' policies
    # (`ippo.spaces.AgentPolicies`), and the summary of one evaluation episode (default
    # common.evaluation.eval_summary).
    policies: Any = None
    summarize: Any = None
    update_block: Any = None


def all_finite(tree) -> jax.Array:
    """(S,) bool: whether every floating leaf of `tree` is finite, for each seed.

    The leaves have a leading seed axis S.
    """
    flags = [jnp.isfinite(x).reshape(x.shape[0], -1).all(axis=1)
             for x in jax.tree_util.tree_leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return functools.reduce(jnp.logical_and, flags)


def _update_programs(update, *extra):
    """The jitted one-update program and its block of updates (`Compiled.update_block`).

    Args:
        update: ``update(states, env_params, *extra) -> (states, stats)`` over the seed axis S,
            not jitted, with ``stats[FINITE_STAT]`` of shape (S,).
        extra: further traced arguments of every call (PPO's and TRPO's `traced_settings`,
            IPPO's annealing denominator).

    Returns:
        ``(update(states, env_params), update_block(states, env_params, count, capacity))``,
        both donating the input state.
    """
    def block(states, env_params, count, capacity, *more_args):
        # Stats go into a buffer of `capacity` rows, so one compiled program serves every block
        # length up to it (the loop's blocks end at evaluations and checkpoints: their lengths vary).
        shapes = jax.eval_shape(update, states, env_params, *more_args)[1]
        buffer = jax.tree_util.tree_map(lambda a: jnp.zeros((capacity, *a.shape), a.dtype), shapes)

        def go_on(carry):
            done, _, _, finite = carry
            return (done < count) & finite

        def one(carry):
            done, states, buffer, _ = carry
            states, stats = update(states, env_params, *more_args)
            buffer = jax.tree_util.tree_map(lambda b, x: b.at[done].set(x), buffer, stats)
            return done + 1, states, buffer, stats[FINITE_STAT].all()

        carry = (jnp.int32(0), states, buffer, jnp.bool_(True))
        _, states, buffer, _ = jax.lax.while_loop(go_on, one, carry)
        # (capacity, S, ...) -> (S, capacity, ...): the seed axis leads, as seed slices join it.
        return states, jax.tree_util.tree_map(lambda b: jnp.swapaxes(b, 0, 1), buffer)

    one_update = jax.jit(update, donate_argnums=0)
    update_block = jax.jit(block, static_argnums=3, donate_argnums=0)
    if not extra:
        return one_update, update_block
    return (lambda states, env_params: one_update(states, env_params, *extra),
            lambda states, env_params, count, capacity:
            update_block(states, env_params, count, capacity, *extra))


@functools.lru_cache(maxsize=16)
def compile_algorithm(name: str, env, cfg: AlgoConfig) -> Compiled:
    """Build (and cache, keyed on the hashable env and config) the seed-vmapped programs.

    Compilation itself happens lazily at the first call, under the caller's precision setting.
    """
    return get_algorithm(name).compile(canonical_name(name), env, cfg)


def _compile_single_agent(name: str, env, cfg: AlgoConfig) -> Compiled:
    """PPO's and TRPO's programs: the rollout vmapped over seeds, learning seed after seed."""
    module = get_algorithm(name).module
    model = model_for(env, cfg)

    def init(seed_keys, env_params, params=None):
        states = [module.init(k, model, env, env_params, cfg, params) for k in seed_keys]
        return stack_trees(states)

    rollout_phase, learn_phase = module.make_phases(model, env, cfg)

    def update(states, env_params, settings):
        states, batches = jax.vmap(rollout_phase, in_axes=(0, None))(states, env_params)
        # Learning runs seed after seed (lax.map) inside the same program: a vmapped learning
        # phase gained only 1.3x per seed with 8 seeds on 2 cores, where the trainer's slices of
        # the seed axis, one per core (host/seed_groups.py), gain 2x.
        states, stats = jax.lax.map(lambda sb: learn_phase(*sb, settings), (states, batches))
        # One flag per seed, reduced here: the trainer reads it with the stats at the host sync
        # it already does, so the check costs a reduction and no extra transfer. Rollout stats
        # (rewards, J_T) are left out: an environment may report NaN there by design.
        losses = {k: v for k, v in stats.items() if k not in batches[1]}
        stats[FINITE_STAT] = all_finite((states.params, states.opt_state, losses))
        return states, stats

    # Traced, not compiled in: configs that differ only in these numbers lower to one program,
    # which JAX's persistent compilation cache then compiles once (a sweep over target_kl).
    update, update_block = _update_programs(update, module.traced_settings(cfg))
    evaluate = jax.jit(jax.vmap(lambda a, p, k: evaluate_episode(model, a, env, p, k),
                                in_axes=(0, None, None)))
    return Compiled(model, init, update, evaluate, update_block=update_block)


class AgentNetworks(NamedTuple):
    """IPPO's network definitions, agent -> `ActorCritic` (config.json's ``network`` entry)."""

    models: dict

    @classmethod
    def of(cls, core, cfg) -> AgentNetworks:
        """The network definition of every agent of `core` under `cfg` (`ippo.agent_axis.core_spaces`).

        Args:
            core: the functional multi-agent core.
            cfg: the IPPO config (its network fields).
        """
        return cls({a: sp.model for a, sp in core_spaces(core, cfg).items()})

    def to_dict(self) -> dict:
        """JSON-able form for config.json: agent id (str) -> `ActorCritic.to_dict()`."""
        return {str(a): m.to_dict() for a, m in self.models.items()}


# Rollout statistics of IPPO's update: left out of the finite check (an environment may report
# NaN there, and episode_return is NaN by design when no episode completed).
_IPPO_ROLLOUT_STATS = ("mean_reward", "mean_cost", "episodes", "episode_return",
                       "cost_return_budget", "constraint_violation", "completed_episodes",
                       "dual_update_applied", "discounted_cost_return")


def _compile_ippo(name: str, env, cfg) -> Compiled:
    """IPPO's seed-axis programs over the one-seed `ippo.programs.programs`.

    Seeds run one after another (`lax.map`) inside one program, as PPO's learning phase does; stats
    are flattened to ``"<agent>/<name>"`` columns, plus the per-seed `FINITE_STAT`.
    """
    lagrangian = name == "ippo_lagrangian"
    prog = ippo_programs.programs(env, cfg, lagrangian)
    agents = list(prog.agent_spaces)
    total_apps = cfg.n_updates * prog.apps_per_update

    def init(seed_keys, env_params):
        states = [prog.init(k, env_params) for k in seed_keys]
        return stack_trees(states)

    def _update(states, env_params, total):
        states, stats = jax.lax.map(lambda s: prog.update(s, env_params, total), states)
        losses = {k: v for k, v in stats.items() if k not in _IPPO_ROLLOUT_STATS}
        flat = {f"{a}/{k}": v[:, j] for k, v in stats.items() for j, a in enumerate(agents)}
        flat[FINITE_STAT] = all_finite((states.params, states.opt_state, losses))
        return states, flat

    # The annealing denominator stays a traced argument: the program earlier runs trained (and
    # now resume) with, bit for bit.
    update, update_block = _update_programs(_update, jnp.int32(total_apps))

    evaluate = jax.jit(jax.vmap(prog.evaluate, in_axes=(0, None, None)))

    def policies(params, meta):
        return agent_policies(prog.agent_spaces, ippo_programs.agent_params(prog, params), meta)

    return Compiled(None, init, update, evaluate, policies, _ippo_summary(env, agents),
                    update_block)


def _ippo_summary(env, agents):
    from ..common.contracts import evaluation_of
    from ..common.evaluation import eval_summary

    evaluation = evaluation_of(env)

    def summarize(episode):
        """`eval_summary` of the team view (with the env's own fields), plus per-agent return and length.

        The per-agent fields are the generic ``<agent>/eval_return`` and ``<agent>/eval_len``.
        """
        out = eval_summary(episode, evaluation)
        for a in agents:
            s = eval_summary({"reward": episode[f"{a}/reward"], "alive": episode["alive"]})
            out.update({f"{a}/{k}": v for k, v in s.items()})
        return out

    return summarize


def _single_agent_env(env, env_options: dict, cfg) -> tuple[str | None, Any]:
    """(spec, env) of a PPO/TRPO run: ``module:factory`` built and checked, or the checked object."""
    if isinstance(env, str):
        return env, load_env(env, env_options)
    check_env(env)
    return None, env


def _is_functional_marl_env(env) -> bool:
    """Whether `env` offers the functional multi-agent core (pure reset / step_autoreset)."""
    from pettingzoo import ParallelEnv

    return (not isinstance(env, ParallelEnv) and callable(getattr(env, "reset", None))
            and callable(getattr(env, "step_autoreset", None)) and hasattr(env, "agents")
            and hasattr(env, "default_params"))


def _ippo_env(env, env_options, cfg):
    """(env spec, functional multi-agent core) of an IPPO run, or (spec, None).

    (spec, None): no core to compile, so the ParallelEnv must be stepped from Python, which no
    session does (`session.NewRun.steps_from_python`). A ParallelEnv exposing its functional core
    as ``env.core`` is trained on that core when ``n_envs > 1``.
    """
    spec = env if isinstance(env, str) else None
    obj = load_env(env, env_options, check=False) if isinstance(env, str) else env
    core = getattr(obj, "core", None) if cfg.n_envs > 1 else None
    core = next((c for c in (core, obj) if _is_functional_marl_env(c)), None)
    if core is not None:
        check_env(core)
    return spec, core


class Algorithm(NamedTuple):
    """A registry entry: what the trainer needs of one algorithm.

    Attributes:
        module: the algorithm's module (``ppo``, ``trpo``, ``ippo.programs``).
        config: the config class (fields, defaults, validation, the run's budget).
        compile: (name, env, cfg) -> `Compiled`, the seed-vmapped programs.
        networks: (env, cfg) -> the network definition(s) config.json records.
        environment: (env, env_options, cfg) -> (spec or None, the environment to compile; None
            for a PettingZoo ParallelEnv stepped from Python, which has no session). A new run
            (`session.plan_new_run`) and a resume (`resume.open_checkpoint`) both build the
            environment with it.
        default_env: ``jaxrl-train``'s default ``--env``.
        fine_tunes: whether a run can start from another run's policy (``init_from``).
    """

    module: Any
    config: type
    compile: Any
    networks: Any
    environment: Any = _single_agent_env
    default_env: str = DEFAULT_ENV
    fine_tunes: bool = True


# IPPO is PPO over stacked independent agents: same trainer, run directory and checkpoints, its
# own compiled programs (`_compile_ippo`) over a functional multi-agent core.
ALGORITHMS = {
    "ppo": Algorithm(ppo, ppo.PPOConfig, _compile_single_agent, model_for),
    "trpo": Algorithm(trpo, trpo.TRPOConfig, _compile_single_agent, model_for),
    "ippo": Algorithm(ippo_programs, ippo_config.IPPOTrainConfig, _compile_ippo, AgentNetworks.of,
                      _ippo_env, DEFAULT_MARL_ENV, fine_tunes=False),
    "ippo_lagrangian": Algorithm(ippo_programs, ippo_config.IPPOLagrangianTrainConfig, _compile_ippo,
                                 AgentNetworks.of, _ippo_env, DEFAULT_MARL_ENV, fine_tunes=False),
}
