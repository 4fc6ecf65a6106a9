"""What `jaxrl-train` prints: the live line, the summary block, its commands, and --minutes."""

import importlib.util
import io
import os
import pathlib
import tomllib

import pytest

from jaxrl_agents.console import cli, plot
from jaxrl_agents.run import trainer
from jaxrl_agents.run.checkpoint import read_checkpoint
from jaxrl_agents.terminal.commands import EXTRA_MODULES, suggest, suggest_viewer
from jaxrl_agents.terminal.progress import ProgressReporter
from jaxrl_agents.console.run_summary import next_commands, summary_block

from .conftest import PPO_CFG, SEEDS, TOY_ENV, TOY_OPTIONS

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARGS = dict(env_options=TOY_OPTIONS, config=PPO_CFG, seeds=SEEDS, eval_every=3 * 512,
            checkpoint_every=4, progress="off")
# The same run on the command line (--preset paper changes no field of PPO_CFG: same program).
FLAGS = ["--env", TOY_ENV, "--preset", "paper", "--seeds", "1", "2", "--n-envs", "16",
         "--n-steps", "32", "--n-epochs", "4", "--n-minibatches", "4", "--hidden", "32", "32",
         "--lr", "3e-3", "--total-steps", str(512 * 30), "--eval-every", "1536",
         "--checkpoint-every", "4", "--progress", "off"]


def _compare_runs():
    spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "bench" / "compare_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _screen(text: str) -> list[str]:
    """The lines a terminal shows after `text` (carriage return, erase to end of line, newline)."""
    lines, col = [""], 0
    i = 0
    while i < len(text):
        if text.startswith("\x1b[K", i):
            lines[-1] = lines[-1][:col]
            i += 3
            continue
        c = text[i]
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("")
            col = 0
        else:
            lines[-1] = lines[-1][:col] + c + lines[-1][col + 1:]
            col += 1
        i += 1
    return lines


def test_messages_go_above_one_live_line():
    out = io.StringIO()
    rep = ProgressReporter(4096, mode="bar", score_name="JT_min", stream=out)
    rep.update(1024)
    rep.write("[  1024]  minJT=2.5e-01")
    rep.update(2048, 0.25)
    rep.write("[  2048]  minJT=1.0e-02  new best JT_min < 1e-1")
    rep.update(3072, 0.5)
    rep.update(4096, 0.125)
    rep.close()
    screen = _screen(out.getvalue())
    # Each message on its own line, in order, and below them one status line (the last one).
    assert screen[:2] == ["[  1024]  minJT=2.5e-01", "[  2048]  minJT=1.0e-02  new best JT_min < 1e-1"]
    assert screen[2].startswith("step 4,096/4,096 (100.0%)")
    assert screen[2].endswith("eval JT_min=1.250e-01")  # the latest is also the best
    assert screen[3:] == [""]


def test_the_live_line_shows_the_best_score_beside_the_latest():
    rep = ProgressReporter(100, mode="off", score_name="return", score_mode="max")
    rep.update(50, 3.0)
    rep.update(100, 2.0)
    assert rep.status().endswith("eval return=2.000e+00 (best 3.000e+00)")


def test_the_best_before_the_reporter_stays_the_best_until_beaten():
    rep = ProgressReporter(100, 40, mode="off", score_name="JT_min", best=1e-3)
    rep.update(50, 5e-3)
    assert rep.status().endswith("eval JT_min=5.000e-03 (best 1.000e-03)")
    rep.update(60, 1e-4)
    assert rep.status().endswith("eval JT_min=1.000e-04")  # the latest is the new best


def test_a_resumed_run_s_line_starts_from_the_run_s_best(tmp_path, monkeypatch):
    """The live line's best after a resume is the run's (restored), not only the new session's:
    the lowest JT_min (the toy env's score) of the evaluations before the interruption."""
    from jaxrl_agents.run import loop
    from jaxrl_agents.run.run_files import read_progress

    cut = trainer.train("ppo", TOY_ENV, out=str(tmp_path), stop_after=8, **ARGS)
    given = []
    monkeypatch.setattr(loop, "ProgressReporter",
                        lambda *a, **k: given.append(k["best"]) or ProgressReporter(*a, **k))
    trainer.resume(cut.run_dirs[0], progress="off", stop_after=1)
    scores = [float(row["eval_JT_min"]) for d in cut.run_dirs
              for row in read_progress(os.path.join(d, "progress.csv"))[:8] if "eval_JT_min" in row]
    assert len(scores) >= 2 and given == [min(scores)]


def test_plain_lines_without_a_terminal():
    out = io.StringIO()  # not a TTY: mode None chooses plain lines
    rep = ProgressReporter(2048, stream=out, line_every=1)
    rep.update(1024)
    rep.write("an evaluation")
    rep.update(2048, 0.5)
    rep.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("step 1,024/2,048 (50.0%)  (compiling)")
    assert lines[1] == "an evaluation"
    assert lines[2].startswith("step 2,048/2,048 (100.0%)") and "steps/s" in lines[2]


def test_commands_are_spelled_for_uv_and_the_root_declares_the_extras(monkeypatch):
    monkeypatch.setenv("UV", "/usr/bin/uv")
    assert suggest(["jaxrl-plot", "runs/a b"], extra="plot").text == \
        "uv run --extra plot jaxrl-plot 'runs/a b'"
    assert suggest_viewer("runs").text == "uv run --with tensorboard tensorboard --logdir runs"
    # `uv run --extra X` reads the workspace root's table: it must name jaxrl-agents' extras.
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    member = tomllib.loads((ROOT / "packages/jaxrl-agents/pyproject.toml").read_text())["project"]
    for extra in EXTRA_MODULES:  # every extra a command may name (gymnax too: issue 37 row 3)
        assert root["optional-dependencies"][extra] == [f"jaxrl-agents[{extra}]"]
        assert extra in member["optional-dependencies"]


def test_commands_are_spelled_for_pip_without_uv(monkeypatch):
    monkeypatch.delenv("UV", raising=False)
    assert suggest(["jaxrl-plot", "r"], extra="plot").text == "jaxrl-plot r"  # matplotlib is here
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else find_spec(name, *a))
    assert suggest(["jaxrl-plot", "r"], extra="plot").text == \
        'pip install "jaxrl-agents[plot]" && jaxrl-plot r'


def test_minutes_stops_on_a_checkpoint_and_the_printed_commands_work(tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.setenv("UV", "/usr/bin/uv")
    full = trainer.train("ppo", TOY_ENV, out=str(tmp_path / "full"), **ARGS)
    # A budget of a millionth of a minute ends with the first update (it includes compiling; a
    # run of 30 updates calls them one by one: run/host/update_blocks.py).
    out = tmp_path / "cut"
    assert cli.main([*FLAGS, "--out", str(out), "--minutes", "1e-6"]) == 0
    printed = capsys.readouterr().out
    dirs = sorted(str(d) for d in out.iterdir())
    _, header = read_checkpoint(os.path.join(dirs[0], "checkpoint.npz"))
    assert header["meta"]["update"] == 1  # stopped early, on a checkpoint (the cadence is 4)
    assert "stopped at the time budget (--minutes 1e-06): 512 of 15,360 steps" in printed
    commands = {label: cmd for label, cmd in next_commands(dirs[0], finished=False, minutes=1e-6)}
    assert f"  plot   {commands['plot'].text}" in printed
    assert f"  resume {commands['resume'].text}" in printed
    assert commands["resume"].prefix == ("uv", "run")
    assert commands["resume"].argv == ("jaxrl-train", "--resume", dirs[0], "--minutes", "1e-06")

    # The printed commands, run as printed (uv's prefix runs the same console scripts): the
    # resume continues the run (bit-identically: the same files as the uninterrupted run)...
    assert cli.main(list(commands["resume"].argv[1:])) == 0
    assert "stopped at the time budget" in capsys.readouterr().out  # one more update: 2 of 30
    assert cli.main(["--resume", dirs[0], "--progress", "off"]) == 0  # the rest
    assert "run finished: 15,360 of 15,360 steps" in capsys.readouterr().out
    compare = _compare_runs()
    for a, b in zip(full.run_dirs, dirs):
        n, diffs, _ = compare.compare_run(a, b)
        assert n > 0 and diffs == [], diffs
    # ... and the plot command plots it.
    plot_cmd = commands["plot"]
    assert plot_cmd.prefix == ("uv", "run", "--extra", "plot")
    assert plot.main(list(plot_cmd.argv[1:])) == 0
    assert os.path.isfile(os.path.join(dirs[0], "plots", "learning_curve.png"))

    block = summary_block([dirs[0]], [[{"step": "15360", "wall": "2.0"}]], ["x at step 1"], True)
    assert block.splitlines()[0] == "run finished: 15,360 of 15,360 steps in 2s (7,680 steps/s, compilation included)"
    assert "resume" not in block and "  best   x at step 1" in block


def test_the_viewer_command_parses_with_tensorboard(tmp_path):
    program = pytest.importorskip("tensorboard.program")
    cmd = suggest_viewer(str(tmp_path))
    tb = program.TensorBoard()
    tb.configure(argv=list(cmd.argv))
    assert tb.flags.logdir == str(tmp_path)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bad_minutes_are_refused_before_anything_starts(tmp_path, capsys, value):
    assert cli.main(["--env", TOY_ENV, "--out", str(tmp_path / "x"), f"--minutes={value}"]) == 2
    assert "--minutes: expected a positive number of minutes" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), True, "3"])
def test_a_bad_time_budget_is_named(tmp_path, bad):
    with pytest.raises(ValueError, match="time_budget: expected a positive finite number"):
        trainer.train("ppo", TOY_ENV, out=str(tmp_path), time_budget=bad, **ARGS)
    assert not os.listdir(tmp_path)


def test_ctrl_c_prints_one_line_with_the_resume_command_and_the_resume_finishes(tmp_path):
    """Issue 37 row 8: a SIGINT gave exit 130 and a 30-line KeyboardInterrupt traceback.

    Now one line names the checkpoint a resume starts from and the command; that command (parsed
    with the real parser, then run) finishes the run. (That a resume from a checkpoint gives the
    uninterrupted run's files is checked by the --minutes test above and test_trainer's kill -9.)
    """
    import shlex
    import signal

    from .killed_run import jaxrl_train, train_then_signal

    long = [a if a != str(512 * 30) else str(512 * 200) for a in FLAGS]  # long enough to catch
    dirs, code, err = train_then_signal(long, tmp_path / "cut", signal.SIGINT)
    assert code == 130
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    run_dir = str(dirs[0])
    _, header = read_checkpoint(os.path.join(run_dir, "checkpoint.npz"))
    assert lines[0].startswith(f"jaxrl-train: interrupted; {run_dir} resumes from its checkpoint "
                               f"at step {header['meta']['step']:,}")
    argv = shlex.split(lines[0].rsplit("(bit-identically): ", 1)[1])
    argv = argv[argv.index("jaxrl-train") + 1:]
    assert cli.build_parser("ppo").parse_args(argv).resume == run_dir
    assert jaxrl_train([*argv, "--progress", "off"]) == 0  # as the user would: a new process
    _, header = read_checkpoint(os.path.join(run_dir, "checkpoint.npz"))
    assert header["meta"]["step"] == 512 * 200  # the resume trained the run to its end


def test_ctrl_c_before_a_run_exists_is_one_line():
    """Without a run directory there is nothing to resume, and the line says so."""
    assert cli.interrupted_line(KeyboardInterrupt()) == \
        "jaxrl-train: interrupted before the run started (nothing was written)"
