"""Sweep progress on the driver: one line per trial event and an overall bar (a Tune callback).

Events: a trial started, resumed, was retried after its worker died, exploited another trial
(PBT), finished, was stopped early (ASHA), went non-finite, or failed. The bar counts environment
steps over all trials (a trial stopped early counts as done).
"""

from __future__ import annotations

import datetime
import json
import sys

from ray import tune

__all__ = ["SweepProgress"]


def _short(config: dict) -> str:
    return " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(config.items()))


class SweepProgress(tune.Callback):
    """Tune callback printing trial events and a tqdm bar on stderr (lines only when not a TTY).

    Args:
        final_step: environment steps at the end of one trial.
        n_trials: trials of the sweep.
        metric_key: the reported metric shown in the lines.
        mode: "bar", "lines" or "off" (None: bar on a terminal).
    """

    def __init__(self, final_step: int, n_trials: int, metric_key: str, mode: str | None = None):
        self.final_step, self.n_trials, self.metric_key = final_step, n_trials, metric_key
        self.mode = mode
        self._steps: dict[str, int] = {}
        self._generation: dict[str, int] = {}
        self._done: set[str] = set()
        self._started: set[str] = set()
        self._bar = None

    def __getstate__(self):  # Tune pickles its callbacks with the experiment; not the bar
        state = dict(self.__dict__)
        state["_bar"] = None
        return state

    def _mode(self) -> str:
        if self.mode is None:
            self.mode = "bar" if sys.stderr.isatty() else "lines"
        return self.mode

    def _ensure_bar(self):
        if self._bar is None and self._mode() == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.final_step * self.n_trials, unit="step", unit_scale=True,
                             dynamic_ncols=True, desc="sweep", file=sys.stderr)
        return self._bar

    def _line(self, trial, text: str) -> None:
        if self._mode() == "off":
            return
        stamp = datetime.datetime.now().strftime("%H:%M:%S")
        line = (f"{stamp} [{len(self._done)}/{self.n_trials} done] trial {trial.trial_id} "
                f"{text}")
        bar = self._ensure_bar()
        if bar is not None:
            bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def _advance(self) -> None:
        bar = self._ensure_bar()
        if bar is not None:
            total = sum(self.final_step if t in self._done else s for t, s in self._steps.items())
            bar.update(total - bar.n)

    def _value(self, trial) -> str:
        v = (trial.last_result or {}).get(self.metric_key)
        return f"{self.metric_key}={v:.4g}" if isinstance(v, (int, float)) else ""

    def on_trial_start(self, iteration, trials, trial, **info):
        """Tune hook: print "started" with the trial's config, or "continued" when PBT unpaused it.

        Args:
            iteration: Tune's loop iteration (unused).
            trials: all trials (unused).
            trial: the trial that started.
            **info: Tune's extra keywords (unused).
        """
        if trial.trial_id in self._started:  # PBT pauses and unpauses trials; Tune re-starts them
            self._line(trial, f"continued at step {self._steps.get(trial.trial_id, 0)}")
        else:
            self._started.add(trial.trial_id)
            self._line(trial, f"started  {_short(trial.config)}")

    def on_trial_restore(self, iteration, trials, trial, **info):
        """Tune hook: print that `trial` was restored from its checkpoint."""
        self._line(trial, "restored from its checkpoint")

    def on_trial_recover(self, iteration, trials, trial, **info):
        """Tune hook: print that `trial` failed and is retried from its checkpoint."""
        self._line(trial, "failed (worker died or raised); retried from its checkpoint")

    def on_trial_result(self, iteration, trials, trial, result, **info):
        """Tune hook: record the trial's step, print a PBT exploit when its generation grew, advance the bar.

        Args:
            iteration: Tune's loop iteration (unused).
            trials: all trials (unused).
            trial: the reporting trial.
            result: its report; reads ``step`` and, under PBT, ``pbt_generation`` and ``pbt_donor``.
            **info: Tune's extra keywords (unused).
        """
        tid = trial.trial_id
        self._steps[tid] = int(result.get("step", 0))
        generation = int(result.get("pbt_generation", 0))
        if generation > self._generation.get(tid, 0):
            self._line(trial, f"exploited trial {result.get('pbt_donor')} at step "
                              f"{self._steps[tid]}: now {_short(trial.config)}")
        self._generation[tid] = generation
        self._advance()

    def on_trial_complete(self, iteration, trials, trial, **info):
        """Tune hook: count `trial` as done and print how it ended, with its metric.

        Finished (reached ``final_step``), stopped early by the scheduler, or stopped on a non-finite
        update (``non_finite`` in its last result).
        """
        self._done.add(trial.trial_id)
        result = trial.last_result or {}
        step = int(result.get("step", 0))
        if result.get("non_finite"):
            what = f"stopped: non-finite update after step {step}"
        elif step < self.final_step:
            what = f"stopped early by the scheduler at step {step}"
        else:
            what = "finished"
        self._line(trial, f"{what}  {self._value(trial)}")
        self._advance()

    def on_trial_error(self, iteration, trials, trial, **info):
        """Tune hook: count `trial` as done and print that it failed for good (its error.txt path)."""
        self._done.add(trial.trial_id)
        self._line(trial, f"failed for good (see its error.txt under {trial.path})")
        self._advance()

    def on_experiment_end(self, trials, **info):
        """Tune hook: close the bar, if one was opened."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
