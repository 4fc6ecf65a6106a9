"""jaxrl-sweep on a real local Ray started by the tests: a 2-trial grid and a 4-member PBT.

Tiny budgets on the toy env: 8 updates of 64 steps per trial, one report every 2 updates.
"""

import csv
import json
import os
import shutil
import tempfile

import pytest

ray = pytest.importorskip("ray")

from jaxrl_agents.run import trainer  # noqa: E402
from jaxrl_agents.run.run_files import read_progress, read_run_config  # noqa: E402
from jaxrl_agents.sweep import parse_spec, run_sweep  # noqa: E402
from jaxrl_agents.sweep.summary import trial_groups  # noqa: E402

from .conftest import TOY_ENV  # noqa: E402


TRAIN = {"algo": "ppo", "env": TOY_ENV, "total_steps": 512, "eval_every": 128, "seeds": [0, 1],
         "config": {"n_envs": 4, "n_steps": 16, "n_epochs": 2, "n_minibatches": 2,
                    "hidden": [8]}}


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs for this module, its files in a short temp dir (socket paths),
    shut down and removed at the end."""
    tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)


def _summary(sweep_dir):
    with open(os.path.join(sweep_dir, "summary.csv")) as f:
        return list(csv.DictReader(f))


def _log(sweep_dir, trial_id):
    with open(os.path.join(sweep_dir, "runs", trial_id, "trial_log.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow  # kept out of the default run for its 15-minute budget
def test_grid_of_two_trials(local_ray, tmp_path):
    spec = parse_spec({"name": "grid", "out": str(tmp_path), "train": {**TRAIN, "tensorboard": True},
                       "space": {"config": {"lr": {"values": [1e-3, 3e-3]}}}})
    rows = run_sweep(spec, progress="lines")
    sweep = spec.sweep_dir
    table = _summary(sweep)
    assert [r["trial_id"] for r in table] == [r["trial_id"] for r in rows]
    assert [r["status"] for r in table] == ["finished", "finished"]
    assert sorted(json.loads(r["config.lr"]) for r in table) == [1e-3, 3e-3]
    values = [float(r["best_eval_JT_min"]) for r in table]
    assert values == sorted(values)  # ranked, best (lowest J_T) first
    for r in table:
        groups = trial_groups(os.path.join(sweep, "runs", r["trial_id"]))
        assert len(groups) == 1 and len(groups[0]) == 2  # two seeds, vmapped in one group
        best = []
        for d in groups[0]:
            rc = read_run_config(os.path.join(d, "config.json"))
            assert rc["algo_config"]["lr"] == json.loads(r["config.lr"])
            # the trial compiled its small loops under the sweep's recorded threshold
            with open(os.path.join(sweep, "xla.json")) as f:
                threshold = json.load(f)["xla_cpu_small_loop_bytes"]
            assert rc["xla_cpu_small_loop_bytes"] == threshold
            progress = read_progress(os.path.join(d, "progress.csv"))
            assert [int(p["step"]) for p in progress] == list(range(64, 513, 64))
            # train.tensorboard: each trial's run directories have their TensorBoard curves,
            # every segment's rows in them (tensorboard is in the test group: the real reader)
            assert rc["tensorboard"] is True
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

            acc = EventAccumulator(os.path.join(d, "tensorboard"))
            acc.Reload()
            assert [e.step for e in acc.Scalars("train/pg_loss")] == list(range(64, 513, 64))
            best.append(min(float(p["eval_JT_min"]) for p in progress if "eval_JT_min" in p))
            # a normal run directory: --resume sees a finished run and trains nothing
            assert trainer.resume(d, progress="off").finished
        assert float(r["best_eval_JT_min"]) == pytest.approx(min(best), rel=1e-12)
        assert r["run_dirs"].count(";") == 1
        assert [e["event"] for e in _log(sweep, r["trial_id"])] == ["start", "finished"]
    # quantgate-results runs reads a sweep directory as all its trials' runs, best trial first
    from quantgate_analysis import runs_page

    dirs = runs_page.expand_sweeps([sweep])
    assert dirs == [os.path.join(sweep, d) for r in table for d in r["run_dirs"].split(";")]
    assert runs_page.read_run(dirs[0])
    # the same command again: everything finished, nothing trains again
    run_sweep(spec, progress="off")
    for r in table:
        assert [e["event"] for e in _log(sweep, r["trial_id"])] == ["start", "finished"]


@pytest.mark.slow  # 4 PBT members trained with exploits: 168 s of a shared 2-core run (issue 25)
def test_pbt_population_of_four(local_ray, tmp_path):
    spec = parse_spec({
        "name": "pbt", "out": str(tmp_path), "train": dict(TRAIN, total_steps=768),
        "num_samples": 4, "random_seed": 3,
        "method": "random",
        "space": {"config": {"lr": {"loguniform": [1e-4, 3e-2]}}},
        "scheduler": {"type": "pbt", "perturbation_interval": 256, "quantile_fraction": 0.5,
                      "resample_probability": 0.5,
                      "mutations": {"config": {"lr": {"loguniform": [1e-4, 3e-2]},
                                               "clip_eps": {"uniform": [0.1, 0.3]}}}}})
    run_sweep(spec, progress="lines")
    sweep = spec.sweep_dir
    table = _summary(sweep)
    assert len(table) == 4 and {r["status"] for r in table} == {"finished"}
    exploits = 0
    for r in table:
        trial_dir = os.path.join(sweep, "runs", r["trial_id"])
        (group,) = trial_groups(trial_dir)
        for d in group:
            rc = read_run_config(os.path.join(d, "config.json"))
            # the run directory trains under the trial's final (explored) config
            assert rc["algo_config"]["lr"] == pytest.approx(json.loads(r["config.lr"]))
            assert 0.1 <= rc["algo_config"]["clip_eps"] <= 0.3
            steps = [int(p["step"]) for p in read_progress(os.path.join(d, "progress.csv"))]
            assert steps == list(range(64, 769, 64))  # a whole history, also after exploits
            assert trainer.resume(d, progress="off").finished
        lineage = rc.get("sweep", {}).get("lineage", [])
        events = [e["event"] for e in _log(sweep, r["trial_id"])]
        exploits += events.count("exploit")
        if "exploit" in events:
            assert lineage and lineage[-1]["from_trial"] != r["trial_id"]
            # what the exploit replaced is kept, never deleted
            assert os.listdir(os.path.join(trial_dir, "replaced"))
    assert exploits >= 1
