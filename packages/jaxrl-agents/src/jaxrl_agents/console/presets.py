"""Named run presets of ``jaxrl-train``: hyper-parameters plus the run's budget and cadences.

A preset is a starting point, not a mode: every flag typed on the command line overrides the
preset's value, and config.json records both the preset's name and the resolved config, so a run
never depends on this table after it started.

- ``paper``: the paper's hyper-parameters (each config class's defaults) and its 20M-step budget.
- ``fast``: what the measurements in bench/README.md ("Time to a gate") found to reach an
  evaluation J_T < 1e-3 soonest in wall-clock on a 2-core laptop CPU.
- ``demo`` (the no-argument run): ``fast``'s hyper-parameters on a budget long enough to watch a
  perfect entangler form: PPO's 4.5M steps take about 5 minutes on 2 cores (~16k steps/s plus
  compilation; 4.8 minutes measured), TRPO's 4.1M about 8 (its ~8,600 steps/s in bench/).
  ``--minutes`` cuts any run short, resumably.

IPPO and IPPO-Lagrangian have only ``demo`` (their short default run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..run.spec import RunSpec

__all__ = ["Preset", "PRESETS", "DEFAULT_PRESET", "get_preset", "preset_spec"]

DEFAULT_PRESET = "demo"


@dataclasses.dataclass(frozen=True)
class Preset:
    """One named starting point of a run.

    Attributes:
        name: the preset's name (``--preset NAME``).
        summary: one line for ``--help``.
        config: algorithm config fields that differ from the config class's defaults.
        total_steps: environment steps of the run.
        eval_every: environment steps between evaluations; None evaluates after every update
            (one deterministic episode: cheap beside an update, and "best J_T" is the minimum over
            every policy the run produced, as in the paper).
    """

    name: str
    summary: str
    config: Mapping[str, Any]
    total_steps: int
    eval_every: int | None = None

    def eval_every_steps(self, rollout_size: int) -> int:
        """`eval_every` in environment steps for updates of `rollout_size` steps."""
        return rollout_size if self.eval_every is None else self.eval_every


# fast / demo: see bench/README.md "Time to a gate" for the sweep that chose these values.
_PPO_FAST = {"lr": 6e-4, "log_std_init": -1.5}
_TRPO_FAST = {"n_envs": 16, "n_steps": 512, "log_std_init": -1.5}

PRESETS: dict[str, dict[str, Preset]] = {
    "ppo": {
        "paper": Preset("paper", "the paper's PPO hyper-parameters and 20M steps", {}, 20_000_000),
        "fast": Preset("fast", "fastest wall-clock to J_T < 1e-3 found on 2 CPU cores (~10 min)",
                       _PPO_FAST, 12_288_000),
        "demo": Preset("demo", "fast's hyper-parameters for about 5 minutes", _PPO_FAST,
                       4_505_600),
    },
    "trpo": {
        "paper": Preset("paper", "the paper's TRPO hyper-parameters and 20M steps", {},
                        20_000_000),
        "fast": Preset("fast", "fastest wall-clock to J_T < 1e-3 found on 2 CPU cores (~10 min)",
                       _TRPO_FAST, 12_288_000),
        "demo": Preset("demo", "fast's hyper-parameters for about 8 minutes", _TRPO_FAST,
                       4_096_000),
    },
    "ippo": {"demo": Preset("demo", "a short run", {}, 20_000, eval_every=2_048)},
    "ippo_lagrangian": {"demo": Preset("demo", "a short run", {}, 20_000, eval_every=2_048)},
}


def get_preset(algo: str, name: str) -> Preset:
    """The preset `name` of (canonical) algorithm `algo`.

    Raises:
        ValueError: naming ``preset``, the algorithm's presets and what arrived.
    """
    presets = PRESETS.get(algo, {})
    if not isinstance(name, str) or name not in presets:
        raise ValueError(f"preset: expected one of {sorted(presets)} for algo {algo!r}, got "
                         f"{name!r}")
    return presets[name]


def preset_spec(algo: str, preset: str, fields: Mapping[str, Any] | None = None, *,
                total_steps: int | None = None, eval_every: int | None = None,
                init_from: str | None = None, **run: Any) -> RunSpec:
    """The `RunSpec` of a preset with config fields over it: what ``jaxrl-train`` runs.

    ``jaxrl-train --preset P --lr 1e-4 ...`` builds its spec here (`console.cli.spec_of_flags`),
    and so does a campaign entry for each of its seeds (`campaign.spec.Entry.run_spec`), so the
    two cannot drift apart.

    Args:
        algo: algorithm name (an alias is read as its algorithm).
        preset: the preset's name (`get_preset`).
        fields: config fields over the preset's (typed flags; an entry's ``flags``).
        total_steps: environment steps of the run; None: the preset's.
        eval_every: environment steps between evaluations; None: the preset's cadence.
        init_from: a run or policy directory every seed starts from, or None. A fine-tune keeps
            the learned std of the policy it starts from: a preset's ``log_std_init`` (a fresh
            network's) is dropped, and only one in `fields` replaces it.
        **run: the other `RunSpec` fields (env, env_options, seeds, out, tag, ...).

    Raises:
        ValueError: an unknown preset, or a field or run option that fails its check (named).
    """
    from ..run.algorithms import canonical_name, make_config
    from ..run.spec import RunSpec

    chosen = get_preset(canonical_name(algo), preset)
    base = dict(chosen.config)
    if init_from is not None:
        base.pop("log_std_init", None)
    total = chosen.total_steps if total_steps is None else total_steps
    cfg = make_config(algo, {**base, **dict(fields or {}), "total_steps": total})
    return RunSpec(algo=algo, config=cfg, preset=chosen.name, init_from=init_from,
                   eval_every=(chosen.eval_every_steps(cfg.rollout_size)
                               if eval_every is None else eval_every), **run)
