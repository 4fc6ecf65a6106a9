"""A campaign entry whose preset is a staged recipe (``jaxrl-train --preset gate``), in miniature.

A tiny recipe on 6 ns episodes (an explore stage whose first attempt always fails its early test,
then a TRPO polish) runs as a campaign entry: interrupted, summarised, resumed by the runner with
``jaxrl-train --resume`` on the staged run, summarised again; the summary's steps, wall-clock,
thresholds, attempts and pulses are checked against what the staged run's own records and
timeline (`jaxrl_agents.stages.timeline`) say, and the page and the claims check pick it up.
"""

import json
import os
import pathlib
import shutil
import sys

import numpy as np
import pytest
from jaxrl_agents.campaign import driver, task
from jaxrl_agents.campaign.executors import InlineTasks
from jaxrl_agents.campaign.spec import load_campaign
from jaxrl_agents.run.run_files import read_progress
from jaxrl_agents.stages import recipes as recipes_module
from jaxrl_agents.stages.recipe import Recipe, RestartRule, Stage
from jaxrl_agents.stages.staged_run import StagedRun, read_staged_run
from jaxrl_agents.stages.timeline import crossings, score_of, timeline
from quantgate_analysis import frontier as frontier_module
from quantgate_analysis.campaign import summarise
from quantgate_analysis.page import write_page
from quantgate_analysis.paper import PAPER_JT
from quantgate_analysis.summary import summarize_staged
from quantgate_analysis.thresholds import THRESHOLDS, threshold_key
from quantgate_env import load_pulse_csv, rollout_pulse

ROOT = pathlib.Path(__file__).resolve().parents[2]

NET = {"n_envs": 4, "n_steps": 128, "hidden": [16, 16]}
ROLLOUT = 4 * 128
# Explore: attempt 1 must reach J_T < 1e-12 within one update (no 6 ns policy can), so it is set
# aside and attempt 2 (seed + 1000), the last allowed, trains the stage, each attempt a population
# of two members (as the gate recipe's); polish: TRPO from the best member's best policy.
TINY = Recipe("tiny", "a test recipe", {"T": 6.0, "pulse_length": 120}, (
    Stage("explore", "ppo", {**NET, "n_epochs": 1, "n_minibatches": 4}, 3 * ROLLOUT,
          restart=RestartRule(1e-12, ROLLOUT, 2), population=2),
    Stage("polish", "trpo", {**NET, "batch_size": 128, "n_critic_updates": 2,
                             "activation": "tanh"}, 2 * ROLLOUT)),
    thresholds=(1e-2,), reference=(PAPER_JT, "the paper's gate"))
# jaxrl-train in its own process, with the tiny recipe registered as `tiny` (the campaign's
# `command`: what its tasks run in place of `task.train_command`).
TRAIN_WITH_TINY = (sys.executable, "-c", "import json, sys\n"
                   "from jaxrl_agents.stages import recipes\n"
                   "from jaxrl_agents.stages.recipe import Recipe\n"
                   f"recipes.RECIPES['tiny'] = Recipe.from_dict(json.loads({json.dumps(TINY.to_dict())!r}))\n"
                   "from jaxrl_agents.console.cli import main\n"
                   "sys.exit(main())\n")


def run_campaign(campaign, **kwargs):
    """The driver with its tasks run in this process, training with the tiny recipe registered."""
    return driver.run_campaign(campaign, tasks=InlineTasks(), command=TRAIN_WITH_TINY, **kwargs)


CAMPAIGN = """
name = "mini"
runs = "runs"
summaries = "campaigns/mini"
seeds = [1]
summariser = "quantgate_analysis.campaign:summarise"
frontier_ns = [3, 5]

[[entry]]
name = "gate"
description = "the tiny staged recipe, domain-randomised"
preset = "tiny"
env_options = { qubit_drift_mhz = "recool" }
robustness = true
"""
# Two float64 propagations of the same <= 120 samples by the same series: they agree far below this.
REPROPAGATION_ATOL = 1e-11
# The summary's GRAPE column checks the frontier's plumbing here; test_grape checks GRAPE itself.
GRAPE_ITERATIONS = 10


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """The mini campaign after an interrupted session (summarised) and a `run` that finishes it."""
    root = tmp_path_factory.mktemp("staged")
    old = os.getcwd()
    os.chdir(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(recipes_module.RECIPES, "tiny", TINY)
        mp.setattr(frontier_module, "GRAPE_ITERATIONS", GRAPE_ITERATIONS)
        try:
            (root / "mini.toml").write_text(CAMPAIGN)
            campaign = load_campaign("mini.toml")
            (entry,) = campaign.entries
            # A session that ended mid-run: the explore stage's second attempt trained one update
            # of its three (checkpointed), then the process died.
            parent = campaign.run_parent(entry, 1)
            with StagedRun.open(TINY, 1, "quantgate_env:make", entry.env_options, parent,
                                checkpoint_every=1, progress="off", echo=lambda line: None,
                                argv=["jaxrl-train", *entry.train_args(1, parent, None)]) as run:
                top = run.top
                run.advance(stop_after_updates=2)
            summarise(campaign, entry, 1, top, "v-first")
            interrupted = json.loads((root / "campaigns/mini/gate/s1.json").read_text())
            assert run_campaign(campaign, code_version="v-test", progress="off") == 0
            yield root, campaign, top, interrupted
        finally:
            os.chdir(old)


def _summary(root):
    return json.loads((root / "campaigns/mini/gate/s1.json").read_text())


def _timeline(top):
    record = read_staged_run(top)
    return record, timeline(top, record["attempts"], *score_of(top, record["attempts"]))


def test_the_interrupted_staged_run_was_summarised_as_such(staged):
    """A staged run stopped mid-stage is summarised "interrupted", with the attempts so far."""
    _, _, top, s = staged
    assert s["status"] == "interrupted" and s["run"] == os.path.basename(top)
    assert [(a["stage_name"], a["attempt"], a["seed"], a["end"]) for a in s["attempts"]] == [
        ("explore", 1, 1, "test_failed"), ("explore", 2, 1001, None)]
    assert [a["steps"] for a in s["attempts"]] == [ROLLOUT, ROLLOUT]
    assert s["steps_done"] == 2 * ROLLOUT and s["code_versions"] == ["v-first"]


def test_the_runner_resumed_the_staged_run_in_place(staged):
    """`run` continued the staged run found in the seed's folder (``--resume``), not a new one."""
    root, campaign, top, _ = staged
    parent = campaign.run_parent(campaign.entries[0], 1)
    # resumed, not started again (.lock: the campaign task's hold on the seed's folder)
    assert sorted(os.listdir(parent)) == [".lock", os.path.basename(top)]
    record, _ = _timeline(top)
    assert record["finished"]
    s = _summary(root)
    assert s["status"] == "finished" and s["run"] == os.path.basename(top)
    # the same run: the versions of both sessions that advanced it
    assert s["code_versions"] == ["v-first", "v-test"]
    # the entry's env options over the recipe's
    assert s["env_options"] == {"T": 6.0, "pulse_length": 120, "qubit_drift_mhz": "recool"}


def test_the_summary_counts_every_attempt_end_to_end(staged):
    """Attempts, steps, wall-clock and curve are the staged run's records, set-aside attempt included."""
    root, _, top, _ = staged
    s = _summary(root)
    record, rows = _timeline(top)
    assert [(a["stage"], a["attempt"], a["seed"], a["end"]) for a in s["attempts"]] == \
        [(a["stage"], a["attempt"], a["seed"], a["end"]) for a in record["attempts"]]
    assert [a["end"] for a in s["attempts"]] == ["test_failed", "budget", "budget"]
    for a, kept in zip(s["attempts"], record["attempts"]):
        progress = read_progress(os.path.join(top, kept["dir"], "progress.csv"))
        assert a["steps"] == int(progress[-1]["step"]) == kept["steps"]
        assert a["best_JT"] == min(float(r["eval_JT_min"]) for r in progress)
    assert s["steps_done"] == rows[-1].step == sum(a["steps"] for a in record["attempts"])
    assert s["wall_s"] == pytest.approx(rows[-1].wall, rel=1e-12)
    assert s["budget"] == TINY.total_steps
    assert s["curve"]["step"][-1] == rows[-1].step
    assert s["curve"]["best_JT"][-1] == min(r.score for r in rows)


def test_the_thresholds_are_the_timeline_s_first_crossings(staged):
    """Steps and wall-clock to a threshold are the first crossing on the staged run's timeline."""
    root, campaign, top, _ = staged
    s = _summary(root)
    record, rows = _timeline(top)
    assert list(s["thresholds"]) == ["1e-02", "1e-03", "1e-04", "9.486e-05"]

    def expected(thresholds):
        return {threshold_key(t): None if hit is None else {"steps": hit[0], "wall_s": hit[1]}
                for t, hit in crossings(rows, thresholds).items()}

    assert s["thresholds"] == expected(THRESHOLDS)
    # The campaign's J_T thresholds are out of reach of a 6 ns toy, so check the crossings of
    # thresholds just above every evaluation's J_T: each is crossed, many in a later attempt.
    above = sorted({r.score * (1 + 1e-9) for r in rows}, reverse=True)
    got = summarize_staged(top, refine=False, robustness=False, gate_times=campaign.frontier_ns,
                           thresholds=above)[0]["thresholds"]
    assert got == expected(above) and all(v is not None for v in got.values())
    first_attempt_steps = record["attempts"][0]["steps"]
    assert any(v["steps"] > first_attempt_steps for v in got.values())


def test_the_best_pulse_is_the_best_evaluation_of_every_attempt(staged):
    """The pulses are the best evaluations over every attempt, and re-propagate to their J_T."""
    root, _, top, _ = staged
    s = _summary(root)
    _, rows = _timeline(top)
    best_row = min(rows, key=lambda r: r.score)  # the first of equals, as the summary's
    best = s["best"]
    assert best["step"] == best_row.step and best["JT"] == best_row.score
    # the attempt that played it, and the step of its own run
    record = read_staged_run(top)
    assert best["run"] == os.path.basename(record["attempts"][best_row.attempt]["dir"])
    assert best["run_step"] == int(best_row.row["step"])
    assert [best_row.attempt, best["run_step"]] == record["best_attempt"]
    for gate in ("best", "short"):
        g = s[gate]
        amps, dt = load_pulse_csv(root / "campaigns/mini/gate" / g["pulse_csv"])
        assert amps.size == g["n_samples"] and dt == pytest.approx(0.05, rel=1e-12)
        jt = rollout_pulse(amps, dt=dt)["JT"][-1]
        assert jt == g["JT_repropagated"] and abs(jt - g["JT"]) <= REPROPAGATION_ATOL
    assert s["evaluations"] == len(rows)  # every update of every attempt is evaluated
    frontier = s["frontier"]
    assert frontier["gate_time_ns"] == [3.0, 5.0] and all(np.isfinite(frontier["grape_JT"]))
    assert frontier["grape_iterations"] == GRAPE_ITERATIONS
    assert frontier["rl_JT"][1] <= frontier["rl_JT"][0]
    assert min(frontier["rl_JT"][1], best["JT"]) == best["JT"]  # no gate beats the best


def test_the_robustness_map_is_of_the_best_attempt_s_kept_policies(staged):
    """Robustness = true maps a kept policy of the attempt that played the best gate."""
    root, _, _, _ = staged
    s = _summary(root)
    rob = s["robustness"]
    assert rob["run"] == s["best"]["run"] and rob["policy"] in ("best", "last")
    assert rob["policy"] == min(("best", "last"), key=lambda w: rob["validation"][w]["worst_JT"])
    jt = np.asarray(rob["jt_at_gate_time"])
    assert rob["n"] == 11 and jt.shape == (121,) and rob["worst_JT"] == jt.max()
    assert s["diagnostics"] and "kl" in s["diagnostics"]  # the last attempt's: TRPO


def test_a_second_run_does_nothing(staged, capsys):
    """A finished, summarised staged run is neither trained nor summarised again."""
    root, campaign, _, _ = staged
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    stamps = {p: p.stat().st_mtime_ns for p in (root / "campaigns").rglob("*")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(task, "_train", lambda *a: pytest.fail("nothing should train"))
        assert run_campaign(campaign, code_version="v-later", progress="off") == 0
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert {p: p.stat().st_mtime_ns for p in (root / "campaigns").rglob("*")} == stamps


def test_a_new_machine_skips_the_committed_staged_summary(staged, tmp_path, capsys):
    """A committed summary without its staged run on this machine is skipped, never replaced."""
    root, _, _, _ = staged
    shutil.copytree(root / "campaigns", tmp_path / "campaigns")
    shutil.copy(root / "mini.toml", tmp_path / "mini.toml")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(recipes_module.RECIPES, "tiny", TINY)
            mp.setattr(task, "_train", lambda *a: pytest.fail("nothing should train"))
            capsys.readouterr()
            assert run_campaign(load_campaign("mini.toml"), progress="off") == 0
    finally:
        os.chdir(old)
    assert "gate seed 1: summarised in" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()


def test_a_new_staged_run_is_launched_with_the_recipe_s_own_options(tmp_path, monkeypatch):
    """No algo, flags or budget: the recipe's preset, the seed, the folder and env options."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(recipes_module.RECIPES, "tiny", TINY)
    (tmp_path / "mini.toml").write_text(CAMPAIGN)
    calls = []
    monkeypatch.setattr(task, "_train", lambda job, args, *rest: (calls.append((args, rest)), (0, None))[1])
    assert run_campaign(load_campaign("mini.toml"), progress="off") == 1  # nothing trained: "failed"
    ((args, rest),) = calls
    assert args == ["--preset", "tiny", "--seed", "1", "--out", os.path.join("runs", "gate", "s1"),
                    "--env-option", 'qubit_drift_mhz="recool"']
    assert rest == ()  # no restart watch of the campaign's: the recipe has its own early test


def test_the_page_shows_the_staged_entry_from_its_summary(staged):
    """The page has the staged entry's seed row, its attempts, its pulse link and its recipe."""
    pytest.importorskip("matplotlib")
    root, campaign, _, _ = staged
    os.rename(root / "runs", root / "runs-gone")  # the page needs no run directory
    try:
        page = pathlib.Path(write_page([campaign], str(root / "page.md"), str(root / "figs")))
    finally:
        os.rename(root / "runs-gone", root / "runs")
    text = page.read_text()
    s = _summary(root)
    (row,) = [line for line in text.splitlines() if line.startswith("| 1 | finished")]
    assert "finished (3 attempts, 1 set aside)" in row
    assert f"[{s['best']['JT_repropagated']:.2e} at" in row and "s1_best.csv" in row
    assert (root / "campaigns/mini/gate/s1_best.csv").is_file()
    assert "to 9.486e-05 (paper): steps / wall" in text
    assert "a staged run of the recipe `tiny` (explore (ppo, up to 0.00M), polish (trpo" in text
    assert "--entry gate`; each run: `jaxrl-train --preset tiny --seed 1 --out runs/gate/s1 " in text


def test_the_claims_check_finds_a_staged_entry_s_pulse(staged):
    """test_campaign_claims.py re-propagates a staged summary's claimed pulse like any other.

    It finds every campaigns/*/*/s*.json whose short gate claims J_T < 1e-4.
    """
    from tests.integration.test_campaign_claims import _claims

    root, _, _, _ = staged
    path = root / "campaigns/mini/gate/s1.json"
    s = json.loads(path.read_text())
    assert not list(_claims(str(root)))  # a 6 ns toy claims nothing
    s["short"]["JT_repropagated"] = 5e-5
    claim = root / "campaigns/mini/gate/s2.json"
    claim.write_text(json.dumps(s))
    try:
        (found,) = _claims(str(root))
    finally:
        claim.unlink()
    csv_path, gate = found.values
    assert csv_path == str(root / "campaigns/mini/gate" / s["short"]["pulse_csv"])
    assert gate["JT_repropagated"] == 5e-5


BAD = """
name = "x"
runs = "r"
summaries = "s"
seeds = [1]
summariser = "m:f"
[[entry]]
name = "g"
preset = "gate"
"""


@pytest.mark.parametrize("extra, key", [
    ('algo = "ppo"', "algo"), ("total_steps = 1000", "total_steps"),
    ("flags = { lr = 1e-4 }", "flags"),
    ("restart = { below = 1e-2, within_steps = 20, attempts = 3 }", "restart"),
])
def test_keys_a_staged_entry_cannot_have_are_refused_naming_the_entry_and_key(tmp_path, extra, key):
    """The recipe sets algorithms, configs, budgets and its early test: those keys are refused."""
    path = tmp_path / "bad.toml"
    path.write_text(BAD + extra + "\n")
    with pytest.raises(ValueError, match=rf"bad.toml: entry 'g': {key}: expected no {key} "
                                         rf"\(preset 'gate' is a staged recipe: .*drop the key\)"):
        load_campaign(str(path))


def test_init_from_on_or_from_a_staged_entry_is_refused(tmp_path):
    """A staged entry neither fine-tunes nor is fine-tuned; an entry of single runs needs an algo."""
    path = tmp_path / "bad.toml"
    source = "[[entry]]\nname = 'src'\nalgo = 'ppo'\npreset = 'fast'\ntotal_steps = 10\n"
    path.write_text(BAD.split("[[entry]]")[0] + source + "[[entry]]\nname = 'g2'\npreset = 'gate'\n"
                    "init_from = 'src'\n")
    with pytest.raises(ValueError, match=r"entry 'g2': init_from: expected no init_from"):
        load_campaign(str(path))
    path.write_text(BAD + "\n[[entry]]\nname = 'ft'\nalgo = 'trpo'\npreset = 'fast'\n"
                    "total_steps = 10\ninit_from = 'g'\n")
    with pytest.raises(ValueError, match=r"entry 'ft': init_from: expected an entry of single runs"):
        load_campaign(str(path))
    path.write_text(BAD.replace('preset = "gate"', 'preset = "fast"'))
    with pytest.raises(ValueError, match=r"entry 'g': algo: expected a string \(or preset: a staged"):
        load_campaign(str(path))


def test_the_replication_campaign_declares_the_gate_entries():
    """campaigns/replication.toml holds the gate entry on 8 seeds and its drift variants on 2.

    ``gate-dr-v2`` holds the drift run of the recipe before the long horizon, as ``gate-v2`` does
    the nominal one: the same command, so the same options.
    """
    campaign = load_campaign(str(ROOT / "campaigns" / "replication.toml"))
    gate = campaign.entry("gate")
    assert gate.staged and gate.preset == "gate" and gate.seeds == tuple(range(101, 109))
    assert not gate.robustness and gate.env_options == {}
    for name in ("gate-dr", "gate-dr-v2"):
        dr = campaign.entry(name)
        assert dr.staged and dr.robustness and dr.seeds == (101, 102), name
        assert dr.env_options == {"qubit_drift_mhz": "recool", "oob_mode": "clip"}, name
    assert gate.train_args(101, "out", None) == ["--preset", "gate", "--seed", "101", "--out", "out"]


@pytest.mark.slow  # two more staged runs, each compiled in its own process
def test_a_deadline_stops_a_staged_run_and_the_next_call_finishes_it_as_one_run(staged, tmp_path,
                                                                               monkeypatch):
    """A deadline stops a staged run; the next call resumes it to the same run as the fixture's.

    The deadline reaches the run as ``jaxrl-train --minutes`` (the time left): it stops at the
    first boundary after it, here with one second left, so before its first update; the fixture's
    run of the same seed was interrupted elsewhere: both end with the same attempts, evaluations
    and best gate. (With 30 s left, as before, the recipe's cached programs let it finish.)
    """
    import time

    root, _, top, _ = staged
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(recipes_module.RECIPES, "tiny", TINY)
    (tmp_path / "mini.toml").write_text(CAMPAIGN)
    campaign = load_campaign("mini.toml")
    assert run_campaign(campaign, deadline=time.time() + 1, code_version="v-1", progress="off") == 3
    assert run_campaign(campaign, code_version="v-2", progress="off") == 0
    again = json.loads((tmp_path / "campaigns/mini/gate/s1.json").read_text())
    first = _summary(root)
    assert again["status"] == "finished" and again["run"] != first["run"]

    def computed(s):
        return ([{k: a[k] for k in ("stage", "attempt", "seed", "end", "steps", "best_JT")}
                 for a in s["attempts"]], s["steps_done"], s["evaluations"], s["curve"]["step"],
                s["curve"]["best_JT"], {k: v for k, v in s["best"].items() if k not in ("pulse_csv", "run")})

    assert computed(again) == computed(first)
