"""Run presets (`console/presets.py`), printed evaluation lines and the run's last line (issue 16)."""

import json
import math
import re

import numpy as np
import pytest

from jaxrl_agents.console import cli, presets
from jaxrl_agents.run import records, trainer
from jaxrl_agents.run.algorithms import get_algorithm, make_config
from jaxrl_agents.run.run_files import read_progress

from .conftest import TOY_ENV


@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_paper_preset_is_the_config_defaults_on_the_papers_budget(algo):
    # The paper's hyper-parameters are each config class's defaults; the preset adds nothing.
    p = presets.get_preset(algo, "paper")
    cls = get_algorithm(algo).config
    assert make_config(algo, {**p.config, "total_steps": p.total_steps}) == cls(
        total_steps=20_000_000)


@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_demo_uses_the_fast_hyper_parameters_on_a_shorter_budget(algo):
    fast, demo = presets.get_preset(algo, "fast"), presets.get_preset(algo, "demo")
    assert dict(demo.config) == dict(fast.config) and demo.total_steps < fast.total_steps
    for p in (fast, demo):  # every preset makes a valid config
        cfg = make_config(algo, {**p.config, "total_steps": p.total_steps})
        assert p.eval_every_steps(cfg.rollout_size) == cfg.rollout_size  # every update


def test_unknown_preset_names_the_argument_and_the_choices():
    with pytest.raises(ValueError, match=r"preset: expected one of \['demo', 'fast', 'paper'\] "
                                         r"for algo 'trpo', got 'quick'"):
        presets.get_preset("trpo", "quick")
    with pytest.raises(ValueError, match=r"preset: expected one of \['demo'\] for algo 'ippo'"):
        presets.get_preset("ippo", "fast")


def test_cli_refuses_a_preset_the_algorithm_lacks(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--algo", "ippo", "--preset", "fast"])
    assert e.value.code == 2
    assert "--preset: invalid choice: 'fast'" in capsys.readouterr().err


@pytest.mark.parametrize("old, new, crossed", [
    (0.05, 0.008, 0.01), (0.05, 0.02, None), (0.25, 0.0009, 0.001), (math.inf, 0.1, None),
    (0.02, 0.03, None), (0.2, 0.1, None), (0.1, 0.099, 0.1), (0.5, 0.0, None)])
def test_decade_crossed(old, new, crossed):
    got = trainer.decade_crossed(old, new)
    assert got == pytest.approx(crossed) if crossed is not None else got is None


def test_report_cadence_is_a_multiple_of_the_evaluation_cadence():
    cfg = make_config("ppo", {"n_envs": 4, "n_steps": 8, "n_minibatches": 4,
                              "total_steps": 32 * 100})
    assert trainer.report_every_updates(cfg, 1, None) == 100 // records.REPORT_LINES
    assert trainer.report_every_updates(cfg, 3, None) == 6  # 4 rounded up to whole evaluations
    assert trainer.report_every_updates(cfg, 1, 32 * 10) == 10
    assert trainer.report_every_updates(cfg, 1, 1) == 1  # at least every evaluation


def _toy_run(tmp_path, capsys, *extra):
    out = tmp_path / "runs"
    code = cli.main(["--env", TOY_ENV, "--hidden", "16", "--n-envs", "8", "--n-steps", "16",
                     "--n-minibatches", "2", "--total-steps", str(128 * 40), "--progress",
                     "lines", "--out", str(out), *extra])
    assert code == 0
    (run_dir,) = out.iterdir()
    return run_dir, capsys.readouterr().out.splitlines()


def test_default_run_takes_the_demo_preset_and_typed_flags_override_it(tmp_path, capsys):
    run_dir, _ = _toy_run(tmp_path, capsys, "--lr", "0.002")
    rc = json.loads((run_dir / "config.json").read_text())
    demo = presets.get_preset("ppo", "demo")
    assert rc["preset"] == "demo"
    algo_cfg = rc["algo_config"]
    assert algo_cfg["lr"] == 0.002  # typed
    assert (algo_cfg["n_envs"], algo_cfg["n_steps"]) == (8, 16)  # typed
    untyped = set(demo.config) - {"lr", "n_envs", "n_steps", "hidden", "n_minibatches"}
    assert untyped and all(algo_cfg[k] == demo.config[k] for k in untyped)  # the preset's
    assert rc["eval_every"] == 128  # the preset evaluates after every update
    rows = read_progress(str(run_dir / "progress.csv"))
    assert len(rows) == 40 and all(r["eval_return"] != "" for r in rows)


def test_every_update_is_evaluated_but_only_some_lines_are_printed(tmp_path, capsys):
    run_dir, lines = _toy_run(tmp_path, capsys, "--report-every", str(128 * 10))
    evals = np.load(run_dir / "evals.npz")
    assert list(evals["step"]) == [128 * i for i in range(1, 41)]
    printed = [int(line.split("]")[0].strip("[ ")) for line in lines if line.startswith("[")]
    regular = [128 * i for i in (1, 10, 20, 30, 40)]
    assert set(regular) <= set(printed)
    # Anything else printed is a new best below a power of ten, and says so.
    for line in lines:
        if line.startswith("[") and int(line.split("]")[0].strip("[ ")) not in regular:
            assert re.search(r"  new best JT_min < (1|1e-\d+)$", line), line


def test_the_run_ends_with_a_block_saying_what_it_got_where_and_how_to_plot_it(tmp_path, capsys,
                                                                               monkeypatch):
    monkeypatch.delenv("UV", raising=False)  # as installed by pip (uv's spelling: test_main_output)
    run_dir, lines = _toy_run(tmp_path, capsys)
    rows = read_progress(str(run_dir / "progress.csv"))
    evals = [r for r in rows if r.get("eval_JT_min")]
    best = min(evals, key=lambda r: float(r["eval_JT_min"]))
    start = next(i for i, line in enumerate(lines) if line.startswith("run finished: "))
    head, *block = lines[start:]
    assert re.fullmatch(r"run finished: 5,120 of 5,120 steps in \d+s \([\d,]+ steps/s, "
                        r"compilation included\)", head), head
    assert block[0].startswith(f"  best   minJT={float(best['eval_JT_min']):.3e}")
    assert block[0].endswith(f" at step {best['step']}")
    assert block[1:] == [f"  run    {run_dir}",
                         "  files  best_policy/  checkpoint.npz  config.json  evals.npz  "
                         "last_policy/  progress.csv",
                         f"  plot   jaxrl-plot {run_dir}"]  # matplotlib is installed here


@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_log_std_init_sets_the_initial_std_and_nothing_else(algo):
    import jax

    from jaxrl_agents.common.envs import load_env
    from jaxrl_agents.run.algorithms import compile_algorithm

    env = load_env(TOY_ENV, {})
    states = {}
    for log_std in (0.0, -1.5):
        cfg = make_config(algo, {"n_envs": 4, "n_steps": 32, "hidden": (8,), "total_steps": 128,
                                 "log_std_init": log_std,
                                 **({"n_minibatches": 2} if algo == "ppo" else {"batch_size": 32})})
        compiled = compile_algorithm(algo, env, cfg)
        states[log_std] = compiled.init(jax.numpy.stack([jax.random.PRNGKey(3)]),
                                        env.default_params)
    np.testing.assert_array_equal(states[-1.5].params["actor"]["log_std"],
                                  np.full_like(states[0.0].params["actor"]["log_std"], -1.5))
    assert not np.any(states[0.0].params["actor"]["log_std"])  # the network's own init: zeros
    same = jax.tree_util.tree_map(np.array_equal, states[0.0].params["critic"],
                                  states[-1.5].params["critic"])
    assert all(jax.tree_util.tree_leaves(same))
    with pytest.raises(ValueError, match="log_std_init: expected a finite number, got inf"):
        make_config(algo, {"log_std_init": math.inf})
