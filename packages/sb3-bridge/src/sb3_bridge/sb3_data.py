"""Reading the ``data`` member of an SB3 checkpoint as plain JSON, never unpickling.

SB3 stores objects that JSON cannot hold (the activation class, spaces, schedules) as
``{":type:": ..., ":serialized:": "<base64 cloudpickle>", <readable side fields>}``. Unpickling a
``:serialized:`` blob runs arbitrary code, so this module only reads the readable side fields:
``policy_kwargs["activation_fn"] == "<class 'torch.nn.modules.activation.ReLU'>"``,
``observation_space["_shape"] == [3]``, ``action_space["n"] == "2"``, and so on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .errors import CheckpointError

__all__ = ["DataSummary", "parse_data", "SB3_DEFAULT_ACTIVATION"]

#: SB3's ActorCriticPolicy default (PPO, A2C and sb3-contrib TRPO all use it).
SB3_DEFAULT_ACTIVATION = "Tanh"

_CLASS_REPR = re.compile(r"<class '([\w.]+)'>")
_FUNC_REPR = re.compile(r"<function (\w+)\.__init__ ")

# Algorithm fingerprints: hyperparameters each algorithm saves in `data` (SB3 2.x / sb3-contrib 2.x).
# The class name itself is only inside a pickle, so the attribute set is the readable evidence.
_ON_POLICY = ("n_steps", "gae_lambda", "vf_coef", "ent_coef")


@dataclass(frozen=True)
class SpaceSummary:
    """Readable parts of a serialized gymnasium space.

    Attributes:
        kind: ``"Box"``, ``"Discrete"``, ``"Dict"``, ... (the class name), or ``"unknown"``.
        shape: the space's shape, ``()`` for Discrete.
        dtype: numpy dtype name, e.g. ``"float32"``.
        n: number of actions for Discrete, else ``None``.
        low, high: bounds of a Box as printed by numpy (strings; SB3 does not store them as JSON),
            else ``None``.
    """

    kind: str
    shape: tuple[int, ...]
    dtype: str | None
    n: int | None = None
    low: str | None = None
    high: str | None = None


@dataclass(frozen=True)
class DataSummary:
    """What sb3-bridge needs from ``data``.

    Attributes:
        algorithm: ``"PPO"``, ``"A2C"``, ``"TRPO"``, or a description of something else (``"SAC"``,
            ``"off-policy (DQN/SAC/TD3/...)"``, ``"unknown"``).
        policy_class: class name of the policy (``"ActorCriticPolicy"`` for ``"MlpPolicy"``).
        activation: SB3 activation class name (``"Tanh"``, ``"ReLU"``, ...).
        activation_source: ``"data"`` if read from policy_kwargs, ``"default"`` if absent.
        net_arch: ``{"pi": [...], "vf": [...]}`` as declared in policy_kwargs, or ``None`` when
            absent (then SB3's default 64x64 applied) or not readable.
        policy_kwargs_keys: keys present in policy_kwargs.
        features_extractor: class name of ``features_extractor_class`` if set, else ``None``.
        use_sde: generalized state-dependent exploration flag.
        observation_space, action_space: readable space summaries.
        num_timesteps: environment steps trained.
    """

    algorithm: str
    policy_class: str
    activation: str
    activation_source: str
    net_arch: dict | None
    policy_kwargs_keys: tuple[str, ...]
    features_extractor: str | None
    squash_output: bool
    use_sde: bool
    observation_space: SpaceSummary
    action_space: SpaceSummary
    num_timesteps: int | None


def parse_data(blob: bytes, path) -> DataSummary:
    """Parse the ``data`` member.

    Args:
        blob: the raw bytes of ``data``.
        path: checkpoint path for error messages.

    Raises:
        CheckpointError: ``data`` is not UTF-8 JSON, is not an object, or lacks the entries every
            SB3 model saves (``policy_class``, ``observation_space``, ``action_space``).
    """
    try:
        data = json.loads(blob.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CheckpointError(path, "data", f"not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(path, "data", f"malformed JSON at line {exc.lineno} column {exc.colno}: "
                              f"{exc.msg}") from None
    except RecursionError:
        raise CheckpointError(path, "data", _TOO_DEEP) from None
    try:
        return _summarize(data, path)
    except RecursionError:  # str() of a deeply nested entry that json.loads just managed to build
        raise CheckpointError(path, "data", _TOO_DEEP) from None


_TOO_DEEP = ("JSON nested too deeply to parse (SB3 writes a few levels); the file is corrupt or "
             "crafted")


def _summarize(data, path) -> DataSummary:
    if not isinstance(data, dict):
        raise CheckpointError(path, "data", f"expected a JSON object, found {type(data).__name__}")
    for key in ("policy_class", "observation_space", "action_space"):
        if key not in data:
            raise CheckpointError(path, "data", f"no {key!r} entry; every SB3 model saves one "
                                  f"(found keys: {sorted(data)[:20]})")

    kwargs = data.get("policy_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise CheckpointError(path, "data", f"policy_kwargs is a {type(kwargs).__name__}, expected an object")
    kwargs_keys = tuple(k for k in kwargs if not k.startswith(":"))

    activation, source = SB3_DEFAULT_ACTIVATION, "default"
    if "activation_fn" in kwargs:
        match = _CLASS_REPR.search(str(kwargs["activation_fn"]))
        if match is None:
            raise CheckpointError(path, "data", "policy_kwargs.activation_fn is present but its class "
                                  f"name is not readable ({str(kwargs['activation_fn'])[:80]!r}); pass "
                                  "activation=... to sb3_bridge.load")
        activation, source = match.group(1).rsplit(".", 1)[-1], "data"

    fe = kwargs.get("features_extractor_class")
    features_extractor = None
    if fe is not None:
        match = _CLASS_REPR.search(str(fe))
        features_extractor = match.group(1).rsplit(".", 1)[-1] if match else str(fe)[:80]

    return DataSummary(
        algorithm=_algorithm(data),
        policy_class=_policy_class(data["policy_class"]),
        activation=activation,
        activation_source=source,
        net_arch=_net_arch(kwargs.get("net_arch")),
        policy_kwargs_keys=kwargs_keys,
        features_extractor=features_extractor,
        squash_output=bool(kwargs.get("squash_output", False)),
        use_sde=bool(data.get("use_sde", False)),
        observation_space=_space(data["observation_space"]),
        action_space=_space(data["action_space"]),
        num_timesteps=data.get("num_timesteps") if isinstance(data.get("num_timesteps"), int) else None,
    )


def _algorithm(data: dict) -> str:
    if "cg_max_steps" in data:
        return "TRPO"
    if "buffer_size" in data or "replay_buffer_class" in data:
        return "off-policy (SAC/TD3/DDPG/DQN/TQC/...)"
    if "clip_range" in data and "n_epochs" in data:
        return "PPO"
    if "n_quantiles" in data or "top_quantiles_to_drop_per_net" in data:
        return "QR-DQN/TQC"
    if all(k in data for k in _ON_POLICY):
        # A2C saves the on-policy fields and nothing algorithm-specific beyond them.
        return "A2C"
    return "unknown"


def _policy_class(entry) -> str:
    # SB3 writes the class dict's readable fields; method reprs carry the qualified class name.
    if isinstance(entry, dict):
        for value in entry.values():
            match = _FUNC_REPR.search(str(value))
            if match:
                return match.group(1)
        match = _CLASS_REPR.search(str(entry.get(":type:", "")))
        if match:
            return "unknown (" + match.group(1) + ")"
    return "unknown"


def _net_arch(value):
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return {"pi": list(value), "vf": list(value)}
    if isinstance(value, dict) and set(value) <= {"pi", "vf"} and all(
            isinstance(v, list) and all(isinstance(i, int) for i in v) for v in value.values()):
        return {"pi": list(value.get("pi", [])), "vf": list(value.get("vf", []))}
    return {"unreadable": str(value)[:200]}


def _space(entry) -> SpaceSummary:
    if not isinstance(entry, dict):
        return SpaceSummary("unknown", (), None)
    match = _CLASS_REPR.search(str(entry.get(":type:", "")))
    kind = match.group(1).rsplit(".", 1)[-1] if match else "unknown"
    shape = entry.get("_shape")
    shape = tuple(shape) if isinstance(shape, list) and all(isinstance(s, int) for s in shape) else ()
    n = None
    if kind == "Discrete":
        try:
            n = int(entry.get("n"))
        except (TypeError, ValueError):
            n = None
    dtype = entry.get("dtype") if isinstance(entry.get("dtype"), str) else None
    low = entry.get("low") if kind == "Box" else None
    high = entry.get("high") if kind == "Box" else None
    return SpaceSummary(kind, shape, dtype, n, low, high)
