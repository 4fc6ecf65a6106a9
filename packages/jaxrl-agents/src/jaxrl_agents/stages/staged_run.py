"""A staged run: one run directory whose stages are ordinary runs, advanced one after another.

``jaxrl-train --preset gate`` is one of these: what a campaign chained by hand (an early test that
restarts a failing seed, a smaller exploration std as the gate forms, a trust-region polish) runs
as one command in one directory::

    <out>/<recipe>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]/
        staged_run.json        the recipe, seed, environment, and one entry per attempt of a stage
        best_policy/           the best policy over every stage so far
        ppo_..._s<seed>_1-explore-a1/     each attempt is an ordinary run directory (config.json,
        ppo_..._s<seed+1000>_1-explore-a2/  progress.csv, evals.npz, checkpoint.npz, policies)
        trpo_..._s<seed>_2-polish-a1/      (a stage with a population of K: K run directories per
        trpo_..._s<seed+100000>_2-polish-a1/ attempt, one per member, trained as one seed group)

Every decision (an attempt set aside, a stage ended early) is a pure function of the attempt's
records (its best evaluation score and update count), taken by a `stop_when` rule after each update
and taken again from the restored records when a run resumes, so an interrupted staged run resumes
bit-identically: the stage's own checkpoint restores its state, and the same rule stops it at the
same update. ``staged_run.json`` is rewritten atomically after each decision; the top directory is
locked while a process uses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
import time
from typing import Any

from ..common.envs import DEFAULT_ENV
from ..common.fileio import atomic_write_json, lock_directory
from ..common.policy import BEST_POLICY_DIR, load_policy
from ..run.checks import check_env_options
from ..run.host import small_loops
from ..run.run_files import CHECKPOINT, check_out, make_run_dirs, read_json_object, remove_new_run_dirs
from ..run.session import Session
from ..run.spec import RunSpec
from .recipe import Recipe, Stage, attempt_seed, member_seeds
from .timeline import StagedResult, staged_result

__all__ = ["StagedRun", "STAGED_RUN_JSON", "is_staged_run", "read_staged_run", "stage_spec", "FORMAT"]

STAGED_RUN_JSON = "staged_run.json"
FORMAT = "jaxrl_agents.staged_run"
FORMAT_VERSION = 1

# How an attempt ended (``end`` in staged_run.json).
BELOW = "below"            # its best score fell below the stage's until_below: the next stage starts
BUDGET = "budget"          # it trained the stage's whole budget
TEST_FAILED = "test_failed"  # it failed the stage's early test: set aside, the stage restarts


def is_staged_run(path) -> bool:
    """Whether `path` is the top directory of a staged run (it holds staged_run.json)."""
    return isinstance(path, (str, os.PathLike)) and os.path.isfile(
        os.path.join(os.fspath(path), STAGED_RUN_JSON))


@dataclasses.dataclass
class _Attempt:
    """One attempt of one stage, as staged_run.json records it."""

    stage: int              # index into recipe.stages
    attempt: int            # 1-based
    seed: int               # its first member's
    dir: str                # relative to the top directory: the best member's run directory
    end: str | None = None  # None while it runs; BELOW, BUDGET or TEST_FAILED
    steps: int = 0          # steps trained when it last stopped
    wall: float = 0.0       # seconds of training when it last stopped
    best: float = math.inf  # best evaluation score (to minimise) when it last stopped
    best_step: int = -1
    # Every member's run directory, in seed order, for a population of two or more (empty: one
    # member, `dir`; records written before populations have none).
    members: list[str] = dataclasses.field(default_factory=list)

    @property
    def member_dirs(self) -> list[str]:
        """The run directories of the attempt's members (relative to the top directory)."""
        return list(self.members) or [self.dir]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["best"] = None if not math.isfinite(self.best) else self.best
        if not self.members:  # a record of one member reads as it did before populations
            del d["members"]
        return d

    @classmethod
    def from_dict(cls, d, where: str) -> _Attempt:
        try:
            a = cls(**{**d, "best": math.inf if d.get("best") is None else d["best"]})
        except TypeError as e:
            raise ValueError(f"{where}: attempts: {e}") from None
        if a.end not in (None, BELOW, BUDGET, TEST_FAILED) or not isinstance(a.members, list) \
                or not all(isinstance(m, str) and not os.path.isabs(m)
                           and ".." not in m.split(os.sep) for m in [a.dir, *a.members]):
            raise ValueError(f"{where}: attempts: an entry is not one this code writes: {d!r}")
        return a


def _best(records) -> tuple[int, float]:
    """(member index, score) of the best member of an attempt's seed group (the first on ties)."""
    return min(enumerate(r.best for r in records), key=lambda ib: (ib[1], ib[0]))


def _stop_rule(stage: Stage, attempt: int, rollout_size: int):
    """The `Session.advance` ``stop_when`` of an attempt: its stage's end or its early test.

    Both read the best member's score: a population passes its test, and ends its stage, on its
    best member.
    """
    restart = stage.restart
    tested = restart is not None and attempt < restart.attempts
    test_update = restart.test_update(rollout_size) if tested else -1

    def stop_when(update: int, records) -> bool:
        best = _best(records)[1]
        if stage.until_below is not None and best < stage.until_below:
            return True
        return update == test_update and not best < restart.below

    return stop_when


def _decision(session: Session, stage: Stage, attempt: int) -> str | None:
    """How the attempt open in `session` ends now (None: it goes on); the stop rule's verdict."""
    best = _best(session.records)[1]
    if stage.until_below is not None and best < stage.until_below:
        return BELOW
    r = stage.restart
    if r is not None and attempt < r.attempts and \
            session.update >= r.test_update(session.rollout_size) and not best < r.below:
        return TEST_FAILED
    return BUDGET if session.finished else None


# Config fields that define the network: a stage starts from the previous stage's parameters, so
# they must agree across stages (checked before the first stage trains, not when the second starts).
_NETWORK_FIELDS = ("hidden", "activation", "critic_hidden", "network", "network_options")


def stage_spec(recipe: Recipe, stage_index: int, *, seeds: tuple[int, ...], env: str,
               env_options: dict[str, Any], out: str, tag: str, checkpoint_every: int,
               init_from: str | None, changes: dict[str, Any] | None = None) -> RunSpec:
    """The RunSpec a staged run opens for one attempt of `recipe`'s stage `stage_index`.

    Every update is evaluated (``eval_every=1`` rounds up to one update), so the best score and
    each decision taken on it see every policy the stage produces. A stage after the first keeps
    the std the previous stage learned (``log_std_init`` 0 adds nothing to the loaded parameters)
    unless it sets its own ``log_std``. `changes` overrides config fields (bench/stage_from.py's
    levers); a staged run passes none.
    """
    stage = recipe.stages[stage_index]
    fields = stage.algo_config()
    if stage_index > 0 and stage.log_std is None:
        fields["log_std_init"] = 0.0
    fields.update(changes or {})
    return RunSpec(algo=stage.algo, env=env, env_options=dict(env_options), config=fields,
                   seeds=tuple(seeds), eval_every=1, out=out, tag=tag,
                   checkpoint_every=checkpoint_every, preset=recipe.name, init_from=init_from)


def _check_stage_configs(recipe: Recipe) -> None:
    """Build every stage's config (its own checks) and check the stages share one network."""
    from ..run.algorithms import make_config

    first = None
    for stage in recipe.stages:
        try:
            cfg = make_config(stage.algo, stage.algo_config())
        except ValueError as e:
            raise ValueError(f"recipe {recipe.name!r}: stage {stage.name!r}: {e}") from None
        net = {f: getattr(cfg, f, None) for f in _NETWORK_FIELDS}
        if first is None:
            first = (stage.name, net)
        elif net != first[1]:
            differ = [f"{f}: {first[1][f]!r} in {first[0]!r}, {net[f]!r} here"
                      for f in _NETWORK_FIELDS if net[f] != first[1][f]]
            raise ValueError(f"recipe {recipe.name!r}: stage {stage.name!r}: starts from the "
                             f"previous stage's policy, so its network must be the same "
                             f"({'; '.join(differ)}); set these fields in its config")


def read_staged_run(top: str) -> dict:
    """A staged run's record (``staged_run.json``: recipe, seed, env, attempts, finished).

    The one reader of the file (the resume and any tool reading a staged run use it).

    Raises:
        ValueError: naming the file, when it is not JSON, not a staged run's record, or written
            by a newer jaxrl-agents.
    """
    path = os.path.join(os.fspath(top), STAGED_RUN_JSON)
    record = read_json_object(path)
    if record.get("format") != FORMAT or not isinstance(record.get("attempts"), list):
        raise ValueError(f"{path}: expected a staged run record (format {FORMAT!r}), got "
                         f"format {record.get('format')!r}")
    if record.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {record['format_version']} is newer than "
                         f"this jaxrl-agents understands ({FORMAT_VERSION}); upgrade it")
    return record


class StagedRun:
    """An open staged run: its locked top directory and, while a stage trains, its `Session`.

    Build one with `StagedRun.open` (new) or `StagedRun.resume`; `advance` trains to the end of
    the recipe or a wall-clock budget; `close` releases the directories (a context manager).
    """

    def __init__(self, top: str, record: dict, locks: contextlib.ExitStack,
                 progress: str | None, echo):
        self.top, self._record, self._locks = top, record, locks
        self.recipe = Recipe.from_dict(record["recipe"])
        self._attempts = [_Attempt.from_dict(a, self._json_path) for a in record["attempts"]]
        self._progress = progress
        self._echo = echo
        self._session: Session | None = None

    # ----------------------------------------------------------------------------- opening
    @property
    def _json_path(self) -> str:
        return os.path.join(self.top, STAGED_RUN_JSON)

    @classmethod
    def open(cls, recipe: Recipe, seed: int, env: str = DEFAULT_ENV,
             env_options: dict | None = None, out: str = "runs", tag: str = "",
             checkpoint_every: int = 25, progress: str | None = None,
             argv: list[str] | None = None, echo=print) -> StagedRun:
        """Start a new staged run of `recipe` for `seed` (nothing trains until `advance`).

        Args:
            recipe: the `Recipe`.
            seed: the run's seed (attempt n of a stage with an early test uses
                ``recipe.attempt_seed(seed, n)``).
            env: the environment factory ``module:factory`` every stage trains on.
            env_options: options over the recipe's own ``env_options``.
            out: parent directory of the run's top directory.
            tag: suffix of the top directory's name.
            checkpoint_every: updates between each stage's checkpoints.
            progress: as `trainer.train`'s.
            argv: the command line, recorded in staged_run.json.
            echo: prints the run's stage lines (``print``; tests pass a collector).

        Raises:
            ValueError: a bad argument, before anything is created.
        """
        if not isinstance(recipe, Recipe):
            raise ValueError(f"recipe: expected a Recipe, got {type(recipe).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
        if not isinstance(env, str) or ":" not in env:
            raise ValueError(f"env: a staged run records its environment by name, expected "
                             f"'module:factory', got {env!r}")
        options = {**recipe.env_options, **check_env_options(env_options)}
        if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or \
                checkpoint_every <= 0:
            raise ValueError(f"checkpoint_every: expected a positive integer, got "
                             f"{checkpoint_every!r}")
        _check_stage_configs(recipe)
        (top,) = make_run_dirs(check_out(out), recipe.name, (seed,), tag)
        locks = contextlib.ExitStack()
        try:
            locks.enter_context(lock_directory(top))
            record = {"format": FORMAT, "format_version": FORMAT_VERSION,
                      "created": datetime.datetime.now(datetime.UTC).isoformat(),
                      "argv": list(argv) if argv is not None else None, "seed": seed,
                      "env": env, "env_options": options, "checkpoint_every": checkpoint_every,
                      "recipe": recipe.to_dict(), "attempts": [], "finished": False,
                      "best_attempt": None,
                      # XLA's small-loop threshold every stage compiles under (none: XLA's default)
                      **small_loops.record_entry()}
            atomic_write_json(os.path.join(top, STAGED_RUN_JSON), record)
        except BaseException:
            locks.close()
            remove_new_run_dirs([top])
            raise
        return cls(top, record, locks, progress, echo)

    @classmethod
    def resume(cls, top: str, progress: str | None = None, echo=print) -> StagedRun:
        """Reopen a staged run where it stopped (its open stage resumes from its checkpoint).

        Raises:
            ValueError: not a staged run's top directory, a staged_run.json this code did not
                write (named), or the directory is in use by another process.
        """
        if not is_staged_run(top):
            raise ValueError(f"resume: expected a staged run's directory containing "
                             f"{STAGED_RUN_JSON}, got {top!r}")
        top = os.fspath(top)
        record = read_staged_run(top)
        # Every stage compiles its loops as the earlier ones did (`small_loops`); a finished
        # staged run compiles nothing, so any process may open it.
        if not record.get("finished"):
            small_loops.require_recorded(record, os.path.join(top, STAGED_RUN_JSON),
                                         ["jaxrl-train", "--resume", top])
        locks = contextlib.ExitStack()
        try:
            locks.enter_context(lock_directory(top))
            run = cls(top, record, locks, progress, echo)
        except BaseException:
            locks.close()
            raise
        return run

    # ---------------------------------------------------------------------------- training
    @property
    def finished(self) -> bool:
        """Whether every stage has ended."""
        return bool(self._record["finished"])

    def _write(self) -> None:
        self._record["attempts"] = [a.to_dict() for a in self._attempts]
        atomic_write_json(self._json_path, self._record)

    def _next_attempt(self) -> _Attempt | None:
        """The attempt to start after the last one ended (None: the recipe is done)."""
        if not self._attempts:
            stage, n = 0, 1
        else:
            last = self._attempts[-1]
            stage, n = (last.stage, last.attempt + 1) if last.end == TEST_FAILED \
                else (last.stage + 1, 1)
        if stage >= len(self.recipe.stages):
            return None
        seed = attempt_seed(self._record["seed"], n)
        return _Attempt(stage, n, seed, "")

    def _source_dir(self, stage: int) -> str | None:
        """The run directory a stage starts from: the best member of the previous stage's last kept attempt."""
        if stage == 0:
            return None
        kept = [a for a in self._attempts if a.stage == stage - 1 and a.end != TEST_FAILED]
        return os.path.join(self.top, kept[-1].dir)

    def _open_attempt(self, att: _Attempt) -> Session:
        """Create the attempt's run directory and session, and record it as running."""
        stage = self.recipe.stages[att.stage]
        spec = stage_spec(self.recipe, att.stage, seeds=member_seeds(att.seed, stage.population),
                          env=self._record["env"], env_options=self._record["env_options"],
                          out=self.top, tag=f"{att.stage + 1}-{stage.name}-a{att.attempt}",
                          checkpoint_every=self._record["checkpoint_every"],
                          init_from=self._source_dir(att.stage))
        session = Session.open(spec, progress=self._progress)
        att.dir = os.path.relpath(session.run_dirs[0], self.top)
        if len(session.run_dirs) > 1:
            att.members = [os.path.relpath(d, self.top) for d in session.run_dirs]
        self._attempts.append(att)
        self._write()
        return session

    def _set_aside_unstarted(self, att: _Attempt) -> None:
        """An attempt interrupted before its first checkpoint: nothing of it can resume.

        Its directory is renamed ``<dir>.interrupted[-k]`` (kept, never reused) and the attempt is
        dropped from the record, so the loop opens it again from scratch; with the same seed it
        recomputes the same updates, bit for bit.
        """
        for member in att.member_dirs:
            path = os.path.join(self.top, member)
            target, k = path + ".interrupted", 1
            while os.path.exists(target):
                k += 1
                target = f"{path}.interrupted-{k}"
            if os.path.isdir(path):
                os.replace(path, target)
        self._attempts.pop()
        self._write()
        self._echo(f"stage {att.stage + 1} {self.recipe.stages[att.stage].name}: attempt "
                   f"{att.attempt} was interrupted before its first checkpoint; it starts again "
                   f"({os.path.basename(target)} kept)")

    def _announce(self, att: _Attempt) -> None:
        stage = self.recipe.stages[att.stage]
        n = len(self.recipe.stages)
        tries = f", attempt {att.attempt} of {stage.restart.attempts}" if stage.restart else ""
        if stage.population > 1:
            seeds = ", ".join(map(str, member_seeds(att.seed, stage.population)))
            tries += f", {stage.population} members (seeds {seeds})"
        start = "from scratch" if att.stage == 0 else \
            f"from stage {att.stage}'s best policy" + (
                f", std {math.exp(stage.log_std):.3g}" if stage.log_std is not None else "")
        self._echo(f"stage {att.stage + 1}/{n} {stage.name}: {stage.algo}, seed {att.seed}{tries}, "
                   f"{start}, up to {stage.steps:,} steps -> {att.dir}")

    def _end(self, att: _Attempt, end: str) -> None:
        stage = self.recipe.stages[att.stage]
        att.end = end
        score = _best(self._session.records)[1]
        if end == TEST_FAILED:
            r = stage.restart
            self._echo(f"stage {att.stage + 1} {stage.name}: attempt {att.attempt} set aside: its "
                       f"best {score:.3e} is not below {r.below:g} after {att.steps:,} steps; "
                       f"the stage starts again")
        elif end == BELOW:
            self._echo(f"stage {att.stage + 1} {stage.name}: best {score:.3e} < "
                       f"{stage.until_below:g} after {att.steps:,} steps: next stage")
        else:
            self._echo(f"stage {att.stage + 1} {stage.name}: budget done, best {score:.3e}")

    def _sync(self, att: _Attempt) -> None:
        """Copy the open session's position and best member into the attempt's record.

        ``steps`` count one member's (the run's clock); a population of K collected K times as
        many environment steps in the same updates and wall-clock.
        """
        s = self._session
        member, best = _best(s.records)
        att.steps, att.wall = s.update * s.rollout_size, s.wall
        att.best, att.best_step = best, s.records[member].best_step
        att.dir = att.member_dirs[member]

    def _keep_best_policy(self) -> None:
        """Point best_policy/ at the best attempt so far (copied when it changes)."""
        scored = [(a.best, i) for i, a in enumerate(self._attempts) if math.isfinite(a.best)]
        if not scored:
            return
        _, i = min(scored)
        a = self._attempts[i]
        key = [i, a.best_step]
        if self._record.get("best_attempt") == key:
            return
        policy = load_policy(os.path.join(self.top, a.dir), "best")
        target = os.path.join(self.top, BEST_POLICY_DIR)
        policy.save(target)  # each file atomically; a new best replaces both files
        self._record["best_attempt"] = key

    def advance(self, time_budget: float | None = None,
                stop_after_updates: int | None = None) -> StagedResult:
        """Train the remaining stages (or until `time_budget` seconds have passed).

        A budget stop lands on the open stage's checkpoint; `resume` continues bit-identically.

        Args:
            time_budget: seconds of wall-clock from this call, or None.
            stop_after_updates: stop after this many updates of this call, as a kill would:
                nothing more is written (what the checkpoint cadence has not saved, and the
                decision the last update may call for, are recomputed by a resume). For tests
                of the resume; None: no such stop.

        Raises:
            NonFiniteError, OSError: as `trainer.train` (the staged run stays resumable from the
                stage's last checkpoint).
        """
        if self._locks is None:
            raise ValueError("advance: this staged run is closed")
        deadline = None if time_budget is None else time.monotonic() + time_budget
        stopped = False
        trained = 0  # updates of this call (stop_after_updates)
        while not self.finished:
            att = self._attempts[-1] if self._attempts and self._attempts[-1].end is None \
                else None
            if att is None:
                att = self._next_attempt()
                if att is None:
                    self._record["finished"] = True
                    self._write()
                    break
                self._session = self._open_attempt(att)
                self._announce(att)
            elif self._session is None:
                path = os.path.join(self.top, att.dir)
                if not os.path.isfile(os.path.join(path, CHECKPOINT)):
                    self._set_aside_unstarted(att)
                    continue  # the same attempt opens again, fresh: the same seed, the same run
                self._session = Session.resume(os.path.join(self.top, att.dir),
                                               progress=self._progress)
                self._echo(f"stage {att.stage + 1} {self.recipe.stages[att.stage].name}: "
                           f"resumed at step {self._session.update * self._session.rollout_size:,}"
                           f" ({att.dir})")
            stage = self.recipe.stages[att.stage]
            end = _decision(self._session, stage, att.attempt)
            if end is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    stopped = True
                    break
                quota = None if stop_after_updates is None else stop_after_updates - trained
                before = self._session.update
                self._session.advance(quota, left, _stop_rule(stage, att.attempt,
                                                              self._session.rollout_size))
                trained += self._session.update - before
                if stop_after_updates is not None and trained >= stop_after_updates:
                    stopped = True  # as a kill after that update: nothing more is written
                    break
                end = _decision(self._session, stage, att.attempt)
                if end is None:  # the time budget ran out, on a checkpoint
                    self._sync(att)
                    self._keep_best_policy()
                    self._write()
                    stopped = True
                    break
            self._sync(att)
            self._end(att, end)
            self._keep_best_policy()
            self._write()
            self._session.close()
            self._session = None
        return self.result(finished=not stopped and self.finished)

    def evaluation_format(self):
        """The env's evaluation line (fields -> text), for the summary; None if it has none."""
        import jax

        from ..common.contracts import evaluation_of
        from ..common.envs import load_env

        with jax.enable_x64(True):  # float64 environments refuse to build without it
            env = load_env(self._record["env"], self._record["env_options"])
        return getattr(evaluation_of(env), "format", None)

    def result(self, finished: bool | None = None) -> StagedResult:
        """The `StagedResult` so far, read from the attempts' records on disk."""
        return staged_result(self.top, self.recipe, [a.to_dict() for a in self._attempts],
                             self.finished if finished is None else finished)

    def close(self) -> None:
        """Release the directories (the open stage's too); closing twice is harmless."""
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._locks is not None:
            self._locks.close()
            self._locks = None

    def __enter__(self) -> StagedRun:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

