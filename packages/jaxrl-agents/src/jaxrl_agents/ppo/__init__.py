"""PPO with the clipped surrogate (SB3 semantics), compiled together with a functional environment.

`config.py`: `PPOConfig`; `update.py`: ``init``, ``make_phases`` (rollout half, learning half),
``make_update`` (the two chained) and ``traced_settings`` (the numbers the learning half takes as
arguments), the surface every algorithm of ``run.algorithms`` exposes.
"""

from .config import PPOConfig
from .update import init, make_phases, make_update, traced_settings

__all__ = ["PPOConfig", "init", "make_phases", "make_update", "traced_settings"]
