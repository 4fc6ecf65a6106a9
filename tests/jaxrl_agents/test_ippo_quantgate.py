"""IPPO on the discrete multi-actuator gate environment (quantgate_env.pettingzoo): three control
lines (coupler, q0, q1), MultiDiscrete([5, 5, 5]) actions with action masks, team reward. Short
pulses (60 samples = 20 steps per episode) keep this to seconds once compiled.

A near-uniform masked policy scores about 9.5 per episode; the ceiling reached by longer runs is
about 12.1. jaxrl-agents never imports quantgate_env; only its tests and benchmarks do.
"""

import os

import jax
import numpy as np
import pytest

pz = pytest.importorskip("quantgate_env.pettingzoo")

from jaxrl_agents import IPPO  # noqa: E402
from jaxrl_agents.ippo import MARLPolicy  # noqa: E402
from jaxrl_agents.run import trainer  # noqa: E402
from jaxrl_agents.run.run_files import read_progress  # noqa: E402

OPTIONS = {"action_mode": "discrete", "pulse_length": 60}
CFG = {"hidden": (32,), "lr": 3e-3, "n_minibatches": 4, "n_epochs": 4}


def _greedy_return(env, policies, seed) -> float:
    """Team return of one deterministic episode (every agent gets the same reward)."""
    obs, infos = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        actions = {a: policies[a].act(obs[a], action_mask=infos[a]["action_mask"])
                   for a in env.possible_agents}
        obs, rewards, terms, truncs, infos = env.step(actions)
        total += rewards["coupler"]
        done = any(terms.values()) or any(truncs.values())
    return total


def _check_improves(returns, policies, margin):
    """Later episodes return more than the first ones, and so does the greedy policy."""
    first, last = np.mean(returns[:2]), np.mean(returns[-3:])
    greedy = _greedy_return(pz.parallel_env(**OPTIONS), policies, seed=1)
    assert last > first + margin, returns
    assert greedy > first + margin, (greedy, returns)


@pytest.mark.slow  # a learning run: 91 s of a shared 2-core run
def test_ippo_improves_the_team_reward_compiled(tmp_path):
    """The trainer on the env's functional core (env.core): 16 environments, 24 updates of 256
    steps."""
    env = pz.parallel_env(**OPTIONS)
    res = trainer.train("ippo", env, None, {**CFG, "n_envs": 16, "n_steps": 16,
                                            "total_steps": 256 * 24},
                        seeds=(1,), eval_every=10**9, out=str(tmp_path), progress="off")
    (run_dir,) = res.run_dirs
    returns = [float(r["coupler/episode_return"]) for r in read_progress(
        os.path.join(run_dir, "progress.csv")) if float(r["coupler/episodes"])]
    policies = {a: MARLPolicy.load(os.path.join(run_dir, "last_policy", a))
                for a in env.possible_agents}
    _check_improves(returns, policies, margin=1.5)  # 9.5 -> 11.9 when written
    obs, infos = env.reset(seed=2)
    for a, pol in policies.items():  # actions in the agent's space, inside its mask
        act = pol.act(obs[a], jax.random.PRNGKey(0), action_mask=infos[a]["action_mask"])
        assert env.action_space(a).contains(act)
        assert all(m[act[k]] for k, m in enumerate(infos[a]["action_mask"]))


@pytest.mark.slow
def test_ippo_improves_the_team_reward_python_loop():
    """The same problem stepped from Python through the ParallelEnv adapter."""
    env = pz.parallel_env(**OPTIONS)
    result = IPPO({**CFG, "n_steps": 64}, seed=0).train(env, 64 * 80)
    returns = [h["agents"]["coupler"]["episode_return"] for h in result.history
               if h["agents"]["coupler"]["episodes"]]
    _check_improves(returns, result.policies, margin=1.0)
