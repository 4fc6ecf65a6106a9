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
