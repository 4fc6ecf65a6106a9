"""RunSpec: one validated, JSON-round-tripping description of a run.

What is checked: a spec survives JSON unchanged; a bad field is refused naming the field, what was
expected and what arrived, before anything exists; config.json files of every age read back into
a RunSpec (the IPPO fixture of tests/data predates report_every, tensorboard and init_from);
``jaxrl-train --spec FILE`` trains the run its flags would, bit for bit, and refuses flags that
contradict the file; ``train(spec)`` is ``train(**fields)``.
"""

import json
import os
import pathlib

import numpy as np
import pytest
from jaxrl_agents.common.fileio import load_npz
from jaxrl_agents.console import cli
from jaxrl_agents.run import trainer
from jaxrl_agents.run.run_files import read_progress, read_run_config
from jaxrl_agents.run.spec import SPEC_KEYS, RunSpec

from .conftest import PPO_CFG, TOY_ENV

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "ippo-runs"
# 2 updates of the shared PPO config (512 steps each): one compile shared with the other tests.
SMALL = {**PPO_CFG, "total_steps": 1024}


def _full_spec(tmp_path):
    return RunSpec(algo="trpo", env=TOY_ENV, env_options={"horizon": 8},
                   config={"n_envs": 4, "n_steps": 64, "hidden": (16, 16), "target_kl": 0.02},
                   seeds=(3, 4), eval_every=512, checkpoint_every=2, report_every=1024,
                   out=str(tmp_path), tag="t", preset="demo", init_from=str(tmp_path / "src"),
                   tensorboard=True, time_budget=90.0)


def test_a_spec_round_trips_through_json(tmp_path):
    spec = _full_spec(tmp_path)
    back = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec
    assert back.to_dict() == spec.to_dict()
    assert sorted(spec.to_dict()) == sorted(SPEC_KEYS)
    # The config is normalised to every field (lists for tuples) whatever form it came in.
    assert spec.config["hidden"] == [16, 16] and spec.config["target_kl"] == 0.02
    assert spec.algo_config().hidden == (16, 16)
    # Aliases and defaults: "ippo_lag" is read as its registry name; a partial dict fills in.
    assert RunSpec.from_dict({"algo": "ippo_lag", "env": TOY_ENV}).algo == "ippo_lagrangian"
    assert RunSpec.from_dict({}) == RunSpec()


def test_replace_merges_config_fields_and_checks_again(tmp_path):
    spec = _full_spec(tmp_path)
    longer = spec.replace(config={"total_steps": 4096})
    assert longer.config["total_steps"] == 4096 and longer.config["n_envs"] == 4
    with pytest.raises(ValueError, match=r"seeds: expected distinct seeds, got \[1, 1\]"):
        spec.replace(seeds=(1, 1))


@pytest.mark.parametrize("fields, message", [
    ({"algo": "sac"}, "algo: expected one of ['ippo', 'ippo_lagrangian', 'ppo', 'trpo'], got 'sac'"),
    ({"env": "no_colon"}, "env: expected 'module:factory'"),
    ({"env": 3}, "env: expected a 'module:factory' string"),
    ({"env_options": {"x": object()}}, "env_options: expected JSON values"),
    ({"config": {"lr": -1.0}}, "lr"),
    ({"config": {"lr_typo": 1e-3}}, "lr_typo"),
    ({"config": [1, 2]}, "config: expected a dict of ppo config fields, got [1, 2]"),
    ({"seeds": (1, 1)}, "seeds: expected distinct seeds"),
    ({"seeds": ()}, "seeds: expected at least one seed"),
    ({"eval_every": 0}, "eval_every: expected a positive integer, got 0"),
    ({"checkpoint_every": True}, "checkpoint_every: expected a positive integer, got True"),
    ({"report_every": -5}, "report_every: expected a positive integer, got -5"),
    ({"tag": "a/b"}, "tag: expected a name without path separators, got 'a/b'"),
    ({"out": 5}, "out: expected a directory path, got 5"),
    ({"preset": 7}, "preset: expected a preset name or None, got 7"),
    ({"init_from": ""}, "init_from: expected a run or policy directory path (or None), got ''"),
    ({"algo": "ippo", "env": TOY_ENV, "init_from": "runs/x"}, "init_from: fine-tuning starts are for"),
    ({"tensorboard": "yes"}, "tensorboard: expected True or False, got 'yes'"),
    ({"time_budget": float("inf")}, "time_budget: expected a positive finite number of seconds"),
])
def test_bad_fields_are_named_with_what_was_expected_and_what_arrived(tmp_path, fields, message):
    with pytest.raises(ValueError) as e:
        RunSpec(**fields)
    assert message in str(e.value)
    # from_dict names its source first (a file, a campaign entry).
    d = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    with pytest.raises(ValueError) as e:
        RunSpec.from_dict(d, source="entry 2")
    assert str(e.value).startswith("entry 2: ")
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_from_dict_refuses_unknown_keys_and_non_objects():
    with pytest.raises(ValueError, match=r"run.json: unknown key 'seed'; expected some of \['algo'"):
        RunSpec.from_dict({"seed": 1}, source="run.json")
    with pytest.raises(ValueError, match="run.json: expected a JSON object of run fields, got list"):
        RunSpec.from_dict([], source="run.json")


def test_an_old_config_json_reads_into_a_spec():
    """The IPPO fixture was written before report_every/tensorboard/init_from were recorded."""
    (d,) = DATA.iterdir()
    rc = read_run_config(str(d / "config.json"))
    assert "tensorboard" not in rc and "init_from" not in rc
    spec = RunSpec.from_run_config(rc)
    assert spec.algo == "ippo_lagrangian" and spec.env == rc["env"]
    assert spec.seeds == (1,) and spec.eval_every == 128 and spec.checkpoint_every == 3
    assert spec.report_every is None and spec.tensorboard is False and spec.init_from is None
    assert spec.tag == "old" and spec.time_budget is None
    assert spec.config["total_steps"] == 512 and spec.config["hidden"] == [16]


def _arrays(path):
    return {k: v for k, v in load_npz(path).items() if k != "__meta__"}


def _same_run(a, b):
    """Two run directories hold the same numbers (progress without wall times, arrays bit for bit)."""
    def rows(d):
        return [{k: v for k, v in r.items() if k not in ("wall", "sps")}
                for r in read_progress(os.path.join(d, "progress.csv"))]
    assert rows(a) == rows(b)
    for name in ("checkpoint.npz", "evals.npz", "best_policy/params.npz"):
        x, y = _arrays(os.path.join(a, name)), _arrays(os.path.join(b, name))
        assert sorted(x) == sorted(y)
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"{name}:{k}")


def test_a_spec_file_trains_the_run_its_flags_would(tmp_path, capsys):
    flags = ["--env", TOY_ENV, "--seed", "7", "--total-steps", "1024", "--n-envs", "16",
             "--n-steps", "32", "--n-epochs", "4", "--n-minibatches", "4", "--hidden", "32", "32",
             "--lr", "3e-3", "--log-std-init", "0", "--eval-every", "512",
             "--checkpoint-every", "1", "--progress", "off"]
    assert cli.main([*flags, "--out", str(tmp_path / "flags")]) == 0
    (by_flags,) = (tmp_path / "flags").iterdir()
    rc = read_run_config(str(by_flags / "config.json"))
    spec = RunSpec.from_run_config(rc).replace(out=str(tmp_path / "spec"))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(spec.to_dict()))
    assert cli.main(["--spec", str(path), "--progress", "off"]) == 0
    (by_spec,) = (tmp_path / "spec").iterdir()
    _same_run(str(by_flags), str(by_spec))
    rc2 = read_run_config(str(by_spec / "config.json"))
    assert RunSpec.from_run_config(rc2) == spec
    assert rc2["preset"] == rc["preset"] == "demo"

    # Flags that would contradict the file: one line naming the file, nothing trained.
    capsys.readouterr()
    assert cli.main(["--spec", str(path), "--lr", "1e-3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--spec {path}: the run's settings come from {path}" in err
    assert "drop ['--lr']" in err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"algo": "ppo", "seeds": [1, 1]}))
    assert cli.main(["--spec", str(bad)]) == 2
    assert f"{bad}: seeds: expected distinct seeds" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "spec")) == [by_spec.name]


def test_train_takes_a_spec_or_its_fields(tmp_path):
    spec = RunSpec(env=TOY_ENV, config=SMALL, seeds=(2,), eval_every=512, checkpoint_every=1,
                   out=str(tmp_path / "a"))
    by_spec = trainer.train(spec, progress="off")
    by_args = trainer.train("ppo", TOY_ENV, {}, SMALL, seeds=(2,), eval_every=512,
                            checkpoint_every=1, out=str(tmp_path / "b"), progress="off")
    _same_run(by_spec.run_dirs[0], by_args.run_dirs[0])
    rc = read_run_config(os.path.join(by_args.run_dirs[0], "config.json"))
    assert RunSpec.from_run_config(rc) == spec.replace(out=os.path.abspath(tmp_path / "b"))
