"""Running training: the trainer, run directories and their files, checkpoints, CLIs, plots.

The trainer is `train` and `resume`; there are also the progress display, the ``jaxrl-train`` CLI
(every algorithm, cli.py) and ``jaxrl-plot``.

Files: `algorithms.py` (the registry and the seed-vmapped compiled programs), `trainer.py`,
`run_files.py` (run directories, file names, progress table, resume checks), `checkpoint.py`,
`progress.py`, `cli.py`,
`ippo_parallel.py` (IPPO runs on a Python-stepped PettingZoo ParallelEnv), `plot.py`.

The names below load on first use (PEP 562): ``jaxrl-train --help`` should not import the
trainer. File I/O (atomic writes, locks) lives in `common.fileio`; its names are re-exported here.
"""

import importlib

_EXPORTS = {
    "train": "trainer", "resume": "trainer", "TrainResult": "trainer",
    "NonFiniteError": "trainer",
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
