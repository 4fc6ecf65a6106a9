"""The sweep SPEC: a TOML file, read and fully validated before Ray starts or anything compiles.

A SPEC names the base ``jaxrl-train`` run (``[train]``, with ``[train.config]`` and
``[train.env_options]``), the search space (``[space.config]``, ``[space.env]``, ``space.seeds``),
the sweep metric and the scheduler. The format is documented in docs/sweeps.md. Every error is a
`SpecError` naming the field by its TOML path (``space.config.lr``), what was expected and what
arrived.

This module holds `SweepSpec`, the reading of the file and the top-level and ``[train]`` fields;
the search space and the scheduler are parsed in spec_space.py, and the field validators both use
(`SpecError` among them) are in spec_fields.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib

from . import jaxrl
from .spec_fields import (
    SpecError,
    check_config,
    fail,
    int_field,
    known_fields,
    seed_list,
    str_field,
    table_field,
)
from .spec_space import DISTRIBUTIONS, count_trials, parse_scheduler, parse_space

__all__ = ["SpecError", "SweepSpec", "load_spec", "parse_spec", "METRIC_REDUCTIONS",
           "SEED_AGGREGATIONS", "DISTRIBUTIONS"]

METRIC_REDUCTIONS = ("best", "last", "last_quarter_median")
SEED_AGGREGATIONS = ("best", "median", "mean", "worst")
# [train] keys the sweep sets itself: the trial writes its run directories under the sweep
# directory, reports once per segment (checkpoint_every = one segment) and shows no progress bar.
_OWNED_TRAIN_KEYS = ("out", "tag", "checkpoint_every", "progress", "resume", "seed")

_TOP_KEYS = {"name", "out", "metric", "reduce", "seeds_reduce", "mode", "method", "num_samples",
             "random_seed", "cpus_per_trial", "num_cpus", "max_concurrent", "max_failures",
             "report_every", "train", "space", "scheduler"}
_TRAIN_KEYS = {"algo", "env", "env_options", "config", "seeds", "total_steps", "eval_every",
               "tensorboard", "preset", "flags"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A validated SPEC.

    Plain JSON-able values only: it travels to every trial and is stored as ``sweep.json`` in the
    sweep directory (a rerun must present the same SPEC to resume).

    Attributes:
        name: sweep directory name under `out`.
        out: parent directory of the sweep directory.
        train: base run: algo, env, env_options, config, seeds, total_steps, eval_every, and
            ``tensorboard: True`` when every trial writes TensorBoard files (absent: off).
        space: ``{"config.<field>" | "env.<option>" | "seeds": {kind: args}}``.
        method: "grid" (every combination) or "random" (`num_samples` draws).
        num_samples: repeats of the grid, or draws of a random search.
        random_seed: seed of the random search (None: Tune's own randomness).
        metric: evaluation field (``eval_<name>``; default: the env's declared score).
        reduce: over a run's evaluations: "best", "last" or "last_quarter_median".
        seeds_reduce: over a trial's seeds: "best", "median", "mean" or "worst".
        mode: "min" or "max".
        scheduler: ``{"type": "fifo" | "asha" | "pbt", ...}`` with steps as its time unit.
        cpus_per_trial: Ray CPUs of each trial, and its JAX/BLAS threads.
        num_cpus: CPUs of the local Ray this command starts (None: all of the machine).
        max_concurrent: most trials running at once (0: as many as the CPUs allow).
        max_failures: retries of a trial whose worker died or that raised.
        report_every: evaluations per report to Tune (one report = one segment).
    """

    name: str
    out: str
    train: dict
    space: dict
    method: str = "grid"
    num_samples: int = 1
    random_seed: int | None = None
    metric: str = "eval_return"
    reduce: str = "best"
    seeds_reduce: str = "best"
    mode: str = "min"
    scheduler: dict = dataclasses.field(default_factory=lambda: {"type": "fifo"})
    cpus_per_trial: int = 1
    num_cpus: int | None = None
    max_concurrent: int = 0
    max_failures: int = 3
    report_every: int = 1

    @property
    def metric_key(self) -> str:
        """The name of the metric as reported to Tune and ranked in the summary."""
        return f"{self.reduce}_{self.metric}"

    @property
    def sweep_dir(self) -> str:
        """Absolute path of the sweep directory, ``<out>/<name>``."""
        return os.path.abspath(os.path.join(self.out, self.name))

    def to_json(self) -> dict:
        """The SPEC as a JSON-able dict (what ``sweep.json`` stores)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> SweepSpec:
        """The SPEC from `to_json`'s dict (no validation beyond the dataclass fields)."""
        return cls(**d)

    def segment_updates(self) -> int:
        """Updates per segment: a trial trains this many, checkpoints, reports, and goes on."""
        cfg = jaxrl.make_config(self.train["algo"], self.train["config"])
        return max(1, self.train["eval_every"] // cfg.rollout_size) * self.report_every

    def n_trials(self) -> int:
        """Trials the sweep will run (grid: product of the value lists, times num_samples)."""
        return count_trials(self.space, self.method, self.num_samples)


# ---------------------------------------------------------------------------------- reading
def load_spec(path: str, overrides: dict | None = None) -> SweepSpec:
    """Read and validate a TOML SPEC file.

    Args:
        path: the SPEC file.
        overrides: top-level fields replacing the file's (the CLI's ``--name``, ``--out``, ...).

    Raises:
        SpecError: the file is missing, not TOML, or any field is invalid (named in the message).
    """
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise SpecError(f"SPEC: no such file {path!r}") from None
    except IsADirectoryError:
        raise SpecError(f"SPEC: expected a TOML file, got the directory {path!r}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"SPEC {path}: not valid TOML ({e})") from None
    raw.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_spec(raw)


def parse_spec(raw: dict) -> SweepSpec:
    """Validate a SPEC given as a dict (as read from TOML); see `load_spec`."""
    raw = table_field("SPEC", raw)
    known_fields("", raw, _TOP_KEYS)
    name = str_field("name", raw.get("name", "sweep"))
    if not _NAME.match(name):
        fail("name", "a directory name of letters, digits, '.', '_' or '-'", name)
    out = str_field("out", raw.get("out", "sweeps"))
    train = _parse_train(table_field("train", raw.get("train", {})))
    method = str_field("method", raw.get("method", "grid"), ("grid", "random"))
    space = parse_space(table_field("space", raw.get("space", {})), train, method)
    num_samples = int_field("num_samples", raw.get("num_samples", 1))
    random_seed = raw.get("random_seed")
    if random_seed is not None:
        int_field("random_seed", random_seed, minimum=0)
    # By default a sweep ranks on the score the environment declares for its evaluation episode
    # (its `evaluation` description; episode return for an env without one), in the env's direction.
    try:
        score, score_mode = jaxrl.env_score(train["env"], train.get("env_options", {}))
    except ValueError as e:
        raise SpecError(f"train.env: {train['env']!r} cannot be built ({e})") from None
    metric = str_field("metric", raw.get("metric", f"eval_{score}"))
    if not re.match(r"^eval_\w+$", metric):
        fail("metric", "an evaluation field 'eval_<name>' (e.g. 'eval_return', or a field the env's "
             "evaluation summarises)", metric)
    reduce = str_field("reduce", raw.get("reduce", "best"), METRIC_REDUCTIONS)
    seeds_reduce = str_field("seeds_reduce", raw.get("seeds_reduce", "best"), SEED_AGGREGATIONS)
    # The env's own direction for its score; for another field, returns up and anything else down.
    default_mode = score_mode if metric == f"eval_{score}" else ("max" if "return" in metric else "min")
    mode = str_field("mode", raw.get("mode", default_mode), ("min", "max"))
    cpus = int_field("cpus_per_trial", raw.get("cpus_per_trial", 1))
    num_cpus = raw.get("num_cpus")
    if num_cpus is not None:
        int_field("num_cpus", num_cpus)
        if num_cpus < cpus:
            raise SpecError(f"num_cpus: expected at least cpus_per_trial = {cpus} (else no trial "
                            f"could ever start), got {num_cpus}")
    max_concurrent = int_field("max_concurrent", raw.get("max_concurrent", 0), minimum=0)
    max_failures = int_field("max_failures", raw.get("max_failures", 3), minimum=0)
    report_every = int_field("report_every", raw.get("report_every", 1))
    scheduler = parse_scheduler(table_field("scheduler", raw.get("scheduler", {"type": "fifo"})),
                                train, space, count_trials(space, method, num_samples))
    return SweepSpec(
        name=name, out=out, train=train, space=space, method=method, num_samples=num_samples,
        random_seed=random_seed, metric=metric, reduce=reduce, seeds_reduce=seeds_reduce,
        mode=mode, cpus_per_trial=cpus, num_cpus=num_cpus, max_concurrent=max_concurrent,
        max_failures=max_failures, report_every=report_every, scheduler=scheduler)


def _preset(where: str, algo: str, name) -> object:
    """The jaxrl-train preset `name` of `algo` (a staged recipe cannot be one trial)."""
    from ..console.presets import get_preset
    from ..stages.cli import is_recipe

    if is_recipe(name):
        fail(where, f"a preset of one run (preset {name!r} is a staged recipe of several runs, "
                    f"which a trial cannot be)", name)
    try:
        return get_preset(algo, name)
    except ValueError as e:
        raise SpecError(f"train.{e}") from None


def _parse_train(t: dict) -> dict:
    for key in _OWNED_TRAIN_KEYS:
        if key in t:
            raise SpecError(f"train.{key}: set by jaxrl-sweep itself (run directories go under "
                            f"the sweep directory, one checkpoint per report); remove it "
                            f"(seeds: use train.seeds or space.seeds)")
    known_fields("train", t, _TRAIN_KEYS)
    algo = str_field("train.algo", t.get("algo", "ppo"))
    names = jaxrl.algorithm_names()
    if algo not in names:
        fail("train.algo", f"one of {names} (the seed-vmapped trainer)", algo)
    env = str_field("train.env", t.get("env", jaxrl.DEFAULT_ENV))
    if ":" not in env:
        fail("train.env", "an environment factory 'module:factory'", env)
    env_options = dict(table_field("train.env_options", t.get("env_options", {})))
    # One dialect with campaign files: [train] may be written as a campaign [[entry]] (preset,
    # flags, total_steps, env_options, seeds), `flags` being the entry's name for `config`.
    if "flags" in t and "config" in t:
        fail("train.flags", "either flags (a campaign entry's name) or config, not both",
             sorted(t["flags"]) if isinstance(t["flags"], dict) else t["flags"])
    key = "flags" if "flags" in t else "config"
    config = dict(table_field(f"train.{key}", t.get(key, {})))
    if "total_steps" in config:
        raise SpecError(f"train.{key}.total_steps: give the budget as train.total_steps")
    preset = _preset("train.preset", algo, t["preset"]) if "preset" in t else None
    if preset is not None:  # as jaxrl-train --preset: its fields under the typed ones
        config = {**preset.config, **config}
    total = int_field("train.total_steps", t.get("total_steps", 1_000_000 if preset is None
                                                 else preset.total_steps))
    seeds = seed_list("train.seeds", t.get("seeds", [0]))
    check_config(f"train.{key}", algo, {**config, "total_steps": total})
    cfg = jaxrl.make_config(algo, {**config, "total_steps": total})
    config = cfg.to_dict()
    del config["total_steps"]
    rollout = cfg.rollout_size
    eval_every = int_field("train.eval_every", t.get(
        "eval_every", 65_536 if preset is None else preset.eval_every_steps(rollout)))
    tensorboard = t.get("tensorboard", False)
    if not isinstance(tensorboard, bool):
        fail("train.tensorboard", "true or false", tensorboard)
    if tensorboard:
        try:
            jaxrl.require_tensorboardx("train.tensorboard")
        except ValueError as e:
            raise SpecError(str(e)) from None
    return {"algo": algo, "env": env, "env_options": env_options, "config": config,
            "seeds": seeds, "total_steps": total, "eval_every": eval_every,
            # Only when on: the sweep.json of earlier sweeps stays what a rerun parses.
            **({"tensorboard": True} if tensorboard else {})}

