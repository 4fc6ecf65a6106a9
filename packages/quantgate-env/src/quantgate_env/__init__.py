"""quantgate-env: an exact float64 JAX environment for a perfect-entangling gate on two transmons
with a tunable coupler (the ZCQPEE problem of Grech et al., Quantum Sci. Technol. 11, 015030, 2026).

Importing the package changes no global JAX setting; see ``quantgate_env.precision``.
"""

from .device import DeviceParams, nominal_device
from .metrics import gate_metrics
from .pulses import load_pulse_csv, rollout_pulse

__version__ = "0.1.0"

__all__ = [
    "DeviceParams",
    "nominal_device",
    "gate_metrics",
    "load_pulse_csv",
    "rollout_pulse",
]
