"""jaxrl-agents: PPO and TRPO compiled together with functional JAX environments.

Public surface: the network definition (`ActorCritic`), the action distributions, the `Policy`
object and `load_policy`; the algorithm configs and building blocks (GAE, the PPO loss, conjugate
gradient, rollouts, evaluation); and the training entry points `train` / `resume` (the
``jaxrl-train`` command). Importing the package changes no global JAX setting.
"""

from .algorithms import compile_algorithm, make_config
from .cg import conjugate_gradient
from .distributions import (
    Categorical,
    DiagGaussian,
    MultiCategorical,
    categorical_entropy,
    categorical_kl,
    categorical_logp,
    gaussian_entropy,
    gaussian_kl,
    gaussian_logp,
    mask_logits,
)
from .envs import check_env, load_env
from .evaluation import eval_summary, evaluate_episode, format_eval_line
from .gae import gae, gae_next_values
from .ippo import IPPO
from .ippo_config import IPPOConfig, IPPOLagrangianConfig, validate_ippo_config
from .ippo_lagrangian import IPPO_Lagrangian
from .marl_spaces import MARLPolicy
from .networks import ACTIVATIONS, ActorCritic, mlp_apply, mlp_init
from .policy import Policy, load_policy
from .ppo import PPOConfig, ppo_loss
from .rollout import Transition, collect
from .state import TrainState
from .trainer import TrainResult, resume, train
from .trpo import TRPOConfig

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS",
    "ActorCritic",
    "IPPO",
    "IPPOConfig",
    "IPPOLagrangianConfig",
    "IPPO_Lagrangian",
    "MARLPolicy",
    "gae_next_values",
    "validate_ippo_config",
    "Categorical",
    "DiagGaussian",
    "MultiCategorical",
    "PPOConfig",
    "Policy",
    "TRPOConfig",
    "TrainResult",
    "TrainState",
    "Transition",
    "categorical_entropy",
    "categorical_kl",
    "categorical_logp",
    "check_env",
    "collect",
    "compile_algorithm",
    "conjugate_gradient",
    "eval_summary",
    "evaluate_episode",
    "format_eval_line",
    "gae",
    "gaussian_entropy",
    "gaussian_kl",
    "gaussian_logp",
    "load_env",
    "load_policy",
    "make_config",
    "mask_logits",
    "mlp_apply",
    "mlp_init",
    "ppo_loss",
    "resume",
    "train",
]
