"""Device drift: what drifts (magnitudes, a pytree of arrays) and how a device is drawn.

Domain randomisation draws a device around the nominal one at reset. The magnitudes live in
``DriftParams`` (arrays, so they can be vmapped or set to zero for evaluation); *when* a device is
redrawn (every episode, or once per environment) is static configuration (``EnvConfig``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .device import DeviceParams

__all__ = ["DRIFT_RANGES", "DriftParams", "no_drift", "draw_device"]

#: Half-widths (MHz) of qubit-frequency drift applied independently to both qubits, by time scale
#: (spec 4.1): within a cooldown (Dhieb et al. 2025: 100 kHz over 95 h), between cooldowns
#: (Zhang et al., Sci. Adv. 8, eabi6690, 2022; ~0.1 % of the qubit frequencies, the paper's DR)
#: and fabrication targeting of a new device (Zhang 2022).
DRIFT_RANGES = {"in_cooldown": 0.1, "recool": 5.7, "fab_targeting": 18.5}


class DriftParams(NamedTuple):
    """Uniform drift half-widths (scalars).

    Attributes:
        qubit_fraction: omega_q <- omega_q (1 + U(-f, f)) per qubit (the reference's ``max_drift``).
        qubit_mhz: omega_q <- omega_q + U(-1, 1) D MHz per qubit.
        coupler_mhz: omega_c <- omega_c + U(-1, 1) D MHz.
        g_mhz: g <- g + U(-1, 1) D MHz, independently per coupling.
    """

    qubit_fraction: jnp.ndarray
    qubit_mhz: jnp.ndarray
    coupler_mhz: jnp.ndarray
    g_mhz: jnp.ndarray


def no_drift() -> DriftParams:
    """All magnitudes zero: the nominal device every time."""
    return DriftParams(*(jnp.zeros(()) for _ in DriftParams._fields))


def draw_device(key: jax.Array, nominal: DeviceParams, drift: DriftParams, dtype=None) -> DeviceParams:
    """Draw a drifted device (pure, vmap-able).

    Each kind of drift has its own sub-key (the fraction uses ``key`` itself, the others
    ``fold_in(key, 1/2/4)``), so switching one kind on never changes the draw of another.

    Args:
        key: PRNG key.
        nominal: device parameters in GHz.
        drift: half-widths.
        dtype: float dtype of the draws (default: JAX's default float).

    Returns:
        the drifted device (GHz); equal to ``nominal`` when all half-widths are zero.
    """
    def uniform(k, shape=()):
        return jax.random.uniform(k, shape, minval=-1.0, maxval=1.0, dtype=jnp.result_type(float) if dtype is None else dtype)

    omega_q = nominal.omega_q * (1.0 + drift.qubit_fraction * uniform(key, (2,)))
    omega_q = omega_q + 1e-3 * drift.qubit_mhz * uniform(jax.random.fold_in(key, 4), (2,))
    omega_c = nominal.omega_c + 1e-3 * drift.coupler_mhz * uniform(jax.random.fold_in(key, 1))
    g = nominal.g + 1e-3 * drift.g_mhz * uniform(jax.random.fold_in(key, 2), (2,))
    return nominal._replace(omega_q=omega_q, omega_c=omega_c, g=g)
