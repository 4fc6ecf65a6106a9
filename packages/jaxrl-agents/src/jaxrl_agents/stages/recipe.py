"""What a staged run does: a `Recipe` of `Stage`s, each an ordinary run that starts from the last.

A recipe is data: it round-trips through JSON (``recipe.json`` keeps the one a run started with, so
a resume never depends on today's table of named recipes) and is checked when built, before any
directory exists or anything compiles.

- A `Stage` is one algorithm with its config and step budget. It may end early once its best
  evaluation score is below ``until_below`` (the next stage takes over from there), and it may
  start from the previous stage's best policy with a smaller exploration std (``log_std``).
- A stage's ``population`` trains that many members together, one seed group whose slices run on
  separate cores (`run.host.seed_groups`): on 2 cores two members cost about the wall-clock of one.
  The members' best score is the stage's (its end, its early test), and the next stage starts
  from the best member's best policy.
- A `RestartRule` on a stage is an early test: an attempt whose best score is not below ``below``
  after ``within_steps`` of its steps is set aside (its directory is kept) and the stage starts
  again from scratch with the next attempt seed; the last attempt is kept whatever it reaches.
  Every attempt's steps and wall-clock count in the run's totals.

Scores are the environment's evaluation score (`common.contracts.evaluation_of`), so nothing here
knows what the score means physically; a recipe's ``reference`` says it in words for the summary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["RestartRule", "Stage", "Recipe", "attempt_seed", "member_seed", "member_seeds",
           "ATTEMPT_SEED_STRIDE", "MEMBER_SEED_STRIDE"]

# Attempt n (1-based) of a seed trains with seed + ATTEMPT_SEED_STRIDE * (n - 1): far from the
# seeds a user types, so two staged runs with nearby seeds never share an attempt's randomness.
ATTEMPT_SEED_STRIDE = 1000
# Member m (0-based) of an attempt's population trains with its seed + MEMBER_SEED_STRIDE * m:
# beyond any attempt's stride, so no member shares a seed with another attempt of the run.
MEMBER_SEED_STRIDE = 100_000


def attempt_seed(seed: int, attempt: int) -> int:
    """The seed that attempt `attempt` (1-based) of a stage trains with (its first member's)."""
    return seed + ATTEMPT_SEED_STRIDE * (attempt - 1)


def member_seed(seed: int, member: int) -> int:
    """The seed of member `member` (0-based) of a population whose first member has `seed`."""
    return seed + MEMBER_SEED_STRIDE * member


def member_seeds(seed: int, population: int) -> tuple[int, ...]:
    """The seeds of a population of `population` members whose first member has `seed`."""
    return tuple(member_seed(seed, m) for m in range(population))


def _positive_float(where: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{where}: {name}: expected a positive finite number, got {value!r}")
    return float(value)


def _positive_int(where: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{where}: {name}: expected a positive integer, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class RestartRule:
    """An early test of a stage's attempts.

    Attributes:
        below: the best evaluation score an attempt must have reached (strictly below) ...
        within_steps: ... after this many of its environment steps (rounded up to whole
            updates), or it is set aside and the stage restarts with the next attempt seed.
        attempts: attempts at most; the last one is kept whatever it reaches.
    """

    below: float
    within_steps: int
    attempts: int

    def __post_init__(self):
        _positive_float("restart", "below", self.below)
        _positive_int("restart", "within_steps", self.within_steps)
        _positive_int("restart", "attempts", self.attempts)

    def test_update(self, rollout_size: int) -> int:
        """The update after which an attempt is tested (the first whose steps reach within_steps)."""
        return -(-self.within_steps // rollout_size)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a staged run: an ordinary run of `algo`.

    Attributes:
        name: a short name, used in the stage's directory name and the printed lines.
        algo: ``"ppo"`` or ``"trpo"`` (the algorithms that can start from another run's policy).
        config: config fields over the algorithm's defaults (the paper's); ``total_steps`` is
            `steps`, so it must not appear here.
        steps: the stage's step budget (its learning-rate schedule spans it).
        until_below: the stage ends after the first update whose best evaluation score is below
            this (None: it runs its whole budget).
        log_std: for a stage after the first: the natural log of the std every action dimension
            starts with (the previous stage's learned std is replaced); None keeps the learned std.
        restart: the stage's early test (`RestartRule`), or None.
        population: members trained together in each attempt (different seeds, one program
            split over cores); the stage's score is their best.
    """

    name: str
    algo: str
    config: Mapping[str, Any]
    steps: int
    until_below: float | None = None
    log_std: float | None = None
    restart: RestartRule | None = None
    population: int = 1

    def __post_init__(self):
        where = f"stage {self.name!r}"
        if not isinstance(self.name, str) or not self.name.replace("-", "").isalnum():
            raise ValueError(f"stage: name: expected letters, digits and '-', got {self.name!r}")
        if self.algo not in ("ppo", "trpo"):
            raise ValueError(f"{where}: algo: expected 'ppo' or 'trpo', got {self.algo!r}")
        if not isinstance(self.config, Mapping) or "total_steps" in self.config:
            raise ValueError(f"{where}: config: expected a mapping of config fields without "
                             f"total_steps (the stage's steps set it), got {self.config!r}")
        _positive_int(where, "steps", self.steps)
        if self.until_below is not None:
            _positive_float(where, "until_below", self.until_below)
        if self.log_std is not None and (isinstance(self.log_std, bool) or not isinstance(
                self.log_std, (int, float)) or not math.isfinite(self.log_std)):
            raise ValueError(f"{where}: log_std: expected a finite number or None, got "
                             f"{self.log_std!r}")
        if self.restart is not None and not isinstance(self.restart, RestartRule):
            raise ValueError(f"{where}: restart: expected a RestartRule or None, got "
                             f"{self.restart!r}")
        _positive_int(where, "population", self.population)

    def algo_config(self) -> dict[str, Any]:
        """The config fields of the stage's run (the stage's fields, its steps, its std)."""
        fields = {**self.config, "total_steps": self.steps}
        if self.log_std is not None:
            fields["log_std_init"] = float(self.log_std)
        return fields

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (`from_dict` inverts it)."""
        d = dataclasses.asdict(self)
        d["config"] = dict(self.config)
        if self.population == 1:  # as recipes were written before populations: records unchanged
            del d["population"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Stage:
        """The stage of `to_dict`'s output; ValueError naming what is missing or wrong."""
        d = dict(d)
        restart = d.pop("restart", None)
        try:
            return cls(**d, restart=None if restart is None else RestartRule(**restart))
        except TypeError as e:
            raise ValueError(f"stage: {e}") from None


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A named sequence of stages, each starting from the previous stage's best policy.

    Attributes:
        name: the recipe's name (``jaxrl-train --preset NAME``).
        summary: one line for ``--help``.
        env_options: options of the environment factory the recipe was tuned with (a user's
            ``--env-option`` overrides them one by one).
        stages: the stages, in order.
        thresholds: scores at which the run records its first crossing (steps and wall time from
            the start of the run, every attempt included), in decreasing order.
        reference: (score, words): the result the recipe is measured against, printed beside the
            run's best in its summary; None: none.
    """

    name: str
    summary: str
    env_options: Mapping[str, Any]
    stages: tuple[Stage, ...]
    thresholds: tuple[float, ...] = (1e-2, 1e-3, 1e-4)
    reference: tuple[float, str] | None = None

    def __post_init__(self):
        if not self.stages or not all(isinstance(s, Stage) for s in self.stages):
            raise ValueError(f"recipe {self.name!r}: stages: expected one Stage or more, got "
                             f"{self.stages!r}")
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"recipe {self.name!r}: stages: expected distinct names, got {names}")
        if self.stages[0].log_std is not None:
            raise ValueError(f"recipe {self.name!r}: stage {names[0]!r}: log_std replaces the std "
                             f"a stage inherits; the first stage inherits none (set its "
                             f"config's log_std_init)")
        for t in self.thresholds:
            _positive_float(f"recipe {self.name!r}", "thresholds", t)

    @property
    def total_steps(self) -> int:
        """Steps of the stages' budgets (a stage that ends early, or a restart, changes the run's)."""
        return sum(s.steps for s in self.stages)

    def with_steps(self, scale: float) -> Recipe:
        """The same recipe with every stage's budget and early test scaled by `scale` (tests)."""
        def scaled(s: Stage) -> Stage:
            r = s.restart
            if r is not None:
                r = dataclasses.replace(r, within_steps=max(1, int(r.within_steps * scale)))
            return dataclasses.replace(s, steps=max(1, int(s.steps * scale)), restart=r)

        return dataclasses.replace(self, stages=tuple(scaled(s) for s in self.stages))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (`from_dict` inverts it)."""
        return {"name": self.name, "summary": self.summary, "env_options": dict(self.env_options),
                "stages": [s.to_dict() for s in self.stages],
                "thresholds": list(self.thresholds),
                "reference": None if self.reference is None else list(self.reference)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Recipe:
        """The recipe of `to_dict`'s output; ValueError naming what is missing or wrong."""
        try:
            ref = d.get("reference")
            return cls(name=d["name"], summary=d["summary"], env_options=dict(d["env_options"]),
                       stages=tuple(Stage.from_dict(s) for s in d["stages"]),
                       thresholds=tuple(d["thresholds"]),
                       reference=None if ref is None else (float(ref[0]), str(ref[1])))
        except (KeyError, TypeError, IndexError) as e:
            raise ValueError(f"recipe: expected the fields of Recipe.to_dict, got {d!r} ({e})") \
                from None
