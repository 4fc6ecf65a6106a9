"""Start or continue every run of a campaign, one at a time, and summarise each when it stops.

Each (entry, seed) owns one folder, ``<runs>/<entry>/s<seed>/``, passed to ``jaxrl-train --out``;
the run directory jaxrl-train creates there is the run. So the runner needs no state of its own:
the folders say what exists, and each run's checkpoint says how far it got.

- no run directory: a new run (``jaxrl-train --algo ... --out <folder>``);
- a run directory with a checkpoint short of its budget: ``jaxrl-train --resume`` (bit-identical
  to an uninterrupted run); ``--total-steps`` extends it when the entry's budget grew;
- a run directory that never reached its first checkpoint: moved aside to
  ``<name>.incomplete-<n>`` (nothing is deleted) and started again;
- a finished run: summarised again only if its summary is missing;
- no run directory but a committed summary (the run was made on another machine or in an earlier
  session, whose run directories are gone): left as it is. A finished one is skipped; an interrupted
  one cannot resume, so it is reported and skipped too (remove its summary to start it afresh) —
  the runner never replaces a committed summary by a new run's without being told;
- a run directory another process holds (its lock): waited for, then treated as above.

A staged entry (its preset a staged recipe, `spec.Entry.staged`) runs each seed as one staged run,
``jaxrl-train --preset <recipe> --seed S --out <folder>``, and continues it with ``jaxrl-train
--resume <top directory>``; the recipe has its own stages and early test, so the campaign's restart
rule and its setting aside of never-checkpointed runs do not apply to it (the staged run sets aside
and reruns its own attempts). The rest is as above: finished, summarised elsewhere, in use.

A deadline (``--minutes`` or ``--until``), SIGINT or SIGTERM interrupts the current run with
SIGINT, as Ctrl-C would: it stops between two updates (or is terminated after `STOP_GRACE_S`), and
the next ``run`` resumes it from the last checkpoint.

Summaries are the summariser's (the campaign file names it, `spec.Campaign.load_summariser`): the
runner calls it after each run stops and reads back only a summary's ``status``.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from jaxrl_agents.common.fileio import DirectoryLockedError, lock_directory
from jaxrl_agents.run.algorithms import make_config
from jaxrl_agents.run.run_files import RUN_CONFIG, read_run_config

from .rundirs import (
    ATTEMPT_MARK,
    INCOMPLETE_MARK,
    attempt_dirs,
    attempt_verdict,
    find_run_dir,
    find_staged_dir,
    read_staged_run,
    run_status,
    set_aside_dirs,
    staged_has_progress,
)
from .spec import Campaign, Entry

__all__ = ["run_campaign", "parse_deadline", "TRAIN_COMMAND"]

#: The command that runs ``jaxrl-train`` (its arguments follow), in a process of its own.
TRAIN_COMMAND = (sys.executable, "-m", "jaxrl_agents.console.cli")


def _in_use(run_dir: str) -> bool:
    """Whether another process holds `run_dir`'s lock (a run started by hand, or another runner)."""
    try:
        with lock_directory(run_dir):
            return False
    except DirectoryLockedError:
        return True


def _wait_while_in_use(run_dir: str, deadline: float | None, label: str) -> bool:
    """Wait until no process holds `run_dir`; False if `deadline` came first."""
    if _in_use(run_dir):
        print(f"campaign: {label}: {run_dir} is in use by another process; waiting for it",
              flush=True)
    while _in_use(run_dir):
        if _deadline_passed(deadline):
            return False
        time.sleep(10.0)
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


STOP_GRACE_S = 120.0  # after SIGINT, seconds before the run is terminated (its checkpoint stays)


def _default_sigint() -> None:
    # A shell starts background jobs (`nohup ... &`) with SIGINT ignored, and children inherit
    # that: without this, Python in the child would never raise KeyboardInterrupt on SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(child: subprocess.Popen) -> None:
    """Ask the run to stop between two updates (SIGINT); terminate it if it does not."""
    child.send_signal(signal.SIGINT)
    until = time.monotonic() + STOP_GRACE_S
    while True:
        try:
            child.wait(max(until - time.monotonic(), 0.0))
            return
        except subprocess.TimeoutExpired:  # the last checkpoint is intact; resume recomputes the rest
            child.terminate()
            child.wait()
            return
        except KeyboardInterrupt:
            # A second signal while the run stops (`uv run` forwards a SIGTERM that `kill` also
            # sent to its child): keep waiting, so the campaign still summarises the run.
            continue


def _train(args: list[str], deadline: float | None,
           failed: Callable[[], bool] | None = None) -> tuple[int, str | None]:
    """Run ``jaxrl-train ARGS`` until it exits, `deadline` (time.time()) or `failed()` turns true.

    Returns (exit code, why it was stopped: None, "interrupted" or "failed"). SIGINT or SIGTERM
    to the campaign stops the run the same way, then the campaign.
    """
    child = subprocess.Popen([*TRAIN_COMMAND, *args], preexec_fn=_default_sigint)
    try:
        while child.poll() is None:
            if deadline is not None and time.time() >= deadline:
                print("campaign: deadline reached; stopping the run between two updates", flush=True)
                _stop(child)
                return child.returncode, "interrupted"
            if failed is not None and failed():
                _stop(child)
                return child.returncode, "failed"
            time.sleep(1.0)
    except KeyboardInterrupt:
        _stop(child)
        return child.returncode, "interrupted"
    return child.returncode, None


def _terminate_as_interrupt(signum, frame):  # noqa: ARG001 (signal handler signature)
    raise KeyboardInterrupt


def _deadline_passed(deadline: float | None) -> bool:
    return deadline is not None and time.time() >= deadline


def _summarise(campaign: Campaign, entry: Entry, seed: int, run_dir: str,
               code_version: str | None) -> str:
    """Write the summary of (`entry`, `seed`) with the campaign's summariser; returns its path."""
    return campaign.load_summariser()(campaign, entry, seed, run_dir, code_version)


def _committed_status(campaign: Campaign, entry: Entry, seed: int) -> str | None:
    """The status its committed summary gives (entry, seed) ("finished", ...), or None if none."""
    path = campaign.summary_path(entry, seed)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f).get("status")


def run_campaign(campaign: Campaign, *, deadline: float | None = None,
                 entries: list[str] | None = None, seeds: list[int] | None = None,
                 code_version: str | None = None, progress: str = "lines") -> int:
    """Start or continue every (entry, seed) of `campaign` in schedule order.

    Args:
        campaign: the parsed campaign file.
        deadline: time.time() at which to interrupt the current run and stop (None: none).
        entries: run only these entry names (default: all).
        seeds: run only these seeds (default: all), e.g. to split a campaign over two runners.
        code_version: the code version recorded in summaries (default: ``git describe``).
        progress: jaxrl-train's ``--progress``.

    Returns:
        0 when every selected run finished, 3 when the deadline stopped the campaign, 1 when a run
        failed (its exit code and output say why; the campaign stops there).
    """
    # `kill` (SIGTERM) stops the campaign as Ctrl-C does: the current run stops cleanly first.
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    campaign.load_summariser()  # a summariser that does not import fails now, not after a run
    selected = set(entries) if entries else None
    if selected:
        for name in selected:
            campaign.entry(name)  # ValueError naming the choices
    for seed in seeds or ():
        if seed not in campaign.seeds:
            raise ValueError(f"--seed: expected one of the campaign's seeds {list(campaign.seeds)}, "
                             f"got {seed}")
    queue = campaign.schedule()
    retry: list = []  # a run stopped by its restart test: its seed starts again at once
    while queue or retry:
        entry, seed = retry.pop() if retry else queue.pop(0)
        if (selected and entry.name not in selected) or (seeds and seed not in seeds):
            continue
        if _deadline_passed(deadline):
            return 3
        if entry.staged:
            code = _advance_staged(campaign, entry, seed, deadline, progress, code_version)
            if code is None:
                continue
            return code
        parent = campaign.run_parent(entry, seed)
        run_dir = find_run_dir(parent)
        label = f"{entry.name} seed {seed}"
        if run_dir is not None:
            if not _wait_while_in_use(run_dir, deadline, label):
                return 3
            status, done, budget = run_status(run_dir)
            if _restart_now(entry, run_dir):
                print(f"campaign: {label}: {run_dir} did not reach J_T < {entry.restart.below:g} "
                      f"within {entry.restart.within_steps:,} steps; moved to "
                      f"{_set_aside(run_dir, ATTEMPT_MARK, first=0)}", flush=True)
                run_dir = None
            elif status == "incomplete":
                print(f"campaign: {label}: {run_dir} never reached a checkpoint; moved to "
                      f"{_set_aside(run_dir)}", flush=True)
                run_dir = None
        # Only a folder with no run of any kind in it (live or set aside) means the run lives on
        # another machine; one set aside here (just now, or by an earlier call) starts afresh.
        if (run_dir is None and not set_aside_dirs(parent)
                and (committed := _committed_status(campaign, entry, seed))):
            how = ("finished" if committed == "finished" else
                   f"{committed}, and cannot resume without its run directory (remove its summary "
                   f"to start it afresh)")
            print(f"campaign: {label}: summarised in {campaign.summary_path(entry, seed)} "
                  f"but its run directory is not on this machine; {how}; skipped", flush=True)
            continue
        if run_dir is None:
            source = _source_dir(campaign, entry, seed)
            if entry.init_from is not None and source is None:
                print(f"campaign: {label}: waits for {entry.init_from} seed {seed} to finish",
                      flush=True)
                continue
            os.makedirs(parent, exist_ok=True)
            attempt = len(attempt_dirs(parent))
            train_seed = entry.attempt_seed(seed, attempt)
            print(f"campaign: {label}: new run under {parent}"
                  + (f" (attempt {attempt + 1}, seed {train_seed})" if attempt else ""), flush=True)
            code, why = _train([*entry.train_args(train_seed, parent, source), "--progress",
                                progress], deadline, _failed_watch(entry, parent))
        elif status == "finished" and budget >= _budget(run_dir, entry):
            if not os.path.isfile(campaign.summary_path(entry, seed)):
                print(f"campaign: {label}: finished; summarising it (the GRAPE frontier takes a "
                      f"few minutes)", flush=True)
                print(f"campaign: {label}: summary "
                      f"{_summarise(campaign, entry, seed, run_dir, code_version)}", flush=True)
            continue
        else:
            extend = _budget(run_dir, entry)
            args = ["--resume", run_dir, "--progress", progress]
            if extend > budget:
                args += ["--total-steps", str(entry.total_steps)]
            print(f"campaign: {label}: resuming {run_dir} at step {done:,} of {max(budget, extend):,}",
                  flush=True)
            code, why = _train(args, deadline, _failed_watch(entry, parent))
        run_dir = find_run_dir(parent)
        if why == "failed" or (why is None and run_dir is not None and _restart_now(entry, run_dir)):
            retry.append((entry, seed))
            continue  # set aside and started again at the top of the loop
        if run_dir is not None and os.path.isfile(os.path.join(run_dir, "progress.csv")):
            print(f"campaign: {label}: summarising it", flush=True)
            path = _summarise(campaign, entry, seed, run_dir, code_version)
            print(f"campaign: {label}: summary {path}", flush=True)
        if why == "interrupted":
            return 3
        if code != 0:
            print(f"campaign: {label}: jaxrl-train exited with {code}; stopping", flush=True)
            return 1
    return 0


def _advance_staged(campaign: Campaign, entry: Entry, seed: int, deadline: float | None,
                    progress: str, code_version: str | None) -> int | None:
    """Start, continue or skip the staged run of (`entry`, `seed`), summarising it when it stops.

    Returns None to go on with the campaign, or its exit code (3: the deadline stopped the run,
    1: jaxrl-train failed).
    """
    parent = campaign.run_parent(entry, seed)
    top = find_staged_dir(parent)
    label = f"{entry.name} seed {seed}"
    summary = campaign.summary_path(entry, seed)
    if top is None and (committed := _committed_status(campaign, entry, seed)):
        how = ("finished" if committed == "finished" else
               f"{committed}, and cannot resume without its run directory (remove its summary "
               f"to start it afresh)")
        print(f"campaign: {label}: summarised in {summary} but its staged run is not on this "
              f"machine; {how}; skipped", flush=True)
        return None
    if top is not None:
        if not _wait_while_in_use(top, deadline, label):
            return 3
        record = read_staged_run(top)
        if record["finished"]:
            if not os.path.isfile(summary):
                print(f"campaign: {label}: finished; summarising it (the GRAPE frontier takes a "
                      f"few minutes)", flush=True)
                print(f"campaign: {label}: summary "
                      f"{_summarise(campaign, entry, seed, top, code_version)}", flush=True)
            return None
        done = sum(int(a["steps"]) for a in record["attempts"])
        print(f"campaign: {label}: resuming the staged run {top} ({len(record['attempts'])} "
              f"attempt(s) so far, {done:,} steps recorded)", flush=True)
        code, why = _train(["--resume", top, "--progress", progress], deadline)
    else:
        os.makedirs(parent, exist_ok=True)
        print(f"campaign: {label}: new staged run ({entry.preset}) under {parent}", flush=True)
        code, why = _train([*entry.train_args(seed, parent, None), "--progress", progress],
                           deadline)
    top = find_staged_dir(parent)
    if top is not None and staged_has_progress(top):
        print(f"campaign: {label}: summarising it", flush=True)
        print(f"campaign: {label}: summary {_summarise(campaign, entry, seed, top, code_version)}",
              flush=True)
    if why == "interrupted":
        return 3
    if code != 0:
        print(f"campaign: {label}: jaxrl-train exited with {code}; stopping", flush=True)
        return 1
    return None


def _restart_now(entry: Entry, run_dir: str) -> bool:
    """Whether `run_dir` failed its entry's restart test and its seed has attempts left."""
    rule = entry.restart
    if rule is None:
        return False
    parent = os.path.dirname(os.path.normpath(run_dir))
    return (len(attempt_dirs(parent)) < rule.attempts - 1
            and attempt_verdict(run_dir, rule.below, rule.within_steps) == "fail")


def _failed_watch(entry: Entry, parent: str) -> Callable[[], bool] | None:
    """A check, polled while a run trains, that it has failed its entry's restart test.

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
        verdict = attempt_verdict(run_dir, rule.below, rule.within_steps)  # reads progress.csv once
        attempts_left = len(attempt_dirs(parent)) < rule.attempts - 1
        decided = not attempts_left or verdict == "pass"
        return attempts_left and verdict == "fail"

    return failed


def _budget(run_dir: str, entry: Entry) -> int:
    """The entry's budget in whole updates of the run's rollout size."""
    rc = read_run_config(os.path.join(run_dir, RUN_CONFIG))
    cfg = make_config(rc["algo"], {**rc["algo_config"], "total_steps": entry.total_steps})
    return cfg.n_updates * cfg.rollout_size


def _source_dir(campaign: Campaign, entry: Entry, seed: int) -> str | None:
    """The finished run a fine-tuning entry starts from for `seed` (None: not there yet)."""
    if entry.init_from is None:
        return None
    source = find_run_dir(campaign.run_parent(campaign.entry(entry.init_from), seed))
    if source is None or run_status(source)[0] != "finished":
        return None
    return source


def parse_deadline(minutes: float | None, until: str | None) -> float | None:
    """time.time() of ``--minutes`` from now or of ``--until HH:MM`` (today, or tomorrow if past)."""
    if minutes is not None and until is not None:
        raise ValueError("--minutes, --until: expected at most one of them, got both")
    if minutes is not None:
        if not minutes > 0:
            raise ValueError(f"--minutes: expected a positive number, got {minutes!r}")
        return time.time() + 60.0 * minutes
    if until is not None:
        try:
            at = datetime.datetime.strptime(until, "%H:%M").time()
        except ValueError:
            raise ValueError(f"--until: expected a time HH:MM, got {until!r}") from None
        now = datetime.datetime.now()
        target = datetime.datetime.combine(now.date(), at)
        if target <= now:
            target += datetime.timedelta(days=1)
        return target.timestamp()
    return None
