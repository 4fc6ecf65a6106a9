"""How far two float32 evaluations of the same MLP policy may differ: a bound from float32's rounding.

The SB3 outputs in ``fixtures/expected.npz`` were computed by torch on the machine that recorded them;
the policies here run in JAX (XLA) on this one. Both evaluate the same float32 weights on the same
float32 observations, in float32, but in another order (blocking, vector width, FMA contraction) and
with other tanh/erf/exp approximations, so they agree only to rounding. `forward` returns the exact
outputs (float64 arithmetic on the float32 weights: its own error, ~1e-16, is negligible here) and a
bound B on the error of *any* float32 evaluation, per output; two evaluations then differ by at most
2 B. This replaces a tolerance picked by hand (``atol=1e-5``), which a faster or slower CPU may or
may not meet.

The bound (running error analysis, Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1
and 3.5): with u = EPS32 / 2 = 2^-24 the unit roundoff and gamma_n = n u / (1 - n u),

- a dense layer z = W^T h + b over fan-in n (n products and n additions, in any order, fused or
  not) computed from inputs h^ with |h^ - h| <= e errs by at most
  ``|W|^T e + gamma_(n+1) (|W|^T (|h| + e) + |b|)``;
- an activation adds its Lipschitz constant times the error of its input (1 for tanh, ReLU and
  leaky ReLU; max phi' = 1.13 for the exact GELU), plus its own float32 evaluation error,
  ``ACT_ULPS * u * (|phi(z)| + |z|)``: a few ulps for the tanh/erf approximation and the
  roundings around it (GELU's x (1 + erf(x / sqrt 2)) / 2 cancels for negative x, hence |z|);
- softmax probabilities move by at most 2 max_j |delta logit_j| (the Jacobian diag(p) - p p^T has
  rows summing to <= 2 p_i <= 2 in absolute value), plus exp, sum and division roundings
  ``(ACT_ULPS + n + 2) * u``.
"""

from __future__ import annotations

import math

import numpy as np

U = float(np.finfo(np.float32).eps) / 2  # unit roundoff of float32, 2^-24
#: roundings allowed per activation or exp: 4 ulp (= 8 u) for the approximation of tanh / erf / exp
#: and the few multiplications and additions around it (XLA's and torch's are accurate to 1-3 ulp)
ACT_ULPS = 8

_ERF = np.vectorize(math.erf, otypes=[np.float64])
ACTIVATIONS = {  # exact form (float64) and Lipschitz constant
    "tanh": (np.tanh, 1.0),
    "relu": (lambda z: np.maximum(z, 0.0), 1.0),
    "leaky_relu": (lambda z: np.where(z >= 0, z, 0.01 * z), 1.0),
    "gelu": (lambda z: 0.5 * z * (1.0 + _ERF(z / math.sqrt(2.0))), 1.13),
}


def _gamma(n: int) -> float:
    return n * U / (1 - n * U)


def forward(net: dict, obs: np.ndarray, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """Exact outputs of a ``dense_0 .. dense_L`` tower and the float32 error bound per output.

    Args:
        net: ``{"dense_i": {"kernel": (in, out), "bias": (out,)}}`` (jaxrl-agents' MLP layout).
        obs: (B, in) float32 observations (exactly representable: no input rounding).
        activation: a key of `ACTIVATIONS`, applied after every layer but the last.

    Returns:
        (exact (B, out) float64, bound (B, out) float64).
    """
    phi, lipschitz = ACTIVATIONS[activation]
    h = np.asarray(obs, np.float64)
    err = np.zeros_like(h)
    n_layers = len(net)
    for i in range(n_layers):
        w = np.asarray(net[f"dense_{i}"]["kernel"], np.float64)
        b = np.asarray(net[f"dense_{i}"]["bias"], np.float64)
        z = h @ w + b
        err = err @ np.abs(w) + _gamma(w.shape[0] + 1) * ((np.abs(h) + err) @ np.abs(w) + np.abs(b))
        if i < n_layers - 1:
            h = phi(z)
            err = lipschitz * err + ACT_ULPS * U * (np.abs(h) + np.abs(z) + lipschitz * err)
        else:
            h = z
    return h, err


def softmax(logits: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact probabilities from exact logits, and their bound from the logits' bound ``err``."""
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    n = logits.shape[-1]
    return p, 2 * err.max(axis=-1, keepdims=True) + (ACT_ULPS + n + 2) * U * np.ones_like(p)


def policy_outputs(policy, obs: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(exact, bound) of a default-tower policy's outputs for observations ``obs`` (B, obs_dim).

    Keys: ``mode`` (B, A) the Gaussian mean, or ``logits`` and ``probs`` (B, n) for a categorical
    policy; ``values`` (B,).
    """
    act = policy.model.activation
    out = {}
    head, head_err = forward(policy.params["actor"]["net"], obs, act)
    if policy.model.is_discrete:
        out["logits"] = (head, head_err)
        out["probs"] = softmax(head, head_err)
    else:
        out["mode"] = (head, head_err)
    value, value_err = forward(policy.params["critic"]["net"], obs, act)
    out["values"] = (value[:, 0], value_err[:, 0])
    return out


def assert_within(got, want, bound, what: str, n_evaluations: int = 2) -> None:
    """|got - want| <= n_evaluations * bound elementwise (2: both sides are float32 evaluations)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    limit = n_evaluations * np.broadcast_to(bound, want.shape)
    err = np.abs(got - want)
    bad = ~(err <= limit)  # NaN fails too
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} outputs differ by more than "
                           f"{n_evaluations} x their float32 rounding bound (worst {err[bad].max():.3g} "
                           f"against {limit[bad][np.argmax(err[bad])]:.3g})")


def decided_argmax(logits: np.ndarray, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact arg-max per row, and where every float32 evaluation must find it.

    An evaluation can pick another action only where the top two exact logits lie closer than
    their two bounds together (each moves by at most its bound). Returns (argmax (B,), decided (B,)
    bool).
    """
    order = np.argsort(logits, axis=-1)
    rows = np.arange(len(logits))
    top, second = order[:, -1], order[:, -2]
    gap = logits[rows, top] - logits[rows, second]
    return top, gap > bound[rows, top] + bound[rows, second]
