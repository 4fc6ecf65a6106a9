"""`check_env`: verify an environment against the contracts of `contracts` before training on it.

`check_env(env)` verifies a single- or multi-agent environment by abstract evaluation
(``jax.eval_shape``: traced exactly as ``jit`` traces it, nothing is compiled, so it takes seconds)
and raises `ContractError`, naming the part of the contract that fails (``err.part``) and what
was expected and what came instead.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..contracts import (
    GENERIC_SUMMARY_KEYS,
    RESERVED_RECORD_KEYS,
    SCORE_MODES,
    ContractError,
    info_field,
)

__all__ = ["check_env"]


# -------------------------------------------------------------------------------- checker
def _struct(tree):
    """Tree structure plus (shape, dtype) of every leaf: what `lax.scan` needs to be equal."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, [(tuple(x.shape), jnp.dtype(x.dtype)) for x in leaves]


def _describe(tree) -> str:
    treedef, leaves = _struct(tree)
    return f"{treedef} with leaves {[(s, str(d)) for s, d in leaves]}"


def _trace(name: str, part: str, fn, *args):
    """`jax.eval_shape(fn, *args)`; a failure is the named part.

    ``"jit"`` for tracer errors, which is what ``jax.jit`` would raise: Python control flow or
    numpy on traced values.
    """
    try:
        return jax.eval_shape(fn, *args)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError) as e:
        raise ContractError(name, "jit", f"{part} cannot be traced by jax.jit: "
                            f"{type(e).__name__}: {str(e).splitlines()[0]}") from e
    except ContractError:
        raise
    except Exception as e:
        raise ContractError(name, part, f"calling it abstractly (jax.eval_shape) failed: "
                            f"{type(e).__name__}: {e}") from e


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _check_obs(name, part, obs, space, what="obs"):
    if not _is_array(obs):
        raise ContractError(name, part, f"expected {what} to be an array, got {type(obs).__name__}")
    if tuple(obs.shape) != tuple(space.shape):
        raise ContractError(name, part, f"{what} has shape {tuple(obs.shape)}, expected "
                            f"{tuple(space.shape)} (observation_space)")
    if not (jnp.issubdtype(obs.dtype, jnp.floating) or jnp.issubdtype(obs.dtype, jnp.integer)):
        raise ContractError(name, part, f"{what} has dtype {obs.dtype}, expected a float or "
                            f"integer dtype")


def _check_flags(name, method, reward, term, trunc, who=""):
    for what, x in (("reward", reward), ("terminated", term), ("truncated", trunc)):
        if not _is_array(x) or tuple(x.shape) != ():
            got = tuple(x.shape) if _is_array(x) else type(x).__name__
            raise ContractError(name, method, f"{what}{who} is {got}, expected a scalar per "
                                f"environment")
    if not jnp.issubdtype(reward.dtype, jnp.floating):
        raise ContractError(name, method, f"reward{who} has dtype {reward.dtype}, expected float")
    for what, x in (("terminated", term), ("truncated", trunc)):
        if x.dtype != jnp.bool_:
            raise ContractError(name, "terminated/truncated", f"{method} returned {what}{who} of "
                                f"dtype {x.dtype}, expected bool (terminated = natural end, "
                                f"truncated = cut short, two separate flags)")


def _six(name, method, out):
    if not isinstance(out, tuple) or len(out) != 6:
        n = len(out) if isinstance(out, tuple) else "?"
        hint = (" (5 values looks like gymnax's (obs, state, reward, done, info): the contract "
                "needs terminated and truncated separately; wrap it with "
                "jaxrl_agents.common.gymnax_env.make)" if n == 5 else "")
        raise ContractError(name, "terminated/truncated" if n == 5 else method,
                            f"{method} must return (obs, state, reward, terminated, truncated, "
                            f"info), got {type(out).__name__} of length {n}{hint}")
    return out


def _sample_action(space):
    sample = space.sample()
    return jax.ShapeDtypeStruct(np.shape(sample), jnp.asarray(sample).dtype)


def _check_action_space(name, space, who=""):
    from gymnasium import spaces

    if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete)):
        raise ContractError(name, "action_space", f"expected action_space{who} to be a Box, "
                            f"Discrete or MultiDiscrete, got {space!r}")


def _check_obs_space(name, space, who=""):
    from gymnasium import spaces

    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        raise ContractError(name, "observation_space", f"expected observation_space{who} to be a "
                            f"1-D gymnasium Box, got {space!r}")


def _check_hashable(name, env):
    try:
        hash(env)
    except TypeError as e:
        raise ContractError(name, "hashable", f"expected a hashable environment (a frozen "
                            f"dataclass: it is a static argument of jax.jit), got an unhashable "
                            f"{type(env).__name__}") from e


def _check_steps(name, env):
    steps = env.max_episode_steps
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps <= 0:
        raise ContractError(name, "max_episode_steps", f"expected a positive int, got {steps!r}")


def _check_params_pair(name, env):
    if _struct(env.eval_params) != _struct(env.default_params):
        raise ContractError(name, "eval_params", f"expected the structure, shapes and dtypes of "
                            f"default_params ({_describe(env.default_params)}), got "
                            f"{_describe(env.eval_params)}")


def check_env(env, name: str = "env") -> None:
    """Check that `env` follows the functional contract, without compiling anything.

    A single-agent env (`FunctionalEnv`) is checked for: its members; hashability; the spaces
    (1-D Box observations; Box, Discrete or MultiDiscrete actions); a positive int
    ``max_episode_steps``; ``eval_params`` shaped like ``default_params``; and, by tracing
    reset / step / step_autoreset on ``default_params`` (also vmapped over 2 environments):
    observations of the space's shape and a numeric dtype, a float scalar reward, bool scalar
    ``terminated`` and ``truncated`` (separate), a state of the reset state's structure, shapes
    and dtypes (so ``lax.scan`` can carry it), a dict info with the same structure after step and
    step_autoreset, and ``info["final_obs"]`` shaped like obs in step_autoreset. An env with an
    ``agents`` attribute is checked as a `MultiAgentEnv` (the same per agent, dicts keyed by
    agent). If the env has an ``evaluation``, that is checked too (`Evaluation`).

    Args:
        env: the environment object.
        name: how messages name it (e.g. the ``module:factory`` spec).

    Raises:
        ContractError: (a ValueError) naming the failing part (``err.part``).
    """
    if hasattr(env, "agents") and callable(getattr(env, "observation_space", None)):
        _check_multi(env, name)
    else:
        _check_single(env, name)


def _check_single(env, name):
    missing = [m for m in ("reset", "step", "step_autoreset") if not callable(getattr(env, m, None))]
    missing += [a for a in ("observation_space", "action_space", "max_episode_steps",
                            "default_params", "eval_params") if not hasattr(env, a)]
    if missing:
        raise ContractError(name, "members", f"the object is a {type(env).__name__}, which lacks "
                            f"{missing}; expected an environment with reset, step, "
                            f"step_autoreset, observation_space, action_space, "
                            f"max_episode_steps, default_params, eval_params")
    _check_hashable(name, env)
    _check_obs_space(name, env.observation_space)
    _check_action_space(name, env.action_space)
    _check_steps(name, env)
    _check_params_pair(name, env)

    key = jax.random.PRNGKey(0)
    params = env.default_params
    obs, state = _traced_reset(name, env, key, params)
    _check_obs(name, "reset", obs, env.observation_space)
    action = _sample_action(env.action_space)
    infos = {}
    for method in ("step", "step_autoreset"):
        out = _six(name, method, _trace(name, method, getattr(env, method), key, state, action,
                                        params))
        obs2, state2, reward, term, trunc, info = out
        _check_obs(name, method, obs2, env.observation_space)
        if _struct(obs2) != _struct(obs):
            raise ContractError(name, method, f"obs has dtype {obs2.dtype}, reset's has "
                                f"{obs.dtype}; expected the same")
        _check_flags(name, method, reward, term, trunc)
        infos[method] = _check_state_info(name, method, state, state2, info)
    auto = dict(infos["step_autoreset"])
    if "final_obs" not in auto:
        raise ContractError(name, "final_obs", f"step_autoreset must put the last observation "
                            f"of a finished episode in info['final_obs']; info has {sorted(auto)}")
    final_obs = auto.pop("final_obs")
    _check_obs(name, "final_obs", final_obs, env.observation_space, "info['final_obs']")
    if _struct(auto) != _struct(dict(infos["step"])):
        raise ContractError(name, "info", f"step_autoreset's info without final_obs must equal "
                            f"step's in structure, shapes and dtypes: step "
                            f"{_describe(dict(infos['step']))}, step_autoreset {_describe(auto)}")
    _check_vmap(name, env, key, state, action, params)
    _check_evaluation(name, env, infos["step"], env.max_episode_steps, action)


def _agent_dicts(name, method, agents, **dicts):
    for what, d in dicts.items():
        if not isinstance(d, Mapping) or set(d) != set(agents):
            got = sorted(d) if isinstance(d, Mapping) else type(d).__name__
            raise ContractError(name, method, f"expected {what} as a dict keyed by the agents "
                                f"{list(agents)}, got {got}")


def _check_state_info(name, method, state, state2, info):
    """A step's state has reset's structure (`lax.scan` needs them equal) and its info is a dict."""
    if _struct(state2) != _struct(state):
        raise ContractError(name, "state", f"{method} returned a state of another structure "
                            f"than reset's (lax.scan needs them equal): reset "
                            f"{_describe(state)}, {method} {_describe(state2)}")
    if not isinstance(info, Mapping):
        raise ContractError(name, "info", f"{method} returned info of type "
                            f"{type(info).__name__}, expected a dict")
    return info


def _check_vmap(name, env, key, state, action, params):
    """The trainer runs N environments with `jax.vmap`: trace step_autoreset over two."""
    batch = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct((2,) + tuple(x.shape), x.dtype),
                                   (state, action))
    _trace(name, "vmap", jax.vmap(env.step_autoreset, in_axes=(0, 0, 0, None)),
           jax.random.split(key, 2), *batch, params)


def _check_multi(env, name):
    missing = [m for m in ("reset", "step_autoreset", "observation_space", "action_space")
               if not callable(getattr(env, m, None))]
    missing += [a for a in ("agents", "default_params") if not hasattr(env, a)]
    if missing:
        raise ContractError(name, "members", f"the multi-agent object {type(env).__name__} lacks "
                            f"{missing}; expected agents, observation_space(agent), "
                            f"action_space(agent), default_params, reset, step_autoreset")
    agents = env.agents
    if not isinstance(agents, (tuple, list)) or not agents or len(set(agents)) != len(agents):
        raise ContractError(name, "agents", f"expected a non-empty tuple of distinct agent ids, "
                            f"got {agents!r}")
    _check_hashable(name, env)
    for a in agents:
        _check_obs_space(name, env.observation_space(a), f"({a!r})")
        _check_action_space(name, env.action_space(a), f"({a!r})")
    if hasattr(env, "max_episode_steps"):
        _check_steps(name, env)
    if hasattr(env, "eval_params"):
        _check_params_pair(name, env)
    key = jax.random.PRNGKey(0)
    params = env.default_params
    obs, state = _traced_reset(name, env, key, params)
    _agent_dicts(name, "reset", agents, obs=obs)
    for a in agents:
        _check_obs(name, "reset", obs[a], env.observation_space(a), f"obs[{a!r}]")
    actions = {a: _sample_action(env.action_space(a)) for a in agents}
    methods = ["step_autoreset"] + (["step"] if callable(getattr(env, "step", None)) else [])
    infos = {}
    for method in methods:
        out = _six(name, method, _trace(name, method, getattr(env, method), key, state, actions,
                                        params))
        obs2, state2, rewards, term, trunc, info = out
        _agent_dicts(name, method, agents, obs=obs2, rewards=rewards, terminated=term,
                     truncated=trunc)
        for a in agents:
            _check_obs(name, method, obs2[a], env.observation_space(a), f"obs[{a!r}]")
            _check_flags(name, method, rewards[a], term[a], trunc[a], f"[{a!r}]")
        infos[method] = _check_state_info(name, method, state, state2, info)
    for a in agents:
        f = info_field(infos["step_autoreset"], a, "final_obs")
        if f is None:
            raise ContractError(name, "final_obs", f"step_autoreset must give every agent's last "
                                f"observation of a finished episode as infos[agent]['final_obs'] "
                                f"(or infos['final_obs'][agent]); missing for {a!r}")
        _check_obs(name, "final_obs", f, env.observation_space(a), f"final_obs[{a!r}]")
    if callable(getattr(env, "reset_info", None)):
        first = _trace(name, "reset_info", env.reset_info, state)
        # final_obs is what only the auto-resetting step adds: compare without it.
        ref = infos.get("step", infos["step_autoreset"])
        if _struct(_drop_final_obs(first)) != _struct(_drop_final_obs(ref)):
            raise ContractError(name, "info", f"reset_info(state) must have the structure of "
                                f"step's infos: reset_info {_describe(first)}, step "
                                f"{_describe(ref)}")
    _check_vmap(name, env, key, state, actions, params)
    steps = getattr(env, "max_episode_steps", 1)
    _check_evaluation(name, env, infos.get("step", _drop_final_obs(infos["step_autoreset"])),
                      steps, actions)


def _drop_final_obs(info):
    out = {}
    for k, v in info.items():
        if k == "final_obs":
            continue
        out[k] = {kk: vv for kk, vv in v.items() if kk != "final_obs"} if isinstance(v, Mapping) \
            else v
    return out


def _traced_reset(name: str, env, key, params):
    """``env.reset(key, params)`` traced abstractly; (obs, state), or a ContractError on 'reset'."""
    out = _trace(name, "reset", env.reset, key, params)
    if not isinstance(out, tuple) or len(out) != 2:
        raise ContractError(name, "reset", f"expected reset to return (obs, state), got "
                            f"{type(out).__name__}")
    return out


def _check_evaluation(name, env, info, steps: int, action) -> None:
    """Check ``env.evaluation`` (if any) against one step's (abstract) info."""
    ev = getattr(env, "evaluation", None)
    if ev is None:
        return
    missing = [m for m in ("record", "summarise", "format", "rollout_stats")
               if not callable(getattr(ev, m, None))]
    missing += [a for a in ("score", "score_mode", "plots") if not hasattr(ev, a)]
    if missing:
        raise ContractError(name, "evaluation", f"env.evaluation ({type(ev).__name__}) lacks "
                            f"{missing}; expected the Evaluation protocol (record, summarise, "
                            f"format, rollout_stats, score, score_mode, plots)")
    if ev.score_mode not in SCORE_MODES:
        raise ContractError(name, "evaluation", f"score_mode: expected one of {list(SCORE_MODES)}, "
                            f"got {ev.score_mode!r}")
    rec = _trace(name, "evaluation", ev.record, info)
    if not isinstance(rec, Mapping) or not all(isinstance(k, str) and _is_array(v)
                                               for k, v in rec.items()):
        raise ContractError(name, "evaluation", f"record(info) must return a flat dict of "
                            f"name -> array, got {rec!r}")
    clash = sorted(set(rec) & set(RESERVED_RECORD_KEYS))
    if clash:
        raise ContractError(name, "evaluation", f"record(info) uses the reserved names {clash} "
                            f"(the episode records {list(RESERVED_RECORD_KEYS)} itself)")
    rollout_info = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct((2, 3) + tuple(x.shape), x.dtype), info)
    stats = _trace(name, "evaluation", ev.rollout_stats, rollout_info)
    if not isinstance(stats, Mapping) or not all(_is_array(v) and v.shape == ()
                                                 for v in stats.values()):
        raise ContractError(name, "evaluation", f"rollout_stats(info (T, N, ...)) must return a "
                            f"dict of scalars, got {stats!r}")
    # summarise / format on a zero episode of the recorded shapes: only the types are checked.
    episode = {k: np.zeros((steps,) + tuple(v.shape), v.dtype) for k, v in rec.items()}
    episode.update(reward=np.zeros(steps), alive=np.ones(steps, bool))
    episode["action"] = jax.tree_util.tree_map(
        lambda a: np.zeros((steps,) + tuple(a.shape), a.dtype), action)
    try:
        summary = dict(ev.summarise(episode))
        line = ev.format(summary)
    except Exception as e:
        raise ContractError(name, "evaluation", f"summarise/format failed on an episode of "
                            f"zeros with the recorded fields {sorted(rec)}: "
                            f"{type(e).__name__}: {e}") from e
    bad = [k for k, v in summary.items() if not isinstance(k, str) or k in GENERIC_SUMMARY_KEYS
           or not isinstance(v, (float, int, np.floating, np.integer))]
    if bad:
        raise ContractError(name, "evaluation", f"summarise must return str -> float other than "
                            f"{list(GENERIC_SUMMARY_KEYS)} (the trainer adds those), got {bad}")
    if ev.score not in summary and ev.score not in GENERIC_SUMMARY_KEYS:
        raise ContractError(name, "evaluation", f"score: expected one of summarise's fields "
                            f"{sorted(summary)} or 'return', got {ev.score!r}")
    if not isinstance(line, str):
        raise ContractError(name, "evaluation", f"format must return a str, got "
                            f"{type(line).__name__}")
    if not isinstance(ev.plots, Mapping):
        raise ContractError(name, "evaluation", f"plots: expected a dict, got {ev.plots!r}")
