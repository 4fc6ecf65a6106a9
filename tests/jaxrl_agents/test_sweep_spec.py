"""jaxrl-sweep SPEC validation: every bad SPEC is refused, naming the field, before Ray starts."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jaxrl_agents.sweep import SpecError, load_spec, parse_spec
from jaxrl_agents.sweep.driver import check_address, prepare_sweep_dir
from jaxrl_agents.sweep.trial import trial_settings

from .conftest import TOY_ENV

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def base(**top):
    spec = {"name": "s", "out": "/tmp/unused",
            "train": {"algo": "ppo", "env": TOY_ENV, "total_steps": 512, "eval_every": 128,
                      "seeds": [0, 1],
                      "config": {"n_envs": 4, "n_steps": 16, "n_epochs": 2, "n_minibatches": 2,
                                 "hidden": [8]}},
            "space": {"config": {"lr": {"values": [1e-3, 3e-3]}}}}
    spec.update(top)
    return spec


def test_good_spec_normalises_and_counts_trials():
    spec = parse_spec(base(space={"config": {"lr": {"values": [1e-3, 3e-3]}},
                                  "env": {"horizon": {"values": [8, 16, 32]}},
                                  "seeds": {"values": [[0, 1], [2, 3]]}}, num_samples=2))
    assert spec.n_trials() == 2 * 3 * 2 * 2
    assert spec.metric_key == "best_eval_JT_min" and spec.mode == "min"
    assert spec.segment_updates() == 2  # eval_every 128 / (4 envs x 16 steps)
    s = trial_settings(spec, {"config.lr": 3e-3, "env.horizon": 8, "seeds": [2, 3]})
    assert s["config"]["lr"] == 3e-3 and s["config"]["n_envs"] == 4
    assert s["env_options"] == {"horizon": 8} and s["seeds"] == [2, 3]
    assert parse_spec(base(metric="eval_return")).mode == "max"
    json.dumps(spec.to_json())  # travels to the trials and into sweep.json


@pytest.mark.parametrize("change, field", [
    # unknown fields, at every level
    (dict(metrc="eval_JT_min"), "metrc: unknown field"),
    (dict(train={"algo": "ppo", "env": TOY_ENV, "config": {"lr_typo": 1e-3}}),
     "train.config.lr_typo: unknown field"),
    (dict(space={"config": {"learning_rate": {"values": [1e-3]}}}),
     "space.config.learning_rate: unknown field"),
    (dict(space={"env": {"no_such_option": {"values": [1]}}}), "space.env.no_such_option"),
    (dict(space={"config": {"lr": {"valuez": [1e-3]}}}), "space.config.lr.valuez: unknown field"),
    (dict(scheduler={"type": "asha", "grace": 128}), "scheduler.grace: unknown field"),
    # empty spaces
    (dict(space={"config": {"lr": {"values": []}}}), "space.config.lr.values: expected a non-empty"),
    (dict(space={}), "space: expected at least one entry"),
    # bad ranges
    (dict(method="random", space={"config": {"lr": {"loguniform": [1e-3, 1e-5]}}}),
     "space.config.lr.loguniform: expected a range [low, high] with low < high"),
    (dict(method="random", space={"config": {"lr": {"loguniform": [0.0, 1e-3]}}}),
     "space.config.lr.loguniform: expected 0 < low"),
    (dict(space={"config": {"clip_eps": {"values": [0.2, -0.1]}}}),
     "space.config.clip_eps: expected a positive number"),
    (dict(space={"config": {"lr": {"uniform": [1e-4, 1e-3]}}}),
     "space.config.lr.uniform: a grid search takes lists of values only"),
    (dict(scheduler={"type": "asha", "grace_period": 10**9}), "scheduler.grace_period"),
    # wrong types
    (dict(space={"config": {"n_envs": {"values": ["64"]}}}),
     "space.config.n_envs: expected an integer, got '64' (str)"),
    (dict(num_samples="2"), "num_samples: expected a positive integer, got '2' (str)"),
    (dict(space={"config": {"lr": [1e-3]}}), "space.config.lr: expected a table with exactly one"),
    (dict(space={"seeds": {"values": [[0, 1], [2, "3"]]}}), "space.seeds.values[1]"),
    (dict(space={"env": {"horizon": {"values": ["long"]}}}), "space.env.horizon"),
    # what the sweep sets itself, and PBT's limits
    (dict(train={"algo": "ppo", "env": TOY_ENV, "out": "x"}), "train.out: set by jaxrl-sweep"),
    (dict(num_samples=4, scheduler={"type": "pbt", "perturbation_interval": 128,
                                    "mutations": {"config": {"n_epochs": {"values": [1, 2]}}}}),
     "scheduler.mutations.config.n_epochs: PBT explores real-valued fields only"),
    (dict(space={"seeds": {"values": [[0], [1]]}},
          scheduler={"type": "pbt", "perturbation_interval": 128,
                     "mutations": {"config": {"lr": {"loguniform": [1e-4, 1e-2]}}}}),
     "space.seeds: a PBT population shares one seed list"),
])
def test_bad_spec_names_the_field(change, field):
    with pytest.raises(SpecError) as e:
        parse_spec(base(**change))
    assert field in str(e.value)


def test_bad_address_and_existing_directory(tmp_path):
    for good in (None, "auto", "127.0.0.1:6379", "head-node.cluster:6379"):
        assert check_address(good) == good
    with pytest.raises(SpecError, match="--address: expected"):
        check_address("http://x")
    spec = parse_spec(base(out=str(tmp_path)))
    d, existed = prepare_sweep_dir(spec, None)
    assert not existed and prepare_sweep_dir(spec, None) == (d, True)
    other = parse_spec(base(out=str(tmp_path), num_samples=3))
    with pytest.raises(SpecError, match=r"another SPEC \(differs in \['num_samples'\]\)"):
        prepare_sweep_dir(other, None)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "mine.txt").write_text("not a sweep")
    with pytest.raises(SpecError, match="not a jaxrl-sweep directory"):
        prepare_sweep_dir(parse_spec(base(out=str(tmp_path), name="t")), None)
    assert (tmp_path / "t" / "mine.txt").read_text() == "not a sweep"


def test_sweep_json_is_strict_and_an_infinite_option_still_resumes(tmp_path):
    # Issue 37 rows 1/15: sweep.json is strict JSON (target_kl = inf, "off", is null), and the
    # same SPEC finds its directory again, also one written before (with a bare Infinity).
    spec = parse_spec(base(out=str(tmp_path), train={**base()["train"], "config": {
        **base()["train"]["config"], "target_kl": float("inf")}}))
    d, existed = prepare_sweep_dir(spec, None)
    stored = os.path.join(d, "sweep.json")
    text = open(stored).read()
    assert "Infinity" not in text and not existed
    assert prepare_sweep_dir(spec, None) == (d, True)
    with open(stored, "w") as f:  # as written before this release
        json.dump(spec.to_json(), f)
    assert "Infinity" in open(stored).read()
    assert prepare_sweep_dir(spec, None) == (d, True)


@pytest.mark.parametrize("uv", [True, False])
def test_a_missing_ray_names_the_command_that_brings_it(tmp_path, monkeypatch, capsys, uv):
    """Without Ray, jaxrl-sweep says how to get it for the tool that started it: under uv the
    root's sweep extra (a command that reruns the same sweep), under pip the package extra."""
    from jaxrl_agents.sweep.cli import main

    (tmp_path / "good.toml").write_text(textwrap.dedent(f"""
        out = "{tmp_path}"
        [train]
        env = "{TOY_ENV}"
        [space.env]
        horizon = {{values = [8, 16]}}
    """))
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ModuleNotFoundError
    if uv:
        monkeypatch.setenv("UV", "/usr/bin/uv")
    else:
        monkeypatch.delenv("UV", raising=False)
    assert main([str(tmp_path / "good.toml")]) == 2
    err = capsys.readouterr().err
    assert "Ray is not installed" in err
    if uv:
        assert f"uv run --extra sweep jaxrl-sweep {tmp_path / 'good.toml'}" in err
    else:
        assert "pip install \"jaxrl-agents[sweep]\"" in err
    assert not (tmp_path / "sweep").exists() and sorted(os.listdir(tmp_path)) == ["good.toml"]


def test_cli_refuses_bad_specs_before_ray_starts(tmp_path):
    """In a fresh interpreter: `import jaxrl_agents` does not import Ray, and a bad SPEC exits 2
    with the field named and Ray never imported."""
    (tmp_path / "bad.toml").write_text(textwrap.dedent(f"""
        out = "{tmp_path}"
        [train]
        env = "{TOY_ENV}"
        [space.config]
        lr = {{values = [0.001, "fast"]}}
    """))
    (tmp_path / "good.toml").write_text(textwrap.dedent(f"""
        out = "{tmp_path}"
        [train]
        env = "{TOY_ENV}"
        [space.env]
        horizon = {{values = [8, 16]}}
    """))
    code = textwrap.dedent(f"""
        import sys
        import jaxrl_agents
        assert "ray" not in sys.modules, "import jaxrl_agents imported ray"
        from jaxrl_agents.sweep.cli import main
        rc = main([{str(tmp_path / 'bad.toml')!r}])
        rc2 = main([{str(tmp_path / 'good.toml')!r}, "--dry-run"])
        print("RESULT", rc, rc2, "ray" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert "RESULT 2 0 False" in p.stdout, p.stdout + p.stderr
    assert "space.config.lr: expected a real number (int or float), got 'fast' (str)" in p.stderr
    assert "4 trial(s)" not in p.stdout and "2 trial(s)" in p.stdout
    assert not (tmp_path / "good").exists()  # a dry run creates nothing


def test_load_spec_reads_toml_and_names_syntax_errors(tmp_path):
    f = tmp_path / "lr.toml"
    f.write_text(f'[train]\nenv = "{TOY_ENV}"\n[space.config]\nlr = {{values = [1e-3]}}\n')
    spec = load_spec(str(f), {"out": str(tmp_path)})
    assert spec.name == "lr" and spec.out == str(tmp_path)
    f.write_text("[train\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(str(f))
    with pytest.raises(SpecError, match="no such file"):
        load_spec(str(tmp_path / "missing.toml"))


def test_default_metric_is_the_score_the_env_declares():
    """The agents name no env quantity: the default metric is the env's declared evaluation score,
    in its direction; an env without a description is ranked on its episode return, maximised."""
    described = parse_spec(base())
    assert (described.metric, described.mode) == ("eval_JT_min", "min")  # Reach declares JT_min, min
    plain = base()
    plain["train"]["env_options"] = {"describe": False}
    spec = parse_spec(plain)
    assert (spec.metric, spec.mode) == ("eval_return", "max")


def test_default_metric_of_the_gate_env_needs_no_x64_from_the_caller():
    """The gate env builds float64 physics; reading its declared score must scope x64 itself."""
    import jax

    raw = base()
    raw["train"] = {"algo": "ppo", "env": "quantgate_env:make", "total_steps": 8192, "eval_every": 4096}
    raw["space"] = {"config": {"lr": {"values": [1e-3]}}}
    assert not jax.config.read("jax_enable_x64")
    spec = parse_spec(raw)
    assert (spec.metric, spec.mode) == ("eval_JT_min", "min")


# --------------------------------------------------------- the cluster path (issue 25 rows 2, 3)
def _cli_sweep(tmp_path, address):
    """Run the CLI in a fresh interpreter on a tiny valid SPEC; (exit code, stderr, sweep dir)."""
    spec = tmp_path / "c.toml"
    spec.write_text(textwrap.dedent(f"""
        out = "{tmp_path / 'sweeps'}"
        [train]
        env = "{TOY_ENV}"
        total_steps = 512
        eval_every = 128
        [train.config]
        n_envs = 4
        n_steps = 16
        [space.config]
        lr = {{values = [0.001, 0.003]}}
    """))
    code = textwrap.dedent(f"""
        import sys
        from jaxrl_agents.sweep.cli import main
        rc = main([{str(spec)!r}, "--address", {address!r}])
        print("RESULT", rc, "ray" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    return p.stdout, p.stderr, tmp_path / "sweeps" / "c"


def test_a_ray_client_address_is_refused_up_front_naming_the_form_that_works(tmp_path):
    # Before: a traceback "Ray Client requires pip package ray[client]", and a sweep directory left.
    out, err, sweep = _cli_sweep(tmp_path, "ray://127.0.0.1:10001")
    assert "RESULT 2 False" in out, out + err  # refused before Ray is even imported
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxrl-sweep: error: --address: 'ray://127.0.0.1:10001'")
    assert "--address auto" in lines[0] and "HEAD_IP:PORT" in lines[0]
    assert not sweep.exists()


def test_an_unreachable_address_fails_in_bounded_time_naming_it(tmp_path):
    import socket

    # A port nobody listens on: bind one, then close it. Before: Ray retried for minutes, printing
    # only "Failed to connect to GCS" warnings, with the sweep directory already created.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out, err, sweep = _cli_sweep(tmp_path, f"127.0.0.1:{port}")
    assert "RESULT 1" in out, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"jaxrl-sweep: error: --address: nothing accepts connections at 127.0.0.1:{port}")
    assert not sweep.exists() and not (tmp_path / "sweeps").exists() or not os.listdir(tmp_path / "sweeps")


def test_spec_module_keeps_its_names_after_the_split():
    """spec.py still exports what it did before its validators and space parsing moved out."""
    from jaxrl_agents.sweep import spec, spec_fields, spec_space

    for name in spec.__all__:
        assert hasattr(spec, name), name
    assert spec.SpecError is spec_fields.SpecError and spec.DISTRIBUTIONS is spec_space.DISTRIBUTIONS
