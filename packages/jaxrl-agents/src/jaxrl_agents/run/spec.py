"""RunSpec: one validated, JSON-round-tripping description of a run.

Everything that decides what a run computes and where it writes, and nothing about how this
process shows it (``progress``) or why it was started (``argv``). `jaxrl-train` builds one from its
flags and preset (or reads one, ``--spec FILE.json``), `trainer.train` from its keyword arguments,
the sweep's trial from the trial's sampled values; `session.Session.open` starts one; config.json
is written from it (`run_config.write_run_configs`) and a resume reads one back
(`RunSpec.from_run_config`), also from config.json files written before RunSpec existed.

A campaign builds one per entry with `RunSpec.from_dict`: the keys are the fields below, every
one optional except what differs from the defaults, e.g.::

    RunSpec.from_dict({"algo": "trpo", "env": "quantgate_env:make",
                       "config": {"total_steps": 2_000_000, "n_envs": 16}, "seeds": [3],
                       "out": "campaign/runs", "tag": "tft2", "init_from": "campaign/runs/src"})

and gives it to ``Session.open(spec)`` (or writes ``spec.to_dict()`` as JSON for
``jaxrl-train --spec FILE.json``). Unknown keys are refused, so a typo never trains silently. A
campaign whose entries are ``jaxrl-train`` flag lists gets the very RunSpec the command would
build, preset included, with ``console.cli.spec_of_flags(console.cli.build_parser(algo)
.parse_args(flags))``: checking every entry that way before anything trains costs no JAX compile.

Validation happens when a RunSpec is built, in Python, before anything is created or compiled;
each error is a ValueError naming the field, what was expected and what arrived. The
environment and the ``init_from`` policy are only read when the run starts
(`session.plan_run`): they are files and modules, not values.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from ..common.envs import DEFAULT_ENV
from ..common.fileio import json_text
from .algorithms import ALGORITHMS, canonical_name, make_config
from .checks import check_env_options, check_pos_int, check_seeds, check_tag, check_time_budget
from .run_files import check_out

__all__ = ["RunSpec", "SPEC_KEYS"]


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What a run is: algorithm, environment, config, seeds, cadences, output.

    Build one with keyword arguments, `from_dict` or `from_run_config`; every field is checked
    (and normalised) in ``__post_init__``, so a RunSpec that exists is a valid one.

    Attributes:
        algo: registry name (``"ppo"``, ``"trpo"``, ``"ippo"``, ``"ippo_lagrangian"``; the alias
            ``"ippo_lag"`` is read as ``"ippo_lagrangian"``).
        env: the environment as ``"module:factory"``, or None for a run whose environment object
            is handed to the session beside the spec (config.json then records ``"env": null``).
        env_options: keyword options of the factory (JSON values).
        config: the algorithm config's fields, every one (``AlgoConfig.to_dict``: lists for
            tuples), ``total_steps`` (environment steps) and ``network``/``network_options`` (a
            user network, ``"module:factory"``) among them.
        seeds: one or more distinct seeds in [0, 2**32), trained together in one program.
        eval_every: environment steps between evaluations (rounded to whole updates).
        checkpoint_every: updates between checkpoints.
        report_every: environment steps between printed evaluation lines; None: about 25.
        out: parent directory of the run directories.
        tag: suffix of the run directory names (no path separators).
        preset: the name of the preset the config came from (recorded; the config is what runs).
        init_from: a run directory (its best policy) or a policy directory every seed starts
            from (PPO and TRPO); None: a fresh network.
        tensorboard: also write TensorBoard event files (a resume keeps writing them).
        time_budget: seconds of wall-clock a command gives the run (``--minutes`` x 60); the run
            stops on a checkpoint past it. None: no budget.
        x64: trace the run's programs under JAX's x64 mode (True) or in float32 (False); None:
            the environment decides (its ``requires_x64``, `host.precision.env_requires_x64`). The
            networks are float32 either way. config.json records what the run used.
    """

    algo: str = "ppo"
    env: str | None = DEFAULT_ENV
    env_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    eval_every: int = 2_000_000
    checkpoint_every: int = 25
    report_every: int | None = None
    out: str = "runs"
    tag: str = ""
    preset: str | None = None
    init_from: str | None = None
    tensorboard: bool = False
    time_budget: float | None = None
    x64: bool | None = None

    def __post_init__(self):
        def put(name, value):  # frozen: normalised values are set once, here
            object.__setattr__(self, name, value)

        algo = canonical_name(self.algo)
        if not isinstance(algo, str) or algo not in ALGORITHMS:
            raise ValueError(f"algo: expected one of {sorted(ALGORITHMS)}, got {self.algo!r}")
        put("algo", algo)
        if isinstance(self.env, str) and (self.env.count(":") != 1 or not all(self.env.split(":"))):
            raise ValueError(f"env: expected 'module:factory' (e.g. {DEFAULT_ENV!r}), got "
                             f"{self.env!r}")
        if not (self.env is None or isinstance(self.env, str)):
            raise ValueError(f"env: expected a 'module:factory' string (or None, with the "
                             f"environment object given to the session), got {self.env!r}")
        put("env_options", check_env_options(self.env_options))
        try:
            json_text(self.env_options)
        except (TypeError, ValueError):
            raise ValueError(f"env_options: expected JSON values (numbers, strings, booleans, "
                             f"lists, objects), got {self.env_options!r}") from None
        if not isinstance(self.config, Mapping) and not dataclasses.is_dataclass(self.config):
            raise ValueError(f"config: expected a dict of {algo} config fields, got "
                             f"{self.config!r}")
        cfg = self.config if dataclasses.is_dataclass(self.config) else dict(self.config)
        put("config", make_config(algo, cfg).to_dict())  # ValueError names the field
        put("seeds", check_seeds(self.seeds))
        put("eval_every", check_pos_int("eval_every", self.eval_every))
        put("checkpoint_every", check_pos_int("checkpoint_every", self.checkpoint_every))
        if self.report_every is not None:
            put("report_every", check_pos_int("report_every", self.report_every))
        put("out", check_out(self.out))
        put("tag", check_tag(self.tag))
        if not (self.preset is None or isinstance(self.preset, str)):
            raise ValueError(f"preset: expected a preset name or None, got {self.preset!r}")
        if isinstance(self.init_from, os.PathLike):
            put("init_from", os.fspath(self.init_from))
        if not (self.init_from is None or isinstance(self.init_from, str) and self.init_from):
            raise ValueError(f"init_from: expected a run or policy directory path (or None), got "
                             f"{self.init_from!r}")
        if self.init_from is not None and not ALGORITHMS[algo].fine_tunes:
            raise ValueError(f"init_from: fine-tuning starts are for "
                             f"{' and '.join(n for n, a in ALGORITHMS.items() if a.fine_tunes)}, "
                             f"got algo {algo!r}")
        if not isinstance(self.tensorboard, bool):
            raise ValueError(f"tensorboard: expected True or False, got {self.tensorboard!r}")
        put("time_budget", check_time_budget(self.time_budget))
        if not (self.x64 is None or isinstance(self.x64, bool)):
            raise ValueError(f"x64: expected True, False or None (the environment decides), got "
                             f"{self.x64!r}")

    # ------------------------------------------------------------------------ derived values
    def algo_config(self):
        """The validated `AlgoConfig` (or IPPO's trainer config) of `config`."""
        return make_config(self.algo, dict(self.config))

    def replace(self, **changes) -> RunSpec:
        """A copy with `changes` (checked again); ``config`` changes merge into the fields.

        ``spec.replace(config={"total_steps": 10**6})`` changes the budget and keeps the rest.
        """
        if "config" in changes:
            changes["config"] = {**self.config, **dict(changes["config"])}
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready values (lists for tuples); `from_dict` reads it back equal."""
        d = dataclasses.asdict(self)
        d["seeds"] = list(self.seeds)
        d["env_options"] = json.loads(json_text(self.env_options))
        d["config"] = json.loads(json_text(self.config))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "spec") -> RunSpec:
        """A RunSpec from a dict of its fields (missing fields take their defaults).

        Args:
            d: field name -> JSON value (as `to_dict` writes, or a hand-written subset).
            source: what to name in errors (a file path, a campaign entry).

        Raises:
            ValueError: not a dict, an unknown key, or a field that fails its check; the message
                starts with `source`.
        """
        if not isinstance(d, Mapping):
            raise ValueError(f"{source}: expected a JSON object of run fields, got "
                             f"{type(d).__name__}")
        unknown = sorted(set(d) - set(SPEC_KEYS))
        if unknown:
            raise ValueError(f"{source}: unknown key {unknown[0]!r}; expected some of "
                             f"{list(SPEC_KEYS)}")
        fields = dict(d)
        if isinstance(fields.get("seeds"), list):
            fields["seeds"] = tuple(fields["seeds"])
        try:
            return cls(**fields)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    @classmethod
    def load(cls, path: str) -> RunSpec:
        """Read a RunSpec from a JSON file (``jaxrl-train --spec FILE.json``).

        Raises:
            ValueError: unreadable, not JSON, or not a valid spec; the message names the file.
        """
        from .run_files import read_json_object

        try:
            d = read_json_object(path)
        except OSError as e:
            raise ValueError(f"{path}: cannot be read ({e.strerror})") from None
        return cls.from_dict(d, source=path)

    @classmethod
    def from_run_config(cls, rc: Mapping[str, Any]) -> RunSpec:
        """The spec of a run from its config.json (`run_files.read_run_config`'s dict).

        Reads every config.json this package wrote, also before RunSpec: keys added later
        (``report_every``, ``preset``, ``tensorboard``, ``init_from``, ``time_budget``) read as
        their defaults when absent. ``init_from`` is the recorded source's path. ``x64`` is the
        spec's choice (None where the environment decided); what the run used is config.json's
        ``precision`` (`host.precision.recorded_x64`), which a resume traces under.

        Raises:
            ValueError: a recorded value fails its check (the caller names the file).
        """
        init = rc.get("init_from")
        budget = rc.get("time_budget")
        tensorboard = rc.get("tensorboard", False)  # absent: a run without event files
        if not isinstance(tensorboard, bool):  # named as JSON spells it: the file is JSON
            raise ValueError(f"tensorboard: expected true or false, got {tensorboard!r}")
        return cls(
            algo=rc["algo"], env=rc["env"], env_options=rc["env_options"],
            config=rc["algo_config"], seeds=tuple(rc["seeds"]), eval_every=rc["eval_every"],
            checkpoint_every=rc["checkpoint_every"], report_every=rc.get("report_every"),
            out=rc.get("out") or "runs", tag=rc.get("tag", ""), preset=rc.get("preset"),
            init_from=init.get("path") if isinstance(init, Mapping) else None,
            tensorboard=tensorboard, x64=rc.get("x64"),
            time_budget=None if budget is None or (isinstance(budget, float)
                                                   and not math.isfinite(budget)) else budget)

    def run_config_keys(self) -> dict[str, Any]:
        """The config.json keys this spec adds beyond the ones every run has always had.

        Only set values are written (``time_budget``, ``x64``), so earlier files and new ones
        without them read alike.
        """
        keys = {"time_budget": self.time_budget} if self.time_budget is not None else {}
        if self.x64 is not None:  # the spec's override; "precision" records what the run used
            keys["x64"] = self.x64
        return keys


SPEC_KEYS = tuple(f.name for f in dataclasses.fields(RunSpec))
