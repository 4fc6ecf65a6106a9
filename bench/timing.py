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


def trainer_calls(compiled, per_call: int):
    """``program(states, env_params) -> (states, stats)``: `per_call` updates a compiled call.

    As the trainer calls a `Compiled`'s programs: `Compiled.update_block` with a fixed count
    (run/host/update_blocks.py), or `Compiled.update` for one update a call.
    """
    if per_call == 1:
        return compiled.update
    import jax.numpy as jnp

    count = jnp.int32(per_call)
    return lambda states, env_params: compiled.update_block(states, env_params, count, per_call)


def load() -> str:
    """The load average, to print beside figures taken on a shared machine."""
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
