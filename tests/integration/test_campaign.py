"""A campaign in miniature: an interrupted run is resumed, a never-checkpointed one is set aside,
a fine-tuning entry starts from its source's best policy, the summaries' pulses re-propagate to
their J_T, a second call does nothing, and the page is built from the summaries alone.

The campaign's tasks run in this process here (`InlineTasks`: the same task function and
outcomes as the Ray tasks of ``jaxrl-campaign``); tests/integration/test_campaign_ray.py runs
them on a real Ray head.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from jaxrl_agents.campaign import driver, task
from jaxrl_agents.campaign.executors import InlineTasks
from jaxrl_agents.campaign.rundirs import find_run_dir
from jaxrl_agents.campaign.spec import load_campaign
from jaxrl_agents.console.presets import get_preset
from jaxrl_agents.run import trainer
from jaxrl_agents.run.algorithms import make_config
from quantgate_analysis import frontier as frontier_module
from quantgate_analysis.page import write_page
from quantgate_env import load_pulse_csv, rollout_pulse

from tests.integration.run_state import run_status

ROOT = pathlib.Path(__file__).resolve().parents[2]
CAMPAIGN_BIN = os.path.join(os.path.dirname(sys.executable), "jaxrl-campaign")


def run_campaign(campaign, **kwargs):
    """The driver with its tasks run in this process."""
    return driver.run_campaign(campaign, tasks=InlineTasks(), **kwargs)


# 6 ns episodes (40 steps) on a tiny network: minutes of compiling at most, seconds of training.
ENV = {"T": 6.0, "pulse_length": 120, "qubit_drift_mhz": "recool"}
FLAGS = {"n_envs": 4, "n_steps": 128, "n_epochs": 1, "n_minibatches": 4, "hidden": [16, 16]}
MINI = """
name = "mini"
runs = "runs"
summaries = "summaries"
seeds = [1]
summariser = "quantgate_analysis.campaign:summarise"
frontier_ns = [3, 5]

[[entry]]
name = "base"
description = "a short domain-randomised PPO run"
algo = "ppo"
preset = "fast"
total_steps = 2048
env_options = { T = 6.0, pulse_length = 120, qubit_drift_mhz = "recool" }
flags = { n_envs = 4, n_steps = 128, n_epochs = 1, n_minibatches = 4, hidden = [16, 16] }
robustness = true

[[entry]]
name = "ft"
description = "its fine-tuning"
algo = "ppo"
preset = "fast"
init_from = "base"
total_steps = 1024
env_options = { T = 6.0, pulse_length = 120, qubit_drift_mhz = "recool" }
flags = { n_envs = 4, n_steps = 128, n_epochs = 1, n_minibatches = 4, hidden = [16, 16], lr = 1e-4 }
"""
# Two float64 propagations of the same <= 120 samples by the same series: they agree far below this.
REPROPAGATION_ATOL = 1e-11
# The summaries' GRAPE column here checks the frontier's plumbing (which pulse, cut where, recorded
# how); whether 200 iterations refine a pulse is test_grape's. Ten keep the default run short.
GRAPE_ITERATIONS = 10


def _config(total_steps, **extra):
    return make_config("ppo", {**get_preset("ppo", "fast").config, **FLAGS, **extra,
                               "total_steps": total_steps})


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory):
    """The mini campaign after an interrupted session and one `run`."""
    root = tmp_path_factory.mktemp("campaign")
    old = os.getcwd()
    os.chdir(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frontier_module, "GRAPE_ITERATIONS", GRAPE_ITERATIONS)
        try:
            (root / "mini.toml").write_text(MINI)
            campaign = load_campaign("mini.toml")
            base, ft = campaign.entries
            # A session that ended mid-run: base checkpointed twice and stopped.
            trainer.train("ppo", "quantgate_env:make", ENV, _config(2048), seeds=(1,), eval_every=512,
                          out=campaign.run_parent(base, 1), tag="base", checkpoint_every=1,
                          progress="off", stop_after=2, preset="fast")
            interrupted = find_run_dir(campaign.run_parent(base, 1))
            assert run_status(interrupted)[:2] == ("interrupted", 1024)
            # ... and a fine-tuning run that died before its first checkpoint: the trainer writes
            # config.json first, so that is all such a run directory holds.
            dead = pathlib.Path(campaign.run_parent(ft, 1), "ppo_20260101-000000_s1_ft")
            dead.mkdir(parents=True)
            (dead / "config.json").write_text((pathlib.Path(interrupted) / "config.json").read_text())
            assert run_status(str(dead))[0] == "incomplete"
            assert run_campaign(campaign, code_version="v-test", progress="off") == 0
            yield root, campaign, interrupted
        finally:
            os.chdir(old)


def _summary(root, entry):
    return json.loads((root / "summaries" / entry / "s1.json").read_text())


def test_the_interrupted_run_is_resumed_in_place(campaign_dir):
    root, campaign, interrupted = campaign_dir
    base = campaign.entries[0]
    assert find_run_dir(campaign.run_parent(base, 1)) == interrupted
    assert run_status(interrupted) == ("finished", 2048, 2048)
    s = _summary(root, "base")
    assert s["status"] == "finished" and s["steps_done"] == 2048 and s["code_versions"] == ["v-test"]


def test_the_never_checkpointed_run_is_set_aside_not_deleted(campaign_dir):
    _, campaign, _ = campaign_dir
    parent = pathlib.Path(campaign.run_parent(campaign.entries[1], 1))
    aside = [p for p in parent.iterdir() if ".incomplete-" in p.name]
    assert len(aside) == 1 and (aside[0] / "config.json").is_file()
    assert run_status(find_run_dir(str(parent)))[0] == "finished"


def test_the_fine_tuning_run_starts_from_its_source_best(campaign_dir):
    root, campaign, interrupted = campaign_dir
    ft = find_run_dir(campaign.run_parent(campaign.entries[1], 1))
    record = json.loads(pathlib.Path(ft, "config.json").read_text())["init_from"]
    base_best = _summary(root, "base")["best"]
    assert record["path"] == os.path.abspath(interrupted)
    assert record["step"] == base_best["step"]  # both rank evaluations by J_T_min, first wins
    s = _summary(root, "ft")
    assert s["init_from"]["run"] == os.path.basename(interrupted)
    assert s["init_from"]["step"] == record["step"] and s["init_from"]["wall_s"] > 0


def test_a_fine_tune_of_a_fine_tune_counts_its_whole_chain_from_scratch(campaign_dir):
    from quantgate_analysis.rundir import read_progress as _read_progress
    from quantgate_analysis.summary import _source

    _, campaign, interrupted = campaign_dir
    ft = find_run_dir(campaign.run_parent(campaign.entries[1], 1))
    ft_row = _read_progress(ft)[-1]  # a second fine-tune from ft's last evaluated update
    rc = json.loads(pathlib.Path(ft, "config.json").read_text())
    rc["init_from"] = dict(rc["init_from"], path=ft, step=int(float(ft_row["step"])))
    base = json.loads(pathlib.Path(ft, "config.json").read_text())["init_from"]
    base_row = next(r for r in _read_progress(interrupted) if int(float(r["step"])) == base["step"])
    src = _source(rc)
    assert src["chain"] == [os.path.basename(ft), os.path.basename(interrupted)]
    assert src["step"] == int(float(ft_row["step"])) + base["step"]
    assert src["wall_s"] == float(ft_row["wall"]) + float(base_row["wall"])


@pytest.mark.parametrize("entry", ["base", "ft"])
def test_committed_pulses_repropagate_to_their_summary(campaign_dir, entry):
    root, _, _ = campaign_dir
    s = _summary(root, entry)
    for gate in ("best", "short"):
        g = s[gate]
        amps, dt = load_pulse_csv(root / "summaries" / entry / g["pulse_csv"])
        assert amps.size == g["n_samples"] and dt == pytest.approx(0.05, rel=1e-12)
        jt = rollout_pulse(amps, dt=dt)["JT"][-1]
        assert jt == g["JT_repropagated"]
        assert abs(jt - g["JT"]) <= REPROPAGATION_ATOL  # what the evaluation recorded
    frontier = s["frontier"]
    assert frontier["gate_time_ns"] == [3.0, 5.0]
    assert frontier["rl_JT"][1] <= frontier["rl_JT"][0]  # a longer limit can only do as well
    assert all(np.isfinite(frontier["grape_JT"])) and frontier["grape_iterations"] == GRAPE_ITERATIONS


def test_the_robustness_map_is_the_policy_closed_loop_on_the_recool_grid(campaign_dir):
    root, _, _ = campaign_dir
    rob = _summary(root, "base")["robustness"]
    jt = np.asarray(rob["jt_at_gate_time"])
    assert rob["n"] == 11 and jt.shape == (121,)
    assert rob["median_JT"] == pytest.approx(np.median(jt)) and rob["worst_JT"] == jt.max()
    assert np.max(np.abs(rob["offsets_mhz"])) == pytest.approx(5.7)


def test_the_mapped_policy_is_the_kept_one_that_does_best_on_drawn_devices(campaign_dir):
    """The map is of whichever kept policy ("best" or "last") has the lower worst J_T on the
    validation devices, and it is that policy's own map."""
    from jaxrl_agents import load_policy
    from quantgate_env import make
    from quantgate_env.tools.robustness import policy_robustness

    root, campaign, _ = campaign_dir
    rob = _summary(root, "base")["robustness"]
    val = rob["validation"]
    assert set(val) == {"best", "last"} and all(v["count"] == 128 for v in val.values())
    assert rob["policy"] == min(("best", "last"), key=lambda which: val[which]["worst_JT"])
    policy = load_policy(find_run_dir(campaign.run_parent(campaign.entries[0], 1)), rob["policy"])
    again = policy_robustness(lambda obs: policy.act(obs, deterministic=True),
                              env=make(**{**ENV, "oob_mode": "clip"}), half_width_mhz="recool", n=11)
    # the same program on the same inputs, on this machine: equal up to nothing but its rounding
    np.testing.assert_allclose(again.jt_at_gate_time, rob["jt_at_gate_time"], rtol=1e-12)
    assert again.gate_time == pytest.approx(rob["gate_time_ns"])


def test_a_second_run_does_nothing(campaign_dir):
    root, campaign, _ = campaign_dir
    before = sorted(p.relative_to(root) for p in root.rglob("*") if "summaries" not in p.parts)
    stamps = {p: p.stat().st_mtime_ns for p in (root / "summaries").rglob("*")}
    assert run_campaign(campaign, code_version="v-later", progress="off") == 0
    assert sorted(p.relative_to(root) for p in root.rglob("*") if "summaries" not in p.parts) == before
    assert {p: p.stat().st_mtime_ns for p in (root / "summaries").rglob("*")} == stamps


def test_a_new_machine_keeps_the_committed_summaries(campaign_dir, tmp_path, capsys):
    """A later session has the committed summaries but none of the run directories: the runs
    they summarise are skipped, an interrupted one included, and no summary is rewritten."""
    import shutil

    root, campaign, _ = campaign_dir
    shutil.copytree(root / "summaries", tmp_path / "summaries")
    shutil.copy(root / "mini.toml", tmp_path / "mini.toml")
    ft_summary = tmp_path / "summaries" / "ft" / "s1.json"
    ft_summary.write_text(ft_summary.read_text().replace('"status": "finished"',
                                                         '"status": "interrupted"'))
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "summaries").rglob("*")}
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        capsys.readouterr()
        assert run_campaign(load_campaign("mini.toml"), seeds=[1], progress="off") == 0
    finally:
        os.chdir(old)
    out = capsys.readouterr().out
    assert "base seed 1" in out and "finished; skipped" in out
    assert "ft seed 1" in out and "cannot resume without its run directory" in out
    assert not (tmp_path / "runs").exists()
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "summaries").rglob("*")} == stamps


def test_a_summarised_run_that_never_checkpointed_here_starts_afresh(campaign_dir, tmp_path,
                                                                     monkeypatch, capsys):
    """A run summarised as "incomplete" whose run directory on this machine died before its first
    checkpoint is set aside and started again; the committed summary does not make the runner
    believe the run lives on another machine (it did, once: the seed was skipped for good)."""
    import shutil

    root, _, interrupted = campaign_dir
    shutil.copy(root / "mini.toml", tmp_path / "mini.toml")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        campaign = load_campaign("mini.toml")
        base = campaign.entries[0]
        summary = tmp_path / "summaries" / "base" / "s1.json"
        summary.parent.mkdir(parents=True)
        summary.write_text(json.dumps({"status": "incomplete"}))
        dead = tmp_path / campaign.run_parent(base, 1) / "ppo_20260101-000000_s1_base"
        dead.mkdir(parents=True)
        shutil.copy(root / interrupted / "config.json", dead / "config.json")
        calls = []
        monkeypatch.setattr(task, "_train", lambda job, args, *_: (calls.append(args), (0, None))[1])
        capsys.readouterr()
        # (1: the stand-in for jaxrl-train trains nothing and leaves no run directory)
        assert run_campaign(campaign, entries=["base"], seeds=[1], progress="off") == 1
        # ... and a later call, with the set-aside run still there and no new one: the same.
        assert run_campaign(campaign, entries=["base"], seeds=[1], progress="off") == 1
    finally:
        os.chdir(old)
    out = capsys.readouterr().out
    assert "never reached a checkpoint" in out and "skipped" not in out
    assert len(calls) == 2 and all("--resume" not in args for args in calls)
    # (.lock: the campaign task's hold on the seed's folder)
    assert sorted(p.name for p in dead.parent.iterdir()) == [".lock", dead.name + ".incomplete-1"]
    assert json.loads(summary.read_text()) == {"status": "incomplete"}  # nothing rewrote it


def test_the_code_version_ignores_the_campaign_s_own_summaries(tmp_path):
    """A running campaign rewrites its tracked summaries: that alone does not make the code dirty."""
    from quantgate_analysis.campaign import code_version

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "summaries").mkdir()
    (tmp_path / "summaries" / "s1.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", "--allow-empty")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "files")
    clean = code_version(str(tmp_path), ignore=(str(tmp_path / "summaries"),))
    assert clean != "unknown" and not clean.endswith("-dirty")
    (tmp_path / "summaries" / "s1.json").write_text('{"best": 1}')
    assert code_version(str(tmp_path), ignore=(str(tmp_path / "summaries"),)) == clean
    assert code_version(str(tmp_path)) == clean + "-dirty"
    (tmp_path / "code.py").write_text("x = 2\n")
    assert code_version(str(tmp_path), ignore=(str(tmp_path / "summaries"),)) == clean + "-dirty"


def test_a_seed_outside_the_campaign_is_refused_by_name(campaign_dir):
    _, campaign, _ = campaign_dir
    with pytest.raises(ValueError, match=r"--seed: expected one of the campaign's seeds \[1\], got 2"):
        run_campaign(campaign, seeds=[2], progress="off")


def test_the_page_is_built_from_the_summaries_alone(campaign_dir, tmp_path):
    pytest.importorskip("matplotlib")
    root, campaign, _ = campaign_dir
    # the page needs no run directory: move them away first
    os.rename(root / "runs", root / "runs-gone")
    try:
        page = pathlib.Path(write_page([campaign], str(root / "page.md"), str(root / "figs")))
    finally:
        os.rename(root / "runs-gone", root / "runs")
    text = page.read_text()
    links = [line.split("](")[1].split(")")[0] for line in text.split("[") if "](" in line]
    csvs = [link for link in links if link.endswith(".csv")]
    assert csvs and all((root / link).is_file() for link in csvs)
    assert all((root / link).is_file() for link in links if link.endswith(".png"))
    best = _summary(root, "base")["best"]["JT_repropagated"]
    assert f"{best:.2e}" in text and "`v-test`" in text
    assert "## The gate-time frontier" in text and "## Robust gates" in text
    # regenerating over its own page is fine; a user's file of that name is never replaced
    write_page([campaign], str(page), str(root / "figs"))
    mine = root / "notes.md"
    mine.write_text("# my notes\n")
    with pytest.raises(ValueError, match=r"--out: .*notes.md.* not a generated results page"):
        write_page([campaign], str(mine), str(root / "figs"))
    assert mine.read_text() == "# my notes\n"


def test_bad_campaign_files_are_refused_with_the_key(tmp_path, monkeypatch, capsys):
    """Each bad file: exit 2 and one stderr line naming the file and the key, before anything
    runs. The first case goes through the installed command (its exit code and stream); the
    others call its `main` in this process (the same code, without 4 s of imports each)."""
    from jaxrl_agents.campaign.cli import main

    cases = {
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\nsummariser = 'm:f'\n[[entry]]\nname = 'a'\nalgo = 'ppo'\n"
        "preset = 'fast'\ntotal_steps = 10\ninit_from = 'b'\n": "entry 'a': init_from: expected the name",
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\nsummariser = 'm:f'\n[[entry]]\nname = 'a'\nalgo = 'ppo'\n"
        "preset = 'fast'\ntotal_steps = 10\nseeds = [2]\n": "entry 'a': seeds: expected a subset",
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\nbogus = 1\n": "keys: expected some of",
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\nsummariser = 'm:f'\n[[entry]]\nname = 'a'\nalgo = 'ppo'\n"
        "preset = 'fast'\ntotal_steps = 10\nflags = { seed = 3 }\n": "entry 'a': flags",
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\nsummariser = 'm:f'\n[[entry]]\nname = 'a'\nalgo = 'ppo'\n"
        "preset = 'fast'\ntotal_steps = 10\nrestart = { below = 1e-2, within_steps = 20, attempts = 3 }\n":
        "entry 'a': restart: within_steps: expected a step count in (0, total_steps = 10)",
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\n[[entry]]\nname = 'a'\nalgo = 'ppo'\n"
        "preset = 'fast'\ntotal_steps = 10\n": "summariser: expected 'module:function' of the function "
        "that summarises a run (e.g. 'quantgate_analysis.campaign:summarise'), got None",
        "name = 'x'\nruns = 'r'\nsummaries = 's'\nseeds = [1]\nsummariser = 'no_such_module:f'\n"
        "[[entry]]\nname = 'a'\nalgo = 'ppo'\npreset = 'fast'\ntotal_steps = 10\n":
        "summariser: cannot import module 'no_such_module' of 'no_such_module:f'",
    }
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main may put the working directory on it
    for i, (text, match) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.toml"
        path.write_text(text)
        if i == 0:
            done = subprocess.run([CAMPAIGN_BIN, "run", str(path)],
                                  cwd=ROOT, capture_output=True, text=True, timeout=120)
            code, err = done.returncode, done.stderr
        else:
            code, err = main(["run", str(path)]), capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert str(path) in err and match in err


@pytest.mark.slow  # kept out of the default run for its 15-minute budget
def test_a_deadline_stops_a_campaign_started_in_the_background(tmp_path):
    """A shell starts `nohup ... &` jobs with SIGINT ignored, and children inherit it; the deadline
    must still stop the run (the 900 s timeout only catches a hang, it times nothing)."""
    import signal

    (tmp_path / "long.toml").write_text(MINI.replace("total_steps = 2048", "total_steps = 200_000_000"))
    done = subprocess.run([CAMPAIGN_BIN, "run", "long.toml", "--minutes",
                           "0.5", "--entry", "base", "--progress", "off"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 3, done.stdout + done.stderr
    # The run stops itself on its time budget (probe row 9: no 35-line KeyboardInterrupt traceback)
    assert "Traceback" not in done.stdout + done.stderr and "stopped;" in done.stdout
    run_dir = find_run_dir(str(tmp_path / "runs" / "base" / "s1"))
    if run_dir is not None:  # None: stopped while compiling, and the trainer left nothing
        from jaxrl_agents.common.fileio import lock_directory

        with lock_directory(run_dir):  # no process is left holding the run
            pass


@pytest.mark.slow  # a local Ray and a run stopped once it has checkpointed: minutes
def test_sigterm_stops_a_campaign_started_in_the_background_on_a_checkpoint(tmp_path):
    """SIGTERM to a driver whose SIGINT is ignored (``nohup ... &``): each task stops its run,
    which ends on a checkpoint, reports it as stopped and resumes. Before, Ray's cancel never
    reached such a task (the driver waited out 180 s and Ray's shutdown killed the worker), and
    where it did, the run never saw the task's SIGINT (a Ray worker's children inherit it blocked):
    the task terminated it after its 120 s grace period."""
    import signal
    import time

    (tmp_path / "long.toml").write_text(MINI.replace("total_steps = 2048", "total_steps = 200_000_000"))
    p = subprocess.Popen([CAMPAIGN_BIN, "run", "long.toml", "--entry", "base", "--progress", "off"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    until = time.monotonic() + 600  # catches a hang; times nothing
    while not list((tmp_path / "runs" / "base" / "s1").glob("*/checkpoint.npz")):
        assert p.poll() is None, p.stdout.read()[-4000:]
        assert time.monotonic() < until, "the run did not checkpoint within 600 s"
        time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 3, out[-4000:]
    # The task's own outcome line: it stopped the run and saw it end (not killed with the worker),
    # and the run acted on the task's SIGINT (not on the SIGTERM that ends the grace period)
    assert "campaign: base seed 1: stopped;" in out and "Traceback" not in out, out[-4000:]
    assert "did not stop within" not in out and "jaxrl-train: interrupted;" in out, out[-4000:]
    run_dir = find_run_dir(str(tmp_path / "runs" / "base" / "s1"))
    assert run_status(run_dir)[0] == "interrupted"
    from jaxrl_agents.common.fileio import lock_directory

    with lock_directory(run_dir):  # no process is left holding the run
        pass


def _toy_summary(run, seed, hit, init_from=None):
    """A summary with one threshold crossing ``hit`` = (steps, wall s) at 1e-4, or None."""
    s = {"run": run, "seed": seed,
         "thresholds": {"1e-04": None if hit is None else {"steps": hit[0], "wall_s": hit[1]}}}
    if init_from is not None:
        s["init_from"] = init_from
    return s


def test_a_chain_reaches_a_threshold_when_its_first_run_does():
    from quantgate_analysis.page import _to, link_sources

    # The source crossed 1e-4 at 100 steps / 10 s, and its best policy (step 500, 50 s) seeded
    # the fine-tune, which met 1e-4 again 20 steps / 5 s in: the chain got there at 100 / 10.
    start = {"run": "src-1", "step": 500, "wall_s": 50.0}
    summaries = {"c/src": [_toy_summary("src-1", 1, (100, 10.0)), _toy_summary("src-2", 2, None)],
                 "c/ft": [_toy_summary("ft-1", 1, (20, 5.0), start),
                          _toy_summary("ft-2", 2, (20, 5.0), dict(start, run="src-2")),
                          _toy_summary("ft-3", 3, (20, 5.0), dict(start, run="src-3"))]}
    link_sources(summaries, {"c/src": None, "c/ft": "c/src"})
    ft1, ft2, ft3 = summaries["c/ft"]
    assert _to(ft1, 1e-4) == (100, 10.0)
    # a source that never reached it: the fine-tune's own crossing plus the source's run to its start
    assert _to(ft2, 1e-4) == (520, 55.0)
    # no summary of the source run (its seed's source ran elsewhere): the same, from init_from
    assert "_source" not in ft3 and _to(ft3, 1e-4) == (520, 55.0)
    # a source summary of another run of that seed is not this chain's
    other = {"c/src": [_toy_summary("src-other", 1, (100, 10.0))],
             "c/ft": [_toy_summary("ft-1", 1, (20, 5.0), start)]}
    link_sources(other, {"c/src": None, "c/ft": "c/src"})
    assert _to(other["c/ft"][0], 1e-4) == (520, 55.0)


def test_a_restarted_seed_stays_its_campaign_seed_on_the_page(tmp_path):
    """A seed whose run restarted trains with seed + 1000 n (its summary's "seed"), while its
    fine-tunes keep the campaign seed: the page keys both by the file's seed, so the chain links
    and reaches 1e-4 when its first run did (before, seed 2014 and seed 14 never matched and the
    fine-tune's time counted the whole source run)."""
    from quantgate_analysis.page import _seed_label, _to, link_sources, load_summaries

    start = {"run": "src-14", "step": 500, "wall_s": 50.0}
    for entry, summary in (("src", _toy_summary("src-14", 2014, (100, 10.0))),
                           ("ft", _toy_summary("ft-14", 14, (20, 5.0), start))):
        (tmp_path / entry).mkdir()
        (tmp_path / entry / "s14.json").write_text(json.dumps(summary))

    class Entry:
        def __init__(self, name):
            self.name = name

    class Campaign:
        summaries, entries = str(tmp_path), [Entry("src"), Entry("ft")]

    summaries = load_summaries(Campaign())
    link_sources(summaries, {"src": None, "ft": "src"})
    (src,), (ft,) = summaries["src"], summaries["ft"]
    assert _to(ft, 1e-4) == (100, 10.0)
    assert _seed_label(src) == "14 (run seed 2014)" and _seed_label(ft) == "14"


# The mini campaign's first entry with an early test in place of its robustness map.
# One gate time on its frontier: the test is about the attempts, not the summary's GRAPE column.
RESTARTED = "[[entry]]".join(MINI.split("[[entry]]")[:2]).replace(
    "robustness = true", "restart = { below = 1e-12, within_steps = 512, attempts = 2 }").replace(
    "frontier_ns = [3, 5]", "frontier_ns = [3]")


@pytest.mark.slow  # two runs and a summary (~22 s); the gate recipe's early test runs in test_campaign_staged
def test_a_seed_that_fails_its_early_test_starts_again_and_counts_the_failed_attempt(tmp_path,
                                                                                     monkeypatch):
    # J_T < 1e-12 within the first update: no 6 ns policy can pass, so attempt 1 (seed 1) is set
    # aside and attempt 2 (seed 1001), the last one allowed, is kept whatever it reaches.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(frontier_module, "GRAPE_ITERATIONS", GRAPE_ITERATIONS)
    (tmp_path / "restart.toml").write_text(RESTARTED)
    campaign = load_campaign("restart.toml")
    assert run_campaign(campaign, code_version="v-test", progress="off") == 0
    parent = pathlib.Path(campaign.run_parent(campaign.entries[0], 1))
    aside = [p for p in parent.iterdir() if ".attempt-" in p.name]
    assert [p.name.rsplit("-", 1)[1] for p in aside] == ["0"]
    kept = find_run_dir(str(parent))
    assert json.loads(pathlib.Path(kept, "config.json").read_text())["seed"] == 1001
    assert run_status(kept)[0] == "finished"
    summary = json.loads((tmp_path / "summaries" / "base" / "s1.json").read_text())
    (attempt,) = summary["restarts"]["attempts"]
    assert attempt["seed"] == 1 and attempt["steps"] >= 512 and attempt["best_JT"] > 1e-12
    assert summary["restarts"]["steps"] == attempt["steps"] and summary["seed"] == 1001
    # A second call finds the kept run finished and its test spent: nothing more starts.
    assert run_campaign(campaign, code_version="v-test", progress="off") == 0
    assert len([p for p in parent.iterdir() if ".attempt-" in p.name]) == 1


def test_the_early_test_reads_the_run_s_own_evaluations(campaign_dir):
    from jaxrl_agents.campaign.rundirs import read_run

    _, _, run = campaign_dir
    first = read_run(run).rows()[0]
    jt, step = float(first["eval_JT_min"]), int(float(first["step"]))
    assert read_run(run).verdict(jt * 1.0001, step) == "pass"  # met at the first evaluation
    assert read_run(run).verdict(1e-12, step) == "fail"  # not met by the step the test names
    assert read_run(run).verdict(1e-12, 10**9) == "open"  # the step is not there yet


def test_the_early_test_of_a_run_without_a_recorded_score_reads_j_t(campaign_dir, tmp_path):
    """A config.json written before runs recorded their evaluation: the restart rule is in J_T,
    so the campaign reads ``eval_JT_min`` (lower is better), not the generic episode return."""
    import shutil

    from jaxrl_agents.campaign.rundirs import read_run

    _, _, run = campaign_dir
    copy = tmp_path / "old-run"
    shutil.copytree(run, copy)
    config = json.loads((copy / "config.json").read_text())
    assert config.pop("evaluation")["score"] == "JT_min"
    (copy / "config.json").write_text(json.dumps(config))
    first = read_run(str(copy)).rows()[0]
    jt, step = float(first["eval_JT_min"]), int(float(first["step"]))
    assert read_run(str(copy)).score_column == "eval_JT_min"
    assert read_run(str(copy)).verdict(jt * 1.0001, step) == "pass"
    assert read_run(str(copy)).verdict(jt * 0.9999, step) == "fail"


def test_a_cut_progress_table_is_refused_naming_the_file(campaign_dir, tmp_path):
    """The campaign reads progress.csv with the trainer's own reader: a row cut short (a copy
    interrupted mid-write) is an error naming the file, not a summary with a shifted column."""
    import shutil

    from jaxrl_agents.campaign.rundirs import read_run

    _, _, run = campaign_dir
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    table = copy / "progress.csv"
    lines = table.read_text().splitlines()
    assert len(read_run(str(copy)).rows()) == len(lines) - 1
    table.write_text("\n".join(lines[:-1] + [lines[-1].rsplit(",", 3)[0]]) + "\n")
    for read in (lambda d: read_run(d).rows(), lambda d: read_run(d).verdict(1e-12, 10**9)):
        with pytest.raises(ValueError, match=rf"progress\.csv: line {len(lines)} has fewer fields"):
            read(str(copy))


def test_times_to_a_threshold_count_the_failed_attempts_before_the_run():
    from quantgate_analysis.summary import _thresholds

    rows = [{"step": "512", "wall": "2.0", "eval_JT_min": "0.02"},
            {"step": "1024", "wall": "4.5", "eval_JT_min": "0.005"}]
    got = _thresholds(rows, "eval_JT_min", {"steps": 2048, "wall_s": 10.25, "attempts": []})
    assert got == {"1e-02": {"steps": 1024 + 2048, "wall_s": 4.5 + 10.25}, "1e-03": None,
                   "1e-04": None, "9.486e-05": None}  # the last: the paper's J_T


class _StoppingChild:
    """A stand-in for the training process: `wait` answers with the scripted outcomes in turn."""

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), []

    def send_signal(self, sig):
        self.calls.append(("signal", sig))

    def wait(self, timeout=None):
        self.calls.append(("wait", timeout))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def terminate(self):
        self.calls.append(("terminate", None))


def test_a_second_signal_while_a_run_stops_keeps_waiting_for_it(capsys):
    """`uv run` forwards the SIGTERM `kill` sent to the campaign to the run as well: the campaign's
    wait is interrupted once more, and it must go on waiting (no terminate, no exception) so the
    run ends on its own and is summarised."""
    import signal

    runner = task
    job = task.Job(campaign=None, entry="base", seed=1, cwd=".")
    child = _StoppingChild(KeyboardInterrupt(), 0)
    try:
        runner._stop(job, child)
    except KeyboardInterrupt:  # caught here: pytest would take it for the user's Ctrl-C
        pytest.fail("the second signal aborted the wait for the stopping run")
    assert child.calls[0] == ("signal", signal.SIGINT)
    assert [c[0] for c in child.calls] == ["signal", "wait", "wait"]
    assert 0 < child.calls[2][1] <= runner.STOP_GRACE_S  # the same grace period, not a fresh one

    assert "terminating" not in capsys.readouterr().out

    slow = _StoppingChild(subprocess.TimeoutExpired("jaxrl-train", runner.STOP_GRACE_S), 0)
    runner._stop(job, slow)  # past the grace period: terminated (and said), then reaped
    assert [c[0] for c in slow.calls] == ["signal", "wait", "terminate", "wait"]
    assert (f"campaign: base seed 1: the run did not stop within {runner.STOP_GRACE_S:.0f} s of "
            f"SIGINT; terminating it") in capsys.readouterr().out


def test_the_median_aim_is_judged_on_eight_seeds_and_a_never_counts_as_never():
    from quantgate_analysis.page import _aims

    def run(seed, jt, minutes):
        hit = None if minutes is None else {"steps": 10**6, "wall_s": 60.0 * minutes}
        return {"seed": seed, "best": {"JT_repropagated": jt}, "thresholds": {"1e-04": hit},
                "init_from": None}

    jts = [5e-5, 6e-5, 7e-5, 8e-5, 9e-5, 1.1e-4, 1.2e-4, 1.3e-4]  # median 8.5e-5
    summaries = {
        # times 10-31 min and two nevers: the median seed's time is (28 + 29) / 2 = 28.5 min
        "c/good": [run(i, jt, m) for i, (jt, m) in
                   enumerate(zip(jts, [10, 20, 25, 28, 29, 31, None, None]))],
        # four seeds never reach 1e-4: the median of the eight times is never, not the others'
        "c/slow": [run(i, jt, m) for i, (jt, m) in
                   enumerate(zip(jts, [1, 2, 3, 4, None, None, None, None]))],
        "c/few": [run(1, 1e-5, 1), run(2, 2e-5, 2)],
    }
    rows = [line for line in _aims(summaries, rel=lambda p: p) if line.startswith("| median")]
    assert len(rows) == 3
    good, slow, few = rows
    assert "c/good | met / met: 8 of 8 seeds" in good and "median 8.50e-05" in good
    assert "reached by 6 of 8" in good and "28.5 min" in good
    assert "c/slow | met / not yet:" in slow and slow.endswith("wall time to it never |")
    assert "not judged" in few and "c/few (2)" in few and "c/good" not in few


def test_summarize_rewrites_only_the_entries_and_seeds_it_is_given(campaign_dir, capsys):
    from jaxrl_agents.campaign.cli import main

    root, _, _ = campaign_dir
    stamps = {p: p.stat().st_mtime_ns for p in (root / "summaries").rglob("*.json")}
    assert main(["summarize", "mini.toml", "--entry", "ft", "--seed", "1"]) == 0
    changed = {p.relative_to(root).as_posix() for p, t in stamps.items() if p.stat().st_mtime_ns != t}
    assert changed == {"summaries/ft/s1.json"}
    after = {p: p.stat().st_mtime_ns for p in stamps}
    assert main(["summarize", "mini.toml", "--entry", "ft", "--seed", "2"]) == 0  # not its seed
    assert {p: p.stat().st_mtime_ns for p in stamps} == after
    capsys.readouterr()
    assert main(["summarize", "mini.toml", "--entry", "nope"]) == 2
    assert "expected one of ['base', 'ft'], got 'nope'" in capsys.readouterr().err


def test_the_frontier_keeps_a_shorter_gate_at_every_longer_time():
    from quantgate_analysis.frontier import best_frontier

    def run(rl, grape):
        return {"frontier": {"gate_time_ns": [8.0, 10.0, 12.0], "rl_JT": rl, "grape_JT": grape}}

    summaries = {"a": [run([1e-2, 1e-3, 1e-3], [1e-4, 1e-9, 3e-6])],
                 "b": [run([5e-2, 5e-4, 2e-4], [None, 4e-6, 2e-6])]}
    front = best_frontier(summaries)
    assert front["t"] == [8.0, 10.0, 12.0]
    assert front["rl"] == [1e-2, 5e-4, 2e-4]  # the best run at each time
    assert front["grape"] == [1e-4, 1e-9, 1e-9]  # 12 ns keeps a's 10 ns gate, not 2e-6
