"""PettingZoo environment of the gate: ``quantgate_env.pettingzoo.parallel_env(**options)``.

The public name of the PettingZoo adapter, kept where users import it (``--env
quantgate_env.pettingzoo:parallel_env``); the code lives in ``quantgate_env.adapters.pettingzoo``.
"""

from .adapters.pettingzoo import GateParallelEnv, parallel_env

__all__ = ["GateParallelEnv", "parallel_env"]
