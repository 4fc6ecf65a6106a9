"""The named recipes of ``jaxrl-train --preset``: staged runs tuned on the gate environment.

Each was measured as bench/README.md "Time to a gate, one command" says (bench/time_to_gate.py):
the stages' settings come from the replication campaign (campaigns/README.md) and the ablation
there. The environment options are those of the default env (``quantgate_env:make``): 17.25 ns
episodes put the whole reward inside the paper's gate time.
"""

from __future__ import annotations

from .recipe import Recipe, RestartRule, Stage

__all__ = ["RECIPES", "get_recipe", "GATE", "DEMO"]

_SHORT_EPISODES = {"T": 17.25, "pulse_length": 345}
# The paper's RL gate (Grech et al. 2026, its stored pulse re-propagated): the bar a gate run beats.
_PAPER = (9.486e-5, "the paper's RL gate: J_T 9.486e-5 at 17.25 ns")

# The campaign's early test: every seed that ended its chain at 1.12e-4 or better had reached
# J_T < 1e-2 within 2.32M steps, every seed that ended at 1.75e-4 or worse needed 2.87M or more.
_EARLY_TEST = RestartRule(below=1e-2, within_steps=2_500_000, attempts=4)

_EXPLORE = Stage("explore", "ppo", {"lr": 6e-4, "log_std_init": -1.5}, 20_000_000,
                 until_below=1e-3, restart=_EARLY_TEST)
_REFINE = Stage("refine", "ppo", {"lr": 3e-4}, 8_000_000, until_below=2e-4, log_std=-4.6)
# TRPO's paper activation is relu; the polish starts from PPO's tanh network.
_POLISH = Stage("polish", "trpo", {"n_envs": 16, "n_steps": 512, "activation": "tanh"}, 8_000_000)

GATE = Recipe(
    "gate", "a pure-RL gate below the paper's J_T 9.486e-5 at <= 17.25 ns (staged: PPO with an "
    "early test, a smaller std, a TRPO polish)",
    _SHORT_EPISODES, (_EXPLORE, _REFINE, _POLISH), thresholds=(1e-2, 1e-3, 1e-4),
    reference=_PAPER,
    goes_further="jaxrl-train --preset gate  (the whole recipe: below the paper's J_T on most "
                 "seeds)")

RECIPES: dict[str, Recipe] = {r.name: r for r in (GATE,)}
DEMO = None


def get_recipe(name: str) -> Recipe:
    """The named recipe; ValueError listing the names."""
    if not isinstance(name, str) or name not in RECIPES:
        raise ValueError(f"preset: expected one of {sorted(RECIPES)}, got {name!r}")
    return RECIPES[name]
