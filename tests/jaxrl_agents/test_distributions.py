"""Action distributions against scipy and sampling with masks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxrl_agents.common import distributions as D


def test_gaussian_logp_entropy_kl_match_scipy():
    rng = np.random.default_rng(0)
    mean, log_std, x = rng.normal(size=(3, 5, 4)).astype(np.float32)
    log_std = 0.5 * log_std
    ref_logp = stats.norm.logpdf(x, mean, np.exp(log_std)).sum(-1)
    np.testing.assert_allclose(D.gaussian_logp(mean, log_std, x), ref_logp, rtol=1e-5)
    ref_ent = stats.norm.entropy(mean, np.exp(log_std)).sum(-1)
    np.testing.assert_allclose(D.gaussian_entropy(log_std), ref_ent, rtol=1e-5)

    # KL(p||q) by numerical integration of p log(p/q), one dimension at a time.
    mean_q, log_std_q = rng.normal(size=(2, 4)).astype(np.float32)
    ref_kl = 0.0
    for d in range(4):
        p = stats.norm(mean[0, d], np.exp(log_std[0, d]))
        q = stats.norm(mean_q[d], np.exp(0.5 * log_std_q[d]))
        grid = np.linspace(p.ppf(1e-9), p.ppf(1 - 1e-9), 200001)
        ref_kl += np.trapezoid(p.pdf(grid) * (p.logpdf(grid) - q.logpdf(grid)), grid)
    kl = D.gaussian_kl(mean[0], log_std[0], mean_q, 0.5 * log_std_q)
    np.testing.assert_allclose(kl, ref_kl, rtol=1e-4)
    assert float(D.gaussian_kl(mean[0], log_std[0], mean[0], log_std[0])) == pytest.approx(0, abs=1e-6)


def test_categorical_logp_entropy_kl_match_scipy():
    logits = np.array([[0.3, -1.0, 2.0, 0.0]], np.float32)
    p = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(D.categorical_logp(logits, jnp.array([2])), np.log(p[0, 2]), rtol=1e-6)
    np.testing.assert_allclose(D.categorical_entropy(logits), stats.entropy(p[0]), rtol=1e-6)
    q_logits = np.array([[0.0, 0.0, 0.0, 1.0]], np.float32)
    q = np.exp(q_logits) / np.exp(q_logits).sum()
    np.testing.assert_allclose(D.categorical_kl(logits, q_logits), stats.entropy(p[0], q[0]),
                               rtol=1e-5)


def test_masked_categorical_never_samples_masked_actions():
    # The masked action has by far the largest logit: only the mask keeps it out.
    logits = jnp.array([0.0, 10.0, 0.0, 0.5])
    mask = jnp.array([True, False, True, True])
    head = D.Categorical(4)
    dist = head.params_from_head(jnp.broadcast_to(logits, (20000, 4)), mask=mask)
    samples = np.asarray(head.sample(jax.random.PRNGKey(0), dist))
    assert not np.any(samples == 1)
    assert set(np.unique(samples)) == {0, 2, 3}
    probs = head.probs(dist)[0]
    assert float(probs[1]) == 0.0
    # Entropy ignores the masked action: that of the renormalised 3-way distribution.
    p = np.exp([0.0, 0.0, 0.5]) / np.exp([0.0, 0.0, 0.5]).sum()
    np.testing.assert_allclose(head.entropy(dist)[0], stats.entropy(p), rtol=1e-5)
    assert int(head.mode(dist)[0]) == 3


def test_multi_categorical_sums_components_and_respects_masks():
    head = D.MultiCategorical((3, 2))
    logits = jnp.array([[1.0, 2.0, 3.0, -1.0, 1.0]])
    mask = jnp.array([[True, True, False, True, False]])
    dist = head.params_from_head(logits, mask=mask)
    action = jnp.array([[1, 0]])
    expected = np.log(np.exp(2) / (np.exp(1) + np.exp(2))) + 0.0  # second component forced to 0
    np.testing.assert_allclose(head.logp(dist, action), [expected], rtol=1e-5)
    samples = head.sample(jax.random.PRNGKey(1), jax.tree_util.tree_map(
        lambda x: jnp.broadcast_to(x, (5000, 5)), dist))
    assert samples.shape == (5000, 2)
    assert not np.any(np.asarray(samples[:, 0]) == 2) and np.all(np.asarray(samples[:, 1]) == 0)
