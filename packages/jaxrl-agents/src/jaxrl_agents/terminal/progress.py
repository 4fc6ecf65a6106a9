"""Console progress: one live status line on a terminal, plain lines otherwise (logs, CI, nohup).

On a terminal (``mode="bar"``, chosen by ``None`` when stdout is a TTY) the status is one line,
rewritten in place with a carriage return; every message (an evaluation line, a new best below a
power of ten) goes *above* it: the live line is cleared, the message printed, the line redrawn. So
the terminal reads as the list of messages with the status under them. Everything goes to stdout,
the stream the messages are on, so clearing the line never misses. The line is cut to the
terminal's width: a wrapped line could not be rewritten in place.

Without a terminal (``mode="lines"``) the status is a plain line every `line_every` updates and at
the end, between the messages: a log keeps everything in order.
"""

from __future__ import annotations

import math
import os
import sys
import time

__all__ = ["ProgressReporter", "format_duration", "REDRAW_SECONDS"]

REDRAW_SECONDS = 0.2  # the live line is rewritten at most this often (and always at the end)
_CLEAR = "\r\x1b[K"  # carriage return, then erase to the end of the line (ANSI, every terminal)


def _terminal_columns(stream) -> int:
    """Width of the terminal `stream` writes to; 0 if it is not a terminal or reports no size.

    No size: a pty without a window, where a line cut to 0 columns would show nothing.
    """
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (OSError, ValueError, AttributeError):
        return 0


def format_duration(seconds: float) -> str:
    """``42s``, ``3m07s``, ``2h05m`` (what a person reads at a glance)."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ProgressReporter:
    """Reports training progress in environment steps.

    Args:
        total_steps: steps at the end of training.
        start_step: steps already done (resumed runs).
        mode: "bar" (the live line), "lines" (plain text), "off", or None = "bar" if stdout is a
            terminal, else "lines".
        line_every: in "lines" mode, print a status line every this many updates.
        score_name: what the latest evaluation score is (the env's ``evaluation.score``;
            ``return`` for envs that describe no evaluation), shown as
            ``eval <score_name>=<value>``.
        score_mode: "min" or "max": which end of the scores is the best one shown.
        stream: where to write (default: stdout at construction).
        best: the best score before `start_step` (a resumed run's, or an earlier `advance`'s), so
            the line's best is the run's and not only this reporter's; None: none yet.
    """

    def __init__(self, total_steps: int, start_step: int = 0, mode: str | None = None,
                 line_every: int = 10, score_name: str = "return", score_mode: str = "min",
                 stream=None, best: float | None = None):
        self._out = sys.stdout if stream is None else stream
        self._columns = _terminal_columns(self._out)
        if mode is None:
            mode = "bar" if self._columns > 0 else "lines"
        if mode not in ("bar", "lines", "off"):
            raise ValueError(f"progress: expected 'bar', 'lines', 'off' or None, got {mode!r}")
        self.mode, self.total, self.step, self.line_every = mode, total_steps, start_step, line_every
        self._t0, self._step0, self._n_updates = time.perf_counter(), start_step, 0
        self._score, self._best = None, best
        self.score_name, self._sign = score_name, 1.0 if score_mode == "min" else -1.0
        self._shown = ""  # the live line on screen ("" when none)
        self._drawn_at = -math.inf

    def update(self, step: int, eval_score: float | None = None) -> None:
        """Advance to `step`; `eval_score` is the latest evaluation score (if any)."""
        if eval_score is not None:
            self._score = eval_score
            if self._best is None or self._sign * eval_score < self._sign * self._best:
                self._best = eval_score
        self.step = step
        self._n_updates += 1
        if self._n_updates == 1:  # the first update includes compilation: rate from here on
            self._t0, self._step0 = time.perf_counter(), step
        if self.mode == "bar":
            now = time.perf_counter()
            if now - self._drawn_at >= REDRAW_SECONDS or step >= self.total:
                self._draw(self.status())
                self._drawn_at = now
        elif self.mode == "lines" and (self._n_updates % self.line_every == 0 or step >= self.total):
            self._print(self.status())

    def status(self) -> str:
        """The status: steps done, rate, time left, latest and best evaluation score."""
        elapsed = time.perf_counter() - self._t0
        done = self.step - self._step0
        score = f"  {self._score_text()}" if self._score is not None else ""
        head = f"step {self.step:,}/{self.total:,} ({100 * self.step / self.total:.1f}%)"
        if done <= 0 or elapsed <= 0:
            return head + "  (compiling)" + score
        rate = done / elapsed
        eta = format_duration((self.total - self.step) / rate)
        return f"{head}  {rate:,.0f} steps/s  ETA {eta}{score}"

    def _score_text(self) -> str:
        best = "" if self._best is None or self._best == self._score else f" (best {self._best:.3e})"
        return f"eval {self.score_name}={self._score:.3e}{best}"

    def write(self, line: str) -> None:
        """Print a message above the live line (or as a plain line)."""
        if self.mode == "off":
            return
        if self._shown:
            self._out.write(_CLEAR)
        self._print(line)
        if self._shown:
            self._draw(self._shown)

    def close(self) -> None:
        """End the live line (it stays on screen as the last status), if there is one."""
        if self._shown:
            self._out.write("\n")
            self._out.flush()
            self._shown = ""

    def _draw(self, text: str) -> None:
        if self._columns > 0:
            text = text[:self._columns - 1]  # a wrapped line cannot be rewritten in place
        self._out.write(_CLEAR + text)
        self._out.flush()
        self._shown = text

    def _print(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()
