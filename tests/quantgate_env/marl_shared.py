"""Configurations and compiled functions shared by the multi-agent tests (compile each once)."""

import functools

import jax
from quantgate_env import make_multi
from quantgate_env.adapters.pettingzoo import _compiled

# Short pulses at the paper's 50 ps samples (T = 0.05 ns x pulse_length): 10 steps of K = 3.
SHORT = dict(pulse_length=30, T=1.5)
CONTINUOUS = dict(SHORT)
DISCRETE = dict(SHORT, action_mode="discrete", delta_scale=8.0)
DISCRETE_K1 = dict(SHORT, action_mode="discrete", n_time_steps=1, delta_scale=8.0)
CLIP = dict(SHORT, oob_mode="clip", log_lim=0.0)


@functools.lru_cache(maxsize=None)
def core_functions(**options):
    """(core, reset -> (obs, state, infos), step, action_masks): the adapter's own compiled
    reset/step (so functional and PettingZoo tests share one compilation per configuration)."""
    core = make_multi(**options)
    reset, _, step = _compiled(core)
    return core, reset, step, jax.jit(core.action_masks)
