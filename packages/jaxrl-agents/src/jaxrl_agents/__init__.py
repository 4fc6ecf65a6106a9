"""jaxrl-agents: PPO, TRPO, IPPO and IPPO-Lagrangian in JAX.

All four are compiled together with functional JAX environments (IPPO and IPPO-Lagrangian with a
multi-agent core); IPPO also trains on a PettingZoo ParallelEnv stepped from Python.

Layout (brax's): `common/` (what every algorithm shares), one folder per algorithm family
(`ppo/`, `trpo/`, `ippo/`), `run/` (RunSpec, RunDir, trainer, sessions, run directories,
checkpoints), `stages/` (staged runs), `sweep/` (jaxrl-sweep, Ray Tune), `campaign/`
(jaxrl-campaign, Ray Core), `console/` (jaxrl-train, jaxrl-plot and what they print) and
`terminal/` (the live progress line and suggested commands, below both run/ and console/).
This surface is the network and policy, the configs, the trainers and the compiled programs; each
subpackage exposes its own building blocks in its ``__all__``. Importing the
package changes no global JAX setting.
"""

from .common import ActorCritic, Policy, load_policy
from .ippo import IPPO, IPPO_Lagrangian, IPPOConfig, IPPOLagrangianConfig, validate_ippo_config
from .ppo import PPOConfig
from .run.algorithms import compile_algorithm
from .run.trainer import TrainResult, resume, train
from .trpo import TRPOConfig

__version__ = "0.1.0"

__all__ = [
    "ActorCritic",
    "IPPO",
    "IPPOConfig",
    "IPPOLagrangianConfig",
    "IPPO_Lagrangian",
    "PPOConfig",
    "Policy",
    "TRPOConfig",
    "TrainResult",
    "compile_algorithm",
    "load_policy",
    "resume",
    "train",
    "validate_ippo_config",
]
