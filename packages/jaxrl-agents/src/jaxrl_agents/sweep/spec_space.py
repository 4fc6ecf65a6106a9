"""The SPEC's search space and scheduler tables, validated.

`parse_space` reads ``[space]`` (``space.config``, ``space.env``, ``space.seeds``) into
``{"config.<field>" | "env.<option>" | "seeds": {kind: args}}``, checking every listed value (or both
ends of a range) against the algorithm config and building the environment with each env option;
`parse_scheduler` reads ``[scheduler]`` (fifo, ASHA or PBT and its mutations) against the parsed
SPEC's other fields. Split from spec.py, which calls both from `parse_spec`; they take the parsed
fields as plain values, so this module needs nothing of spec.py (`SweepSpec.n_trials` counts with
`count_trials`).
"""

from __future__ import annotations

from typing import Any

from . import jaxrl
from .spec_fields import (
    SpecError,
    config_fields,
    fail,
    int_field,
    known_fields,
    real_field,
    seed_list,
    str_field,
    table_field,
    within,
)

__all__ = ["DISTRIBUTIONS", "SCHEDULERS", "PBT_CHECKS", "parse_space", "parse_scheduler", "count_trials"]

DISTRIBUTIONS = ("values", "uniform", "loguniform", "randint")
SCHEDULERS = ("fifo", "asha", "pbt")
# Config checks whose values a PBT explore step may change: plain numbers that change no array
# shape in the train state, so a copied checkpoint still fits the new config.
PBT_CHECKS = ("pos_float", "nonneg_float", "unit_interval", "open_unit", "pos_float_or_inf")
_SCHEDULER_KEYS = {
    "fifo": {"type"},
    "asha": {"type", "grace_period", "reduction_factor", "brackets"},
    "pbt": {"type", "perturbation_interval", "quantile_fraction", "resample_probability",
            "synch", "mutations"},
}


# ------------------------------------------------------------------------------ search space
def _parse_entry(path: str, entry: Any, method: str, integer: bool = False) -> dict:
    """One search-space entry: ``{values = [...]}`` or ``{uniform|loguniform|randint = [lo, hi]}``."""
    if not isinstance(entry, dict) or len(entry) != 1:
        fail(path, "a table with exactly one of " + ", ".join(DISTRIBUTIONS) +
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
        fail(f"{path}.{kind}", "a range [low, high]", args)
    lo, hi = (int_field(f"{path}.{kind}", a, minimum=-2**62) if kind == "randint" else
              real_field(f"{path}.{kind}", a) for a in args)
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


def _check_candidates(path: str, train: dict, name: str, entry: dict) -> None:
    """Build the ``[train]`` config with each candidate value of config field `name`'s `entry`.

    So a value the config refuses is named by its SPEC path now, not in a trial.
    """
    for v in _candidates(entry):
        try:
            jaxrl.make_config(train["algo"], {**train["config"], "total_steps": train["total_steps"],
                                              name: v})
        except ValueError as e:
            raise SpecError(within(path, e)) from None


def parse_space(space: dict, train: dict, method: str) -> dict:
    """The ``[space]`` table, validated against the parsed ``[train]`` (`train`) and `method`."""
    known_fields("space", space, {"config", "env", "seeds"})
    out: dict[str, dict] = {}
    algo = train["algo"]
    fields = config_fields(algo)
    for name, entry in table_field("space.config", space.get("config", {})).items():
        path = f"space.config.{name}"
        if name not in fields or name == "total_steps":
            valid = sorted(set(fields) - {"total_steps"})
            raise SpecError(f"{path}: unknown field of {jaxrl.config_class(algo).__name__}; "
                            f"valid: {valid}")
        integer = fields[name].metadata["check"].endswith("int")
        parsed = _parse_entry(path, entry, method, integer)
        _check_candidates(path, train, name, parsed)
        out[f"config.{name}"] = parsed
    for name, entry in table_field("space.env", space.get("env", {})).items():
        out[f"env.{name}"] = _parse_entry(f"space.env.{name}", entry, method)
    if "seeds" in space:
        parsed = _parse_entry("space.seeds", space["seeds"], method, integer=True)
        if "values" not in parsed:
            raise SpecError("space.seeds: expected {values = [[0, 1], [2, 3]]}, one seed list per "
                            "trial (the seeds of a trial train vmapped in one program)")
        parsed = {"values": [seed_list(f"space.seeds.values[{i}]", v)
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
def count_trials(space: dict, method: str, num_samples: int) -> int:
    """Trials a sweep runs: `num_samples` draws (random), or each grid point `num_samples` times.

    Args:
        space: the parsed search space (`parse_space`); a grid's entries are all ``{"values": [...]}``.
        method: "grid" or "random".
        num_samples: samples per grid point, or the number of random draws.
    """
    if method == "random":
        return num_samples
    n = 1
    for entry in space.values():
        n *= len(entry["values"])
    return n * num_samples


def parse_scheduler(s: dict, train: dict, space: dict, n_trials: int) -> dict:
    """The ``[scheduler]`` table, validated against the SPEC's fields parsed before it.

    Args:
        s: the raw ``[scheduler]`` table.
        train: the parsed ``[train]`` table (its algo, total_steps and eval_every bound the
            scheduler's intervals).
        space: the parsed search space (`parse_space`).
        n_trials: the sweep's trials (`count_trials`): a PBT population needs two at least.
    """
    kind = str_field("scheduler.type", s.get("type", "fifo"), SCHEDULERS)
    known_fields("scheduler", s, _SCHEDULER_KEYS[kind])
    total, eval_every = train["total_steps"], train["eval_every"]
    if kind == "fifo":
        return {"type": "fifo"}
    if kind == "asha":
        grace = int_field("scheduler.grace_period", s.get("grace_period", max(eval_every, total // 8)))
        if grace > total:
            raise SpecError(f"scheduler.grace_period: expected at most train.total_steps = "
                            f"{total} steps, got {grace}")
        rf = real_field("scheduler.reduction_factor", s.get("reduction_factor", 3))
        if rf <= 1:
            fail("scheduler.reduction_factor", "a number > 1", s["reduction_factor"])
        return {"type": "asha", "grace_period": grace, "reduction_factor": rf,
                "brackets": int_field("scheduler.brackets", s.get("brackets", 1))}
    # PBT
    if "perturbation_interval" not in s:
        raise SpecError("scheduler.perturbation_interval: required for pbt (environment steps "
                        "between exploit/explore steps)")
    interval = int_field("scheduler.perturbation_interval", s["perturbation_interval"])
    if interval >= total:
        raise SpecError(f"scheduler.perturbation_interval: expected fewer than train.total_steps "
                        f"= {total} steps (else nothing is ever perturbed), got {interval}")
    qf = real_field("scheduler.quantile_fraction", s.get("quantile_fraction", 0.25))
    if not 0 < qf <= 0.5:
        fail("scheduler.quantile_fraction", "a number in (0, 0.5]", qf)
    rp = real_field("scheduler.resample_probability", s.get("resample_probability", 0.25))
    if not 0 <= rp <= 1:
        fail("scheduler.resample_probability", "a number in [0, 1]", rp)
    synch = s.get("synch", False)
    if not isinstance(synch, bool):
        fail("scheduler.synch", "true or false", synch)
    if "seeds" in space:
        raise SpecError("space.seeds: a PBT population shares one seed list (train.seeds): an "
                        "exploit step copies a member's checkpoint, seeds included, to another")
    muts = table_field("scheduler.mutations", s.get("mutations", {}))
    known_fields("scheduler.mutations", muts, {"config"})
    mutations = {}
    fields = config_fields(train["algo"])
    for name, entry in table_field("scheduler.mutations.config", muts.get("config", {})).items():
        path = f"scheduler.mutations.config.{name}"
        if name not in fields:
            raise SpecError(f"{path}: unknown field of "
                            f"{jaxrl.config_class(train['algo']).__name__}; valid: "
                            f"{sorted(fields)}")
        if fields[name].metadata["check"] not in PBT_CHECKS:
            raise SpecError(f"{path}: PBT explores real-valued fields only (lr, clip_eps, "
                            f"ent_coef, ...); {name!r} changes the shape of the train state or "
                            f"the program, so a copied checkpoint would not fit it")
        parsed = _parse_entry(path, entry, "random")
        if "randint" in parsed:
            raise SpecError(f"{path}.randint: PBT explores real-valued fields; use uniform, "
                            f"loguniform or values")
        _check_candidates(path, train, name, parsed)
        mutations[f"config.{name}"] = parsed
    if not mutations:
        raise SpecError("scheduler.mutations.config: expected at least one field for PBT to "
                        "explore (e.g. lr = {loguniform = [1e-5, 1e-3]})")
    if n_trials < 2:
        raise SpecError(f"num_samples: a PBT population needs at least 2 members, got "
                        f"{n_trials} trial(s)")
    return {"type": "pbt", "perturbation_interval": interval, "quantile_fraction": qf,
            "resample_probability": rp, "synch": synch, "mutations": mutations}
