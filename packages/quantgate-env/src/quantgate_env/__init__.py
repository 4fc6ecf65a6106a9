"""quantgate-env: an exact float64 JAX environment for a perfect-entangling gate on two transmons.

The transmons share a tunable coupler: the ZCQPEE problem of Grech et al., Quantum Sci. Technol. 11,
015030, 2026.

Importing the package changes no global JAX setting; see ``quantgate_env.precision``. It registers
the Gymnasium id ``quantgate_env:ZCQPEE-v0`` (single and vectorised).
"""

import gymnasium as _gymnasium

from . import (
    pettingzoo,  # noqa: F401  quantgate_env.pettingzoo.parallel_env(...) after `import quantgate_env`
    sb3,  # noqa: F401  quantgate_env.sb3.make_vec_env(...) after `import quantgate_env` (imports no SB3)
)
from .mdp.config import EnvConfig
from .mdp.multi_line import QUBIT_AMP_BOUND, MultiGateConfig, MultiGateEnv, MultiGateState, make_multi
from .mdp.single_line import EnvParams, EnvState, GateEnv, make, observation_layout
from .physics.device import DeviceParams, nominal_device
from .physics.drift import DRIFT_RANGES, DriftParams
from .physics.metrics import gate_metrics
from .tools.grape import RefineResult, refine_pulse
from .tools.pulses import load_pulse_csv, paper_pulse, paper_pulse_path, rollout_pulse, save_pulse_csv

__version__ = "0.1.0"

__all__ = [
    "DRIFT_RANGES",
    "DeviceParams",
    "DriftParams",
    "EnvConfig",
    "EnvParams",
    "EnvState",
    "GateEnv",
    "MultiGateConfig",
    "MultiGateEnv",
    "MultiGateState",
    "QUBIT_AMP_BOUND",
    "RefineResult",
    "gate_metrics",
    "load_pulse_csv",
    "make",
    "make_multi",
    "nominal_device",
    "observation_layout",
    "paper_pulse",
    "paper_pulse_path",
    "refine_pulse",
    "rollout_pulse",
    "save_pulse_csv",
]

if "ZCQPEE-v0" not in _gymnasium.registry:
    _gymnasium.register(
        id="ZCQPEE-v0",
        entry_point="quantgate_env.adapters.gymnasium:GateGymEnv",
        vector_entry_point="quantgate_env.adapters.gymnasium:GateVectorEnv",
        max_episode_steps=None,  # the environment terminates itself at the end of the pulse
    )
