"""``jaxrl-train ARGS`` as a campaign task's child process (``python -c BOOTSTRAP ARGS``).

A campaign task runs each training run in a process of its own (a fresh JAX per run, and a run
the task can stop and the kernel can clean up). This entry point is ``jaxrl-train`` with three
things a child of a Ray worker needs:

- SIGINT is a clean stop whatever the parent's disposition was (a shell starts ``nohup ... &``
  jobs with SIGINT ignored, and an ignored signal stays ignored across exec) or signal mask (a Ray
  worker blocks SIGINT, and a blocked signal stays blocked across exec); SIGTERM stops the same
  way. A second signal while the run stops is ignored, so it cannot break the checkpoint or
  print a traceback from the middle of the cleanup.
- A stop before the run has started (while JAX imports or compiles) is one line, not a traceback;
  a signal that lands in JAX's garbage-collection callback (where Python would print the
  KeyboardInterrupt as "Exception ignored" and drop it) is delivered again a moment later.
- When its parent dies (``kill -9`` of the driver takes the local Ray and its workers with it),
  the run stops itself on the next update boundary, on a checkpoint, instead of training on,
  holding its run directory's lock, while a re-run of the campaign waits for it.

A new run's arguments are ``RECORD_ARGV JSON --spec FILE ...``: the task writes the run's
`run.spec.RunSpec` to FILE, and JSON is the ``jaxrl-train`` command line that builds the same
spec, which config.json records (a summary shows it as the command of the run).

The task spawns it without ``preexec_fn``: Python runs its fork hooks only for a ``preexec_fn``,
and JAX's hook warns on every fork of a process whose JAX has started
(``RuntimeWarning: os.fork() was called``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

__all__ = ["main", "BOOTSTRAP", "TAKE_SIGNALS", "PARENT_POLL_S", "RECORD_ARGV"]

#: Seconds between two looks at whether the parent process is still there.
PARENT_POLL_S = 2.0
#: A leading ``RECORD_ARGV JSON`` pair: the command line (a JSON list) config.json records.
RECORD_ARGV = "--record-argv"


#: Functions where a KeyboardInterrupt is swallowed by Python ("Exception ignored in ...", a
#: traceback, and the run goes on): JAX's garbage-collection callback, finalizers.
_SWALLOWING = frozenset({"_xla_gc_callback", "__del__"})
_RETRY_S = 0.05


def _interrupt(signum, frame):
    # A signal that lands inside a gc callback or a finalizer would raise there, be printed as
    # "Exception ignored" with its traceback, and be lost: deliver it again a moment later.
    f = frame
    while f is not None:
        if f.f_code.co_name in _SWALLOWING:
            threading.Timer(_RETRY_S, os.kill, (os.getpid(), signum)).start()
            return
        f = f.f_back
    # Once: the run is stopping; a second signal (a terminal's Ctrl-C reaching the whole process
    # group, then the task's own SIGINT) must not interrupt the cleanup that writes the checkpoint.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:  # re-parented: the task that owns this run is gone
            print("jaxrl-train: the campaign task that started this run is gone; stopping the run "
                  "on a checkpoint", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
            return


#: The start of `BOOTSTRAP`: SIGINT and SIGTERM are collected in ``early`` and then unblocked. A Ray
#: worker runs with SIGINT blocked in its signal mask, and a child inherits the mask across exec:
#: without the unblocking, the task's SIGINT stayed pending in the run, which trained on until the
#: task's grace period ended and it terminated the run.
TAKE_SIGNALS = (
    "import signal, sys\n"
    "early = []\n"
    "signal.signal(signal.SIGINT, lambda n, f: early.append(n))\n"
    "signal.signal(signal.SIGTERM, lambda n, f: early.append(n))\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))\n")
#: What a campaign task runs as ``python -c BOOTSTRAP ARGS``: it takes the signals before anything
#: heavy is imported (``python -m`` of this module would import the package, flax and JAX first,
#: and a Ctrl-C there is a traceback), then runs `main`.
BOOTSTRAP = TAKE_SIGNALS + (
    "from jaxrl_agents.campaign.child import main\n"
    "sys.exit(main(sys.argv[1:], early))\n")
_STOPPED_EARLY = "jaxrl-train: interrupted before the run started (nothing was written)"


def main(argv: list[str] | None = None, early: list[int] | None = None) -> int:
    """Run ``jaxrl-train`` with `argv` (default: the command line); returns its exit code.

    Args:
        argv: jaxrl-train's arguments, after an optional ``RECORD_ARGV JSON`` pair.
        early: signals received before this function ran (`BOOTSTRAP` collects them): the run
            does not start.
    """
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    argv = list(sys.argv[1:] if argv is None else argv)
    record = None
    if argv[:1] == [RECORD_ARGV]:
        record, argv = json.loads(argv[1]), argv[2:]
    try:
        if early:
            raise KeyboardInterrupt
        from ..console.cli import main as train

        return train(argv, record_argv=record)
    except KeyboardInterrupt:  # before jaxrl-train's own handler was in place: nothing written
        print(_STOPPED_EARLY, file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
