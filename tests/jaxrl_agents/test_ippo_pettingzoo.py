"""IPPO on a PettingZoo environment this project did not write: rock-paper-scissors (classic rps_v2),
with Discrete observations (flattened to one-hot) and episodes that end by truncation."""

import jax
import numpy as np
import pytest

rps_v2 = pytest.importorskip("pettingzoo.classic.rps_v2")

from jaxrl_agents.ippo import IPPO  # noqa: E402
from jaxrl_agents.ippo import IPPO_Lagrangian  # noqa: E402
from jaxrl_agents.common.state import stack_trees  # noqa: E402
from jaxrl_agents.ippo.agent_axis import group_agents  # noqa: E402
from jaxrl_agents.ippo.rollout import ParallelRunner  # noqa: E402
from jaxrl_agents.ippo.spaces import AgentSpaces  # noqa: E402

from .test_ippo import TINY  # noqa: E402


def test_rps_rollout_truncates_without_terminating():
    env = rps_v2.parallel_env(max_cycles=5)
    sp = {a: AgentSpaces.build(a, env.observation_space(a), env.action_space(a), (8,), "tanh")
          for a in env.possible_agents}
    assert all(s.model.obs_dim == 4 for s in sp.values())  # Discrete(4) -> one-hot
    groups = group_agents(sp)
    assert len(groups) == 1 and groups[0].agents == ("player_0", "player_1")
    params = [stack_trees([g.model.init(jax.random.PRNGKey(i)) for i in range(2)]) for g in groups]
    (b,), episodes = ParallelRunner(env, sp, groups, seed=0).collect(params, 12, jax.random.PRNGKey(0))
    assert not b["terminated"].any()  # max_cycles is a truncation: bootstrap kept
    np.testing.assert_array_equal(np.flatnonzero(b["done"][0, :, 0]), [4, 9])
    np.testing.assert_array_equal(b["obs"].sum(-1), 1.0)  # one-hot observations
    assert len(episodes["returns"]["player_0"]) == 2
    # Zero-sum: the two players' completed returns cancel.
    np.testing.assert_allclose(np.add(episodes["returns"]["player_0"],
                                      episodes["returns"]["player_1"]), 0.0)


@pytest.mark.parametrize("cls", [IPPO, IPPO_Lagrangian])
def test_ippo_trains_on_rps_and_policies_act_in_its_spaces(cls):
    env = rps_v2.parallel_env(max_cycles=6)
    result = cls(TINY, seed=0).train(env, 24)
    assert [h["step"] for h in result.history] == [8, 16, 24]
    assert sum(h["agents"]["player_0"]["episodes"] for h in result.history) == 4
    obs, _ = env.reset(seed=1)
    for agent, pol in result.policies.items():
        a = pol.act(obs[agent])
        assert env.action_space(agent).contains(int(a))
        p = pol.action_probs(obs[agent])
        assert p.shape == (3,) and p.sum() == pytest.approx(1.0, rel=1e-6)
        sampled = {int(pol.act(obs[agent], jax.random.PRNGKey(k))) for k in range(30)}
        assert sampled == {0, 1, 2}  # a fresh policy still explores every move
    if cls is IPPO_Lagrangian:  # rps reports no cost: the multiplier can only fall to lambda_min
        assert all(lam == 0.0 for lam in result.lagrange_multipliers.values())
