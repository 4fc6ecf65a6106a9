"""Training loop, run directories, evaluation records, checkpoints and resume.

One call trains one or several seeds *together*: the update is vmapped over a leading seed axis and
compiled once. Each seed still gets its own run directory (so every tool reads one layout)::

    <out>/<algo>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]/
        config.json      everything needed to rebuild the run (arguments, env spec and options,
                         algorithm config, versions, backend, precision, the seed group)
        progress.csv     one row per update: step, wall, then the stats sorted by name; the eval
                         fields (eval_return, eval_len, eval_JT_min, ...) on eval rows only
        evals.npz        every evaluation episode: step (n_evals,), reward / alive (n_evals, T),
                         action (n_evals, T, A) and every env info leaf (JT, concurrence, unitarity,
                         t, amps (n_evals, T, K), ...)
        checkpoint.npz   latest checkpoint of the whole seed group (checkpoint.py)
        best_policy/     policy with the best evaluation so far (lowest eval J_T_min, or highest
                         eval return for environments without J_T)
        last_policy/     policy at the latest evaluation

Directories are created with ``os.makedirs(exist_ok=False)``: an existing run is never overwritten.
Every file is written atomically, so ``kill -9`` leaves either the old or the new version.

Resume: the checkpoint holds the full train state of every seed (parameters, optimiser state,
environment states, observations, PRNG keys, update counter) plus the best-so-far bookkeeping. On
resume, rows and evaluations recorded after the checkpoint are dropped and recomputed; since the
update is deterministic, the resumed run ends with the same parameters and the same progress rows
(except wall time) as an uninterrupted one.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import importlib.metadata
import io
import json
import math
import os
import platform
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .algorithms import compile_algorithm, make_config, model_for
from .checkpoint import load_checkpoint, save_checkpoint
from .config import AlgoConfig
from .envs import DEFAULT_ENV, check_env, load_env
from .evaluation import eval_summary, format_eval_line
from .fileio import atomic_savez, atomic_write, atomic_write_json, load_npz
from .policy import BEST_POLICY_DIR, LAST_POLICY_DIR, Policy
from .progress import ProgressReporter

__all__ = ["train", "resume", "TrainResult", "RUN_CONFIG", "PROGRESS_CSV", "EVALS_NPZ", "CHECKPOINT"]

RUN_CONFIG = "config.json"
PROGRESS_CSV = "progress.csv"
EVALS_NPZ = "evals.npz"
CHECKPOINT = "checkpoint.npz"
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
    """

    run_dirs: list[str]
    state: Any
    rows: list[list[dict[str, str]]]
    finished: bool


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


def _timestamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def _make_run_dirs(out: str, algo: str, seeds, tag: str) -> list[str]:
    stamp = _timestamp()
    names = [f"{algo}_{stamp}_s{s}" + (f"_{tag}" if tag else "") for s in seeds]
    dirs = [os.path.join(out, n) for n in names]
    for d in dirs:
        if os.path.exists(d):
            raise ValueError(f"out: run directory {d!r} already exists; runs are never "
                             f"overwritten: use another --tag or --out, or --resume it")
    os.makedirs(out, exist_ok=True)
    for d in dirs:
        os.makedirs(d, exist_ok=False)
    return dirs


# --------------------------------------------------------------------------- per-seed records
def _fmt(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return repr(float(v))


def _write_csv(path: str, rows: list[dict[str, str]]) -> None:
    keys = set().union(*(r.keys() for r in rows)) if rows else set()
    columns = ["step", "wall"] + sorted(keys - {"step", "wall"})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue().encode())


def _read_csv(path: str) -> list[dict[str, str]]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


class _SeedRecord:
    """Progress rows, evaluation episodes and best-policy bookkeeping of one seed's run dir."""

    def __init__(self, run_dir: str, seed: int):
        self.run_dir, self.seed = run_dir, seed
        self.rows: list[dict[str, str]] = []
        self.evals: dict[str, list[np.ndarray]] = {}
        self.best = math.inf  # score to minimise: eval J_T_min, or -eval_return without J_T
        self.best_step = -1

    def restore(self, step: int, best: float, best_step: int) -> None:
        """Keep only what was recorded up to checkpoint `step` (later records are recomputed)."""
        self.rows = [r for r in _read_csv(os.path.join(self.run_dir, PROGRESS_CSV))
                     if int(r["step"]) <= step]
        path = os.path.join(self.run_dir, EVALS_NPZ)
        if os.path.exists(path):
            data = load_npz(path)
            keep = data["step"] <= step
            self.evals = {k: list(v[keep]) for k, v in data.items()}
        self.best, self.best_step = best, best_step

    def add_eval(self, step: int, episode: dict[str, np.ndarray]) -> None:
        self.evals.setdefault("step", []).append(np.asarray(step, np.int64))
        for k, v in episode.items():
            self.evals.setdefault(k, []).append(np.asarray(v))
        atomic_savez(os.path.join(self.run_dir, EVALS_NPZ),
                     {k: np.stack(v) for k, v in self.evals.items()})

    def flush(self) -> None:
        _write_csv(os.path.join(self.run_dir, PROGRESS_CSV), self.rows)


# ------------------------------------------------------------------------------- the loop
class _Run:
    """State of one training invocation (fresh or resumed) for a group of seeds."""

    def __init__(self, algo: str, cfg: AlgoConfig, env, env_spec: str | None, env_options: dict,
                 seeds: tuple[int, ...], run_dirs: list[str], eval_every: int,
                 checkpoint_every: int, progress: str | None):
        self.algo, self.cfg, self.env = algo, cfg, env
        self.env_spec, self.env_options = env_spec, env_options
        self.seeds, self.run_dirs = seeds, run_dirs
        self.eval_every_updates = max(1, eval_every // cfg.rollout_size)
        self.checkpoint_every = checkpoint_every
        self.progress_mode = progress
        self.records = [_SeedRecord(d, s) for d, s in zip(run_dirs, seeds)]
        self.compiled = compile_algorithm(algo, env, cfg)
        self.train_params = env.default_params
        self.eval_params = env.eval_params
        self.seed_keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])

    def template(self):
        """A fresh train state: the structure, shapes and dtypes a checkpoint must match."""
        return self.compiled.init(self.seed_keys, self.train_params)

    def _policy(self, params, s: int, step: int, summary: dict) -> Policy:
        seed_params = jax.tree_util.tree_map(lambda x: np.asarray(x[s]), params)
        meta = {"algo": self.algo, "seed": self.seeds[s], "step": step, "env": self.env_spec,
                "env_options": self.env_options, "eval": summary}
        return Policy(self.compiled.model, seed_params, meta)

    def _evaluate(self, state, step: int, wall: float, rows: list[dict], reporter) -> float | None:
        episodes = jax.device_get(self.compiled.evaluate(
            state.params["actor"], self.eval_params, jax.random.PRNGKey(EVAL_KEY_SEED)))
        params = jax.device_get(state.params)
        latest_jt = None
        for s, rec in enumerate(self.records):
            ep = {k: np.asarray(v[s]) for k, v in episodes.items()}
            summary = eval_summary(ep)
            rows[s].update({k: _fmt(v) for k, v in summary.items()})
            rec.add_eval(step, ep)
            policy = self._policy(params, s, step, summary)
            policy.save(os.path.join(rec.run_dir, LAST_POLICY_DIR))
            score = summary.get("eval_JT_min", -summary["eval_return"])
            if not math.isnan(score) and score < rec.best:
                rec.best, rec.best_step = score, step
                policy.save(os.path.join(rec.run_dir, BEST_POLICY_DIR))
            prefix = f"seed {self.seeds[s]} " if len(self.seeds) > 1 else ""
            reporter.write(prefix + format_eval_line(step, wall, summary))
            if "eval_JT_min" in summary and (latest_jt is None or summary["eval_JT_min"] < latest_jt):
                latest_jt = summary["eval_JT_min"]
        return latest_jt

    def _checkpoint(self, state, update: int, wall: float) -> None:
        for rec in self.records:
            rec.flush()  # progress.csv must cover every update up to the checkpoint
        meta = {"update": update, "step": update * self.cfg.rollout_size, "wall": wall,
                "seeds": list(self.seeds), "best": [r.best for r in self.records],
                "best_step": [r.best_step for r in self.records]}
        for rec in self.records:
            save_checkpoint(os.path.join(rec.run_dir, CHECKPOINT), state, meta)

    def loop(self, state, start_update: int, wall_offset: float, stop_after: int | None):
        cfg = self.cfg
        n_updates = cfg.n_updates
        reporter = ProgressReporter(n_updates * cfg.rollout_size, start_update * cfg.rollout_size,
                                    self.progress_mode)
        state = jax.tree_util.tree_map(jnp.asarray, state)
        t0 = time.perf_counter()
        finished = True
        try:
            for i in range(start_update, n_updates):
                state, stats = self.compiled.update(state, self.train_params)
                stats = jax.device_get(stats)
                step = (i + 1) * cfg.rollout_size
                wall = wall_offset + time.perf_counter() - t0
                rows = [{"step": str(step), "wall": _fmt(wall), "update": str(i + 1),
                         **{k: _fmt(v[s]) for k, v in stats.items()}}
                        for s in range(len(self.seeds))]
                last = i == n_updates - 1
                jt = None
                if (i + 1) % self.eval_every_updates == 0 or last:
                    jt = self._evaluate(state, step, wall, rows, reporter)
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
        return TrainResult(self.run_dirs, jax.device_get(state), [r.rows for r in self.records],
                           finished)


# ----------------------------------------------------------------------------- public API
def train(algo: str = "ppo", env: Any = DEFAULT_ENV, env_options: dict | None = None,
          config: AlgoConfig | dict | None = None, seeds=(0,), eval_every: int = 2_000_000,
          out: str = "runs", tag: str = "", checkpoint_every: int = 25,
          progress: str | None = None, argv: list[str] | None = None,
          stop_after: int | None = None) -> TrainResult:
    """Train `algo` on `env` for every seed at once and write one run directory per seed.

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

    Returns:
        `TrainResult`.
    """
    cfg = make_config(algo, config)
    seeds = _check_seeds(seeds)
    eval_every = _check_pos_int("eval_every", eval_every)
    checkpoint_every = _check_pos_int("checkpoint_every", checkpoint_every)
    tag = _check_tag(tag)
    env_options = dict(env_options or {})
    with jax.enable_x64(True):  # the physics is float64; networks stay float32 by construction
        if isinstance(env, str):
            env_spec, env_obj = env, load_env(env, env_options)
        else:
            check_env(env)
            env_spec, env_obj = None, env
        model = model_for(env_obj, cfg)
        run_dirs = _make_run_dirs(out, algo, seeds, tag)
        group = [os.path.basename(d) for d in run_dirs]
        for s, d in zip(seeds, run_dirs):
            atomic_write_json(os.path.join(d, RUN_CONFIG), {
                "format": "jaxrl_agents.run", "format_version": 1,
                "algo": algo, "env": env_spec, "env_options": env_options,
                "env_config": _env_description(env_obj), "algo_config": cfg.to_dict(),
                "network": model.to_dict(), "seed": s, "seeds": list(seeds), "group": group,
                "eval_every": eval_every, "checkpoint_every": checkpoint_every, "tag": tag,
                "out": os.path.abspath(out), "argv": list(argv) if argv is not None else None,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "versions": _versions(env_spec), "backend": jax.default_backend(),
                "devices": [str(d) for d in jax.devices()],
                "precision": {"x64": True, "network": "float32"}})
        run = _Run(algo, cfg, env_obj, env_spec, env_options, seeds, run_dirs, eval_every,
                   checkpoint_every, progress)
        state = run.compiled.init(run.seed_keys, run.train_params)
        return run.loop(state, 0, 0.0, stop_after)


def _record_extension(run_dirs: list[str], old_total: int, new_total: int, at_step: int) -> None:
    """Write the new budget into every group member's config.json, keeping a log of extensions."""
    for d in run_dirs:
        path = os.path.join(d, RUN_CONFIG)
        with open(path) as f:
            rc = json.load(f)
        rc["algo_config"]["total_steps"] = new_total
        rc.setdefault("extensions", []).append(
            {"from_total_steps": old_total, "to_total_steps": new_total, "at_step": at_step,
             "time": datetime.datetime.now(datetime.timezone.utc).isoformat()})
        atomic_write_json(path, rc)


def resume(run_dir: str, env: Any = None, progress: str | None = None,
           stop_after: int | None = None, total_steps: int | None = None) -> TrainResult:
    """Continue an interrupted run (and its seed group) from its last checkpoint.

    Args:
        run_dir: any run directory of the group.
        env: the environment object, only needed if the run was started with an object rather
            than a "module:factory" name.
        progress: as in `train`.
        stop_after: as in `train`.
        total_steps: a new step budget, to extend a run (also a finished one). The learning-rate
            decay then follows the new budget from the checkpoint on, so an extended run is not
            the same as one started with that budget; each config.json records the extension.
            None keeps the run's budget (and resume reproduces the uninterrupted run exactly).
    """
    path = os.path.join(run_dir, RUN_CONFIG)
    if not os.path.isfile(path):
        raise ValueError(f"resume: expected a run directory containing {RUN_CONFIG}, got "
                         f"{run_dir!r}")
    with open(path) as f:
        rc = json.load(f)
    ckpt = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(ckpt):
        raise ValueError(f"resume: {run_dir!r} has no {CHECKPOINT} yet (interrupted before the "
                         f"first checkpoint); start a new run instead")
    if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                    or total_steps <= 0):
        raise ValueError(f"total_steps: expected a positive integer, got {total_steps!r}")
    old_total = rc["algo_config"]["total_steps"]
    extend = total_steps is not None and total_steps != old_total
    cfg = make_config(rc["algo"], {**rc["algo_config"],
                                   "total_steps": total_steps if extend else old_total})
    parent = os.path.dirname(os.path.abspath(run_dir))
    run_dirs = [os.path.join(parent, name) for name in rc["group"]]
    for d in run_dirs:
        if not os.path.isdir(d):
            raise ValueError(f"resume: seed group member {d!r} is missing; the seeds of a group are "
                             f"trained together and resume together")
    with jax.enable_x64(True):
        if env is None:
            if rc["env"] is None:
                raise ValueError("env: this run was started with an environment object; pass the "
                                 "same object as resume(run_dir, env=...)")
            env = load_env(rc["env"], rc["env_options"])
        else:
            check_env(env)
        run = _Run(rc["algo"], cfg, env, rc["env"], rc["env_options"], tuple(rc["seeds"]),
                   run_dirs, rc["eval_every"], rc["checkpoint_every"], progress)
        state, meta = load_checkpoint(ckpt, run.template())
        if extend:
            if cfg.n_updates < meta["update"]:
                raise ValueError(
                    f"total_steps: expected at least the {meta['step']} steps already trained, "
                    f"got {total_steps}")
            _record_extension(run_dirs, old_total, cfg.total_steps, meta["step"])
        for rec, best, best_step in zip(run.records, meta["best"], meta["best_step"]):
            rec.restore(meta["step"], best, best_step)
        if meta["update"] >= cfg.n_updates:
            return TrainResult(run_dirs, state, [r.rows for r in run.records], True)
        return run.loop(state, meta["update"], meta["wall"], stop_after)
