"""Seeds trained together, run as concurrent slices: one worker thread per CPU core.

A seed group's compiled update takes every seed at once (leading seed axis S). On a CPU that one
program runs on one core: its matmuls (256-row minibatches, 128-wide layers) are too small for
XLA's intra-op threads, and XLA:CPU runs a program's independent loops one after another. So the
trainer splits a group into ``min(S, cores)`` contiguous slices, runs each slice's update in its
own thread (XLA releases the GIL while it computes), and joins the results along the seed axis.
Measured with the paper's PPO on the gate environment on 2 cores (bench/README.md): 8 seeds in 2
slices cost 0.171 s per seed and update, one seed alone 0.354 s (2.07x), the unsplit group 0.348
s (1.02x).

A seed's bits can depend on its slice. Slices of two or more seeds computed what the whole group
computes, but XLA compiles a one-seed slice of TRPO's update differently (size-1 batch axes
folded away), ~1e-7 apart after one update. So the number of slices is part of a run: the loop
records it in every checkpoint and a resume splits the same way; a checkpoint without it was
written when a group ran as one program, and resumes as one.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import threading
from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["over_seed_groups", "seed_slices", "worker_count"]

_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def worker_count() -> int:
    """Slices a new run splits its seed group into, at most: the CPU cores this process may use.

    ``JAXRL_SEED_THREADS`` (a positive integer) overrides it, e.g. 1 to train a new group as one
    program (benchmarks compare the two this way).

    Raises:
        ValueError: ``JAXRL_SEED_THREADS`` is set to something other than a positive integer.
    """
    text = os.environ.get("JAXRL_SEED_THREADS")
    if text is not None:
        if not text.strip().isdigit() or int(text) < 1:
            raise ValueError(f"JAXRL_SEED_THREADS: expected a positive integer, got {text!r}")
        return int(text)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def seed_slices(n_seeds: int, n_workers: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) slices of `n_seeds`, as even as possible, at most `n_workers`.

    >>> seed_slices(8, 2)
    [(0, 4), (4, 8)]
    >>> seed_slices(5, 2)
    [(0, 3), (3, 5)]
    """
    n = max(1, min(n_seeds, n_workers))
    base, extra = divmod(n_seeds, n)
    bounds, start = [], 0
    for i in range(n):
        stop = start + base + (i < extra)
        bounds.append((start, stop))
        start = stop
    return bounds


def _pool(n_workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """One process-wide pool, grown when a caller needs more workers than it has."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < n_workers:
            _POOL = concurrent.futures.ThreadPoolExecutor(n_workers,
                                                          thread_name_prefix="jaxrl-seeds")
        return _POOL


def over_seed_groups(program: Callable, n_slices: int) -> Callable:
    """Run `program` on `n_slices` slices of its seed axis concurrently, joined as one call returns.

    Args:
        program: ``program(seeded, *rest) -> outputs``: a jitted function whose first argument is
            a pytree with leaves (S, ...) and whose outputs all have the leading seed axis S.
        n_slices: slices (and threads) to split the seed axis into (`seed_slices`; fewer when
            S < n_slices).

    Returns:
        The same signature. One slice (S = 1, or ``n_slices == 1``) calls `program` as it is, so
        its results stay asynchronous; otherwise each slice's results are ready when it returns.
    """
    @functools.wraps(program)
    def run(seeded, *rest):
        n_seeds = jax.tree_util.tree_leaves(seeded)[0].shape[0]
        bounds = seed_slices(n_seeds, n_slices)
        if len(bounds) == 1:
            return program(seeded, *rest)
        # jax.enable_x64 is thread-local: each worker computes under the caller's setting.
        x64 = bool(jax.config.read("jax_enable_x64"))

        def one_slice(start: int, stop: int):
            with jax.enable_x64(x64):
                part = jax.tree_util.tree_map(lambda x: x[start:stop], seeded)
                # Blocking here keeps the computation on this worker's core.
                return jax.block_until_ready(program(part, *rest))

        pool = _pool(len(bounds))
        futures = [pool.submit(one_slice, a, b) for a, b in bounds]
        outs = [f.result() for f in futures]
        return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *outs)

    return run
