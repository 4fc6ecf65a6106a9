"""TRPO following sb3_contrib.TRPO, compiled together with a functional environment.

`config.py`: `TRPOConfig`; `losses.py`: surrogate, mean KL and the KL's Hessian-vector product;
`update.py`: the trust-region `actor_step`, ``init``, ``make_phases``, ``make_update`` and
``traced_settings``.
"""

from .config import TRPOConfig
from .losses import kl_hessian_vector_product
from .update import actor_step, init, make_phases, make_update, traced_settings

__all__ = ["TRPOConfig", "actor_step", "kl_hessian_vector_product", "init", "make_phases",
           "make_update", "traced_settings"]
