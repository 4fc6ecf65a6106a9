"""A stage's population: K members trained as one seed group, scored by their best member.

Toy env, tiny budgets. Checked: the members' seeds and directories; the attempt's best, its early
test and its stage's end read the best member; the next stage starts from that member's best
policy; the timeline scores each update by its best member; an interruption inside a population
resumes to the uninterrupted run bit for bit; recipes with populations round-trip and old ones
read unchanged.
"""

import json
import math
import os
import types

import numpy as np
import pytest

from jaxrl_agents.common.fileio import load_npz
from jaxrl_agents.run.run_files import read_progress, read_run_config
from jaxrl_agents.stages.recipe import Recipe, RestartRule, Stage, member_seed
from jaxrl_agents.stages.staged_run import STAGED_RUN_JSON, StagedRun, _decision, _stop_rule
from jaxrl_agents.stages.timeline import timeline

from .conftest import PPO_CFG, TOY_ENV, TRPO_CFG

PPO = {k: v for k, v in PPO_CFG.items() if k != "total_steps"}
TRPO = {**{k: v for k, v in TRPO_CFG.items() if k != "total_steps"}, "activation": "tanh"}
ROLLOUT = 16 * 32
TRPO_ROLLOUT = 8 * 64


def _recipe():
    return Recipe("pop", "a test recipe with populations", {}, (
        Stage("explore", "ppo", PPO, ROLLOUT * 4, population=2),
        Stage("polish", "trpo", TRPO, TRPO_ROLLOUT * 3, population=2)),
        thresholds=(1.0, 1e-2))


def _open(out, seed=7):
    return StagedRun.open(_recipe(), seed, TOY_ENV, {}, str(out), progress="off",
                          echo=lambda line: None, checkpoint_every=2)


def _record(top):
    with open(os.path.join(top, STAGED_RUN_JSON)) as f:
        return json.load(f)


def _best_eval(top, member):
    rows = read_progress(os.path.join(top, member, "progress.csv"))
    return min(float(r["eval_JT_min"]) for r in rows), rows


def _fingerprint(top):
    rec = _record(top)
    tail = lambda d: d.split("_", 2)[2]  # noqa: E731 (the name without its time stamp)
    out = {"attempts": [{**{k: v for k, v in a.items() if k != "wall"}, "dir": tail(a["dir"]),
                         "members": [tail(m) for m in a["members"]]} for a in rec["attempts"]],
           "best_attempt": rec["best_attempt"], "finished": rec["finished"]}
    for a in rec["attempts"]:
        for m in a["members"]:
            rows = [{k: v for k, v in r.items() if k != "wall"}
                    for r in read_progress(os.path.join(top, m, "progress.csv"))]
            evals = load_npz(os.path.join(top, m, "evals.npz"))
            out[tail(m)] = (rows, {k: evals[k].tolist() for k in sorted(evals)})
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("pop")
    with _open(out) as run:
        return run.advance()


def test_members_train_together_and_the_attempt_keeps_its_best(reference):
    top = reference.top
    att = _record(top)["attempts"]
    assert [(a["stage"], a["end"]) for a in att] == [(0, "budget"), (1, "budget")]
    for a in att:
        assert len(a["members"]) == 2
        seeds = [read_run_config(os.path.join(top, m, "config.json"))["seed"] for m in a["members"]]
        assert seeds == [7, member_seed(7, 1)] == [7, 100_007]
        bests = [_best_eval(top, m)[0] for m in a["members"]]
        assert a["best"] == min(bests)
        assert a["dir"] == a["members"][int(np.argmin(bests))]  # the best member's directory
        assert all(len(_best_eval(top, m)[1]) == a["steps"] // (ROLLOUT if a["stage"] == 0
                                                                else TRPO_ROLLOUT)
                   for m in a["members"])
    # The polish starts (both members) from explore's best member.
    for m in att[1]["members"]:
        source = read_run_config(os.path.join(top, m, "config.json"))["init_from"]["path"]
        assert source == os.path.abspath(os.path.join(top, att[0]["dir"]))


def test_the_timeline_scores_each_update_by_its_best_member(reference):
    top = reference.top
    att = _record(top)["attempts"]
    rows = timeline(top, att)
    per_member = [[_best_eval(top, m)[1] for m in a["members"]] for a in att]
    expected = [min(float(m[k]["eval_JT_min"]) for m in members)
                for members in per_member for k in range(len(members[0]))]
    assert [r.score for r in rows] == expected
    assert rows[-1].step == sum(a["steps"] for a in att)
    assert reference.best == min(expected)


def test_an_early_test_and_a_stage_end_read_the_best_member():
    stage = Stage("s", "ppo", PPO, ROLLOUT * 10, until_below=1e-3,
                  restart=RestartRule(1e-2, 2 * ROLLOUT, 3), population=2)
    rec = lambda b: types.SimpleNamespace(best=b)  # noqa: E731
    stop = _stop_rule(stage, 1, ROLLOUT)
    assert not stop(2, [rec(0.5), rec(5e-3)])   # member 2 passes the test: go on
    assert stop(2, [rec(0.5), rec(0.2)])        # nobody passes: set aside
    assert stop(5, [rec(0.5), rec(5e-4)])       # member 2 below the stage's end
    session = types.SimpleNamespace(records=[rec(0.3), rec(5e-3)], update=2,
                                    rollout_size=ROLLOUT, finished=False)
    assert _decision(session, stage, 1) is None
    session.records = [rec(0.3), rec(math.inf)]
    assert _decision(session, stage, 1) == "test_failed"


def test_an_interrupted_population_resumes_bit_identically(reference, tmp_path):
    with _open(tmp_path) as run:
        top = run.top
        run.advance(stop_after_updates=3)  # inside explore, past its checkpoint at update 2
    for n in (2,):  # then inside the polish
        with StagedRun.resume(top, progress="off", echo=lambda line: None) as run:
            run.advance(stop_after_updates=n)
    with StagedRun.resume(top, progress="off", echo=lambda line: None) as run:
        assert run.advance().finished
    assert _fingerprint(top) == _fingerprint(reference.top)


def test_population_round_trips_and_old_records_read_unchanged():
    text = json.dumps(_recipe().to_dict())
    back = Recipe.from_dict(json.loads(text))
    assert [s.population for s in back.stages] == [2, 2] and json.dumps(back.to_dict()) == text
    one = Stage("s", "ppo", PPO, 100)
    assert "population" not in one.to_dict()  # as every stage was written before populations
    assert Stage.from_dict(one.to_dict()).population == 1
    with pytest.raises(ValueError, match="stage 's': population: expected a positive integer"):
        Stage("s", "ppo", PPO, 100, population=0)
