"""Device parameters of the two-transmon, tunable-coupler chip (a pytree of arrays).

Frequencies are in GHz (ordinary frequency, not angular); the Hamiltonian converts them to rad/ns.
Because every field is an array, ``jax.vmap`` over a stacked ``DeviceParams`` propagates many
devices at once (domain randomisation and robustness maps cost nothing extra).

**Pairing warning.** The paper's Table 1 lists the -324 MHz anharmonicity and the 100 MHz coupling
next to the 5.8899 GHz qubit. With that pairing every stored pulse of the paper fails
(J_T 1e-2 to 6e-2). The code that produced the paper pairs alpha = -324 MHz, g = 100 MHz with the
**5.0311 GHz** qubit (q0); that is the pairing reproduced here and the only one that reproduces the
paper's gates (spec 1.1 and 9.1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..validation import instance_of

__all__ = ["DeviceParams", "nominal_device", "validate_device"]


class DeviceParams(NamedTuple):
    """Physical parameters of the device, all in GHz.

    Attributes:
        omega_q: (2,) qubit frequencies (q0, q1).
        alpha_q: (2,) qubit anharmonicities (negative for transmons).
        g: (2,) qubit-coupler exchange couplings (q0-c, q1-c).
        omega_c: () idle coupler frequency.
        alpha_c: () coupler anharmonicity.
        omega_r: () rotating-frame frequency.
    """

    omega_q: jnp.ndarray
    alpha_q: jnp.ndarray
    g: jnp.ndarray
    omega_c: jnp.ndarray
    alpha_c: jnp.ndarray
    omega_r: jnp.ndarray


def nominal_device() -> DeviceParams:
    """The paper run's device (code pairing, see the module docstring), as float64 numpy arrays.

    numpy rather than jax arrays so that building it never depends on JAX's x64 switch; JAX
    converts them at trace time.
    """
    return DeviceParams(
        omega_q=np.array([5.0311, 5.8899]),
        alpha_q=np.array([-0.324, -0.235]),
        g=np.array([0.100, 0.0714]),
        omega_c=np.array(7.445),
        alpha_c=np.array(-0.230),
        omega_r=np.array(6.0),
    )


_FIELD_SHAPES = {"omega_q": (2,), "alpha_q": (2,), "g": (2,), "omega_c": (), "alpha_c": (), "omega_r": ()}


def validate_device(device, name: str = "params") -> DeviceParams:
    """Check a concrete ``DeviceParams`` (shapes, finiteness) and return it as float64 numpy.

    Raises:
        ValueError: naming the field, the expected shape and what arrived.
    """
    instance_of(name, device, DeviceParams, "quantgate_env.DeviceParams (see nominal_device())")
    fields = {}
    for field, shape in _FIELD_SHAPES.items():
        value = np.asarray(getattr(device, field), dtype=np.float64)
        if value.shape != shape:
            raise ValueError(f"{name}.{field}: expected shape {shape} (GHz), got {value.shape}")
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{name}.{field}: expected finite values (GHz), got {value}")
        fields[field] = value
    return DeviceParams(**fields)
