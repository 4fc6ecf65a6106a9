"""Blocks of updates: several updates in one compiled call, between the loop's host visits.

After every compiled call the host reads the stats back, formats rows and queues the next call;
the device idles meanwhile. On the gate env that round trip cost PPO 5-8 % of its env steps/s
(bench/ppo_ablation.py: a ``lax.scan`` of 4 updates recovered all of it). So
the loop runs the updates between two of its visits as one call (`Compiled.update_block`): a
block ends at every evaluation, checkpoint, progress.csv rewrite and the run's end, and after at most
`updates_per_call` updates, so Ctrl-C, the progress line and a deadline still answer within a few
updates. A run of fewer than `MIN_UPDATES_FOR_BLOCKS` updates keeps one call per
update. Every block boundary is an absolute update number, never one counted from where the
process started: a resumed run computes the same blocks as the uninterrupted one. (A block gives
the bits of its updates called one by one, so the blocks only move wall-clock figures.)
"""

from __future__ import annotations

import os

__all__ = ["UPDATES_PER_CALL", "MIN_UPDATES_FOR_BLOCKS", "updates_per_call", "block_end"]

UPDATES_PER_CALL = 4  # the most updates one compiled call runs (see the module docstring)
# Runs with fewer updates keep one call per update: the block is one more program to compile
# (seconds), more than it saves a short run (a few ms per update).
MIN_UPDATES_FOR_BLOCKS = 256


def updates_per_call(n_updates: int) -> int:
    """The most updates one compiled call runs in a run of `n_updates` updates.

    `UPDATES_PER_CALL`, or 1 (one call per update) for a run shorter than
    `MIN_UPDATES_FOR_BLOCKS`. ``JAXRL_UPDATES_PER_CALL`` (a positive integer) overrides both; 1
    calls the one-update program once per update, as the loop did before blocks (benchmarks and
    tests compare the two this way).

    Raises:
        ValueError: ``JAXRL_UPDATES_PER_CALL`` is set to something other than a positive integer.
    """
    text = os.environ.get("JAXRL_UPDATES_PER_CALL")
    if text is None:
        return UPDATES_PER_CALL if n_updates >= MIN_UPDATES_FOR_BLOCKS else 1
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"JAXRL_UPDATES_PER_CALL: expected a positive integer, got {text!r}")
    return int(text)


def block_end(done: int, end: int, cadences: tuple[int, ...], capacity: int) -> int:
    """The last update of the block that starts after update `done`.

    Args:
        done: updates trained so far (the block starts at update ``done + 1``).
        end: the last update this call of the loop may train (``done < end``).
        cadences: update counts whose multiples end a block (evaluation, checkpoint,
            progress.csv rewrite).
        capacity: the most updates in one block (its multiples end a block too).

    Returns:
        The smallest update ``u > done`` that is ``end`` or a multiple of a cadence or of
        `capacity`.

    >>> block_end(0, 30, (3, 4), 4)
    3
    >>> block_end(3, 30, (3, 4), 4)
    4
    >>> block_end(28, 30, (3, 4), 4)
    30
    """
    stops = [end] + [(done // c + 1) * c for c in (*cadences, capacity)]
    return min(stops)
