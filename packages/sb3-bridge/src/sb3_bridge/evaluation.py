"""Deterministic evaluation of a policy on a functional JAX environment or a Gymnasium environment.

Writes the trainer's summary, ``evals.npz`` and the paper's pulse CSV.

Two kinds of environment, one record format (that of ``jaxrl_agents.common.evaluation.evaluate_episode``):
``{"reward": (T,), "alive": (T,) bool, "action": (T, A), <info leaves>: (T, ...)}`` where ``alive``
marks the steps of the episode, including the one that ended it.

- Functional (``module:factory``, e.g. ``quantgate_env:make``): jaxrl-agents' own evaluation
  (mean actions, ``env.eval_params`` = nominal device, one compiled ``lax.scan``), run under
  ``jax.enable_x64(True)`` because the physics is float64 and the caller owns that switch.
- Gymnasium (an id such as ``"Pendulum-v1"`` or ``"quantgate_env:ZCQPEE-v0"``, or an ``Env``): a Python
  loop calling ``policy.act`` and clipping Box actions to the action space before ``env.step``,
  exactly what SB3's ``predict(deterministic=True)`` + ``env.step`` does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .outputs import refuse_existing

__all__ = ["evaluate", "resolve_env", "describe_evaluation", "summarize", "write_evals", "write_summary", "write_pulse_csv",
           "episode_pulse", "output_files"]


def resolve_env(env: Any = "quantgate_env:make", options: Mapping[str, Any] | None = None):
    """Turn an environment name into an environment object.

    Args:
        env: ``"module:factory"`` (a callable returning a functional env or a ``gymnasium.Env``), a
            Gymnasium id (``"CartPole-v1"``, ``"module:EnvName-v0"``), or an environment object
            (returned as is; ``options`` must then be empty).
        options: keyword arguments for the factory or ``gymnasium.make``.

    Returns:
        ``(env_object, kind)`` with ``kind`` ``"functional"`` or ``"gymnasium"``.

    Raises:
        ValueError: the module cannot be imported, the id is unknown, or the options are rejected.
    """
    options = dict(options or {})
    if not isinstance(env, str):
        if options:
            raise ValueError("env_options: only used when env is given by name, got an environment object")
        return env, _kind(env)
    if ":" in env:
        attr = env.split(":", 1)[1]
        # "module:factory" (an identifier) vs Gymnasium's "module:EnvName-v0" (never an identifier).
        if attr.isidentifier():
            from jaxrl_agents.common.envs import load_env  # one importer of 'module:factory' specs

            obj = load_env(env, options, check=False)  # the kind decides how it is checked
            return obj, _kind(obj)
    import gymnasium as gym
    try:
        return gym.make(env, **options), "gymnasium"
    except gym.error.Error as exc:
        raise ValueError(f"env: {env!r} is neither 'module:factory' nor a registered Gymnasium id "
                         f"({exc})") from None
    except TypeError as exc:
        raise ValueError(f"env options: {env} rejected {sorted(options)}: {exc}") from None


def _kind(env) -> str:
    import gymnasium as gym
    if isinstance(env, gym.Env):
        return "gymnasium"
    if all(hasattr(env, a) for a in ("reset", "step", "eval_params", "max_episode_steps")):
        return "functional"
    raise ValueError(f"env: {type(env).__name__} is neither a gymnasium.Env nor a functional "
                     f"environment (reset/step/eval_params/max_episode_steps, docs/contracts.md)")


def evaluate(policy, env: Any = "quantgate_env:make", *, env_options: Mapping[str, Any] | None = None,
             episodes: int = 1, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Run deterministic episodes (mean / arg-max actions) and record them.

    Args:
        policy: a ``jaxrl_agents.Policy`` (e.g. from ``sb3_bridge.load``).
        env: see ``resolve_env``; default the paper's environment ``quantgate_env:make`` on its
            evaluation parameters (nominal device, no drift).
        env_options: keyword options for the environment factory / ``gymnasium.make``.
        episodes: number of episodes (each reset with a new key / seed).
        seed: base seed: functional episodes use ``jax.random.split(PRNGKey(seed), episodes)``,
            Gymnasium episode i resets with ``seed + i``.

    Returns:
        one dict per episode: ``reward`` (T,), ``alive`` (T,) bool, ``action`` (T, A) (unclipped
        means for functional envs; the clipped action actually sent for Gymnasium ones), and every
        numeric info leaf (T, ...) (gate env: ``JT``, ``concurrence``, ``unitarity``, ``t`` in ns,
        ``amps`` (T, K) in rad/ns, ...). Functional episodes have T = ``max_episode_steps`` with
        ``alive`` masking the tail; Gymnasium ones end at termination/truncation.
    """
    if not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ValueError(f"episodes: expected a positive int, got {episodes!r}")
    env_obj, kind = resolve_env(env, env_options)
    _check_compatible(policy, env_obj, env)
    if kind == "functional":
        return _functional_episodes(policy, env_obj, int(episodes), int(seed))
    try:
        return [_gymnasium_episode(policy, env_obj, int(seed) + i) for i in range(int(episodes))]
    finally:
        if env_obj is not env:  # made here from a name: ours to close
            env_obj.close()


_compiled_episode = None


def _episode_fn():
    # One jitted function for the process: jit caches per (network, env) static pair, so repeated
    # evaluations of the same policy/env (several episodes, CLI + API) compile once.
    global _compiled_episode
    if _compiled_episode is None:
        import jax
        from jaxrl_agents.common.evaluation import evaluate_episode
        _compiled_episode = jax.jit(evaluate_episode, static_argnums=(0, 2))
    return _compiled_episode


def _check_compatible(policy, env, name) -> None:
    """Fail before compiling when the policy cannot act in this environment."""
    import gymnasium as gym
    obs_space, act_space = env.observation_space, env.action_space
    label = name if isinstance(name, str) else type(env).__name__
    if int(np.prod(obs_space.shape)) != policy.model.obs_dim:
        raise ValueError(f"env: {label} observes shape {obs_space.shape}, but the policy takes "
                         f"{policy.model.obs_dim} inputs; evaluate it on the environment it was trained on")
    if isinstance(act_space, gym.spaces.Discrete):
        ok = policy.model.action_kind == "categorical" and policy.model.action_shape == (int(act_space.n),)
    elif isinstance(act_space, gym.spaces.Box):
        ok = policy.model.action_kind == "gaussian" and \
            policy.model.action_shape == (int(np.prod(act_space.shape)),)
    else:
        ok = False
    if not ok:
        raise ValueError(f"env: {label} has action space {act_space}, but the policy outputs "
                         f"{policy.model.action_kind} actions of shape {policy.model.action_shape}")


def _functional_episodes(policy, env, episodes: int, seed: int):
    import jax
    from jaxrl_agents.common.envs import check_env

    run = _episode_fn()
    out = []
    # The physics is float64 (docs/contracts.md): the caller of the functional API enables x64,
    # scoped to this call so the user's global setting is untouched.
    with jax.enable_x64(True):
        check_env(env, name=type(env).__name__)
        keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
        for key in keys:
            episode = run(policy.model, policy.params["actor"], env, env.eval_params, key)
            out.append({k: np.asarray(v) for k, v in jax.device_get(episode).items()})
    return out


def _gymnasium_episode(policy, env, seed: int) -> dict[str, np.ndarray]:
    import gymnasium as gym
    space = env.action_space
    obs, _ = env.reset(seed=seed)
    records: dict[str, list] = {"reward": [], "alive": [], "action": []}
    done = False
    while not done:
        action = policy.act(np.asarray(obs, np.float32).reshape(-1))
        if isinstance(space, gym.spaces.Box):
            # SB3's predict reshapes to the space and clips; do the same so episodes match.
            action = np.clip(action.reshape(space.shape), space.low, space.high)
        else:
            action = int(action)
        obs, reward, terminated, truncated, info = env.step(action)
        records["reward"].append(float(reward))
        records["alive"].append(True)
        records["action"].append(np.asarray(action))
        for key, value in info.items():
            arr = np.asarray(value) if not isinstance(value, Mapping) else None
            if arr is not None and arr.dtype.kind in "biuf" and key != "final_obs":
                records.setdefault(key, []).append(arr)
        done = bool(terminated or truncated)
    n = len(records["reward"])
    return {k: np.stack(v) for k, v in records.items() if len(v) == n}


def write_summary(path, summary: Mapping[str, Any], *, overwrite: bool = False) -> None:
    """Write ``summary`` as indented strict JSON, atomically.

    Numpy scalars become numbers; a NaN or infinite number becomes ``null`` (``eval_t_first_PE``
    of an episode that never reached a perfect entangler): strict JSON has no NaN, and parsers
    other than Python's (JavaScript's ``JSON.parse``) reject it. The whole text is built before the
    file is touched. Raises ``FileExistsError`` if ``path``
    exists and ``overwrite`` is False.
    """
    from jaxrl_agents.common.fileio import atomic_write, json_text
    refuse_existing([path], overwrite=overwrite)
    text = json_text(summary) + "\n"
    atomic_write(os.fspath(path), text.encode())


def describe_evaluation(env: Any = "quantgate_env:make", options: Mapping[str, Any] | None = None):
    """The environment's own description of its evaluation episode (docs/contracts.md).

    It says what its summary holds and how its line reads (for the gate env: best J_T and its time,
    J_T at the end, 1 - U at the best step, time of the first perfect entangler).

    Functional envs give ``env.evaluation``; a Gymnasium env its ``unwrapped.evaluation`` or that of
    the functional core it wraps (``unwrapped.core``, as quantgate-env's does); an env that
    describes none gets the generic one (return and length only).
    """
    from jaxrl_agents.common.contracts import ReturnEvaluation, evaluation_of

    env_obj, kind = resolve_env(env, options)
    if kind == "functional":
        return evaluation_of(env_obj)
    try:
        inner = env_obj.unwrapped
        ev = getattr(inner, "evaluation", None) or getattr(getattr(inner, "core", None),
                                                           "evaluation", None)
        return ev or ReturnEvaluation()
    finally:
        if env_obj is not env:  # made here from a name: ours to close
            env_obj.close()


def summarize(episode: Mapping[str, np.ndarray], description=None) -> dict[str, float]:
    """The trainer's evaluation summary (``jaxrl_agents.common.evaluation.eval_summary``).

    Return, length, and the fields of the environment's description (`describe_evaluation`; None:
    return and length only), each as ``eval_<field>``.
    """
    from jaxrl_agents.common.evaluation import eval_summary
    return eval_summary(episode, description)


def write_evals(path, episodes: list[Mapping[str, np.ndarray]], step: int = 0, *,
                overwrite: bool = False) -> None:
    """Write episodes as ``evals.npz`` in the trainer's layout.

    Layout: ``step`` (N,), ``reward`` / ``alive`` (N, T), ``action`` (N, T, A), info leaves
    (N, T, ...). Episodes of different lengths are padded at the end with ``alive = False`` and the
    last recorded values.

    Written atomically. Raises ``FileExistsError`` if ``path`` exists and ``overwrite`` is False
    (a training run's own ``evals.npz`` is never replaced by accident).
    """
    from jaxrl_agents.common.fileio import atomic_savez
    refuse_existing([path], overwrite=overwrite)
    keys = [k for k in episodes[0] if all(k in ep for ep in episodes)]
    length = max(len(ep["alive"]) for ep in episodes)
    arrays = {"step": np.full(len(episodes), int(step), np.int64)}
    for key in keys:
        rows = []
        for ep in episodes:
            a = np.asarray(ep[key])
            pad = length - a.shape[0]
            if pad:
                fill = np.zeros_like(a[:1]) if key == "alive" else a[-1:]
                a = np.concatenate([a, np.repeat(fill, pad, axis=0)])
            rows.append(a)
        arrays[key] = np.stack(rows)
    atomic_savez(os.fspath(path), arrays)


def output_files(episodes: int) -> list[str]:
    """Names of the files ``sb3-bridge evaluate --out DIR`` writes for ``episodes`` episodes.

    The pulse files are written only when the environment reports ``amps``.
    """
    pulses = ["pulse.csv"] if episodes == 1 else [f"pulse_{i}.csv" for i in range(episodes)]
    return ["evals.npz", "summary.json"] + pulses


def episode_pulse(episode: Mapping[str, np.ndarray], dt: float | None = None) -> tuple[np.ndarray, float]:
    """The pulse an episode applied: amplitudes of every sample in order, and the sample length.

    Args:
        episode: a record with ``amps`` (T, K) (rad/ns, K samples per RL step), ``alive`` (T,)
            and, unless ``dt`` is given, ``t`` (T,) ns at the end of each step.
        dt: sample duration in ns (default: step duration from ``t`` divided by K).

    Returns:
        ``(amps (n_alive * K,) float64 rad/ns, dt ns)``.
    """
    if "amps" not in episode:
        raise ValueError("episode: no 'amps' info (rad/ns per sample); only environments that report "
                         "their pulse (the gate env) can be written as a pulse file")
    alive = np.asarray(episode["alive"], bool)
    amps = np.asarray(episode["amps"], np.float64)[alive]
    amps = amps.reshape(amps.shape[0], -1)
    if dt is None:
        t = np.asarray(episode["t"], np.float64)[alive]
        step = t[1] - t[0] if t.size > 1 else t[0]
        # t is a float64 grid; rounding removes the last-bit noise of (t1 - t0) / K.
        dt = float(f"{step / amps.shape[1]:.12g}")
    return amps.reshape(-1), float(dt)


def write_pulse_csv(path, amps: np.ndarray, dt: float, *, overwrite: bool = False) -> None:
    """Write a pulse in the paper's format (that of ``quantgate_env.paper_pulse_path()``).

    Header ``,amplist,tlist`` (a pandas-style unnamed index), then row 0 = ``0,0.0,0.0`` (the value
    at t = 0, never applied) and row k = ``k,<amps[k-1]>,<k * dt>`` for k = 1..n: sample k-1 is held
    on (t_{k-1}, t_k]. Amplitudes in rad/ns, times in ns, both printed as float64 ``repr``.

    Written atomically. Raises ``FileExistsError`` if ``path`` exists and ``overwrite`` is False.
    """
    refuse_existing([path], overwrite=overwrite)
    amps = np.asarray(amps, np.float64).reshape(-1)
    lines = [",amplist,tlist", "0,0.0,0.0"]
    lines += [f"{k},{float(a)!r},{float(k * dt)!r}" for k, a in enumerate(amps, start=1)]
    from jaxrl_agents.common.fileio import atomic_write
    atomic_write(os.fspath(path), ("\n".join(lines) + "\n").encode())
