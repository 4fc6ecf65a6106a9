"""What every algorithm shares, one definition of each piece.

The network definition, action distributions, the `Policy` object, losses, GAE, rollouts, the
optimiser, the minibatch loop, conjugate gradient, the train state, config validation, the
environment contracts and their checker, environment loading, evaluation and file I/O.

Files: `networks/` (`ActorCritic`; `networks/mlp.py`, the default tower), `distributions.py`,
`policy.py`, `losses.py`, `gae.py`, `rollout.py`, `optimizer.py`, `minibatch.py` (with
`permutation.py`), `cg.py`, `state.py`, `config.py`, `contracts.py`, `envs/` (`load_env` and env
options; `envs/check.py`, the contracts' checker; `envs/factories.py`, the ``module:factory``
importer), `evaluation.py`, `fileio.py` (atomic writes, directory locks, npz storage),
`gymnax_env.py` (gymnax behind the step contract; imported on its own).
"""

from .cg import conjugate_gradient
from .config import AlgoConfig, ValidatedConfig, cfg_field
from .contracts import ContractError, Evaluation, FunctionalEnv, MultiAgentEnv
from .distributions import Categorical, DiagGaussian, MultiCategorical
from .envs import check_env, load_env
from .evaluation import eval_summary, evaluate_episode, format_eval_line
from .gae import gae, gae_next_values
from .losses import ppo_loss, standardize, value_loss
from .minibatch import minibatch_epochs
from .networks import ActorCritic
from .networks.mlp import ACTIVATIONS, mlp_apply, mlp_init
from .optimizer import apply_adam, harmonic_lr, linear_lr, make_optimizer
from .policy import Policy, load_policy
from .rollout import Transition, collect, make_rollout_phase
from .state import TrainState, init_train_state

__all__ = [
    "ACTIVATIONS", "ActorCritic", "AlgoConfig", "Categorical", "ContractError", "DiagGaussian",
    "Evaluation", "FunctionalEnv", "MultiAgentEnv", "MultiCategorical", "Policy", "TrainState",
    "Transition", "ValidatedConfig", "apply_adam", "cfg_field",
    "check_env", "collect", "conjugate_gradient", "eval_summary", "evaluate_episode",
    "format_eval_line", "gae", "gae_next_values", "harmonic_lr", "init_train_state", "linear_lr",
    "load_env", "load_policy", "make_optimizer", "make_rollout_phase", "minibatch_epochs",
    "mlp_apply", "mlp_init", "ppo_loss", "standardize", "value_loss",
]
