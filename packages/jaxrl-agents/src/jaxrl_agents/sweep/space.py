"""The SPEC's search space and scheduler as Ray Tune objects (imports Ray: the driver only).

Trial configs are flat: ``{"config.lr": 3e-4, "env.max_drift": 0.05, "seeds": [0, 1]}``; the
trial (`trial.trial_settings`) lays them over the SPEC's base run.
"""

from __future__ import annotations

import functools
import math

from .spec import SweepSpec

__all__ = ["param_space", "make_scheduler", "clip_to_bounds"]


def _domain(entry: dict, method: str):
    from ray import tune

    (kind, args), = entry.items()
    if kind == "values":
        return tune.grid_search(args) if method == "grid" else tune.choice(args)
    if kind == "uniform":
        return tune.uniform(*args)
    if kind == "loguniform":
        return tune.loguniform(*args)
    return tune.randint(*args)  # low <= x < high


def param_space(spec: SweepSpec) -> dict:
    """Tune's ``param_space``: grid lists or distributions per key.

    PBT-explored fields that the space leaves out start from a draw of their mutation range.
    """
    space = {key: _domain(entry, spec.method) for key, entry in spec.space.items()}
    for key, entry in spec.scheduler.get("mutations", {}).items():
        space.setdefault(key, _domain(entry, "random"))
    return space


def clip_to_bounds(config: dict, bounds: dict) -> dict:
    """Keep PBT-explored values inside the SPEC's ranges, where they are valid for the config.

    PBT's explore multiplies values by 0.8 or 1.2 (a clip range of 1.2 x 1.0 would be refused by the
    trial).
    """
    for key, (lo, hi) in bounds.items():
        if key in config and isinstance(config[key], (int, float)):
            config[key] = min(max(config[key], lo), hi)
    return config


def _mutation(entry: dict):
    from ray import tune

    (kind, args), = entry.items()
    if kind == "values":
        return list(args)
    return tune.uniform(*args) if kind == "uniform" else tune.loguniform(*args)


def make_scheduler(spec: SweepSpec):
    """The Tune scheduler of the SPEC, with environment steps (``step``) as its clock."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining

    s = spec.scheduler
    if s["type"] == "fifo":
        return FIFOScheduler()
    if s["type"] == "asha":
        return ASHAScheduler(time_attr="step", max_t=spec.train["total_steps"],
                             grace_period=s["grace_period"],
                             reduction_factor=s["reduction_factor"], brackets=s["brackets"])
    bounds = {k: (min(e[next(iter(e))]), max(e[next(iter(e))]))
              for k, e in s["mutations"].items()}
    bounds = {k: (lo, hi) for k, (lo, hi) in bounds.items() if math.isfinite(lo + hi)}
    return PopulationBasedTraining(
        time_attr="step", perturbation_interval=s["perturbation_interval"],
        hyperparam_mutations={k: _mutation(e) for k, e in s["mutations"].items()},
        quantile_fraction=s["quantile_fraction"],
        resample_probability=s["resample_probability"], synch=s["synch"],
        custom_explore_fn=functools.partial(clip_to_bounds, bounds=bounds))
