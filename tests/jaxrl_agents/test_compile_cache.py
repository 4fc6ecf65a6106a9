"""`jaxrl-train`'s persistent compilation cache (run/host/compile_cache.py).

Where it goes, that a second run loads what the first compiled, and that a run computes the same
bits with it.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
from jaxrl_agents.console import cli
from jaxrl_agents.run.host import compile_cache

from .conftest import TOY_ENV

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
# A small PPO run on the toy environment: 3 updates, evaluated and checkpointed.
FLAGS = ["--env", TOY_ENV, "--preset", "paper", "--n-envs", "8", "--n-steps", "32",
         "--n-epochs", "2", "--n-minibatches", "2", "--hidden", "16", "16",
         "--total-steps", str(3 * 256), "--eval-every", "512", "--checkpoint-every", "2",
         "--progress", "off"]


def _train(out, *extra, cache_env=None):
    """`jaxrl-train` in a subprocess that sees no cache but the one `extra` or `cache_env` names."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))
           and k != compile_cache.ENV_VARIABLE}
    env.update(PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", **(cache_env or {}))
    return subprocess.run([str(BIN / "jaxrl-train"), *FLAGS, "--out", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=600)


def _programs(directory) -> set[str]:
    return {p.name for p in pathlib.Path(directory).glob("*-cache")}


def _compare_runs():
    spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "bench" / "compare_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_directory_comes_from_the_flag_then_the_variable_then_jax_then_the_default(tmp_path):
    resolve = compile_cache.resolve_directory
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert resolve(None, env) == (str(tmp_path / "xdg" / "jaxrl-agents" / "jax"), "default")
    assert resolve(None, {"HOME": str(tmp_path)})[0] == os.path.join(
        os.path.expanduser("~"), ".cache", "jaxrl-agents", "jax")
    # JAX's own variable: JAX reads it itself, so the command sets nothing
    assert resolve(None, {**env, "JAX_COMPILATION_CACHE_DIR": "/j"}) == (None, "jax")
    assert resolve(None, {**env, "JAX_COMPILATION_CACHE_DIR": "/j",
                          "JAXRL_COMPILE_CACHE": "rel/dir"}) == (os.path.abspath("rel/dir"),
                                                                 "variable")
    assert resolve("/flag", {**env, "JAXRL_COMPILE_CACHE": "/var"}) == ("/flag", "flag")
    assert resolve("off", {**env, "JAXRL_COMPILE_CACHE": "/var"}) == (None, "flag")
    assert resolve(None, {**env, "JAXRL_COMPILE_CACHE": "off"}) == (None, "variable")
    with pytest.raises(ValueError, match="--compile-cache: expected a directory or 'off', got an "
                                         "empty value"):
        resolve(" ", env)
    with pytest.raises(ValueError, match="JAXRL_COMPILE_CACHE: expected a directory"):
        resolve(None, {**env, "JAXRL_COMPILE_CACHE": ""})


def test_an_empty_value_is_refused_before_anything_runs(tmp_path, capsys):
    assert cli.main([*FLAGS, "--out", str(tmp_path / "runs"), "--compile-cache="]) == 2
    assert "jaxrl-train: error: --compile-cache: expected a directory or 'off'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_second_run_loads_every_program_and_computes_the_same_bits(tmp_path):
    cache = tmp_path / "cache"
    first = _train(tmp_path / "a", "--seed", "1", "--compile-cache", str(cache))
    assert first.returncode == 0, first.stderr
    written = _programs(cache)
    assert len(written) > 3  # the update, the evaluation, the set-up's small programs
    probes = list(cache.glob("probe-*.json"))
    assert len(probes) == 1 and json.loads(probes[0].read_text())["works"] is True
    # Another seed compiles the same programs (a seed is data): all of them come from the cache.
    # The variable names the same cache, and the probe is not run again.
    second = _train(tmp_path / "b", "--seed", "2",
                    cache_env={compile_cache.ENV_VARIABLE: str(cache)})
    assert second.returncode == 0, second.stderr
    assert _programs(cache) == written
    assert list(cache.glob("probe-*.json")) == probes
    # The same seed without any cache: every number of the run directory is the same bit for bit.
    # (In-process: the flag leaves this process's JAX as the test run set it up.)
    assert cli.main([*FLAGS, "--out", str(tmp_path / "c"), "--seed", "1",
                     "--compile-cache", "off"]) == 0
    (a,), (c,) = (list((tmp_path / d).iterdir()) for d in ("a", "c"))
    n, diffs, _ = _compare_runs().compare_run(str(c), str(a))
    assert n > 0 and diffs == [], diffs
    # The flag is how this machine compiles, not what the run is: config.json does not record it,
    # so the command a summary shows is the run's own.
    argv = json.loads((a / "config.json").read_text())["argv"]
    assert "--compile-cache" not in argv and argv[-2:] == ["--seed", "1"]


def test_a_cache_that_does_not_load_back_is_not_used_and_a_named_one_says_why(tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    # The probe's kept answer for this machine (the key is the one the command computes).
    key = compile_cache._machine_key()
    (cache / f"probe-{key}.json").write_text(json.dumps(
        {"works": False, "why": "E cpu_aot_loader: machine feature +x not supported"}))
    # In-process: an unusable cache leaves this process's JAX as it was.
    assert cli.main([*FLAGS, "--out", str(tmp_path / "a"), "--compile-cache", str(cache)]) == 0
    assert (f"jaxrl-train: note: compilation cache {cache} not used (a cached program did not "
            f"load back cleanly on this machine: E cpu_aot_loader" in capsys.readouterr().err)
    assert _programs(cache) == set() and len(list((tmp_path / "a").iterdir())) == 1
    # A directory that cannot be made (a file is in the way) says so, and the run goes on.
    (tmp_path / "file").write_text("")
    assert cli.main([*FLAGS, "--out", str(tmp_path / "b"), "--compile-cache",
                     str(tmp_path / "file" / "cache")]) == 0
    err = capsys.readouterr().err
    assert (f"jaxrl-train: note: compilation cache {tmp_path / 'file' / 'cache'} not used (cannot "
            f"write there: Not a directory); the run compiles its programs") in err, err



def test_the_default_directory_is_not_used_silently_where_it_does_not_load_back(
        tmp_path, monkeypatch, capsys):
    # A user who chose nothing is not told; the command compiles as without a cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv(compile_cache.ENV_VARIABLE, raising=False)
    default = tmp_path / "jaxrl-agents" / "jax"
    default.mkdir(parents=True)
    key = compile_cache._machine_key()
    (default / f"probe-{key}.json").write_text(json.dumps({"works": False, "why": "E no"}))
    assert compile_cache.configure_for_command(None, "jaxrl-train") is None
    assert capsys.readouterr().err == ""
