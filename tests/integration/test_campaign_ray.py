"""jaxrl-campaign on a real Ray head, by address: a source and its fine-tune, a kill -9, a lost worker.

A head is started with ``ray start --head`` on free ports, in its own session and temp directory
(`tests.ray_head`, with the pinned token authentication test_sweep_cluster.py explains),
and the real ``jaxrl-campaign`` command runs a two-entry chain against it: ``base`` and ``ft``
(``init_from = "base"``, a dependency between the two tasks). Then the same chain again in a
second folder, with the driver killed (``kill -9``) once base has checkpointed, and the same
command run again: it goes on. Then a third time with the Ray worker of base's task killed (a
lost worker): Ray starts the task again and the campaign goes on by itself. Both entries of both
end bit-identical to the uninterrupted chain's (their evaluations and kept policies).
"""

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

psutil = pytest.importorskip("psutil")  # comes with Ray
pytest.importorskip("ray")

from jaxrl_agents.campaign.rundirs import find_run_dir  # noqa: E402
from jaxrl_agents.common.fileio import load_npz  # noqa: E402

from tests.integration.run_state import run_status  # noqa: E402
from tests.integration.test_campaign_probes import FLAGS, chain_campaign  # noqa: E402
from tests.ray_head import ray_head  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.path.dirname(sys.executable)
# 6 ns episodes on a tiny network; base trains 40 updates (a checkpoint at 25, jaxrl-train's
# default), so a kill after it lands mid-run with something to resume.
CHAIN = chain_campaign("chain", base_steps=20480, ft_steps=2048,
                       ft_flags=FLAGS.replace("[16, 16] }", "[16, 16], lr = 1e-4 }"))


def _campaign(folder, address, env, **popen):
    return subprocess.Popen([os.path.join(BIN, "jaxrl-campaign"), "run", "chain.toml", "--address",
                             address, "--progress", "off"], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def _evaluations(run_dir):
    """A run's computed record: its evaluations and its kept policies' parameters (no clocks)."""
    evals = {k: v for k, v in load_npz(os.path.join(run_dir, "evals.npz")).items()
             if "wall" not in k and "time" not in k}
    policies = {str(p.relative_to(run_dir)): p.read_bytes()
                for p in sorted(pathlib.Path(run_dir).glob("*/params*"))}
    return evals, policies


@pytest.mark.slow  # a Ray head, three campaign drivers and five small runs: minutes
def test_a_chain_on_a_ray_head_by_address_survives_a_kill_9_and_a_lost_worker(tmp_path):
    with ray_head("rc", PYTHONPATH=str(ROOT)) as (address, env, head):
        whole, killed = tmp_path / "whole", tmp_path / "killed"
        for folder in (whole, killed):
            folder.mkdir()
            (folder / "chain.toml").write_text(CHAIN)

        # The chain, uninterrupted: ft's task waits for base's, then starts from its best policy.
        p = _campaign(whole, address, env)
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, out[-4000:]
        assert "Traceback" not in out and "os.fork() was called" not in out, out[-4000:]
        base = find_run_dir(str(whole / "runs" / "base" / "s1"))
        ft = find_run_dir(str(whole / "runs" / "ft" / "s1"))
        assert run_status(base)[0] == run_status(ft)[0] == "finished"
        import json

        start = json.loads(pathlib.Path(ft, "config.json").read_text())["init_from"]
        assert start["path"] == os.path.abspath(base)
        assert json.loads((whole / "summaries" / "ft" / "s1.json").read_text())["status"] == "finished"
        assert head.poll() is None  # the driver left the cluster running: it does not own it

        # The same chain, its driver killed once base has checkpointed, then the same command.
        p = _campaign(killed, address, env, start_new_session=True)
        until = time.monotonic() + 600
        while not list((killed / "runs" / "base" / "s1").glob("*/checkpoint.npz")):
            assert p.poll() is None, p.stdout.read()[-4000:]
            assert time.monotonic() < until, "base did not checkpoint within 600 s"
            time.sleep(0.5)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p = _campaign(killed, address, env)
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, out[-4000:]
        assert "Traceback" not in out, out[-4000:]

        # The same chain, the Ray worker that runs base's task killed (a lost worker) once base
        # has checkpointed: Ray starts the task again, the orphaned run stops itself on a
        # checkpoint, and the new task waits for it and resumes it; the driver goes on.
        lost = tmp_path / "lost"
        lost.mkdir()
        (lost / "chain.toml").write_text(CHAIN)
        p = _campaign(lost, address, env)
        until = time.monotonic() + 600
        while not list((lost / "runs" / "base" / "s1").glob("*/checkpoint.npz")):
            assert p.poll() is None, p.stdout.read()[-4000:]
            assert time.monotonic() < until, "base did not checkpoint within 600 s"
            time.sleep(0.5)
        (run,) = [q for q in psutil.process_iter(["cmdline", "cwd"])
                  if q.info["cwd"] == str(lost) and "jaxrl_agents.campaign.child" in " ".join(
                      q.info["cmdline"] or [])]
        run.parent().kill()  # the worker, not the run: the run must notice and stop on its own
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, out[-4000:]
        for folder in (killed, lost):
            for entry in ("base", "ft"):
                a = find_run_dir(str(whole / "runs" / entry / "s1"))
                b = find_run_dir(str(folder / "runs" / entry / "s1"))
                assert run_status(b)[0] == "finished"
                (ea, pa), (eb, pb) = _evaluations(a), _evaluations(b)
                assert sorted(ea) == sorted(eb) and pa == pb and pa
                for key in ea:
                    np.testing.assert_array_equal(ea[key], eb[key],
                                                  err_msg=f"{folder.name} {entry}: {key}")


@pytest.mark.slow  # a local Ray and two small runs: a minute or two
def test_jaxrl_campaign_starts_a_local_ray_by_default_and_a_second_call_does_nothing(tmp_path):
    """Without --address the command starts a Ray of its own (one run at a time), runs the chain,
    and stops it; a second call finds everything finished and trains nothing."""
    (tmp_path / "chain.toml").write_text(CHAIN.replace("total_steps = 20480", "total_steps = 2048"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    command = [os.path.join(BIN, "jaxrl-campaign"), "run", "chain.toml", "--progress", "off"]
    p = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    for entry in ("base", "ft"):
        assert run_status(find_run_dir(str(tmp_path / "runs" / entry / "s1")))[0] == "finished"
    def stamps():  # .lock: rewritten by whichever task holds the seed's folder
        return {q: q.stat().st_mtime_ns for q in tmp_path.rglob("*")
                if q.is_file() and q.name != ".lock"}

    before = stamps()
    p = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "campaign: 2 finished (of 2 selected run(s))" in p.stdout and "new run" not in p.stdout
    assert stamps() == before
