"""Training: `train` one or several seeds of an algorithm and write one run directory per seed.

One call trains one or several seeds *together*: the update is vmapped over a leading seed axis and
compiled once. Each seed still gets its own run directory (so every tool reads one layout)::

    <out>/<algo>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]/
        config.json      everything needed to rebuild the run (run_config.py)
        progress.csv     one row per update: step, wall (seconds of training at the update's
                         end; the updates of one compiled block share one clock reading,
                         spread evenly: host/update_blocks.py), then the stats sorted by name; the eval
                         fields (eval_return, eval_len, then eval_<field> for every field of the
                         env's evaluation summary) on eval rows only
        evals.npz        every evaluation episode: step (n_evals,), reward / alive (n_evals, T),
                         action (n_evals, T, A) and what the env's evaluation records per step
                         (n_evals, T, ...)
        checkpoint.npz   latest checkpoint of the whole seed group (checkpoint.py)
        best_policy/     policy with the best evaluation so far (the env's evaluation score:
                         highest eval return for environments that describe none)
        last_policy/     policy at the latest evaluation
        tensorboard/     TensorBoard event files, with ``tensorboard=True`` (tensorboard.py)

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

The trainer runs compiled runs only: IPPO on a PettingZoo ParallelEnv stepped from Python cannot
be checkpointed and has no session, so `train` refuses it (`ippo.IPPO.train` trains it, and
``jaxrl-train`` writes its run directory: console/parallel_env_run.py).

The pieces: checks.py (arguments), spec.py (`RunSpec`), session.py (`plan_run`, `Session`), run_config.py
(config.json), records.py (rows, evaluations, policies), loop.py (the loop), resume.py (`resume`),
results.py (`TrainResult`, `NonFiniteError`).
"""

from __future__ import annotations

from typing import Any

from ..common.config import AlgoConfig
from ..common.envs import DEFAULT_ENV
from .checks import check_stop_after, check_time_budget
from .records import decade_crossed, report_every_updates
from .results import NonFiniteError, TrainingInterrupted, TrainResult
from .run_files import CHECKPOINT, EVALS_NPZ, PROGRESS_CSV, RUN_CONFIG
from .session import NewRun, Session, plan_run, spec_of_arguments
from .spec import RunSpec

__all__ = ["train", "train_planned", "resume", "TrainResult", "NonFiniteError", "TrainingInterrupted", "Session", "RUN_CONFIG",
           "PROGRESS_CSV", "EVALS_NPZ", "CHECKPOINT", "decade_crossed", "report_every_updates"]


def train(algo: str | RunSpec = "ppo", env: Any = DEFAULT_ENV, env_options: dict | None = None,
          config: AlgoConfig | dict | None = None, seeds=(0,), eval_every: int = 2_000_000,
          out: str = "runs", tag: str = "", checkpoint_every: int = 25,
          progress: str | None = None, argv: list[str] | None = None,
          stop_after: int | None = None, network=None,
          network_options: dict | None = None, report_every: int | None = None,
          preset: str | None = None, init_from: str | None = None, tensorboard: bool = False,
          time_budget: float | None = None) -> TrainResult:
    """Train `algo` on `env` for every seed at once and write one run directory per seed.

    One `advance()` of a `session.Session`. The arguments become one `spec.RunSpec`
    (`session.spec_of_arguments`); ``train(spec)`` takes one directly (`env`: then the environment
    object where ``spec.env`` is None, and the other run arguments are the spec's). Every argument
    is checked before a run directory is created or anything is compiled. The run directories are locked while the run uses them
    (`fileio.lock_directory`).

    Args:
        algo: "ppo", "trpo", "ippo" or "ippo_lagrangian"; or a `spec.RunSpec`.
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
        tensorboard: also write TensorBoard event files into ``<run_dir>/tensorboard/``
            (needs tensorboardX, the extra ``jaxrl-agents[tensorboard]``); recorded in
            config.json, so a resume keeps writing them.
        time_budget: seconds of wall-clock from when training starts: the first block of
            updates that ends past it is the last (`loop.Run.advance`), checkpointed (``finished`` is then False and `resume`
            continues bit-identically). None: no budget.

    Returns:
        `TrainResult`.

    Raises:
        ValueError: bad arguments (before anything is created or compiled), among them an IPPO
            run on a PettingZoo ParallelEnv stepped from Python (`session.NewRun.steps_from_python`).
        NonFiniteError: an update gave non-finite values; the last finite checkpoint is kept.
        OSError: a file could not be written (full or read-only disk); every file written so
            far is intact (atomic writes).
    """
    stop_after = check_stop_after(stop_after)
    if isinstance(algo, RunSpec):
        spec, env_obj = algo, None if env is DEFAULT_ENV else env
    else:
        spec, env_obj = spec_of_arguments(algo, env, env_options, config, seeds, eval_every, out,
                                          tag, checkpoint_every, network, network_options,
                                          report_every, preset, init_from, tensorboard,
                                          time_budget)
    budget = spec.time_budget if time_budget is None else time_budget
    return train_planned(plan_run(spec, env_obj, progress, argv), stop_after, budget)


def train_planned(plan: NewRun, stop_after: int | None = None,
                  time_budget: float | None = None) -> TrainResult:
    """Start the run `plan` describes and advance it: `train` after its arguments are checked.

    For a caller that looks at the plan first: ``jaxrl-train`` sends a plan that steps its
    environment from Python elsewhere (`session.NewRun.steps_from_python`).

    Args:
        plan: the checked plan of a new run (`session.plan_new_run`).
        stop_after: as in `train`.
        time_budget: as in `train`.

    Returns:
        `TrainResult`.

    Raises:
        ValueError: `plan` steps its environment from Python, or a bad `stop_after` or
            `time_budget` (before anything is created).
        NonFiniteError, OSError: as in `train`.
    """
    stop_after = check_stop_after(stop_after)
    time_budget = check_time_budget(time_budget)
    with Session.start(plan) as session:
        return _interruptible(session, stop_after, time_budget)


def _interruptible(session: Session, stop_after: int | None, time_budget: float | None):
    """`session.advance`, with Ctrl-C turned into `TrainingInterrupted` (where a resume starts)."""
    try:
        return session.advance(stop_after, time_budget)
    except KeyboardInterrupt:
        raise TrainingInterrupted(session.run_dirs,
                                  session.checkpoint_update * session.rollout_size) from None


def resume(run_dir: str, env: Any = None, progress: str | None = None,
           stop_after: int | None = None, total_steps: int | None = None,
           time_budget: float | None = None) -> TrainResult:
    """Continue an interrupted run (and its seed group) from its last checkpoint.

    One `advance()` of `session.Session.resume`. Every file the resume reads is checked first,
    before anything is compiled: config.json, the checkpoint, and that progress.csv and evals.npz
    hold every update and evaluation up to the checkpoint. The group's directories are locked for
    the whole resume.

    Args:
        run_dir: any run directory of the group (it may have been renamed or moved, with the
            other members of its group beside it).
        env: the environment object, only needed if the run was started with an object rather
            than a "module:factory" name.
        progress: as in `train`.
        stop_after: as in `train`.
        total_steps: a new step budget, to extend a run (also a finished one). The learning-rate
            decay then follows the new budget from the checkpoint on, so an extended run is not
            the same as one started with that budget; each config.json records the extension.
            None keeps the run's budget (and resume reproduces the uninterrupted run exactly).
        time_budget: as in `train`.

    Raises:
        ValueError: not a run directory, a file that is corrupt or misses history (named in the
            message), a group member missing, or the directory in use by another process
            (`fileio.DirectoryLockedError`).
        NonFiniteError, OSError: as in `train`.
    """
    stop_after = check_stop_after(stop_after)
    time_budget = check_time_budget(time_budget)
    with Session.resume(run_dir, env, progress, total_steps) as session:
        return _interruptible(session, stop_after, time_budget)
