"""``load``: an SB3 MlpPolicy checkpoint (PPO / A2C / sb3-contrib TRPO) as a ``jaxrl_agents.Policy``."""

from __future__ import annotations

import os

from .describe import SB3_TO_JAX_ACTIVATION, check_convertible, read_checkpoint
from .errors import CheckpointError

__all__ = ["load", "resolve_activation"]


def resolve_activation(activation: str | None) -> str | None:
    """Normalise a user-given activation to SB3's class name (``"relu"`` / ``"ReLU"`` -> ``"ReLU"``).

    Returns ``None`` for ``None``. Raises ``ValueError`` naming the accepted names otherwise.
    """
    if activation is None:
        return None
    by_lower = {k.lower(): k for k in SB3_TO_JAX_ACTIVATION}
    by_lower.update({v: k for k, v in SB3_TO_JAX_ACTIVATION.items()})
    key = str(activation).replace("torch.nn.", "").lower()
    if key not in by_lower:
        raise ValueError(f"activation: expected one of {sorted(set(by_lower))} (or None to read it "
                         f"from the checkpoint), got {activation!r}")
    return by_lower[key]


def load(path, *, activation: str | None = None):
    """Load an SB3 checkpoint as a ``jaxrl_agents.Policy``, without torch and without unpickling code.

    Supported: ``MlpPolicy`` (``ActorCriticPolicy``) checkpoints of PPO, A2C and sb3-contrib TRPO,
    1-D Box observations, Box actions (diagonal Gaussian with state-independent ``log_std``) or
    Discrete actions, separate actor/critic MLPs of equal widths, activations Tanh / ReLU /
    LeakyReLU / GELU.

    Network sizes come from the weights; the activation from the readable class name in ``data``
    (SB3's default Tanh when ``policy_kwargs`` has none). The weights become the parameters of
    jaxrl-agents' default Flax towers (``keymap``'s table): kernels are the torch weights
    transposed, (out, in) -> (in, out), bit-identical float32.

    Args:
        path: the ``.zip`` written by ``model.save``.
        activation: override the activation (``"tanh"``, ``"relu"``, ``"ReLU"``...). Only for
            checkpoints whose ``data`` lost the information; a wrong value silently gives a different
            policy, which is why the default reads it from the file.

    Returns:
        ``jaxrl_agents.Policy`` whose ``act(obs)`` (obs: (28,) or (B, 28) for the gate env; generally
        (obs_dim,) / (B, obs_dim)) returns the Gaussian mean, unclipped, (act_dim,) float32, or the
        arg-max action (int32) for Discrete; ``value(obs)`` the critic. ``policy.metadata`` records the
        source (``"source": "sb3"``, algorithm, sb3 version, file, timesteps, action bounds).

    Raises:
        CheckpointError: missing file, not a zip, truncated zip, missing ``data`` / ``policy.pth``,
            malformed JSON, missing or unexpected tensors, wrong shapes, non-finite weights. The
            message names the file and the member.
        UnsafeCheckpointError: ``policy.pth`` references a global outside the allow-list; nothing
            from the file was executed.
        UnsupportedCheckpointError: another algorithm, CNN / dict observations, shared layers, gSDE,
            ...: names what was found and what is supported.
    """
    # jaxrl-agents (and with it jax) is imported here, not at package import, so `inspect` and the
    # CLI's help stay fast and usable where only numpy is installed.
    from jaxrl_agents import ActorCritic, Policy
    from jaxrl_agents.common.fileio import unflatten_dict
    from jaxrl_agents.common.networks import ACTIVATIONS

    override = resolve_activation(activation)
    summary, state, version = read_checkpoint(path)
    weights = check_convertible(path, summary, state, override)
    discrete = summary.action_space.kind == "Discrete"
    obs_space, act_space = summary.observation_space, summary.action_space

    sb3_activation = override or summary.activation
    jax_activation = SB3_TO_JAX_ACTIVATION[sb3_activation]
    if jax_activation not in ACTIVATIONS:  # jaxrl-agents dropped one we map to
        raise CheckpointError(path, "data", f"activation {sb3_activation} maps to {jax_activation!r}, "
                              f"which jaxrl-agents does not provide ({sorted(ACTIVATIONS)})")
    model = ActorCritic(
        obs_dim=weights.obs_dim,
        action_kind="categorical" if discrete else "gaussian",
        action_shape=(weights.act_dim,),
        hidden=weights.pi_hidden,
        activation=jax_activation,
        critic_hidden=weights.vf_hidden,  # None-equivalent when it equals pi (net_arch=[64, 64])
    )

    # The key table's Flax parameter paths -> the parameter tree of the default Flax towers;
    # Policy checks every shape against those modules.
    params = unflatten_dict(weights.flax_params)
    metadata = {
        "source": "sb3",
        "algorithm": summary.algorithm,
        "sb3_version": version,
        "checkpoint": os.path.abspath(os.fspath(path)),
        "num_timesteps": summary.num_timesteps,
        "activation": sb3_activation,
        "activation_source": "argument" if override else summary.activation_source,
        "action_space": {"kind": act_space.kind, "shape": list(act_space.shape), "n": act_space.n,
                         "low": act_space.low, "high": act_space.high},
        "observation_space": {"kind": obs_space.kind, "shape": list(obs_space.shape),
                              "low": obs_space.low, "high": obs_space.high},
    }
    return Policy(model, params, metadata)
