"""Resume: reopen an interrupted run (and its seed group) at its last checkpoint.

The checkpoint holds the full train state of every seed (parameters, optimiser state, environment
states, observations, PRNG keys, update counter) plus the best-so-far bookkeeping. On resume, rows
and evaluations recorded after the checkpoint are dropped and recomputed; since the update is
deterministic, the resumed run ends with the same parameters and the same progress rows (except
wall time) as an uninterrupted one. Before anything is compiled, resume checks every file it reads
(run_files.py) and refuses, naming the file, a history that does not reach the checkpoint.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import jax

from ..common.fileio import lock_directory
from .algorithms import get_algorithm
from .checkpoint import load_checkpoint, read_checkpoint
from .checks import check_progress
from .host import small_loops
from .host.precision import recorded_x64
from .loop import Run
from .run_config import find_group, never_checkpointed, record_extension
from .run_files import CHECKPOINT, RUN_CONFIG, check_history, read_run_config
from .spec import RunSpec

__all__ = ["open_checkpoint"]


def _check_checkpoint_meta(path: str, header: dict, rc: dict, rollout_size: int) -> dict:
    """The checkpoint's progress record, checked against the run; ``seed_slices`` filled in.

    A checkpoint without ``seed_slices`` was written when a seed group ran as one program
    (host/seed_groups.py), so it reads as 1.
    """
    meta = header["meta"]
    n = len(rc["seeds"])
    ok = (isinstance(meta.get("update"), int) and meta["update"] > 0
          and meta.get("step") == meta["update"] * rollout_size
          and isinstance(meta.get("wall"), (int, float)) and meta.get("seeds") == rc["seeds"]
          and isinstance(meta.get("best"), list) and len(meta["best"]) == n
          and isinstance(meta.get("best_step"), list) and len(meta["best_step"]) == n)
    if not ok:
        raise ValueError(f"{path}: its progress record (update, step, seeds, best) does not match "
                         f"this run (seeds {rc['seeds']}, {rollout_size} steps per update); was "
                         f"it copied from another run?")
    slices = meta.get("seed_slices", 1)
    if isinstance(slices, bool) or not isinstance(slices, int) or slices < 1:
        raise ValueError(f"{path}: seed_slices: expected a positive integer, got {slices!r}")
    return {**meta, "seed_slices": slices}


def open_checkpoint(run_dir: str, env: Any, progress: str | None, total_steps: int | None,
                    locks: contextlib.ExitStack) -> tuple[Run, Any, dict]:
    """Check a run directory and its group, lock them into `locks`, and rebuild the run.

    Arguments as `trainer.resume`. Every file is checked before anything is compiled. Call under
    ``jax.enable_x64(True)`` (the environment is built under it, as a new run's is); the run's
    arrays are made under the precision config.json recorded (``run.spec.x64``, made explicit:
    x64 for a file written before runs recorded a choice).

    Returns:
        (the `Run` with its records restored up to the checkpoint, the checkpoint's train state
        (host arrays), the checkpoint's progress record: update, step, wall, best, ...).
    """
    if not isinstance(run_dir, (str, os.PathLike)) or isinstance(run_dir, bytes):
        raise ValueError(f"resume: expected a run directory path, got {run_dir!r}")
    run_dir = os.fspath(run_dir)
    path = os.path.join(run_dir, RUN_CONFIG)
    if not os.path.isfile(path):
        raise ValueError(f"resume: expected a run directory containing {RUN_CONFIG}, got "
                         f"{run_dir!r}")
    ckpt = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(ckpt) and never_checkpointed(path):
        raise ValueError(f"resume: {run_dir!r} is an IPPO run on a PettingZoo ParallelEnv stepped "
                         f"from Python, whose state cannot be checkpointed; such runs cannot "
                         f"resume (train on the env's functional core to get checkpoints)")
    if not os.path.isfile(ckpt):
        raise ValueError(f"resume: {run_dir!r} has no {CHECKPOINT} yet (interrupted before the "
                         f"first checkpoint); start a new run instead")
    if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                    or total_steps <= 0):
        raise ValueError(f"total_steps: expected a positive integer, got {total_steps!r}")
    progress = check_progress(progress)
    rc = read_run_config(path)
    run_dirs, configs = find_group(run_dir, rc)
    for d in run_dirs:
        locks.enter_context(lock_directory(d))
    return _rebuild(run_dir, rc, run_dirs, configs, ckpt, env, progress, total_steps)


def _rebuild(run_dir, rc, run_dirs, configs, ckpt, env, progress, total_steps):
    path = os.path.join(run_dir, RUN_CONFIG)
    try:
        # The one road back from config.json (older files too: keys added later read as their
        # defaults); every recorded value is checked before anything compiles.
        spec = RunSpec.from_run_config(rc)
        x64 = recorded_x64(rc)  # what the run traced under (x64 for a file without the key)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    old_total = spec.config["total_steps"]
    extend = total_steps is not None and total_steps != old_total
    if extend:  # a new budget: its errors name total_steps, the argument (not the file)
        spec = spec.replace(config={"total_steps": total_steps})
    cfg = spec.algo_config()
    tensorboard = spec.tensorboard
    if tensorboard:  # before anything compiles: the run was started with --tensorboard
        from .tensorboard import require_tensorboardx

        require_tensorboardx(f"resume: {run_dir!r} writes TensorBoard files (--tensorboard)",
                             ["jaxrl-train", "--resume", run_dir])
    _, header = read_checkpoint(ckpt)
    meta = _check_checkpoint_meta(ckpt, header, rc, cfg.rollout_size)
    slices = meta["seed_slices"]  # split as the run was
    if extend and cfg.n_updates < meta["update"]:
        raise ValueError(f"total_steps: expected at least the {meta['step']} steps already "
                         f"trained, got {total_steps}")
    # The loops' kernels round as the run's did: XLA's threshold as recorded, set before anything
    # starts the backend. A finished run compiles nothing, so any process may open it.
    if meta["update"] < cfg.n_updates:
        small_loops.require_recorded(rc, path, ["jaxrl-train", "--resume", run_dir])
    history = [check_history(d, meta["step"], cfg.rollout_size) for d in run_dirs]
    if env is None and spec.env is None:
        raise ValueError("env: this run was started with an environment object; pass the "
                         "same object as resume(run_dir, env=...)")
    # The road a new run took (session.plan_new_run): the registry entry builds and checks the
    # environment, so an IPPO run trained on a ParallelEnv's functional core resumes on the core.
    _, env = get_algorithm(spec.algo).environment(spec.env if env is None else env,
                                                  dict(spec.env_options), cfg)
    if env is None:
        raise ValueError(f"resume: {run_dir!r} trains a PettingZoo ParallelEnv stepped from "
                         f"Python, which cannot resume")
    # The run's arrays are made as the run made them (the checkpoint's dtypes), under the precision
    # config.json recorded; the Run's spec says it explicitly, for the session to trace under.
    spec = spec.replace(x64=x64)
    with jax.enable_x64(x64):
        run = Run(spec, cfg, env, run_dirs, progress)
        state, meta = load_checkpoint(ckpt, run.template())
    run.checkpoint_update = meta["update"]
    run.seed_slices = slices
    if extend:
        record_extension(run_dirs, configs, old_total, cfg.total_steps, meta["step"])
    for rec, (rows, evals), best, best_step in zip(run.records, history, meta["best"],
                                                    meta["best_step"]):
        rec.restore(rows, evals, best, best_step)
    return run, state, meta
