"""A real `kill -9` of a `jaxrl-train` process once every run directory has a checkpoint."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]  # on PYTHONPATH, for the tests' toy envs


def train_then_kill_9(args: list[str], out: pathlib.Path, timeout_s: float = 300) -> list[pathlib.Path]:
    """Start ``jaxrl-train *args --out out``, SIGKILL it shortly after its first checkpoints.

    Returns:
        The run directories it left, sorted by name.
    """
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "jaxrl-train"), *args, "--out", str(out)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        dirs = list(out.glob("*")) if out.exists() else []
        if dirs and all((d / "checkpoint.npz").exists() for d in dirs):
            break
        time.sleep(0.2)
    time.sleep(1.0)  # let it train past the first checkpoint, so the kill lands mid-run
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return sorted(out.iterdir())
