"""Validated, hashable algorithm configurations.

Each algorithm config is a frozen dataclass (hashable, so it can key the compilation cache and be a
static argument of `jit`). Every field carries a ``check`` (how it is validated) and a ``help`` string
(used by the CLI, `console.flags`) in its metadata; validation runs in ``__post_init__``, in Python, before anything is
compiled, and raises ValueError naming the field, what was expected and what arrived (value and
type). Strings, bools and complex numbers are refused, never coerced; every float must be finite
(an infinite learning rate is always a typo; PPO's ``target_kl`` alone takes inf, meaning "off").
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .networks import freeze_json, network_spec
from .networks.mlp import ACTIVATIONS

__all__ = ["ValidatedConfig", "RolloutBudget", "AlgoConfig", "cfg_field"]


def cfg_field(default, check: str, help: str):  # noqa: A002 (mirrors argparse's name)
    """A dataclass field with a validation rule and a CLI help string.

    ``check`` is one of: "pos_int", "nonneg_int", "float" (any finite number), "pos_float", "nonneg_float", "unit_interval"
    (0 < x <= 1), "open_unit" (0 < x < 1), "pos_float_or_inf" (a positive number, or inf or None for
    "off"; None is read as inf), "activation", "hidden", "hidden_or_none" (None or "hidden"), "bool", "network" (None or "module:factory"), "options" (a
    dict of JSON keyword options, kept as sorted (key, value) pairs so the config stays hashable).
    Every float must be finite, except the explicit inf of
    "pos_float_or_inf".
    """
    return dataclasses.field(default=default, metadata={"check": check, "help": help})


_FLOAT_CHECKS = ("float", "pos_float", "nonneg_float", "unit_interval", "open_unit", "pos_float_or_inf")


def _fail(name, expected, got):
    raise ValueError(f"{name}: expected {expected}, got {got!r} ({type(got).__name__})")


def _is_int(value) -> bool:
    # bool is an int subclass in Python, but True as a step count is always a mistake.
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    # Strings, bools and complex numbers are refused rather than coerced by float().
    return _is_int(value) or isinstance(value, (float, np.floating))


def _check_value(name: str, check: str, value: Any) -> Any:
    """Validate one field and return its normalised value (a Python int, float, str, tuple or bool).

    Raises:
        ValueError: naming the field, the expected type or range, and the value with its type.
    """
    if check in ("pos_int", "nonneg_int"):
        if not _is_int(value):
            if isinstance(value, (float, np.floating)) and float(value).is_integer():
                value = int(value)  # 64.0 from a JSON file or a computation means 64
            else:
                _fail(name, "an integer", value)
        if value <= 0 and check == "pos_int":
            _fail(name, "a positive integer", value)
        if value < 0:
            _fail(name, "a non-negative integer", value)
        return int(value)
    if check == "pos_float_or_inf" and value is None:
        # "off", as SB3 writes target_kl=None; config.json holds inf as null (strict JSON has no
        # Infinity), so a resume reads it back here.
        return math.inf
    if check in _FLOAT_CHECKS:
        if not _is_real(value):
            _fail(name, "a real number (int or float)", value)
        value = float(value)
        if math.isnan(value):
            _fail(name, "a number, not NaN", value)
        if math.isinf(value) and not (check == "pos_float_or_inf" and value > 0):
            _fail(name, "a finite number", value)
        if check in ("pos_float", "pos_float_or_inf") and not value > 0:
            _fail(name, "a positive number", value)
        if check == "nonneg_float" and not value >= 0:
            _fail(name, "a non-negative number", value)
        if check == "unit_interval" and not 0 < value <= 1:
            _fail(name, "a number in (0, 1]", value)
        if check == "open_unit" and not 0 < value < 1:
            _fail(name, "a number in (0, 1)", value)
        return value
    if check == "activation":
        if not isinstance(value, str) or value not in ACTIVATIONS:
            _fail(name, f"one of {sorted(ACTIVATIONS)}", value)
        return value
    if check == "hidden":
        if _is_int(value):
            value = (value,)
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            _fail(name, "a sequence of positive integer layer widths", value)
        value = tuple(value)
        if not value or any(not _is_int(h) or h <= 0 for h in value):
            _fail(name, "a non-empty sequence of positive integer layer widths", value)
        return tuple(int(h) for h in value)
    if check == "hidden_or_none":
        return None if value is None else _check_value(name, "hidden", value)
    if check == "bool":
        if not isinstance(value, (bool, np.bool_)):
            _fail(name, "True or False", value)
        return bool(value)
    if check == "network":
        return None if value is None else network_spec(value)  # ValueError names "network"
    if check == "options":
        if isinstance(value, dict):
            value = value.items()
        try:
            pairs = [(k, v) for k, v in value]
        except (TypeError, ValueError):
            _fail(name, "a dict of keyword options", value)
        if any(not isinstance(k, str) or not k.isidentifier() for k, _ in pairs):
            _fail(name, "option names that are Python identifiers", value)
        # JSON lists become tuples (recursively): the config must stay hashable.
        return tuple(sorted((k, freeze_json(v)) for k, v in pairs))
    raise AssertionError(f"unknown check {check!r} for field {name}")  # programming error


@dataclasses.dataclass(frozen=True)
class ValidatedConfig:
    """Base of every config (PPO/TRPO's `AlgoConfig`, IPPO's).

    Each field declared with `cfg_field` is validated and normalised in ``__post_init__``, then
    `_check_consistency` relates fields.
    """

    def __post_init__(self):
        for f in dataclasses.fields(self):  # _check_value refuses non-finite floats itself
            object.__setattr__(self, f.name, _check_value(f.name, f.metadata["check"],
                                                          getattr(self, f.name)))
        self._check_consistency()

    def _check_consistency(self) -> None:
        """Checks across fields (subclasses extend it); raise ValueError naming the field."""

    @classmethod
    def coerce(cls, cfg=None, name: str = "config"):
        """This class's config from None (the defaults), a mapping of fields or a config object.

        A mapping's missing fields take their defaults; an object of another config class gives
        its fields to this one (IPPO's config into IPPO-Lagrangian's).

        Raises:
            ValueError: naming `name`, for another type or unknown keys (valid keys listed),
                and every field check of the class.
        """
        if cfg is None:
            return cls()
        if isinstance(cfg, cls):
            return cfg
        if isinstance(cfg, ValidatedConfig):
            cfg = dataclasses.asdict(cfg)
        if not isinstance(cfg, Mapping):
            raise ValueError(f"{name}: expected a {cls.__name__}, a mapping of its fields or None, "
                             f"got {type(cfg).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in set(cfg) - names)
        if unknown:
            raise ValueError(f"{name}: unknown keys {unknown} for {cls.__name__}; valid keys: "
                             f"{sorted(names)}")
        return cls(**dict(cfg))

    def to_dict(self) -> dict:
        """The fields as JSON-ready values (``hidden`` as a list)."""
        d = dataclasses.asdict(self)
        d["hidden"] = list(self.hidden)
        for f in dataclasses.fields(self):
            if f.metadata["check"] == "hidden_or_none":
                if d[f.name] is None:  # absent = None: configs written before the field read alike
                    del d[f.name]
                else:
                    d[f.name] = list(d[f.name])
        for f in dataclasses.fields(self):
            if f.metadata["check"] == "options":
                d[f.name] = {k: json.loads(json.dumps(v)) for k, v in getattr(self, f.name)}
        return d


#: The largest count the compiled update can hold: its update counter (`TrainState.update`) and the
#: index of its optimiser step (the learning-rate schedule's numerator) are int32 scalars.
MAX_COMPILED_COUNT = 2**31 - 1


class RolloutBudget:
    """Mixin of configs with ``n_envs``, ``n_steps`` and ``total_steps``: the run's update counts.

    Put it before the config class in the bases (PPO/TRPO's `AlgoConfig`, IPPO's trainer configs):
    it adds the check that the budget holds at least one update and that its counts fit the
    compiled int32 counters.
    """

    def _check_consistency(self) -> None:
        super()._check_consistency()
        if self.total_steps < self.rollout_size:
            raise ValueError(
                f"total_steps: expected at least one update of n_envs * n_steps = "
                f"{self.rollout_size} steps, got {self.total_steps}; raise total_steps or lower "
                f"n_envs/n_steps")
        # Checked here, in Python: past it the update counter would wrap inside jit, and a budget
        # beyond int64 (--total-steps 10**30) failed with an OverflowError from the compiler after
        # the run directory had been created.
        per_update = self.counted_steps_per_update
        most = (MAX_COMPILED_COUNT // per_update) * self.rollout_size
        if self.total_steps > most:
            raise ValueError(
                f"total_steps: expected at most {most:,} environment steps (the compiled update "
                f"counts {per_update} optimiser step(s) per update of {self.rollout_size} steps in "
                f"int32, at most 2**31 - 1 over the run), got {self.total_steps}")

    @property
    def counted_steps_per_update(self) -> int:
        """Steps one update adds to the largest compiled counter.

        PPO and IPPO count every optimiser step (n_epochs x n_minibatches; IPPO at most that, for
        agents whose rollout splits into fewer minibatches); TRPO counts updates (its schedule is
        per update).
        """
        if hasattr(self, "n_epochs"):
            return self.n_epochs * self.n_minibatches
        return 1

    @property
    def rollout_size(self) -> int:
        """Environment steps per update (n_envs * n_steps)."""
        return self.n_envs * self.n_steps

    @property
    def n_updates(self) -> int:
        """Number of updates: total_steps // rollout_size."""
        return self.total_steps // self.rollout_size


@dataclasses.dataclass(frozen=True)
class RolloutConfig(ValidatedConfig):
    """Fields of every on-policy learner here, IPPO's included.

    The rollout, the returns, Adam and the default towers; subclasses redeclare a field to change
    its default.
    """

    n_envs: int = cfg_field(64, "pos_int", "parallel environments")
    n_steps: int = cfg_field(128, "pos_int", "steps per environment per update")
    gamma: float = cfg_field(0.99, "unit_interval", "discount factor")
    gae_lambda: float = cfg_field(0.95, "unit_interval", "GAE lambda")
    lr: float = cfg_field(3e-4, "pos_float", "initial learning rate")
    adam_eps: float = cfg_field(1e-5, "pos_float", "Adam epsilon")
    hidden: tuple = cfg_field((128, 128), "hidden", "hidden layer widths (actor, and critic "
                              "unless --critic-hidden)")
    activation: str = cfg_field("tanh", "activation", "hidden activation")


@dataclasses.dataclass(frozen=True)
class AlgoConfig(RolloutBudget, RolloutConfig):
    """The PPO/TRPO trainer's fields.

    The budget, the learning-rate decay, the policy's initial std and user networks; subclasses
    add theirs and `_check_consistency`.
    """

    total_steps: int = cfg_field(20_000_000, "pos_int",
                                 "environment steps to train for (rounded down to whole updates)")
    lr_decay: float = cfg_field(10**0.4, "nonneg_float",
                                "harmonic decay k: lr = lr0 / (1 + k * progress); 0 = constant")
    critic_hidden: tuple | None = cfg_field(
        None, "hidden_or_none", "hidden layer widths of the critic when they differ from the "
        "actor's (SB3's net_arch=dict(pi=..., vf=...)); default: hidden")
    log_std_init: float = cfg_field(0.0, "float", "initial log std of the Gaussian policy "
                                    "(every action dimension; 0: std 1, the paper's)")
    network: str | None = cfg_field(
        None, "network", "MODULE:FACTORY of a user network, factory(obs_dim, n_outputs, **options) "
        "-> (actor, critic) flax.linen modules; hidden/activation then do not apply")
    network_options: tuple = cfg_field((), "options", "keyword options of the network factory")
