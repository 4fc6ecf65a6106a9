"""A campaign launches each new run from its entry's RunSpec, and reads runs through RunDir.

`Entry.run_spec` is the spec ``jaxrl-train`` builds from the entry's flags (`Entry.train_args`,
the command config.json records), the run the campaign starts is that spec, and a run directory
written before (a flag-launched run) still resumes and is skipped once finished.
"""

import json
import os

import pytest
from jaxrl_agents.campaign import driver
from jaxrl_agents.campaign.executors import InlineTasks
from jaxrl_agents.campaign.rundirs import find_run_dir, read_run
from jaxrl_agents.campaign.spec import load_campaign
from jaxrl_agents.console.cli import build_parser, spec_of_flags

HEAD = """
name = "spec"
runs = "runs"
summaries = "summaries"
seeds = [1, 2]
summariser = "tests.integration.test_campaign_probes:record_status"
"""
ENTRIES = """
[[entry]]
name = "base"
algo = "ppo"
preset = "fast"
total_steps = 1024
env_options = { T = 6.0, pulse_length = 120, oob_mode = "clip" }
flags = { n_envs = 4, n_steps = 128, n_epochs = 1, n_minibatches = 4, hidden = [16, 16], lr = 1, normalize_advantage = false }

[[entry]]
name = "ft"
algo = "trpo"
preset = "demo"
init_from = "base"
total_steps = 2048
flags = { n_envs = 4, n_steps = 128, hidden = [16, 16], log_std_init = -3, cg_damping = 0.2 }

[[entry]]
name = "gate"
preset = "gate"
"""


def _campaign(folder, text=HEAD + ENTRIES):
    path = folder / "c.toml"
    path.write_text(text)
    return load_campaign(str(path))


@pytest.mark.parametrize("source", [None, "runs/base/s1/ppo_x_s1_base"])
def test_an_entry_s_spec_is_the_one_its_recorded_command_builds(tmp_path, source):
    """The RunSpec the campaign runs equals jaxrl-train's from the flags config.json records:
    ints for floats (``lr = 1``), booleans, lists, a fine-tune's kept std, the preset's cadence."""
    campaign = _campaign(tmp_path)
    for entry in campaign.entries[:2]:
        init = source if entry.init_from else None
        spec = entry.run_spec(7, campaign.run_parent(entry, 1), init)
        args = build_parser(entry.algo).parse_args(entry.train_args(7, campaign.run_parent(entry, 1), init))
        assert spec == spec_of_flags(args), entry.name
        assert spec.seeds == (7,) and spec.tag == entry.name and spec.preset == entry.preset
        assert spec.config["total_steps"] == entry.total_steps
    base, ft = campaign.entries[:2]
    assert base.run_spec(1, "o").config["lr"] == 1.0 and not base.run_spec(1, "o").config["normalize_advantage"]
    assert ft.run_spec(1, "o", "src").config["log_std_init"] == -3.0  # typed: kept over the source's


def test_a_staged_entry_has_no_single_spec(tmp_path):
    """A staged entry is a recipe of runs: asking for one RunSpec is an error naming the entry."""
    gate = _campaign(tmp_path).entries[2]
    with pytest.raises(ValueError, match=r"entry 'gate': preset 'gate' is a staged recipe"):
        gate.run_spec(1, "o")


@pytest.mark.slow  # a real campaign run (~19 s); the spec it trains is checked without training above
def test_a_new_run_is_its_spec_and_records_the_command_that_builds_it(tmp_path, monkeypatch):
    """The campaign's new run is ``jaxrl-train --spec``: its config.json holds the entry's spec and
    the equivalent flags as its command, no spec file is left behind, and a second call skips it."""
    import tempfile

    monkeypatch.chdir(tmp_path)
    made, mkstemp = [], tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp", lambda **kw: made.append(mkstemp(**kw)) or made[-1])
    campaign = _campaign(tmp_path, HEAD.replace("[1, 2]", "[1]") + ENTRIES.split("[[entry]]\nname = \"ft\"")[0])
    (base,) = campaign.entries
    assert driver.run_campaign(campaign, tasks=InlineTasks(), progress="off") == 0
    run = find_run_dir(campaign.run_parent(base, 1))
    rd = read_run(run)
    assert rd.status().state == "finished" and rd.status().steps == 1024
    assert rd.spec == base.run_spec(1, os.path.abspath(campaign.run_parent(base, 1)))
    assert rd.record["argv"] == ["jaxrl-train", *base.train_args(1, campaign.run_parent(base, 1), None),
                                 "--progress", "off"]
    assert len(made) == 1 and not os.path.exists(made[0][1])  # the spec file went with its run
    summary = json.loads((tmp_path / "summaries" / "base" / "s1.json").read_text())
    assert summary["status"] == "finished"
    before = os.path.getmtime(os.path.join(run, "checkpoint.npz"))
    assert driver.run_campaign(campaign, tasks=InlineTasks(), progress="off") == 0
    assert os.path.getmtime(os.path.join(run, "checkpoint.npz")) == before  # finished: skipped


def test_a_missing_ray_is_one_line_naming_the_campaign_extra(tmp_path, monkeypatch, capsys):
    """jaxrl-campaign without Ray: the line jaxrl-sweep prints too (one helper), for its extra."""
    import sys

    from jaxrl_agents.campaign.cli import main

    monkeypatch.chdir(tmp_path)
    _campaign(tmp_path, HEAD + ENTRIES.split("[[entry]]\nname = \"ft\"")[0])
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ModuleNotFoundError
    monkeypatch.delenv("UV", raising=False)
    assert main(["run", "c.toml", "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxrl-campaign: error: Ray is not installed; it comes with the campaign "
                          "extra: pip install \"jaxrl-agents[campaign]\""), err
    assert not (tmp_path / "runs").exists()
