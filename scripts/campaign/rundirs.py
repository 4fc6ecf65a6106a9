"""Where a campaign run lives and how far it got, read from its run directory alone."""

from __future__ import annotations

import os

from jaxrl_agents.run.algorithms import make_config
from jaxrl_agents.run.checkpoint import read_checkpoint
from jaxrl_agents.run.run_files import CHECKPOINT, RUN_CONFIG, read_run_config

__all__ = ["find_run_dir", "run_status"]


def find_run_dir(parent: str) -> str | None:
    """The run directory inside `parent` (a run's ``--out``), or None if there is none yet.

    Raises:
        ValueError: naming `parent`, when it holds more than one run directory.
    """
    if not os.path.isdir(parent):
        return None
    found = sorted(e.path for e in os.scandir(parent)
                   if e.is_dir() and os.path.isfile(os.path.join(e.path, RUN_CONFIG))
                   and ".incomplete-" not in e.name)
    if len(found) > 1:
        raise ValueError(f"{parent}: expected one run directory, found {len(found)} "
                         f"({', '.join(map(os.path.basename, found))}); move the extra ones away")
    return found[0] if found else None


def run_status(run_dir: str) -> tuple[str, int, int]:
    """("incomplete" | "interrupted" | "finished", steps done, steps of the budget) of a run."""
    rc = read_run_config(os.path.join(run_dir, RUN_CONFIG))
    cfg = make_config(rc["algo"], rc["algo_config"])
    budget = cfg.n_updates * cfg.rollout_size
    ckpt = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(ckpt):
        return "incomplete", 0, budget
    _, header = read_checkpoint(ckpt)
    done = int(header["meta"]["step"])
    return ("finished" if done >= budget else "interrupted"), done, budget
