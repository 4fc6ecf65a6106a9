"""Campaign files: what to train, read from TOML and checked before anything runs.

A campaign file holds a few top-level keys and a list of ``[[entry]]`` tables::

    name = "replication"
    runs = "runs/campaign/replication"       # run directories (never committed)
    summaries = "campaigns/replication"      # summaries and pulses (committed)
    seeds = [1, 2, 3]                        # the campaign's seeds, in run order
    summariser = "quantgate_analysis.campaign:summarise"
                                             # writes a run's summary after it stops: module:function
    frontier_ns = [5, 6, 7]                  # gate times of the frontier (default 5-20 ns)

    [[entry]]
    name = "ppo-fast"                        # a folder name: letters, digits, '-', '_'
    algo = "ppo"                             # any jaxrl-train algorithm
    preset = "fast"                          # jaxrl-train --preset
    total_steps = 20_000_000                 # per seed
    flags = { lr = 1e-4 }                    # config fields, as jaxrl-train --<field> flags
    env_options = { T = 17.25 }              # jaxrl-train --env-option KEY=VALUE
    init_from = "other-entry"                # start each seed from that entry's same seed
    robustness = true                        # map the best policy over the recool grid
    restart = { below = 1e-2, within_steps = 2_500_000, attempts = 4 }
                                             # a seed's run that has not reached J_T < below
                                             # within that many steps starts again (seed + 1000 n)
    seeds = [1, 2]                           # a subset of the campaign's seeds (default: all)

    [[entry]]
    name = "gate"
    preset = "gate"                          # a staged recipe (jaxrl_agents.stages): it sets its
    env_options = { oob_mode = "clip" }      # stages' algorithms, configs, budgets and early test,
    robustness = true                        # so algo, flags, total_steps, init_from and restart
    seeds = [101, 102]                       # are refused; env_options go over the recipe's

Relative paths are relative to the current directory of ``jaxrl-campaign`` (the repository root
for campaigns/replication.toml).

Each run's task imports the summariser by its name (`Campaign.load_summariser`) and calls it as
``summariser(campaign, entry, seed, run_dir, code_version)`` after the run stops; it writes the
summary to `Campaign.summary_path` (and anything else beside it). So jaxrl-agents knows no physics:
what a summary holds is the summariser's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

from ..common.fileio import read_toml

__all__ = ["Campaign", "Entry", "Restart", "ATTEMPT_SEED_STRIDE", "load_campaign", "is_staged_preset"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_TOP_KEYS = {"name", "runs", "summaries", "seeds", "summariser", "frontier_ns", "entry"}
SUMMARISER_EXAMPLE = "quantgate_analysis.campaign:summarise"
DEFAULT_FRONTIER_NS = tuple(float(t) for t in range(5, 21))  # gate times of the frontier, ns
_ENTRY_KEYS = {"name", "description", "algo", "preset", "total_steps", "flags", "env_options",
               "init_from", "robustness", "seeds", "restart"}
_RESTART_KEYS = {"below", "within_steps", "attempts"}
# Keys a staged entry may not have: its recipe sets every stage's algorithm, config and budget and
# has its own early test (jaxrl-train refuses config flags with a recipe too).
_NOT_STAGED_KEYS = ("algo", "flags", "total_steps", "init_from", "restart")
#: Attempt n of a campaign seed s trains with seed s + n * ATTEMPT_SEED_STRIDE: distinct from every
#: campaign seed below the stride, and the same attempts on every machine.
ATTEMPT_SEED_STRIDE = 1000


def is_staged_preset(preset: str) -> bool:
    """Whether ``jaxrl-train --preset <preset>`` is a staged recipe (`jaxrl_agents.stages`)."""
    from ..stages.cli import is_recipe  # no JAX: the recipes are data

    return is_recipe(preset)


@dataclasses.dataclass(frozen=True)
class Restart:
    """The early test of a seed's run, and how often the seed may start again.

    A run that has not reached J_T < `below` within `within_steps` environment steps is set aside
    and the seed starts again with the next attempt seed, at most `attempts` runs in all (the last
    one is kept whatever it reaches).

    The test reads only the run's own evaluations (its progress.csv), so attempts are
    deterministic; every attempt's steps and wall-clock count towards the seed's times.
    """

    below: float
    within_steps: int
    attempts: int


@dataclasses.dataclass(frozen=True)
class Entry:
    """One configuration of a campaign, trained once per seed.

    Attributes:
        name: folder name of the entry's runs and summaries.
        description: one line for the results page.
        algo: jaxrl-train algorithm (None for a staged entry: its recipe names each stage's).
        preset: jaxrl-train preset, or a staged recipe (`staged`).
        total_steps: environment steps per seed (None for a staged entry).
        flags: config fields passed as ``--<field>`` flags (lists become several values).
        env_options: environment factory options (``--env-option KEY=JSON``).
        init_from: name of an earlier entry whose same-seed best policy each run starts from.
        robustness: whether summaries map the best policy over the recool detuning grid.
        seeds: the seeds of this entry, in run order.
        restart: the early test that restarts a seed's run (None: every seed runs once).
        staged: whether `preset` is a staged recipe: each seed is one ``jaxrl-train --preset``
            staged run (its own stages, early test and attempts; one top directory).
    """

    name: str
    description: str
    algo: str | None
    preset: str
    total_steps: int | None
    flags: dict[str, Any]
    env_options: dict[str, Any]
    init_from: str | None
    robustness: bool
    seeds: tuple[int, ...]
    restart: Restart | None = None
    staged: bool = False

    def attempt_seed(self, seed: int, attempt: int) -> int:
        """The training seed of attempt `attempt` (0, 1, ...) of campaign seed `seed`."""
        return seed + attempt * ATTEMPT_SEED_STRIDE

    def run_spec(self, seed: int, out: str, init_from_dir: str | None = None):
        """The `run.spec.RunSpec` of a new run of this entry for `seed` under `out`.

        The preset, the entry's flags over it, its budget and env options (`console.presets
        .preset_spec`, as ``jaxrl-train`` builds it from `train_args`): what the campaign runs.

        Args:
            seed: the training seed (an attempt's, `attempt_seed`).
            out: the seed's folder (`Campaign.run_parent`).
            init_from_dir: the run directory a fine-tune starts from (None: a fresh network).

        Raises:
            ValueError: a staged entry (a recipe of several runs, not one spec), or a field that
                fails its check (named).
        """
        from ..console.presets import preset_spec
        from ..run.algorithms import get_algorithm

        if self.staged:
            raise ValueError(f"entry {self.name!r}: preset {self.preset!r} is a staged recipe, "
                             f"run as several runs (jaxrl-train --preset {self.preset}), not one "
                             f"RunSpec")
        return preset_spec(self.algo, self.preset, self.flags, total_steps=self.total_steps,
                           init_from=init_from_dir, env=get_algorithm(self.algo).default_env,
                           env_options=self.env_options, seeds=(seed,), out=out, tag=self.name)

    def train_args(self, seed: int, out: str, init_from_dir: str | None) -> list[str]:
        """The ``jaxrl-train`` arguments of a new run of this entry for `seed` under `out`.

        A staged entry's run is launched with them; an entry of single runs is launched with its
        `run_spec`, and these flags (which build the same spec) are the command its config.json
        records.
        """
        if self.staged:  # the recipe takes only the run's own options (no algo, flags or budget)
            return ["--preset", self.preset, "--seed", str(seed), "--out", out, *self._env_args()]
        args = ["--algo", self.algo, "--preset", self.preset, "--seed", str(seed),
                "--total-steps", str(self.total_steps), "--out", out, "--tag", self.name]
        for key, value in self.flags.items():
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + key.replace("_", "-"))
            elif isinstance(value, list):
                args += [flag, *map(str, value)]
            else:
                args += [flag, repr(value) if isinstance(value, float) else str(value)]
        args += self._env_args()
        if init_from_dir is not None:
            args += ["--init-from", init_from_dir]
        return args

    def _env_args(self) -> list[str]:
        return [a for key, value in self.env_options.items()
                for a in ("--env-option", f"{key}={json.dumps(value)}")]


@dataclasses.dataclass(frozen=True)
class Campaign:
    """A parsed campaign file.

    Attributes:
        path: the file it was read from.
        name: the campaign's name.
        runs: parent folder of its run directories.
        summaries: folder of its committed summaries and pulses.
        seeds: the campaign's seeds in run order.
        entries: its entries in file order.
        summariser: ``module:function`` of the function that summarises a run (`load_summariser`).
        frontier_ns: gate times (ns) at which summaries record the best J_T.
    """

    path: str
    name: str
    runs: str
    summaries: str
    seeds: tuple[int, ...]
    entries: tuple[Entry, ...]
    summariser: str
    frontier_ns: tuple[float, ...] = DEFAULT_FRONTIER_NS

    def entry(self, name: str) -> Entry:
        """The entry called `name` (ValueError naming the choices otherwise)."""
        for e in self.entries:
            if e.name == name:
                return e
        raise ValueError(f"entry: expected one of {[e.name for e in self.entries]}, got {name!r}")

    def schedule(self) -> list[tuple[Entry, int]]:
        """(entry, seed) pairs in run order: seed by seed, entries in file order within a seed."""
        return [(e, s) for s in self.seeds for e in self.entries if s in e.seeds]

    def run_parent(self, entry: Entry, seed: int) -> str:
        """The ``--out`` folder of `entry`'s run for `seed` (it holds one run directory)."""
        return os.path.join(self.runs, entry.name, f"s{seed}")

    def summary_path(self, entry: Entry, seed: int) -> str:
        """Where the summariser writes the summary of `entry`'s run for `seed` (JSON, committed).

        The runner reads its ``status`` to skip a run summarised on another machine.
        """
        return os.path.join(self.summaries, entry.name, f"s{seed}.json")

    def load_summariser(self):
        """Import the summariser the file names (``summariser = "module:function"``).

        Raises:
            ValueError: naming the file and the key, when the name is malformed or does not
                import to a callable.
        """
        from ..common.envs.factories import import_factory

        return import_factory(self.summariser, f"{self.path}: summariser", SUMMARISER_EXAMPLE)


def _fail(path: str, where: str, expected: str, got: Any) -> ValueError:
    return ValueError(f"{path}: {where}: expected {expected}, got {got!r}")


def _seeds(path: str, where: str, value: Any) -> tuple[int, ...]:
    if (not isinstance(value, list) or not value
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in value)
            or len(set(value)) != len(value)):
        raise _fail(path, where, "a non-empty list of distinct non-negative integers", value)
    return tuple(value)


def _entry(path: str, i: int, table: Any, seeds: tuple[int, ...], earlier: dict[str, Entry]) -> Entry:
    where = f"entry {i + 1}"
    if not isinstance(table, dict):
        raise _fail(path, where, "a table", table)
    unknown = sorted(set(table) - _ENTRY_KEYS)
    if unknown:
        raise _fail(path, f"{where}: keys", f"some of {sorted(_ENTRY_KEYS)}", unknown)
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(path, f"{where}: name", "letters, digits, '-' and '_'", name)
    where = f"entry {name!r}"
    if name in earlier:
        raise _fail(path, f"{where}: name", "a name no other entry has", name)
    if not isinstance(table.get("preset"), str):
        raise _fail(path, f"{where}: preset", "a string", table.get("preset"))
    if is_staged_preset(table["preset"]):
        return _staged_entry(path, where, table, seeds)
    if not isinstance(table.get("algo"), str):
        raise _fail(path, f"{where}: algo", "a string (or preset: a staged recipe, which needs "
                    "none)", table.get("algo"))
    total = table.get("total_steps")
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise _fail(path, f"{where}: total_steps", "a positive integer", total)
    for key in ("flags", "env_options"):
        if not isinstance(table.get(key, {}), dict):
            raise _fail(path, f"{where}: {key}", "a table", table.get(key))
    init_from = table.get("init_from")
    if init_from is not None and init_from not in earlier:
        raise _fail(path, f"{where}: init_from", f"the name of an earlier entry {sorted(earlier)}",
                    init_from)
    if init_from is not None and earlier[init_from].staged:
        raise _fail(path, f"{where}: init_from", "an entry of single runs (a staged entry's seeds "
                    "are staged runs, which a fine-tune cannot start from here)", init_from)
    entry_seeds = _entry_seeds(path, where, table, seeds)
    if init_from is not None:
        missing = sorted(set(entry_seeds) - set(earlier[init_from].seeds))
        if missing:
            raise _fail(path, f"{where}: seeds", f"seeds that {init_from!r} also runs", missing)
    _check_robustness(path, where, table)
    flags = dict(table.get("flags", {}))
    for reserved in ("seed", "seeds", "total_steps", "preset", "algo", "out", "tag", "init_from"):
        if reserved in flags:
            raise _fail(path, f"{where}: flags", f"config fields (set {reserved!r} as an entry key)",
                        reserved)
    if any(s >= ATTEMPT_SEED_STRIDE for s in entry_seeds) and "restart" in table:
        raise _fail(path, f"{where}: seeds", f"seeds below {ATTEMPT_SEED_STRIDE} with restart",
                    list(entry_seeds))
    return Entry(name, str(table.get("description", "")), table["algo"], table["preset"], total,
                 flags, dict(table.get("env_options", {})), init_from,
                 bool(table.get("robustness", False)), entry_seeds,
                 _restart(path, f"{where}: restart", table["restart"], total)
                 if "restart" in table else None)


def _entry_seeds(path: str, where: str, table: dict, seeds: tuple[int, ...]) -> tuple[int, ...]:
    """The entry's seeds (default: the campaign's), checked to be some of the campaign's."""
    entry_seeds = _seeds(path, f"{where}: seeds", table["seeds"]) if "seeds" in table else seeds
    outside = sorted(set(entry_seeds) - set(seeds))
    if outside:
        raise _fail(path, f"{where}: seeds", f"a subset of the campaign's seeds {list(seeds)}",
                    outside)
    return entry_seeds


def _check_robustness(path: str, where: str, table: dict) -> None:
    if not isinstance(table.get("robustness", False), bool):
        raise _fail(path, f"{where}: robustness", "true or false", table.get("robustness"))


def _staged_entry(path: str, where: str, table: dict, seeds: tuple[int, ...]) -> Entry:
    """An entry whose preset is a staged recipe: one ``jaxrl-train --preset`` staged run per seed."""
    preset = table["preset"]
    for key in _NOT_STAGED_KEYS:
        if key in table:
            raise _fail(path, f"{where}: {key}", f"no {key} (preset {preset!r} is a staged recipe: "
                        f"it sets its stages' algorithms, configs and budgets and has its own "
                        f"early test; drop the key)", table[key])
    if not isinstance(table.get("env_options", {}), dict):
        raise _fail(path, f"{where}: env_options", "a table", table.get("env_options"))
    _check_robustness(path, where, table)
    return Entry(table["name"], str(table.get("description", "")), None, preset, None, {},
                 dict(table.get("env_options", {})), None, bool(table.get("robustness", False)),
                 _entry_seeds(path, where, table, seeds), None, staged=True)


def _restart(path: str, where: str, table: Any, total_steps: int) -> Restart:
    if not isinstance(table, dict) or set(table) != _RESTART_KEYS:
        raise _fail(path, where, f"a table of {sorted(_RESTART_KEYS)}", table)
    below, within, attempts = table["below"], table["within_steps"], table["attempts"]
    if isinstance(below, bool) or not isinstance(below, (int, float)) or not 0 < below < 1:
        raise _fail(path, f"{where}: below", "a J_T in (0, 1)", below)
    if isinstance(within, bool) or not isinstance(within, int) or not 0 < within < total_steps:
        raise _fail(path, f"{where}: within_steps", f"a step count in (0, total_steps = "
                    f"{total_steps})", within)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 2 <= attempts <= 100:
        raise _fail(path, f"{where}: attempts", "an integer from 2 to 100", attempts)
    return Restart(float(below), within, attempts)


def load_campaign(path: str) -> Campaign:
    """Read and check a campaign file.

    Raises:
        ValueError: naming the file and the key, what was expected and what arrived (before
            anything runs or is written).
    """
    data = read_toml(path, "campaign", "a campaign file")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise _fail(path, "keys", f"some of {sorted(_TOP_KEYS)}", unknown)
    for key in ("name", "runs", "summaries"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise _fail(path, key, "a non-empty string", data.get(key))
    if not _NAME.match(data["name"]):
        raise _fail(path, "name", "letters, digits, '-' and '_'", data["name"])
    seeds = _seeds(path, "seeds", data.get("seeds"))
    summariser = data.get("summariser")
    if not isinstance(summariser, str) or summariser.count(":") != 1 or not all(summariser.split(":")):
        raise _fail(path, "summariser", f"'module:function' of the function that summarises a run "
                    f"(e.g. {SUMMARISER_EXAMPLE!r})", summariser)
    tables = data.get("entry")
    if not isinstance(tables, list) or not tables:
        raise _fail(path, "entry", "one or more [[entry]] tables", tables)
    entries: dict[str, Entry] = {}
    for i, table in enumerate(tables):
        e = _entry(path, i, table, seeds, entries)
        entries[e.name] = e
    frontier = data.get("frontier_ns", list(DEFAULT_FRONTIER_NS))
    if (not isinstance(frontier, list) or not frontier
            or any(isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 for t in frontier)):
        raise _fail(path, "frontier_ns", "a non-empty list of positive gate times (ns)", frontier)
    return Campaign(path, data["name"], data["runs"], data["summaries"], seeds,
                    tuple(entries.values()), summariser, tuple(float(t) for t in sorted(frontier)))
