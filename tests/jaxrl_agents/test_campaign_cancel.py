"""A campaign task can be stopped in a process that ignores SIGINT.

The driver stops a task with ``ray.cancel``, which raises KeyboardInterrupt in the task's worker
through ``_thread.interrupt_main``. A campaign started as ``nohup ... &`` hands SIG_IGN to its Ray
workers, and there ``interrupt_main`` does nothing: the task never stopped its run. These tests
use the same call Ray makes; tests/integration/test_campaign.py stops a real background campaign.
"""

import _thread
import signal
import threading
import time

import pytest
from jaxrl_agents.campaign.task import _cancellable


@pytest.fixture
def sigint_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _interrupted_within(seconds: float) -> bool:
    """Whether ``interrupt_main`` (Ray's cancel) raises here within `seconds`."""
    try:
        _thread.interrupt_main()
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            time.sleep(0.01)  # the interrupt is raised between two bytecodes of the main thread
    except KeyboardInterrupt:
        return True
    return False


def test_ray_cancel_reaches_a_task_whose_process_ignores_sigint(sigint_ignored):
    assert not _interrupted_within(0.2)  # what a task saw before: the cancel is lost
    with _cancellable():
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert _interrupted_within(5.0)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the process's choice is restored


def test_a_handler_in_place_is_left_alone():
    def mine(signum, frame):  # noqa: ARG001 (signal handler signature)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, mine)
    try:
        with _cancellable():
            assert signal.getsignal(signal.SIGINT) is mine
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, old)


def test_outside_the_main_thread_nothing_is_changed(sigint_ignored):
    seen = []

    def body():
        with _cancellable():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [signal.SIG_IGN]


def _blocked_in_a_process_started_like_a_ray_worker_s_child(code: str) -> str:
    """The stdout of ``python -c code`` started with SIGINT and SIGTERM blocked, as a Ray worker's
    children are (a blocked signal stays blocked across exec)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM)))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_run_process_unblocks_the_signals_a_ray_worker_blocks():
    from jaxrl_agents.campaign.child import TAKE_SIGNALS

    report = ("import signal\n"
              "print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))\n")
    # What a run started by a Ray worker had: both signals blocked, so its handlers never ran
    assert _blocked_in_a_process_started_like_a_ray_worker_s_child(report) == "[2, 15]\n"
    # The run's first lines unblock them, and a SIGINT reaches its handler
    out = _blocked_in_a_process_started_like_a_ray_worker_s_child(
        TAKE_SIGNALS + report + "signal.raise_signal(signal.SIGINT)\nprint(early)\n")
    assert out == "[]\n[2]\n"
