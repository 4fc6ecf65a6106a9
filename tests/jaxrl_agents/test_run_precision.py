"""A run traces under x64 only where its environment needs it (issue 36), and old runs resume as before.

The environment decides (its optional ``requires_x64``, docs/contracts.md) unless ``RunSpec.x64``
says otherwise; config.json records what the run used, and a config.json written before runs
recorded it (no ``precision`` key) resumes under x64, bit for bit as it would have.
"""

import json
import os

import jax
import numpy as np
import pytest

from jaxrl_agents.run.host.precision import env_requires_x64, recorded_x64, run_x64
from jaxrl_agents.run.run_files import read_progress
from jaxrl_agents.run.session import Session
from jaxrl_agents.run.spec import RunSpec

from .conftest import TOY_ENV

pytest.importorskip("gymnax")

CARTPOLE = dict(env="jaxrl_agents.common.gymnax_env:make", env_options={"env_id": "CartPole-v1"})
# 4 updates of 4 x 16 steps, one epoch: a few seconds of compilation, no learning asked.
CFG = {"total_steps": 4 * 4 * 16, "n_envs": 4, "n_steps": 16, "n_epochs": 1, "n_minibatches": 2,
       "hidden": [8]}


def _spec(tmp_path, name, **kw):
    base = dict(CARTPOLE, algo="ppo", config=CFG, seeds=(5,), checkpoint_every=2,
                eval_every=10**9, out=str(tmp_path / name))
    return RunSpec(**{**base, **kw})


def _env_dtypes(state):
    return {jax.tree_util.keystr(p): np.asarray(x).dtype
            for p, x in jax.tree_util.tree_leaves_with_path(state.env_state)
            if np.issubdtype(np.asarray(x).dtype, np.floating)}


def _rows(run_dir):
    return [{k: v for k, v in r.items() if k != "wall"}
            for r in read_progress(os.path.join(run_dir, "progress.csv"))]


def _same_tree(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(x.dtype == y.dtype and np.array_equal(x, y)
                                      for x, y in zip(la, lb))


def _config(run_dir):
    with open(os.path.join(run_dir, "config.json")) as f:
        return json.load(f)


def test_cartpole_trains_in_float32_and_resumes_bit_identically(tmp_path):
    """gymnax CartPole declares no need for x64: its state, observations and rewards are float32."""
    with Session.open(_spec(tmp_path, "whole"), progress="off") as s:
        whole = s.advance()
    dtypes = _env_dtypes(whole.state)
    assert dtypes and set(dtypes.values()) == {np.dtype(np.float32)}, dtypes
    assert np.asarray(whole.state.obs).dtype == np.float32
    assert _config(whole.run_dirs[0])["precision"] == {"x64": False, "network": "float32"}
    with Session.open(_spec(tmp_path, "cut"), progress="off") as s:
        s.advance(3)  # checkpoint at update 2; update 3 is recomputed by the resume
        run_dir = s.run_dirs[0]
    with Session.resume(run_dir, progress="off") as r:
        assert r.update == 2
        resumed = r.advance()
    assert _same_tree(whole.state, resumed.state)
    assert _rows(whole.run_dirs[0]) == _rows(run_dir)


def test_a_config_json_without_precision_resumes_under_x64(tmp_path):
    """Runs written before the choice existed all ran under x64: they resume so, bit for bit."""
    spec = _spec(tmp_path, "whole", x64=True)  # CartPole as every run was trained before
    with Session.open(spec, progress="off") as s:
        whole = s.advance()
    assert set(_env_dtypes(whole.state).values()) == {np.dtype(np.float64)}
    with Session.open(spec.replace(out=str(tmp_path / "old")), progress="off") as s:
        s.advance(2)
        run_dir = s.run_dirs[0]
    rc = _config(run_dir)
    assert rc["precision"] == {"x64": True, "network": "float32"}  # what earlier files hold
    del rc["precision"], rc["x64"]  # and older ones had neither key
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(rc, f)
    assert recorded_x64(rc) is True and RunSpec.from_run_config(rc).x64 is None
    with Session.resume(run_dir, progress="off") as r:
        resumed = r.advance()
    assert _same_tree(whole.state, resumed.state)
    assert _rows(whole.run_dirs[0]) == _rows(run_dir)


def test_the_toy_env_asks_for_x64_and_the_spec_overrides_it(tmp_path):
    from .toy_envs import Reach

    assert env_requires_x64(Reach()) is True
    assert run_x64(None, Reach()) is True and run_x64(False, Reach()) is False
    spec = RunSpec("ppo", TOY_ENV, config=CFG, seeds=(1,), eval_every=10**9,
                   out=str(tmp_path), x64=False)
    with Session.open(spec, progress="off") as s:
        state = s.advance(1).state
        rc = _config(s.run_dirs[0])
    assert rc["precision"]["x64"] is False and rc["x64"] is False  # what it used; what was asked
    assert RunSpec.from_run_config(rc) == spec.replace(out=os.path.abspath(tmp_path))
    assert set(_env_dtypes(state).values()) == {np.dtype(np.float32)}


def test_bad_precision_values_are_named():
    with pytest.raises(ValueError, match="x64: expected True, False or None"):
        RunSpec(x64="yes")

    class Odd:
        requires_x64 = "float64"

    with pytest.raises(ValueError, match="requires_x64 must be True or False"):
        env_requires_x64(Odd())
    assert env_requires_x64(object()) is False  # absent: float32
    assert recorded_x64({}) is True and recorded_x64({"precision": {"x64": False}}) is False
    with pytest.raises(ValueError, match="precision.x64: expected true or false"):
        recorded_x64({"precision": {"x64": 1}})
    with pytest.raises(ValueError, match="precision: expected an object"):
        recorded_x64({"precision": "float32"})
