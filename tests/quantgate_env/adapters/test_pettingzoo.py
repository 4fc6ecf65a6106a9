"""The PettingZoo ParallelEnv adapter: PettingZoo's own API and seed tests in both action modes,
masks in info and observations, costs, last_executed_actions and bad input."""

import warnings

import gymnasium
import jax
import numpy as np
import pettingzoo
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from quantgate_env.pettingzoo import GateParallelEnv, parallel_env

from ..marl_shared import CONTINUOUS, DISCRETE, DISCRETE_K1


def test_module_name_does_not_shadow_pettingzoo():
    assert pettingzoo.__name__ == "pettingzoo" and hasattr(pettingzoo, "ParallelEnv")
    env = parallel_env(**CONTINUOUS)
    assert isinstance(env, pettingzoo.ParallelEnv) and isinstance(env, GateParallelEnv)


@pytest.mark.parametrize(
    "options",
    [CONTINUOUS, dict(DISCRETE, mask_in_obs=True), dict(DISCRETE_K1, mask_in_obs=True)],
    ids=["continuous", "multidiscrete", "discrete-K1"],
)
def test_pettingzoo_parallel_api_test(options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PettingZoo reports API slips as warnings
        parallel_api_test(parallel_env(**options), num_cycles=40)


def test_pettingzoo_test_kit_in_discrete_mode_as_the_readme_says():
    """Issue 37 row 5: parallel_api_test on action_mode="discrete" stops on a masked level with the
    defaults, and the README named masked_action="execute" only for the seed test. Its PettingZoo
    section now gives the settings; this runs that block as written, and checks the default fails
    the way it says."""
    import pathlib
    import re

    readme = pathlib.Path(__file__).resolve().parents[3] / "packages" / "quantgate-env" / "README.md"
    section = readme.read_text().split("**PettingZoo's test kit in discrete mode.**", 1)[1]
    (block,) = re.findall(r"```python\n(.*?)```", section.split("**Mask rule.**", 1)[0], re.S)
    assert 'mask_in_obs=True' in block and 'parallel_api_test(parallel_env(action_mode="discrete", masked_action="execute")' in block
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(block, str(readme), "exec"), {})
    with pytest.raises(ValueError, match=r"actions\['\w+'\]: level \d+ of sample \d+ is masked"):
        parallel_api_test(parallel_env(action_mode="discrete"), num_cycles=200)


@pytest.mark.parametrize(
    "options",
    # the seed test samples without masks: play masked levels under the oob mode instead of raising
    [CONTINUOUS, dict(DISCRETE, masked_action="execute"), dict(CONTINUOUS, max_drift=1e-3)],
    ids=["continuous", "discrete", "drift"],
)
def test_pettingzoo_parallel_seed_test(options):
    parallel_seed_test(lambda: parallel_env(**options), num_cycles=40)


def test_seeded_resets_draw_the_same_device_and_unseeded_ones_differ():
    env = parallel_env(**CONTINUOUS, max_drift=1e-3)
    a, _ = env.reset(seed=3)
    env.reset()
    c, _ = env.reset(seed=3)
    env.step({agent: np.full(3, 0.1) for agent in env.agents})
    d_obs = env.step({agent: np.full(3, 0.1) for agent in env.agents})[0]
    env.reset(seed=3)
    env.step({agent: np.full(3, 0.1) for agent in env.agents})
    e_obs = env.step({agent: np.full(3, 0.1) for agent in env.agents})[0]
    np.testing.assert_array_equal(a["q0"], c["q0"])
    np.testing.assert_array_equal(d_obs["q1"], e_obs["q1"])
    assert not np.array_equal(env._state.device.omega_q, parallel_env(**CONTINUOUS, max_drift=1e-3).core.default_params.device.omega_q)


def test_spaces_observations_and_team_reward():
    env = parallel_env(**CONTINUOUS)
    obs, infos = env.reset(seed=0)
    assert env.agents == env.possible_agents == ["coupler", "q0", "q1"]
    for agent in env.agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.observation_space(agent).contains(obs[agent])
        assert env.action_space(agent) == gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
        assert obs[agent].dtype == np.float32 and obs[agent].shape == (28,)
        assert float(infos[agent]["cost"]) == 0.0
    obs, rewards, term, trunc, infos = env.step({a: np.array([0.1, 0.0, -0.1]) for a in env.agents})
    assert len(set(rewards.values())) == 1 and isinstance(rewards["q0"], float)
    assert set(term.values()) == {False} and set(trunc.values()) == {False}
    for agent in env.agents:
        assert float(infos[agent]["cost"]) == pytest.approx(float(infos[agent]["excess"]) + float(infos[agent]["leakage_increase"]))
        assert env.observation_space(agent).contains(obs[agent])


def test_masks_in_info_obs_and_method_agree_and_masked_play_never_truncates():
    env = parallel_env(**DISCRETE, mask_in_obs=True)
    assert env.action_space("q0") == gymnasium.spaces.MultiDiscrete([5, 5, 5])
    obs, infos = env.reset(seed=1)
    space = env.action_space("coupler")
    space.seed(0)
    steps = 0
    while env.agents:
        for agent in env.agents:
            from_obs, from_info, from_method = obs[agent]["action_mask"], infos[agent]["action_mask"], env.action_mask(agent)
            assert isinstance(from_obs, tuple) and len(from_obs) == 3 and from_obs[0].dtype == np.int8
            for m1, m2, m3 in zip(from_obs, from_info, from_method):
                np.testing.assert_array_equal(m1, m2)
                np.testing.assert_array_equal(m1, m3)
            assert env.observation_space(agent).contains(obs[agent])
        actions = {a: space.sample(mask=obs[a]["action_mask"]) for a in env.agents}
        obs, rewards, term, trunc, infos = env.step(actions)
        steps += 1
        assert not any(trunc.values()), "an action drawn from the masks left a bound"
        for agent, action in actions.items():
            np.testing.assert_array_equal(env.last_executed_actions[agent], action)
            assert not bool(infos[agent]["masked_action"])
    assert steps == env.core.max_episode_steps and all(term.values())


def test_discrete_k1_uses_discrete_space_and_flat_masks():
    env = parallel_env(**DISCRETE_K1)
    assert env.action_space("q1") == gymnasium.spaces.Discrete(5)
    _, infos = env.reset(seed=0)
    mask = infos["q1"]["action_mask"]
    assert mask.shape == (5,) and mask.dtype == np.int8 and mask.all()
    env.step({a: np.int64(4) for a in env.agents})  # +8 rad/ns on the coupler, +0.4 B on qubits
    env.step({a: 4 for a in env.agents})
    # coupler at 16: +4 and +8 would leave 20
    np.testing.assert_array_equal(env.action_mask("coupler"), [1, 1, 1, 1, 0])
    with pytest.raises(ValueError, match=r"actions\['coupler'\]: level 4 of sample 0 is masked.*allowed levels for this sample: \[0, 1, 2, 3\]"):
        env.step({"coupler": 4, "q0": 2, "q1": 2})


def _bad(env, actions, match):
    with pytest.raises(ValueError, match=match):
        env.step(actions)


def test_bad_actions_are_errors_naming_agent_and_field():
    env = parallel_env(**CONTINUOUS)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step({a: np.zeros(3) for a in env.possible_agents})
    env.reset(seed=0)
    ok = {a: np.zeros(3) for a in env.agents}
    _bad(env, [np.zeros(3)] * 3, "actions: expected a dict")
    _bad(env, dict(ok, q2=np.zeros(3)), r"unknown agent\(s\) \['q2'\]")
    _bad(env, {k: v for k, v in ok.items() if k != "q0"}, r"missing action for agent\(s\) \['q0'\]")
    _bad(env, dict(ok, q1=np.zeros(2)), r"actions\['q1'\]: expected shape \(3,\), got \(2,\)")
    _bad(env, dict(ok, coupler=np.array([0.0, 1.5, 0.0])), r"actions\['coupler'\]: expected finite values in \[-1, 1\]")
    _bad(env, dict(ok, q0=np.array([0.0, np.nan, 0.0])), r"actions\['q0'\]: expected finite values")
    _bad(env, dict(ok, q0="left"), r"actions\['q0'\]: expected an array of real numbers")
    with pytest.raises(ValueError, match="unknown agent 'q2'"):
        env.action_space("q2")
    with pytest.raises(ValueError, match="masks exist only"):
        env.action_mask("q0")
    with pytest.raises(ValueError, match=r"unknown environment option\(s\) \['actuator'\]"):
        parallel_env(actuator=("q0",))
    assert env.last_executed_actions == {}  # nothing was played


def test_bad_discrete_actions_and_masked_actions_are_never_rewritten():
    env = parallel_env(**DISCRETE)
    twin = parallel_env(**DISCRETE)
    env.reset(seed=0)
    twin.reset(seed=0)
    hold = {a: np.array([2, 2, 2]) for a in env.agents}
    _bad(env, dict(hold, q0=np.array([2.0, 2.0, 2.0])), r"actions\['q0'\]: expected integer level indices of shape \(3,\)")
    _bad(env, dict(hold, q1=np.array([2, 5, 2])), r"actions\['q1'\]: expected levels in \[0, 5\), got \[2, 5, 2\]")
    _bad(env, dict(hold, q1=np.array([-1, 2, 2])), r"actions\['q1'\]: expected levels in \[0, 5\)")
    _bad(env, dict(hold, coupler=np.array([True, False, True])), r"actions\['coupler'\]: expected integer level")
    # q0 levels are 0.4 B x (-1, -0.5, 0, 0.5, 1): sample 0 may take any (reach [-0.4, 0.4] B),
    # sample 1 any (reach [-0.8, 0.8] B), sample 2 at most |d| <= 0.2 B (masked too if 0.8 B + 0.2 B
    # rounds one ulp above B: the mask is exact in floating point)
    mask = env.action_mask("q0")
    assert mask[0].all() and mask[1].all()
    assert mask[2][2] == 1 and mask[2][0] == mask[2][4] == 0
    level = int(np.flatnonzero(mask[2] == 0)[0])
    _bad(env, dict(hold, q0=np.array([2, 2, level])), rf"actions\['q0'\]: level {level} of sample 2 is masked")
    assert env.last_executed_actions == {}
    # the rejected calls changed nothing: the next valid step matches an untouched twin
    first = env.step(hold)
    second = twin.step(hold)
    np.testing.assert_array_equal(first[0]["q1"], second[0]["q1"])
    assert first[1] == second[1]
    assert {a: v.tolist() for a, v in env.last_executed_actions.items()} == {a: [2, 2, 2] for a in env.agents}


def test_episode_end_is_shared_and_step_after_end_is_an_error():
    env = parallel_env(**CONTINUOUS)
    env.reset(seed=0)
    out = env.step({"coupler": np.zeros(3), "q0": np.ones(3), "q1": np.zeros(3)})  # q0 leaves its bound
    assert all(out[3].values()) and env.agents == []
    assert all(r == pytest.approx(-20.0) for r in out[1].values())
    assert float(out[4]["q0"]["excess"]) == pytest.approx(3.0) and float(out[4]["coupler"]["excess"]) == 0.0
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step({a: np.zeros(3) for a in env.possible_agents})


def test_physics_is_float64_and_global_x64_untouched():
    before = jax.config.read("jax_enable_x64")
    env = parallel_env(**CONTINUOUS)
    env.reset(seed=0)
    _, _, _, _, infos = env.step({a: np.full(3, 0.05) for a in env.agents})
    assert infos["q0"]["JT"].dtype == np.float64
    assert jax.config.read("jax_enable_x64") == before



@pytest.mark.parametrize(
    "options, message",
    [
        (dict(mask_in_obs=True), 'mask_in_obs: action masks exist only with action_mode="discrete"'),
        (dict(mask_in_obs=1), "mask_in_obs: expected True or False, got 1"),
        (dict(DISCRETE, masked_action="clip"), r"masked_action: expected one of \('raise', 'execute'\), got 'clip'"),
    ],
)
def test_adapter_options_are_checked_by_the_adapter(options, message):
    """mask_in_obs and masked_action belong to this adapter (the functional core refuses them)."""
    with pytest.raises(ValueError, match=message):
        parallel_env(**options)
