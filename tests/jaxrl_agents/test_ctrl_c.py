"""Ctrl-C while a checkpoint is written: held back until the seed group's files are all written.

CI once caught a SIGINT landing between the atomic replace of checkpoint.npz and the loop's note of
it: the one-line message named the checkpoint before the one on disk. With two seeds the same
interrupt could leave their checkpoints at different updates.
"""

import os
import signal
import threading

import pytest

from jaxrl_agents.run import loop, trainer
from jaxrl_agents.run.checkpoint import read_checkpoint
from jaxrl_agents.run.host.ctrl_c import ctrl_c_deferred
from jaxrl_agents.run.results import TrainingInterrupted

from .conftest import PPO_CFG, SEEDS, TOY_ENV, TOY_OPTIONS


def test_a_ctrl_c_inside_the_block_is_raised_after_it():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("finished")  # not cut
    assert done == ["finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_nothing_is_raised_and_the_handler_is_restored():
    with ctrl_c_deferred():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_callers_handler_receives_the_deferred_signal():
    seen = []
    old = signal.signal(signal.SIGINT, lambda n, f: seen.append(n))
    try:
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGINT)
            assert seen == []  # held back inside
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, old)


def test_an_ignored_sigint_stays_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


def test_outside_the_main_thread_the_block_runs_as_it_is():
    handlers = []

    def body():
        with ctrl_c_deferred():
            handlers.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert handlers == [signal.default_int_handler]


def test_a_ctrl_c_during_a_two_seed_checkpoint_stops_on_the_whole_group(tmp_path, monkeypatch):
    """The signal arrives while seed 1's checkpoint is written: seed 2's is written too, both at
    the update the interruption names."""
    real_save = loop.save_checkpoint
    calls = []

    def save_then_interrupt(path, tree, meta):
        real_save(path, tree, meta)
        calls.append(meta["update"])
        if len(calls) == 1 and meta["update"] == 2:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(loop, "save_checkpoint", save_then_interrupt)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.train("ppo", TOY_ENV, env_options=TOY_OPTIONS, config=PPO_CFG, seeds=SEEDS,
                      out=str(tmp_path), eval_every=512, checkpoint_every=2, progress="off")
    dirs = info.value.run_dirs
    assert len(dirs) == 2 == len(SEEDS)
    steps = {read_checkpoint(os.path.join(d, "checkpoint.npz"))[1]["meta"]["step"] for d in dirs}
    assert steps == {info.value.checkpoint_step} and calls == [2, 2]
