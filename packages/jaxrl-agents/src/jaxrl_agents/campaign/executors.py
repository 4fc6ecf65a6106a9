"""Where the campaign's tasks run: Ray tasks (the command's), or in this process (tests).

Both take a task function and its arguments, where an argument may be the reference of an
earlier task (its result is passed in its place, once that task has ended: a dependency), and
give back finished tasks one at a time. Ray schedules its tasks itself, on a local Ray by default
or on a cluster by address, as ``jaxrl-sweep`` does (`sweep.driver.check_address`,
`probe_address`).
"""

from __future__ import annotations

import itertools
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["RayTasks", "InlineTasks", "MAX_RETRIES"]

#: Times Ray starts a task again whose worker died (a lost node, an OOM kill); the task finds the
#: run where the lost one left it and resumes it.
MAX_RETRIES = 3


class RayTasks:
    """Each task a Ray task (Ray Core), on a local Ray or on the cluster at `address`.

    Args:
        address: None starts a local Ray for this campaign (and stops it in `close`); ``auto`` or
            ``HOST:PORT`` joins a running cluster (probed first, in bounded time).
        num_cpus: CPUs of the local Ray (None: `cpus_per_run`, i.e. one run at a time, as the
            campaign's times were measured).
        cpus_per_run: CPUs Ray reserves for each run.
        cwd: the driver's working directory, on the workers' import path (env factories there).
    """

    def __init__(self, address: str | None, num_cpus: int | None, cpus_per_run: int, cwd: str):
        from ..sweep.driver import check_address, join_failure_message, probe_address

        check_address(address)
        probe_address(address)
        # As jaxrl-sweep: no `uv run` repackaging of the checkout per worker, and every line of a
        # run's output reaches the driver (Ray folds "repeated" lines by default).
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        import ray

        path = [cwd] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}}
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            with warnings.catch_warnings():
                # JAX (imported to check the entries) warns on any fork; Ray forks only to exec
                # its own processes.
                warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
                if address is None:
                    ray.init(num_cpus=num_cpus or cpus_per_run, include_dashboard=False,
                             runtime_env=runtime_env, logging_level=logging.ERROR)
                else:
                    try:
                        ray.init(address=address, runtime_env=runtime_env,
                                 logging_level=logging.WARNING)
                    except ConnectionError as e:
                        raise ConnectionError(join_failure_message(address, e)) from None
        self._cpus = cpus_per_run
        self._remote: dict[Callable, Any] = {}

    def submit(self, fn: Callable, *args) -> Any:
        """Start ``fn(*args)`` as a Ray task (arguments that are references wait for their task)."""
        if fn not in self._remote:
            self._remote[fn] = self._ray.remote(num_cpus=self._cpus, max_retries=MAX_RETRIES)(fn)
        return self._remote[fn].remote(*args)

    def next_done(self, refs: Sequence[Any], timeout: float) -> tuple[Any, Any, BaseException | None]:
        """One task of `refs` that has ended: (ref, result, error); (None, None, None) on timeout."""
        ready, _ = self._ray.wait(list(refs), num_returns=1, timeout=timeout)
        if not ready:
            return None, None, None
        try:
            return ready[0], self._ray.get(ready[0]), None
        except Exception as e:  # noqa: BLE001 (a task that failed for good: reported by the driver)
            return ready[0], None, e

    def stop(self, refs: Sequence[Any]) -> None:
        """Ask running tasks to stop (a KeyboardInterrupt in each: it stops its run cleanly)."""
        for ref in refs:
            try:
                self._ray.cancel(ref)
            except Exception:  # noqa: BLE001 (already ended)
                pass

    def close(self) -> None:
        """Stop the local Ray this campaign started (a joined cluster keeps running)."""
        if self._owns:
            self._ray.shutdown()


class InlineTasks:
    """Each task run in this process, in the order submitted, when its result is asked for.

    For tests and debugging: the same task function, dependencies and outcomes as `RayTasks`,
    with no Ray (a task's references must name tasks submitted before it).
    """

    def __init__(self):
        self._ids = itertools.count()
        self._pending: dict[int, tuple[Callable, tuple]] = {}
        self._results: dict[int, Any] = {}

    def submit(self, fn: Callable, *args) -> _Ref:
        """Queue ``fn(*args)``; it runs when `next_done` reaches it."""
        ref = _Ref(next(self._ids))
        self._pending[ref] = (fn, args)
        return ref

    def next_done(self, refs: Sequence[int], timeout: float) -> tuple[int, Any, None]:  # noqa: ARG002
        """Run the earliest queued task of `refs` here and return (ref, result, None)."""
        ref = min(refs)
        fn, args = self._pending.pop(ref)
        resolved = [self._results[a] if isinstance(a, _Ref) else a for a in args]
        self._results[ref] = fn(*resolved)
        return ref, self._results[ref], None

    def stop(self, refs: Sequence[int]) -> None:  # noqa: ARG002 (a Ctrl-C already reached the task)
        """Nothing to do: a Ctrl-C already stopped the task running here."""
        return None

    def close(self) -> None:
        """Nothing to close."""
        return None


class _Ref(int):
    """A task reference among `InlineTasks.submit`'s arguments (Ray's are ObjectRefs)."""
