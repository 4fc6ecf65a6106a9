"""IPPO and IPPO-Lagrangian: independent PPO learners, one per agent.

`IPPO.train` steps a PettingZoo ParallelEnv from Python; a functional multi-agent core trains through
the trainer (`run.algorithms`' IPPO entry over `programs.py`, compiled with the update).

Files: `config.py` (IPPOConfig, IPPOLagrangianConfig, validate_ippo_config), `spaces.py` (agent
spaces and `MARLPolicy`), `agent_axis.py` (agent groups; a core and its agents' networks as one env
and one policy for the common rollout and evaluation), `learn.py` (PPO's learning step vmapped
over agents), `losses.py` (dual ascent and the Lagrangian advantage), `programs.py` (init, update
and evaluate over a functional core, what the trainer compiles), `rollout.py` (the ParallelEnv
runner), `train.py` (`IPPO`, `IPPO_Lagrangian` and their result, on a ParallelEnv).
"""

from .config import IPPOConfig, IPPOLagrangianConfig, validate_ippo_config
from .rollout import ActionRewriteError
from .spaces import MARLPolicy
from .train import IPPO, IPPO_Lagrangian, IPPOResult, TrainResult, check_budget

__all__ = ["IPPO", "IPPO_Lagrangian", "IPPOConfig", "IPPOLagrangianConfig", "IPPOResult",
           "TrainResult", "MARLPolicy", "ActionRewriteError", "check_budget",
           "validate_ippo_config"]
