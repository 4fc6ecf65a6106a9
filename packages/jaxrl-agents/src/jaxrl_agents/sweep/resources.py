"""CPUs per trial: what Ray reserves, and the threads a trial's JAX and BLAS may start.

Ray counts CPUs but does not stop a process from using more: JAX's CPU backend sizes its thread
pool from the process's CPU affinity mask, and BLAS/OpenMP from their ``*_NUM_THREADS`` variables.
So each trial

- gets ``OMP_NUM_THREADS`` (and the OpenBLAS, MKL, BLIS, numexpr equivalents) = cpus_per_trial,
  through the job's runtime environment (`worker_env`), and
- pins itself, before JAX creates its backend, to a *slot* of cpus_per_trial cores of the ones it
  may use (`pin_to_slot`). Slots are claimed with ``flock`` on small files in the temp directory,
  so trials on one node take disjoint cores; the kernel drops the lock when the worker dies.

With Ray's CPU count of a node at most its cores, a free slot always exists; if none does (a node
that advertises more CPUs than it has), the trial runs unpinned and says so.

Each trial also compiles its small loops as kernels under the sweep's threshold
(`run.host.small_loops`), recorded once for the sweep in ``<sweep>/xla.json`` (`record_small_loops`)
and set in the worker before JAX's backend starts (`use_small_loops`), as ``jaxrl-train`` does for
its runs: a trial's runs record it in their config.json, and their resumes need it. Sweeps written
before have no xla.json: their trials compile under XLA's default, as they did.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import tempfile

from . import jaxrl

__all__ = ["worker_env", "pin_to_slot", "use_compile_cache", "record_small_loops", "use_small_loops",
           "THREAD_VARIABLES", "JAX_CACHE", "XLA_RECORD"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")

JAX_CACHE = ".jax_cache"  # <sweep>/.jax_cache: JAX's persistent compilation cache of the trials
XLA_RECORD = "xla.json"  # <sweep>/xla.json: the small-loop threshold every trial compiles under
_held_slot: int | None = None  # the open lock file of this process's slot (kept for its life)
_pinned: list[int] | None = None  # the cores of that slot


def worker_env(cpus_per_trial: int, compile_cache: str | None) -> dict[str, str]:
    """Environment variables for every trial worker of a sweep.

    Args:
        cpus_per_trial: threads each BLAS/OpenMP pool may start.
        compile_cache: directory of JAX's persistent compilation cache (shared by the trials, so
            a retried or restarted trial loads its programs instead of compiling them), or None.
    """
    env = {name: str(cpus_per_trial) for name in THREAD_VARIABLES}
    if compile_cache:
        env["JAX_COMPILATION_CACHE_DIR"] = compile_cache
        # Cache every program: the trainer's update takes seconds to compile on a small CPU.
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    return env


def use_compile_cache(directory: str) -> None:
    """Point this worker's JAX at the sweep's persistent compilation cache.

    The trial owns its worker process, so setting JAX's configuration here changes nothing of a
    user's program; it also covers workers of a Ray that was started without `worker_env`.
    """
    from ..run.host.compile_cache import enable

    enable(directory)


def record_small_loops(sweep_dir: str) -> int:
    """Record, in a new sweep's directory, the small-loop threshold its trials compile under.

    `small_loops.new_run_threshold` of the driver's ``XLA_FLAGS``, as for a ``jaxrl-train`` run:
    the one they name (the user's choice is kept), else 256 KiB. Written atomically as
    ``{"xla_cpu_small_loop_bytes": N}`` to `XLA_RECORD`.

    Returns:
        The threshold recorded, bytes.
    """
    small_loops = jaxrl.small_loops
    threshold = small_loops.new_run_threshold()
    jaxrl.fileio.atomic_write_json(os.path.join(sweep_dir, XLA_RECORD),
                                   {small_loops.RECORD_KEY: threshold})
    return threshold


def use_small_loops(sweep_dir: str) -> int | None:
    """In a trial's worker, before JAX's backend starts: the sweep's recorded threshold.

    A sweep without `XLA_RECORD` (written before it existed) gets XLA's default. A worker whose
    backend has started already (a trial run inline, a reused worker) keeps its own: each run
    records the threshold it compiled under, and its resume checks that record.

    Returns:
        The threshold in effect (None: XLA's default).

    Raises:
        ValueError: the record is unreadable or malformed (names the file).
    """
    small_loops = jaxrl.small_loops
    path = os.path.join(sweep_dir, XLA_RECORD)
    record = jaxrl.run_files.read_json_object(path) if os.path.exists(path) else {}
    return small_loops.configure_for_record(small_loops.recorded(record, path))


def _slot_dir(cores: list[int]) -> str:
    # One namespace per user and per set of usable cores: two SLURM jobs on one node with
    # different cpusets never compete for slots.
    key = hashlib.sha1(",".join(map(str, cores)).encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"jaxrl-sweep-{os.getuid()}-{key}")
    os.makedirs(path, exist_ok=True)
    return path


def _pin_process(cores: list[int]) -> None:
    """Set the affinity of every thread of this process to `cores`.

    Tune runs a trial in a thread of its worker, and affinity is per thread (threads started later
    inherit it from their creator).
    """
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            pass  # a thread that just ended


def pin_to_slot(cpus: int) -> list[int] | None:
    """Pin this process to `cpus` cores that no other trial on this node holds.

    Call it before JAX runs anything in the process (the backend's pool is sized then).

    Returns:
        The cores pinned to, or None when no slot was free or affinity is not supported.
    """
    global _held_slot, _pinned
    if not hasattr(os, "sched_setaffinity"):
        return None
    if _held_slot is not None:  # a reused worker (Tune's reuse_actors) keeps its slot
        return _pinned
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) <= cpus:
        return None
    directory = _slot_dir(cores)
    for slot in range(len(cores) // cpus):
        fd = os.open(os.path.join(directory, f"slot{slot}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                continue
            raise
        mine = cores[slot * cpus:(slot + 1) * cpus]
        _pin_process(mine)
        _held_slot, _pinned = fd, mine  # held open: the flock lasts as long as this process
        return mine
    return None
