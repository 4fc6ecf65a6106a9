"""quantgate_env.jaxmarl: a real JaxMARL MultiAgentEnv, run through JaxMARL's LogWrapper vmapped and
scanned, and checked against the functional multi-actuator core stepped directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxmarl.environments import spaces
from jaxmarl.environments.multi_agent_env import MultiAgentEnv
from jaxmarl.wrappers.baselines import LogWrapper

from quantgate_env import jaxmarl as qj

SHORT = dict(pulse_length=30, T=1.5)  # 10 steps of K = 3 at the paper's 50 ps samples
N_STEPS = 10
DRIFT = dict(SHORT, qubit_drift_mhz=5.7)  # resampled at every reset, with the step's key
N_ENVS, N_SCAN = 4, 25
AGENTS = ("coupler", "q0", "q1")


@pytest.fixture(scope="module", autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _actions(key):
    """{agent: (N_ENVS, 3)} deltas: some episodes leave a bound (truncated), others end the pulse."""
    return {a: 0.1 * jax.random.normal(jax.random.fold_in(key, i), (N_ENVS, 3)) for i, a in enumerate(AGENTS)}


def _scan(step, reset, key):
    """jit(vmap) + scan with one key discipline: env i at step t uses split(split(key)[t], N)[i]."""

    def run(key):
        reset_key, steps_key = jax.random.split(key)
        obs, state = jax.vmap(reset)(jax.random.split(reset_key, N_ENVS))

        def body(state, k):
            act_key, env_key = jax.random.split(k)
            out = jax.vmap(step)(jax.random.split(env_key, N_ENVS), state, _actions(act_key))
            return out[1], (out[0],) + out[2:]

        return obs, jax.lax.scan(body, state, jax.random.split(steps_key, N_SCAN))[1]

    return jax.device_get(jax.jit(run)(key))


@pytest.fixture(scope="module")
def traces():
    env = qj.make(**DRIFT, line_id_in_obs=True)
    logged = LogWrapper(env)
    core, params = env.core, env.params
    key = jax.random.PRNGKey(11)
    marl = _scan(logged.step, logged.reset, key)
    direct = _scan(lambda k, s, a: core.step_autoreset(k, s, a, params), lambda k: core.reset(k, params), key)
    return env, marl, direct


def test_is_a_jaxmarl_env_with_jaxmarl_spaces():
    env = qj.make(**SHORT)
    assert isinstance(env, MultiAgentEnv)
    assert env.agents == list(AGENTS) and env.num_agents == 3
    for agent in AGENTS:
        obs_space, act_space = env.observation_space(agent), env.action_space(agent)
        assert isinstance(obs_space, spaces.Box) and obs_space.shape == (28,)
        assert isinstance(act_space, spaces.Box) and act_space.shape == (3,)
    assert env.agent_classes == {"coupler": ["coupler"], "qubit": ["q0", "q1"]}
    discrete = qj.make(**SHORT, action_mode="discrete", n_levels=5)
    assert isinstance(discrete.action_space("q0"), spaces.MultiDiscrete) and discrete.action_space("q0").shape == (3,)
    k1 = qj.make(**SHORT, action_mode="discrete", n_levels=5, n_time_steps=1)
    assert isinstance(k1.action_space("q0"), spaces.Discrete) and k1.action_space("q0").n == 5
    assert qj.make(**SHORT, line_id_in_obs=True).observation_space("q1").shape == (31,)


def test_log_wrapper_vmapped_and_scanned_matches_the_core(traces):
    env, (obs0, (obs, rewards, dones, infos)), (core_obs0, (core_obs, core_rewards, core_term, core_trunc, core_infos)) = traces
    done = core_term["coupler"] | core_trunc["coupler"]
    assert core_term["coupler"].any() and core_trunc["coupler"].any()  # both kinds of end occur
    np.testing.assert_array_equal(dones["__all__"], done)
    for i, agent in enumerate(AGENTS):
        np.testing.assert_array_equal(dones[agent], done)
        assert obs[agent].dtype == np.float32 and obs[agent].shape == (N_SCAN, N_ENVS, 31)
        np.testing.assert_allclose(obs0[agent][..., :28], core_obs0[agent].astype(np.float32), atol=1e-6)
        np.testing.assert_allclose(obs[agent][..., :28], core_obs[agent].astype(np.float32), atol=1e-6)
        np.testing.assert_array_equal(obs[agent][..., 28:], np.broadcast_to(np.eye(3)[i], (N_SCAN, N_ENVS, 3)))
        np.testing.assert_allclose(rewards[agent], core_rewards[agent].astype(np.float32), rtol=1e-6)
        np.testing.assert_allclose(infos["cost"][..., i], core_infos[agent]["cost"], rtol=1e-9, atol=1e-15)
    # flat infos, one entry per agent (JaxMARL's baselines reshape them to one per actor)
    assert all(v.shape == (N_SCAN, N_ENVS, 3) for v in infos.values()), {k: v.shape for k, v in infos.items()}
    np.testing.assert_array_equal(infos["truncated"][..., 0], core_trunc["coupler"])
    np.testing.assert_array_equal(infos["terminated"][..., 0], core_term["coupler"])
    np.testing.assert_allclose(infos["JT"][..., 2], core_infos["q1"]["JT"], rtol=1e-9)
    # LogWrapper's episode returns are the sums of the core's team rewards over each episode
    reward = core_rewards["coupler"]
    for e in range(N_ENVS):
        ends = np.flatnonzero(done[:, e])
        starts = np.concatenate([[0], ends[:-1] + 1])
        for s, t in zip(starts, ends):
            np.testing.assert_allclose(infos["returned_episode_returns"][t, e], reward[s:t + 1, e].sum(), rtol=1e-5)
            assert infos["returned_episode_lengths"][t, e, 0] == t - s + 1
            assert t - s + 1 == N_STEPS or core_trunc["coupler"][t, e]


def test_masked_discrete_actions_never_leave_the_bound():
    """Levels sampled from get_avail_actions at every step: no line ever leaves its bound."""
    env = qj.make(**SHORT, action_mode="discrete", n_levels=5, n_time_steps=1, delta_scale=8.0)
    core = env.core

    def run(key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, N_ENVS))

        def body(state, k):
            avail = jax.vmap(env.get_avail_actions)(state)
            masks = jax.vmap(lambda s: core.action_masks(s.core))(state)
            logits = {a: jnp.where(avail[a], 0.0, -jnp.inf) for a in AGENTS}
            actions = {a: jax.random.categorical(jax.random.fold_in(k, i), logits[a]) for i, a in enumerate(AGENTS)}
            out = jax.vmap(env.step)(jax.random.split(k, N_ENVS), state, actions)
            same = jnp.all(jnp.stack([jnp.all(avail[a] == masks[a][:, 0]) for a in AGENTS]))
            return out[1], (out[4], same, avail["q0"].sum(-1))

        return jax.lax.scan(body, state, jax.random.split(key, 30))[1]  # K = 1: one 30-step episode

    infos, same, n_allowed = jax.device_get(jax.jit(run)(jax.random.PRNGKey(2)))
    assert same.all()  # get_avail_actions is the core's mask rule
    assert (n_allowed < 5).any()  # the masks did restrict (the walk reached the bounds)
    assert not infos["truncated"].any() and not infos["masked_action"].any() and not infos["oob"].any()
    assert infos["terminated"][-1].all() and not infos["terminated"][:-1].any()  # every episode ran to the end


def test_time_limit_and_finished_states():
    env = qj.make(**SHORT, max_steps=4)
    step_env = jax.jit(env.step_env)
    actions = {a: jnp.zeros(3) for a in AGENTS}
    _, state = env.reset(jax.random.PRNGKey(0))
    for t in range(4):
        obs, state, rewards, dones, infos = step_env(jax.random.PRNGKey(t), state, actions)
        assert bool(dones["__all__"]) == (t == 3)
    assert infos["truncated"].all() and not infos["terminated"].any()
    last_obs = obs
    obs, after, rewards, dones, infos = step_env(jax.random.PRNGKey(9), state, {a: jnp.ones(3) for a in AGENTS})
    # the core's frozen state (the time limit marked it truncated): same state and observations,
    # reward 0, dones kept; the observations come from the core state, none are stored
    assert dones["__all__"] and float(rewards["q0"]) == 0.0 and infos["truncated"].all()
    for agent in AGENTS:
        np.testing.assert_array_equal(obs[agent], last_obs[agent])
    assert int(after.core.idx) == int(state.core.idx) == 12 and int(after.step) == 4
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(state)):
        np.testing.assert_array_equal(a, b)
    assert not hasattr(after, "obs")
    # the auto-resetting step restarts instead
    obs, reset, rewards, dones, infos = env.step(jax.random.PRNGKey(9), state, actions)
    assert int(reset.step) == 0 and int(reset.core.idx) == 0 and not reset.done


def test_bad_input_is_a_clear_error_before_anything_runs():
    env = qj.make(**SHORT)
    _, state = env.reset(jax.random.PRNGKey(0))
    good = {a: jnp.zeros(3) for a in AGENTS}
    with pytest.raises(ValueError, match=r"actions: expected one action per agent .*missing \['q1'\]"):
        env.step(jax.random.PRNGKey(0), state, {"coupler": jnp.zeros(3), "q0": jnp.zeros(3)})
    with pytest.raises(ValueError, match=r"actions\['q0'\]: expected shape \(3,\), got \(2,\)"):
        env.step(jax.random.PRNGKey(0), state, dict(good, q0=jnp.zeros(2)))
    discrete = qj.make(**SHORT, action_mode="discrete")
    _, dstate = discrete.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"actions\['coupler'\]: expected integer level indices"):
        discrete.step(jax.random.PRNGKey(0), dstate, {a: jnp.zeros(3) for a in AGENTS})
    with pytest.raises(ValueError, match='get_avail_actions: action masks exist only with action_mode="discrete"'):
        env.get_avail_actions(state)
    with pytest.raises(ValueError, match="mask_in_obs: an option of the PettingZoo adapter"):
        qj.make(**SHORT, action_mode="discrete", mask_in_obs=True)
    with pytest.raises(ValueError, match="line_id_in_obs: expected True or False, got 1"):
        qj.make(**SHORT, line_id_in_obs=1)
    with pytest.raises(ValueError, match="max_steps: expected a positive integer, got 0"):
        qj.make(**SHORT, max_steps=0)
    with pytest.raises(ValueError, match="params: expected quantgate_env.EnvParams"):
        qj.make(**SHORT, params={"device": None})
    with pytest.raises(ValueError, match="unknown environment option"):
        qj.make(pulse_lenght=30)
    with jax.enable_x64(False), pytest.raises(ValueError, match="enable_x64"):
        qj.make(**SHORT).reset(jax.random.PRNGKey(0))


@pytest.mark.slow
def test_a_shared_parameter_policy_learns_on_the_jaxmarl_env():
    """Learning, not just running: one Gaussian policy shared by the three lines (told apart by the
    one-hot line id), trained by REINFORCE with a per-step batch baseline in a PureJaxRL-style loop
    (collection and update in one jitted function), JaxMARL's LogWrapper reporting the returns.

    Measured (150 updates of 32 ten-step episodes, ~30 s on 2 CPUs): the mean episode return goes
    from -8.1 over the first 5 updates (std 0.5 exploration pays clip-mode excess) to 5.5 over
    the last 5; the test asks for a rise of 5.
    """
    import optax

    env = LogWrapper(qj.make(**SHORT, oob_mode="clip", line_id_in_obs=True))
    n_envs, obs_dim = 32, 31

    def mean_action(p, obs):
        return jnp.tanh(obs @ p["w"] + p["b"])

    def collect(p, key):
        reset_key, run_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(reset_key, n_envs))

        def body(carry, k):
            obs, state = carry
            act_key, env_key = jax.random.split(k)
            act = {a: mean_action(p, obs[a]) + jnp.exp(p["log_std"]) * jax.random.normal(jax.random.fold_in(act_key, i), (n_envs, 3))
                   for i, a in enumerate(AGENTS)}
            new_obs, state, rewards, dones, infos = jax.vmap(env.step)(jax.random.split(env_key, n_envs), state, act)
            return (new_obs, state), (obs, act, rewards["coupler"], infos["returned_episode_returns"][:, 0])

        return jax.lax.scan(body, (obs, state), jax.random.split(run_key, N_STEPS))[1]

    def loss(p, obs, act, reward):
        to_go = jnp.cumsum(reward[::-1], axis=0)[::-1]  # (steps, envs)
        adv = (to_go - to_go.mean(axis=1, keepdims=True)) / (to_go.std(axis=1, keepdims=True) + 1e-8)
        std = jnp.exp(p["log_std"])
        logp = sum(jnp.sum(-0.5 * ((act[a] - mean_action(p, obs[a])) / std) ** 2 - p["log_std"], axis=-1) for a in AGENTS)
        return -jnp.mean(adv * logp)

    opt = optax.adam(3e-2)

    @jax.jit
    def update(p, opt_state, key):
        obs, act, reward, returns = collect(p, key)
        grads = jax.grad(loss)(p, obs, act, reward.astype(jnp.float32))
        updates, opt_state = opt.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, returns[-1].mean()  # each batch is one whole episode

    p = {"w": jnp.zeros((obs_dim, 3), jnp.float32), "b": jnp.zeros(3, jnp.float32),
         "log_std": jnp.full(3, np.log(0.5), jnp.float32)}
    opt_state = opt.init(p)
    returns = []
    for i in range(150):
        p, opt_state, ret = update(p, opt_state, jax.random.PRNGKey(i))
        returns.append(float(ret))
    first, last = np.mean(returns[:5]), np.mean(returns[-5:])
    assert np.isfinite(returns).all()
    assert last - first > 5.0, (first, last)
    assert last > 3.0, (first, last)


@pytest.mark.parametrize("precision", [
    # ~2 x 8 s; float64 under x64 stays checked in the default run: continuous actions vmapped and
    # scanned through auto-resets (test_log_wrapper_vmapped_and_scanned_matches_the_core, JT equal to
    # the float64 core's to 1e-9), discrete masked levels scanned to the pulse's end
    # (test_masked_discrete_actions_never_leave_the_bound)
    pytest.param("float64", marks=pytest.mark.slow),
    "float32"])
@pytest.mark.parametrize("mode", ["continuous", "discrete"])
def test_both_precisions_trace_and_float32_needs_no_x64(precision, mode):
    """float32 envs traced with x64 OFF (as in a float32 program); float64 under x64. Auto-reset,
    masks and the frozen-state guard come from the core in both."""
    with jax.enable_x64(precision == "float64"):
        env = qj.make(**SHORT, oob_mode="clip", precision=precision, action_mode=mode, line_id_in_obs=True)
        dtype = jnp.float32 if precision == "float32" else jnp.float64

        def run(key):
            obs, state = env.reset(key)

            def body(state, k):
                if mode == "discrete":
                    masks = env.get_avail_actions(state)
                    actions = {a: jnp.argmax(masks[a], axis=-1).astype(jnp.int32) for a in AGENTS}
                else:
                    actions = {a: jnp.full(3, 0.1) for a in AGENTS}
                obs, state, rewards, dones, infos = env.step(k, state, actions)
                return state, (obs["q0"], rewards["q0"], dones["__all__"], infos["JT"], state.core.amps)

            return jax.lax.scan(body, state, jax.random.split(key, N_STEPS + 2))[1]

        obs, reward, done, jt, amps = jax.jit(run)(jax.random.PRNGKey(0))
        assert obs.dtype == reward.dtype == jnp.float32 and jt.dtype == amps.dtype == dtype
        assert obs.shape == (N_STEPS + 2, 31) and np.isfinite(obs).all() and np.isfinite(reward).all()
        assert bool(done[N_STEPS - 1]) and not done[: N_STEPS - 1].any()
