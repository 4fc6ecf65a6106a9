"""Adapters: the MDP under other libraries' interfaces, thin shells with no physics or reward logic.

Modules: gymnasium (``GateGymEnv``, ``GateVectorEnv``: the ``quantgate_env:ZCQPEE-v0`` id), sb3 (an SB3
``VecEnv`` over the compiled batched step; SB3 imported on first use), pettingzoo, gymnax, jaxmarl
(optional extras), packing (the flat vector the Gymnasium adapters use) and _jax_stacks (what gymnax and
jaxmarl share). Users import the public modules ``quantgate_env.sb3``, ``quantgate_env.pettingzoo``,
``quantgate_env.gymnax`` and ``quantgate_env.jaxmarl``. May import mdp and the ground floor, not
physics directly, never tools.
"""
