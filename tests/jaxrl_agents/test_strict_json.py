"""Every JSON file jaxrl-agents writes is strict JSON: NaN and infinities as null (issue 37, rows 1, 15).

Python's `json` writes a bare ``NaN`` / ``Infinity`` by default, which JavaScript's ``JSON.parse``
and other strict parsers reject. Files written before (with ``NaN`` in them) must still load.
"""

import json
import math

import jax
import numpy as np
import pytest
from gymnasium import spaces
from jaxrl_agents import ActorCritic, Policy, load_policy
from jaxrl_agents.common import fileio
from jaxrl_agents.ippo.spaces import space_from_json, space_to_json
from jaxrl_agents.ppo.config import PPOConfig


def strict_loads(text: str):
    """`json.loads` that refuses NaN, Infinity and -Infinity, as JSON.parse does."""
    def refuse(name):
        raise AssertionError(f"not strict JSON: bare {name} in the text")
    return json.loads(text, parse_constant=refuse)


def test_json_text_writes_non_finite_numbers_as_null():
    obj = {"a": math.nan, "b": [1.0, -math.inf, np.float32("nan")], "c": np.array([np.inf, 2.0]),
           "d": (np.int64(3), "x", None, True)}
    back = strict_loads(fileio.json_text(obj))
    assert back == {"a": None, "b": [1.0, None, None], "c": [None, 2.0], "d": [3, "x", None, True]}


def test_policy_json_is_strict_and_old_files_with_nan_still_load(tmp_path):
    model = ActorCritic(3, "gaussian", (1,), hidden=(4,))
    pol = Policy(model, model.init(jax.random.PRNGKey(0)),
                 {"step": 7, "eval": {"eval_JT_min": 0.5, "eval_t_first_PE": math.nan,
                                      "best": np.float64(np.inf)}})
    pol.save(tmp_path / "new")
    spec = strict_loads((tmp_path / "new" / "policy.json").read_text())
    assert spec["metadata"]["eval"] == {"eval_JT_min": 0.5, "eval_t_first_PE": None, "best": None}
    assert load_policy(str(tmp_path / "new")).metadata["eval"]["eval_t_first_PE"] is None

    # A policy.json written before this release, with a bare NaN, loads as it did.
    pol.save(tmp_path / "old")
    path = tmp_path / "old" / "policy.json"
    path.write_text(path.read_text().replace('"eval_t_first_PE": null', '"eval_t_first_PE": NaN'))
    assert "NaN" in path.read_text()
    assert math.isnan(load_policy(str(tmp_path / "old")).metadata["eval"]["eval_t_first_PE"])


def test_unbounded_box_round_trips_through_strict_json():
    box = spaces.Box(np.array([-np.inf, 0.0], np.float32), np.array([1.0, np.inf], np.float32))
    text = fileio.json_text(space_to_json(box))
    back = space_from_json(strict_loads(text))
    assert back == box and np.isneginf(back.low[0]) and np.isposinf(back.high[1])
    # A file written before, with -Infinity / Infinity, still reads.
    old = space_from_json(json.loads(json.dumps(space_to_json(box))))
    assert old == box


def test_target_kl_off_is_null_in_config_json_and_reads_back_as_inf(tmp_path):
    cfg = PPOConfig()
    assert cfg.target_kl == math.inf
    fileio.atomic_write_json(str(tmp_path / "config.json"), {"algo_config": cfg.to_dict()})
    back = strict_loads((tmp_path / "config.json").read_text())["algo_config"]
    assert back["target_kl"] is None
    assert PPOConfig.coerce(back) == cfg  # a resume rebuilds the same config
    # A config.json written before (Infinity) still reads.
    assert PPOConfig.coerce(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="n_steps"):  # None is "off" for target_kl alone
        PPOConfig.coerce({"n_steps": None})
