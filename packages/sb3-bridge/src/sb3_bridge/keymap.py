"""The explicit table from SB3 ``ActorCriticPolicy`` state_dict keys to jaxrl-agents' Flax parameters.

Every key is validated on the way.

SB3 ``MlpExtractor`` holds ``policy_net`` and ``value_net`` as ``nn.Sequential(Linear, act, Linear,
act, ...)``, so Linear layers sit at even indices 0, 2, 4, ... and activations (no parameters) at odd
ones. Heads: ``action_net`` (mean for Box, logits for Discrete) and ``value_net``. Box policies add a
state-independent ``log_std`` of shape (act_dim,).

    SB3 key                                 shape (out, in)  ->  Flax parameter path      (in, out)
    mlp_extractor.policy_net.{2i}.weight    (h_i, h_{i-1})       actor/net/dense_i/kernel  transposed
    mlp_extractor.policy_net.{2i}.bias      (h_i,)               actor/net/dense_i/bias
    action_net.weight / .bias               (act_dim, h_last)    actor/net/dense_L/...     transposed
    mlp_extractor.value_net.{2i}.weight     (g_i, g_{i-1})       critic/net/dense_i/kernel transposed
    mlp_extractor.value_net.{2i}.bias       (g_i,)               critic/net/dense_i/bias
    value_net.weight / .bias                (1, g_last)          critic/net/dense_L/...    transposed
    log_std                                 (act_dim,)           actor/log_std (Box only)

``actor/net`` and ``critic/net`` are the ``"params"`` collections of jaxrl-agents' default Flax
towers (``common.networks.MLP``: ``nn.Dense`` layers named ``dense_0 .. dense_L``, ``L`` the number
of hidden layers); ``jaxrl_agents.Policy`` checks every converted shape against those modules.

torch ``Linear`` computes ``x @ W.T + b`` with ``W`` of shape (out, in); a Dense layer with kernel
(in, out) computes ``x @ K + b``, so ``K = W.T`` exactly (no arithmetic, bit-identical float32).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import CheckpointError, UnsupportedCheckpointError

__all__ = ["MlpWeights", "convert_state_dict"]

_PREFIXES = {"actor": "mlp_extractor.policy_net", "critic": "mlp_extractor.value_net"}
_HEADS = {"actor": "action_net", "critic": "value_net"}
_SEQ_INDEX = re.compile(r"^mlp_extractor\.(policy_net|value_net)\.(\d+)\.(weight|bias)$")

# Keys that reveal a policy sb3-bridge does not convert, with what they mean.
_UNSUPPORTED_MARKERS = (
    ("mlp_extractor.shared_net.", "layers shared between actor and critic (net_arch with a shared part)"),
    ("features_extractor.", "a features extractor with parameters (CNN or custom extractor)"),
    ("pi_features_extractor.", "a features extractor with parameters (CNN or custom extractor)"),
    ("vf_features_extractor.", "a features extractor with parameters (CNN or custom extractor)"),
    ("lstm_actor.", "a recurrent (LSTM) policy"),
    ("actor.", "an off-policy actor (SAC/TD3/DDPG)"),
    ("q_net.", "a Q-network (DQN/QR-DQN)"),
)


@dataclass(frozen=True)
class MlpWeights:
    """Converted weights, kernels (in, out), all float32.

    Attributes:
        actor: list of ``(kernel, bias)`` for the actor hidden layers then the action head.
        critic: list of ``(kernel, bias)`` for the critic hidden layers then the value head.
        log_std: (act_dim,) for Box policies, ``None`` for Discrete.
        obs_dim, act_dim: input size and action-head output size.
        pi_hidden, vf_hidden: hidden sizes read from the weights.
        key_table: ``(sb3 key, Flax parameter path, transposed)`` rows, in order, for display,
            audit and `flax_params`.
        flax_params: ``{Flax parameter path: float32 array}`` built from `key_table`, e.g.
            ``"actor/net/dense_0/kernel"``: unflattened, the parameters of ``jaxrl_agents.Policy``.
    """

    actor: list
    critic: list
    log_std: np.ndarray | None
    obs_dim: int
    act_dim: int
    pi_hidden: tuple[int, ...]
    vf_hidden: tuple[int, ...]
    key_table: tuple
    flax_params: dict


def layer_counts(state: dict) -> tuple[int, int]:
    """Number of Linear layers in ``policy_net`` and ``value_net`` (contiguous 0, 2, 4, ... indices)."""
    counts = []
    for prefix in _PREFIXES.values():
        n = 0
        while f"{prefix}.{2 * n}.weight" in state:
            n += 1
        counts.append(n)
    return counts[0], counts[1]


def unsupported_keys(state: dict) -> list[str]:
    """Descriptions of any keys that mark an unsupported policy layout (empty when fine)."""
    found = []
    for marker, meaning in _UNSUPPORTED_MARKERS:
        hits = [k for k in state if k.startswith(marker)]
        if hits:
            found.append(f"{meaning} (keys like {hits[0]!r})")
    if "log_std" in state and np.ndim(state["log_std"]) == 2:
        found.append(f"gSDE exploration matrix log_std of shape {tuple(state['log_std'].shape)}")
    return found


def convert_state_dict(state: dict, *, discrete: bool, path, member: str = "policy.pth") -> MlpWeights:
    """Map an SB3 ActorCriticPolicy (MLP) state_dict to actor/critic layers, validating exactly.

    Args:
        state: ``{key: np.ndarray}`` as read from ``policy.pth``.
        discrete: ``True`` for a Discrete action space (no ``log_std`` expected).
        path: the checkpoint, for error messages.
        member: the member of the checkpoint that held ``state``, for error messages.

    Returns:
        ``MlpWeights`` with float32 kernels in (in, out) layout.

    Raises:
        UnsupportedCheckpointError: keys of a layout other than an MLP actor-critic.
        CheckpointError: missing or unexpected keys, inconsistent shapes, non-float or non-finite
            values.
    """
    bad = unsupported_keys(state)
    if bad:
        raise UnsupportedCheckpointError(
            path, member, "found " + "; ".join(bad) + ". Supported: SB3 MlpPolicy "
            "(ActorCriticPolicy with FlattenExtractor, separate pi/vf MLPs, no gSDE).")
    n_pi, n_vf = layer_counts(state)

    table = []  # (sb3 key, Flax parameter path, transposed)
    for role, n in (("actor", n_pi), ("critic", n_vf)):
        names = [f"{_PREFIXES[role]}.{2 * i}" for i in range(n)] + [_HEADS[role]]
        for i, name in enumerate(names):  # the head is the tower's last Dense, dense_n
            table.append((f"{name}.weight", f"{role}/net/dense_{i}/kernel", True))
            table.append((f"{name}.bias", f"{role}/net/dense_{i}/bias", False))
    if not discrete:
        table.append(("log_std", "actor/log_std", False))

    expected = {row[0] for row in table}
    missing = [k for k, _, _ in table if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        hint = ""
        if discrete and "log_std" in unexpected:
            hint = " (log_std with a Discrete action space: data and policy.pth disagree)"
        elif not discrete and "log_std" in missing:
            hint = " (no log_std with a Box action space: data and policy.pth disagree)"
        else:
            gaps = [k for k in unexpected if _SEQ_INDEX.match(k)]
            if gaps:
                hint = (" (Linear layers must sit at indices 0, 2, 4, ...; an activation with "
                        "parameters or a non-contiguous Sequential is not an SB3 MlpExtractor)")
        raise CheckpointError(path, member, f"state_dict keys do not match an SB3 MLP actor-critic: "
                              f"missing {missing}, unexpected {unexpected}{hint}")

    for key, _, _ in table:
        value = state[key]
        if value.dtype.kind != "f":
            raise CheckpointError(path, member, f"{key} has dtype {value.dtype}, expected floating point")
        if not np.all(np.isfinite(value)):
            n_bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
            raise CheckpointError(path, member, f"{key} has {n_bad} non-finite value(s) (NaN/inf) of "
                                  f"{np.size(value)}; the model diverged during training or the file "
                                  f"is corrupt")

    def chain(role: str, n: int) -> tuple[list, tuple[int, ...], int]:
        layers, sizes = [], []
        in_dim = None
        names = [f"{_PREFIXES[role]}.{2 * i}" for i in range(n)] + [_HEADS[role]]
        for name in names:
            w, b = state[f"{name}.weight"], state[f"{name}.bias"]
            if w.ndim != 2:
                raise CheckpointError(path, member, f"{name}.weight has shape {w.shape}, expected a "
                                      f"2-D (out, in) matrix")
            if in_dim is not None and w.shape[1] != in_dim:
                raise CheckpointError(path, member, f"{name}.weight has shape {w.shape}: its input size "
                                      f"{w.shape[1]} does not match the previous layer's output {in_dim}")
            if b.shape != (w.shape[0],):
                raise CheckpointError(path, member, f"{name}.bias has shape {b.shape}, expected "
                                      f"({w.shape[0]},) to match {name}.weight {w.shape}")
            in_dim = w.shape[0]
            sizes.append(w.shape[0])
            layers.append((np.ascontiguousarray(w.T, dtype=np.float32), b.astype(np.float32)))
        first_in = state[f"{names[0]}.weight"].shape[1]
        return layers, tuple(sizes[:-1]), first_in

    actor, pi_hidden, obs_dim = chain("actor", n_pi)
    critic, vf_hidden, obs_dim_vf = chain("critic", n_vf)
    if obs_dim != obs_dim_vf:
        raise CheckpointError(path, member, f"actor input size {obs_dim} differs from critic input "
                              f"size {obs_dim_vf}")
    if critic[-1][0].shape[1] != 1:
        raise CheckpointError(path, member, f"value_net.weight has shape {state['value_net.weight'].shape}, "
                              f"expected (1, {critic[-1][0].shape[0]})")
    act_dim = actor[-1][0].shape[1]
    log_std = None
    if not discrete:
        ls = state["log_std"]
        if ls.shape != (act_dim,):
            raise CheckpointError(path, member, f"log_std has shape {ls.shape}, expected ({act_dim},) "
                                  f"to match action_net.weight {state['action_net.weight'].shape}")
        log_std = ls.astype(np.float32)
    # torch Linear weights are (out, in), Flax Dense kernels (in, out): a transpose, no arithmetic.
    flax_params = {dest: np.ascontiguousarray(state[key].T if transposed else state[key],
                                              dtype=np.float32)
                   for key, dest, transposed in table}
    return MlpWeights(actor, critic, log_std, int(obs_dim), int(act_dim), pi_hidden, vf_hidden,
                      tuple(table), flax_params)
