"""Steps per second of the multi-actuator gate environment, with single-agent baselines in the same run.

Usage:
    uv run python bench/marl_throughput.py            # 5 rounds
    uv run python bench/marl_throughput.py --quick    # 2 rounds, shorter scans

Paper configuration (1000 samples of 50 ps, K = 3, 333 steps), oob_mode="clip" so that random
actions never end episodes early, float64. Reported: median over rounds (rounds interleave the
methods so that load from other processes on the shared machine hits all alike).

From Python (one environment, one step per call, numpy in and out):
    pz continuous     quantgate_env.pettingzoo.parallel_env(): 3 agents (coupler, q0, q1).
    pz discrete       the same with action_mode="discrete" (masks checked in Python each step).
    gym baseline      the single-agent Gymnasium env (ZCQPEE-v0), same physics with one line.

Functional core batched over N = 1024 environments (jit + vmap + lax.scan of step_autoreset,
actions drawn inside the compiled scan), environment steps/s = N x scan length / seconds:
    marl 3 lines      quantgate_env.MultiGateEnv, 3 agents, continuous.
    marl coupler      the same core with actuators=("coupler",) (cost of the agent-keyed layer).
    gate baseline     the single-agent functional GateEnv.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import jax
import numpy as np
import quantgate_env
from quantgate_env import make_multi
from quantgate_env.pettingzoo import parallel_env

OPTIONS = dict(oob_mode="clip")
N_ENVS = 1024


def python_pz(env, n_steps: int, rng: np.random.Generator) -> float:
    obs, infos = env.reset(seed=0)
    discrete = env.core.config.action_mode == "discrete"
    start = time.perf_counter()
    for _ in range(n_steps):
        if discrete:
            actions = {a: env.action_space(a).sample(mask=env.action_mask(a)) for a in env.agents}
        else:
            actions = {a: rng.uniform(-0.05, 0.05, 3) for a in env.agents}
        _, _, term, trunc, _ = env.step(actions)
        if not env.agents:
            env.reset()
    return n_steps / (time.perf_counter() - start)


def python_gym(env, n_steps: int, rng: np.random.Generator) -> float:
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(n_steps):
        _, _, term, trunc, _ = env.step(rng.uniform(-0.05, 0.05, 3).astype(np.float32))
        if term or trunc:
            env.reset()
    return n_steps / (time.perf_counter() - start)


def batched_runner(core, multi: bool, n_scan: int):
    """Compiled (key) -> final carry of a scan of ``n_scan`` autoreset steps over N_ENVS envs."""
    params = core.default_params

    def actions_for(key):
        if multi:
            keys = jax.random.split(key, len(core.agents))
            return {a: jax.random.uniform(k, (N_ENVS, 3), minval=-0.05, maxval=0.05) for a, k in zip(core.agents, keys)}
        return jax.random.uniform(key, (N_ENVS, 3), minval=-0.05, maxval=0.05)

    @jax.jit
    def run(key):
        obs, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(key, N_ENVS), params)

        def body(state, key):
            obs, state, reward, term, trunc, info = jax.vmap(core.step_autoreset, in_axes=(None, 0, 0, None))(
                key, state, actions_for(key), params
            )
            return state, reward

        state, rewards = jax.lax.scan(body, state, jax.random.split(key, n_scan))
        return rewards

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds and shorter runs")
    args = parser.parse_args()
    rounds = 2 if args.quick else 5
    py_steps = 100 if args.quick else 300
    n_scan = 20 if args.quick else 50

    rng = np.random.default_rng(0)
    python_envs = {
        "pz continuous": (python_pz, parallel_env(**OPTIONS)),
        "pz discrete": (python_pz, parallel_env(action_mode="discrete", delta_scale=4.0, **OPTIONS)),
        "gym baseline": (python_gym, gymnasium.make("quantgate_env:ZCQPEE-v0", **OPTIONS)),
    }
    with jax.enable_x64(True):
        runners = {
            "marl 3 lines": batched_runner(make_multi(**OPTIONS), True, n_scan),
            "marl coupler": batched_runner(make_multi(actuators=("coupler",), **OPTIONS), True, n_scan),
            "gate baseline": batched_runner(quantgate_env.make(**OPTIONS), False, n_scan),
        }
        t0 = time.perf_counter()
        for fn, env in python_envs.values():  # compile outside the timed rounds
            fn(env, 2, rng)
        for run in runners.values():
            jax.block_until_ready(run(jax.random.PRNGKey(0)))
        print(f"compile + warm-up: {time.perf_counter() - t0:.1f} s")

        results = {name: [] for name in list(python_envs) + list(runners)}
        for r in range(rounds):
            for name, (fn, env) in python_envs.items():
                results[name].append(fn(env, py_steps, rng))
            for name, run in runners.items():
                start = time.perf_counter()
                jax.block_until_ready(run(jax.random.PRNGKey(r + 1)))
                results[name].append(N_ENVS * n_scan / (time.perf_counter() - start))

    print(f"\nmedian env steps/s over {rounds} rounds (paper pulse, K = 3, float64, {jax.devices()[0].platform})")
    print("from Python, one environment:")
    for name in python_envs:
        print(f"  {name:<15} {statistics.median(results[name]):10.1f}")
    gym = statistics.median(results["gym baseline"])
    print(f"  ratio pz continuous / gym baseline: {statistics.median(results['pz continuous']) / gym:.2f}")
    print(f"functional core, N = {N_ENVS} envs, jit + vmap + lax.scan ({n_scan} steps):")
    for name in runners:
        print(f"  {name:<15} {statistics.median(results[name]):10.0f}")
    base = statistics.median(results["gate baseline"])
    print(f"  ratio marl 3 lines / gate baseline: {statistics.median(results['marl 3 lines']) / base:.2f}")
    print(f"  ratio marl coupler / gate baseline: {statistics.median(results['marl coupler']) / base:.2f}")


if __name__ == "__main__":
    main()
