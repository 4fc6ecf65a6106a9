"""config.json: the one writer of a run's record, and finding a run's seed group from it.

config.json holds everything needed to rebuild a run (arguments, env spec and options, algorithm
config, network, versions, backend, precision, the seed group). `run_record` builds it for every
kind of run, `write_run_config` is the only function that writes it (new runs, extensions of the
budget, runs adopted by a sweep), and `find_group` finds a group's directories again on resume,
also after a rename or a move (by the recorded ``group_id``).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import uuid
from typing import TYPE_CHECKING, Any

import jax

from ..common.contracts import describe_evaluation, evaluation_of
from ..common.fileio import atomic_write_json
from .host import small_loops
from .host.precision import precision_record
from .run_files import RUN_CONFIG, read_run_config

if TYPE_CHECKING:  # the session imports this module
    from .session import NewRun

__all__ = ["run_record", "write_run_config", "write_run_configs", "record_extension",
           "never_checkpointed", "find_group"]


def _versions(env_spec: str | None) -> dict[str, str]:
    names = ["jaxrl-agents", "jax", "jaxlib", "numpy", "optax", "gymnasium"]
    if env_spec:
        names.append(env_spec.split(":")[0].split(".")[0].replace("_", "-"))
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _env_description(env) -> Any:
    if dataclasses.is_dataclass(env):
        try:
            return json.loads(json.dumps(dataclasses.asdict(env), default=repr))
        except (TypeError, ValueError):
            pass
    return repr(env)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def write_run_config(run_dir: str, record: dict) -> None:
    """Write `record` as ``run_dir/config.json`` (atomically): the one writer of that file."""
    atomic_write_json(os.path.join(run_dir, RUN_CONFIG), record)


def run_record(algo: str, env_spec: str | None, env_options: dict, env_obj, cfg, seeds,
               tag: str, out: str, argv: list[str] | None) -> dict:
    """The part of config.json every run has, compiled or stepped from Python."""
    return {"format": "jaxrl_agents.run", "format_version": 1, "algo": algo, "env": env_spec,
            "env_options": env_options, "env_config": _env_description(env_obj),
            "algo_config": cfg.to_dict(), "seed": seeds[0], "seeds": list(seeds), "tag": tag,
            "out": os.path.abspath(out), "argv": argv, "created": _now(),
            "versions": _versions(env_spec), "backend": jax.default_backend()}


def write_run_configs(run_dirs: list[str], plan: NewRun) -> None:
    """Write config.json of every seed's run directory of a new compiled run.

    Written from the plan's `spec.RunSpec` (`spec.RunSpec.from_run_config` reads it back) plus
    what starting it built: the environment's and network's descriptions, the fine-tuning
    source's record, versions and devices. The keys are those of every earlier config.json;
    a key a later option added is written only when the option is set.
    """
    spec = plan.spec
    base = run_record(spec.algo, plan.env_spec, dict(spec.env_options), plan.env_obj, plan.cfg,
                      spec.seeds, spec.tag, spec.out, plan.argv)
    # The group is found again on resume by this id (and the directory names as a first guess),
    # so a renamed or moved run directory still resumes.
    group = {"group": [os.path.basename(d) for d in run_dirs], "group_id": uuid.uuid4().hex}
    for s, d in zip(spec.seeds, run_dirs):
        write_run_config(d, {
            **base, "evaluation": describe_evaluation(evaluation_of(plan.env_obj)),
            "network": plan.model.to_dict(), "seed": s, **group,
            "eval_every": spec.eval_every, "checkpoint_every": spec.checkpoint_every,
            "report_every": spec.report_every, "preset": spec.preset,
            "devices": [str(x) for x in jax.devices()],
            # What the run traces under (`precision.run_x64`); a resume reads it back.
            "precision": precision_record(plan.x64),
            # XLA's small-loop threshold, where not XLA's default (`small_loops`): a resume
            # compiles under it.
            **small_loops.record_entry(),
            # Only fine-tuning runs carry the key: earlier config.json files stay as they were.
            **({"init_from": plan.init_record} if plan.init_record is not None else {}),
            # Likewise "tensorboard" (a resume keeps writing event files); a missing key is off.
            **({"tensorboard": True} if spec.tensorboard else {}),
            **spec.run_config_keys()})


def record_extension(run_dirs: list[str], configs: list[dict], old_total: int, new_total: int,
                     at_step: int) -> None:
    """Write the new budget into every group member's config.json, keeping a log of extensions."""
    for d, rc in zip(run_dirs, configs):
        rc = dict(rc, algo_config=dict(rc["algo_config"], total_steps=new_total))
        rc["extensions"] = list(rc.get("extensions", [])) + [
            {"from_total_steps": old_total, "to_total_steps": new_total, "at_step": at_step,
             "time": _now()}]
        write_run_config(d, rc)


def never_checkpointed(path: str) -> bool:
    """Whether config.json at `path` marks a run that cannot checkpoint (IPPO on a ParallelEnv)."""
    try:
        with open(path) as f:
            return json.load(f).get("checkpointed") is False
    except (OSError, ValueError, AttributeError):
        return False


def _member_config(d: str) -> dict | None:
    """The run config of directory `d`, or None if it is not a readable run directory."""
    try:
        return read_run_config(os.path.join(d, RUN_CONFIG))
    except (OSError, ValueError):
        return None


def find_group(run_dir: str, rc: dict) -> tuple[list[str], list[dict]]:
    """The directories and configs of `run_dir`'s seed group, in seed order.

    `run_dir` itself is its own seed's member whatever its name. The others are looked up by their
    recorded names next to it, and, if renamed, among its sibling directories by the group id.
    """
    parent = os.path.dirname(os.path.abspath(run_dir))
    group_id = rc.get("group_id")
    siblings = None
    dirs, configs = [], []
    for name, seed in zip(rc["group"], rc["seeds"]):
        if seed == rc["seed"]:
            dirs.append(os.path.abspath(run_dir))
            configs.append(rc)
            continue

        def belongs(c, seed=seed):  # bound now: the loop moves on
            return c is not None and c["seed"] == seed and c["seeds"] == rc["seeds"] and \
                c.get("group_id") == group_id

        by_name = os.path.join(parent, name)
        c = _member_config(by_name)
        if belongs(c):
            dirs.append(by_name)
            configs.append(c)
            continue
        if group_id is not None:
            if siblings is None:
                siblings = [(e.path, _member_config(e.path)) for e in os.scandir(parent)
                            if e.is_dir() and e.path != os.path.abspath(run_dir)]
            found = [(d, c) for d, c in siblings if belongs(c)]
            if len(found) == 1:
                dirs.append(found[0][0])
                configs.append(found[0][1])
                continue
        raise ValueError(f"resume: seed {seed} of this run's group ({name!r}) is not next to "
                         f"{run_dir!r}; the seeds of a group are trained together and resume "
                         f"together: keep their directories side by side")
    return dirs, configs


