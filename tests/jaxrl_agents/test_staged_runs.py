"""Staged runs (``jaxrl-train --preset gate``'s machinery) on the toy env, with tiny budgets.

What is checked: a stage ends early below its threshold; a failed early test sets the attempt
aside and restarts the stage with the next attempt seed; a later stage starts from the previous
stage's best policy with the std it names; the timeline puts every attempt end to end; an
interruption in the middle of any stage, or between a decision and its record, resumes to the
uninterrupted run bit for bit; the same seed twice gives the same run; bad recipes and flags are
refused before anything trains; a resume under another small-loop threshold is refused unless the
staged run is finished.
"""

import json
import os
import shutil

import numpy as np
import pytest
from jaxrl_agents.common.fileio import json_ready, load_npz
from jaxrl_agents.common.policy import load_policy
from jaxrl_agents.run.algorithms import make_config
from jaxrl_agents.run.run_files import read_progress, read_run_config
from jaxrl_agents.stages import recipes as recipes_module
from jaxrl_agents.stages.recipe import Recipe, RestartRule, Stage, attempt_seed
from jaxrl_agents.stages.staged_run import STAGED_RUN_JSON, StagedRun, stage_spec
from jaxrl_agents.stages.summary import staged_summary_block
from jaxrl_agents.stages.timeline import crossings, timeline

from .conftest import PPO_CFG, TOY_ENV, TRPO_CFG

PPO = {k: v for k, v in PPO_CFG.items() if k != "total_steps"}
TRPO = {**{k: v for k, v in TRPO_CFG.items() if k != "total_steps"}, "activation": "tanh"}
ROLLOUT = 16 * 32  # PPO_CFG's steps per update
TRPO_ROLLOUT = 8 * 64


def _recipe(explore_below=1e-12, refine_below=100.0, attempts=2):
    """Explore (PPO, an early test after 2 updates that attempt 1 fails whenever explore_below is
    tiny), refine (PPO from explore's best, std e^-2, ends below refine_below), polish (TRPO)."""
    return Recipe("tiny", "a test recipe", {}, (
        Stage("explore", "ppo", PPO, ROLLOUT * 6,
              restart=RestartRule(explore_below, 2 * ROLLOUT, attempts)),
        Stage("refine", "ppo", PPO, ROLLOUT * 5, until_below=refine_below, log_std=-2.0),
        Stage("polish", "trpo", TRPO, TRPO_ROLLOUT * 4)),
        thresholds=(1.0, 1e-2), reference=(5e-3, "a bar"))


def _open(recipe, out, seed=5, **kw):
    return StagedRun.open(recipe, seed, TOY_ENV, {}, str(out), progress="off",
                          echo=lambda line: None, checkpoint_every=2, **kw)


def _record(top):
    with open(os.path.join(top, STAGED_RUN_JSON)) as f:
        return json.load(f)


def _fingerprint(top):
    """Everything a staged run computed, without wall times and directory time stamps."""
    rec = _record(top)
    out = {"attempts": [{k: v for k, v in a.items() if k not in ("wall", "dir")}
                        for a in rec["attempts"]], "finished": rec["finished"],
           "best_attempt": rec["best_attempt"]}
    for a in rec["attempts"]:
        d = os.path.join(top, a["dir"])
        rows = [{k: v for k, v in r.items() if k != "wall"}
                for r in read_progress(os.path.join(d, "progress.csv"))]
        evals = load_npz(os.path.join(d, "evals.npz"))
        out[a["dir"].split("_", 2)[2]] = (rows, {k: evals[k].tolist() for k in sorted(evals)})
    best = load_policy(os.path.join(top, "best_policy"))
    import jax

    out["best_policy"] = [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(best.params)]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted staged run of `_recipe()` (seed 5), shared by the tests below."""
    out = tmp_path_factory.mktemp("reference")
    with _open(_recipe(), out) as run:
        result = run.advance()
    return result


def test_attempts_stages_and_their_records(reference):
    top = reference.top
    rec = _record(top)
    att = rec["attempts"]
    assert reference.finished and rec["finished"]
    # Attempt 1 fails the early test (nothing is below 1e-12) after exactly 2 updates; attempt 2
    # is the last allowed, so it is kept and trains the stage's whole budget.
    assert [(a["stage"], a["attempt"], a["seed"], a["end"]) for a in att] == [
        (0, 1, 5, "test_failed"), (0, 2, attempt_seed(5, 2), "budget"),
        (1, 1, 5, "below"), (2, 1, 5, "budget")]
    assert attempt_seed(5, 2) == 1005
    assert att[0]["steps"] == 2 * ROLLOUT and att[1]["steps"] == 6 * ROLLOUT
    # refine ends after its first update: every score is below 100.
    assert att[2]["steps"] == ROLLOUT and att[3]["steps"] == 4 * TRPO_ROLLOUT
    for a in att:  # each attempt is an ordinary run directory, its rows ending where it ended
        rows = read_progress(os.path.join(top, a["dir"], "progress.csv"))
        assert int(rows[-1]["step"]) == a["steps"]
        assert min(float(r["eval_JT_min"]) for r in rows) == pytest.approx(a["best"], rel=0, abs=0)
    # Later stages start from the previous stage's kept attempt (never the set-aside one).
    refine = read_run_config(os.path.join(top, att[2]["dir"], "config.json"))
    polish = read_run_config(os.path.join(top, att[3]["dir"], "config.json"))
    assert refine["init_from"]["path"] == os.path.abspath(os.path.join(top, att[1]["dir"]))
    assert polish["init_from"]["path"] == os.path.abspath(os.path.join(top, att[2]["dir"]))
    # The std schedule: refine replaces the inherited std, polish keeps refine's learned one.
    assert refine["algo_config"]["log_std_init"] == -2.0
    assert polish["algo_config"]["log_std_init"] == 0.0
    # stage_spec (what bench/stage_from.py opens a lever run with) rebuilds each stage's recorded
    # config; `changes` moves only the field it names.
    for index, a in ((1, att[2]), (2, att[3])):
        recorded = read_run_config(os.path.join(top, a["dir"], "config.json"))
        spec = stage_spec(_recipe(), index, seeds=(5,), env=TOY_ENV, env_options={}, out="o",
                          tag="t", checkpoint_every=2, init_from=recorded["init_from"]["path"])
        assert json_ready(make_config(spec.algo, spec.config).to_dict()) == recorded["algo_config"]
        assert (spec.eval_every, spec.preset, spec.init_from) == (
            1, "tiny", recorded["init_from"]["path"])
    changed = stage_spec(_recipe(), 2, seeds=(5,), env=TOY_ENV, env_options={}, out="o", tag="t",
                         checkpoint_every=2, init_from=None, changes={"target_kl": 0.03})
    assert {k for k in changed.config if changed.config[k] != polish["algo_config"][k]} == {
        "target_kl"}


def test_a_stage_starts_with_the_std_it_names(reference):
    """refine's first policy has log std within one update's Adam steps of -2 (not inherited)."""
    att = _record(reference.top)["attempts"]
    src = load_policy(os.path.join(reference.top, att[1]["dir"]), "last").params["actor"]
    first = load_policy(os.path.join(reference.top, att[2]["dir"]), "last").params["actor"]
    # One PPO update is n_epochs * n_minibatches Adam steps, each moving a parameter by <= lr
    # (Adam's normalised step, up to its epsilon): the bound on how far log_std can move.
    bound = PPO["n_epochs"] * PPO["n_minibatches"] * PPO["lr"] * 1.01
    assert np.all(np.abs(np.asarray(first["log_std"]) + 2.0) <= bound)
    assert np.all(np.abs(np.asarray(src["log_std"]) + 2.0) > bound)  # so the check can fail


def test_timeline_puts_attempts_end_to_end(reference):
    rec = _record(reference.top)
    rows = timeline(reference.top, rec["attempts"])
    steps = [r.step for r in rows]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert rows[-1].step == sum(a["steps"] for a in rec["attempts"]) == reference.steps
    # The polish's first row comes after explore's two attempts and refine's one update.
    first_polish = next(r for r in rows if r.attempt == 3)
    assert first_polish.step == 2 * ROLLOUT + 6 * ROLLOUT + ROLLOUT + TRPO_ROLLOUT
    walls = [r.wall for r in rows]
    assert walls == sorted(walls)
    # A crossing is the first evaluation below the threshold, hand-checked on the rows.
    got = crossings(rows, (1.0, 1e-2, 1e-9))
    for t in (1.0, 1e-2):
        first = next((r for r in rows if r.score < t), None)
        assert got[t] == (None if first is None else (first.step, first.wall))
    assert got[1e-9] is None
    assert reference.best == min(r.score for r in rows)


def test_summary_puts_the_best_beside_the_bar(reference):
    text = staged_summary_block(reference, _recipe())
    assert "staged run tiny finished" in text
    assert text.count("set aside") == 1 and "(< 100: next stage)" in text
    verdict = "beaten" if reference.best < 5e-3 else "not yet"
    assert f"bar    a bar: {verdict}" in text
    assert reference.top in text and "further" not in text  # finished: nothing to go on with


def test_same_seed_twice_is_the_same_run(reference, tmp_path):
    with _open(_recipe(), tmp_path) as run:
        again = run.advance()
    assert _fingerprint(again.top) == _fingerprint(reference.top)


def _interrupted(tmp_path, stops):
    """The staged run of `reference`, killed after each count of updates in `stops` (no final
    writes, as a kill: what the checkpoint cadence has not saved is lost) and resumed."""
    with _open(_recipe(), tmp_path) as run:
        top = run.top
        run.advance(stop_after_updates=stops[0])
    for n in stops[1:]:
        with StagedRun.resume(top, progress="off", echo=lambda line: None) as run:
            run.advance(stop_after_updates=n)
    with StagedRun.resume(top, progress="off", echo=lambda line: None) as run:
        result = run.advance()
    assert result.finished
    return top


def test_interruptions_in_every_stage_resume_bit_identically(reference, tmp_path):
    # 1: inside explore's first attempt (before its test); 3 more: inside attempt 2 (which began
    # at update 2 of the run); 5 more: in polish, after refine's single update.
    top = _interrupted(tmp_path, [1, 3, 5])
    assert _fingerprint(top) == _fingerprint(reference.top)


def test_a_kill_between_a_decision_and_its_record_resumes_the_same(reference, tmp_path):
    """staged_run.json rolled back to before the attempt's end was recorded (a kill -9 there)."""
    with _open(_recipe(), tmp_path) as run:
        top = run.top
        # Update 2 is the early test's: its stop writes a checkpoint, and the kill comes before
        # the failed test is recorded.
        run.advance(stop_after_updates=2)
    before = _record(top)
    assert [a["end"] for a in before["attempts"]] == [None]
    with StagedRun.resume(top, progress="off", echo=lambda line: None) as run:
        run.advance(stop_after_updates=1)  # the test's verdict recorded; attempt 2 trains one
    rec = _record(top)
    assert [a["end"] for a in rec["attempts"]] == ["test_failed", None]
    # Roll back: attempt 1 running, attempt 2 never opened (its directory removed as a kill before
    # staged_run.json named it would leave it unnamed; a resume never looks at unnamed ones).
    shutil.rmtree(os.path.join(top, rec["attempts"][1]["dir"]))
    with open(os.path.join(top, STAGED_RUN_JSON), "w") as f:
        json.dump(before, f)
    with StagedRun.resume(top, progress="off", echo=lambda line: None) as run:
        assert run.advance().finished
    assert _fingerprint(top) == _fingerprint(reference.top)


def test_a_staged_run_is_locked_while_in_use(tmp_path):
    from jaxrl_agents.common.fileio import DirectoryLockedError

    with _open(_recipe(), tmp_path) as run:
        with pytest.raises(DirectoryLockedError):
            StagedRun.resume(run.top, progress="off")


@pytest.mark.parametrize("make, match", [
    (lambda: Stage("explore", "ippo", PPO, 10), "algo: expected 'ppo' or 'trpo'"),
    (lambda: Stage("explore", "ppo", {**PPO, "total_steps": 5}, 10), "without total_steps"),
    (lambda: Stage("explore", "ppo", PPO, 0), "steps: expected a positive integer"),
    (lambda: Stage("a b", "ppo", PPO, 10), "name: expected letters"),
    (lambda: RestartRule(float("nan"), 10, 2), "below: expected a positive finite"),
    (lambda: RestartRule(1e-2, 10, 0), "attempts: expected a positive integer"),
    (lambda: Recipe("r", "", {}, ()), "stages: expected one Stage or more"),
    (lambda: Recipe("r", "", {}, (Stage("a", "ppo", PPO, 1, log_std=-2.0),)),
     "the first stage inherits none"),
])
def test_bad_recipes_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_stages_with_different_networks_are_refused_before_anything_trains(tmp_path):
    bad = Recipe("bad", "", {}, (Stage("a", "ppo", PPO, ROLLOUT),
                                 Stage("b", "trpo", {**TRPO, "activation": "relu"}, ROLLOUT)))
    with pytest.raises(ValueError, match="stage 'b'.*activation: 'tanh' in 'a', 'relu' here"):
        _open(bad, tmp_path)
    assert not os.listdir(tmp_path)  # no directory was made


def test_recipes_round_trip_through_json():
    from jaxrl_agents.run.algorithms import make_config

    for r in [_recipe(), *recipes_module.RECIPES.values()]:
        back = Recipe.from_dict(json.loads(json.dumps(r.to_dict())))
        assert back.to_dict() == json.loads(json.dumps(r.to_dict()))
        # JSON turns tuples into lists; the configs the stages train with are the same.
        assert [make_config(s.algo, s.algo_config()) for s in back.stages] == \
            [make_config(s.algo, s.algo_config()) for s in r.stages]
        assert back.reference == r.reference and back.thresholds == r.thresholds
    # Records written by the first version held a "goes_further" key: they still load (the runs
    # they describe keep resuming).
    old = {**recipes_module.GATE.to_dict(), "goes_further": ""}
    assert Recipe.from_dict(old).to_dict() == recipes_module.GATE.to_dict()


def test_cli_runs_resumes_and_refuses_a_recipe(tmp_path, monkeypatch, capsys):
    from jaxrl_agents.console.cli import main

    monkeypatch.setitem(recipes_module.RECIPES, "tiny", _recipe())
    argv = ["--preset", "tiny", "--env", TOY_ENV, "--seed", "5", "--out", str(tmp_path),
            "--progress", "off"]
    assert main([*argv, "--lr", "1e-3"]) == 2
    err = capsys.readouterr().err
    assert "a staged preset sets every stage's algorithm and config" in err and "--lr" in err
    assert main(argv) == 0
    out = capsys.readouterr().out
    (top,) = [os.path.join(tmp_path, d) for d in os.listdir(tmp_path)]
    assert "staged run tiny finished" in out and top in out
    assert _fingerprint(top)["attempts"] == _fingerprint_attempts_of(_recipe, tmp_path)
    assert main(["--resume", top, "--seed", "3"]) == 2
    assert "drop ['--seed']" in capsys.readouterr().err
    assert main(["--resume", top, "--progress", "off"]) == 0  # finished: nothing to train
    assert "staged run tiny finished" in capsys.readouterr().out


def _fingerprint_attempts_of(make_recipe, tmp_path):
    with _open(make_recipe(), tmp_path / "api") as run:
        return _fingerprint(run.advance().top)["attempts"]


def test_a_resume_under_another_small_loop_threshold_is_refused_unless_finished(reference, tmp_path):
    """A staged run's stages compile their loops under the threshold staged_run.json records
    (`run.host.small_loops`): an unfinished one is refused in a process whose JAX backend started
    under another, before anything trains; a finished one compiles nothing and opens anywhere."""
    from jaxrl_agents.run.host.small_loops import DEFAULT_BYTES, RECORD_KEY, in_effect

    other = DEFAULT_BYTES if in_effect() != DEFAULT_BYTES else DEFAULT_BYTES // 2

    def record_other(top):
        path, record = os.path.join(top, STAGED_RUN_JSON), _record(top)
        with open(path, "w") as f:
            json.dump({**record, RECORD_KEY: other}, f)
        return path

    with _open(_recipe(), tmp_path / "part") as run:
        top = run.top
        run.advance(stop_after_updates=1)
    path = record_other(top)

    def files():
        return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
                for d, _, names in os.walk(top) for f in names}

    before = files()
    with pytest.raises(ValueError, match=f"{path}: {RECORD_KEY}: the run compiled its loops under "
                                         f"{other} bytes"):
        StagedRun.resume(top, progress="off")
    assert files() == before  # nothing trained, nothing written

    done = str(tmp_path / "done")
    shutil.copytree(reference.top, done)
    record_other(done)
    with StagedRun.resume(done, progress="off", echo=lambda line: None) as run:
        assert run.advance().finished
    assert _fingerprint(done) == _fingerprint(reference.top)
