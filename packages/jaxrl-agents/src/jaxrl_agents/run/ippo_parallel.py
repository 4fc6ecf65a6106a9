"""IPPO / IPPO-Lagrangian runs on a PettingZoo ``ParallelEnv`` stepped from Python.

`run.trainer.train` sends an IPPO run here when its environment is a ParallelEnv without a usable
functional core (a core is trained by the compiled path, with checkpoints, resume and evaluation).
A ParallelEnv's state lives in a Python object of someone else's package, which cannot be saved
and restored bit for bit, so these runs cannot be checkpointed or resumed; they write what they
can, atomically, into the same run directory layout:

    config.json       as every run (``"checkpointed": false``)
    progress.csv      one row per rollout/update cycle: step, wall, ``<agent>/<stat>`` columns
    history.json      the same cycles as `ippo.IPPOResult.history`
    policies/<agent>/ the final policy of each agent (a jaxrl_agents `Policy` directory)

The directory is locked for the whole run and removed again if the run fails before writing its
results. The progress bar moves at most every 10 % of the budget.
"""

from __future__ import annotations

import os
import re
import sys
import time

from ..common.fileio import atomic_write_json, lock_directory
from ..ippo import IPPO, IPPO_Lagrangian
from ..ippo.config import algorithm_config
from .records import fmt
from .run_config import write_run_config
from .run_files import PROGRESS_CSV, make_run_dirs, remove_new_run_dirs, write_progress

__all__ = ["train_parallel", "MilestoneBar", "POLICIES_DIR", "safe_agent_name"]

POLICIES_DIR = "policies"


def safe_agent_name(agent) -> str:
    """A file-system-safe directory name for agent id `agent`."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(agent))


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


def train_parallel(algo: str, env, cfg, seed: int, out: str, tag: str, progress: str | None,
                   run_config: dict):
    """Train on ParallelEnv `env` and write the run directory described above.

    Args:
        algo: "ippo" or "ippo_lagrangian".
        env: the ParallelEnv.
        cfg: the trainer's config (`ippo.config.IPPOTrainConfig` or its Lagrangian form); its
            ``total_steps`` is the exact budget (the last rollout is shortened).
        seed: the one seed (a ParallelEnv is one environment: seeds cannot be trained together).
        out: parent directory of the run directory, as in `run.trainer.train`.
        tag: optional suffix of the run directory name, as in `run.trainer.train`.
        progress: "bar", "off", "lines" (no bar) or None (bar on a terminal).
        run_config: the fields of config.json (the trainer's record of the run).

    Returns:
        (run_dir, `ippo.IPPOResult`).
    """
    trainer = (IPPO_Lagrangian if algo == "ippo_lagrangian" else IPPO)(algorithm_config(cfg), seed)
    (run_dir,) = make_run_dirs(out, algo, (seed,), tag)
    finished = False
    with lock_directory(run_dir):
        try:
            write_run_config(run_dir, {**run_config, "checkpointed": False})
            enabled = progress == "bar" or (progress is None and sys.stderr.isatty())
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
        for agent, policy in result.policies.items():
            policy.save(os.path.join(run_dir, POLICIES_DIR, safe_agent_name(agent)))
    return run_dir, result
