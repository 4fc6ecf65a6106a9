"""jaxrl-agents: PPO and TRPO compiled together with functional JAX environments.

Public surface: the network definition (`ActorCritic`), the action distributions, the `Policy`
object and `load_policy`. Algorithms, the trainer and the CLI live in their own modules.
"""

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
from .networks import ACTIVATIONS, ActorCritic, mlp_apply, mlp_init
from .policy import Policy, load_policy

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS",
    "ActorCritic",
    "Categorical",
    "DiagGaussian",
    "MultiCategorical",
    "Policy",
    "categorical_entropy",
    "categorical_kl",
    "categorical_logp",
    "gaussian_entropy",
    "gaussian_kl",
    "gaussian_logp",
    "load_policy",
    "mask_logits",
    "mlp_apply",
    "mlp_init",
]
