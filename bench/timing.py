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


def trainer_threshold() -> int | None:
    """Compile this process's programs under the small-loop threshold ``jaxrl-train`` gives a new run.

    XLA:CPU turns a loop into one kernel when the bytes it touches are below a threshold, which
    ``jaxrl-train`` raises from XLA's 1 KiB to 256 KiB (run/host/small_loops.py): the gate's TRPO
    update runs 1.2-1.8x faster under it. A bench that times the trainer's programs calls this
    before its first computation, so its figures are those of a ``jaxrl-train`` run (and every
    other library in the process compiles under the same threshold). A threshold ``XLA_FLAGS``
    already names is kept: ``XLA_FLAGS=--xla_backend_extra_options=
    xla_cpu_small_while_loop_byte_threshold=1024`` times XLA's default. Subprocesses started after
    this call inherit it.

    Returns:
        The threshold in effect, bytes (None: XLA's default, where the backend had started).
    """
    from jaxrl_agents.run.host import small_loops

    return small_loops.configure_for_new_run()


def load(loops_here: bool = True) -> str:
    """The load average, the CPU and the small-loop threshold, to print beside timed figures.

    The CPU is named because lent machines differ: the gate recipe's explore stage stepped at
    15.6-18.1k env steps/s on the machine that ran seeds 101-104 and at 10.2-12.0k on an AVX2-only
    EPYC (bench/README.md), so wall-clock figures compare only within one CPU. The threshold is
    named because it moves the gate's small-batch env steps by up to 3x (`trainer_threshold`);
    `loops_here` False leaves it out, for a bench whose timed programs run in child processes that
    set their own.
    """
    line = "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())
    line += f" on {os.cpu_count()} CPUs ({cpu()})"
    return f"{line}, {loops()}" if loops_here else line


def loops() -> str:
    """The small-loop threshold this process compiles under, as a phrase.

    E.g. ``small-loop threshold 262144 B`` (``XLA_FLAGS`` names one), or ``XLA's default small-loop
    threshold``.
    """
    from jaxrl_agents.run.host import small_loops

    threshold = small_loops.in_effect()
    return "XLA's default small-loop threshold" if threshold is None else f"small-loop threshold {threshold} B"


def cpu() -> str:
    """The CPU's model name and its widest vector extension, from /proc/cpuinfo (Linux).

    E.g. ``AMD EPYC, family 25 model 1, avx2``; ``unknown CPU`` where /proc/cpuinfo is missing.
    """
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return "unknown CPU"
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if not line.strip():
            break  # the first processor's block is enough: the cores of a VM are alike
        fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    widest = next((f for f in ("avx512f", "avx2", "avx") if f in flags), "no avx")
    name = fields.get("model name", "unknown CPU")
    if "cpu family" in fields:
        name += f", family {fields['cpu family']} model {fields.get('model', '?')}"
    return f"{name}, {widest}"
