"""quantgate_env.mdp.evaluation: the gate summary by hand, its progress line, and what the single- and
multi-line envs record per step (what an agent's evaluation episode keeps)."""

import math

import jax
import numpy as np
import pytest
import quantgate_env as qg
from quantgate_env.mdp.evaluation import GateEvaluation, MultiGateEvaluation


def test_gate_summary_by_hand():
    ep = {"reward": np.array([1.0, 2.0, 3.0, 100.0]),
          "alive": np.array([True, True, True, False]),
          "JT": np.array([0.5, 0.1, 0.2, 0.0]),  # the 0.0 is after the end: ignored
          "t": np.array([0.15, 0.3, 0.45, 0.6]),
          "unitarity": np.array([0.9, 0.99, 0.95, 1.0]),
          "concurrence": np.array([0.5, 1.0, 1.0, 1.0])}
    s = GateEvaluation().summarise(ep)
    assert list(s) == ["JT_min", "t_JT_min", "JT_end", "1mU_at_best", "t_first_PE"]
    assert s["JT_min"] == 0.1 and s["t_JT_min"] == 0.3 and s["JT_end"] == 0.2
    assert s["1mU_at_best"] == pytest.approx(0.01) and s["t_first_PE"] == 0.3
    ep["concurrence"] = np.array([0.5, 0.9, 0.99, 1.0])
    assert math.isnan(GateEvaluation().summarise(ep)["t_first_PE"])
    ep["JT"] = np.full(4, np.nan)
    s = GateEvaluation().summarise(ep)
    assert math.isnan(s["JT_min"]) and math.isnan(s["t_JT_min"])


def test_gate_line_says_in_words_that_no_perfect_entangler_appeared():
    """Before issue 11: ``firstPE=nanns``. A NaN first-PE time is printed as ``firstPE=none yet``."""
    summary = {"JT_min": 0.2, "t_JT_min": 0.4, "1mU_at_best": 1e-3, "t_first_PE": math.nan}
    line = GateEvaluation().format(summary)
    assert line == "minJT=2.000e-01@0.4ns  firstPE=none yet  1-U=1.0e-03"
    assert "firstPE=0.30ns" in GateEvaluation().format({**summary, "t_first_PE": 0.3})


def test_records_of_the_single_and_multi_line_envs():
    with jax.enable_x64(True):
        env = qg.make(pulse_length=30, T=1.5)
        _, state = env.reset(jax.random.PRNGKey(0), env.default_params)
        *_, info = env.step_autoreset(jax.random.PRNGKey(1), state,
                                      np.zeros(env.action_space.shape), env.default_params)
        rec = env.evaluation.record(info)
        assert set(rec) == set(info) - {"final_obs"}  # every per-step field, as before
        assert float(env.evaluation.rollout_stats(info)["min_JT"]) == float(info["JT"])

        multi = qg.make_multi(pulse_length=30, T=1.5)
        assert multi.evaluation == MultiGateEvaluation(multi.agents)
        _, state = multi.reset(jax.random.PRNGKey(0), multi.default_params)
        acts = {a: np.zeros(multi.action_space(a).shape) for a in multi.agents}
        *_, infos = multi.step(jax.random.PRNGKey(1), state, acts, multi.default_params)
        rec = multi.evaluation.record(infos)
        k = env.config.n_time_steps
        assert rec["amps"].shape == (len(multi.agents), k)
        for i, a in enumerate(multi.agents):  # per line, in agent order
            np.testing.assert_array_equal(rec["amps"][i], infos[a]["amps"])
        assert float(rec["JT"]) == float(infos[multi.agents[0]]["JT"])
