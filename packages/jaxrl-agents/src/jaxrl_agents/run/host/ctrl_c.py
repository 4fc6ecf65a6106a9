"""Ctrl-C held back while a group of files is written together (`ctrl_c_deferred`).

A checkpoint is several files: each seed's progress.csv and evals.npz, then each seed's
checkpoint.npz. Every file is written atomically, but a KeyboardInterrupt between two of them
would leave a seed group whose checkpoints stand at different updates, or a run whose message
names an older checkpoint than the one on disk. So SIGINT is recorded during the writes and
raised once they are done: the interrupted run stops on a whole checkpoint a few milliseconds
later.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["ctrl_c_deferred"]


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Run the block with SIGINT recorded instead of raised; re-deliver it after the block.

    Outside the main thread (a Ray worker's thread, a test's thread) Python delivers no signal
    there, so the block runs as it is. A handler installed by the caller (or SIG_IGN) is kept:
    after the block a recorded SIGINT goes to that handler, as it would have without the deferral.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):  # ignored, or set outside Python: nothing to defer
        yield
        return
    received: list[tuple[int, object]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        if previous is signal.SIG_DFL:  # the default action of SIGINT: end the process
            signal.raise_signal(signal.SIGINT)
        else:
            previous(*received[0])
