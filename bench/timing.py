"""What every bench here shares: interleaved timing of rivals, and the machine's load line."""

from __future__ import annotations

import os
import time


def interleaved(pair: dict, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, process CPU) seconds of each zero-argument callable, alternating (order swapped every round)."""
    times = {name: [] for name in pair}
    names = list(pair)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            t0, c0 = time.perf_counter(), time.process_time()
            pair[name]()
            times[name].append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def load() -> str:
    """The load average, to print beside figures taken on a shared machine."""
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
