"""Stable-Baselines3 vector env of the gate: ``quantgate_env.sb3.make_vec_env(n_envs, **options)``.

The public name of the SB3 adapter; the code lives in ``quantgate_env.adapters.sb3``. Importing this
module imports neither SB3 nor torch: ``make_vec_env`` (or the name ``GateSB3VecEnv``) does, on first use.
"""

from .adapters.sb3 import make_vec_env, vec_env_class

__all__ = ["make_vec_env", "vec_env_class"]  # and GateSB3VecEnv, built on first access


def __getattr__(name: str):
    if name == "GateSB3VecEnv":
        return vec_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
