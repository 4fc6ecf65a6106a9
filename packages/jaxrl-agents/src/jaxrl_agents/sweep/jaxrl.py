"""The one door from jaxrl-sweep into the trainer and its run-directory files.

Every other module of this subpackage reaches the trainer through the functions here, and they
import it on first use: ``import jaxrl_agents.sweep`` (and ``jaxrl-sweep --help``) stays cheap, and
if the trainer moves again, `_RUN` is the one line to change.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_RUN = "jaxrl_agents.run"  # package holding trainer, run_files, fileio, algorithms (issue 14)
_ENVS = "jaxrl_agents.common.envs"


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def trainer() -> ModuleType:
    """The trainer module: ``train``, ``resume``, ``NonFiniteError``, ``TrainResult``."""
    return _module(f"{_RUN}.trainer")


def run_files() -> ModuleType:
    """Run-directory file names and their readers.

    Names ``RUN_CONFIG``, ``PROGRESS_CSV``, ``CHECKPOINT``, ...; readers ``read_progress``,
    ``read_run_config``.
    """
    return _module(f"{_RUN}.run_files")


def fileio() -> ModuleType:
    """The file-I/O module: atomic writes and directory locks.

    ``atomic_write``, ``atomic_write_json``, ``lock_directory``, ``LOCK_FILE``,
    ``DirectoryLockedError``.
    """
    return _module("jaxrl_agents.common.fileio")


def config_class(algo: str):
    """The config dataclass of `algo` (ValueError listing the choices for an unknown one)."""
    return _module(f"{_RUN}.algorithms").get_algorithm(algo)[1]


def algorithm_names() -> list[str]:
    """Algorithms the trainer runs (PPO, TRPO); the multi-agent ones have their own CLI path."""
    return sorted(_module(f"{_RUN}.algorithms").ALGORITHMS)


def make_config(algo: str, fields: dict):
    """A validated config of `algo` from a dict of fields (ValueError naming the field)."""
    return _module(f"{_RUN}.algorithms").make_config(algo, fields)


def load_env(spec: str, options: dict):
    """Build environment ``module:factory`` with keyword `options` (ValueError if it cannot)."""
    return _module(_ENVS).load_env(spec, options)


def env_score(spec: str, options: dict) -> tuple[str, str]:
    """The score field and direction ("min"/"max") the env's evaluation description declares."""
    import jax

    with jax.enable_x64(True):  # as the trainer builds it: float64 envs refuse to build without x64
        env = load_env(spec, options)
    evaluation = _module("jaxrl_agents.common.contracts").evaluation_of(env)
    return evaluation.score, evaluation.score_mode


def default_env() -> str:
    """The default environment spec ``module:factory`` (``common.envs.DEFAULT_ENV``)."""
    return _module(_ENVS).DEFAULT_ENV
