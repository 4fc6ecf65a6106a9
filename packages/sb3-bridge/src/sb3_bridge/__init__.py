"""sb3-bridge: Stable-Baselines3 checkpoints as jaxrl-agents policies, safely, without torch.

Public API:

- ``load(path, *, activation=None) -> jaxrl_agents.Policy``: convert an SB3 MlpPolicy checkpoint
  (PPO, A2C, sb3-contrib TRPO; Box or Discrete actions).
- ``inspect(path) -> CheckpointInfo``: describe a checkpoint without building a network.
- ``export(policy, path, *, algo="ppo")``: write a zip that SB3 / sb3-contrib loads (needs torch and
  SB3: ``pip install sb3-bridge[export]``).
- ``evaluate(policy, env, ...)``: deterministic episodes and the trainer's summary.
- ``CheckpointError``, ``UnsafeCheckpointError``, ``UnsupportedCheckpointError``.

Importing the package imports neither torch, SB3 nor jax: ``load`` and ``evaluate`` import
jaxrl-agents (jax) when called, ``export`` torch and SB3.
"""

from .describe import CheckpointInfo, inspect
from .errors import CheckpointError, UnsafeCheckpointError, UnsupportedCheckpointError
from .evaluation import evaluate
from .load import load
from .sb3_export import export

__version__ = "0.1.0"

__all__ = [
    "load",
    "inspect",
    "export",
    "evaluate",
    "CheckpointInfo",
    "CheckpointError",
    "UnsafeCheckpointError",
    "UnsupportedCheckpointError",
]

