"""The sweep driver: the sweep directory, Ray, and Ray Tune's ``Tuner`` (start or restore).

Layout of a sweep directory ``<out>/<name>/``::

    sweep.json       the validated SPEC; a rerun must bring the same SPEC (then it resumes)
    spec.toml        the SPEC file as given
    runs/<trial_id>/ the trial's run directories (normal jaxrl-train runs), trial_log.jsonl,
                     replaced/ (run directories a PBT exploit replaced)
    tune/            Ray Tune's experiment state, per-trial results and PBT checkpoints
    summary.csv      the ranked trials
    .jax_cache/      JAX's persistent compilation cache, shared by the trials

Resume: rerunning the same command finds ``tune/`` and calls ``Tuner.restore``: finished trials
stay finished, unfinished ones start again and their trial function resumes the run directories
from the trainer's last checkpoint (or adopts their last PBT checkpoint).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import sys
import warnings

from . import jaxrl, resources, summary
from .spec import SpecError, SweepSpec

__all__ = ["run_sweep", "prepare_sweep_dir", "check_address", "probe_address", "SWEEP_JSON",
           "TUNE_DIR", "CONNECT_TIMEOUT_S"]

SWEEP_JSON = "sweep.json"
SPEC_COPY = "spec.toml"
TUNE_DIR = "tune"
_ADDRESS = re.compile(r"^(auto|[\w.\-]+:\d+)$")
#: Seconds `probe_address` waits for the head to accept a connection.
CONNECT_TIMEOUT_S = 10.0


def check_address(address: str | None) -> str | None:
    """None (start a local Ray), ``auto`` or ``HOST:PORT`` (the GCS of ``ray start --head``).

    ``ray://`` (Ray Client) is refused: it needs ``ray[client]`` (grpcio), which the ``[sweep]``
    extra does not install, and a sweep driver outside the cluster would still need the sweep
    directory at the same path as the trials (it reads their run directories). Run jaxrl-sweep
    on a node of the cluster instead.
    """
    if address is not None and address.startswith("ray://"):
        raise SpecError(f"--address: {address!r} is a Ray Client address, which jaxrl-sweep does not "
                        f"support (it needs ray[client], and the driver must see the sweep "
                        f"directory); run jaxrl-sweep on a node of the cluster with --address auto "
                        f"or --address HEAD_IP:PORT (the --port of `ray start --head`, 6379 by default)")
    if address is not None and not _ADDRESS.match(address):
        raise SpecError(f"--address: expected 'auto' or 'HOST:PORT' (the --port of `ray start "
                        f"--head`), got {address!r}")
    return address


def probe_address(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Check that something accepts connections at ``HOST:PORT`` before Ray is asked to join it.

    ``ray.init`` retries an unreachable GCS for minutes, printing only its own warnings; one TCP
    connect with a timeout answers in bounded time. ``None`` and ``auto`` are not probed (``auto``
    reads the address of this node's cluster, and ``ray.init`` fails at once without one).

    Raises:
        ConnectionError: naming the address, within about ``timeout`` seconds.
    """
    if address is None or address == "auto":
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        reason = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise ConnectionError(f"--address: nothing accepts connections at {address} ({reason} within "
                              f"{timeout:g} s); start the head there with `ray start --head "
                              f"--port={port}`, or check the address") from None


def _remove_new_sweep_dir(sweep_dir: str, created: bool) -> None:
    """Undo `prepare_sweep_dir` for a sweep that never started: its own files only."""
    for name in (SWEEP_JSON, SPEC_COPY, resources.XLA_RECORD):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(sweep_dir, name))
    with contextlib.suppress(OSError):
        os.rmdir(os.path.join(sweep_dir, summary.RUNS_DIR))  # only if still empty
    if created:
        with contextlib.suppress(OSError):
            os.rmdir(sweep_dir)


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def prepare_sweep_dir(spec: SweepSpec, spec_path: str | None) -> tuple[str, bool]:
    """Create the sweep directory, or check that an existing one holds this same SPEC.

    Returns:
        (sweep_dir, existed).

    Raises:
        SpecError: the directory exists with another SPEC, or is not a sweep directory; it is
            never overwritten.
    """
    d = spec.sweep_dir
    stored = os.path.join(d, SWEEP_JSON)
    fio = jaxrl.fileio
    # As written (strict JSON: an inf or NaN is null), and the file as read, the same way (one
    # written before held Infinity).
    new = json.loads(fio.json_text(spec.to_json()))
    if os.path.isfile(stored):
        with open(stored, encoding="utf-8") as f:
            old = fio.json_ready(json.load(f))
        if old != new:
            a, b = _flat(old), _flat(new)
            diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            raise SpecError(f"name: the sweep directory {d} holds a sweep with another SPEC "
                            f"(differs in {diff[:6]}); rerun with its SPEC to resume it, or "
                            f"choose another name or --out (sweeps are never overwritten)")
        return d, True
    if os.path.exists(d) and os.listdir(d):
        raise SpecError(f"name: {d} exists and is not a jaxrl-sweep directory (no {SWEEP_JSON}); "
                        f"choose another name or --out (it is never overwritten)")
    os.makedirs(os.path.join(d, summary.RUNS_DIR), exist_ok=True)
    if spec_path is not None:
        with open(spec_path, "rb") as f:
            fio.atomic_write(os.path.join(d, SPEC_COPY), f.read())
    resources.record_small_loops(d)  # what every trial compiles under (a resume reuses it)
    fio.atomic_write_json(stored, new)  # last: its presence marks a complete sweep directory
    return d, False


def _init_ray(spec: SweepSpec, address: str | None, sweep_dir: str) -> None:
    import ray

    env_vars = resources.worker_env(spec.cpus_per_trial, os.path.join(sweep_dir, resources.JAX_CACHE))
    # Workers import the env factory by name: let them see what the driver sees from its
    # working directory (on a cluster, install the env's package on every node instead).
    path = [os.getcwd()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env_vars["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    runtime_env = {"env_vars": env_vars}
    with warnings.catch_warnings():
        # JAX (imported to check the env options) warns on any fork; Ray forks only to exec
        # its own processes.
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        if address is None:
            ray.init(num_cpus=spec.num_cpus, include_dashboard=False, runtime_env=runtime_env,
                     log_to_driver=False, logging_level=logging.ERROR)
        else:
            try:
                ray.init(address=address, runtime_env=runtime_env, log_to_driver=False,
                         logging_level=logging.WARNING)
            except ConnectionError as e:
                raise ConnectionError(join_failure_message(address, e)) from None


def join_failure_message(address: str, error: Exception) -> str:
    """What to tell a user whose head accepted a TCP connection but refused to let Ray join.

    The probe has already shown that the head listens, so the usual cause is authentication: since
    Ray 2.5x a head started while a token exists (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token``) or with ``RAY_AUTH_MODE=token`` refuses drivers without the same token,
    and Ray says so only in its log lines ("InvalidAuthToken").
    """
    return (f"--address: Ray could not join the cluster at {address} ({error}). The head answers, "
            f"so it most likely refused this driver's authentication token: give jaxrl-sweep the "
            f"head's token (the same RAY_AUTH_MODE and RAY_AUTH_TOKEN, or the head's "
            f"~/.ray/auth_token; `ray get-auth-token` on the head prints it)")


def _trial_id(result) -> str | None:
    tid = (result.metrics or {}).get("trial_id")
    if tid:
        return tid
    m = re.search(r"_([0-9a-f]{5}_\d{5})_", os.path.basename(str(result.path)))
    return m.group(1) if m else None


def run_sweep(spec: SweepSpec, *, spec_path: str | None = None, address: str | None = None,
              retry_errored: bool = False, progress: str | None = None,
              print_table: bool = True) -> list[dict]:
    """Run (or resume) a sweep and write its ranked summary.

    Args:
        spec: the validated SPEC.
        spec_path: the SPEC file, copied into the sweep directory.
        address: None starts a local Ray (and stops it at the end); ``auto`` or ``HOST:PORT``
            joins a running cluster (``HOST:PORT`` is probed first: `probe_address`).
        retry_errored: on resume, also run again the trials that failed for good.
        progress: "bar", "lines", "off", or None (bar on a terminal).
        print_table: print the ranked table at the end.

    Returns:
        The summary rows, best first (as in summary.csv).
    """
    check_address(address)
    probe_address(address)  # an unreachable head fails here, in bounded time, creating nothing
    created = not os.path.exists(spec.sweep_dir)
    sweep_dir, existed = prepare_sweep_dir(spec, spec_path)
    # Ray's `uv run` hook would package the whole working directory into every worker's
    # environment (gigabytes with run directories in it) and re-create the venv per worker: the
    # workers already run this interpreter (local) or the cluster's install (remote).
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    # The classic reporter at verbose=0 is silent: SweepProgress prints the trial events.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # PBT checkpoints at every report, and Tune snapshots its state with each: by design here.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    import ray
    from ray import tune

    from .progress import SweepProgress
    from .space import make_scheduler, param_space
    from .trial import run_trial

    cfg = jaxrl.make_config(spec.train["algo"],
                            dict(spec.train["config"], total_steps=spec.train["total_steps"]))
    final_step = cfg.n_updates * cfg.rollout_size
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, sweep_dir=sweep_dir, spec_json=spec.to_json()),
        {"cpu": spec.cpus_per_trial})
    tune_path = os.path.join(sweep_dir, TUNE_DIR)
    # A process that already runs Ray (a notebook, a test) keeps its connection as it is.
    owns_ray = not ray.is_initialized()
    if owns_ray:
        try:
            _init_ray(spec, address, sweep_dir)
        except BaseException:
            if not existed:  # a sweep that never started leaves no sweep directory behind
                _remove_new_sweep_dir(sweep_dir, created)
            raise
    try:
        if existed and tune.Tuner.can_restore(tune_path):
            print(f"jaxrl-sweep: resuming {sweep_dir}", file=sys.stderr)
            tuner = tune.Tuner.restore(tune_path, trainable, resume_unfinished=True,
                                       resume_errored=retry_errored)
        else:
            from ray.tune.search.basic_variant import BasicVariantGenerator

            tuner = tune.Tuner(
                trainable, param_space=param_space(spec),
                tune_config=tune.TuneConfig(
                    metric=spec.metric_key, mode=spec.mode, scheduler=make_scheduler(spec),
                    # A reused worker keeps JAX imported and its compiled programs in memory:
                    # PBT's exploit steps and short trials then start in well under a second.
                    num_samples=spec.num_samples, reuse_actors=True,
                    max_concurrent_trials=spec.max_concurrent or None,
                    search_alg=BasicVariantGenerator(random_state=spec.random_seed)),
                run_config=tune.RunConfig(
                    name=TUNE_DIR, storage_path=sweep_dir, verbose=0,
                    failure_config=tune.FailureConfig(max_failures=spec.max_failures),
                    # PBT clones a member's latest checkpoint; keep a few so that one being
                    # cloned is never deleted under the clone (Tune warns below 3).
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=4),
                    callbacks=[SweepProgress(final_step, spec.n_trials(), spec.metric_key,
                                             progress)]))
        grid = tuner.fit()
        trials = []
        for result in grid:
            tid = _trial_id(result)
            if tid is None:
                continue
            trials.append({"trial_id": tid, "config": result.config or {},
                           "error": str(result.error) if result.error else "",
                           "terminated": result.error is None,
                           "non_finite": bool((result.metrics or {}).get("non_finite"))})
    finally:
        if owns_ray:
            ray.shutdown()
    rows = summary.collect(spec, trials)
    path = summary.write_summary(sweep_dir, rows)
    if print_table:
        print(summary.format_table(rows, spec.metric_key))
        print(f"summary: {path}")
    return rows
