"""Float64 handling: the physics needs it, and the package never flips JAX's global switch.

Over 1000 samples float32 rounding moves J_T by about 1e-4, the very level agents optimise
(spec 1.5: the paper's RL pulse reads 8e-6 in float32 against a true 9.5e-5). So every physics
array is float64/complex128. Two kinds of entry point exist:

* functions that run their own compiled call (``rollout_pulse``, the Gymnasium and PettingZoo
  adapters) wrap it in :func:`x64_scope`;
* functions meant to be traced inside a caller's program (the functional environment) call
  :func:`require_x64`, which raises with the fix instead of silently computing in float32.

An environment built with ``precision="float32"`` is the explicit exception: every array is float32,
no x64 is needed, and the sector states are re-normalised after every sample (J_T within ~1e-7 of
float64 on the paper's pulses; README "Precision").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

__all__ = ["require_x64", "x64_scope", "x64_enabled"]


def x64_enabled() -> bool:
    """Whether JAX currently creates float64 arrays (globally or inside an ``enable_x64`` scope)."""
    return bool(jax.config.read("jax_enable_x64"))


def require_x64(what: str) -> None:
    """Raise a ValueError explaining how to enable float64 if it is off.

    Args:
        what: the name of the function or object that needs float64, used in the message.
    """
    if not x64_enabled():
        raise ValueError(
            f"{what} needs float64 physics, but JAX's x64 mode is off (arrays would be float32, "
            "which errs by ~1e-4 in J_T, the level agents optimise). Trace and run it inside "
            "`with jax.enable_x64(True): ...`, or set `jax.config.update('jax_enable_x64', True)` "
            "once at program start; or, for a JAX RL stack that runs in float32 (rejax, PureJaxRL, "
            "gymnax or JaxMARL code), build the environment with precision=\"float32\" (e.g. "
            "quantgate_env.gymnax.make(precision=\"float32\")): float32 physics, renormalised every "
            "sample, that needs no x64 (J_T within ~1e-7 of float64 on the paper's pulses)."
        )


@contextlib.contextmanager
def x64_scope() -> Iterator[None]:
    """Enable float64 for the enclosed block only, leaving the caller's global setting untouched."""
    with jax.enable_x64(True):
        yield
