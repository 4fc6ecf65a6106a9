"""One TOML dialect: a sweep's ``[train]`` may be written as a campaign ``[[entry]]``.

A campaign entry names its run by ``algo``, ``preset``, ``total_steps``, ``flags``,
``env_options`` and ``seeds``; a sweep SPEC's ``[train]`` takes the same keys (``flags`` is the
entry's name for ``config``), so a sweep file is a campaign entry plus its search space and
scheduler. Sweep files written before (``config``, no preset) read as they did.
"""

import pytest

from jaxrl_agents.console.presets import get_preset
from jaxrl_agents.sweep import SpecError, parse_spec

from .conftest import TOY_ENV

NET = {"n_envs": 4, "n_steps": 16, "n_epochs": 2, "n_minibatches": 2, "hidden": [8]}


def _spec(train):
    return {"name": "s", "out": "/tmp/unused", "train": {"env": TOY_ENV, **train},
            "space": {"config": {"lr": {"values": [1e-3, 3e-3]}}}}


def test_a_train_table_in_campaign_entry_spelling_is_the_run_jaxrl_train_would_make():
    """preset + flags: the preset's fields under the typed ones, its budget and eval cadence."""
    entry = parse_spec(_spec({"algo": "ppo", "preset": "fast", "flags": NET, "seeds": [1]}))
    fast = get_preset("ppo", "fast")
    spelled = parse_spec(_spec({"algo": "ppo", "config": {**fast.config, **NET}, "seeds": [1],
                                "total_steps": fast.total_steps,
                                "eval_every": fast.eval_every_steps(4 * 16)}))
    assert entry.train == spelled.train
    assert entry.train["config"]["log_std_init"] == fast.config["log_std_init"]
    # typed flags win over the preset's, as on jaxrl-train's command line
    lr = parse_spec(_spec({"algo": "ppo", "preset": "fast", "flags": {**NET, "lr": 1e-2}}))
    assert lr.train["config"]["lr"] == 1e-2


@pytest.mark.parametrize("train, message", [
    ({"algo": "ppo", "flags": NET, "config": NET}, "train.flags: expected either flags"),
    ({"algo": "ppo", "preset": "gate", "flags": NET}, "train.preset: expected a preset of one run"),
    ({"algo": "ppo", "preset": "nope", "flags": NET}, "train.preset: expected one of"),
    ({"algo": "ppo", "flags": {**NET, "lrr": 1e-3}}, "train.flags"),
])
def test_a_bad_entry_spelling_is_refused_naming_the_key(train, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(_spec(train))
