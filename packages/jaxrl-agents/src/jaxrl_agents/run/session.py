"""A trainer session: an open run that advances in steps of whole updates.

`Session.open(...)` starts a new run (it checks every argument, creates and locks the run
directories, writes config.json and builds the first train state); `Session.resume(run_dir)`
reopens one from its last checkpoint. Either way the session then holds the locked directories,
the compiled programs and the train state in memory, and `advance(n)` trains ``n`` more updates
(None: to the end; ``time_budget``: until a wall-clock budget is spent, on a checkpoint) and
returns the `TrainResult` so far. `close()` releases the directories; it writes none of the run's
files (only the TensorBoard events already computed are flushed), so what the checkpoint cadence
has not saved yet is recomputed by a later resume, bit for bit. A session is a context manager::

    with Session.open("ppo", "quantgate_env:make", seeds=(1, 2), checkpoint_every=8) as s:
        while not s.finished:
            result = s.advance(8)  # every 8 updates end on a checkpoint

`trainer.train` and `trainer.resume` are one `advance()` of a session; ``jaxrl-sweep`` trains each
trial as one session in segments, reporting between them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any

import jax

from ..common.config import AlgoConfig
from ..common.envs import DEFAULT_ENV
from ..common.fileio import lock_directory
from .algorithms import ALGORITHMS, canonical_name, get_algorithm, make_config
from .checks import (
    check_argv,
    check_env_options,
    check_pos_int,
    check_progress,
    check_seeds,
    check_tag,
    check_time_budget,
)
from .init_from import load_init_params
from .loop import Run
from .results import TrainResult
from .resume import open_checkpoint
from .run_config import write_run_configs
from .run_files import check_out, make_run_dirs, remove_new_run_dirs

__all__ = ["Session", "NewRun", "plan_new_run"]


@dataclasses.dataclass
class NewRun:
    """A new run's checked arguments and environment (`plan_new_run`); nothing exists on disk yet.

    ``env_obj`` is the environment the algorithm compiles, or None where its registry entry finds
    none to compile (`steps_from_python`).
    """

    algo: str
    cfg: AlgoConfig
    env: Any
    env_spec: str | None
    env_obj: Any
    env_options: dict
    seeds: tuple[int, ...]
    eval_every: int
    checkpoint_every: int
    report_every: int | None
    preset: str | None
    tag: str
    out: str
    progress: str | None
    argv: list[str] | None
    model: Any = None
    init_params: Any = None
    init_record: Any = None
    tensorboard: bool = False

    @property
    def steps_from_python(self) -> bool:
        """Whether the run steps its environment from Python: IPPO on a PettingZoo ParallelEnv.

        Such a run has no compiled loop and cannot be checkpointed, so it has no `Session`;
        `ippo.IPPO.train` trains it, and ``jaxrl-train`` writes its run directory around that
        call (`console.parallel_env_run`).
        """
        return self.env_obj is None


def plan_new_run(algo: str = "ppo", env: Any = DEFAULT_ENV, env_options: dict | None = None,
                 config: AlgoConfig | dict | None = None, seeds=(0,),
                 eval_every: int = 2_000_000, out: str = "runs", tag: str = "",
                 checkpoint_every: int = 25, progress: str | None = None,
                 argv: list[str] | None = None, network=None,
                 network_options: dict | None = None, report_every: int | None = None,
                 preset: str | None = None, init_from: str | None = None,
                 tensorboard: bool = False) -> NewRun:
    """Check the arguments of a new run and build its environment (arguments as `trainer.train`).

    The environment is built under ``jax.enable_x64(True)`` (float64 environments refuse to
    build without it). Raises ValueError before anything is created or compiled.
    """
    with jax.enable_x64(True):
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
        plan = NewRun(algo, cfg, env, None, None, None, seeds, eval_every, checkpoint_every,
                      report_every, preset, check_tag(tag), check_out(out), None, None)
        plan.env_options = check_env_options(env_options)
        plan.progress = check_progress(progress)
        plan.argv = check_argv(argv)
        if not isinstance(tensorboard, bool):
            raise ValueError(f"tensorboard: expected True or False, got {tensorboard!r}")
        if tensorboard:
            from .tensorboard import require_tensorboardx

            require_tensorboardx()
        plan.tensorboard = tensorboard
        entry = get_algorithm(algo)
        plan.env_spec, plan.env_obj = entry.environment(env, plan.env_options, cfg)
        if plan.steps_from_python:  # no network to build here: IPPO.train builds its own
            return plan
        plan.model = entry.networks(plan.env_obj, cfg)
        if init_from is not None:
            if not entry.fine_tunes:
                raise ValueError(f"init_from: fine-tuning starts are for "
                                 f"{' and '.join(n for n, a in ALGORITHMS.items() if a.fine_tunes)}, "
                                 f"got algo {algo!r}")
            plan.init_params, plan.init_record = load_init_params(init_from, plan.model, report=plan.progress != "off")
        return plan


class Session:
    """An open run (its seed group): locked run directories, compiled programs, train state.

    Build one with `Session.open` (a new run) or `Session.resume` (from a checkpoint).

    Attributes:
        run_dirs: one run directory per seed.
        update: updates trained so far.
        n_updates: updates of the whole run.
    """

    def __init__(self, run: Run, state, update: int, wall: float, locks: contextlib.ExitStack):
        self._run, self._state, self._locks = run, state, locks
        self.update, self._wall = update, wall
        self._broken = False

    # --------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, algo: str = "ppo", env: Any = DEFAULT_ENV, **kwargs) -> Session:
        """Start a new run: same arguments as `trainer.train` (without ``stop_after``).

        Raises:
            ValueError: bad arguments (before anything is created or compiled), or a run that
                steps its environment from Python (`NewRun.steps_from_python`).
        """
        return cls.start(plan_new_run(algo, env, **kwargs))

    @classmethod
    def start(cls, plan: NewRun) -> Session:
        """Create, lock and record the run directories of `plan` and build the first state.

        Raises:
            ValueError: `plan` steps its environment from Python (IPPO on a PettingZoo
                ParallelEnv): it cannot be checkpointed, so it has no session. Nothing is created.
        """
        if plan.steps_from_python:
            raise ValueError(
                "env: a PettingZoo ParallelEnv stepped from Python cannot be checkpointed, so the "
                "trainer has no session for it; train it with jaxrl_agents.IPPO(config, "
                "seed).train(env, timesteps), or write a run directory with jaxrl-train --algo "
                f"{plan.algo} --env MODULE:FACTORY; a functional multi-agent core (or a ParallelEnv "
                "exposing one as env.core, with n_envs > 1) trains here")
        p = plan
        with jax.enable_x64(True):
            run_dirs = make_run_dirs(p.out, p.algo, p.seeds, p.tag)
            locks = contextlib.ExitStack()
            try:
                for d in run_dirs:
                    locks.enter_context(lock_directory(d))
                write_run_configs(run_dirs, p.algo, p.env_spec, p.env_options, p.env_obj, p.cfg,
                                  p.model, p.seeds, p.eval_every, p.checkpoint_every, p.tag,
                                  p.out, p.argv, p.report_every, p.preset, p.init_record,
                                  p.tensorboard)
                run = Run(p.algo, p.cfg, p.env_obj, p.env_spec, p.env_options, p.seeds, run_dirs,
                          p.eval_every, p.checkpoint_every, p.progress, p.report_every,
                          p.tensorboard)
                state = (run.compiled.init(run.seed_keys, run.train_params)
                         if p.init_params is None
                         else run.compiled.init(run.seed_keys, run.train_params, p.init_params))
            except BaseException:
                # The run never started: leave no directory holding only its config.json.
                locks.close()
                remove_new_run_dirs(run_dirs)
                raise
        return cls(run, state, 0, 0.0, locks)

    @classmethod
    def resume(cls, run_dir: str, env: Any = None, progress: str | None = None,
               total_steps: int | None = None) -> Session:
        """Reopen a run (and its seed group) at its last checkpoint (arguments as `trainer.resume`).

        Every file is checked before anything is compiled; the group's directories are locked
        until `close`.
        """
        locks = contextlib.ExitStack()
        try:
            with jax.enable_x64(True):
                run, state, meta = open_checkpoint(run_dir, env, progress, total_steps, locks)
        except BaseException:
            locks.close()
            raise
        return cls(run, state, meta["update"], meta["wall"], locks)

    # ---------------------------------------------------------------------------- training
    @property
    def run_dirs(self) -> list[str]:
        """One run directory per seed."""
        return list(self._run.run_dirs)

    @property
    def n_updates(self) -> int:
        """Updates of the whole run (its step budget over the rollout size)."""
        return self._run.cfg.n_updates

    @property
    def finished(self) -> bool:
        """Whether every update of the run has been trained."""
        return self.update >= self.n_updates

    def advance(self, n_updates: int | None = None, time_budget: float | None = None,
                stop_when=None) -> TrainResult:
        """Train `n_updates` more updates (None, or more than remain: to the end of the run).

        Checkpoints, evaluations and progress rows follow the run's cadences; the last update of
        the run writes everything. Returns the `TrainResult` so far (``finished`` once the run
        is complete).

        Args:
            n_updates: updates to train (None: to the end).
            time_budget: seconds of wall-clock from this call: the first update that ends past
                it is the last, and it is checkpointed, so the run stops cleanly and resumes
                bit-identically (``stopped_at_deadline`` tells). None: no budget.
            stop_when: ``(update, records) -> bool`` asked after every update (`loop.Run.advance`):
                True stops there, on a checkpoint (``stopped_by_rule`` tells). Staged runs
                (`jaxrl_agents.stages`) end a stage or an attempt with it. None: never.

        Raises:
            NonFiniteError: an update gave non-finite values (the session is then unusable:
                close it; the checkpoint on disk is the last finite state).
            OSError: a file could not be written.
        """
        if self._locks is None:
            raise ValueError("advance: this session is closed")
        if self._broken:
            raise ValueError("advance: a previous advance failed; close this session and resume "
                             "the run from its checkpoint")
        if n_updates is not None:
            n_updates = check_pos_int("n_updates", n_updates)
        time_budget = check_time_budget(time_budget)
        deadline = None if time_budget is None else time.monotonic() + time_budget
        if not self.finished:
            self._broken = True  # until the updates are done: the input state is donated
            with jax.enable_x64(True):
                self._state, self.update, self._wall = self._run.advance(
                    self._state, self.update, self._wall, n_updates, deadline, stop_when)
            self._broken = False
        return self.result()

    def result(self) -> TrainResult:
        """The `TrainResult` so far (the state as host arrays)."""
        return self._run.result(jax.device_get(self._state), self.finished)

    def close(self) -> None:
        """Release the run directories; closing twice is harmless.

        Writes none of the run's files (the TensorBoard event files are flushed and closed): what
        the checkpoint cadence has not saved is recomputed by a resume.
        """
        if self._locks is not None:
            self._run.close()  # the TensorBoard event files, flushed
            self._locks.close()
            self._locks = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def stopped_at_deadline(self) -> bool:
        """Whether the last `advance` stopped at its time budget (on a checkpoint)."""
        return self._run.stopped_at_deadline

    @property
    def stopped_by_rule(self) -> bool:
        """Whether the last `advance` stopped because its ``stop_when`` said so (on a checkpoint)."""
        return self._run.stopped_by_rule

    @property
    def records(self) -> list:
        """One `records.SeedRecord` per seed: rows, evaluations, ``best`` and ``best_step``."""
        return list(self._run.records)

    @property
    def wall(self) -> float:
        """Seconds of training so far (the ``wall`` column of the last row)."""
        return self._wall

    @property
    def rollout_size(self) -> int:
        """Environment steps per update (all of the seed's environments)."""
        return self._run.cfg.rollout_size

    @property
    def checkpoint_update(self) -> int:
        """The update of the checkpoint on disk (0: none written yet)."""
        return self._run.checkpoint_update
