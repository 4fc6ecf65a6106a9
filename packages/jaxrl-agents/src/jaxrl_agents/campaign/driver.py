"""The campaign driver: one task per (entry, seed) on Ray, the restart rule and the deadline.

Ray schedules the tasks; the driver only submits them and reads their outcomes:

- every selected (entry, seed) is submitted at once, in the file's schedule order; a fine-tuning
  entry's task takes its init_from source's task (same seed) as an argument, so Ray starts it when
  the source has ended (a dependency between tasks), and it starts from the source's run only if
  that one finished;
- the restart rule: a task whose run failed its entry's early test ends with ``restart``; the
  driver sets that run aside (``<run>.attempt-<n>``, kept) and submits the seed again, and its
  dependants with it (the next attempt trains with seed + 1000 n);
- the deadline: each task hands its run the time left (`task`); past it, a task starts nothing.
  Ctrl-C or SIGTERM stops the running tasks (each stops its run on a checkpoint) and the driver.

The driver keeps no state of its own: the run folders are the state, so running the same command
again after an interruption, a ``kill -9`` of the driver, or a lost worker goes on from them
(a lost worker's task is started again by Ray, `executors.MAX_RETRIES`).
"""

from __future__ import annotations

import os
import signal
import time

from ..run.rundir import ATTEMPT_MARK
from .preflight import check_entries
from .spec import Campaign
from .task import Job, Outcome, _set_aside, advance

__all__ = ["run_campaign", "EXIT_OK", "EXIT_FAILED", "EXIT_STOPPED"]

EXIT_OK = 0  # every selected run finished (or was finished elsewhere, or waits for its source)
EXIT_FAILED = 1  # a run or its summary failed, or a summary in the way could not be read
EXIT_STOPPED = 3  # the deadline or a stop ended the campaign before every run finished
_POLL_S = 1.0


def _terminate_as_interrupt(signum, frame):  # noqa: ARG001 (signal handler signature)
    raise KeyboardInterrupt


def _select(campaign: Campaign, entries: list[str] | None, seeds: list[int] | None):
    for name in entries or ():
        campaign.entry(name)  # ValueError naming the choices
    for seed in seeds or ():
        if seed not in campaign.seeds:
            raise ValueError(f"--seed: expected one of the campaign's seeds {list(campaign.seeds)}, "
                             f"got {seed}")
    return [(e.name, s) for e, s in campaign.schedule()
            if (not entries or e.name in entries) and (not seeds or s in seeds)]


def run_campaign(campaign: Campaign, *, deadline: float | None = None,
                 entries: list[str] | None = None, seeds: list[int] | None = None,
                 code_version: str | None = None, progress: str = "lines", tasks=None,
                 address: str | None = None, num_cpus: int | None = None,
                 cpus_per_run: int = 1, command: tuple[str, ...] | None = None) -> int:
    """Start or continue every selected (entry, seed) of `campaign`, each as a task.

    Args:
        campaign: the parsed campaign file.
        deadline: time.time() after which no run starts and running runs stop (None: none).
        entries: run only these entry names (default: all).
        seeds: run only these seeds (default: all).
        code_version: the code version recorded in summaries (default: ``git describe``).
        progress: jaxrl-train's ``--progress``.
        tasks: where the tasks run (`executors.InlineTasks` for tests); default Ray
            (`executors.RayTasks` with `address`, `num_cpus`, `cpus_per_run`).
        address: None for a local Ray; ``auto`` or ``HOST:PORT`` to join a cluster.
        num_cpus: CPUs of the local Ray (default: one run at a time).
        cpus_per_run: CPUs Ray reserves for each run.
        command: the command that runs jaxrl-train (default `task.train_command`).

    Returns:
        0 when every selected run finished, 3 when the deadline or a stop ended the campaign
        first, 1 when a run or its summary failed (the others go on).

    Raises:
        ValueError: naming the file, entry and key, for a bad selection or entry settings, before
            anything trains or any folder is made.
    """
    selected = _select(campaign, entries, seeds)
    campaign.load_summariser()  # a summariser that does not import fails now, not after a run
    check_entries(campaign, {name for name, _ in selected})
    cwd = os.getcwd()
    if tasks is None:
        from .executors import RayTasks

        tasks = RayTasks(address, num_cpus, cpus_per_run, cwd)
    old_term = signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        return _drive(campaign, selected, tasks, dict(
            cwd=cwd, deadline=deadline, progress=progress, code_version=code_version,
            command=command))
    finally:
        signal.signal(signal.SIGTERM, old_term)
        tasks.close()


def _drive(campaign: Campaign, selected, tasks, settings) -> int:
    current: dict[tuple[str, int], object] = {}  # (entry, seed) -> its latest task
    waiting: dict[object, tuple[str, int]] = {}  # running or queued tasks
    chosen = set(selected)

    def submit(key):
        name, seed = key
        entry = campaign.entry(name)
        source = current.get((entry.init_from, seed)) if entry.init_from else None
        job = Job(campaign, name, seed, **settings)
        ref = tasks.submit(advance, job, source) if source is not None else tasks.submit(advance, job)
        current[key] = ref
        waiting[ref] = key

    def dependants(key):
        name, seed = key
        out = []
        for e, s in campaign.schedule():  # schedule order: sources before their fine-tunes
            if s == seed and (e.name, s) in chosen and e.init_from in {name, *[d[0] for d in out]}:
                out.append((e.name, s))
        return out

    for key in selected:
        submit(key)
    codes = {EXIT_OK}
    tally: dict[str, int] = {}
    try:
        while waiting:
            ref, outcome, error = tasks.next_done(list(waiting), _POLL_S)
            if ref is None:
                continue
            key = waiting.pop(ref)
            if current.get(key) is not ref:
                continue  # a task superseded by a restart of its source
            if error is not None:
                print(f"campaign: {key[0]} seed {key[1]}: the task failed: {error}", flush=True)
                codes.add(EXIT_FAILED)
                continue
            codes.add(_report(outcome))
            if outcome.kind != "restart":
                tally[outcome.kind] = tally.get(outcome.kind, 0) + 1
            if outcome.kind == "restart":
                aside = _set_aside(outcome.run_dir, ATTEMPT_MARK, first=0)
                print(f"campaign: {outcome.entry} seed {outcome.seed}: {outcome.message}; moved to "
                      f"{aside}; starting the next attempt", flush=True)
                for again in [key, *dependants(key)]:
                    submit(again)
    except KeyboardInterrupt:
        print("campaign: stopping: each running run stops on its next checkpoint", flush=True)
        tasks.stop(list(waiting))
        until = time.monotonic() + 180.0
        while waiting and time.monotonic() < until:
            try:
                ref, outcome, _ = tasks.next_done(list(waiting), _POLL_S)
            except KeyboardInterrupt:
                continue  # a second Ctrl-C: the runs are stopping already
            if ref is not None:
                waiting.pop(ref, None)
                if outcome is not None:
                    _report(outcome)
        return EXIT_FAILED if EXIT_FAILED in codes else EXIT_STOPPED
    print("campaign: " + ", ".join(f"{n} {kind}" for kind, n in sorted(tally.items()))
          + f" (of {len(selected)} selected run(s))", flush=True)
    # A failure is the news; a stop says the next call goes on.
    return next(c for c in (EXIT_FAILED, EXIT_STOPPED, EXIT_OK) if c in codes)


def _report(outcome: Outcome) -> int:
    """Print a task's outcome (if it is news); its share of the exit code."""
    # "elsewhere" and "refused": the task said it already, with the summary's path.
    if outcome.news and outcome.kind not in ("elsewhere", "refused", "restart"):
        print(f"campaign: {outcome.entry} seed {outcome.seed}: {outcome.message}", flush=True)
    if outcome.kind in ("waiting", "elsewhere", "finished", "restart"):
        return 0
    return {"stopped": EXIT_STOPPED, "refused": EXIT_FAILED}.get(outcome.kind, EXIT_FAILED)
