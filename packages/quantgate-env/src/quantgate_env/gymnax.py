"""gymnax environments of the gate: ``quantgate_env.gymnax.make(**options)`` (extra ``quantgate-env[gymnax]``).

The public name of the gymnax adapter, kept where users import it; the code lives in
``quantgate_env.adapters.gymnax`` (see there, and the package README's Layout).
"""

from .adapters.gymnax import (
    GateGymnaxEnv,
    GymnaxParams,
    GymnaxState,
    LegacyStepView,
    MultiLineGymnaxEnv,
    make,
    make_multi,
)

__all__ = ["GateGymnaxEnv", "GymnaxParams", "GymnaxState", "LegacyStepView", "MultiLineGymnaxEnv", "make", "make_multi"]
