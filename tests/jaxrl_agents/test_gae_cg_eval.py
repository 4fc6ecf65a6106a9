"""GAE by hand, conjugate gradient on an SPD system, the evaluation summary by hand."""

import math

import jax.numpy as jnp
import numpy as np

from jaxrl_agents.common.cg import conjugate_gradient
from jaxrl_agents.common.evaluation import eval_summary, format_eval_line, score_to_minimise
from jaxrl_agents.common.gae import gae


def test_gae_by_hand_cuts_at_episode_ends():
    g, lam = 0.9, 0.5
    # One environment, 4 steps; the episode ends at t=1 (done), a new one starts at t=2.
    r = jnp.array([[1.0], [2.0], [0.5], [-1.0]])
    v = jnp.array([[0.5], [1.0], [0.2], [0.4]])
    d = jnp.array([[False], [True], [False], [False]])
    last = jnp.array([3.0])
    adv, ret = gae(r, v, d, last, g, lam)
    d3 = -1.0 + g * 3.0 - 0.4
    d2 = 0.5 + g * 0.4 - 0.2
    d1 = 2.0 - 1.0  # done: no bootstrap from the next episode's value
    d0 = 1.0 + g * 1.0 - 0.5
    a3 = d3
    a2 = d2 + g * lam * a3
    a1 = d1  # the trace is cut too
    a0 = d0 + g * lam * a1
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2, a3], rtol=1e-6)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-6)


def test_truncation_bootstraps_through_the_reward_termination_does_not():
    """rollout.collect adds gamma V(final_obs) to the reward of a truncated step; with that reward
    GAE gives the same advantage as an uncut episode whose next value is V(final_obs)."""
    g, lam, v_final = 0.99, 0.95, 5.0
    r, v = 1.0, 2.0
    truncated_reward = r + g * v_final  # what collect stores for a truncation
    adv_trunc, _ = gae(jnp.array([[truncated_reward]]), jnp.array([[v]]), jnp.array([[True]]),
                       jnp.array([123.0]), g, lam)
    adv_open, _ = gae(jnp.array([[r]]), jnp.array([[v]]), jnp.array([[False]]),
                      jnp.array([v_final]), g, lam)
    adv_term, _ = gae(jnp.array([[r]]), jnp.array([[v]]), jnp.array([[True]]),
                      jnp.array([123.0]), g, lam)
    np.testing.assert_allclose(adv_trunc, adv_open, rtol=1e-6)
    np.testing.assert_allclose(adv_term, [[r - v]], rtol=1e-6)


def test_collect_bootstraps_truncated_not_terminated(x64):
    """Reach(horizon=2, bound=1): episodes starting near the edge leave the box at once (truncated),
    the others end at t = 2 (terminated). Only truncations get + gamma V(final_obs)."""
    import jax

    from jaxrl_agents import ActorCritic
    from jaxrl_agents.common.rollout import collect

    from .toy_envs import Reach

    env, gamma = Reach(horizon=2, bound=1.0), 0.5
    model = ActorCritic.from_spaces(env.observation_space, env.action_space, (8,))
    params = model.init(jax.random.PRNGKey(0))
    params["critic"]["net"]["dense_1"]["bias"] = jnp.array([7.0], jnp.float32)  # V ~ 7
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(1), 64),
                                                        env.default_params)
    _, traj = jax.jit(collect, static_argnums=(0, 1, 7))(
        model, env, env.default_params, params, state, obs, jax.random.PRNGKey(2), 4, gamma)
    extra = np.asarray(traj.reward + traj.info["JT"])  # what was added to the raw reward -JT
    terminated = np.asarray(traj.info["t"]) == env.horizon * env.dt
    truncated = np.asarray(traj.info["oob"]) & ~terminated
    assert truncated.sum() > 5 and terminated.sum() > 5
    np.testing.assert_array_equal(np.asarray(traj.done), truncated | terminated)
    assert np.all(extra[truncated] > gamma * 6.0)  # gamma * V(final_obs), V ~ 7
    np.testing.assert_allclose(extra[~truncated], 0.0, atol=1e-6)


def test_conjugate_gradient_solves_spd_system(x64):
    # float64 so the check is about the algorithm, not float32 round-off.
    rng = np.random.default_rng(0)
    m = rng.normal(size=(12, 12))
    a = m @ m.T + 0.5 * np.eye(12)
    b = rng.normal(size=12)
    x = conjugate_gradient(lambda v: jnp.asarray(a) @ v, jnp.asarray(b), max_iter=40)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-7, atol=1e-9)
    # Exact in n steps in exact arithmetic; with 3 iterations it is only approximate.
    x3 = conjugate_gradient(lambda v: jnp.asarray(a) @ v, jnp.asarray(b), max_iter=3)
    assert np.linalg.norm(a @ np.asarray(x3) - b) > 1e-3
    # Already converged (b = 0): no NaN from 0/0.
    x0 = conjugate_gradient(lambda v: jnp.asarray(a) @ v, jnp.zeros(12), max_iter=5)
    np.testing.assert_array_equal(x0, np.zeros(12))


class _Distance:
    """A made-up evaluation description: the closest distance and when it happened."""

    score, score_mode, plots = "closest", "min", {}

    def summarise(self, episode):
        alive = np.flatnonzero(episode["alive"])
        best = alive[int(np.argmin(episode["dist"][alive]))]
        return {"closest": float(episode["dist"][best]), "t_closest": float(best)}

    def format(self, summary):
        return f"closest={summary['closest']:.2f}@{summary['t_closest']:.0f}"


def test_eval_summary_by_hand():
    ep = {"reward": np.array([1.0, 2.0, 3.0, 100.0]),
          "alive": np.array([True, True, True, False]),
          "dist": np.array([0.5, 0.1, 0.2, 0.0])}  # the 0.0 is after the end: ignored
    s = eval_summary(ep, _Distance())
    assert s == {"eval_return": 6.0, "eval_len": 3, "eval_closest": 0.1, "eval_t_closest": 1.0}
    assert score_to_minimise(s, "closest", "min") == 0.1
    assert score_to_minimise(s, "return", "max") == -6.0
    assert math.isnan(score_to_minimise({}, "closest", "min"))
    line = format_eval_line(8192, 1.0, s, _Distance())
    assert line.endswith("R=    6.000  closest=0.10@1")
    # An env that describes nothing: return and length only, and the line stops after R=.
    assert eval_summary(ep) == {"eval_return": 6.0, "eval_len": 3}
    assert format_eval_line(8192, 1.0, s).endswith("R=    6.000")
