"""Fine-tuning starts (``init_from``): a new run begins exactly at another run's best policy.

Checked by construction: with a learning rate of 1e-30 nothing moves by more than the Adam steps'
bound (each step moves a parameter by at most about 3 lr early on, so 32 steps move it by less than
1e-27), so the run's last policy must be the source policy; and starting from the parameters a fresh run would have drawn must
give the fresh run's state bit for bit, so the seed's environment and training keys are untouched.
"""

import json
import os

import jax
import numpy as np
import pytest

from jaxrl_agents import load_policy
from jaxrl_agents.run import trainer
from jaxrl_agents.run.algorithms import compile_algorithm, make_config, model_for
from jaxrl_agents.run.run_files import read_progress

from .conftest import PPO_CFG, TOY_ENV, TOY_OPTIONS

SOURCE_CFG = dict(PPO_CFG, total_steps=512 * 6)


def _train(out, config=SOURCE_CFG, **kw):
    args = dict(algo="ppo", env=TOY_ENV, env_options=TOY_OPTIONS, config=config, seeds=(3,),
                eval_every=2 * 512, out=str(out), checkpoint_every=2, progress="off")
    args.update(kw)
    return trainer.train(**args)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A short finished run whose best policy the tests start from."""
    return _train(tmp_path_factory.mktemp("source")).run_dirs[0]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


TINY_LR = 1e-30
MOVED = 1e-27  # 2 updates x 4 epochs x 4 minibatches = 32 Adam steps of at most ~3 x TINY_LR


def test_a_negligible_learning_rate_keeps_the_source_policy(source, tmp_path):
    result = _train(tmp_path, config=dict(SOURCE_CFG, lr=TINY_LR, total_steps=512 * 2),
                    init_from=source)
    start = load_policy(source).params
    kept = load_policy(result.run_dirs[0], "last").params
    for a, b in zip(_leaves(start), _leaves(kept)):
        np.testing.assert_allclose(b, a, rtol=0, atol=MOVED)
    record = json.load(open(os.path.join(result.run_dirs[0], "config.json")))["init_from"]
    assert record["path"] == os.path.abspath(source)
    best_step = load_policy(source).metadata["step"]
    assert record["step"] == best_step and record["seed"] == 3


def test_a_nonzero_log_std_init_replaces_only_the_std(source, tmp_path):
    result = _train(tmp_path, config=dict(SOURCE_CFG, lr=TINY_LR, total_steps=512 * 2,
                                          log_std_init=-3.0), init_from=source)
    start = load_policy(source).params
    kept = load_policy(result.run_dirs[0], "last").params
    np.testing.assert_allclose(kept["actor"]["log_std"],
                               np.full_like(start["actor"]["log_std"], -3.0), rtol=0, atol=MOVED)
    assert np.abs(start["actor"]["log_std"] + 3.0).min() > 0.1  # the source's std was not -3
    others = dict(kept["actor"], log_std=start["actor"]["log_std"])
    for a, b in zip(_leaves(start["actor"]), _leaves(others)):
        np.testing.assert_allclose(b, a, rtol=0, atol=MOVED)


def test_the_fresh_parameters_as_a_start_give_the_fresh_state(x64, toy_env):
    cfg = make_config("ppo", SOURCE_CFG)
    compiled = compile_algorithm("ppo", toy_env, cfg)
    keys = jax.numpy.stack([jax.random.PRNGKey(s) for s in (3, 4)])
    fresh = compiled.init(keys, toy_env.default_params)
    # What seed 3 drew for its network; every seed then starts from it.
    drawn = model_for(toy_env, cfg).init(jax.random.split(jax.random.PRNGKey(3), 3)[0])
    started = compiled.init(keys, toy_env.default_params, drawn)
    for a, b in zip(_leaves(jax.tree_util.tree_map(lambda x: x[0], fresh)),
                    _leaves(jax.tree_util.tree_map(lambda x: x[0], started))):
        np.testing.assert_array_equal(a, b)
    # seed 4 starts from seed 3's parameters, but keeps its own environments and key
    seed = lambda tree, i: jax.tree_util.tree_map(lambda x: x[i], tree)  # noqa: E731
    for a, b in zip(_leaves(seed(started.params, 1)), _leaves(seed(fresh.params, 0))):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(_leaves(seed(started.params, 1)),
                                                        _leaves(seed(fresh.params, 1))))
    np.testing.assert_array_equal(started.key[1], fresh.key[1])
    np.testing.assert_array_equal(started.obs[1], fresh.obs[1])


def test_a_fine_tuning_run_resumes_bit_identically(source, tmp_path):
    cfg = SOURCE_CFG  # the source run's program: a fine-tuning run compiles nothing new
    full = _train(tmp_path / "full", config=cfg, init_from=source)
    part = _train(tmp_path / "part", config=cfg, init_from=source, stop_after=3)
    assert not part.finished
    resumed = trainer.resume(part.run_dirs[0], progress="off")
    for a, b in zip(_leaves(full.state), _leaves(resumed.state)):
        np.testing.assert_array_equal(a, b)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall"} for r in rows]  # noqa: E731
    assert strip(read_progress(os.path.join(full.run_dirs[0], "progress.csv"))) == \
        strip(read_progress(os.path.join(resumed.run_dirs[0], "progress.csv")))


@pytest.mark.parametrize("kw, match", [
    (dict(init_from="no/such/dir"), "init_from: expected a run or policy directory"),
    (dict(init_from=5), "init_from: expected a run or policy directory path"),
    (dict(config=dict(SOURCE_CFG, hidden=(16, 16))), r"init_from: .*different network.*hidden"),
])
def test_bad_starts_are_refused_before_any_run_directory(source, tmp_path, kw, match):
    kw = {"init_from": source, **kw}
    with pytest.raises(ValueError, match=match):
        _train(tmp_path / "out", **kw)
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []


def test_an_empty_directory_is_refused_by_name(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"init_from: .*no best policy in .*empty"):
        _train(tmp_path / "out", init_from=str(tmp_path / "empty"))


def test_the_cli_keeps_the_learned_std_whatever_the_preset(source, tmp_path):
    """`--preset fast` sets log_std_init -1.5 for fresh networks; a fine-tuning run keeps its std."""
    from jaxrl_agents.console import cli

    argv = ["--preset", "fast", "--env", TOY_ENV, "--seed", "3", "--hidden", "32", "32",
            "--n-envs", "16", "--n-steps", "32", "--n-epochs", "4", "--n-minibatches", "4",
            "--total-steps", "1024", "--lr", str(TINY_LR), "--out", str(tmp_path), "--progress",
            "off", "--init-from", source]
    assert cli.main(argv) == 0
    (run_dir,) = [p for p in tmp_path.iterdir()]
    assert json.load(open(run_dir / "config.json"))["algo_config"]["log_std_init"] == 0.0
    np.testing.assert_allclose(load_policy(str(run_dir), "last").params["actor"]["log_std"],
                               load_policy(source).params["actor"]["log_std"], rtol=0, atol=MOVED)


# ------------------------------------------- issue 37 rows 7 and 11: a busy or corrupt source
def test_a_source_run_still_training_is_refused_naming_it(source, tmp_path, capsys):
    """Row 7: a source run still training (locked) was accepted silently, its best policy taken
    mid-search (and liable to be replaced while read). It is refused, naming the run directory."""
    from jaxrl_agents.common.fileio import lock_directory
    from jaxrl_agents.console import cli

    with lock_directory(source):  # as the source's own jaxrl-train process holds it
        for start in (source, os.path.join(source, "best_policy")):
            with pytest.raises(ValueError, match=rf"init_from: {source} is in use by process "
                                                 rf"{os.getpid()} .*still training"):
                _train(tmp_path / "out", init_from=start)
        code = cli.main(["--env", TOY_ENV, "--seed", "3", "--hidden", "32", "32", "--init-from",
                         source, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and f"{source} is in use" in err
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []


def test_a_run_says_which_source_and_step_it_starts_from(source, tmp_path, capsys):
    """Row 7: no run printed its source or the source's step; only config.json said so."""
    from jaxrl_agents.console import cli

    step = load_policy(source).metadata["step"]
    # --preset paper: the config of test_a_negligible_learning_rate_keeps_the_source_policy (the
    # same compiled update)
    argv = ["--env", TOY_ENV, "--preset", "paper", "--seed", "3", "--hidden", "32", "32",
            "--n-envs", "16", "--n-steps", "32", "--n-epochs", "4", "--n-minibatches", "4",
            "--total-steps", "1024", "--lr", str(TINY_LR), "--out", str(tmp_path), "--progress",
            "lines", "--init-from", source]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    line = f"init_from: starting from {os.path.join(source, 'best_policy')} (ppo, seed 3, step {step:,})"
    assert line in out.splitlines()


@pytest.mark.parametrize("text, match", [
    ('{"format": "jaxrl_agents.Policy", "net', r"not valid JSON \(Unterminated string"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"format": "jaxrl_agents.Policy", "format_version": 1}', "'network' expected a JSON object"),
    ('{"format": "jaxrl_agents.Policy", "format_version": 1, "network": {"obs_dim": 3}}',
     "'network' does not define a network"),
])
def test_a_corrupt_source_policy_json_is_named(source, tmp_path, text, match):
    """Row 11: a corrupt best_policy/policy.json gave the JSON parser's message, naming no file."""
    import shutil

    copy = shutil.copytree(source, tmp_path / "src", ignore=shutil.ignore_patterns(".lock"))
    bad = os.path.join(copy, "best_policy", "policy.json")
    with open(bad, "w") as f:
        f.write(text)
    with pytest.raises(ValueError, match=rf"^init_from: {bad}: {match}") as info:
        _train(tmp_path / "out", init_from=str(copy))
    assert "\n" not in str(info.value)
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []
