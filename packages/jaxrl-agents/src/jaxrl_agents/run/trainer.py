"""Training: `train` one or several seeds of an algorithm and write one run directory per seed.

One call trains one or several seeds *together*: the update is vmapped over a leading seed axis and
compiled once. Each seed still gets its own run directory (so every tool reads one layout)::

    <out>/<algo>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]/
        config.json      everything needed to rebuild the run (run_config.py)
        progress.csv     one row per update: step, wall, then the stats sorted by name; the eval
                         fields (eval_return, eval_len, then eval_<field> for every field of the
                         env's evaluation summary) on eval rows only
        evals.npz        every evaluation episode: step (n_evals,), reward / alive (n_evals, T),
                         action (n_evals, T, A) and what the env's evaluation records per step
                         (n_evals, T, ...)
        checkpoint.npz   latest checkpoint of the whole seed group (checkpoint.py)
        best_policy/     policy with the best evaluation so far (the env's evaluation score:
                         highest eval return for environments that describe none)
        last_policy/     policy at the latest evaluation

evals.npz and the two policies are written with each checkpoint (and at the end), progress.csv
also every 10 updates: evaluating after every update stays cheap, and what a crash loses beyond
the checkpoint a resume recomputes bit for bit.

Directories are created with ``os.makedirs(exist_ok=False)``: an existing run is never overwritten.
Every file is written atomically, so ``kill -9`` leaves either the old or the new version. Each run
directory is locked (``fileio.lock_directory``) for the whole of a train or resume, so a second
process gets an error instead of overwriting the first one's files.

Non-finite values: the compiled update reduces "parameters, optimiser state and losses are finite"
to one flag per seed, read with the stats at the host sync the loop already does. The first update
that fails stops the run with `NonFiniteError` before anything of it is written; the checkpoint on
disk stays the last finite one.

The pieces: checks.py (arguments), run_config.py (config.json), records.py (rows, evaluations,
policies), loop.py (the loop), resume.py (`resume`), results.py (`TrainResult`, `NonFiniteError`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

import jax

from ..common.config import AlgoConfig
from ..common.envs import DEFAULT_ENV, check_env, load_env
from ..common.fileio import lock_directory
from .algorithms import AgentNetworks, canonical_name, is_ippo, make_config, model_for
from .checks import (
    check_argv,
    check_env_options,
    check_pos_int,
    check_progress,
    check_seeds,
    check_stop_after,
    check_tag,
)
from .init_from import load_init_params
from .loop import Run
from .records import decade_crossed, report_every_updates
from .results import NonFiniteError, TrainResult
from .resume import resume
from .run_config import run_record, write_run_configs
from .run_files import CHECKPOINT, EVALS_NPZ, PROGRESS_CSV, RUN_CONFIG, check_out, make_run_dirs, remove_new_run_dirs

__all__ = ["train", "resume", "TrainResult", "NonFiniteError", "RUN_CONFIG", "PROGRESS_CSV",
           "EVALS_NPZ", "CHECKPOINT", "decade_crossed", "report_every_updates"]


def train(algo: str = "ppo", env: Any = DEFAULT_ENV, env_options: dict | None = None,
          config: AlgoConfig | dict | None = None, seeds=(0,), eval_every: int = 2_000_000,
          out: str = "runs", tag: str = "", checkpoint_every: int = 25,
          progress: str | None = None, argv: list[str] | None = None,
          stop_after: int | None = None, network=None,
          network_options: dict | None = None, report_every: int | None = None,
          preset: str | None = None, init_from: str | None = None) -> TrainResult:
    """Train `algo` on `env` for every seed at once and write one run directory per seed.

    Every argument is checked before a run directory is created or anything is compiled. The run
    directories are locked while the run uses them (`fileio.lock_directory`).

    Args:
        algo: "ppo" or "trpo".
        env: "module:factory" (imported and called with `env_options`) or an environment object.
        env_options: keyword options of the factory.
        config: algorithm config (object or dict of fields); defaults are the paper's.
        seeds: one int or several (trained together in one compiled program).
        eval_every: environment steps between evaluations (rounded to whole updates, >= 1 update);
            the last update is always evaluated.
        out: parent directory of the run directories.
        tag: optional suffix of the run directory names.
        checkpoint_every: updates between checkpoints (one is always written at the end).
        progress: "bar", "lines", "off" or None (bar on a terminal, lines otherwise).
        argv: command line to record in config.json.
        stop_after: stop after this many updates without final writes (simulates an interruption).
        network: a user network, ``"module:factory"`` or the factory itself (see
            `common.networks.ActorCritic`); overrides ``config.network``. None: the config's.
        network_options: keyword options of the network factory (overrides the config's).
        report_every: environment steps between printed evaluation lines (every evaluation is
            recorded; a seed's line is also printed whenever its best score falls below a new
            power of ten); None: about 25 lines over the run.
        preset: the name of the `presets.Preset` the config came from, recorded in config.json
            (the config itself is what the run uses).
        init_from: a run directory (its best policy) or a policy directory whose parameters
            every seed starts from, for a fine-tuning phase (`init_from.load_init_params`); the
            config's nonzero ``log_std_init`` replaces the policy's learned std. PPO and TRPO.

    Returns:
        `TrainResult`.

    Raises:
        ValueError: bad arguments (before anything is created or compiled).
        NonFiniteError: an update gave non-finite values; the last finite checkpoint is kept.
        OSError: a file could not be written (full or read-only disk); every file written so
            far is intact (atomic writes).
    """
    algo = canonical_name(algo)  # "ippo_lag" is IPPO-Lagrangian's older name
    cfg = make_config(algo, config)
    if network is not None or network_options is not None:  # validated as config fields
        if not any(f.name == "network" for f in dataclasses.fields(cfg)):
            raise ValueError(f"network: user networks are for ppo and trpo; {algo!r} builds its "
                             f"per-agent networks from hidden/activation, got network={network!r}")
        cfg = dataclasses.replace(cfg, network=cfg.network if network is None else network,
                                  network_options=cfg.network_options if network_options is None
                                  else network_options)
    seeds = check_seeds(seeds)
    eval_every = check_pos_int("eval_every", eval_every)
    checkpoint_every = check_pos_int("checkpoint_every", checkpoint_every)
    if report_every is not None:
        report_every = check_pos_int("report_every", report_every)
    if preset is not None and not isinstance(preset, str):
        raise ValueError(f"preset: expected a preset name or None, got {preset!r}")
    tag = check_tag(tag)
    out = check_out(out)
    env_options = check_env_options(env_options)
    progress = check_progress(progress)
    argv = check_argv(argv)
    stop_after = check_stop_after(stop_after)
    with jax.enable_x64(True):  # the physics is float64; networks stay float32 by construction
        if is_ippo(algo):
            env_spec, env_obj = _ippo_env(env, env_options, cfg)
            if env_obj is None:  # a ParallelEnv stepped from Python: no checkpoints (see there)
                return _train_parallel(algo, env, env_spec, env_options, cfg, seeds, eval_every,
                                       checkpoint_every, tag, out, progress, argv)
            model = AgentNetworks.of(env_obj, cfg)
        elif isinstance(env, str):
            env_spec, env_obj = env, load_env(env, env_options)
        else:
            check_env(env)
            env_spec, env_obj = None, env
        if not is_ippo(algo):
            model = model_for(env_obj, cfg)
        init_params, init_record = None, None
        if init_from is not None:
            if is_ippo(algo):
                raise ValueError(f"init_from: fine-tuning starts are for ppo and trpo, got algo "
                                 f"{algo!r}")
            init_params, init_record = load_init_params(init_from, model)
        run_dirs = make_run_dirs(out, algo, seeds, tag)
        with contextlib.ExitStack() as locks:
            try:
                for d in run_dirs:
                    locks.enter_context(lock_directory(d))
                write_run_configs(run_dirs, algo, env_spec, env_options, env_obj, cfg, model,
                                   seeds, eval_every, checkpoint_every, tag, out, argv,
                                   report_every, preset, init_record)
                run = Run(algo, cfg, env_obj, env_spec, env_options, seeds, run_dirs,
                           eval_every, checkpoint_every, progress, report_every)
                state = (run.compiled.init(run.seed_keys, run.train_params) if init_params is None
                         else run.compiled.init(run.seed_keys, run.train_params, init_params))
            except BaseException:
                # The run never started: leave no directory holding only its config.json.
                locks.close()
                remove_new_run_dirs(run_dirs)
                raise
            return run.loop(state, 0, 0.0, stop_after)


def _ippo_env(env, env_options, cfg):
    """(env spec, functional multi-agent core) of an IPPO run, or (spec, None).

    (spec, None) keeps the ParallelEnv in place of the core when it must be stepped from Python.

    A ParallelEnv exposing its functional core as ``env.core`` is trained on that core when
    ``n_envs > 1``, as `IPPO.train` does.
    """
    from ..ippo.train import is_functional_marl_env

    spec = env if isinstance(env, str) else None
    obj = load_env(env, env_options, check=False) if isinstance(env, str) else env
    core = getattr(obj, "core", None) if cfg.n_envs > 1 else None
    if is_functional_marl_env(core):
        obj = core
    if is_functional_marl_env(obj):
        check_env(obj)
        return spec, obj
    return spec, None


def _train_parallel(algo, env, env_spec, env_options, cfg, seeds, eval_every, checkpoint_every,
                    tag, out, progress, argv) -> TrainResult:
    from ..ippo.rollout import check_parallel_env
    from .ippo_parallel import train_parallel

    obj = load_env(env, env_options, check=False) if isinstance(env, str) else env
    check_parallel_env(obj)
    if len(seeds) != 1:
        raise ValueError(f"seeds: a PettingZoo ParallelEnv is one environment stepped from Python, "
                         f"so its seeds cannot be trained together; expected one seed, got "
                         f"{list(seeds)} (run one command per seed, or use a functional core)")
    if cfg.n_envs != 1:
        raise ValueError(f"n_envs: expected 1 for a PettingZoo ParallelEnv without a functional "
                         f"core (one environment stepped from Python), got {cfg.n_envs}; pass a "
                         f"functional multi-agent core (or an env exposing it as env.core) to "
                         f"run many environments compiled")
    rc = {**run_record(algo, env_spec, env_options, obj, cfg, seeds, tag, out, argv),
          "timesteps": cfg.total_steps}
    # Outside the trainer's x64 scope: a ParallelEnv adapter scopes x64 to its own calls
    # (design.md), and the update of the Python-stepped path is float32 end to end. Under x64 the
    # rollout's float64 numpy rewards would promote GAE to float64 and move every number.
    with jax.enable_x64(False):
        run_dir, result = train_parallel(algo, obj, cfg, seeds[0], out, tag, progress, rc)
    from .run_files import read_progress

    return TrainResult([run_dir], result.params,
                       [read_progress(os.path.join(run_dir, PROGRESS_CSV))], True)

