"""The trial: a Tune function trainable that trains one seed group in segments.

A trial is one `run.spec.RunSpec` (`trial_spec`: the SPEC's base run with the trial's sampled
values). A trial's run directories are normal ``jaxrl-train`` run directories under
``<sweep>/runs/<trial_id>/`` (one per seed, the seeds vmapped in one program). The trial is one
trainer session (`run.session.Session`, opened with ``checkpoint_every=segment`` or resumed)
advanced in *segments* of `SweepSpec.segment_updates` updates. So every segment ends on a
checkpoint of the trainer, and after each one the trial reports its metrics to Tune (ASHA may stop
it there; PBT may exploit). Between segments the session keeps the environment, the compiled
programs and the train state in memory: nothing is re-read; across workers JAX's persistent
compilation cache serves the programs.

Restart rules (the trial function is idempotent):

- its run directories exist: ``resume`` them (a finished run returns at once: nothing trains
  twice; a killed one continues from its last checkpoint, losing at most one segment);
- Tune hands it a checkpoint of *another* trial (a PBT exploit): the donor's snapshot is copied
  into new run directories of this trial, with this trial's (explored) config written into their
  config.json and the step recorded in ``sweep.lineage``; this trial's previous run directories
  are moved to ``replaced/<n>/``, never deleted;
- under PBT each report carries a Tune checkpoint: a snapshot of the seed group's run
  directories (the trainer's checkpoint, progress and evaluations), taken between segments.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import shutil
import socket
import tempfile
import uuid

from . import jaxrl, resources, summary
from .spec import SweepSpec

__all__ = ["run_trial", "trial_spec", "trial_settings", "TRIAL_META", "REPLACED_DIR"]

TRIAL_META = "sweep_checkpoint.json"  # inside a Tune checkpoint: whose snapshot, at which step
REPLACED_DIR = "replaced"  # run directories a PBT exploit replaced, kept


def trial_spec(spec: SweepSpec, config: dict, out: str = "runs", tag: str = "",
               checkpoint_every: int = 25) -> jaxrl.RunSpec:
    """The `RunSpec` of a trial: the SPEC's base run with the trial's sampled values over it.

    Args:
        spec: the sweep.
        config: the trial's sampled values (``config.<field>``, ``env.<option>``, ``seeds``).
        out: the trial's directory (the parent of its run directories).
        tag: the run directories' suffix (the trial id).
        checkpoint_every: updates between checkpoints (a segment: each one ends on one).

    Raises:
        ValueError: a sampled value the run refuses (named by its field).
    """
    t = spec.train
    cfg = dict(t["config"], total_steps=t["total_steps"])
    env_options = dict(t["env_options"])
    seeds = list(t["seeds"])
    for key, value in config.items():
        if key.startswith("config."):
            cfg[key[7:]] = value
        elif key.startswith("env."):
            env_options[key[4:]] = value
        elif key == "seeds":
            seeds = list(value)
    return jaxrl.RunSpec(algo=t["algo"], env=t["env"], env_options=env_options, config=cfg,
                   seeds=tuple(seeds), eval_every=t["eval_every"], out=out, tag=tag,
                   checkpoint_every=checkpoint_every,
                   tensorboard=t.get("tensorboard", False))


def trial_settings(spec: SweepSpec, config: dict) -> dict:
    """The run fields of a trial (`trial_spec`) that a PBT exploit writes into config.json."""
    r = trial_spec(spec, config)
    # A normalised config (RunSpec's): JSON round trips (lists for tuples) compare equal to
    # config.json's.
    return {"algo": r.algo, "env": r.env, "env_options": dict(r.env_options),
            "config": dict(r.config), "seeds": list(r.seeds), "eval_every": r.eval_every}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def _log(root: str, event: str, **fields) -> None:
    """Append one line to the trial's log (a small O_APPEND write: lines never interleave)."""
    line = jaxrl.fileio.json_text({"time": _now(), "event": event, "pid": os.getpid(),
                                   "host": socket.gethostname(), **fields},
                                  indent=None, default=str) + "\n"
    fd = os.open(os.path.join(root, summary.TRIAL_LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                 0o666)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ------------------------------------------------------------------------- run directories
def _current_group(root: str) -> list[str] | None:
    """The trial's seed group that has a checkpoint.

    Groups without one (killed before their first checkpoint) are moved to ``replaced/`` so the
    trial can start afresh.
    """
    rf = jaxrl.run_files
    current = None
    for group in summary.trial_groups(root):
        if all(os.path.isfile(os.path.join(d, rf.CHECKPOINT)) for d in group):
            current = group
        else:
            _set_aside(root, group)
    return current


def _set_aside(root: str, group: list[str]) -> None:
    base = os.path.join(root, REPLACED_DIR)
    os.makedirs(base, exist_ok=True)
    n = len(os.listdir(base))
    while os.path.exists(os.path.join(base, f"{n:03d}")):
        n += 1
    dest = os.path.join(base, f"{n:03d}")
    os.makedirs(dest)
    for d in group:
        os.rename(d, os.path.join(dest, os.path.basename(d)))


def _lineage(group: list[str]) -> list[dict]:
    rc = _read_json(os.path.join(group[0], jaxrl.run_files.RUN_CONFIG))
    return list(rc.get("sweep", {}).get("lineage", []))


def _adopt(ckpt_dir: str, meta: dict, root: str, trial_id: str, settings: dict) -> list[str]:
    """Make a donor's snapshot (`ckpt_dir`) this trial's seed group, with this trial's config."""
    rf, fio = jaxrl.run_files, jaxrl.fileio
    old = _current_group(root)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    staging = os.path.join(root, f".adopt-{uuid.uuid4().hex[:8]}")
    os.makedirs(staging)
    names = [f"{settings['algo']}_{stamp}_s{s}_{trial_id}" for s in settings["seeds"]]
    group_id = uuid.uuid4().hex
    entry = {"step": meta["step"], "from_trial": meta["trial_id"], "checkpoint": meta["uid"],
             "time": _now(), "config": settings["config"], "env_options": settings["env_options"]}
    for src, name in zip(meta["group"], names):
        dst = os.path.join(staging, name)
        shutil.copytree(os.path.join(ckpt_dir, src), dst,
                        ignore=shutil.ignore_patterns(fio.LOCK_FILE))
        rc = _read_json(os.path.join(dst, rf.RUN_CONFIG))
        # The weights' genealogy: the donor's own exploits, then this one.
        lineage = list(rc.get("sweep", {}).get("lineage", []))
        rc.update(group=names, group_id=group_id, tag=trial_id, out=root,
                  algo_config=settings["config"], env_options=settings["env_options"],
                  sweep={"trial_id": trial_id, "lineage": lineage + [entry]})
        jaxrl.write_run_config(dst, rc)
    if old:
        _set_aside(root, old)  # the replaced history stays on disk
    for name in names:
        os.rename(os.path.join(staging, name), os.path.join(root, name))
    os.rmdir(staging)
    return [os.path.join(root, n) for n in names]


def _snapshot(group: list[str], dest: str, trial_id: str, step: int) -> None:
    """Copy the seed group's run directories (between segments: nothing writes them) to `dest`."""
    fio = jaxrl.fileio
    for d in group:
        shutil.copytree(d, os.path.join(dest, os.path.basename(d)),
                        ignore=shutil.ignore_patterns(fio.LOCK_FILE, REPLACED_DIR))
    with open(os.path.join(dest, TRIAL_META), "w", encoding="utf-8") as f:
        json.dump({"trial_id": trial_id, "uid": uuid.uuid4().hex, "step": step,
                   "group": [os.path.basename(d) for d in group]}, f)


# ------------------------------------------------------------------------------- the trial
def _metrics(spec: SweepSpec, rows: list[list[dict]], extra: dict) -> dict:
    m = summary.trial_metrics(rows, spec.metric, spec.seeds_reduce, spec.mode)
    key = spec.metric_key
    evals = [r for seed_rows in rows for r in seed_rows if "eval_return" in r]
    if evals and spec.metric not in evals[-1]:
        fields = sorted(k for k in evals[-1] if k.startswith("eval_"))
        raise ValueError(f"metric: the runs record no {spec.metric!r}; this environment's "
                         f"evaluation fields are {fields}")
    if m[key] is None:  # no finite value yet: the worst, so schedulers rank it last
        m[key] = math.inf if spec.mode == "min" else -math.inf
    return {**m, **extra}


def run_trial(config: dict, *, sweep_dir: str, spec_json: dict) -> None:
    """Tune function trainable: train (or resume) this trial's seed group, reporting per segment.

    Args:
        config: the trial's sampled values (``config.<field>``, ``env.<option>``, ``seeds``).
        sweep_dir: the sweep directory (on storage every node sees).
        spec_json: the `SweepSpec` as JSON.
    """
    spec = SweepSpec.from_json(spec_json)
    cores = resources.pin_to_slot(spec.cpus_per_trial)  # before JAX builds its thread pool
    resources.use_small_loops(sweep_dir)  # before JAX's backend reads XLA_FLAGS
    resources.use_compile_cache(os.path.join(sweep_dir, resources.JAX_CACHE))

    from ray import tune

    trial_id = tune.get_context().get_trial_id()
    root = os.path.join(sweep_dir, summary.RUNS_DIR, trial_id)
    os.makedirs(root, exist_ok=True)
    s = trial_settings(spec, config)
    pbt = spec.scheduler["type"] == "pbt"
    seg = spec.segment_updates()

    event = "start"
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            meta = _read_json(os.path.join(d, TRIAL_META))
            group = _current_group(root)
            adopted = group is not None and any(e.get("checkpoint") == meta["uid"]
                                                for e in _lineage(group))
            if (meta["trial_id"] != trial_id or group is None) and not adopted:
                _adopt(d, meta, root, trial_id, s)
                event = "exploit" if meta["trial_id"] != trial_id else "restore"
    group = _current_group(root)
    if group is not None and event == "start":
        event = "resume"
    lineage = _lineage(group) if group else []
    donor = lineage[-1]["from_trial"] if lineage else ""
    _log(root, event, config=config, cores=cores,
         from_trial=donor if event == "exploit" else None)
    extra = {"pbt_donor": donor, "pbt_generation": len(lineage), "non_finite": False}

    if group is None:
        run = trial_spec(spec, config, out=root, tag=trial_id, checkpoint_every=seg)
        session = jaxrl.Session.open(run, progress="off",
                                     argv=["jaxrl-sweep", sweep_dir, "--trial", trial_id])
    else:
        session = jaxrl.Session.resume(group[0], progress="off")
    with session:
        group = session.run_dirs
        while True:
            try:
                result = session.advance(seg)
            except jaxrl.NonFiniteError as e:
                # A diverging configuration is a result of the sweep, not a failure to retry.
                _log(root, "non-finite", message=str(e))
                rows = summary.read_rows(list(e.run_dirs))
                tune.report(_metrics(spec, rows, {**extra, "non_finite": True}))
                return
            metrics = _metrics(spec, result.rows, extra)
            if not pbt:
                tune.report(metrics)
            else:
                with tempfile.TemporaryDirectory(prefix="jaxrl-sweep-") as d:
                    _snapshot(group, d, trial_id, metrics["step"])
                    tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))
            if result.finished:
                _log(root, "finished", step=metrics["step"])
                return
