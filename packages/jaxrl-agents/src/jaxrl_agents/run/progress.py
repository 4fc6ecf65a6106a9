"""Console progress: a tqdm bar on a terminal, plain lines otherwise (logs, CI, nohup)."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["ProgressReporter"]


def _terminal_columns() -> int:
    """Width of the terminal on stderr; 0 if it is not a terminal or reports no size.

    No size: a pty without a window, where tqdm would draw an empty bar.
    """
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns if sys.stderr.isatty() else 0
    except (OSError, ValueError):
        return 0


class ProgressReporter:
    """Reports training progress in environment steps.

    Args:
        total_steps: steps at the end of training.
        start_step: steps already done (resumed runs).
        mode: "bar" (tqdm), "lines" (plain text), "off", or None = "bar" if stderr is a TTY.
        line_every: in "lines" mode, print a status line every this many updates.
        score_name: what the latest evaluation score is (the env's ``evaluation.score``;
            ``return`` for envs that describe no evaluation), shown as
            ``eval <score_name>=<value>``.
    """

    def __init__(self, total_steps: int, start_step: int = 0, mode: str | None = None,
                 line_every: int = 10, score_name: str = "return"):
        if mode is None:
            mode = "bar" if _terminal_columns() > 0 else "lines"
        if mode not in ("bar", "lines", "off"):
            raise ValueError(f"progress: expected 'bar', 'lines', 'off' or None, got {mode!r}")
        self.mode, self.total, self.step, self.line_every = mode, total_steps, start_step, line_every
        self._t0, self._step0, self._n_updates, self._score = time.perf_counter(), start_step, 0, None
        self.score_name = score_name
        self._bar = None
        if mode == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, unit="step", unit_scale=True,
                             dynamic_ncols=True, smoothing=0.1)

    def update(self, step: int, eval_score: float | None = None) -> None:
        """Advance to `step`; `eval_score` is the latest evaluation score (if any)."""
        if eval_score is not None:
            self._score = eval_score
        delta, self.step = step - self.step, step
        self._n_updates += 1
        if self._n_updates == 1:  # the first update includes compilation: rate from here on
            self._t0, self._step0 = time.perf_counter(), step
        if self._bar is not None:
            self._bar.update(delta)
            if self._score is not None:
                self._bar.set_postfix_str(self._score_text())
        elif self.mode == "lines" and (self._n_updates % self.line_every == 0 or step >= self.total):
            print(self._status(), flush=True)

    def _status(self) -> str:
        elapsed = time.perf_counter() - self._t0
        done = self.step - self._step0
        jt = f"  {self._score_text()}" if self._score is not None else ""
        head = f"step {self.step}/{self.total} ({100 * self.step / self.total:.1f}%)"
        if done <= 0 or elapsed <= 0:
            return head + "  (compiling)" + jt
        rate = done / elapsed
        return f"{head}  {rate:,.0f} steps/s  ETA {(self.total - self.step) / rate:,.0f}s{jt}"

    def _score_text(self) -> str:
        return f"eval {self.score_name}={self._score:.3e}"

    def write(self, line: str) -> None:
        """Print a line without breaking the bar."""
        if self.mode == "off":
            return
        if self._bar is not None:
            self._bar.write(line)
        else:
            print(line, flush=True)

    def close(self) -> None:
        """Close the bar, if there is one."""
        if self._bar is not None:
            self._bar.close()
