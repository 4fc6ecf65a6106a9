"""What jaxrl-sweep uses of the trainer: the session, run-directory files, file I/O and configs.

A trial is one `RunSpec` (`run.spec`) opened as one `Session` (`run.session`) and advanced segment by segment; everything else here
reads or writes run directories as every tool of the package does.
"""

from __future__ import annotations

import jax

from ..common import fileio
from ..common.contracts import evaluation_of
from ..common.envs import DEFAULT_ENV, load_env
from ..run import run_files
from ..run.algorithms import ALGORITHMS, get_algorithm, make_config
from ..run.host import small_loops
from ..run.results import NonFiniteError
from ..run.run_config import write_run_config
from ..run.rundir import RunDir
from ..run.session import Session
from ..run.spec import RunSpec
from ..run.tensorboard import require_tensorboardx

__all__ = ["Session", "RunSpec", "RunDir", "NonFiniteError", "run_files", "fileio", "write_run_config", "make_config",
           "load_env", "config_class", "algorithm_names", "env_score", "DEFAULT_ENV",
           "require_tensorboardx", "small_loops"]


def config_class(algo: str):
    """The config dataclass of `algo` (ValueError listing the choices for an unknown one)."""
    return get_algorithm(algo).config


def algorithm_names() -> list[str]:
    """Algorithms the trainer runs."""
    return sorted(ALGORITHMS)


def env_score(spec: str, options: dict) -> tuple[str, str]:
    """The score field and direction ("min"/"max") the env's evaluation description declares."""
    with jax.enable_x64(True):  # as the trainer builds it: float64 envs refuse to build without x64
        env = load_env(spec, options)
    evaluation = evaluation_of(env)
    return evaluation.score, evaluation.score_mode
