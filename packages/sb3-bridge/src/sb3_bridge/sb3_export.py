"""``export``: write a jaxrl-agents policy as an SB3 / sb3-contrib checkpoint zip.

This is the only module that needs torch and Stable-Baselines3 (``pip install sb3-bridge[export]``).
It builds a real SB3 model with matching ``policy_kwargs`` and spaces, copies the weights in through
the inverse of the key table in ``keymap`` (kernel (in, out) -> weight (out, in)), and lets SB3 write
the zip itself, so the file is exactly what ``PPO.load`` / ``TRPO.load`` expect.
"""

from __future__ import annotations

import io
import os

import numpy as np

from .outputs import check_writable, refuse_existing

__all__ = ["export"]

_ALGOS = {"ppo": ("stable_baselines3", "PPO"), "a2c": ("stable_baselines3", "A2C"),
          "trpo": ("sb3_contrib", "TRPO")}
_JAX_TO_TORCH_ACTIVATION = {"tanh": "Tanh", "relu": "ReLU", "leaky_relu": "LeakyReLU", "gelu": "GELU"}


def export(policy, path, *, algo: str = "ppo", observation_space=None, action_space=None,
           overwrite: bool = False) -> str:
    """Write ``policy`` as an SB3 checkpoint that ``PPO.load`` (``A2C.load``, ``sb3_contrib.TRPO.load``) opens.

    The checkpoint's ``predict(obs, deterministic=True)`` gives ``policy.act(obs)`` (clipped to the
    action space, as SB3 always does).

    Args:
        policy: a ``jaxrl_agents.Policy`` with a Gaussian (Box) or categorical (Discrete) head.
        path: output file; ``.zip`` is appended when the name has no suffix, as SB3 does.
        algo: ``"ppo"``, ``"a2c"`` or ``"trpo"``: the class that will load the file. The policy
            network is the same for all three; the choice fixes the hyperparameters saved with it
            (SB3 defaults), which matter only if the user continues training.
        observation_space: ``gymnasium.spaces.Box`` of shape (obs_dim,). Default: the bounds recorded
            when the policy was imported from SB3, else unbounded.
        action_space: Box (act_dim,) or Discrete(n). Default: the recorded one, else Discrete(n) or
            Box(-1, 1, (act_dim,)): SB3 requires finite bounds, and [-1, 1] is the convention of the
            contracts (docs/contracts.md) and SB3's advice. ``predict`` clips to these bounds, so
            pass the environment's space if it differs.
        overwrite: replace an existing file at the output path (default: refuse). The zip is
            built in memory and written atomically, so a failed export leaves any old file whole.

    Returns:
        the path written.

    Raises:
        FileExistsError: the output file exists and ``overwrite`` is False (checked before any
            work is done).
        OSError: the output's directory is missing or refuses new files (read-only, not a
            directory), naming the output file; also checked before any work is done.
        ImportError: torch or SB3 (sb3-contrib for TRPO) is not installed.
        ValueError: unknown ``algo``, a multi-categorical policy, or spaces that do not match the
            network's sizes.
    """
    key = str(algo).lower()
    if key not in _ALGOS:
        raise ValueError(f"algo: expected one of {sorted(_ALGOS)}, got {algo!r}")
    out_path = _zip_path(path)
    refuse_existing([out_path], overwrite=overwrite)
    # Before torch and the SB3 model (seconds of work): a read-only or missing directory fails now,
    # naming the output file.
    check_writable(out_path)
    try:
        import importlib

        import gymnasium as gym
        import torch
        algo_cls = getattr(importlib.import_module(_ALGOS[key][0]), _ALGOS[key][1])
    except ImportError as exc:
        raise ImportError(f"sb3_bridge.export needs torch and stable-baselines3 (and sb3-contrib for "
                          f"TRPO): pip install 'sb3-bridge[export]' ({exc})") from exc
    from jaxrl_agents.common.fileio import atomic_write  # the one atomic writer of the workspace

    model_def = policy.model
    if model_def.action_kind not in ("gaussian", "categorical"):
        raise ValueError(f"policy: SB3 export supports Gaussian (Box) and categorical (Discrete) "
                         f"policies, got action_kind={model_def.action_kind!r}")
    obs_space = observation_space or _recorded_box(policy.metadata.get("observation_space"),
                                                   (model_def.obs_dim,)) \
        or gym.spaces.Box(-np.inf, np.inf, (model_def.obs_dim,), np.float32)
    if model_def.action_kind == "categorical":
        act_space = action_space or gym.spaces.Discrete(model_def.action_shape[0])
    else:
        act_space = action_space or _recorded_box(policy.metadata.get("action_space"),
                                                  model_def.action_shape) \
            or gym.spaces.Box(-1.0, 1.0, model_def.action_shape, np.float32)
    _check_spaces(model_def, obs_space, act_space)

    policy_kwargs = dict(
        net_arch=dict(pi=list(model_def.hidden), vf=list(model_def.critic_widths)),
        activation_fn=getattr(torch.nn, _JAX_TO_TORCH_ACTIVATION[model_def.activation]),
    )
    model = algo_cls("MlpPolicy", _SpacesOnlyEnv(obs_space, act_space), policy_kwargs=policy_kwargs,
                     device="cpu", seed=0, verbose=0)
    state = _to_state_dict(policy.params, discrete=model_def.action_kind == "categorical")
    target = model.policy.state_dict()
    if set(state) != set(target):  # an SB3 layout change would surface here, not as wrong actions
        raise RuntimeError(f"SB3 {algo_cls.__name__} policy keys {sorted(target)} differ from the "
                           f"exported keys {sorted(state)}")
    model.policy.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)
    # SB3 would write the file in place (truncating an old one first); build it in memory instead
    # and move it into place in one step.
    buffer = io.BytesIO()
    model.save(buffer)
    refuse_existing([out_path], overwrite=overwrite)  # again: building took seconds
    atomic_write(out_path, buffer.getvalue())
    return out_path


def _zip_path(path) -> str:
    """The file name SB3's ``save`` uses for ``path``: ``.zip`` appended when there is no suffix."""
    path = os.fspath(path)
    return path + ".zip" if os.path.splitext(path)[1] == "" else path


def _to_state_dict(params, *, discrete: bool) -> dict[str, np.ndarray]:
    """Inverse of ``keymap.convert_state_dict``: kernels (in, out) -> torch weights (out, in)."""
    out = {}
    for role, prefix, head in (("actor", "mlp_extractor.policy_net", "action_net"),
                               ("critic", "mlp_extractor.value_net", "value_net")):
        net = params[role]["net"]
        n = len(net)
        for i in range(n):
            layer = net[f"dense_{i}"]
            name = f"{prefix}.{2 * i}" if i < n - 1 else head
            out[f"{name}.weight"] = np.ascontiguousarray(np.asarray(layer["kernel"], np.float32).T)
            out[f"{name}.bias"] = np.asarray(layer["bias"], np.float32)
    if not discrete:
        out["log_std"] = np.asarray(params["actor"]["log_std"], np.float32)
    return out


def _recorded_box(recorded, shape):
    """Rebuild a Box from the bounds ``sb3_bridge.load`` recorded (numpy-printed strings)."""
    import gymnasium as gym
    if not recorded or recorded.get("kind") != "Box" or not recorded.get("low"):
        return None
    try:
        low = np.array(recorded["low"].strip("[]").split(), dtype=np.float32)
        high = np.array(recorded["high"].strip("[]").split(), dtype=np.float32)
    except (ValueError, AttributeError):
        return None  # numpy elides long arrays with "...": fall back to the default
    n = int(np.prod(shape))
    if low.size != n or high.size != n:
        return None
    return gym.spaces.Box(low.reshape(shape), high.reshape(shape), dtype=np.float32)


def _check_spaces(model_def, obs_space, act_space):
    import gymnasium as gym
    if not isinstance(obs_space, gym.spaces.Box) or obs_space.shape != (model_def.obs_dim,):
        raise ValueError(f"observation_space: expected a Box of shape ({model_def.obs_dim},), got {obs_space!r}")
    if model_def.action_kind == "categorical":
        if not isinstance(act_space, gym.spaces.Discrete) or int(act_space.n) != model_def.action_shape[0]:
            raise ValueError(f"action_space: expected Discrete({model_def.action_shape[0]}), got {act_space!r}")
    elif not isinstance(act_space, gym.spaces.Box) or \
            int(np.prod(act_space.shape)) != model_def.action_shape[0]:
        raise ValueError(f"action_space: expected a Box with {model_def.action_shape[0]} elements, got "
                         f"{act_space!r}")


def _spaces_only_env_class():
    import gymnasium as gym

    class SpacesOnlyEnv(gym.Env):
        """Carries the spaces SB3 needs to build (and save) a model; never stepped."""

        def __init__(self, observation_space, action_space):
            self.observation_space = observation_space
            self.action_space = action_space

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(self.observation_space.shape, self.observation_space.dtype), {}

        def step(self, action):
            raise NotImplementedError("export builds the model only")

    return SpacesOnlyEnv


def _SpacesOnlyEnv(observation_space, action_space):
    return _spaces_only_env_class()(observation_space, action_space)
