"""The training loop of one group of seeds, fresh or resumed (`Run`).

The updates run in blocks, each one compiled call over every seed (host/update_blocks.py: a block
ends at every evaluation and checkpoint, and after at most a few updates); after a block the loop
reads its stats (the one host sync per block), stops on a non-finite update before writing
anything of it, records one row per update, evaluates on the evaluation cadence (queued before
the sync, so the device runs it while the host formats rows), prints the chosen evaluation lines,
and checkpoints on the checkpoint cadence. With
``tensorboard`` each row also goes to the seed's TensorBoard event file (tensorboard.py); with a
deadline the loop stops at the first block boundary past it, on a checkpoint.
"""

from __future__ import annotations

import functools
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from ..common.config import AlgoConfig
from ..common.contracts import evaluation_of
from ..common.evaluation import eval_summary, format_eval_line, score_to_minimise
from ..common.policy import BEST_POLICY_DIR, LAST_POLICY_DIR, Policy
from ..ippo.spaces import AgentPolicies
from ..terminal.progress import ProgressReporter
from .algorithms import FINITE_STAT, compile_algorithm
from .checkpoint import save_checkpoint
from .host.ctrl_c import ctrl_c_deferred
from .host.seed_groups import over_seed_groups, seed_slices, worker_count
from .host.update_blocks import block_end, updates_per_call
from .records import SeedRecord, best_evaluation_line, decade_crossed, fmt, power_of_ten, report_every_updates
from .results import NonFiniteError, TrainResult
from .run_files import CHECKPOINT
from .spec import RunSpec

__all__ = ["Run", "CSV_FLUSH_EVERY", "EVAL_KEY_SEED"]

CSV_FLUSH_EVERY = 10  # updates between progress.csv rewrites (and at checkpoints and the end)
EVAL_KEY_SEED = 0  # evaluation is deterministic; the key only feeds reset/step of the eval env


class Run:
    """State of one training invocation (fresh or resumed) for a group of seeds."""

    def __init__(self, spec: RunSpec, cfg: AlgoConfig, env, run_dirs: list[str],
                 progress: str | None):
        """The run `spec` describes, on the built environment `env`, writing into `run_dirs`.

        Args:
            spec: the run (algorithm, seeds, cadences, tensorboard).
            cfg: ``spec.algo_config()``, or its extension on a resume with a new budget.
            env: the environment the algorithm compiles (built from ``spec.env`` or given).
            run_dirs: one run directory per seed, in seed order.
            progress: "bar", "lines", "off" or None (bar on a terminal, lines otherwise).
        """
        algo, seeds = spec.algo, spec.seeds
        self.spec = spec
        self.algo, self.cfg, self.env = algo, cfg, env
        self.env_spec, self.env_options = spec.env, dict(spec.env_options)
        self.seeds, self.run_dirs = seeds, run_dirs
        self.eval_every_updates = max(1, spec.eval_every // cfg.rollout_size)
        self.report_every_updates = report_every_updates(cfg, self.eval_every_updates,
                                                         spec.report_every)
        self.checkpoint_every = spec.checkpoint_every
        self.progress_mode = progress
        self.records = [SeedRecord(d, s) for d, s in zip(run_dirs, seeds)]
        self.checkpoint_update = 0  # update of the checkpoint on disk (0: none yet)
        # Slices of the seed axis the update runs in, one thread each (host/seed_groups.py): as
        # many as this machine has cores for a new run; a resume sets what its checkpoint recorded.
        self.seed_slices = len(seed_slices(len(seeds), worker_count()))
        # Updates one compiled call runs at most (host/update_blocks.py); `advance` gives a
        # staged rule one update a call whatever this says.
        self.updates_per_call = min(updates_per_call(cfg.n_updates), self.eval_every_updates,
                                    self.checkpoint_every)
        self.compiled = compile_algorithm(algo, env, cfg)
        self.evaluation = evaluation_of(env)  # what an evaluation records, prints and ranks by
        self.train_params = env.default_params
        # A multi-agent core may have no eval_params (optional in its contract): train params.
        self.eval_params = getattr(env, "eval_params", env.default_params)
        self.seed_keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
        self.tensorboard = spec.tensorboard
        self._tb = None  # one TensorBoardLog per seed, opened by the first advance
        self.stopped_at_deadline = False  # the last advance stopped at its deadline
        self.stopped_by_rule = False  # the last advance stopped because its `stop_when` said so

    def _tensorboard_logs(self):
        """The seeds' event files (opened once per process: at the first advance)."""
        if self.tensorboard and self._tb is None:
            from .tensorboard import TensorBoardLog

            # A resumed run starts its event file at its checkpoint (see tensorboard.py).
            resume_step = (self.checkpoint_update * self.cfg.rollout_size
                           if self.checkpoint_update else None)
            self._tb = [TensorBoardLog(d, resume_step) for d in self.run_dirs]
        return self._tb or []

    def close(self) -> None:
        """Close the TensorBoard event files (nothing else is open)."""
        for tb in self._tb or []:
            tb.close()
        self._tb = None

    def template(self):
        """A fresh train state: the structure, shapes and dtypes a checkpoint must match."""
        return self.compiled.init(self.seed_keys, self.train_params)

    def _policy(self, params, s: int, step: int, summary: dict) -> Policy | AgentPolicies:
        """The seed's policy, or IPPO's `AgentPolicies` (saved to ``<policy dir>/<agent>/``)."""
        seed_params = jax.tree_util.tree_map(lambda x: np.asarray(x[s]), params)
        meta = {"algo": self.algo, "seed": self.seeds[s], "step": step, "env": self.env_spec,
                "env_options": self.env_options, "eval": summary}
        if self.compiled.policies is not None:
            return self.compiled.policies(seed_params, meta)
        return Policy(self.compiled.model, seed_params, meta)

    def _best_score(self) -> float | None:
        """The group's best evaluation score so far (restored on resume), in the env's own sign."""
        known = [rec.best for rec in self.records if math.isfinite(rec.best)]
        if not known:
            return None
        return min(known) if self.evaluation.score_mode == "min" else -min(known)

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
            rows[s].update({k: fmt(v) for k, v in summary.items()})
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
                mark = f"  new best {ev.score} < {power_of_ten(crossed)}" if crossed else ""
                reporter.write(prefix + format_eval_line(step, wall, summary, ev) + mark)
            if not math.isnan(score) and (latest is None or score < latest):
                latest = score
        return latest if latest is None or ev.score_mode == "min" else -latest

    def _checkpoint(self, state, update: int, wall: float) -> None:
        meta = {"update": update, "step": update * self.cfg.rollout_size, "wall": wall,
                "seeds": list(self.seeds), "best": [r.best for r in self.records],
                "best_step": [r.best_step for r in self.records],
                "seed_slices": self.seed_slices}
        # Ctrl-C waits for the whole group: every seed's files at one update, and
        # `checkpoint_update` naming the checkpoint on disk when TrainingInterrupted reads it.
        with ctrl_c_deferred():
            for rec in self.records:
                rec.save()  # progress.csv and evals.npz must cover every update up to the checkpoint
            for tb in self._tb or []:
                tb.flush()  # likewise the event files: a resume never writes those steps again
            for rec in self.records:
                save_checkpoint(os.path.join(rec.run_dir, CHECKPOINT), state, meta)
            self.checkpoint_update = update

    def _block_program(self, capacity: int):
        """``run(state, count) -> (state, stats of (S, capacity))``: `count` updates in one call.

        Over the run's seed slices; a capacity of 1 calls the one-update program.
        """
        if capacity == 1:
            update = over_seed_groups(self.compiled.update, self.seed_slices)

            def run(state, count):
                state, stats = update(state, self.train_params)
                return state, jax.tree_util.tree_map(lambda v: v[:, None], stats)
            return run
        block = over_seed_groups(self.compiled.update_block, self.seed_slices)
        return lambda state, count: block(state, self.train_params, jnp.int32(count), capacity)

    def _block_rows(self, done: int, block_last: int, stats: dict, start_wall: float,
                    end_wall: float, tb_logs) -> list[list[dict]]:
        """The progress rows of updates ``done + 1`` ... `block_last`: per update, one per seed.

        Args:
            done: updates trained before the block.
            block_last: the block's last update.
            stats: the block's stats, host arrays of (S, capacity), `FINITE_STAT` among them.
            start_wall: seconds of training when the block started.
            end_wall: seconds of training when it ended.
            tb_logs: the seeds' TensorBoard logs (the rows before a non-finite update go there).

        Raises:
            NonFiniteError: an update of the block was not finite; the rows before it are kept
                first (`_non_finite`).
        """
        finite = np.asarray(stats.pop(FINITE_STAT), bool)
        rows = []
        for j, u in enumerate(range(done + 1, block_last + 1)):
            update_stats = {k: v[:, j] for k, v in stats.items()}
            if not finite[:, j].all():
                self._keep(rows, tb_logs)
                raise self._non_finite(u, finite[:, j], update_stats)
            # Updates inside a block share one clock reading: their wall is spread evenly over
            # the block (exact at its end, where evaluations fall).
            wall = start_wall + (end_wall - start_wall) * (j + 1) / (block_last - done)
            rows.append([{"step": str(u * self.cfg.rollout_size), "wall": fmt(wall),
                          "update": str(u), **{k: fmt(v[s]) for k, v in update_stats.items()}}
                         for s in range(len(self.seeds))])
        return rows

    def _keep(self, block_rows: list[list[dict]], tb_logs) -> None:
        """Append each update's rows (one per seed) to the seeds' records and event files."""
        for rows in block_rows:
            for rec, row in zip(self.records, rows):
                rec.rows.append(row)
            for tb, row in zip(tb_logs, rows):
                tb.add_row(row)

    def _non_finite(self, update: int, finite: np.ndarray, stats: dict) -> NonFiniteError:
        """Flush the finite updates' rows and describe the failed update (nothing of it is kept)."""
        for rec in self.records:
            rec.save()
        for tb in self._tb or []:
            tb.flush()
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

    def advance(self, state, start_update: int, wall_offset: float, n: int | None,
                deadline: float | None = None, stop_when=None):
        """Train updates ``start_update + 1`` ... to the end of the run, or `n` of them.

        Args:
            state: the train state after `start_update` updates (host or device arrays; the
                device copy is donated to the update).
            start_update: updates done so far.
            wall_offset: seconds of training so far (the ``wall`` column continues from it).
            n: updates to train; None: to the end of the run.
            deadline: a ``time.monotonic()`` time: the first block of updates that ends past it
                is the last one (a block ends at every evaluation and checkpoint, and after at
                most `update_blocks.updates_per_call` updates), and a checkpoint is written
                there (``stopped_at_deadline`` tells). At least one update is trained. None: no
                deadline.
            stop_when: ``(update, records) -> bool``, asked after each update once its rows and
                evaluation are recorded (``records``: one `SeedRecord` per seed, with ``best``
                and ``best_step``): True makes that update the last one, checkpointed like a
                deadline stop (``stopped_by_rule`` tells). A pure function of the records keeps
                the stop deterministic, so a resume stops at the same update. With a rule every
                update is its own call. None: never.

        Returns:
            (state on the device, updates done, wall seconds). Updates past the last checkpoint
            are not written (a resume recomputes them), except the run's last, which writes
            everything, and the one a deadline stops at.
        """
        cfg = self.cfg
        n_updates = cfg.n_updates
        end = n_updates if n is None else min(n_updates, start_update + n)
        reporter = ProgressReporter(n_updates * cfg.rollout_size, start_update * cfg.rollout_size,
                                    self.progress_mode, score_name=self.evaluation.score,
                                    score_mode=self.evaluation.score_mode, best=self._best_score())
        tb_logs = self._tensorboard_logs()
        self.stopped_at_deadline = self.stopped_by_rule = False
        state = jax.tree_util.tree_map(jnp.asarray, state)
        # A rule is asked after every update, so it gets one update a call; otherwise blocks of
        # updates run as one call each (host/update_blocks.py), with the bits of single calls.
        capacity = 1 if stop_when is not None else self.updates_per_call
        run_block = self._block_program(capacity)
        t0 = time.perf_counter()
        wall = wall_offset
        done = start_update
        try:
            while done < end:
                block_last = block_end(done, end, (self.eval_every_updates, self.checkpoint_every,
                                                   CSV_FLUSH_EVERY), capacity)
                state, stats = run_block(state, block_last - done)
                last = block_last == n_updates
                evaluating = block_last % self.eval_every_updates == 0 or last
                # Queued before the stats sync, the evaluation runs straight after the block
                # while the host reads the stats and formats the rows (a non-finite update
                # discards it unread).
                episodes = self._dispatch_evaluation(state) if evaluating else None
                stats = jax.device_get(stats)  # the host sync of every block
                block_start_wall, wall = wall, wall_offset + time.perf_counter() - t0
                block_rows = self._block_rows(done, block_last, stats, block_start_wall, wall,
                                              tb_logs)
                jt = None
                if evaluating:
                    report = block_last % self.report_every_updates == 0 or last or \
                        block_last == self.eval_every_updates
                    jt = self._evaluate(episodes, state, block_last * cfg.rollout_size, wall,
                                        block_rows[-1], reporter, report)
                self._keep(block_rows, tb_logs)
                # Checked after the block, so every call trains at least one update.
                ruled = stop_when is not None and not last and stop_when(block_last, self.records)
                stop = ruled or (deadline is not None and not last and block_last < end
                                 and time.monotonic() >= deadline)
                if block_last % self.checkpoint_every == 0 or last or stop:
                    self._checkpoint(state, block_last, wall)
                elif block_last % CSV_FLUSH_EVERY == 0:
                    for rec in self.records:
                        rec.flush()
                for u in range(done + 1, block_last + 1):
                    reporter.update(u * cfg.rollout_size, jt if u == block_last else None)
                done = block_last
                if stop:
                    end = done
                    self.stopped_by_rule, self.stopped_at_deadline = ruled, not ruled
                    break
        finally:
            reporter.close()
            for tb in tb_logs:
                tb.flush()  # a stop, an error: what was computed is on disk (a resume purges it)
        return state, end, wall_offset + time.perf_counter() - t0

    def result(self, state, finished: bool) -> TrainResult:
        """The `TrainResult` of this run with final `state` (host arrays)."""
        return TrainResult(self.run_dirs, state, [r.rows for r in self.records], finished,
                           [best_evaluation_line(r.rows, r.best_step, self.evaluation)
                            for r in self.records])

