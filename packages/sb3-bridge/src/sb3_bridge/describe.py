"""``inspect``: describe an SB3 checkpoint without building a network.

Reads ``data`` (JSON) and ``policy.pth`` (allow-list unpickler), and reports what the checkpoint is
and whether ``sb3_bridge.load`` can convert it, with the reasons when it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import keymap
from .archive import ReadBudget, read_members
from .errors import CheckpointError, UnsupportedCheckpointError
from .sb3_data import DataSummary, parse_data
from .torch_archive import read_state_dict

__all__ = ["CheckpointInfo", "inspect", "check_convertible", "SUPPORTED_ALGORITHMS",
           "SB3_TO_JAX_ACTIVATION"]

SUPPORTED_ALGORITHMS = ("PPO", "A2C", "TRPO")
SUPPORTED_POLICY_CLASSES = ("ActorCriticPolicy",)  # what "MlpPolicy" resolves to

#: SB3 (torch.nn) activation class name -> jaxrl_agents.common.networks.ACTIVATIONS key. Only exact
#: equivalents: torch.nn.GELU is the erf form, and so is jaxrl-agents' "gelu"; LeakyReLU uses
#: torch's default slope 0.01 in both (a custom slope is not readable from `data`).
SB3_TO_JAX_ACTIVATION = {"Tanh": "tanh", "ReLU": "relu", "LeakyReLU": "leaky_relu", "GELU": "gelu"}


@dataclass(frozen=True)
class CheckpointInfo:
    """Description of an SB3 checkpoint.

    Attributes:
        path: the file.
        sb3_version: content of ``_stable_baselines3_version`` (``None`` if absent).
        algorithm: ``"PPO"``, ``"A2C"``, ``"TRPO"`` or what else was detected.
        policy_class: e.g. ``"ActorCriticPolicy"`` (= ``"MlpPolicy"``).
        observation_space, action_space: readable summaries (kind, shape, dtype, n, bounds).
        activation: SB3 activation class name and ``activation_source`` (``"data"``/``"default"``).
        net_arch_declared: ``{"pi", "vf"}`` from ``policy_kwargs`` (``None`` when absent).
        pi_hidden, vf_hidden: hidden widths read from the weights (``None`` if the layout is not an
            MLP actor-critic).
        obs_dim, act_dim: network input size and action-head size (Box: action dim; Discrete: n).
        use_sde: gSDE flag.
        num_timesteps: environment steps trained.
        parameters: ``{state_dict key: shape}`` in file order.
        n_parameters: total number of scalars in ``policy.pth``.
        problems: reasons ``load`` would refuse this checkpoint; empty means loadable.
    """

    path: str
    sb3_version: str | None
    algorithm: str
    policy_class: str
    observation_space: object
    action_space: object
    activation: str
    activation_source: str
    net_arch_declared: dict | None
    pi_hidden: tuple[int, ...] | None
    vf_hidden: tuple[int, ...] | None
    obs_dim: int | None
    act_dim: int | None
    use_sde: bool
    num_timesteps: int | None
    parameters: dict = field(repr=False)
    n_parameters: int = 0
    problems: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        """True when ``sb3_bridge.load`` can convert this checkpoint."""
        return not self.problems

    def summary(self) -> str:
        """Multi-line human-readable description (what ``sb3-bridge inspect`` prints)."""
        obs, act = self.observation_space, self.action_space
        act_desc = f"Discrete({act.n})" if act.kind == "Discrete" else f"{act.kind}{list(act.shape)}"
        lines = [
            f"checkpoint   {self.path}",
            f"sb3 version  {self.sb3_version or '?'}",
            f"algorithm    {self.algorithm}   policy {self.policy_class}",
            f"spaces       obs {obs.kind}{list(obs.shape)} {obs.dtype or ''}  ->  action {act_desc}",
            f"network      pi {list(self.pi_hidden) if self.pi_hidden is not None else '?'}  "
            f"vf {list(self.vf_hidden) if self.vf_hidden is not None else '?'}  "
            f"activation {self.activation} ({self.activation_source})",
            f"parameters   {self.n_parameters} in {len(self.parameters)} tensors; "
            f"trained {self.num_timesteps if self.num_timesteps is not None else '?'} steps",
        ]
        if self.problems:
            lines.append("NOT LOADABLE:")
            lines += [f"  - {p}" for p in self.problems]
        else:
            lines.append("loadable     yes (sb3_bridge.load)")
        return "\n".join(lines)


def read_checkpoint(path):
    """Read and parse the two members sb3-bridge uses, within one ``archive.ReadBudget``.

    Returns:
        ``(DataSummary, state_dict, sb3_version)``.
    """
    budget = ReadBudget(path)
    members = read_members(path, ("data", "policy.pth"), ("_stable_baselines3_version",), budget=budget)
    summary = parse_data(members["data"], path)
    state = read_state_dict(members.pop("policy.pth"), path, "policy.pth", budget=budget)
    version = members.get("_stable_baselines3_version")
    version = version.decode("utf-8", "replace").strip() if version is not None else None
    return summary, state, version


def find_problems(summary: DataSummary, state: dict, activation: str | None = None) -> list[str]:
    """Every reason this checkpoint cannot be converted (empty list: convertible).

    Args:
        summary: parsed ``data``.
        state: state_dict from ``policy.pth``.
        activation: SB3 activation class name overriding the one in ``data`` (``None``: use data's).

    Each entry names what was found and what is supported.
    """
    problems = []
    if summary.algorithm not in SUPPORTED_ALGORITHMS:
        problems.append(f"algorithm {summary.algorithm} (policy {summary.policy_class}); supported: "
                        f"{', '.join(SUPPORTED_ALGORITHMS)} (sb3-contrib TRPO)")
    if summary.policy_class not in SUPPORTED_POLICY_CLASSES:
        kind = {"ActorCriticCnnPolicy": " (CNN observations)",
                "MultiInputActorCriticPolicy": " (dict observations)",
                "RecurrentActorCriticPolicy": " (recurrent)",
                "MaskableActorCriticPolicy": " (action masking)"}.get(summary.policy_class, "")
        problems.append(f"policy class {summary.policy_class}{kind}; supported: MlpPolicy "
                        f"(ActorCriticPolicy)")
    obs, act = summary.observation_space, summary.action_space
    if obs.kind != "Box" or len(obs.shape) != 1:
        what = "dict observations" if obs.kind == "Dict" else f"{obs.kind} observations of shape {list(obs.shape)}"
        problems.append(f"{what}; supported: 1-D Box observations")
    if act.kind not in ("Box", "Discrete"):
        problems.append(f"{act.kind} action space; supported: Box (Gaussian) and Discrete")
    if summary.use_sde:
        problems.append("gSDE exploration (use_sde=True); supported: the default Gaussian with "
                        "state-independent log_std")
    if summary.squash_output:
        problems.append("squash_output=True (tanh-squashed actions); supported: unsquashed means")
    if summary.features_extractor not in (None, "FlattenExtractor"):
        problems.append(f"features extractor {summary.features_extractor}; supported: FlattenExtractor")
    for desc in keymap.unsupported_keys(state):
        if summary.use_sde and desc.startswith("gSDE"):
            continue  # already reported from data
        problems.append(f"policy.pth holds {desc}; supported: the MlpPolicy layout "
                        f"(mlp_extractor.policy_net/value_net, action_net, value_net, log_std)")
    act_name = activation or summary.activation
    if act_name not in SB3_TO_JAX_ACTIVATION:
        problems.append(f"activation {act_name}; supported: "
                        f"{', '.join(SB3_TO_JAX_ACTIVATION)} (pass activation=... to override)")
    n_pi, n_vf = keymap.layer_counts(state)
    if "action_net.weight" in state:
        pi = [_out(state, f"mlp_extractor.policy_net.{2 * i}.weight") for i in range(n_pi)]
        vf = [_out(state, f"mlp_extractor.value_net.{2 * i}.weight") for i in range(n_vf)]
        if not pi:
            problems.append("no hidden layers (net_arch=[]); supported: at least one hidden layer")
        elif not vf:
            problems.append("no critic hidden layers (net_arch vf=[]); supported: at least one "
                            "hidden layer in each network")
    return problems


def inspect(path) -> CheckpointInfo:
    """Describe an SB3 checkpoint without building anything and without running code from it.

    Args:
        path: SB3 ``.zip`` written by ``model.save``.

    Returns:
        ``CheckpointInfo``; ``info.supported`` tells whether ``load`` will convert it and
        ``info.problems`` why not.

    Raises:
        CheckpointError: the file is missing or damaged (see ``sb3_bridge.load``).
        UnsafeCheckpointError: ``policy.pth`` references globals outside the allow-list.
    """
    summary, state, version = read_checkpoint(path)
    n_pi, n_vf = keymap.layer_counts(state)
    pi_hidden = vf_hidden = obs_dim = act_dim = None
    if n_pi or "action_net.weight" in state:
        pi_hidden = tuple(_out(state, f"mlp_extractor.policy_net.{2 * i}.weight") for i in range(n_pi))
        vf_hidden = tuple(_out(state, f"mlp_extractor.value_net.{2 * i}.weight") for i in range(n_vf))
        first = "mlp_extractor.policy_net.0.weight" if n_pi else "action_net.weight"
        if first in state and np.ndim(state[first]) == 2:
            obs_dim = int(state[first].shape[1])
        if "action_net.weight" in state and np.ndim(state["action_net.weight"]) == 2:
            act_dim = int(state["action_net.weight"].shape[0])
    return CheckpointInfo(
        path=str(path),
        sb3_version=version,
        algorithm=summary.algorithm,
        policy_class=summary.policy_class,
        observation_space=summary.observation_space,
        action_space=summary.action_space,
        activation=summary.activation,
        activation_source=summary.activation_source,
        net_arch_declared=summary.net_arch,
        pi_hidden=pi_hidden,
        vf_hidden=vf_hidden,
        obs_dim=obs_dim,
        act_dim=act_dim,
        use_sde=summary.use_sde,
        num_timesteps=summary.num_timesteps,
        parameters={k: tuple(v.shape) for k, v in state.items()},
        n_parameters=int(sum(v.size for v in state.values())),
        problems=tuple(_all_problems(path, summary, state)),
    )


def _all_problems(path, summary, state) -> list[str]:
    problems = find_problems(summary, state)
    if not problems:
        # The checks `load` makes beyond the supported-kind table (keys, shapes, finite weights,
        # data against weights): a file `inspect` calls loadable must load.
        try:
            check_convertible(path, summary, state)
        except CheckpointError as exc:
            problems.append(exc.reason)
    return problems


def check_convertible(path, summary: DataSummary, state: dict, activation: str | None = None):
    """Every check ``load`` makes before building a network.

    One definition for ``load`` and ``inspect``.

    Args:
        path: the checkpoint, for error messages.
        summary: parsed ``data``.
        state: state_dict from ``policy.pth``.
        activation: SB3 activation class name overriding ``data``'s (``None``: use data's).

    Returns:
        ``keymap.MlpWeights``: the converted weights.

    Raises:
        UnsupportedCheckpointError: a kind of checkpoint that is not converted (``find_problems``).
        CheckpointError: missing / unexpected tensors, wrong shapes, non-finite or integer
            weights, or sizes in ``data`` that disagree with the weights.
    """
    raise_if_unsupported(path, find_problems(summary, state, activation))
    discrete = summary.action_space.kind == "Discrete"
    weights = keymap.convert_state_dict(state, discrete=discrete, path=path)
    obs_space, act_space = summary.observation_space, summary.action_space
    # Cross-check data against the weights: a mismatch means the members come from different models.
    if obs_space.shape and obs_space.shape != (weights.obs_dim,):
        raise CheckpointError(path, "policy.pth", f"the first layer takes {weights.obs_dim} inputs but "
                              f"data's observation_space has shape {list(obs_space.shape)}")
    if discrete:
        if act_space.n is not None and act_space.n != weights.act_dim:
            raise CheckpointError(path, "policy.pth", f"action_net has {weights.act_dim} outputs but "
                                  f"data's action_space is Discrete({act_space.n})")
    elif act_space.shape and int(np.prod(act_space.shape)) != weights.act_dim:
        raise CheckpointError(path, "policy.pth", f"action_net has {weights.act_dim} outputs but "
                              f"data's action_space has shape {list(act_space.shape)}")
    declared = summary.net_arch
    if declared is not None and "unreadable" not in declared and (
            tuple(declared["pi"]) != weights.pi_hidden or tuple(declared["vf"]) != weights.vf_hidden):
        raise CheckpointError(path, "policy.pth", f"weights have pi={list(weights.pi_hidden)}, "
                              f"vf={list(weights.vf_hidden)} but data declares net_arch {declared}")
    return weights


def _out(state, key) -> int:
    # Output width of a Linear weight (out, in); -1 for a malformed tensor (reported by load).
    shape = np.shape(state[key])
    return int(shape[0]) if shape else -1


def raise_if_unsupported(path, problems, member="data"):
    """Raise ``UnsupportedCheckpointError`` listing every problem (no-op when empty)."""
    if problems:
        raise UnsupportedCheckpointError(path, member, "unsupported checkpoint: " + "; ".join(problems))
