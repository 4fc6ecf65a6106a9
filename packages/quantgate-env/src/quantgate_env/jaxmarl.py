"""JaxMARL environment of the gate: ``quantgate_env.jaxmarl.make(**options)`` (extra ``quantgate-env[jaxmarl]``).

The public name of the JaxMARL adapter, kept where users import it; the code lives in
``quantgate_env.adapters.jaxmarl`` (see there, and the package README's Layout).
"""

from .adapters.jaxmarl import GateMARLEnv, GateMARLState, make

__all__ = ["GateMARLEnv", "GateMARLState", "make"]
