"""The environment of a command that must run outside the workspace (a fresh venv, a bare install).

The standalone-install tests build wheels and install them into a new virtual environment; what they
run there must see neither the workspace's venv nor this test run's JAX compilation cache
(tests/conftest.py): a fresh environment has none, and the cache's settings need filelock, which a
bare install lacks.
"""

import os
import pathlib
import subprocess

import pytest

#: variables that tie uv or Python to the workspace's environment
WORKSPACE_VARIABLES = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT", "UV_PROJECT",
                       "CONDA_PREFIX")


def outside_workspace_env() -> dict[str, str]:
    """This process's environment without the workspace's venv variables and the run's JAX cache."""
    return {name: value for name, value in os.environ.items()
            if name not in WORKSPACE_VARIABLES
            and not name.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}


def run_outside_workspace(cmd: list[str], cwd: pathlib.Path, what: str,
                          timeout_s: float) -> subprocess.CompletedProcess:
    """Run `cmd` in `cwd` with `outside_workspace_env`; fail the test naming `what` if it exits non-zero."""
    proc = subprocess.run(cmd, cwd=cwd, env=outside_workspace_env(), capture_output=True, text=True,
                          timeout=timeout_s)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                    f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc
