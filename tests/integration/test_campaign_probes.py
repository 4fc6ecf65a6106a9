"""jaxrl-campaign against the probes of issue 35 that found today's runner wanting.

One test per row of the issue's table that concerns the campaign command (rows 2, 3, 6 and the
page's part of 10 are quantgate-analysis': tests/quantgate_analysis/test_page_safety.py). The
tasks run in this process (`InlineTasks`); where a row needs no training, ``task._train`` is
replaced by a recorder, and the summariser is `record_status` below (a campaign file names its
summariser, so these mechanics need no physics).
"""

import datetime
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from jaxrl_agents.campaign import driver, task
from jaxrl_agents.campaign.deadline import parse_deadline
from jaxrl_agents.campaign.executors import InlineTasks
from jaxrl_agents.campaign.rundirs import find_run_dir
from jaxrl_agents.campaign.spec import load_campaign
from jaxrl_agents.common.fileio import lock_directory

from tests.integration.run_state import run_status

ENV = {"T": 6.0, "pulse_length": 120}
FLAGS = 'flags = { n_envs = 4, n_steps = 128, n_epochs = 1, n_minibatches = 4, hidden = [16, 16] }'


def chain_campaign(name: str = "probe", base_steps: int = 2048, ft_steps: int = 1024,
                   ft_flags: str = FLAGS) -> str:
    """A campaign file of two PPO entries on 6 ns episodes: ``base`` and ``ft``, its fine-tune.

    Summarised by `record_status` (no physics). The Ray chain test (test_campaign_ray.py) uses it
    with its own name and budgets.
    """
    def entry(entry_name: str, steps: int, flags: str, init_from: str = "") -> str:
        return (f'\n[[entry]]\nname = "{entry_name}"\nalgo = "ppo"\npreset = "fast"\n{init_from}'
                f"total_steps = {steps}\nenv_options = {{ T = 6.0, pulse_length = 120 }}\n{flags}\n")

    return (f'\nname = "{name}"\nruns = "runs"\nsummaries = "summaries"\nseeds = [1]\n'
            f'summariser = "tests.integration.test_campaign_probes:record_status"\n'
            + entry("base", base_steps, FLAGS)
            + entry("ft", ft_steps, ft_flags, 'init_from = "base"\n'))


TWO = chain_campaign()


def record_status(campaign, entry, seed, run_dir, code_version):
    """A summariser with no physics: the run's status, written where the campaign says."""
    path = campaign.summary_path(entry, seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    status, done, budget = run_status(run_dir)
    with open(path, "w") as f:
        json.dump({"status": status, "steps_done": done, "budget": budget, "run_dir": run_dir}, f)
    return path


def broken_summariser(campaign, entry, seed, run_dir, code_version):
    """A summariser that cannot read a run's evaluations, as on a garbage evals.npz."""
    raise ValueError(f"{run_dir}/evals.npz: not an .npz file")


def _run(campaign, **kwargs):
    return driver.run_campaign(campaign, tasks=InlineTasks(), progress="off", **kwargs)


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The two-entry campaign file in a fresh folder (the current directory)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "probe.toml").write_text(TWO)
    return tmp_path


def _no_training(monkeypatch):
    monkeypatch.setattr(task, "_train", lambda *a, **k: pytest.fail("nothing should train"))


@pytest.mark.parametrize("text", [
    '{"best": {"JT": 1e-4}}',  # row 1: a hand-edited summary without its status
    '{"status": "fin',  # row 10: truncated
    '[{"status": "finished"}]',  # row 10: list-shaped
])
def test_a_summary_without_its_run_and_status_is_kept_not_replaced(probe, monkeypatch, capsys, text):
    """Rows 1 and 10: a committed summary the task cannot read is named, kept and its seed skipped."""
    _no_training(monkeypatch)
    path = probe / "summaries" / "base" / "s1.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert _run(load_campaign("probe.toml"), entries=["base"]) == 1
    out = capsys.readouterr().out
    assert "summaries/base/s1.json: expected" in out and "kept as it is" in out
    assert path.read_text() == text and not (probe / "runs").exists()


def test_an_until_already_past_says_that_it_means_tomorrow():
    """Row 4: ``--until`` a time already past today is tomorrow, and a line says so."""
    said = []
    now = datetime.datetime(2026, 12, 6, 18, 0)
    at = parse_deadline(None, "17:30", said.append, now=now)
    assert at == datetime.datetime(2026, 12, 7, 17, 30).timestamp()
    (line,) = said
    assert "--until 17:30: that time has passed today" in line and "23.5 h from now" in line
    said.clear()
    assert parse_deadline(None, "19:00", said.append, now=now) == datetime.datetime(
        2026, 12, 6, 19, 0).timestamp() and not said
    with pytest.raises(ValueError, match=r"--until: expected a local time HH:MM .*got '25:00'"):
        parse_deadline(None, "25:00")


@pytest.mark.slow  # a real interrupted run for one note: ~15 s, kept out of the 12-minute default run
def test_a_lowered_budget_for_an_interrupted_run_is_said(probe, monkeypatch, capsys):
    """Row 5: ``total_steps`` lowered in the file for an interrupted run: a note, the run's budget."""
    from jaxrl_agents.console.presets import get_preset
    from jaxrl_agents.run import trainer
    from jaxrl_agents.run.algorithms import make_config

    campaign = load_campaign("probe.toml")
    base = campaign.entries[0]
    cfg = make_config("ppo", {**get_preset("ppo", "fast").config, **base.flags, "total_steps": 2048})
    trainer.train("ppo", "quantgate_env:make", ENV, cfg, seeds=(1,), eval_every=512,
                  out=campaign.run_parent(base, 1), tag="base", checkpoint_every=1,
                  progress="off", stop_after=2, preset="fast")
    run_dir = find_run_dir(campaign.run_parent(base, 1))
    assert run_status(run_dir)[:2] == ("interrupted", 1024)
    (probe / "probe.toml").write_text(TWO.replace("total_steps = 2048", "total_steps = 1536"))
    calls = []
    monkeypatch.setattr(task, "_train", lambda job, args, *_: (calls.append(args), (0, None))[1])
    assert _run(load_campaign("probe.toml"), entries=["base"]) == 3  # still interrupted: stopped
    out = capsys.readouterr().out
    assert ("the file's total_steps (1,536) is below the budget of" in out
            and "(2,048 steps, which it keeps" in out)
    assert calls == [["--resume", run_dir]]  # no --total-steps: a budget is never cut


def test_a_seed_another_runner_holds_is_not_trained_twice(probe, monkeypatch, capsys):
    """Row 7: a second runner on the same file waits for the seed the first holds (its lock)."""
    _no_training(monkeypatch)
    monkeypatch.setattr(task, "LOCK_POLL_S", 0.1)
    campaign = load_campaign("probe.toml")
    parent = probe / campaign.run_parent(campaign.entries[0], 1)
    parent.mkdir(parents=True)
    with lock_directory(str(parent)):  # the first runner, working on seed 1 of base
        assert _run(campaign, entries=["base"], deadline=time.time() + 1.0) == 3
    out = capsys.readouterr().out
    assert "is in use by another runner of this campaign; waiting for it" in out
    assert "was in use by another runner until the deadline; not started" in out
    assert sorted(p.name for p in parent.iterdir()) == [".lock"]  # no second run directory


# A campaign runner in a process of its own: the driver with its tasks inline (no Ray to start, so
# the two runners below meet on the seed's folder within seconds), polling a held folder often.
RUNNER = ("import sys\n"
          "from jaxrl_agents.campaign import driver, task\n"
          "from jaxrl_agents.campaign.executors import InlineTasks\n"
          "from jaxrl_agents.campaign.spec import load_campaign\n"
          "task.LOCK_POLL_S = 0.5\n"
          "sys.exit(driver.run_campaign(load_campaign('probe.toml'), tasks=InlineTasks(),\n"
          "                             progress='off', entries=['base']))\n")


@pytest.mark.slow  # two real runners (~25 s); the default run probes the lock without training
# (test_a_seed_another_runner_holds_is_not_trained_twice)
def test_two_runners_on_one_file_train_the_seed_once(probe):
    """Row 7, with two real runners started 1.5 s apart on one file: one trains the seed, the
    other waits for its folder and then finds the run finished; one run directory, one summary.

    (Before, both trained the seed in two directories, then both stopped on "found 2 run
    directories", and the campaign was blocked.)
    """
    (probe / "probe.toml").write_text(TWO.replace("total_steps = 2048", "total_steps = 1024", 1))
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    runners = []
    for _ in range(2):
        runners.append(subprocess.Popen([sys.executable, "-c", RUNNER], cwd=probe, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        time.sleep(1.5)
    outs = [r.communicate(timeout=600)[0] for r in runners]
    assert [r.returncode for r in runners] == [0, 0], outs
    trained = [out for out in outs if "base seed 1: new run under" in out]
    waited = [out for out in outs if "is in use by another runner of this campaign; waiting for it"
              in out]
    assert len(trained) == 1 and len(waited) == 1 and trained[0] is not waited[0], outs
    assert "new run" not in waited[0] and "resuming" not in waited[0], waited[0]
    assert "campaign: 1 finished" in waited[0], waited[0]  # it went on once the folder was free
    parent = probe / "runs" / "base" / "s1"
    (run,) = [p for p in parent.iterdir() if p.is_dir()]  # one run directory, no set-aside one
    assert run_status(str(run)) == ("finished", 1024, 1024)
    summary = json.loads((probe / "summaries" / "base" / "s1.json").read_text())
    assert summary["status"] == "finished" and summary["run_dir"].endswith(run.name)


def test_a_typo_in_the_second_entry_s_flags_is_found_before_anything_trains(probe, monkeypatch):
    """Row 8: the second entry's ``lrr`` is an error before the first entry trains; no folder."""
    _no_training(monkeypatch)
    text = TWO.rsplit(FLAGS, 1)
    (probe / "probe.toml").write_text(text[0] + FLAGS.replace("n_envs = 4", "lrr = 1e-4, n_envs = 4")
                                      + text[1])
    with pytest.raises(ValueError, match=r"probe.toml: entry 'ft': flags: expected fields of "
                                         r"PPOConfig .* got 'lrr' \(did you mean 'lr'\?\)"):
        _run(load_campaign("probe.toml"))
    (probe / "probe.toml").write_text(text[0] + FLAGS.replace("n_envs = 4", "n_envs = -4") + text[1])
    with pytest.raises(ValueError, match=r"probe.toml: entry 'ft': .*n_envs"):
        _run(load_campaign("probe.toml"))
    assert not (probe / "runs").exists()


@pytest.mark.parametrize("after_s", [1.0, 4.0])  # importing flax and JAX; compiling
def test_a_stop_while_jaxrl_train_starts_is_one_line(tmp_path, after_s):
    """Row 9: SIGINT to a campaign's run before it trained (importing, compiling): one line.

    A signal that landed in JAX's gc callback was printed as "Exception ignored" with its
    traceback, and lost; one before the child's handler was in place was a traceback too.
    """
    child = subprocess.Popen([*task.train_command(), "--algo", "ppo",
                              "--preset", "fast", "--total-steps", "512", "--n-envs", "4",
                              "--n-steps", "128", "--hidden", "16", "16", "--out", str(tmp_path),
                              "--progress", "off", "--env-option", "T=6.0",
                              "--env-option", "pulse_length=120"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    child.send_signal(signal.SIGINT)
    child.send_signal(signal.SIGINT)  # a second signal (the terminal's and the task's) changes nothing
    out, err = child.communicate(timeout=300)
    assert child.returncode in (130, 0), out + err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err
    assert len([line for line in err.splitlines() if line.strip()]) <= 1, err


@pytest.mark.parametrize("make", [
    lambda p: p.mkdir(),  # a directory
    lambda p: p.write_bytes(b"\x00\xff\xfe\x89PNG"),  # a binary file
])
def test_an_odd_campaign_path_is_named(tmp_path, make):
    """Row 10: a binary file or a directory as the campaign file: a message naming it."""
    path = tmp_path / "odd.toml"
    make(path)
    with pytest.raises(ValueError, match=r"expected a campaign file \(TOML") as caught:
        load_campaign(str(path))
    assert "odd.toml" in str(caught.value)


def test_a_summariser_that_fails_on_a_run_names_the_run(probe, monkeypatch, capsys):
    """Row 10: a run whose files the summariser cannot read (a garbage evals.npz): the run named,
    the exit code 1, the other runs go on."""
    campaign = load_campaign("probe.toml")
    parent = probe / campaign.run_parent(campaign.entries[0], 1)

    def fake_train(job, args, *_):
        run = parent / "ppo_x_s1_base"
        run.mkdir(parents=True)
        (run / "config.json").write_text("{}")
        (run / "progress.csv").write_text("step\n512\n")
        (run / "evals.npz").write_bytes(b"garbage")
        return 0, None

    monkeypatch.setattr(task, "_train", fake_train)
    monkeypatch.setattr(task, "_finished_run", lambda d: True)
    (probe / "probe.toml").write_text(TWO.replace(":record_status", ":broken_summariser"))
    assert _run(load_campaign("probe.toml"), entries=["base"]) == 1
    out = capsys.readouterr().out
    assert f"error: summarising {parent / 'ppo_x_s1_base'}".replace(str(probe) + "/", "") in out
    assert "evals.npz: not an .npz file" in out


def test_a_task_starts_its_runs_without_the_fork_warning(tmp_path):
    """Row 11: every run after the first printed ``os.fork() was called ... JAX is multithreaded``;
    a task starts its runs without Python's fork hooks (no preexec_fn), so JAX's never fires."""
    import jax.numpy as jnp

    jnp.ones(3).block_until_ready()  # JAX started in this process, as after a run's summary
    campaign = load_campaign_text(tmp_path, TWO)
    job = task.Job(campaign, "base", 1, str(tmp_path), progress="off",
                   command=(sys.executable, "-c", "pass"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            assert task._train(job, []) == (0, None)
    assert not [w for w in caught if "fork" in str(w.message)], [str(w.message) for w in caught]


def load_campaign_text(folder: pathlib.Path, text: str):
    """The campaign `text`, written to folder/c.toml and loaded."""
    path = folder / "c.toml"
    path.write_text(text)
    return load_campaign(str(path))


@pytest.mark.slow  # four runs (~50 s); test_main_output resumes a --minutes stop bit-identically
def test_minutes_slices_end_bit_identical_to_one_uninterrupted_run(tmp_path, monkeypatch):
    """The guarantee that held: a run advanced in deadline slices (each run stops itself on its
    time budget, on a checkpoint) ends with the uninterrupted run's evaluations and policies."""
    from jaxrl_agents.common.fileio import load_npz

    text = TWO.split("[[entry]]\nname = \"ft\"")[0].replace("total_steps = 2048", "total_steps = 4096")
    records = []
    for name, slices in (("whole", 0), ("sliced", 2)):  # two slices and the finishing run
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)
        (folder / "probe.toml").write_text(text)
        campaign = load_campaign("probe.toml")
        codes = [_run(campaign, deadline=time.time() + 1.0) for _ in range(slices)]
        assert codes == [3] * slices  # each slice stopped short of the budget
        assert _run(campaign) == 0
        run_dir = find_run_dir(campaign.run_parent(campaign.entries[0], 1))
        assert run_status(run_dir) == ("finished", 4096, 4096)
        evals = {k: v for k, v in load_npz(os.path.join(run_dir, "evals.npz")).items()
                 if "wall" not in k and "time" not in k}
        policies = {str(p.relative_to(run_dir)): p.read_bytes()
                    for p in sorted(pathlib.Path(run_dir).glob("*/params*"))}
        records.append((evals, policies))
    (ea, pa), (eb, pb) = records
    assert pa == pb and pa and sorted(ea) == sorted(eb)
    for key in ea:
        np.testing.assert_array_equal(ea[key], eb[key], err_msg=key)


def test_every_committed_summary_of_the_replication_campaign_is_read_as_before():
    """The replication campaign (run by the old runner, and live elsewhere) goes on with
    jaxrl-campaign: its file passes every check, and every committed summary gives a status, so
    none is refused or taken for a run never made."""
    from jaxrl_agents.campaign.committed import committed_status
    from jaxrl_agents.campaign.preflight import check_entries

    root = pathlib.Path(__file__).resolve().parents[2]
    campaign = load_campaign(str(root / "campaigns" / "replication.toml"))
    check_entries(campaign)
    statuses = {}
    for entry, seed in campaign.schedule():
        path = root / campaign.summary_path(entry, seed)
        status = committed_status(str(path))
        statuses[status] = statuses.get(status, 0) + 1
        assert (status is None) == (not path.exists())
    assert statuses.get("finished", 0) >= 60  # the committed chains
