"""Staged runs: recipes of stages, each an ordinary run that starts from the last one's best policy.

``jaxrl-train --preset gate`` runs the recipe the replication campaign found by hand as one command
in one run directory: an early test that restarts a failing seed, a smaller exploration std once
the gate has formed, and a trust-region polish.

Files: `recipe.py` (`Recipe`, `Stage`, `RestartRule`: what a staged run does, as JSON-able data),
`recipes.py` (the named recipes), `staged_run.py` (`StagedRun`: the driver, its directory and
resume), `timeline.py` (the attempts end to end: steps and wall time to a threshold), `summary.py`
(the closing block).

The names below load on first use (PEP 562): ``jaxrl-train --help`` lists the recipes without
importing JAX.
"""

import importlib

_EXPORTS = {
    "Recipe": "recipe", "Stage": "recipe", "RestartRule": "recipe", "attempt_seed": "recipe",
    "ATTEMPT_SEED_STRIDE": "recipe", "RECIPES": "recipes", "get_recipe": "recipes",
    "StagedRun": "staged_run", "STAGED_RUN_JSON": "staged_run", "is_staged_run": "staged_run",
    "StagedResult": "timeline", "timeline": "timeline", "crossings": "timeline",
    "staged_summary_block": "summary",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
