"""jaxrl-sweep joins a running Ray cluster by --address, as docs/sweeps.md describes for a cluster.

A real head is started with ``ray start --head`` on free ports, in its own session and temp
directory (`tests.ray_head`, shared with the campaign's cluster test), and the real ``jaxrl-sweep``
command runs a 2-trial grid against it. The head is stopped by signalling its own process group
(never ``ray stop``, which would stop every Ray of this machine), so a failure leaves no Ray behind.

Authentication is pinned for head and driver alike (``RAY_AUTH_MODE=token`` and a fresh
``RAY_AUTH_TOKEN``): left unset, Ray 2.60 turns token auth on for whichever side finds a token in
``~/.ray/auth_token``, a file the first local ``ray.init`` of any test writes. A head started before
that file existed and a driver started after it disagree, and the join fails with "InvalidAuthToken"
(the one failure this test had in a default run).
"""

import csv
import os
import secrets
import subprocess
import sys
import textwrap

import pytest

psutil = pytest.importorskip("psutil")  # comes with Ray
pytest.importorskip("ray")

from tests.ray_head import ray_head  # noqa: E402

from .conftest import TOY_ENV  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


@pytest.mark.slow  # about a minute of Ray start-up and joins; the default run stays under 15 minutes
def test_two_trial_sweep_on_a_ray_head_started_by_ray_start(tmp_path):
    with ray_head("rh") as (address, env, head):
        spec = tmp_path / "cluster.toml"
        spec.write_text(textwrap.dedent(f"""
            name = "cluster"
            out = "{tmp_path / 'sweeps'}"
            [train]
            env = "{TOY_ENV}"
            total_steps = 256
            eval_every = 128
            seeds = [0]
            [train.config]
            n_envs = 4
            n_steps = 16
            n_epochs = 1
            n_minibatches = 1
            hidden = [8]
            [space.config]
            lr = {{values = [0.001, 0.003]}}
        """))
        # A driver without the head's token is refused, with a message that says so, and leaves
        # no sweep directory behind.
        stranger = dict(env, RAY_AUTH_TOKEN=secrets.token_hex(32))
        p = subprocess.run([os.path.join(BIN, "jaxrl-sweep"), str(spec), "--address",
                            address, "--progress", "lines"],
                           cwd=REPO, env=stranger, capture_output=True, text=True, timeout=300)
        assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-4000:]
        assert f"--address: Ray could not join the cluster at {address}" in p.stderr
        assert "RAY_AUTH_TOKEN" in p.stderr
        assert not (tmp_path / "sweeps" / "cluster").exists()

        p = subprocess.run([os.path.join(BIN, "jaxrl-sweep"), str(spec), "--address",
                            address, "--progress", "lines"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
        with open(tmp_path / "sweeps" / "cluster" / "summary.csv") as f:
            rows = list(csv.DictReader(f))
        assert [r["status"] for r in rows] == ["finished", "finished"]
        assert sorted(float(r["config.lr"]) for r in rows) == [0.001, 0.003]
        assert head.poll() is None  # the driver left the cluster running: it does not own it
