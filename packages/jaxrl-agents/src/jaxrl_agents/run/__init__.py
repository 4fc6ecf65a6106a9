"""Running training: the trainer, run directories and their files, checkpoints, resume.

The trainer is `train` and `resume`, each one `advance()` of a `Session`; the commands that drive
them (``jaxrl-train``, ``jaxrl-plot``) and what they print are `jaxrl_agents.console`.

Files: `spec.py` (`RunSpec`, one validated JSON-round-tripping description of a run: what the
CLI, presets, the sweep, config.json and resume build or read), `rundir.py` (`RunDir`, the one
reader of a run directory: spec, status, progress, evaluations, best policy, time to a threshold),
`algorithms.py` (the registry and the seed-vmapped compiled programs), `trainer.py`
(`train`, `resume`), `session.py` (`Session`, a new run's checked plan), `loop.py` (the update
loop), `resume.py` (reopening a checkpoint), `checks.py` (argument checks), `run_config.py`
(config.json), `run_files.py` (run directories, file names, progress table, resume checks),
`records.py` (per-seed rows, evaluations and policies), `results.py` (`TrainResult`, the errors),
`checkpoint.py`, `init_from.py` (fine-tuning starts), `tensorboard.py` (event files), `host/` (how a
run uses the machine: seed slices over cores, float precision, Ctrl-C during a checkpoint) and
`cli.py` (the old path of ``python -m jaxrl_agents.run.cli``). IPPO on a
PettingZoo ParallelEnv stepped from Python has no session; ``jaxrl-train`` runs it
(`console.parallel_env_run`).

The names below load on first use (PEP 562): ``jaxrl-train --help`` should not import the
trainer. File I/O (atomic writes, locks) lives in `common.fileio`; its names are re-exported here.
"""

import importlib

_EXPORTS = {
    "train": "trainer", "resume": "trainer", "TrainResult": "trainer",
    "NonFiniteError": "trainer", "Session": "session", "RunSpec": "spec", "RunDir": "rundir",
    "compile_algorithm": "algorithms", "make_config": "algorithms", "ALGORITHMS": "algorithms",
    "DirectoryLockedError": "..common.fileio", "lock_directory": "..common.fileio",
    "atomic_write": "..common.fileio",
}

__all__ = sorted(_EXPORTS)


def _module_path(name: str) -> str:
    return name if name.startswith(".") else f".{name}"


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_module_path(_EXPORTS[name]), __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
