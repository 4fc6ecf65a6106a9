"""A real `kill -9` of a `jaxrl-train` process once every run directory has a checkpoint, and the
command that resumes it, as a user runs both: each in a process of its own.

A resume in the test's own process would compile under the test run's XLA flags, not the
small-loop threshold the command recorded (jaxrl_agents/run/host/small_loops.py): a command's run
is resumed, and compared with an uninterrupted one, by commands.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]  # on PYTHONPATH, for the tests' toy envs


def _command(args: list[str]) -> list[str]:
    return [os.path.join(os.path.dirname(sys.executable), "jaxrl-train"), *args]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def jaxrl_train(args: list[str], timeout_s: float = 900) -> int:
    """Run ``jaxrl-train *args`` in a new process to its end; returns its exit code.

    Its stderr is passed through (pytest shows it for a failing test).
    """
    return subprocess.run(_command(args), env=_env(), stdout=subprocess.DEVNULL,
                          timeout=timeout_s).returncode


def train_then_signal(args: list[str], out: pathlib.Path, sig: int, timeout_s: float = 900,
                      checkpoint_glob: str = "*/checkpoint.npz") -> tuple[list[pathlib.Path], int, str]:
    """Start ``jaxrl-train *args --out out`` and send it `sig` shortly after its first checkpoint.

    Returns:
        (the directories it left under `out`, sorted by name; its exit code; its stderr).
    """
    proc = subprocess.Popen(
        _command([*args, "--out", str(out)]), env=_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
        # A test run started in the background by a shell inherits SIGINT ignored, and a Python
        # started so installs no KeyboardInterrupt handler: the child gets the default back.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + timeout_s
    while not (out.exists() and list(out.glob(checkpoint_glob))):
        if proc.poll() is not None or time.time() > deadline:
            # Say so, instead of signalling a run that never checkpointed and failing on what it
            # did not write (a starved CPU can take minutes to compile and train the first updates).
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"jaxrl-train {' '.join(args)} wrote no {checkpoint_glob} within "
                                 f"{timeout_s:.0f} s (exit {proc.returncode}); stderr:\n{err}")
        time.sleep(0.2)
    time.sleep(1.0)  # let it train past the first checkpoint, so the signal lands mid-run
    proc.send_signal(sig)
    _, err = proc.communicate()
    return sorted(out.iterdir()), proc.returncode, err


def train_then_kill_9(args: list[str], out: pathlib.Path, timeout_s: float = 300) -> list[pathlib.Path]:
    """Start ``jaxrl-train *args --out out``, SIGKILL it shortly after its first checkpoints.

    Returns:
        The run directories it left, sorted by name.
    """
    return train_then_signal(args, out, signal.SIGKILL, timeout_s)[0]
