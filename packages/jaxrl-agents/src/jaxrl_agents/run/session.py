"""A trainer session: an open run that advances in steps of whole updates.

`Session.open(spec)` starts the run a `spec.RunSpec` describes (``Session.open("ppo", env,
...)`` takes `trainer.train`'s keyword arguments instead, made into a RunSpec by
`spec_of_arguments`): `plan_run` checks what the spec needs beyond itself and builds the
environment, then the session creates and locks the run directories, writes config.json from
the spec and builds the first train state; `Session.resume(run_dir)` reopens one from its last
checkpoint (its RunSpec read back from config.json). Either way the session then holds the locked
directories, the compiled programs and the train state in memory, and `advance(n)` trains ``n``
more updates (None: to the end; ``time_budget``: until a wall-clock budget is spent, on a checkpoint) and
returns the `TrainResult` so far. `close()` releases the directories; it writes none of the run's
files (only the TensorBoard events already computed are flushed), so what the checkpoint cadence
has not saved yet is recomputed by a later resume, bit for bit. A session is a context manager::

    spec = RunSpec("ppo", "quantgate_env:make", seeds=(1, 2), checkpoint_every=8)
    with Session.open(spec) as s:
        while not s.finished:
            result = s.advance(8)  # every 8 updates end on a checkpoint

`trainer.train` and `trainer.resume` are one `advance()` of a session; ``jaxrl-sweep`` trains each
trial as one session in segments, reporting between them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any

import jax

from ..common.config import AlgoConfig
from ..common.envs import DEFAULT_ENV
from ..common.fileio import lock_directory
from .algorithms import canonical_name, get_algorithm, make_config
from .checks import check_argv, check_pos_int, check_progress, check_time_budget
from .host.precision import run_x64
from .init_from import load_init_params
from .loop import Run
from .results import TrainResult
from .resume import open_checkpoint
from .run_config import write_run_configs
from .run_files import make_run_dirs, remove_new_run_dirs
from .spec import RunSpec

_NOT_GIVEN = object()  # Session.open's env when none is passed

__all__ = ["Session", "NewRun", "plan_run", "plan_new_run", "spec_of_arguments"]


@dataclasses.dataclass
class NewRun:
    """A new run's checked spec and built environment (`plan_run`); nothing exists on disk yet.

    ``env_obj`` is the environment the algorithm compiles, or None where its registry entry finds
    none to compile (`steps_from_python`). What the run is lives in ``spec``; the other fields
    are what starting it built or what this process shows (``progress``, ``argv``).
    """

    spec: RunSpec
    cfg: AlgoConfig
    env_spec: str | None
    env_obj: Any
    progress: str | None = None
    argv: list[str] | None = None
    env_given: Any = None  # the environment object handed beside a spec whose env is None
    model: Any = None
    init_params: Any = None
    init_record: Any = None
    x64: bool = True  # the precision the run traces under (`precision.run_x64`)

    # The spec's fields under the names the run's pieces read.
    algo = property(lambda self: self.spec.algo)
    env_options = property(lambda self: dict(self.spec.env_options))
    seeds = property(lambda self: self.spec.seeds)
    eval_every = property(lambda self: self.spec.eval_every)
    checkpoint_every = property(lambda self: self.spec.checkpoint_every)
    report_every = property(lambda self: self.spec.report_every)
    preset = property(lambda self: self.spec.preset)
    tag = property(lambda self: self.spec.tag)
    out = property(lambda self: self.spec.out)
    tensorboard = property(lambda self: self.spec.tensorboard)

    @property
    def env(self) -> Any:
        """The environment as given: the spec's ``"module:factory"`` or the object."""
        return self.spec.env if self.spec.env is not None else self.env_given

    @property
    def steps_from_python(self) -> bool:
        """Whether the run steps its environment from Python: IPPO on a PettingZoo ParallelEnv.

        Such a run has no compiled loop and cannot be checkpointed, so it has no `Session`;
        `ippo.IPPO.train` trains it, and ``jaxrl-train`` writes its run directory around that
        call (`console.parallel_env_run`).
        """
        return self.env_obj is None


def spec_of_arguments(algo: str = "ppo", env: Any = DEFAULT_ENV,
                      env_options: dict | None = None, config: AlgoConfig | dict | None = None,
                      seeds=(0,), eval_every: int = 2_000_000, out: str = "runs", tag: str = "",
                      checkpoint_every: int = 25, network=None,
                      network_options: dict | None = None, report_every: int | None = None,
                      preset: str | None = None, init_from: str | None = None,
                      tensorboard: bool = False,
                      time_budget: float | None = None) -> tuple[RunSpec, Any]:
    """The `RunSpec` of `trainer.train`'s keyword arguments, and the environment object if any.

    `env` may be ``"module:factory"`` (the spec's) or an object: the spec then records None and
    the object comes back beside it, for `plan_run`. ``network``/``network_options`` override
    the config's fields of those names.

    Raises:
        ValueError: naming the argument, before anything is created or compiled.
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
    if isinstance(out, os.PathLike):
        out = os.fspath(out)
    named = env is None or isinstance(env, str)
    spec = RunSpec(algo=algo, env=env if named else None, env_options=env_options, config=cfg,
                   seeds=seeds, eval_every=eval_every, checkpoint_every=checkpoint_every,
                   report_every=report_every, out=out, tag=tag, preset=preset,
                   init_from=init_from, tensorboard=tensorboard, time_budget=time_budget)
    return spec, None if named else env


def plan_new_run(algo: str = "ppo", env: Any = DEFAULT_ENV, env_options: dict | None = None,
                 config: AlgoConfig | dict | None = None, seeds=(0,),
                 eval_every: int = 2_000_000, out: str = "runs", tag: str = "",
                 checkpoint_every: int = 25, progress: str | None = None,
                 argv: list[str] | None = None, network=None,
                 network_options: dict | None = None, report_every: int | None = None,
                 preset: str | None = None, init_from: str | None = None,
                 tensorboard: bool = False) -> NewRun:
    """`plan_run` of `trainer.train`'s keyword arguments (`spec_of_arguments`)."""
    spec, env_obj = spec_of_arguments(algo, env, env_options, config, seeds, eval_every, out, tag,
                                      checkpoint_every, network, network_options, report_every,
                                      preset, init_from, tensorboard)
    return plan_run(spec, env_obj, progress, argv)


def plan_run(spec: RunSpec, env: Any = None, progress: str | None = None,
             argv: list[str] | None = None) -> NewRun:
    """Check what starting `spec` needs beyond the spec, and build its environment.

    The environment is built under ``jax.enable_x64(True)`` (float64 environments refuse to
    build without it); the run's programs will be traced under ``plan.x64``: the spec's ``x64``,
    else the environment's ``requires_x64`` (`precision.run_x64`). The ``init_from`` policy is
    read and checked against the network.

    Args:
        spec: the run.
        env: the environment object, where ``spec.env`` is None (ignored otherwise).
        progress: "bar", "lines", "off" or None (bar on a terminal, lines otherwise).
        argv: the command line config.json records.

    Raises:
        ValueError: before anything is created or compiled.
    """
    if not isinstance(spec, RunSpec):
        raise ValueError(f"spec: expected a RunSpec, got {type(spec).__name__}")
    if spec.env is None and env is None:
        raise ValueError("env: the spec names no environment ('env': null); pass the "
                         "environment object beside it")
    with jax.enable_x64(True):
        cfg = spec.algo_config()
        plan = NewRun(spec, cfg, None, None, check_progress(progress), check_argv(argv),
                      None if spec.env is not None else env)
        if spec.tensorboard:
            from .tensorboard import require_tensorboardx

            require_tensorboardx()
        entry = get_algorithm(spec.algo)
        plan.env_spec, plan.env_obj = entry.environment(plan.env, plan.env_options, cfg)
        plan.x64 = run_x64(spec.x64, plan.env_obj)
        if plan.steps_from_python:  # no network to build here: IPPO.train builds its own
            return plan
        plan.model = entry.networks(plan.env_obj, cfg)
        if spec.init_from is not None:
            plan.init_params, plan.init_record = load_init_params(
                spec.init_from, plan.model, report=plan.progress != "off")
        return plan


class Session:
    """An open run (its seed group): locked run directories, compiled programs, train state.

    Build one with `Session.open` (a new run) or `Session.resume` (from a checkpoint).

    Attributes:
        run_dirs: one run directory per seed.
        update: updates trained so far.
        n_updates: updates of the whole run.
    """

    def __init__(self, run: Run, state, update: int, wall: float, locks: contextlib.ExitStack,
                 x64: bool = True):
        self._run, self._state, self._locks = run, state, locks
        self._x64 = x64  # every program of the run is traced and run under this
        self.update, self._wall = update, wall
        self._broken = False

    # --------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, spec: RunSpec | str = "ppo", env: Any = _NOT_GIVEN, *,
             progress: str | None = None, argv: list[str] | None = None, **kwargs) -> Session:
        """Start a new run: a `RunSpec`, or the keyword arguments of `trainer.train`.

        ``Session.open(spec, progress="off")`` starts `spec` (`env`: the environment object
        where ``spec.env`` is None); ``Session.open("ppo", "module:factory", seeds=(1, 2), ...)``
        takes `trainer.train`'s arguments (without ``stop_after`` and ``time_budget``).

        Raises:
            ValueError: bad arguments (before anything is created or compiled), or a run that
                steps its environment from Python (`NewRun.steps_from_python`).
        """
        if isinstance(spec, RunSpec):
            if kwargs:
                raise ValueError(f"Session.open: a RunSpec carries the run's settings; got "
                                 f"{sorted(kwargs)} beside it (use spec.replace(...))")
            return cls.start(plan_run(spec, None if env is _NOT_GIVEN else env, progress, argv))
        return cls.start(plan_new_run(spec, DEFAULT_ENV if env is _NOT_GIVEN else env,
                                      progress=progress, argv=argv, **kwargs))

    @classmethod
    def start(cls, plan: NewRun | RunSpec) -> Session:
        """Create, lock and record the run directories of `plan` and build the first state.

        Args:
            plan: a checked plan (`plan_run`), or a `RunSpec` (planned here, progress on auto).

        Raises:
            ValueError: `plan` steps its environment from Python (IPPO on a PettingZoo
                ParallelEnv): it cannot be checkpointed, so it has no session. Nothing is created.
        """
        if isinstance(plan, RunSpec):
            plan = plan_run(plan)
        if plan.steps_from_python:
            raise ValueError(
                "env: a PettingZoo ParallelEnv stepped from Python cannot be checkpointed, so the "
                "trainer has no session for it; train it with jaxrl_agents.IPPO(config, "
                "seed).train(env, timesteps), or write a run directory with jaxrl-train --algo "
                f"{plan.algo} --env MODULE:FACTORY; a functional multi-agent core (or a ParallelEnv "
                "exposing one as env.core, with n_envs > 1) trains here")
        p = plan
        # The run's arrays (env params, seed keys, the first state) are made under its precision
        # too, so a resume (which makes them again under the recorded one) gets the same dtypes.
        with jax.enable_x64(p.x64):
            run_dirs = make_run_dirs(p.out, p.algo, p.seeds, p.tag)
            locks = contextlib.ExitStack()
            try:
                for d in run_dirs:
                    locks.enter_context(lock_directory(d))
                write_run_configs(run_dirs, p)
                run = Run(p.spec, p.cfg, p.env_obj, run_dirs, p.progress)
                state = (run.compiled.init(run.seed_keys, run.train_params)
                         if p.init_params is None
                         else run.compiled.init(run.seed_keys, run.train_params, p.init_params))
            except BaseException:
                # The run never started: leave no directory holding only its config.json.
                locks.close()
                remove_new_run_dirs(run_dirs)
                raise
        return cls(run, state, 0, 0.0, locks, p.x64)

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
        return cls(run, state, meta["update"], meta["wall"], locks, run.spec.x64)

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
            time_budget: seconds of wall-clock from this call: the first block of updates that
                ends past it is the last (`loop.Run.advance`), and it is checkpointed, so the run stops cleanly and resumes
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
            with jax.enable_x64(self._x64):
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
