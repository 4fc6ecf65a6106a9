"""``jaxrl-train --algo ippo|ippo_lagrangian`` on a PettingZoo ``ParallelEnv`` stepped from Python.

The trainer (`jaxrl_agents.run`) trains functional environments compiled with the update, with
checkpoints and resume. When the algorithm registry finds no functional core in an IPPO run's
environment (`run.session.NewRun.steps_from_python`), the run is IPPO's own Python loop,
`IPPO.train`, and ``jaxrl-train`` (cli.py) runs it here. A ParallelEnv's state lives in a Python
object of someone else's package, which cannot be saved and restored bit for bit, so these runs
cannot be checkpointed or resumed; they write what they can, atomically, into the same run
directory layout:

    config.json       as every run (``"checkpointed": false``)
    progress.csv      one row per rollout/update cycle: step, wall, ``<agent>/<stat>`` columns
    history.json      the same cycles as `ippo.IPPOResult.history`
    policies/<agent>/ the final policy of each agent (a jaxrl_agents `Policy` directory)

The directory is locked for the whole run and removed again if the run fails before writing its
results. The progress bar moves at most every 10 % of the budget.
"""

from __future__ import annotations

import os
import sys
import time

import jax

from ..common.envs import load_env
from ..common.fileio import atomic_write_json, lock_directory
from ..ippo import IPPO, IPPO_Lagrangian
from ..ippo.rollout import check_parallel_env
from ..run.records import fmt
from ..run.results import TrainResult
from ..run.run_config import run_record, write_run_config
from ..run.run_files import PROGRESS_CSV, make_run_dirs, read_progress, remove_new_run_dirs, write_progress
from ..run.session import NewRun

__all__ = ["train_parallel", "MilestoneBar", "POLICIES_DIR"]

POLICIES_DIR = "policies"


class MilestoneBar:
    """A tqdm bar fed by ``progress_callback(completed, total)`` that moves only at 10 % milestones.

    Args:
        total: the budget in environment steps.
        enabled: False gives a no-op callback (``--progress off``).
        step_fraction: milestone size (0.1 = every 10 %).
    """

    def __init__(self, total: int, enabled: bool = True, step_fraction: float = 0.1):
        self.total, self.step_fraction, self.milestone = total, step_fraction, 0
        self.updates = 0  # bar advances so far (tests read it)
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            # A huge maxinterval stops tqdm's monitor thread from redrawing an unchanged bar.
            self._bar = tqdm(total=total, unit="step", unit_scale=True, maxinterval=1e9,
                             mininterval=0, dynamic_ncols=True)

    def __call__(self, completed: int, total: int) -> None:
        """Progress callback: advance the bar to `completed` when a new milestone is reached.

        Args:
            completed: environment steps done so far.
            total: the budget in environment steps (the milestones divide it).
        """
        n_milestones = int(round(1 / self.step_fraction))
        milestone = min(n_milestones, int(completed * n_milestones // max(total, 1)))
        if milestone > self.milestone:
            self.milestone = milestone
            self.updates += 1
            if self._bar is not None:
                self._bar.update(completed - self._bar.n)

    def close(self) -> None:
        """Close the bar, if there is one."""
        if self._bar is not None:
            self._bar.close()


def train_parallel(plan: NewRun) -> TrainResult:
    """Train on the plan's ParallelEnv and write the run directory described above.

    Args:
        plan: the checked plan (`run.session.plan_new_run`) of a run that steps its environment
            from Python: its env a ParallelEnv or the ``module:factory`` of one, one seed (a
            ParallelEnv is one environment: seeds cannot be trained together), and a config
            whose ``total_steps`` is the exact budget (the last rollout is shortened).

    Returns:
        `run.results.TrainResult` of the one run directory (``state``: the agents' parameters).

    Raises:
        ValueError: ``tensorboard`` or several seeds asked for, or the config or environment
            refused by `IPPO.train` (the run directory is removed again).
    """
    # Built as every run builds its environment, under x64 (float64 environments need it).
    with jax.enable_x64(True):
        if plan.tensorboard:
            raise ValueError("tensorboard: an IPPO run on a PettingZoo ParallelEnv stepped from "
                             "Python writes progress.csv and history.json only; train on the env's "
                             "functional core for TensorBoard files")
        env = (load_env(plan.env, plan.env_options, check=False) if isinstance(plan.env, str)
               else plan.env)
        check_parallel_env(env)
        if len(plan.seeds) != 1:
            raise ValueError(f"seeds: a PettingZoo ParallelEnv is one environment stepped from "
                             f"Python, so its seeds cannot be trained together; expected one seed, "
                             f"got {list(plan.seeds)} (run one command per seed, or use a "
                             f"functional core)")
        cfg, (seed,) = plan.cfg, plan.seeds
        trainer = (IPPO_Lagrangian if plan.algo == "ippo_lagrangian" else IPPO)(cfg, seed)
        record = run_record(plan.algo, plan.env_spec, plan.env_options, env, cfg, plan.seeds,
                            plan.tag, plan.out, plan.argv)
    # Outside that x64 scope: a ParallelEnv adapter scopes x64 to its own calls
    # (design.md), and the update of the Python-stepped path is float32 end to end. Under x64 the
    # rollout's float64 numpy rewards would promote GAE to float64 and move every number.
    with jax.enable_x64(False):
        (run_dir,) = make_run_dirs(plan.out, plan.algo, (seed,), plan.tag)
        finished = False
        with lock_directory(run_dir):
            try:
                write_run_config(run_dir, {**record, "timesteps": cfg.total_steps,
                                           "checkpointed": False})
                enabled = plan.progress == "bar" or (plan.progress is None and sys.stderr.isatty())
                bar = MilestoneBar(cfg.total_steps, enabled)
                t0, walls = time.perf_counter(), []

                def callback(completed, total):
                    walls.append(time.perf_counter() - t0)
                    bar(completed, total)

                try:
                    result = trainer.train(env, cfg.total_steps, progress_callback=callback)
                finally:
                    bar.close()
                finished = True
            finally:
                if not finished:  # nothing but config.json was written: leave no orphan
                    remove_new_run_dirs([run_dir])
            rows = []
            for h, wall in zip(result.history, walls):
                row = {"step": str(h["step"]), "wall": fmt(wall)}
                for a, stats in h["agents"].items():
                    row.update({f"{a}/{k}": fmt(v) for k, v in stats.items()})
                rows.append(row)
            write_progress(os.path.join(run_dir, PROGRESS_CSV), rows)
            atomic_write_json(os.path.join(run_dir, "history.json"), result.history)
            result.policies.save(os.path.join(run_dir, POLICIES_DIR))  # one directory per agent
    return TrainResult([run_dir], result.params,
                       [read_progress(os.path.join(run_dir, PROGRESS_CSV))], True)
