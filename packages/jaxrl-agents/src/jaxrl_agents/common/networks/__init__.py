"""Actor-critic networks as Flax linen modules, the default towers and user-supplied ones.

`ActorCritic` is a frozen, hashable *definition* (a static `jit` argument) that holds two linen
modules, the actor tower (observations -> distribution-head outputs) and the critic tower
(observations -> one value), and puts the action distribution on top (`distributions.py`).

The default towers (`MLP`, defined with its activations and initialisation in `mlp.py`) mirror
Stable-Baselines3's ``ActorCriticPolicy`` as the paper used it: separate policy and value MLPs (no
shared trunk), orthogonal initialisation with gain sqrt(2) for hidden layers, 0.01 for the policy
head and 1 for the value head, zero biases, and for continuous actions a state-independent log-std
initialised at 0 (std 1). A user replaces both towers with a
factory ``factory(obs_dim, n_outputs, **options) -> (actor_module, critic_module)``, named
``"module:factory"`` (`ActorCritic(network=...)`, ``jaxrl-train --network``); the log-std, masks
and distributions stay the definition's.

Parameter pytree (``L = len(hidden)``; kernels are ``(in, out)``, i.e. ``y = x @ kernel + bias``)::

    {"actor":  {"net": {"dense_0": {"kernel": (obs_dim, h0), "bias": (h0,)},
                        ...,
                        "dense_L": {"kernel": (h_{L-1}, n_outputs), "bias": (n_outputs,)}},
                "log_std": (action_dim,)},          # Gaussian heads only
     "critic": {"net": {"dense_0": ..., "dense_L": {"kernel": (h_{L-1}, 1), "bias": (1,)}}}}

``actor/net`` and ``critic/net`` are the towers' Flax ``"params"`` collections; for a user network
they have whatever layout its modules define.

Parameters are float32 whatever the global precision: the environment may run in float64 (the trainer
enables x64), the networks never do; observations are cast to float32 on entry.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ..distributions import Categorical, DiagGaussian, MultiCategorical
from ..envs.factories import import_factory
from .mlp import (
    ACTIVATIONS,
    HIDDEN_GAIN,
    MLP,
    POLICY_HEAD_GAIN,
    VALUE_HEAD_GAIN,
    Params,
    mlp_apply,
    mlp_init,
    orthogonal,
)

# The MLP pieces are re-exported from mlp.py, where they are defined: importing them from here
# keeps working.
__all__ = ["ACTIVATIONS", "ACTION_KINDS", "ActorCritic", "MLP", "mlp_init", "mlp_apply", "orthogonal",
           "resolve_network", "network_spec", "HIDDEN_GAIN", "POLICY_HEAD_GAIN", "VALUE_HEAD_GAIN",
           "as_float32", "freeze_json"]

ACTION_KINDS = ("gaussian", "categorical", "multi_categorical")


# ---------------------------------------------------------------------------- user networks
NetworkFactory = Callable[..., Any]


def network_spec(network: str | NetworkFactory) -> str:
    """The ``"module:factory"`` name of a network factory (a name, or the callable itself).

    Raises:
        ValueError: naming ``network`` when it is neither, or the callable cannot be re-imported by
            that name (a lambda, a local function): saved policies rebuild the network by name.
    """
    if isinstance(network, str):
        resolve_network(network)
        return network
    if not callable(network):
        raise ValueError(f"network: expected 'module:factory' or a factory callable, got "
                         f"{network!r} ({type(network).__name__})")
    spec = f"{getattr(network, '__module__', None)}:{getattr(network, '__qualname__', None)}"
    try:
        found = resolve_network(spec)
    except ValueError:
        found = None
    if found is not network:
        raise ValueError(f"network: the factory {network!r} cannot be imported back by name "
                         f"(tried {spec!r}); define it at the top level of an importable module "
                         f"so saved policies can rebuild it")
    return spec


def resolve_network(spec: str) -> NetworkFactory:
    """Import the factory named ``"module:factory"`` (dots after the colon reach attributes).

    Raises:
        ValueError: naming ``network``: malformed spec, missing module, missing or non-callable
            factory.
    """
    return import_factory(spec, "network", "mypkg.nets:make")


def as_float32(tree: Mapping) -> dict:
    """A copy of parameter dict `tree` with every leaf a float32 array."""
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), dict(tree))


def _describe(x) -> str:
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__} of {[type(v).__name__ for v in x]}"
    return f"{type(x).__name__} {getattr(x, 'shape', '')}".strip()


def freeze_json(value):
    """Hashable form of a JSON option value: lists become tuples (recursively)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze_json(v) for v in value)
    return value


def _thaw(value):
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class ActorCritic:
    """Definition of an actor-critic network (hashable, so it can be a static `jit` argument).

    Attributes:
        obs_dim: length of the flat observation vector.
        action_kind: "gaussian" (Box actions), "categorical" (Discrete) or "multi_categorical"
            (MultiDiscrete).
        action_shape: (action_dim,) for "gaussian", (n,) for "categorical", nvec for
            "multi_categorical".
        hidden: hidden layer widths of the actor, and of the critic unless `critic_hidden` is
            given (default towers only).
        activation: one of `ACTIVATIONS` (default towers only).
        network: None for the default towers, or ``"module:factory"`` naming
            ``factory(obs_dim, n_outputs, **network_options) -> (actor, critic)``: two linen
            modules, the actor mapping (B..., obs_dim) to (B..., n_outputs) head outputs
            (Gaussian means or logits), the critic (B..., obs_dim) to (B..., 1) values, both with a
            ``"params"`` collection only. A factory callable is accepted and stored by name.
        network_options: keyword options of the factory (JSON values; a dict or (key, value)
            pairs, stored as sorted pairs with lists as tuples so the definition stays hashable).
        critic_hidden: hidden layer widths of the critic when they differ from the actor's (SB3's
            ``net_arch=dict(pi=..., vf=...)``); None: the critic has `hidden` (default towers only).

    Raises:
        ValueError: naming the field, before anything is compiled; for a user network also when
            the factory fails, returns something else than two linen modules, or their outputs do
            not have the shapes above (checked by abstract evaluation).
    """

    obs_dim: int
    action_kind: str
    action_shape: tuple[int, ...]
    hidden: tuple[int, ...] = (128, 128)
    activation: str = "tanh"
    network: str | None = None
    network_options: tuple = ()
    critic_hidden: tuple[int, ...] | None = None
    actor: nn.Module = dataclasses.field(init=False, repr=False, compare=False)
    critic: nn.Module = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "action_shape", tuple(int(a) for a in self.action_shape))
        if not isinstance(self.obs_dim, (int, np.integer)) or self.obs_dim <= 0:
            raise ValueError(f"obs_dim: expected a positive int, got {self.obs_dim!r}")
        object.__setattr__(self, "obs_dim", int(self.obs_dim))
        if self.action_kind not in ACTION_KINDS:
            raise ValueError(f"action_kind: expected one of {ACTION_KINDS}, got {self.action_kind!r}")
        if not self.action_shape or any(a <= 0 for a in self.action_shape):
            raise ValueError(f"action_shape: expected positive sizes, got {self.action_shape!r}")
        if self.action_kind in ("gaussian", "categorical") and len(self.action_shape) != 1:
            raise ValueError(
                f"action_shape: {self.action_kind} expects one entry, got {self.action_shape!r}")
        if not self.hidden or any(h <= 0 for h in self.hidden):
            raise ValueError(f"hidden: expected positive layer widths, got {self.hidden!r}")
        if self.critic_hidden is not None:
            widths = tuple(int(h) for h in self.critic_hidden)
            if not widths or any(h <= 0 for h in widths):
                raise ValueError(f"critic_hidden: expected positive layer widths or None, got "
                                 f"{self.critic_hidden!r}")
            # The same widths as the actor's are the shared-width network: one definition of it.
            object.__setattr__(self, "critic_hidden", None if widths == self.hidden else widths)
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation: expected one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        options = self.network_options
        if isinstance(options, dict):
            options = options.items()
        try:
            options = tuple(sorted((str(k), freeze_json(v)) for k, v in options))
        except (TypeError, ValueError) as e:
            raise ValueError(f"network_options: expected a dict of keyword options, got "
                             f"{self.network_options!r}") from e
        object.__setattr__(self, "network_options", options)
        if self.network is None:
            if options:
                raise ValueError(f"network_options: only a user network takes options; got "
                                 f"{dict(options)} with network=None")
            actor = MLP((*self.hidden, self.head.n_outputs), self.activation, POLICY_HEAD_GAIN)
            critic = MLP((*self.critic_widths, 1), self.activation, VALUE_HEAD_GAIN)
        else:
            if self.critic_hidden is not None:
                raise ValueError(f"critic_hidden: only the default towers take it; a user network "
                                 f"({self.network}) builds its own critic, got {self.critic_hidden}")
            object.__setattr__(self, "network", network_spec(self.network))
            actor, critic = self._build_user_towers()
        object.__setattr__(self, "actor", actor)
        object.__setattr__(self, "critic", critic)

    def _build_user_towers(self):
        factory = resolve_network(self.network)
        options = dict(self.network_options)
        try:
            built = factory(self.obs_dim, self.head.n_outputs, **options)
        except TypeError as e:
            raise ValueError(f"network: {self.network}(obs_dim, n_outputs, **{options}) failed: "
                             f"{e}") from e
        if isinstance(built, dict) and set(built) == {"actor", "critic"}:
            built = (built["actor"], built["critic"])
        if (not isinstance(built, (tuple, list)) or len(built) != 2
                or not all(isinstance(m, nn.Module) for m in built)):
            raise ValueError(f"network: {self.network} must return (actor, critic), two "
                             f"flax.linen Modules; got {_describe(built)}")
        obs = jax.ShapeDtypeStruct((2, self.obs_dim), jnp.float32)
        for role, module, want in (("actor", built[0], (2, self.head.n_outputs)),
                                   ("critic", built[1], (2, 1))):
            try:
                out, variables = jax.eval_shape(module.init_with_output, jax.random.PRNGKey(0), obs)
            except Exception as e:  # noqa: BLE001 (any failure of user code, reported by name)
                raise ValueError(f"network: the {role} module of {self.network} fails on "
                                 f"observations of shape (batch, {self.obs_dim}): "
                                 f"{type(e).__name__}: {e}") from e
            if set(variables) != {"params"}:
                raise ValueError(f"network: the {role} module of {self.network} must have a "
                                 f"'params' collection only (stateless, e.g. LayerNorm, not "
                                 f"BatchNorm); got collections {sorted(variables)}")
            if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != want:
                got = out.shape if isinstance(out, jax.ShapeDtypeStruct) else _describe(out)
                what = ("head outputs (batch, n_outputs) for the "
                        f"{self.action_kind} head" if role == "actor" else "values (batch, 1)")
                raise ValueError(f"network: the {role} module of {self.network} must map "
                                 f"(batch, obs_dim) = (2, {self.obs_dim}) to {what}, expected "
                                 f"{want}, got {got}")
        return tuple(built)

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_spaces(cls, observation_space, action_space, hidden=(128, 128), activation="tanh",
                    network=None, network_options=(), critic_hidden=None):
        """Build the network definition for gymnasium spaces.

        Observations are 1-D Box; actions Box, Discrete or MultiDiscrete. `network`,
        `network_options` and `critic_hidden` are as the fields.
        """
        from gymnasium import spaces

        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(
                "observation_space: expected a 1-D gymnasium.spaces.Box, got "
                f"{observation_space!r}; flatten observations in the environment")
        obs_dim = observation_space.shape[0]
        if isinstance(action_space, spaces.Box):
            if len(action_space.shape) != 1:
                raise ValueError(f"action_space: expected a 1-D Box, got {action_space!r}")
            kind, shape = "gaussian", action_space.shape
        elif isinstance(action_space, spaces.Discrete):
            kind, shape = "categorical", (int(action_space.n),)
        elif isinstance(action_space, spaces.MultiDiscrete):
            kind, shape = "multi_categorical", tuple(action_space.nvec.ravel())
        else:
            raise ValueError(
                "action_space: expected gymnasium Box, Discrete or MultiDiscrete, got "
                f"{type(action_space).__name__}")
        return cls(obs_dim, kind, shape, hidden, activation, network, network_options,
                   critic_hidden)

    def to_dict(self) -> dict:
        """JSON-serialisable description; ``ActorCritic(**d)`` rebuilds it.

        The default towers give the fields written before networks were Flax modules (so old and
        new policy files of the default network are alike); a user network gives its
        ``"module:factory"`` and options instead of hidden/activation.
        """
        d = {"obs_dim": self.obs_dim, "action_kind": self.action_kind,
             "action_shape": list(self.action_shape)}
        if self.network is None:
            d = {**d, "hidden": list(self.hidden), "activation": self.activation}
            # Only written when it differs, so shared-width policy files stay as they were.
            return d if self.critic_hidden is None else {**d, "critic_hidden": list(self.critic_hidden)}
        return {**d, "network": self.network,
                "network_options": {k: _thaw(v) for k, v in self.network_options}}

    @property
    def critic_widths(self) -> tuple[int, ...]:
        """The critic's hidden layer widths (default towers): `critic_hidden` or `hidden`."""
        return self.hidden if self.critic_hidden is None else self.critic_hidden

    @property
    def head(self):
        """The distribution head (`DiagGaussian`, `Categorical` or `MultiCategorical`)."""
        if self.action_kind == "gaussian":
            return DiagGaussian(self.action_shape[0])
        if self.action_kind == "categorical":
            return Categorical(self.action_shape[0])
        return MultiCategorical(self.action_shape)

    @property
    def is_discrete(self) -> bool:
        """Whether the actions are discrete (a categorical or multi-categorical head)."""
        return self.action_kind != "gaussian"

    # ------------------------------------------------------------------------------ params
    def param_shapes(self) -> Params:
        """The parameter pytree with shapes (tuples) as leaves, without drawing anything.

        Traced once per definition and cached (a fresh copy is returned): every `Policy` checks
        its parameters against it, and the trainer builds one per evaluation, where tracing the
        two towers' ``init`` cost ~30 ms, about a tenth of a PPO update.
        """
        return copy.deepcopy(_param_shapes(self))

    def init(self, key: jax.Array) -> Params:
        """Fresh float32 parameters ``{"actor": ..., "critic": ...}`` (layout in the module doc).

        The key is split into (actor, critic). The default towers are filled by `mlp_init` (the
        pre-Flax key schedule and host QR: bit-identical to earlier releases for the same key);
        user towers by their own ``module.init``. Runs eagerly (the host QR), so call it outside
        `jit`/`vmap`.
        """
        k_actor, k_critic = jax.random.split(key)
        if self.network is None:
            actor_net = mlp_init(k_actor, (self.obs_dim, *self.hidden, self.head.n_outputs),
                                 POLICY_HEAD_GAIN)
            critic_net = mlp_init(k_critic, (self.obs_dim, *self.critic_widths, 1), VALUE_HEAD_GAIN)
        else:
            obs = jnp.zeros((1, self.obs_dim), jnp.float32)
            actor_net = as_float32(self.actor.init(k_actor, obs)["params"])
            critic_net = as_float32(self.critic.init(k_critic, obs)["params"])
        actor = {"net": actor_net}
        if self.action_kind == "gaussian":
            actor["log_std"] = jnp.zeros((self.action_shape[0],), jnp.float32)
        return {"actor": actor, "critic": {"net": critic_net}}

    # ----------------------------------------------------------------------------- forward
    def dist(self, actor_params: Params, obs: jax.Array, mask: jax.Array | None = None) -> dict:
        """Distribution parameters for observations (B..., obs_dim).

        Args:
            actor_params: ``params["actor"]``.
            obs: (B..., obs_dim), any float dtype (cast to float32).
            mask: discrete heads only, boolean (B..., n_outputs), True = allowed.

        Returns:
            ``{"mean", "log_std"}`` (B..., A) for Gaussian heads, ``{"logits"}`` (B..., N) otherwise.
        """
        out = self.actor.apply({"params": actor_params["net"]}, obs.astype(jnp.float32))
        return self.head.params_from_head(out, actor_params.get("log_std"), mask)

    def value(self, critic_params: Params, obs: jax.Array) -> jax.Array:
        """State values V(obs): (B..., obs_dim) -> (B...,) float32."""
        return self.critic.apply({"params": critic_params["net"]}, obs.astype(jnp.float32))[..., 0]

    def sample(self, actor_params, obs, key, mask=None):
        """Sample actions and their log-probabilities: returns ((B..., *action), (B...,))."""
        d = self.dist(actor_params, obs, mask)
        action = self.head.sample(key, d)
        return action, self.head.logp(d, action)

    def mode(self, actor_params, obs, mask=None):
        """Deterministic actions: Gaussian mean or most likely choice(s)."""
        return self.head.mode(self.dist(actor_params, obs, mask))

    def logp(self, dist, action):
        """Log-probability of `action` under distribution parameters `dist`: (B...,)."""
        return self.head.logp(dist, action)

    def entropy(self, dist):
        """Entropy of `dist`: (B...,)."""
        return self.head.entropy(dist)

    def kl(self, dist_p, dist_q):
        """KL(p || q): (B...,)."""
        return self.head.kl(dist_p, dist_q)


@functools.lru_cache(maxsize=64)
def _param_shapes(model: ActorCritic) -> Params:
    """`ActorCritic.param_shapes`, computed by abstract evaluation (keyed on the definition)."""
    obs = jax.ShapeDtypeStruct((1, model.obs_dim), jnp.float32)

    def net(module):
        variables = jax.eval_shape(module.init, jax.random.PRNGKey(0), obs)
        return jax.tree_util.tree_map(lambda x: tuple(x.shape), dict(variables["params"]))

    actor = {"net": net(model.actor)}
    if model.action_kind == "gaussian":
        actor["log_std"] = (model.action_shape[0],)
    return {"actor": actor, "critic": {"net": net(model.critic)}}
