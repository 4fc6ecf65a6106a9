"""IPPO / IPPO-Lagrangian learning on the constrained toy task, on both paths (`IPPO.train` on a
Python-stepped ParallelEnv, and the trainer compiling a functional core), and the compiled path's
bookkeeping as the trainer writes it.

The task (marl_toy_envs.RiskyCore): each of 2 agents picks safe (reward 0, cost 0) or risky (team
reward +1/2, own cost 1) at each of 8 steps. Plain IPPO learns to be risky (expected episodic cost
near 8); IPPO-Lagrangian with cost_limit 2 must bring it down to the limit. The expected episodic
cost of a policy is computed exactly from its action probabilities, sum_t pi(risky | obs_t).
"""

import math
import os

import numpy as np
import pytest

from jaxrl_agents.ippo import IPPO, MARLPolicy
from jaxrl_agents.ippo import IPPO_Lagrangian
from jaxrl_agents.run import trainer
from jaxrl_agents.run.run_files import read_progress

from .marl_toy_envs import RiskyCore, RiskyEnv, risky_expected_cost

HORIZON = 8
LIMIT = 2.0
UPDATES = 30
BASE = {"n_steps": 64, "hidden": (16,), "lr": 3e-3, "n_minibatches": 2}
LAG = {"cost_limit": LIMIT, "lagrangian_lr": 0.2}
# The compiled path collects the same 64 transitions per update from 4 environments.
COMPILED = {"n_steps": 16, "n_envs": 4}


def _cfg(cls, compiled):
    cfg = dict(BASE, **(LAG if cls is IPPO_Lagrangian else {}))
    return dict(cfg, **COMPILED) if compiled else cfg


def _expected_cost(policies) -> dict:
    obs = risky_expected_cost(HORIZON)
    return {a: float(p.action_probs(obs)[:, 1].sum()) for a, p in policies.items()}


def _compiled(cls, cfg, env, total_steps, seeds, out):
    """The trainer's run of `cls` on the functional core `env`: per seed, (last policies, rows)."""
    algo = "ippo_lagrangian" if cls is IPPO_Lagrangian else "ippo"
    res = trainer.train(algo, env, None, {**cfg, "total_steps": total_steps}, seeds=seeds,
                        eval_every=10**9, out=str(out), progress="off")
    return [({a: MARLPolicy.load(os.path.join(d, "last_policy", a)) for a in env.agents},
             read_progress(os.path.join(d, "progress.csv"))) for d in res.run_dirs]


def _policies(cls, compiled, seeds, out):
    """Per seed, the trained agents' policies after 64 * UPDATES environment steps."""
    if compiled:  # the seeds trained together, vmapped in one program
        runs = _compiled(cls, _cfg(cls, True), RiskyCore(HORIZON), 64 * UPDATES, seeds, out)
        return [policies for policies, _ in runs]
    return [cls(_cfg(cls, False), seed=s).train(RiskyEnv(HORIZON), 64 * UPDATES).policies
            for s in seeds]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Expected episodic cost per agent: {(algo, path): [per-seed mean over agents]}."""
    out = {}
    for cls in (IPPO, IPPO_Lagrangian):
        for compiled, seeds in ((False, (0, 1)), (True, (0, 1, 2, 3))):
            policies = _policies(cls, compiled, seeds, tmp_path_factory.mktemp("runs"))
            out[(cls.__name__, compiled)] = [np.mean(list(_expected_cost(p).values()))
                                             for p in policies]
    return out


@pytest.mark.slow  # the `runs` fixture trains 12 seeds: about a minute of a shared 2-core run
def test_ippo_lagrangian_keeps_cost_near_limit_where_ippo_does_not(runs):
    for compiled in (False, True):
        ippo = np.mean(runs[("IPPO", compiled)])
        lag = np.mean(runs[("IPPO_Lagrangian", compiled)])
        assert ippo > 6.0, (compiled, runs)  # unconstrained: mostly risky
        assert lag < LIMIT + 1.0, (compiled, runs)  # constrained: at the budget (dual ascent
        # oscillates around it; it was 2.7 +- 0.3 over seeds when written)
        assert lag > 0.5, (compiled, runs)  # and not simply "never risky": reward still counts


@pytest.mark.slow  # needs the `runs` fixture (12 seeds)
def test_python_and_compiled_paths_agree_in_expectation(runs):
    """Same losses, same dual update: seed-averaged outcomes of the two paths agree."""
    for algo in ("IPPO", "IPPO_Lagrangian"):
        py, jit = np.mean(runs[(algo, False)]), np.mean(runs[(algo, True)])
        spread = np.std(runs[(algo, False)] + runs[(algo, True)])
        assert abs(py - jit) < max(1.0, 3 * spread), (algo, runs)


def test_compiled_dual_lifecycle(tmp_path):
    """Episodes of 8 steps, updates of 5 steps in 4 envs: no episode completes in the first update
    (lambda stays at lagrangian_init), all 4 envs complete one in the second."""
    cfg = {**BASE, **LAG, "n_steps": 5, "n_envs": 4, "lagrangian_init": 0.3}
    ((_, rows),) = _compiled(IPPO_Lagrangian, cfg, RiskyCore(HORIZON), 20 * 3 + 7, (0,), tmp_path)
    assert [int(r["step"]) for r in rows] == [20, 40, 60]  # rounded down to whole updates
    col = {k: [float(r[f"a0/{k}"]) for r in rows] for k in
           ("completed_episodes", "dual_update_applied", "lagrange_multiplier_used",
            "cost_return_budget")}
    assert col["completed_episodes"] == [0, 4, 0]
    assert col["dual_update_applied"] == [0, 1, 0]
    assert col["lagrange_multiplier_used"][0] == pytest.approx(0.3)
    assert math.isnan(col["cost_return_budget"][0])
    budget = col["cost_return_budget"][1]
    assert 0.0 <= budget <= HORIZON
    expected = min(max(0.3 + 0.2 * (budget - LIMIT), 0.0), 100.0)
    assert col["lagrange_multiplier_used"][1] == pytest.approx(expected, rel=1e-5)
    assert col["lagrange_multiplier_used"][2] == col["lagrange_multiplier_used"][1]


def test_compiled_budget_below_one_update_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="total_steps"):
        _compiled(IPPO, {**BASE, **COMPILED}, RiskyCore(HORIZON), 63, (0,), tmp_path)


@pytest.mark.parametrize("compiled", [False, True])
def test_masks_hold_on_both_paths(compiled, tmp_path):
    """Agent a1's mask always forbids "risky" (from the core's action_masks at reset and the info
    after every step): it never pays a cost, while a0 explores both actions."""
    if compiled:
        ((policies, rows),) = _compiled(IPPO, {**BASE, **COMPILED},
                                        RiskyCore(HORIZON, forbid_risky=("a1",)), 64 * 2, (0,),
                                        tmp_path)
    else:
        res = IPPO(BASE, seed=0).train(RiskyEnv(HORIZON, forbid_risky=("a1",)), 64 * 2)
        policies, rows = res.policies, [{f"{a}/{k}": v for a, st in h["agents"].items()
                                         for k, v in st.items()} for h in res.history]
    for r in rows:
        assert float(r["a1/mean_reward"]) == float(r["a0/mean_reward"])  # team reward
        assert float(r["a1/entropy"]) == pytest.approx(0.0, abs=1e-6)
        assert float(r["a1/mean_cost"]) == 0.0
        assert float(r["a0/mean_cost"]) > 0.0
    probs = policies["a1"].action_probs(np.zeros(1, np.float32), np.array([True, False]))
    np.testing.assert_array_equal(probs, [1.0, 0.0])
