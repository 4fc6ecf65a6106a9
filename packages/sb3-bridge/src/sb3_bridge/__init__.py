"""sb3-bridge: Stable-Baselines3 checkpoints as jaxrl-agents policies, safely, without torch.

Public API:

- ``load(path, *, activation=None) -> jaxrl_agents.Policy``: convert an SB3 MlpPolicy checkpoint
  (PPO, A2C, sb3-contrib TRPO; Box or Discrete actions).
- ``inspect(path) -> CheckpointInfo``: describe a checkpoint without building a network.
- ``export(policy, path, *, algo="ppo")``: write a zip that SB3 / sb3-contrib loads (needs torch and
  SB3: ``pip install sb3-bridge[export]``).
- ``evaluate(policy, env, ...)``: deterministic episodes and the trainer's summary.
- ``CheckpointError``, ``UnsafeCheckpointError``, ``UnsupportedCheckpointError``.

Importing the package imports neither torch, SB3 nor jax; ``load`` imports jaxrl-agents (jax).
"""

from .describe import CheckpointInfo, inspect
from .errors import CheckpointError, UnsafeCheckpointError, UnsupportedCheckpointError
from .load import load

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


def __getattr__(name):
    # Lazy: export needs torch/SB3, evaluate needs jax/gymnasium; neither is paid for by `inspect`.
    if name == "export":
        from .export import export
        return export
    if name == "evaluate":
        from .evaluate import evaluate
        return evaluate
    raise AttributeError(f"module 'sb3_bridge' has no attribute {name!r}")
