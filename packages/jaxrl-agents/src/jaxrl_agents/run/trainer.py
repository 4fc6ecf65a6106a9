"""Training loop, run directories, evaluation records, checkpoints and resume.

One call trains one or several seeds *together*: the update is vmapped over a leading seed axis and
compiled once. Each seed still gets its own run directory (so every tool reads one layout)::

    <out>/<algo>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]/
        config.json      everything needed to rebuild the run (arguments, env spec and options,
                         algorithm config, versions, backend, precision, the seed group)
        progress.csv     one row per update: step, wall, then the stats sorted by name; the eval
                         fields (eval_return, eval_len, then eval_<field> for every field of the
                         env's evaluation summary) on eval rows only
        evals.npz        every evaluation episode: step (n_evals,), reward / alive (n_evals, T),
                         action (n_evals, T, A) and what the env's evaluation records per step
                         (n_evals, T, ...)
        checkpoint.npz   latest checkpoint of the whole seed group (checkpoint.py)
        best_policy/     policy with the best evaluation so far (the env's evaluation score:
                         highest eval return for environments that describe none)
        last_policy/     policy at the latest evaluation

evals.npz and the two policies are written with each checkpoint (and at the end), progress.csv
also every 10 updates: evaluating after every update stays cheap, and what a crash loses beyond
the checkpoint a resume recomputes bit for bit.

Directories are created with ``os.makedirs(exist_ok=False)``: an existing run is never overwritten.
Every file is written atomically, so ``kill -9`` leaves either the old or the new version. Each run
directory is locked (``fileio.lock_directory``) for the whole of a train or resume, so a second
process gets an error instead of overwriting the first one's files.

Non-finite values: the compiled update reduces "parameters, optimiser state and losses are finite"
to one flag per seed, read with the stats at the host sync the loop already does. The first update
that fails stops the run with `NonFiniteError` before anything of it is written; the checkpoint on
disk stays the last finite one.

Resume: the checkpoint holds the full train state of every seed (parameters, optimiser state,
environment states, observations, PRNG keys, update counter) plus the best-so-far bookkeeping. On
resume, rows and evaluations recorded after the checkpoint are dropped and recomputed; since the
update is deterministic, the resumed run ends with the same parameters and the same progress rows
(except wall time) as an uninterrupted one. Before anything is compiled, resume checks every file it
reads (run_files.py) and refuses, naming the file, a history that does not reach the checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import importlib.metadata
import json
import math
import os
import platform
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..common.config import AlgoConfig
from ..common.contracts import describe_evaluation, evaluation_of
from ..common.envs import DEFAULT_ENV, check_env, load_env
from ..common.evaluation import env_fields, eval_summary, format_eval_line, score_to_minimise
from ..common.policy import BEST_POLICY_DIR, LAST_POLICY_DIR, Policy
from .algorithms import FINITE_STAT, AgentNetworks, canonical_name, compile_algorithm, is_ippo, make_config, model_for
from .checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from ..common.fileio import atomic_savez, atomic_write_json, lock_directory
from .init_from import load_init_params
from .progress import ProgressReporter
from .run_files import (
    CHECKPOINT,
    EVALS_NPZ,
    PROGRESS_CSV,
    RUN_CONFIG,
    check_history,
    check_out,
    make_run_dirs,
    read_run_config,
    remove_new_run_dirs,
    write_progress,
)

__all__ = ["train", "resume", "TrainResult", "NonFiniteError", "RUN_CONFIG", "PROGRESS_CSV",
           "EVALS_NPZ", "CHECKPOINT"]

PROGRESS_CHOICES = (None, "bar", "lines", "off")
CSV_FLUSH_EVERY = 10  # updates between progress.csv rewrites (and at checkpoints and the end)
EVAL_KEY_SEED = 0  # evaluation is deterministic; the key only feeds reset/step of the eval env


@dataclasses.dataclass
class TrainResult:
    """What `train` / `resume` return.

    Attributes:
        run_dirs: one run directory per seed.
        state: final `TrainState` with leaves stacked over seeds (numpy).
        rows: per seed, the progress rows (dicts of strings, as written to progress.csv).
        finished: False if stopped early by ``stop_after``.
        best: per seed, the environment's evaluation line of its best evaluation and the step
            it was made at (``minJT=3.1e-03@17.3ns  firstPE=9.10ns  1-U=2.0e-03 at step
            2457600`` for the gate env), or None where the run has no best evaluation on record.
    """

    run_dirs: list[str]
    state: Any
    rows: list[list[dict[str, str]]]
    finished: bool
    best: list[str | None] = dataclasses.field(default_factory=list)


class NonFiniteError(FloatingPointError):
    """An update produced non-finite parameters, optimiser state or losses; the run was stopped.

    Nothing of the failed update was written: ``checkpoint.npz`` is the last finite state.

    Attributes:
        update: the 1-based index of the update that went wrong.
        step: environment steps at its end.
        seeds: the seeds whose state became non-finite.
        checkpoint_update: the update of the checkpoint kept on disk (0: none was written yet).
        run_dirs: the run directories of the group.
    """

    def __init__(self, message: str, update: int, step: int, seeds: list[int],
                 checkpoint_update: int, run_dirs: list[str]):
        super().__init__(message)
        self.update, self.step, self.seeds = update, step, seeds
        self.checkpoint_update, self.run_dirs = checkpoint_update, run_dirs


# ------------------------------------------------------------------------------ validation
def _check_seeds(seeds) -> tuple[int, ...]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        seeds = (int(seeds),)
    try:
        seeds = tuple(seeds)
    except TypeError as e:
        raise ValueError(f"seeds: expected an int or a sequence of ints, got {seeds!r}") from e
    if not seeds:
        raise ValueError("seeds: expected at least one seed, got none")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < 2**32:
            raise ValueError(f"seeds: expected integers in [0, 2**32), got {s!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds: expected distinct seeds, got {list(seeds)}")
    return tuple(int(s) for s in seeds)


def _check_pos_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def _check_tag(tag: str) -> str:
    if not isinstance(tag, str) or any(c in tag for c in "/\\") or tag in (".", ".."):
        raise ValueError(f"tag: expected a name without path separators, got {tag!r}")
    return tag


def _check_env_options(options) -> dict:
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise ValueError(f"env_options: expected a dict of keyword options with string keys, got "
                         f"{options!r}")
    return dict(options)


def _check_progress(progress) -> str | None:
    if progress not in PROGRESS_CHOICES or isinstance(progress, bool):
        raise ValueError(f"progress: expected one of {list(PROGRESS_CHOICES)}, got {progress!r}")
    return progress


def _check_argv(argv) -> list[str] | None:
    if argv is None:
        return None
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence) \
            or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"argv: expected a list of strings (the command line) or None, got "
                         f"{argv!r}")
    return list(argv)


def _check_stop_after(stop_after) -> int | None:
    return None if stop_after is None else _check_pos_int("stop_after", stop_after)


# ---------------------------------------------------------------------------- run metadata
def _versions(env_spec: str | None) -> dict[str, str]:
    names = ["jaxrl-agents", "jax", "jaxlib", "numpy", "optax", "gymnasium"]
    if env_spec:
        names.append(env_spec.split(":")[0].split(".")[0].replace("_", "-"))
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _env_description(env) -> Any:
    if dataclasses.is_dataclass(env):
        try:
            return json.loads(json.dumps(dataclasses.asdict(env), default=repr))
        except (TypeError, ValueError):
            pass
    return repr(env)


# --------------------------------------------------------------------------- per-seed records
def _fmt(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return repr(float(v))


class _SeedRecord:
    """Progress rows, evaluation episodes and best-policy bookkeeping of one seed's run dir.

    Evaluations are cheap and may run after every update, so their files are written with the
    checkpoint (`save`), not per evaluation: ``evals.npz`` grows with every evaluation, and
    rewriting it each time made a long run's writes quadratic. What a checkpoint does not cover yet
    is recomputed bit for bit by a resume, so deferring loses nothing.
    """

    def __init__(self, run_dir: str, seed: int):
        self.run_dir, self.seed = run_dir, seed
        self.rows: list[dict[str, str]] = []
        self.evals: dict[str, list[np.ndarray]] = {}
        self.best = math.inf  # the env's evaluation score, as a number to minimise
        self.best_step = -1
        self._unsaved_evals = False
        # policy directory name -> () -> policy: built only when written (`save`), since an
        # evaluation after every update would otherwise build two per update for nothing.
        self._unsaved_policies: dict[str, Callable[[], Any]] = {}

    def restore(self, rows: list[dict[str, str]], evals: dict[str, np.ndarray], best: float,
                best_step: int) -> None:
        """Continue from the records up to the checkpoint (`run_files.check_history`)."""
        self.rows = list(rows)
        self.evals = {k: list(v) for k, v in evals.items()}
        self.best, self.best_step = best, best_step

    def add_eval(self, step: int, episode: dict[str, np.ndarray]) -> None:
        """Record one evaluation episode (written by the next `save`)."""
        self.evals.setdefault("step", []).append(np.asarray(step, np.int64))
        for k, v in episode.items():
            self.evals.setdefault(k, []).append(np.asarray(v))
        self._unsaved_evals = True

    def set_policy(self, name: str, make_policy: Callable[[], Any]) -> None:
        """Keep ``make_policy()`` as this run's ``name`` policy (`BEST_POLICY_DIR` / `LAST_POLICY_DIR`)."""
        self._unsaved_policies[name] = make_policy

    def flush(self) -> None:
        """Rewrite progress.csv (cheap: one row per update)."""
        write_progress(os.path.join(self.run_dir, PROGRESS_CSV), self.rows)

    def save(self) -> None:
        """Write everything recorded: progress.csv, then evals.npz and the kept policies."""
        self.flush()
        if self._unsaved_evals:
            atomic_savez(os.path.join(self.run_dir, EVALS_NPZ),
                         {k: np.stack(v) for k, v in self.evals.items()})
            self._unsaved_evals = False
        for name, make_policy in self._unsaved_policies.items():
            _save_policy(make_policy(), os.path.join(self.run_dir, name))
        self._unsaved_policies = {}


def _save_policy(policy, directory: str) -> None:
    """Save a `Policy` into `directory`, or IPPO's {agent: policy} into ``directory/<agent>/``."""
    if isinstance(policy, dict):
        from .ippo_parallel import safe_agent_name

        for agent, p in policy.items():
            p.save(os.path.join(directory, safe_agent_name(agent)))
    else:
        policy.save(directory)


# ------------------------------------------------------------------------ printed evaluations
REPORT_LINES = 25  # printed evaluation lines over a run, unless report_every says otherwise


def report_every_updates(cfg: AlgoConfig, eval_every_updates: int,
                         report_every: int | None) -> int:
    """Updates between printed evaluation lines: a multiple of the evaluation cadence.

    Args:
        cfg: the run's config (rollout size, number of updates).
        eval_every_updates: updates between evaluations.
        report_every: environment steps between printed lines; None: about `REPORT_LINES` lines.
    """
    wanted = (report_every // cfg.rollout_size if report_every is not None
              else cfg.n_updates // REPORT_LINES)
    return eval_every_updates * max(1, -(-wanted // eval_every_updates))


def decade_crossed(old_best: float, new_best: float) -> float | None:
    """The power of ten a falling score has just gone below (None: same decade, or no old best).

    ``decade_crossed(0.05, 0.008) == 0.01``; ``decade_crossed(0.05, 0.02) is None``; a fall over
    several decades gives the lowest one crossed. Scores <= 0 have no decade (None).
    """
    if not (math.isfinite(old_best) and old_best > 0 and 0 < new_best < old_best):
        return None
    new_decade = math.floor(math.log10(new_best))
    if new_decade >= math.floor(math.log10(old_best)):
        return None
    return 10.0 ** (new_decade + 1)


def best_evaluation_line(rows: list[dict[str, str]], best_step: int, evaluation) -> str | None:
    """The env's line (``evaluation.format``) of the evaluation at `best_step`, with its step.

    Args:
        rows: a seed's progress rows (strings, as in progress.csv).
        best_step: the step of its best evaluation (-1: none yet).
        evaluation: the env's `contracts.Evaluation`.

    Returns:
        e.g. ``minJT=3.1e-03@17.3ns  firstPE=9.10ns  1-U=2.0e-03 at step 2457600``; for envs
        that describe no evaluation ``return=12.5 at step 4096``; None without a best evaluation.
    """
    row = next((r for r in rows if int(r["step"]) == best_step and "eval_return" in r), None)
    if row is None:
        return None
    fields = {k: float(v) for k, v in env_fields(row).items() if v != ""}
    text = evaluation.format(fields) or f"return={float(row['eval_return']):.4g}"
    return f"{text} at step {best_step}"


def _power_of_ten(x: float) -> str:
    """``1e-2`` for 0.01, ``1`` for 1.0, ``1e3`` for 1000.0."""
    exponent = round(math.log10(x))
    return "1" if exponent == 0 else f"1e{exponent}"


# ------------------------------------------------------------------------------- the loop
class _Run:
    """State of one training invocation (fresh or resumed) for a group of seeds."""

    def __init__(self, algo: str, cfg: AlgoConfig, env, env_spec: str | None, env_options: dict,
                 seeds: tuple[int, ...], run_dirs: list[str], eval_every: int,
                 checkpoint_every: int, progress: str | None, report_every: int | None = None):
        self.algo, self.cfg, self.env = algo, cfg, env
        self.env_spec, self.env_options = env_spec, env_options
        self.seeds, self.run_dirs = seeds, run_dirs
        self.eval_every_updates = max(1, eval_every // cfg.rollout_size)
        self.report_every_updates = report_every_updates(cfg, self.eval_every_updates,
                                                         report_every)
        self.checkpoint_every = checkpoint_every
        self.progress_mode = progress
        self.records = [_SeedRecord(d, s) for d, s in zip(run_dirs, seeds)]
        self.checkpoint_update = 0  # update of the checkpoint on disk (0: none yet)
        self.compiled = compile_algorithm(algo, env, cfg)
        self.evaluation = evaluation_of(env)  # what an evaluation records, prints and ranks by
        self.train_params = env.default_params
        # A multi-agent core may have no eval_params (optional in its contract): train params.
        self.eval_params = getattr(env, "eval_params", env.default_params)
        self.seed_keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])

    def template(self):
        """A fresh train state: the structure, shapes and dtypes a checkpoint must match."""
        return self.compiled.init(self.seed_keys, self.train_params)

    def _policy(self, params, s: int, step: int, summary: dict) -> Policy | dict:
        """The seed's policy, or for IPPO {agent: policy} (saved to ``<policy dir>/<agent>/``)."""
        seed_params = jax.tree_util.tree_map(lambda x: np.asarray(x[s]), params)
        meta = {"algo": self.algo, "seed": self.seeds[s], "step": step, "env": self.env_spec,
                "env_options": self.env_options, "eval": summary}
        if self.compiled.policies is not None:
            return self.compiled.policies(seed_params, meta)
        return Policy(self.compiled.model, seed_params, meta)

    def _dispatch_evaluation(self, state):
        """Queue every seed's evaluation episode on the device; returns its (unfetched) arrays."""
        return self.compiled.evaluate(state.params["actor"], self.eval_params,
                                      jax.random.PRNGKey(EVAL_KEY_SEED))

    def _evaluate(self, episodes, state, step: int, wall: float, rows: list[dict], reporter,
                  report: bool) -> float | None:
        """Record the episodes of `_dispatch_evaluation`; returns the group's best score (for the bar).

        Prints a seed's line if `report`, or when its best score just fell below a new power of
        ten (``new best < 1e-02``), so a run evaluated after every update still shows when the
        gate forms without printing every evaluation.
        """
        episodes, params = jax.device_get((episodes, state.params))  # one transfer for both
        ev = self.evaluation
        latest = None
        for s, rec in enumerate(self.records):
            ep = {k: np.asarray(v[s]) for k, v in episodes.items()}
            summary = (self.compiled.summarize(ep) if self.compiled.summarize is not None
                       else eval_summary(ep, ev))
            rows[s].update({k: _fmt(v) for k, v in summary.items()})
            rec.add_eval(step, ep)
            policy = functools.partial(self._policy, params, s, step, summary)
            rec.set_policy(LAST_POLICY_DIR, policy)
            score = score_to_minimise(summary, ev.score, ev.score_mode)
            crossed = None
            if not math.isnan(score) and score < rec.best:
                if ev.score_mode == "min":
                    crossed = decade_crossed(rec.best, score)
                rec.best, rec.best_step = score, step
                rec.set_policy(BEST_POLICY_DIR, policy)
            if report or crossed is not None:
                prefix = f"seed {self.seeds[s]} " if len(self.seeds) > 1 else ""
                mark = f"  new best {ev.score} < {_power_of_ten(crossed)}" if crossed else ""
                reporter.write(prefix + format_eval_line(step, wall, summary, ev) + mark)
            if not math.isnan(score) and (latest is None or score < latest):
                latest = score
        return latest if latest is None or ev.score_mode == "min" else -latest

    def _checkpoint(self, state, update: int, wall: float) -> None:
        for rec in self.records:
            rec.save()  # progress.csv and evals.npz must cover every update up to the checkpoint
        meta = {"update": update, "step": update * self.cfg.rollout_size, "wall": wall,
                "seeds": list(self.seeds), "best": [r.best for r in self.records],
                "best_step": [r.best_step for r in self.records]}
        for rec in self.records:
            save_checkpoint(os.path.join(rec.run_dir, CHECKPOINT), state, meta)
        self.checkpoint_update = update

    def _non_finite(self, update: int, finite: np.ndarray, stats: dict) -> NonFiniteError:
        """Flush the finite updates' rows and describe the failed update (nothing of it is kept)."""
        for rec in self.records:
            rec.save()
        bad = [self.seeds[s] for s in np.flatnonzero(~finite)]
        s0 = int(np.flatnonzero(~finite)[0])
        names = sorted(k for k, v in stats.items()
                       if np.issubdtype(np.asarray(v).dtype, np.floating) and not np.isfinite(v[s0]))
        what = f"non-finite {', '.join(names)}" if names else \
            "non-finite parameters or optimiser state"
        rs = self.cfg.rollout_size
        kept = (f"checkpoint.npz keeps update {self.checkpoint_update}, the last finite state"
                if self.checkpoint_update else "no checkpoint had been written yet")
        msg = (f"update {update} (steps {(update - 1) * rs + 1}-{update * rs}) gave {what} for "
               f"seed{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))}; the run stopped "
               f"and nothing of that update was saved ({kept}); lower the learning rate or "
               f"check the environment's rewards, then start a new run")
        return NonFiniteError(msg, update, update * rs, bad, self.checkpoint_update,
                              list(self.run_dirs))

    def loop(self, state, start_update: int, wall_offset: float, stop_after: int | None):
        cfg = self.cfg
        n_updates = cfg.n_updates
        reporter = ProgressReporter(n_updates * cfg.rollout_size, start_update * cfg.rollout_size,
                                    self.progress_mode, score_name=self.evaluation.score)
        state = jax.tree_util.tree_map(jnp.asarray, state)
        t0 = time.perf_counter()
        finished = True
        try:
            for i in range(start_update, n_updates):
                state, stats = self.compiled.update(state, self.train_params)
                last = i == n_updates - 1
                evaluating = (i + 1) % self.eval_every_updates == 0 or last
                # Queued before the stats sync, the evaluation runs straight after the update
                # while the host reads the stats and formats the rows (a non-finite update
                # discards it unread).
                episodes = self._dispatch_evaluation(state) if evaluating else None
                stats = jax.device_get(stats)  # the host sync of every update
                finite = np.asarray(stats.pop(FINITE_STAT), bool)
                if not finite.all():
                    raise self._non_finite(i + 1, finite, stats)
                step = (i + 1) * cfg.rollout_size
                wall = wall_offset + time.perf_counter() - t0
                rows = [{"step": str(step), "wall": _fmt(wall), "update": str(i + 1),
                         **{k: _fmt(v[s]) for k, v in stats.items()}}
                        for s in range(len(self.seeds))]
                jt = None
                if evaluating:
                    report = (i + 1) % self.report_every_updates == 0 or last or \
                        i + 1 == self.eval_every_updates
                    jt = self._evaluate(episodes, state, step, wall, rows, reporter, report)
                for rec, row in zip(self.records, rows):
                    rec.rows.append(row)
                if (i + 1) % self.checkpoint_every == 0 or last:
                    self._checkpoint(state, i + 1, wall)
                elif (i + 1) % CSV_FLUSH_EVERY == 0:
                    for rec in self.records:
                        rec.flush()
                reporter.update(step, jt)
                if stop_after is not None and i + 1 - start_update >= stop_after and not last:
                    finished = False  # simulated interruption: no final writes
                    break
        finally:
            reporter.close()
        return self.result(jax.device_get(state), finished)

    def result(self, state, finished: bool) -> TrainResult:
        """The `TrainResult` of this run with final `state` (host arrays)."""
        return TrainResult(self.run_dirs, state, [r.rows for r in self.records], finished,
                           [best_evaluation_line(r.rows, r.best_step, self.evaluation)
                            for r in self.records])


# ----------------------------------------------------------------------------- public API
def train(algo: str = "ppo", env: Any = DEFAULT_ENV, env_options: dict | None = None,
          config: AlgoConfig | dict | None = None, seeds=(0,), eval_every: int = 2_000_000,
          out: str = "runs", tag: str = "", checkpoint_every: int = 25,
          progress: str | None = None, argv: list[str] | None = None,
          stop_after: int | None = None, network=None,
          network_options: dict | None = None, report_every: int | None = None,
          preset: str | None = None, init_from: str | None = None) -> TrainResult:
    """Train `algo` on `env` for every seed at once and write one run directory per seed.

    Every argument is checked before a run directory is created or anything is compiled. The run
    directories are locked while the run uses them (`fileio.lock_directory`).

    Args:
        algo: "ppo" or "trpo".
        env: "module:factory" (imported and called with `env_options`) or an environment object.
        env_options: keyword options of the factory.
        config: algorithm config (object or dict of fields); defaults are the paper's.
        seeds: one int or several (trained together in one compiled program).
        eval_every: environment steps between evaluations (rounded to whole updates, >= 1 update);
            the last update is always evaluated.
        out: parent directory of the run directories.
        tag: optional suffix of the run directory names.
        checkpoint_every: updates between checkpoints (one is always written at the end).
        progress: "bar", "lines", "off" or None (bar on a terminal, lines otherwise).
        argv: command line to record in config.json.
        stop_after: stop after this many updates without final writes (simulates an interruption).
        network: a user network, ``"module:factory"`` or the factory itself (see
            `common.networks.ActorCritic`); overrides ``config.network``. None: the config's.
        network_options: keyword options of the network factory (overrides the config's).
        report_every: environment steps between printed evaluation lines (every evaluation is
            recorded; a seed's line is also printed whenever its best score falls below a new
            power of ten); None: about 25 lines over the run.
        preset: the name of the `presets.Preset` the config came from, recorded in config.json
            (the config itself is what the run uses).
        init_from: a run directory (its best policy) or a policy directory whose parameters
            every seed starts from, for a fine-tuning phase (`init_from.load_init_params`); the
            config's nonzero ``log_std_init`` replaces the policy's learned std. PPO and TRPO.

    Returns:
        `TrainResult`.

    Raises:
        ValueError: bad arguments (before anything is created or compiled).
        NonFiniteError: an update gave non-finite values; the last finite checkpoint is kept.
        OSError: a file could not be written (full or read-only disk); every file written so
            far is intact (atomic writes).
    """
    algo = canonical_name(algo)  # "ippo_lag" is IPPO-Lagrangian's older name
    cfg = make_config(algo, config)
    if network is not None or network_options is not None:  # validated as config fields
        if not any(f.name == "network" for f in dataclasses.fields(cfg)):
            raise ValueError(f"network: user networks are for ppo and trpo; {algo!r} builds its "
                             f"per-agent networks from hidden/activation, got network={network!r}")
        cfg = dataclasses.replace(cfg, network=cfg.network if network is None else network,
                                  network_options=cfg.network_options if network_options is None
                                  else network_options)
    seeds = _check_seeds(seeds)
    eval_every = _check_pos_int("eval_every", eval_every)
    checkpoint_every = _check_pos_int("checkpoint_every", checkpoint_every)
    if report_every is not None:
        report_every = _check_pos_int("report_every", report_every)
    if preset is not None and not isinstance(preset, str):
        raise ValueError(f"preset: expected a preset name or None, got {preset!r}")
    tag = _check_tag(tag)
    out = check_out(out)
    env_options = _check_env_options(env_options)
    progress = _check_progress(progress)
    argv = _check_argv(argv)
    stop_after = _check_stop_after(stop_after)
    with jax.enable_x64(True):  # the physics is float64; networks stay float32 by construction
        if is_ippo(algo):
            env_spec, env_obj = _ippo_env(env, env_options, cfg)
            if env_obj is None:  # a ParallelEnv stepped from Python: no checkpoints (see there)
                return _train_parallel(algo, env, env_spec, env_options, cfg, seeds, eval_every,
                                       checkpoint_every, tag, out, progress, argv)
            model = AgentNetworks.of(env_obj, cfg)
        elif isinstance(env, str):
            env_spec, env_obj = env, load_env(env, env_options)
        else:
            check_env(env)
            env_spec, env_obj = None, env
        if not is_ippo(algo):
            model = model_for(env_obj, cfg)
        init_params, init_record = None, None
        if init_from is not None:
            if is_ippo(algo):
                raise ValueError(f"init_from: fine-tuning starts are for ppo and trpo, got algo "
                                 f"{algo!r}")
            init_params, init_record = load_init_params(init_from, model)
        run_dirs = make_run_dirs(out, algo, seeds, tag)
        with contextlib.ExitStack() as locks:
            try:
                for d in run_dirs:
                    locks.enter_context(lock_directory(d))
                _write_run_configs(run_dirs, algo, env_spec, env_options, env_obj, cfg, model,
                                   seeds, eval_every, checkpoint_every, tag, out, argv,
                                   report_every, preset, init_record)
                run = _Run(algo, cfg, env_obj, env_spec, env_options, seeds, run_dirs,
                           eval_every, checkpoint_every, progress, report_every)
                state = (run.compiled.init(run.seed_keys, run.train_params) if init_params is None
                         else run.compiled.init(run.seed_keys, run.train_params, init_params))
            except BaseException:
                # The run never started: leave no directory holding only its config.json.
                locks.close()
                remove_new_run_dirs(run_dirs)
                raise
            return run.loop(state, 0, 0.0, stop_after)


def _ippo_env(env, env_options, cfg):
    """(env spec, functional multi-agent core) of an IPPO run, or (spec, None).

    (spec, None) keeps the ParallelEnv in place of the core when it must be stepped from Python.

    A ParallelEnv exposing its functional core as ``env.core`` is trained on that core when
    ``n_envs > 1``, as `IPPO.train` does.
    """
    from ..ippo.train import is_functional_marl_env

    spec = env if isinstance(env, str) else None
    obj = load_env(env, env_options, check=False) if isinstance(env, str) else env
    core = getattr(obj, "core", None) if cfg.n_envs > 1 else None
    if is_functional_marl_env(core):
        obj = core
    if is_functional_marl_env(obj):
        check_env(obj)
        return spec, obj
    return spec, None


def _train_parallel(algo, env, env_spec, env_options, cfg, seeds, eval_every, checkpoint_every,
                    tag, out, progress, argv) -> TrainResult:
    from ..ippo.rollout import check_parallel_env
    from .ippo_parallel import train_parallel

    obj = load_env(env, env_options, check=False) if isinstance(env, str) else env
    check_parallel_env(obj)
    if len(seeds) != 1:
        raise ValueError(f"seeds: a PettingZoo ParallelEnv is one environment stepped from Python, "
                         f"so its seeds cannot be trained together; expected one seed, got "
                         f"{list(seeds)} (run one command per seed, or use a functional core)")
    if cfg.n_envs != 1:
        raise ValueError(f"n_envs: expected 1 for a PettingZoo ParallelEnv without a functional "
                         f"core (one environment stepped from Python), got {cfg.n_envs}; pass a "
                         f"functional multi-agent core (or an env exposing it as env.core) to "
                         f"run many environments compiled")
    rc = {"format": "jaxrl_agents.run", "format_version": 1, "algo": algo, "env": env_spec,
          "env_options": env_options, "env_config": _env_description(obj),
          "algo_config": cfg.to_dict(), "seed": seeds[0], "seeds": list(seeds),
          "timesteps": cfg.total_steps, "tag": tag, "out": os.path.abspath(out), "argv": argv,
          "created": datetime.datetime.now(datetime.UTC).isoformat(),
          "versions": _versions(env_spec), "backend": jax.default_backend()}
    # Outside the trainer's x64 scope: a ParallelEnv adapter scopes x64 to its own calls
    # (design.md), and the update of the Python-stepped path is float32 end to end. Under x64 the
    # rollout's float64 numpy rewards would promote GAE to float64 and move every number.
    with jax.enable_x64(False):
        run_dir, result = train_parallel(algo, obj, cfg, seeds[0], out, tag, progress, rc)
    from .run_files import read_progress

    return TrainResult([run_dir], result.params,
                       [read_progress(os.path.join(run_dir, PROGRESS_CSV))], True)


def _write_run_configs(run_dirs, algo, env_spec, env_options, env_obj, cfg, model, seeds,
                       eval_every, checkpoint_every, tag, out, argv, report_every=None,
                       preset=None, init_from=None) -> None:
    group = [os.path.basename(d) for d in run_dirs]
    # The group is found again on resume by this id (and the directory names as a first guess),
    # so a renamed or moved run directory still resumes.
    group_id = uuid.uuid4().hex
    for s, d in zip(seeds, run_dirs):
        atomic_write_json(os.path.join(d, RUN_CONFIG), {
            "format": "jaxrl_agents.run", "format_version": 1,
            "algo": algo, "env": env_spec, "env_options": env_options,
            "env_config": _env_description(env_obj), "algo_config": cfg.to_dict(),
            "evaluation": describe_evaluation(evaluation_of(env_obj)),
            "network": model.to_dict(), "seed": s, "seeds": list(seeds), "group": group,
            "group_id": group_id,
            "eval_every": eval_every, "checkpoint_every": checkpoint_every,
            "report_every": report_every, "preset": preset, "tag": tag,
            "out": os.path.abspath(out), "argv": argv,
            "created": datetime.datetime.now(datetime.UTC).isoformat(),
            "versions": _versions(env_spec), "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()],
            "precision": {"x64": True, "network": "float32"},
            # Only fine-tuning runs carry the key: earlier config.json files stay as they were.
            **({"init_from": init_from} if init_from is not None else {})})


def _record_extension(run_dirs: list[str], configs: list[dict], old_total: int, new_total: int,
                      at_step: int) -> None:
    """Write the new budget into every group member's config.json, keeping a log of extensions."""
    for d, rc in zip(run_dirs, configs):
        rc = dict(rc, algo_config=dict(rc["algo_config"], total_steps=new_total))
        rc["extensions"] = list(rc.get("extensions", [])) + [
            {"from_total_steps": old_total, "to_total_steps": new_total, "at_step": at_step,
             "time": datetime.datetime.now(datetime.UTC).isoformat()}]
        atomic_write_json(os.path.join(d, RUN_CONFIG), rc)


def _never_checkpointed(path: str) -> bool:
    """Whether config.json at `path` marks a run that cannot checkpoint (IPPO on a ParallelEnv)."""
    try:
        with open(path) as f:
            return json.load(f).get("checkpointed") is False
    except (OSError, ValueError, AttributeError):
        return False


def _member_config(d: str) -> dict | None:
    """The run config of directory `d`, or None if it is not a readable run directory."""
    try:
        return read_run_config(os.path.join(d, RUN_CONFIG))
    except (OSError, ValueError):
        return None


def _find_group(run_dir: str, rc: dict) -> tuple[list[str], list[dict]]:
    """The directories and configs of `run_dir`'s seed group, in seed order.

    `run_dir` itself is its own seed's member whatever its name. The others are looked up by their
    recorded names next to it, and, if renamed, among its sibling directories by the group id.
    """
    parent = os.path.dirname(os.path.abspath(run_dir))
    group_id = rc.get("group_id")
    siblings = None
    dirs, configs = [], []
    for name, seed in zip(rc["group"], rc["seeds"]):
        if seed == rc["seed"]:
            dirs.append(os.path.abspath(run_dir))
            configs.append(rc)
            continue

        def belongs(c, seed=seed):  # bound now: the loop moves on
            return c is not None and c["seed"] == seed and c["seeds"] == rc["seeds"] and \
                c.get("group_id") == group_id

        by_name = os.path.join(parent, name)
        c = _member_config(by_name)
        if belongs(c):
            dirs.append(by_name)
            configs.append(c)
            continue
        if group_id is not None:
            if siblings is None:
                siblings = [(e.path, _member_config(e.path)) for e in os.scandir(parent)
                            if e.is_dir() and e.path != os.path.abspath(run_dir)]
            found = [(d, c) for d, c in siblings if belongs(c)]
            if len(found) == 1:
                dirs.append(found[0][0])
                configs.append(found[0][1])
                continue
        raise ValueError(f"resume: seed {seed} of this run's group ({name!r}) is not next to "
                         f"{run_dir!r}; the seeds of a group are trained together and resume "
                         f"together: keep their directories side by side")
    return dirs, configs


def _check_checkpoint_meta(path: str, header: dict, rc: dict, rollout_size: int) -> dict:
    meta = header["meta"]
    n = len(rc["seeds"])
    ok = (isinstance(meta.get("update"), int) and meta["update"] > 0
          and meta.get("step") == meta["update"] * rollout_size
          and isinstance(meta.get("wall"), (int, float)) and meta.get("seeds") == rc["seeds"]
          and isinstance(meta.get("best"), list) and len(meta["best"]) == n
          and isinstance(meta.get("best_step"), list) and len(meta["best_step"]) == n)
    if not ok:
        raise ValueError(f"{path}: its progress record (update, step, seeds, best) does not match "
                         f"this run (seeds {rc['seeds']}, {rollout_size} steps per update); was "
                         f"it copied from another run?")
    return meta


def resume(run_dir: str, env: Any = None, progress: str | None = None,
           stop_after: int | None = None, total_steps: int | None = None) -> TrainResult:
    """Continue an interrupted run (and its seed group) from its last checkpoint.

    Every file the resume reads is checked first, before anything is compiled: config.json, the
    checkpoint, and that progress.csv and evals.npz hold every update and evaluation up to the
    checkpoint. The group's directories are locked for the whole resume.

    Args:
        run_dir: any run directory of the group (it may have been renamed or moved, with the
            other members of its group beside it).
        env: the environment object, only needed if the run was started with an object rather
            than a "module:factory" name.
        progress: as in `train`.
        stop_after: as in `train`.
        total_steps: a new step budget, to extend a run (also a finished one). The learning-rate
            decay then follows the new budget from the checkpoint on, so an extended run is not
            the same as one started with that budget; each config.json records the extension.
            None keeps the run's budget (and resume reproduces the uninterrupted run exactly).

    Raises:
        ValueError: not a run directory, a file that is corrupt or misses history (named in the
            message), a group member missing, or the directory in use by another process
            (`fileio.DirectoryLockedError`).
        NonFiniteError, OSError: as in `train`.
    """
    if not isinstance(run_dir, (str, os.PathLike)) or isinstance(run_dir, bytes):
        raise ValueError(f"resume: expected a run directory path, got {run_dir!r}")
    run_dir = os.fspath(run_dir)
    path = os.path.join(run_dir, RUN_CONFIG)
    if not os.path.isfile(path):
        raise ValueError(f"resume: expected a run directory containing {RUN_CONFIG}, got "
                         f"{run_dir!r}")
    ckpt = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(ckpt) and _never_checkpointed(path):
        raise ValueError(f"resume: {run_dir!r} is an IPPO run on a PettingZoo ParallelEnv stepped "
                         f"from Python, whose state cannot be checkpointed; such runs cannot "
                         f"resume (train on the env's functional core to get checkpoints)")
    if not os.path.isfile(ckpt):
        raise ValueError(f"resume: {run_dir!r} has no {CHECKPOINT} yet (interrupted before the "
                         f"first checkpoint); start a new run instead")
    if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                    or total_steps <= 0):
        raise ValueError(f"total_steps: expected a positive integer, got {total_steps!r}")
    progress = _check_progress(progress)
    stop_after = _check_stop_after(stop_after)
    rc = read_run_config(path)
    run_dirs, configs = _find_group(run_dir, rc)
    with contextlib.ExitStack() as locks:
        for d in run_dirs:
            locks.enter_context(lock_directory(d))
        return _resume_locked(run_dir, rc, run_dirs, configs, ckpt, env, progress, stop_after,
                              total_steps)


def _resume_locked(run_dir, rc, run_dirs, configs, ckpt, env, progress, stop_after, total_steps):
    path = os.path.join(run_dir, RUN_CONFIG)
    old_total = rc["algo_config"].get("total_steps")
    extend = total_steps is not None and total_steps != old_total
    try:
        cfg = make_config(rc["algo"], {**rc["algo_config"],
                                       "total_steps": total_steps if extend else old_total})
        _check_pos_int("eval_every", rc["eval_every"])
        _check_pos_int("checkpoint_every", rc["checkpoint_every"])
        if rc.get("report_every") is not None:  # absent from run directories before issue 16
            _check_pos_int("report_every", rc["report_every"])
    except ValueError as e:
        if str(e).startswith("total_steps") and extend:
            raise
        raise ValueError(f"{path}: {e}") from None
    _, header = read_checkpoint(ckpt)
    meta = _check_checkpoint_meta(ckpt, header, rc, cfg.rollout_size)
    if extend and cfg.n_updates < meta["update"]:
        raise ValueError(f"total_steps: expected at least the {meta['step']} steps already "
                         f"trained, got {total_steps}")
    history = [check_history(d, meta["step"], cfg.rollout_size) for d in run_dirs]
    with jax.enable_x64(True):
        if env is None:
            if rc["env"] is None:
                raise ValueError("env: this run was started with an environment object; pass the "
                                 "same object as resume(run_dir, env=...)")
            env = load_env(rc["env"], rc["env_options"])
        else:
            check_env(env)
        run = _Run(rc["algo"], cfg, env, rc["env"], rc["env_options"], tuple(rc["seeds"]),
                   run_dirs, rc["eval_every"], rc["checkpoint_every"], progress,
                   rc.get("report_every"))
        state, meta = load_checkpoint(ckpt, run.template())
        run.checkpoint_update = meta["update"]
        if extend:
            _record_extension(run_dirs, configs, old_total, cfg.total_steps, meta["step"])
        for rec, (rows, evals), best, best_step in zip(run.records, history, meta["best"],
                                                        meta["best_step"]):
            rec.restore(rows, evals, best, best_step)
        if meta["update"] >= cfg.n_updates:
            return run.result(state, True)
        return run.loop(state, meta["update"], meta["wall"], stop_after)
