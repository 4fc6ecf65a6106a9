"""One campaign task: start, continue or skip the run of one (entry, seed), and summarise it.

`advance` is what a Ray task runs (`executors`); the driver (`driver`) submits one per (entry,
seed) and reads its `Outcome`. Each (entry, seed) owns one folder, ``<runs>/<entry>/s<seed>/``,
passed to ``jaxrl-train --out``; the run directory jaxrl-train creates there is the run. So a
task needs no state but the folders: they say what exists, and each run's checkpoint says how far
it got. The task holds the folder's lock (`common.fileio.lock_directory`) while it works, so two
runners of one campaign never train one seed twice: the second waits for the first.

- no run directory: a new run of the entry's `run.spec.RunSpec` (`spec.Entry.run_spec`),
  ``jaxrl-train --spec FILE`` (config.json records the flags that build the same spec);
- a run directory with a checkpoint short of its budget: ``jaxrl-train --resume`` (bit-identical
  to an uninterrupted run); ``--total-steps`` extends it when the entry's budget grew (a budget
  lowered in the file is said, and the run keeps its own: a run's budget never shrinks);
- a run directory that never reached its first checkpoint: moved aside to
  ``<name>.incomplete-<n>`` (nothing is deleted) and started again;
- a finished run: summarised again only if its summary is missing;
- no run directory but a committed summary (the run was made on another machine): left as it is
  and skipped; a summary that cannot be read or has no status is named and skipped too, never
  replaced by a new run's;
- a run directory another process holds (its lock): waited for.

A staged entry (its preset a staged recipe) runs each seed as one staged run (``jaxrl-train
--preset <recipe>``: a recipe is several runs, each stage's RunSpec built by the staged run),
continued with ``jaxrl-train --resume <top directory>``; the recipe has its own early test.

What a run directory holds (status, progress rows, the early test's verdict) is read through
`run.rundir.RunDir` (`rundirs.read_run`); `rundirs` only finds a seed's run in its folder.

The deadline is the driver's: the task passes the seconds left to the run as ``jaxrl-train
--minutes``, so the run stops itself on an update boundary with a checkpoint (no signal, no
traceback); a run still going `STOP_GRACE_S` after the deadline is stopped with SIGINT. The
restart rule is the driver's too: a run that fails its entry's early test ends its task with
``Outcome.kind == "restart"``, and the driver sets it aside and submits the next attempt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from ..common.fileio import DirectoryLockedError, lock_directory
from ..run.rundir import INCOMPLETE_MARK, attempt_dirs, set_aside_dirs
from ..stages.staged_run import read_staged_run
from . import deadline as deadlines
from .committed import committed_status
from .rundirs import find_run_dir, find_staged_dir, read_run, staged_has_progress
from .spec import Campaign, Entry

__all__ = ["Job", "Outcome", "advance", "train_command", "STOP_GRACE_S", "LOCK_POLL_S"]

STOP_GRACE_S = 120.0  # after SIGINT (or past the deadline), seconds before the run is terminated
LOCK_POLL_S = 5.0  # seconds between two looks at a folder another runner holds


def train_command() -> tuple[str, ...]:
    """The command that runs ``jaxrl-train`` (its arguments follow) as a task's child."""
    from .child import BOOTSTRAP

    return (sys.executable, "-c", BOOTSTRAP)


@dataclasses.dataclass(frozen=True)
class Job:
    """What a task needs to advance one (entry, seed); plain data, so Ray can ship it.

    Attributes:
        campaign: the parsed campaign file.
        entry: the entry's name.
        seed: the campaign seed.
        cwd: the driver's working directory (the campaign's relative paths start there).
        deadline: time.time() of the campaign's deadline, or None.
        progress: ``jaxrl-train --progress``.
        code_version: recorded in summaries (None: the summariser's ``git describe``).
        command: the command that runs jaxrl-train (None: `train_command` on the worker); a new
            run's arguments start with `child.RECORD_ARGV` and its JSON, which `child.main`
            takes off.
    """

    campaign: Campaign
    entry: str
    seed: int
    cwd: str
    deadline: float | None = None
    progress: str = "lines"
    code_version: str | None = None
    command: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        """``<entry> seed <seed>``, the start of every line about this run."""
        return f"{self.entry} seed {self.seed}"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a task left its (entry, seed).

    Attributes:
        entry, seed: which run.
        kind: ``finished`` (dependants may start from it), ``elsewhere`` (summarised, its run
            directory on another machine), ``stopped`` (the deadline or a stop; it resumes),
            ``restart`` (failed its early test with attempts left: the driver sets it aside),
            ``waiting`` (its init_from source has not finished), ``refused`` (a summary in the way
            that cannot be read) or ``failed`` (jaxrl-train or the summariser failed).
        message: one line for the user.
        run_dir: the run (or staged run's top) directory, if there is one.
        news: whether this call did something worth a line (a run finished long ago, or one not
            started at the deadline, is only counted: a campaign has a hundred of them).
    """

    entry: str
    seed: int
    kind: str
    message: str
    run_dir: str | None = None
    news: bool = True


def _say(job: Job, text: str) -> None:
    print(f"campaign: {job.label}: {text}", flush=True)


def _outcome(job: Job, kind: str, message: str, run_dir: str | None = None,
             news: bool = True) -> Outcome:
    return Outcome(job.entry, job.seed, kind, message, run_dir, news)


def advance(job: Job, source: Outcome | None = None) -> Outcome:
    """Start, continue or skip the run of (`job.entry`, `job.seed`); summarise it when it stops.

    Args:
        job: the run and the campaign's settings.
        source: the outcome of the entry's init_from source for the same seed (a Ray dependency:
            this task starts when that one has ended), or None.

    Returns:
        The `Outcome`.
    """
    os.chdir(job.cwd)  # the task's worker is the campaign's: relative paths are the driver's
    campaign = job.campaign
    entry = campaign.entry(job.entry)
    parent = campaign.run_parent(entry, job.seed)
    skip = _committed_elsewhere(job, entry, parent)
    if skip is not None:
        return skip
    if source is not None and source.kind != "finished":
        return _outcome(job, "waiting", f"waits for {entry.init_from} seed {job.seed} to finish "
                        f"here (it is {source.kind})", news=source.kind != "stopped")
    if deadlines.passed(job.deadline):
        return _outcome(job, "stopped", "not started: the deadline has passed", news=False)
    created = not os.path.isdir(parent)
    os.makedirs(parent, exist_ok=True)
    try:
        with _cancellable(), _hold(job, parent):
            if entry.staged:
                return _advance_staged(job, entry, parent)
            return _advance_runs(job, entry, parent)
    except _DeadlineWhileWaiting as e:
        return _outcome(job, "stopped", str(e))
    finally:
        if created:
            _remove_if_empty(parent)


class _DeadlineWhileWaiting(Exception):
    pass


@contextlib.contextmanager
def _cancellable():
    """Let a stop reach this task while it runs, even in a process that ignores SIGINT.

    The driver stops a task with ``ray.cancel``, which raises KeyboardInterrupt in the task through
    ``_thread.interrupt_main``; that does nothing where SIGINT is ignored, and a campaign started in
    the background (``nohup ... &``) hands SIG_IGN to its Ray workers. Such a task never stopped
    its run: the driver waited out its grace period and Ray's shutdown killed the worker. Python's
    own handler is put in place for the task and the old disposition restored after it (in-process
    tasks run in the driver, whose Ctrl-C is its user's choice).
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _hold(job: Job, parent: str):
    """Hold the seed folder's lock; wait while another runner holds it (until the deadline)."""
    said = False
    while True:
        try:
            with lock_directory(parent):
                yield
            return
        except DirectoryLockedError:
            if not said:
                _say(job, f"{parent} is in use by another runner of this campaign; waiting for it")
                said = True
            if deadlines.passed(job.deadline):
                raise _DeadlineWhileWaiting(f"{parent} was in use by another runner until the "
                                            f"deadline; not started") from None
            time.sleep(LOCK_POLL_S)


def _remove_if_empty(parent: str) -> None:
    """Remove a seed folder this task created that holds nothing but its lock file.

    A run that failed before jaxrl-train made its directory (a bad env option) leaves no empty
    folder behind.
    """
    from ..common.fileio import LOCK_FILE

    try:
        if set(os.listdir(parent)) <= {LOCK_FILE}:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(parent, LOCK_FILE))
            os.rmdir(parent)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(os.path.normpath(parent)))  # the entry's, if empty too
    except OSError:
        pass


def _committed_elsewhere(job: Job, entry: Entry, parent: str) -> Outcome | None:
    """The outcome of a seed summarised but without its run here; None when it is not one.

    Only a folder with no run of any kind in it (live or set aside) means the run lives on
    another machine; a summary that exists is never taken for no summary.
    """
    campaign = job.campaign
    here = (find_staged_dir(parent) if entry.staged else find_run_dir(parent)) is not None
    if here or set_aside_dirs(parent):
        return None
    path = campaign.summary_path(entry, job.seed)
    try:
        status = committed_status(path)
    except ValueError as e:
        message = (f"{e}; its run directory is not on this machine, so it is kept as it is and "
                   f"the seed is skipped (fix the summary, or remove it to start the run afresh)")
        _say(job, message)
        return _outcome(job, "refused", message)
    if status is None:
        return None
    how = ("finished" if status == "finished" else
           f"{status}, and cannot resume without its run directory (remove its summary to start "
           f"it afresh)")
    message = f"summarised in {path} but its run directory is not on this machine; {how}; skipped"
    _say(job, message)
    return _outcome(job, "elsewhere", message)


def _advance_runs(job: Job, entry: Entry, parent: str) -> Outcome:
    """A seed of an entry of single runs (the lock of `parent` held)."""
    run_dir = find_run_dir(parent)
    status = done = budget = None
    if run_dir is not None:
        _wait_while_in_use(job, run_dir)
        now = read_run(run_dir).status()
        status, done, budget = now.state, now.steps, now.budget
        if _failed_test(entry, run_dir):
            return _outcome(job, "restart", f"{run_dir} did not reach J_T < "
                            f"{entry.restart.below:g} within {entry.restart.within_steps:,} "
                            f"steps", run_dir)
        if status == "incomplete":
            _say(job, f"{run_dir} never reached a checkpoint; moved to {_set_aside(run_dir)}")
            run_dir = None
    if run_dir is None:
        source = _source_dir(job.campaign, entry, job.seed)
        if entry.init_from is not None and source is None:
            return _outcome(job, "waiting", f"waits for {entry.init_from} seed {job.seed} to "
                            f"finish here")
        attempt = len(attempt_dirs(parent))
        train_seed = entry.attempt_seed(job.seed, attempt)
        _say(job, f"new run under {parent}"
             + (f" (attempt {attempt + 1}, seed {train_seed})" if attempt else ""))
        code, why = _train_spec(job, entry, train_seed, parent, source,
                                _failed_watch(entry, parent))
    else:
        wanted = _budget(run_dir, entry)
        if wanted < budget:
            _say(job, f"the file's total_steps ({entry.total_steps:,}) is below the budget of "
                 f"{run_dir} ({budget:,} steps, which it keeps: a run's budget never shrinks); "
                 f"to end it at {wanted:,} steps, move it away and start it afresh")
        if status == "finished" and budget >= wanted:
            return _finished(job, entry, run_dir)
        args = ["--resume", run_dir]
        if wanted > budget:
            args += ["--total-steps", str(entry.total_steps)]
        _say(job, f"resuming {run_dir} at step {done:,} of {max(budget, wanted):,}")
        code, why = _train(job, args, _failed_watch(entry, parent))
    run_dir = find_run_dir(parent)
    if why == "failed" or (why is None and run_dir is not None and _failed_test(entry, run_dir)):
        return _outcome(job, "restart", f"{run_dir} failed its early test (J_T < "
                        f"{entry.restart.below:g} within {entry.restart.within_steps:,} steps)",
                        run_dir)
    summarised = None
    if run_dir is not None and os.path.isfile(os.path.join(run_dir, "progress.csv")):
        summarised = _summarise(job, entry, run_dir)
    return _ended(job, code, why, run_dir, summarised,
                  run_dir is not None and _finished_run(run_dir))


def _advance_staged(job: Job, entry: Entry, parent: str) -> Outcome:
    """A seed of a staged entry: one staged run (the lock of `parent` held)."""
    top = find_staged_dir(parent)
    if top is not None:
        _wait_while_in_use(job, top)
        record = read_staged_run(top)
        if record["finished"]:
            return _finished(job, entry, top)
        done = sum(int(a["steps"]) for a in record["attempts"])
        _say(job, f"resuming the staged run {top} ({len(record['attempts'])} attempt(s) so far, "
             f"{done:,} steps recorded)")
        code, why = _train(job, ["--resume", top])
    else:
        _say(job, f"new staged run ({entry.preset}) under {parent}")
        code, why = _train(job, entry.train_args(job.seed, parent, None))
    top = find_staged_dir(parent)
    summarised = None
    if top is not None and staged_has_progress(top):
        summarised = _summarise(job, entry, top)
    return _ended(job, code, why, top, summarised,
                  top is not None and bool(read_staged_run(top)["finished"]))


def _finished(job: Job, entry: Entry, run_dir: str) -> Outcome:
    """A run finished before this call: summarised only if its summary is missing."""
    if not os.path.isfile(job.campaign.summary_path(entry, job.seed)):
        _say(job, "finished; summarising it (the summariser may take minutes)")
        if _summarise(job, entry, run_dir) is False:
            return _outcome(job, "failed", f"summarising {run_dir} failed (see above)", run_dir)
        return _outcome(job, "finished", f"finished ({run_dir})", run_dir)
    return _outcome(job, "finished", f"finished ({run_dir})", run_dir, news=False)


def _ended(job: Job, code: int, why: str | None, run_dir: str | None, summarised: bool | None,
           finished: bool) -> Outcome:
    if summarised is False:
        return _outcome(job, "failed", f"summarising {run_dir} failed (see above)", run_dir)
    if finished:
        return _outcome(job, "finished", f"finished ({run_dir})", run_dir)
    if why == "interrupted" or (code in (0, 130) and run_dir is not None):
        return _outcome(job, "stopped", f"stopped; {run_dir} resumes from its last checkpoint on "
                        f"the next run of the campaign", run_dir)
    if code == 0:
        return _outcome(job, "failed", "jaxrl-train exited with 0 but left no run directory")
    return _outcome(job, "failed", f"jaxrl-train exited with {code} (its error is above)", run_dir)


def _summarise(job: Job, entry: Entry, run_dir: str) -> bool:
    """Write the summary with the campaign's summariser; False (and a line naming the run) if it failed.

    One unreadable file of a run (a garbage evals.npz) must not end every other run of the campaign.
    """
    _say(job, "summarising it")
    try:
        path = job.campaign.load_summariser()(job.campaign, entry, job.seed, run_dir,
                                              job.code_version)
    except Exception as e:  # noqa: BLE001 (the summariser is the user's: report, never crash)
        _say(job, f"error: summarising {run_dir} with {job.campaign.summariser} failed: "
             f"{type(e).__name__}: {e}")
        return False
    _say(job, f"summary {path}")
    return True


def _set_aside(run_dir: str, mark: str = INCOMPLETE_MARK, first: int = 1) -> str:
    """Rename `run_dir` to ``<run_dir><mark><n>`` and return that path (nothing is deleted).

    n is the first free number from `first`: ``.incomplete-1`` ..., or ``.attempt-0`` ... in
    attempt order.
    """
    run_dir = os.path.normpath(run_dir)
    n = first
    while os.path.exists(f"{run_dir}{mark}{n}"):
        n += 1
    target = f"{run_dir}{mark}{n}"
    os.rename(run_dir, target)
    return target


def _in_use(run_dir: str) -> bool:
    """Whether another process holds `run_dir`'s lock (a run started by hand, or an orphaned one)."""
    try:
        with lock_directory(run_dir):
            return False
    except DirectoryLockedError:
        return True


def _wait_while_in_use(job: Job, run_dir: str) -> None:
    if _in_use(run_dir):
        _say(job, f"{run_dir} is in use by another process; waiting for it")
    while _in_use(run_dir):
        if deadlines.passed(job.deadline):
            raise _DeadlineWhileWaiting(f"{run_dir} was in use by another process until the "
                                        f"deadline; not resumed")
        time.sleep(LOCK_POLL_S)


def _stop(job: Job, child: subprocess.Popen) -> None:
    """Ask the run to stop between two updates (SIGINT); terminate it if it does not."""
    child.send_signal(signal.SIGINT)
    until = time.monotonic() + STOP_GRACE_S
    while True:
        try:
            child.wait(max(until - time.monotonic(), 0.0))
            return
        except subprocess.TimeoutExpired:  # the last checkpoint is intact; resume recomputes the rest
            _say(job, f"the run did not stop within {STOP_GRACE_S:.0f} s of SIGINT; terminating it "
                 f"(it resumes from its last checkpoint)")
            child.terminate()
            child.wait()
            return
        except KeyboardInterrupt:
            # A second signal while the run stops (a terminal's Ctrl-C, a forwarded SIGTERM):
            # keep waiting, so the run ends on its own checkpoint and is summarised.
            continue


def _train_spec(job: Job, entry: Entry, seed: int, parent: str, source: str | None,
                failed: Callable[[], bool] | None) -> tuple[int, str | None]:
    """Train a new run of `entry`'s `RunSpec` for training seed `seed` (``jaxrl-train --spec``).

    The spec goes to the run as a JSON file of its own, removed when the run has ended (its
    config.json holds the spec from then on); config.json records the equivalent flags.

    Returns:
        As `_train`.
    """
    spec = entry.run_spec(seed, parent, source)
    fd, path = tempfile.mkstemp(prefix=f"jaxrl-campaign-{entry.name}-s{seed}-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(spec.to_dict(), f)
        return _train(job, ["--spec", path], failed, entry.train_args(seed, parent, source))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _train(job: Job, args: list[str], failed: Callable[[], bool] | None = None,
           record: list[str] | None = None) -> tuple[int, str | None]:
    """Run ``jaxrl-train ARGS`` until it exits; stop it if `failed()` turns true.

    The deadline reaches the run as ``--minutes`` (the seconds left): it stops itself on an
    update boundary, on a checkpoint. A run still going `STOP_GRACE_S` past the deadline, or a
    KeyboardInterrupt in this task (Ctrl-C; ``ray.cancel``), stops it with SIGINT.

    Args:
        job: the run's task.
        args: jaxrl-train's arguments (``--progress`` and ``--minutes`` are added).
        failed: polled while the run trains; true stops it.
        record: for ``--spec FILE``, the flags that build the same spec: a new run's config.json
            records them as its command (`child.RECORD_ARGV`).

    Returns:
        (exit code, why it was stopped: None, "interrupted" or "failed").
    """
    from .child import RECORD_ARGV

    left = deadlines.seconds_left(job.deadline)
    budget = [] if left is None else ["--minutes", repr(max(left, 1.0) / 60.0)]
    shown = ["--progress", job.progress, *budget]
    record = [] if record is None else [RECORD_ARGV, json.dumps(["jaxrl-train", *record, *shown])]
    command = [*(job.command or train_command()), *record, *args, *shown]
    env = dict(os.environ)
    # The env factory's module may live in the campaign's directory (as for jaxrl-train there).
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
        [job.cwd, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]))
    # No preexec_fn: with one, Python runs its fork hooks, and JAX's warns once JAX has started.
    child = subprocess.Popen(command, cwd=job.cwd, env=env)
    try:
        while child.poll() is None:
            if job.deadline is not None and time.time() >= job.deadline + STOP_GRACE_S:
                _say(job, "still running past the deadline; stopping it between two updates")
                _stop(job, child)
                return child.returncode, "interrupted"
            if failed is not None and failed():
                _stop(job, child)
                return child.returncode, "failed"
            # wait up to a second for the exit, not a fixed second: a run that ends is seen at once
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=1.0)
    except KeyboardInterrupt:
        _stop(job, child)
        return child.returncode, "interrupted"
    return child.returncode, None


def _failed_test(entry: Entry, run_dir: str) -> bool:
    """Whether `run_dir` failed its entry's early test and its seed has attempts left."""
    rule = entry.restart
    if rule is None:
        return False
    parent = os.path.dirname(os.path.normpath(run_dir))
    return (len(attempt_dirs(parent)) < rule.attempts - 1
            and read_run(run_dir).verdict(rule.below, rule.within_steps) == "fail")


def _failed_watch(entry: Entry, parent: str) -> Callable[[], bool] | None:
    """A check, polled while a run trains, that it has failed its entry's early test.

    Once the run is past its test (passed, or no attempts left) the check stops reading its files.
    """
    if entry.restart is None:
        return None
    decided = False

    def failed() -> bool:
        nonlocal decided
        run_dir = None if decided else find_run_dir(parent)
        if run_dir is None:
            return False
        rule = entry.restart
        verdict = read_run(run_dir).verdict(rule.below, rule.within_steps)  # one read
        attempts_left = len(attempt_dirs(parent)) < rule.attempts - 1
        decided = not attempts_left or verdict == "pass"
        return attempts_left and verdict == "fail"

    return failed


def _budget(run_dir: str, entry: Entry) -> int:
    """The entry's budget in whole updates of the run's rollout size."""
    cfg = read_run(run_dir).spec.replace(config={"total_steps": entry.total_steps}).algo_config()
    return cfg.n_updates * cfg.rollout_size


def _source_dir(campaign: Campaign, entry: Entry, seed: int) -> str | None:
    """The finished run a fine-tuning entry starts from for `seed` (None: not there yet)."""
    if entry.init_from is None:
        return None
    source = find_run_dir(campaign.run_parent(campaign.entry(entry.init_from), seed))
    return source if source is not None and _finished_run(source) else None


def _finished_run(run_dir: str) -> bool:
    """Whether the run in `run_dir` trained its whole budget (its checkpoint says so)."""
    return read_run(run_dir).status().state == "finished"
