"""jaxrl-sweep survives kill -9: of a trial's worker (retried from its checkpoint) and of the sweep
driver itself (rerunning the same command resumes: nothing reruns, nothing is lost).

The driver is the real ``jaxrl-sweep`` command in a subprocess, starting its own local Ray.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

psutil = pytest.importorskip("psutil")  # comes with Ray
pytest.importorskip("ray")

from jaxrl_agents.run.host.small_loops import RECORD_KEY  # noqa: E402
from jaxrl_agents.run.run_files import read_progress  # noqa: E402
from jaxrl_agents.sweep.summary import trial_groups  # noqa: E402

from .conftest import TOY_ENV  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPDATES = 100  # of 64 steps; 10 segments of 10 updates: the kills land mid-trial
FINAL = 64 * UPDATES


def _wait(what, predicate, timeout=300):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _log(root):
    path = os.path.join(root, "trial_log.jsonl")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def _trials(sweep):
    runs = os.path.join(sweep, "runs")
    return sorted(os.path.join(runs, t) for t in os.listdir(runs)) if os.path.isdir(runs) else []


def _mid_run(root):
    """The trial's group has a checkpoint but has not finished."""
    groups = trial_groups(root)
    if len(groups) != 1 or not all(os.path.isfile(os.path.join(d, "checkpoint.npz"))
                                   for d in groups[0]):
        return False
    rows = read_progress(os.path.join(groups[0][0], "progress.csv"))
    return bool(rows) and int(rows[-1]["step"]) < FINAL


def _kill_tree(proc):
    """kill -9 the driver, then every process it had started (its local Ray), by pid."""
    family = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _, alive = psutil.wait_procs(family, timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.mark.slow  # two local Ray start-ups and two trials of 100 updates: ~3 min on 2 cores
def test_kill_worker_and_driver_then_resume(tmp_path):
    spec = tmp_path / "camp.toml"
    spec.write_text(textwrap.dedent(f"""
        name = "camp"
        out = "{tmp_path}"
        num_cpus = 1
        max_concurrent = 1
        report_every = 5
        [train]
        env = "{TOY_ENV}"
        total_steps = {FINAL}
        eval_every = 128
        seeds = [0, 1]
        [train.config]
        n_envs = 4
        n_steps = 16
        n_epochs = 2
        n_minibatches = 2
        hidden = [8]
        [space]
        seeds = {{values = [[0, 1], [2, 3]]}}
    """))
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = dict(os.environ, RAY_TMPDIR=ray_tmp)
    cmd = [sys.executable, "-m", "jaxrl_agents.sweep.cli", str(spec), "--progress", "lines"]
    sweep = str(tmp_path / "camp")
    try:
        driver = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            # 1. kill -9 the worker of a trial that has a checkpoint: Tune retries the trial
            #    (perhaps after the other one), and the retry resumes its run directories.
            hit = _wait("a trial with a checkpoint",
                        lambda: next((t for t in _trials(sweep) if _mid_run(t)), None))
            os.kill(_log(hit)[-1]["pid"], signal.SIGKILL)
            _wait("the retry", lambda: "resume" in [e["event"] for e in _log(hit)])

            # 2. kill -9 the driver once one trial has finished and the other is half way
            def finished_and_mid_run():
                done = [t for t in _trials(sweep) if _log(t) and _log(t)[-1]["event"] == "finished"]
                mid = [t for t in _trials(sweep) if t not in done and _mid_run(t)]
                return (done[0], mid[0]) if done and mid else None

            done, mid = _wait("one trial finished, the other mid-run", finished_and_mid_run)
            before = open(os.path.join(trial_groups(done)[0][0], "progress.csv")).read()
            created = {t: [os.path.basename(d) for d in trial_groups(t)[0]] for t in (done, mid)}
            mid_events = len(_log(mid))
            _kill_tree(driver)
        finally:
            if driver.poll() is None:
                _kill_tree(driver)
        assert not os.path.exists(os.path.join(sweep, "summary.csv"))

        # 3. the same command again
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resuming" in p.stderr

    for t in (done, mid):
        events = [e["event"] for e in _log(t)]
        assert events[0] == "start" and events[-1] == "finished"
        assert "start" not in events[1:]  # never trained afresh once it had a checkpoint
    assert "resume" in [e["event"] for e in _log(hit)]  # the killed worker's trial was retried
    # finished before the driver died: not trained again, its files untouched
    assert open(os.path.join(trial_groups(done)[0][0], "progress.csv")).read() == before
    # the one cut short resumed from its checkpoint under the new driver
    assert [e["event"] for e in _log(mid)[mid_events:]][0] == "resume"
    with open(os.path.join(sweep, "xla.json")) as f:
        sweep_threshold = json.load(f)[RECORD_KEY]
    for t in (done, mid):
        (group,) = trial_groups(t)  # the same run directories, no second group
        assert [os.path.basename(d) for d in group] == created[t]
        for d in group:  # one row per update, none lost or repeated
            steps = [int(r["step"]) for r in read_progress(os.path.join(d, "progress.csv"))]
            assert steps == list(range(64, FINAL + 1, 64))
            # every worker, the retried and the new driver's too, compiled under the sweep's record
            with open(os.path.join(d, "config.json")) as f:
                assert json.load(f)[RECORD_KEY] == sweep_threshold
    with open(os.path.join(sweep, "summary.csv")) as f:
        table = list(csv.DictReader(f))
    assert sorted(r["status"] for r in table) == ["finished", "finished"]
    assert {r["trial_id"] for r in table} == {os.path.basename(done), os.path.basename(mid)}
