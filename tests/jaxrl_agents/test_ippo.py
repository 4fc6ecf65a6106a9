"""IPPO / IPPO-Lagrangian on PettingZoo ParallelEnvs: validation, spaces, masks, GAE, reproducibility,
episode handling, annealing count, dual-update lifecycle.

Every training call uses the same tiny config (TINY) so the compiled updates are shared across tests.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pettingzoo import ParallelEnv

from jaxrl_agents import Policy
from jaxrl_agents.common.gae import gae_next_values
from jaxrl_agents.ippo import IPPO, check_budget
from jaxrl_agents.ippo.config import IPPOConfig, validate_ippo_config
from jaxrl_agents.ippo import IPPO_Lagrangian
from jaxrl_agents.ippo.losses import dual_step, lagrangian_advantage
from jaxrl_agents.ippo.learn import minibatch_count, steps_per_update
from jaxrl_agents.common.state import stack_trees
from jaxrl_agents.ippo.agent_axis import group_agents
from jaxrl_agents.ippo.rollout import ActionRewriteError, ParallelRunner
from jaxrl_agents.ippo.spaces import AgentSpaces, MARLPolicy

from .marl_toy_envs import CostStreamEnv, RiskyCore, SpacesEnv

# 8-step rollouts split into 3 requested minibatches: 8 is not divisible by 3, so every update
# exercises the reduced minibatch count (2).
TINY = {"n_steps": 8, "n_epochs": 2, "n_minibatches": 3, "hidden": (8,), "lr": 1e-3}


# ------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad, match", [
    ({"nope": 1}, "unknown keys"),
    ({"lr": float("nan")}, "lr"),
    ({"lr": float("inf")}, "finite"),
    ({"lr": -1e-3}, "lr"),
    ({"gamma": 1.5}, "gamma"),
    ({"clip_eps": 0}, "clip_eps"),
    ({"n_steps": 0}, "n_steps"),
    ({"n_minibatches": -2}, "n_minibatches"),
    ({"n_epochs": 2.5}, "n_epochs"),
    ({"activation": "swish"}, "activation"),
    ({"hidden": (64, 0)}, "hidden"),
    ({"hidden": "64"}, "hidden"),
    ({"hidden": (64, 1.5)}, "hidden"),
    ({"anneal_lr": "yes"}, "anneal_lr"),
])
def test_validate_ippo_config_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        validate_ippo_config(bad)
    with pytest.raises(ValueError, match=match):
        IPPO(bad)


@pytest.mark.parametrize("bad, match", [
    ({"cost_limit": float("inf")}, "finite"),
    ({"lambda_min": 2.0, "lambda_max": 1.0}, "lambda_min"),
    ({"lagrangian_init": 5.0, "lambda_max": 1.0}, "lagrangian_init"),
    ({"lagrangian_lr": 0.0}, "lagrangian_lr"),
])
def test_validate_lagrangian_config_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        validate_ippo_config(bad, lagrangian=True)
    with pytest.raises(ValueError, match="unknown keys"):
        validate_ippo_config({"cost_limit": 1.0})  # a Lagrangian key is unknown to plain IPPO


def test_validate_ippo_config_defaults_and_overrides():
    cfg = validate_ippo_config({"lr": 1e-3, "hidden": [32]})
    assert isinstance(cfg, IPPOConfig) and cfg.lr == 1e-3 and cfg.hidden == (32,)
    assert validate_ippo_config(None).n_steps == 128
    lag = validate_ippo_config({"cost_limit": 3}, lagrangian=True)
    assert lag.cost_limit == 3.0 and lag.lagrangian_init == 0.0


@pytest.mark.parametrize("budget", [0, -5, 10.0, True, "100", None])
def test_budget_must_be_a_positive_integer(budget):
    with pytest.raises(ValueError, match="timesteps"):
        check_budget(budget)
    with pytest.raises(ValueError, match="timesteps"):
        IPPO(TINY).train(SpacesEnv(), budget)


class _Dup(ParallelEnv):
    possible_agents = ["a", "a"]


class _NoAgents(ParallelEnv):
    possible_agents = []


@pytest.mark.parametrize("env, match", [
    (object(), "ParallelEnv"),
    (_Dup(), "unique"),
    (_NoAgents(), "at least one"),
    (RiskyCore(), r"got RiskyCore; a functional multi-agent core .* jaxrl_agents.train\('ippo'"),
])
def test_env_must_be_a_parallel_env_with_unique_agents(env, match):
    with pytest.raises(ValueError, match=match):
        IPPO(TINY).train(env, 8)


def test_parallel_env_needs_one_environment():
    with pytest.raises(ValueError, match="n_envs: expected 1 .* got 4; .*jaxrl-train --algo ippo"):
        IPPO({**TINY, "n_envs": 4}).train(SpacesEnv(), 8)


# --------------------------------------------------------------------------------- action spaces
@pytest.fixture(scope="module")
def spaces_run():
    env = SpacesEnv(mask_source="info")
    calls = []
    result = IPPO(TINY, seed=0).train(env, 16, progress_callback=lambda s, t: calls.append((s, t)))
    return env, result, calls


def test_actions_reach_the_env_in_its_own_format(spaces_run):
    env, result, _ = spaces_run
    assert len(env.received) == 16  # every step checked against the space inside SpacesEnv.step
    disc = np.array([r["disc"] for r in env.received])
    multi = np.array([r["multi"] for r in env.received])
    box = np.array([r["box"] for r in env.received])
    assert set(disc.tolist()) <= {0, 1}  # start=-1 translated; -1 is masked
    assert multi.shape == (16, 2, 2) and box.shape == (16, 2, 2)
    starts = np.array([[1, 1], [5, 5]])
    nvec = np.array([[2, 3], [3, 2]])
    assert np.all(multi >= starts) and np.all(multi < starts + nvec)
    assert np.all(multi[:, 0, 0] == 1)  # masked choice (index 1 -> env 2) never executed
    assert np.all(np.abs(box) <= 1.0)
    assert len(set(map(tuple, multi.reshape(16, -1)))) > 1  # actually sampled, not constant


def test_result_policies_are_policies_in_env_format(spaces_run, tmp_path):
    env, result, _ = spaces_run
    assert set(result.policies) == {"disc", "multi", "box"}
    env.reset()
    obs = env._observe()
    for agent, pol in result.policies.items():
        assert isinstance(pol, Policy)
        a = pol.act(obs[agent])
        assert env.action_space(agent).contains(np.asarray(a, env.action_space(agent).dtype))
        np.testing.assert_array_equal(a, pol.act(obs[agent]))  # deterministic without rng
    multi = result.policies["multi"]
    draws = {tuple(multi.act(obs["multi"], jax.random.PRNGKey(k)).ravel()) for k in range(20)}
    assert len(draws) > 1  # sampled with rng
    assert multi.act(obs["multi"]).shape == (2, 2)
    assert result.policies["box"].act(obs["box"]).shape == (2, 2)
    # Saved and reloaded as a plain Policy: same network outputs.
    multi.save(str(tmp_path))
    back = Policy.load(str(tmp_path))
    flat = np.asarray(obs["multi"], np.float32).ravel()
    for p_back, p_multi in zip(back.action_probs(flat), multi.action_probs(obs["multi"]),
                               strict=True):
        np.testing.assert_allclose(p_back, p_multi, rtol=1e-6)
    assert back.metadata["agent"] == "multi" and back.metadata["algo"] == "ippo"
    # MARLPolicy.load restores the spaces: env-format observations in, env-format actions out.
    for agent, pol in result.policies.items():
        pol.save(str(tmp_path / agent))
        again = MARLPolicy.load(str(tmp_path / agent))
        np.testing.assert_array_equal(again.act(obs[agent]), pol.act(obs[agent]))
        assert again.spaces.action_space == env.action_space(agent)


def test_progress_callback_once_per_cycle(spaces_run, cost_run):
    _, result, calls = spaces_run
    assert calls == [(8, 16), (16, 16)]
    assert [h["step"] for h in result.history] == [8, 16]
    _, calls = cost_run
    assert calls == [(5, 18), (10, 18), (15, 18), (18, 18)]  # the last rollout is short (3 steps)


def optimizer_applications(sizes, n_epochs, n_minibatches) -> int:
    """The annealing denominator of a run whose rollouts have `sizes` transitions."""
    cfg = validate_ippo_config({"n_epochs": n_epochs, "n_minibatches": n_minibatches})
    return sum(steps_per_update(size, cfg) for size in sizes)


def test_lr_annealing_counts_exact_optimizer_applications(cost_run):
    result, _ = cost_run
    # Rollouts of 5, 5, 5, 3 transitions; 3 minibatches requested: 5 % 3 != 0 -> 1 minibatch,
    # 3 -> 3; 2 epochs: 2 + 2 + 2 + 6 = 12 optimiser applications.
    assert minibatch_count(5, 3) == 1 and minibatch_count(3, 3) == 3
    assert optimizer_applications([5, 5, 5, 3], n_epochs=2, n_minibatches=3) == 12
    lrs = [h["agents"]["c"]["lr"] for h in result.history]  # lr of each update's last step
    np.testing.assert_allclose(lrs, [TINY["lr"] * (1 - k / 12) for k in (1, 3, 5, 11)], rtol=1e-5)
    assert optimizer_applications([8, 8, 4], 2, 3) == 12  # 8 % 3 != 0 -> 2 minibatches
    assert optimizer_applications([7], 3, 4) == 3  # 7 is prime: one minibatch per epoch


@pytest.mark.parametrize("source", ["obs", "method"])
def test_masks_from_obs_dict_and_method(source):
    env = SpacesEnv(mask_source=source)
    IPPO(TINY, seed=1).train(env, 16)  # SpacesEnv.step asserts masked actions never arrive
    disc = [int(r["disc"]) for r in env.received]
    multi = np.array([r["multi"] for r in env.received])
    assert -1 not in disc and np.all(multi[:, 0, 0] == 1)


def _init_groups(groups):
    return [stack_trees([g.model.init(jax.random.PRNGKey(i)) for i in range(len(g.agents))])
            for g in groups]


def _spaces(env):
    return {a: AgentSpaces.build(a, env.observation_space(a), env.action_space(a), (8,), "tanh")
            for a in env.possible_agents}


def test_probabilities_sum_to_one_and_respect_masks(spaces_run):
    _, result, _ = spaces_run
    multi = result.policies["multi"]
    obs = np.zeros((2, 3), np.float32)
    parts = multi.action_probs(obs, SpacesEnv.MULTI_MASK)  # unequal components: one per component
    assert [p.shape for p in parts] == [(2,), (3,), (3,), (2,)]
    for p in parts:
        np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-6)
    assert parts[0][1] == 0.0 and parts[0][0] == pytest.approx(1.0)
    disc = result.policies["disc"]
    p = disc.action_probs(3, SpacesEnv.DISC_MASK)
    assert p.shape == (3,) and p[0] == 0.0 and p.sum() == pytest.approx(1.0, rel=1e-6)
    p_free = disc.action_probs(3)
    assert p_free[0] > 0 and p_free.sum() == pytest.approx(1.0, rel=1e-6)


def test_masks_are_stored_and_reused_for_logp_and_entropy():
    env = SpacesEnv(mask_source="info")
    sp = _spaces(env)
    groups = group_agents(sp)
    params = _init_groups(groups)
    batches, _ = ParallelRunner(env, sp, groups, seed=0).collect(params, 6, jax.random.PRNGKey(1))
    for g, p, b in zip(groups, params, batches):
        if "disc" not in g.agents:
            continue
        i = g.agents.index("disc")
        actor = jax.tree_util.tree_map(lambda x: x[i], p["actor"])
        mask = b["mask"][i, :, 0]
        np.testing.assert_array_equal(mask, np.broadcast_to(SpacesEnv.DISC_MASK.astype(bool), (6, 3)))
        obs, act, logp = b["obs"][i, :, 0], b["action"][i, :, 0], b["logp"][i, :, 0]
        with_mask = g.model.logp(g.model.dist(actor, obs, mask), act)
        without = g.model.logp(g.model.dist(actor, obs), act)
        np.testing.assert_allclose(with_mask, logp, rtol=1e-5)
        assert np.all(np.abs(np.asarray(without) - logp) > 1e-3)  # the mask matters
        ent = g.model.entropy(g.model.dist(actor, obs, mask))
        assert np.all(ent <= math.log(2) + 1e-5)  # two allowed choices


# ---------------------------------------------------------------------------------------- GAE
def test_gae_next_values_against_a_hand_loop():
    rng = np.random.default_rng(0)
    T, g, lam = 9, 0.9, 0.8
    r, v, nv = rng.normal(size=(3, T, 1)).astype(np.float32)
    term = np.zeros((T, 1), bool)
    trunc = np.zeros((T, 1), bool)
    term[2], trunc[5] = True, True  # an episode terminates at 2, one is truncated at 5
    done = term | trunc
    adv, ret = gae_next_values(jnp.asarray(r), jnp.asarray(v), jnp.asarray(nv), jnp.asarray(term),
                               jnp.asarray(done), g, lam)
    expected = np.zeros(T)
    nxt = 0.0
    for t in reversed(range(T)):
        boot = 0.0 if term[t, 0] else g * nv[t, 0]  # truncation keeps the bootstrap
        delta = r[t, 0] + boot - v[t, 0]
        nxt = delta + (0.0 if done[t, 0] else g * lam * nxt)  # both cut the trace
        expected[t] = nxt
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-6)
    assert adv[5, 0] == pytest.approx(r[5, 0] + g * nv[5, 0] - v[5, 0], rel=1e-5)
    assert adv[2, 0] == pytest.approx(r[2, 0] - v[2, 0], rel=1e-5)


def test_next_obs_is_the_true_final_observation():
    """The last transition of an episode stores the env's final observation, not the reset one."""
    env = CostStreamEnv(horizon=3)
    sp = _spaces(env)
    groups = group_agents(sp)
    params = _init_groups(groups)
    (b,), episodes = ParallelRunner(env, sp, groups, 0).collect(params, 5, jax.random.PRNGKey(1))
    np.testing.assert_allclose(b["obs"][0, :, 0, 0], [0, 1 / 3, 2 / 3, 0, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(b["next_obs"][0, :, 0, 0], [1 / 3, 2 / 3, 1, 1 / 3, 2 / 3], rtol=1e-6)
    np.testing.assert_array_equal(b["terminated"][0, :, 0], [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(b["done"][0, :, 0], [0, 0, 1, 0, 0])
    assert episodes["costs"] == {"c": [3.0], "z": [0.0]}  # missing cost counts as 0


# ---------------------------------------------------------------------- reproducibility, errors
def test_same_seed_same_result_different_seed_differs(spaces_run):
    _, first, _ = spaces_run
    again = IPPO(TINY, seed=0).train(SpacesEnv(mask_source="info"), 16)
    other = IPPO(TINY, seed=1).train(SpacesEnv(mask_source="info"), 16)
    for a in first.params:
        for x, y in zip(jax.tree_util.tree_leaves(first.params[a]),
                        jax.tree_util.tree_leaves(again.params[a])):
            np.testing.assert_array_equal(x, y)
    assert first.history == again.history
    differs = [not np.array_equal(x, y) for x, y in zip(
        jax.tree_util.tree_leaves(first.params["box"]), jax.tree_util.tree_leaves(other.params["box"]))]
    assert any(differs)


def test_asynchronous_termination_is_rejected():
    with pytest.raises(ValueError, match="asynchronous agent termination"):
        IPPO(TINY).train(SpacesEnv(async_end=True), 8)


def test_rewritten_action_rejects_the_rollout():
    with pytest.raises(ActionRewriteError, match="last_executed_actions\\['disc'\\]"):
        IPPO(TINY).train(SpacesEnv(rewrite=True), 8)


# ------------------------------------------------------------------------ dual-update lifecycle
def test_dual_update_steps_only_with_completed_episodes_and_clamps():
    cfg = validate_ippo_config({"cost_limit": 2.0, "lagrangian_lr": 0.5, "lambda_max": 3.0},
                               lagrangian=True)
    lam = jnp.array([1.0, 1.0, 1.0, 2.9], jnp.float32)
    new, diag = dual_step(lam, jnp.array([0.0, 6.0, 0.0, 40.0]), jnp.array([0, 2, 1, 1]), cfg)
    budget, viol = diag["cost_return_budget"], diag["constraint_violation"]
    assert diag["dual_update_applied"].tolist() == [False, True, True, True]
    assert diag["lagrange_multiplier_used"] is new
    np.testing.assert_allclose(new, [1.0, 1.5, 0.0, 3.0])  # unchanged, +0.5*(3-2), clamp 0, clamp 3
    assert math.isnan(budget[0]) and math.isnan(viol[0])
    np.testing.assert_allclose(budget[1:], [3.0, 0.0, 40.0])
    np.testing.assert_allclose(viol[1:], [1.0, -2.0, 38.0])


COSTS = (1.0, 0.0, 2.0, 0.0)  # per step; an 8-step episode costs 2 * (1 + 2) = 6


@pytest.fixture(scope="module")
def cost_run():
    """IPPO-Lagrangian on CostStreamEnv: episodes of 8 steps, rollouts of 5, budget 18."""
    calls = []
    cfg = {**TINY, "n_steps": 5, "cost_limit": 4.0, "lagrangian_lr": 0.25, "lagrangian_init": 0.5}
    result = IPPO_Lagrangian(cfg, seed=0).train(CostStreamEnv(COSTS, horizon=8), 18,
                                                progress_callback=lambda s, t: calls.append((s, t)))
    return result, calls


def test_dual_update_lifecycle_on_a_hand_built_cost_stream(cost_run):
    """The first rollout completes no episode (lambda stays at its initial value), the second
    completes the episode begun in the first (its full cost counts), and agent "z", which reports
    no cost, sees cost 0."""
    result, _ = cost_run
    rows = [h["agents"] for h in result.history]
    assert [r["c"]["completed_episodes"] for r in rows] == [0, 1, 0, 1]
    assert [r["c"]["dual_update_applied"] for r in rows] == [False, True, False, True]
    lam_c = [r["c"]["lagrange_multiplier_used"] for r in rows]
    np.testing.assert_allclose(lam_c, [0.5, 1.0, 1.0, 1.5])  # += 0.25 * (6 - 4)
    lam_z = [r["z"]["lagrange_multiplier_used"] for r in rows]
    np.testing.assert_allclose(lam_z, [0.5, 0.0, 0.0, 0.0])  # 0.5 + 0.25 * (0 - 4), clamped at 0
    assert math.isnan(rows[0]["c"]["cost_return_budget"])
    assert rows[1]["c"]["cost_return_budget"] == 6.0 and rows[1]["c"]["constraint_violation"] == 2.0
    np.testing.assert_allclose([r["c"]["mean_cost"] for r in rows],
                               [np.mean([1, 0, 2, 0, 1]), np.mean([0, 2, 0, 1, 0]),
                                np.mean([2, 0, 1, 0, 2]), np.mean([0, 1, 0])])
    assert all(r["z"]["mean_cost"] == 0.0 for r in rows)
    assert all(r["c"]["discounted_cost_return"] > 0 for r in rows)
    assert result.lagrange_multipliers == {"c": 1.5, "z": 0.0}
    assert "cost_critic" in result.params["c"]


def test_lagrangian_advantage_by_hand():
    a_r = jnp.array([1.0, 2.0, 3.0, 6.0])
    a_c = jnp.array([0.0, 1.0, 1.0, 2.0])
    lam = 3.0
    std_r = (np.array([1, 2, 3, 6]) - 3.0) / (np.std([1, 2, 3, 6]) + 1e-8)
    cen_c = np.array([0, 1, 1, 2]) - 1.0
    np.testing.assert_allclose(lagrangian_advantage(a_r, a_c, lam),
                               (std_r - lam * cen_c) / (1 + lam), rtol=1e-6)
    np.testing.assert_allclose(lagrangian_advantage(a_r, a_c, lam, center_cost=False),
                               (std_r - lam * np.array([0, 1, 1, 2])) / (1 + lam), rtol=1e-6)
    np.testing.assert_allclose(lagrangian_advantage(a_r, a_c, 0.0), std_r, rtol=1e-6)


def test_multi_discrete_probabilities_are_per_component():
    """Equal components give (..., D, n) (row d = component d), not one concatenated vector."""
    from gymnasium import spaces as gspaces

    from jaxrl_agents import ActorCritic

    model = ActorCritic.from_spaces(gspaces.Box(-1, 1, (3,)), gspaces.MultiDiscrete([4, 4, 4]),
                                    (8,), "tanh")
    pol = Policy(model, model.init(jax.random.PRNGKey(0)))
    mask = np.ones(12, bool)
    mask[[1, 2]] = False  # component 0 may only take 0 or 3
    probs = pol.action_probs(np.ones((5, 3), np.float32), mask)
    assert probs.shape == (5, 3, 4)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
    assert np.all(probs[:, 0, 1:3] == 0.0) and np.all(probs[:, 1:, :] > 0.0)
