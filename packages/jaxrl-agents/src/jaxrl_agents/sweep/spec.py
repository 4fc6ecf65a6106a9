"""The sweep SPEC: a TOML file, read and fully validated before Ray starts or anything compiles.

A SPEC names the base ``jaxrl-train`` run (``[train]``, with ``[train.config]`` and
``[train.env_options]``), the search space (``[space.config]``, ``[space.env]``, ``space.seeds``),
the sweep metric and the scheduler. The format is documented in docs/sweeps.md. Every error is a
`SpecError` naming the field by its TOML path (``space.config.lr``), what was expected and what
arrived.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from typing import Any

from . import jaxrl

__all__ = ["SpecError", "SweepSpec", "load_spec", "parse_spec", "METRIC_REDUCTIONS",
           "SEED_AGGREGATIONS", "DISTRIBUTIONS"]

METRIC_REDUCTIONS = ("best", "last", "last_quarter_median")
SEED_AGGREGATIONS = ("best", "median", "mean", "worst")
DISTRIBUTIONS = ("values", "uniform", "loguniform", "randint")
SCHEDULERS = ("fifo", "asha", "pbt")
# Config checks whose values a PBT explore step may change: plain numbers that change no array
# shape in the train state, so a copied checkpoint still fits the new config.
PBT_CHECKS = ("pos_float", "nonneg_float", "unit_interval", "open_unit", "pos_float_or_inf")
# [train] keys the sweep sets itself: the trial writes its run directories under the sweep
# directory, reports once per segment (checkpoint_every = one segment) and shows no progress bar.
_OWNED_TRAIN_KEYS = ("out", "tag", "checkpoint_every", "progress", "resume", "seed")

_TOP_KEYS = {"name", "out", "metric", "reduce", "seeds_reduce", "mode", "method", "num_samples",
             "random_seed", "cpus_per_trial", "num_cpus", "max_concurrent", "max_failures",
             "report_every", "train", "space", "scheduler"}
_TRAIN_KEYS = {"algo", "env", "env_options", "config", "seeds", "total_steps", "eval_every",
               "tensorboard"}
_SCHEDULER_KEYS = {
    "fifo": {"type"},
    "asha": {"type", "grace_period", "reduction_factor", "brackets"},
    "pbt": {"type", "perturbation_interval", "quantile_fraction", "resample_probability",
            "synch", "mutations"},
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SpecError(ValueError):
    """A SPEC is invalid; the message names the field (its TOML path)."""


def _fail(path: str, expected: str, got: Any) -> None:
    raise SpecError(f"{path}: expected {expected}, got {got!r} ({type(got).__name__})")


def _int(path: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _fail(path, "a positive integer" if minimum == 1 else f"an integer >= {minimum}", value)
    return value


def _real(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(path, "a finite number", value)
    return float(value)


def _str(path: str, value: Any, choices: tuple | None = None) -> str:
    if not isinstance(value, str) or (choices is not None and value not in choices):
        _fail(path, f"one of {list(choices)}" if choices else "a string", value)
    return value


def _table(path: str, value: Any) -> dict:
    if not isinstance(value, dict):
        _fail(path, "a table", value)
    return value


def _known(path: str, table: dict, keys: set) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise SpecError(f"{where}: unknown field; valid fields of {path or 'the SPEC'}: "
                        f"{sorted(keys)}")


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
        if self.method == "random":
            return self.num_samples
        n = 1
        for entry in self.space.values():
            n *= len(entry["values"])
        return n * self.num_samples


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
    raw = _table("SPEC", raw)
    _known("", raw, _TOP_KEYS)
    name = _str("name", raw.get("name", "sweep"))
    if not _NAME.match(name):
        _fail("name", "a directory name of letters, digits, '.', '_' or '-'", name)
    out = _str("out", raw.get("out", "sweeps"))
    train = _parse_train(_table("train", raw.get("train", {})))
    method = _str("method", raw.get("method", "grid"), ("grid", "random"))
    space = _parse_space(_table("space", raw.get("space", {})), train, method)
    num_samples = _int("num_samples", raw.get("num_samples", 1))
    random_seed = raw.get("random_seed")
    if random_seed is not None:
        _int("random_seed", random_seed, minimum=0)
    # By default a sweep ranks on the score the environment declares for its evaluation episode
    # (its `evaluation` description; episode return for an env without one), in the env's direction.
    try:
        score, score_mode = jaxrl.env_score(train["env"], train.get("env_options", {}))
    except ValueError as e:
        raise SpecError(f"train.env: {train['env']!r} cannot be built ({e})") from None
    metric = _str("metric", raw.get("metric", f"eval_{score}"))
    if not re.match(r"^eval_\w+$", metric):
        _fail("metric", "an evaluation field 'eval_<name>' (e.g. 'eval_return', or a field the env's "
              "evaluation summarises)", metric)
    reduce = _str("reduce", raw.get("reduce", "best"), METRIC_REDUCTIONS)
    seeds_reduce = _str("seeds_reduce", raw.get("seeds_reduce", "best"), SEED_AGGREGATIONS)
    # The env's own direction for its score; for another field, returns up and anything else down.
    default_mode = score_mode if metric == f"eval_{score}" else ("max" if "return" in metric else "min")
    mode = _str("mode", raw.get("mode", default_mode), ("min", "max"))
    cpus = _int("cpus_per_trial", raw.get("cpus_per_trial", 1))
    num_cpus = raw.get("num_cpus")
    if num_cpus is not None:
        _int("num_cpus", num_cpus)
        if num_cpus < cpus:
            raise SpecError(f"num_cpus: expected at least cpus_per_trial = {cpus} (else no trial "
                            f"could ever start), got {num_cpus}")
    spec = SweepSpec(
        name=name, out=out, train=train, space=space, method=method, num_samples=num_samples,
        random_seed=random_seed, metric=metric, reduce=reduce, seeds_reduce=seeds_reduce,
        mode=mode, cpus_per_trial=cpus, num_cpus=num_cpus,
        max_concurrent=_int("max_concurrent", raw.get("max_concurrent", 0), minimum=0),
        max_failures=_int("max_failures", raw.get("max_failures", 3), minimum=0),
        report_every=_int("report_every", raw.get("report_every", 1)),
        scheduler={"type": "fifo"})
    scheduler = _parse_scheduler(_table("scheduler", raw.get("scheduler", {"type": "fifo"})),
                                 spec)
    return dataclasses.replace(spec, scheduler=scheduler)


def _parse_train(t: dict) -> dict:
    for key in _OWNED_TRAIN_KEYS:
        if key in t:
            raise SpecError(f"train.{key}: set by jaxrl-sweep itself (run directories go under "
                            f"the sweep directory, one checkpoint per report); remove it "
                            f"(seeds: use train.seeds or space.seeds)")
    _known("train", t, _TRAIN_KEYS)
    algo = _str("train.algo", t.get("algo", "ppo"))
    names = jaxrl.algorithm_names()
    if algo not in names:
        _fail("train.algo", f"one of {names} (the seed-vmapped trainer)", algo)
    env = _str("train.env", t.get("env", jaxrl.DEFAULT_ENV))
    if ":" not in env:
        _fail("train.env", "an environment factory 'module:factory'", env)
    env_options = dict(_table("train.env_options", t.get("env_options", {})))
    config = dict(_table("train.config", t.get("config", {})))
    if "total_steps" in config:
        raise SpecError("train.config.total_steps: give the budget as train.total_steps")
    total = _int("train.total_steps", t.get("total_steps", 1_000_000))
    eval_every = _int("train.eval_every", t.get("eval_every", 65_536))
    seeds = _seed_list("train.seeds", t.get("seeds", [0]))
    _check_config("train.config", algo, {**config, "total_steps": total})
    config = jaxrl.make_config(algo, {**config, "total_steps": total}).to_dict()
    del config["total_steps"]
    tensorboard = t.get("tensorboard", False)
    if not isinstance(tensorboard, bool):
        _fail("train.tensorboard", "true or false", tensorboard)
    if tensorboard:
        try:
            jaxrl.require_tensorboardx("train.tensorboard")
        except ValueError as e:
            raise SpecError(str(e)) from None
    return {"algo": algo, "env": env, "env_options": env_options, "config": config,
            "seeds": seeds, "total_steps": total, "eval_every": eval_every,
            # Only when on: the sweep.json of earlier sweeps stays what a rerun parses.
            **({"tensorboard": True} if tensorboard else {})}


def _seed_list(path: str, value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        _fail(path, "a non-empty list of seeds", value)
    for s in value:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**32:
            _fail(path, "integer seeds in [0, 2**32)", s)
    if len(set(value)) != len(value):
        _fail(path, "distinct seeds", value)
    return list(value)


def _check_config(path: str, algo: str, fields: dict) -> None:
    """Build the config once to check names, types and ranges; name the SPEC field on error."""
    cls = jaxrl.config_class(algo)
    valid = {f.name for f in dataclasses.fields(cls)} - {"total_steps"}
    for k in fields:
        if k != "total_steps" and k not in valid:
            raise SpecError(f"{path}.{k}: unknown field of {cls.__name__}; valid: "
                            f"{sorted(valid)}")
    try:
        jaxrl.make_config(algo, fields)
    except ValueError as e:
        raise SpecError(_within(path, e)) from None


def _within(path: str, e: Exception) -> str:
    """``train.config.lr: expected ...`` from the config's ``lr: expected ...``."""
    msg = str(e)
    head, sep, rest = msg.partition(": ")
    if sep and head == "total_steps":
        return f"train.total_steps: {rest}"
    if sep and re.fullmatch(r"\w+", head):
        return f"{path}.{head}: {rest}" if not path.endswith(f".{head}") else f"{path}: {rest}"
    return f"{path}: {msg}"


def _config_fields(algo: str) -> dict:
    return {f.name: f for f in dataclasses.fields(jaxrl.config_class(algo))}


# ------------------------------------------------------------------------------ search space
def _parse_entry(path: str, entry: Any, method: str, integer: bool = False) -> dict:
    """One search-space entry: ``{values = [...]}`` or ``{uniform|loguniform|randint = [lo, hi]}``."""
    if not isinstance(entry, dict) or len(entry) != 1:
        _fail(path, "a table with exactly one of " + ", ".join(DISTRIBUTIONS) +
              " (e.g. {values = [1e-4, 3e-4]} or {loguniform = [1e-5, 1e-3]})", entry)
    (kind, args), = entry.items()
    if kind not in DISTRIBUTIONS:
        raise SpecError(f"{path}.{kind}: unknown field; a search-space entry is one of "
                        f"{list(DISTRIBUTIONS)}")
    if kind == "values":
        if not isinstance(args, list) or not args:
            raise SpecError(f"{path}.values: expected a non-empty list of values, got "
                            f"{args!r}; an empty space has no trial to run")
        return {"values": list(args)}
    if method == "grid":
        raise SpecError(f"{path}.{kind}: a grid search takes lists of values only; write "
                        f"{{values = [...]}} or set method = \"random\"")
    if not isinstance(args, list) or len(args) != 2:
        _fail(f"{path}.{kind}", "a range [low, high]", args)
    lo, hi = (_int(f"{path}.{kind}", a, minimum=-2**62) if kind == "randint" else
              _real(f"{path}.{kind}", a) for a in args)
    if not lo < hi:
        raise SpecError(f"{path}.{kind}: expected a range [low, high] with low < high, got "
                        f"{args!r}")
    if kind == "loguniform" and lo <= 0:
        raise SpecError(f"{path}.loguniform: expected 0 < low < high (a log scale), got {args!r}")
    if integer and kind != "randint":
        raise SpecError(f"{path}.{kind}: this field takes integers; use randint or values")
    return {kind: [lo, hi]}


def _candidates(entry: dict) -> list:
    """Values that stand for an entry when checking it: every listed value, or both ends."""
    kind, args = next(iter(entry.items()))
    if kind == "randint":
        return [args[0], args[1] - 1]
    return list(args)


def _parse_space(space: dict, train: dict, method: str) -> dict:
    _known("space", space, {"config", "env", "seeds"})
    out: dict[str, dict] = {}
    algo = train["algo"]
    fields = _config_fields(algo)
    for name, entry in _table("space.config", space.get("config", {})).items():
        path = f"space.config.{name}"
        if name not in fields or name == "total_steps":
            valid = sorted(set(fields) - {"total_steps"})
            raise SpecError(f"{path}: unknown field of {jaxrl.config_class(algo).__name__}; "
                            f"valid: {valid}")
        integer = fields[name].metadata["check"].endswith("int")
        parsed = _parse_entry(path, entry, method, integer)
        for v in _candidates(parsed):
            try:
                jaxrl.make_config(algo, {**train["config"], "total_steps": train["total_steps"],
                                         name: v})
            except ValueError as e:
                raise SpecError(_within(path, e)) from None
        out[f"config.{name}"] = parsed
    for name, entry in _table("space.env", space.get("env", {})).items():
        out[f"env.{name}"] = _parse_entry(f"space.env.{name}", entry, method)
    if "seeds" in space:
        parsed = _parse_entry("space.seeds", space["seeds"], method, integer=True)
        if "values" not in parsed:
            raise SpecError("space.seeds: expected {values = [[0, 1], [2, 3]]}, one seed list per "
                            "trial (the seeds of a trial train vmapped in one program)")
        parsed = {"values": [_seed_list(f"space.seeds.values[{i}]", v)
                             for i, v in enumerate(parsed["values"])]}
        out["seeds"] = parsed
    if not out:
        raise SpecError("space: expected at least one entry in space.config, space.env or "
                        "space.seeds, got an empty space (nothing to search)")
    _check_env_space(train, out)
    return out


def _check_env_space(train: dict, space: dict) -> None:
    """Build the environment with the base options and with each listed value of every env entry.

    So a misspelt option or a bad value is named now, not in a trial on another machine.
    """
    import jax  # the envs build float64 physics; checking here costs no compilation

    def build(path: str, options: dict) -> None:
        try:
            with jax.enable_x64(True):
                jaxrl.load_env(train["env"], options)
        except (ValueError, TypeError) as e:
            raise SpecError(f"{path}: {e}") from None

    build("train.env_options", train["env_options"])
    for key, entry in space.items():
        if key.startswith("env."):
            for v in _candidates(entry):
                build(f"space.{key}", {**train["env_options"], key[4:]: v})


# -------------------------------------------------------------------------------- scheduler
def _parse_scheduler(s: dict, spec: SweepSpec) -> dict:
    kind = _str("scheduler.type", s.get("type", "fifo"), SCHEDULERS)
    _known("scheduler", s, _SCHEDULER_KEYS[kind])
    total, eval_every = spec.train["total_steps"], spec.train["eval_every"]
    if kind == "fifo":
        return {"type": "fifo"}
    if kind == "asha":
        grace = _int("scheduler.grace_period", s.get("grace_period", max(eval_every, total // 8)))
        if grace > total:
            raise SpecError(f"scheduler.grace_period: expected at most train.total_steps = "
                            f"{total} steps, got {grace}")
        rf = _real("scheduler.reduction_factor", s.get("reduction_factor", 3))
        if rf <= 1:
            _fail("scheduler.reduction_factor", "a number > 1", s["reduction_factor"])
        return {"type": "asha", "grace_period": grace, "reduction_factor": rf,
                "brackets": _int("scheduler.brackets", s.get("brackets", 1))}
    # PBT
    if "perturbation_interval" not in s:
        raise SpecError("scheduler.perturbation_interval: required for pbt (environment steps "
                        "between exploit/explore steps)")
    interval = _int("scheduler.perturbation_interval", s["perturbation_interval"])
    if interval >= total:
        raise SpecError(f"scheduler.perturbation_interval: expected fewer than train.total_steps "
                        f"= {total} steps (else nothing is ever perturbed), got {interval}")
    qf = _real("scheduler.quantile_fraction", s.get("quantile_fraction", 0.25))
    if not 0 < qf <= 0.5:
        _fail("scheduler.quantile_fraction", "a number in (0, 0.5]", qf)
    rp = _real("scheduler.resample_probability", s.get("resample_probability", 0.25))
    if not 0 <= rp <= 1:
        _fail("scheduler.resample_probability", "a number in [0, 1]", rp)
    synch = s.get("synch", False)
    if not isinstance(synch, bool):
        _fail("scheduler.synch", "true or false", synch)
    if "seeds" in spec.space:
        raise SpecError("space.seeds: a PBT population shares one seed list (train.seeds): an "
                        "exploit step copies a member's checkpoint, seeds included, to another")
    muts = _table("scheduler.mutations", s.get("mutations", {}))
    _known("scheduler.mutations", muts, {"config"})
    mutations = {}
    fields = _config_fields(spec.train["algo"])
    for name, entry in _table("scheduler.mutations.config", muts.get("config", {})).items():
        path = f"scheduler.mutations.config.{name}"
        if name not in fields:
            raise SpecError(f"{path}: unknown field of "
                            f"{jaxrl.config_class(spec.train['algo']).__name__}; valid: "
                            f"{sorted(fields)}")
        if fields[name].metadata["check"] not in PBT_CHECKS:
            raise SpecError(f"{path}: PBT explores real-valued fields only (lr, clip_eps, "
                            f"ent_coef, ...); {name!r} changes the shape of the train state or "
                            f"the program, so a copied checkpoint would not fit it")
        parsed = _parse_entry(path, entry, "random")
        if "randint" in parsed:
            raise SpecError(f"{path}.randint: PBT explores real-valued fields; use uniform, "
                            f"loguniform or values")
        for v in _candidates(parsed):
            try:
                jaxrl.make_config(spec.train["algo"], {**spec.train["config"], name: v,
                                                       "total_steps": total})
            except ValueError as e:
                raise SpecError(_within(path, e)) from None
        mutations[f"config.{name}"] = parsed
    if not mutations:
        raise SpecError("scheduler.mutations.config: expected at least one field for PBT to "
                        "explore (e.g. lr = {loguniform = [1e-5, 1e-3]})")
    if spec.n_trials() < 2:
        raise SpecError(f"num_samples: a PBT population needs at least 2 members, got "
                        f"{spec.n_trials()} trial(s)")
    return {"type": "pbt", "perturbation_interval": interval, "quantile_fraction": qf,
            "resample_probability": rp, "synch": synch, "mutations": mutations}
