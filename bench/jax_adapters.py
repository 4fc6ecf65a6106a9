"""Cost of the gymnax and JaxMARL adapters over the functional core, under jit(vmap) + lax.scan.

Usage:
    uv run --group test python bench/jax_adapters.py            # paper config, 5 rounds
    uv run --group test python bench/jax_adapters.py --quick    # 3 rounds, fewer steps

Measured, in one run, interleaved round by round (the machine is shared: medians over rounds,
ratios of medians; rates per wall-clock second and per CPU second of this process):

    gymnax N         jax.jit of a lax.scan over jax.vmap(quantgate_env.gymnax env.step), N = 64 and
                     1024 environments, actions drawn inside the scan; beside the same scan over
                     jax.vmap(GateEnv.step_autoreset), the functional core's own auto-resetting step.
    jaxmarl N        the same with quantgate_env.jaxmarl's env.step (coupler, q0, q1) beside
                     jax.vmap(MultiGateEnv.step_autoreset).

The adapter's work is the float32 casts, the step counter, the time-limit flag, the guard for
finished states and its own select of the reset state; the physics is the core's. Both loops sum
the observations and rewards they receive, as a trainer consumes them (a scan that drops the
observation lets XLA skip computing it in the core but not in an adapter that keeps it in its
state, which would bias the ratio). Actions: zero-mean per step (the K deltas sum to 0),
std 0.1, so amplitudes stay inside the bounds and episodes run their full 333 steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import quantgate_env  # noqa: E402
from quantgate_env import gymnax as qg  # noqa: E402
from quantgate_env import jaxmarl as qj  # noqa: E402

ACTION_STD = 0.1


def _actions(key, num_envs, k, agents=None):
    a = ACTION_STD * jax.random.normal(key, (num_envs, k) if agents is None else (len(agents), num_envs, k))
    a = a - a.mean(axis=-1, keepdims=True)
    return a if agents is None else {agent: a[i] for i, agent in enumerate(agents)}


def scan_rollout(step, reset, num_envs: int, n_steps: int, k: int, agents=None):
    """A zero-argument callable running jit(scan over n_steps of vmap(step)) to completion.

    Args:
        step: (key, state, action) -> (obs, state, reward(s), ...), one environment.
        reset: key -> (obs, state), one environment.
        num_envs: N, vmapped environments.
        n_steps: scan length.
        k: samples per step (action length per line).
        agents: agent names for dict actions (None: one array action).
    """

    def run(key, state):
        def body(carry, _):
            key, state = carry
            key, k_act, k_env = jax.random.split(key, 3)
            out = jax.vmap(step)(jax.random.split(k_env, num_envs), state, _actions(k_act, num_envs, k, agents))
            reward = out[2] if agents is None else out[2][agents[0]]
            # consume the observations as an agent would (otherwise XLA drops the core's unused
            # observation entirely, and the comparison measures something no trainer runs)
            obs = sum(jnp.sum(o) for o in jax.tree.leaves(out[0]))
            return (key, out[1]), reward.sum() + obs

        (key, state), rewards = jax.lax.scan(body, (key, state), None, length=n_steps)
        return key, state, rewards.sum()

    with jax.enable_x64(True):
        _, state = jax.vmap(reset)(jax.random.split(jax.random.PRNGKey(1), num_envs))
        compiled = jax.jit(run).lower(jax.random.PRNGKey(2), state).compile()

    def call():
        with jax.enable_x64(True):
            jax.block_until_ready(compiled(jax.random.PRNGKey(2), state))

    return call


def interleaved(pair: dict, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, process CPU) seconds of each zero-argument callable, alternating (order swapped every round)."""
    times = {name: [] for name in pair}
    names = list(pair)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            t0, c0 = time.perf_counter(), time.process_time()
            pair[name]()
            times[name].append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def load() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 5, fewer steps")
    parser.add_argument("--only", choices=("gymnax", "jaxmarl"), help="time one adapter only")
    args = parser.parse_args()
    t_start = time.perf_counter()
    rounds = 3 if args.quick else 5
    steps = {64: 111 if args.quick else 333, 1024: 20 if args.quick else 60}

    gym_env = qg.make()
    gym_params, core = gym_env.default_params, gym_env.core
    marl_env = qj.make()
    marl_core, marl_params, agents = marl_env.core, marl_env.params, tuple(marl_env.agents)
    k = core.config.n_time_steps
    rows = []
    for n, n_steps in steps.items() if args.only != "jaxmarl" else ():
        pair = {
            "adapter": scan_rollout(lambda key, s, a: gym_env.step(key, s, a, gym_params),
                                    lambda key: gym_env.reset(key, gym_params), n, n_steps, k),
            "core": scan_rollout(lambda key, s, a: core.step_autoreset(key, s, a, core.default_params),
                                 lambda key: core.reset(key, core.default_params), n, n_steps, k),
        }
        for call in pair.values():
            call()  # warm-up
        rows.append((f"gymnax N={n}, {n_steps} steps", n, n_steps, interleaved(pair, rounds)))
    for n, n_steps in steps.items() if args.only != "gymnax" else ():
        pair = {
            "adapter": scan_rollout(marl_env.step, marl_env.reset, n, n_steps, k, agents),
            "core": scan_rollout(lambda key, s, a: marl_core.step_autoreset(key, s, a, marl_params),
                                 lambda key: marl_core.reset(key, marl_params), n, n_steps, k, agents),
        }
        for call in pair.values():
            call()
        rows.append((f"jaxmarl N={n}, {n_steps} steps", n, n_steps, interleaved(pair, rounds)))

    for col, what in ((0, "env steps per wall-clock second"), (1, "env steps per CPU second of this process")):
        print(f"\n{what} (median over {rounds} interleaved rounds [slowest..fastest])")
        print(f"  {'path':<30}{'adapter':>30}{'functional core':>30}{'adapter/core':>14}")
        for label, n_envs, n_steps, t in rows:
            cells, med = [], {}
            for name in ("adapter", "core"):
                sps = [n_envs * n_steps / s[col] for s in t[name]]
                med[name] = statistics.median(sps)
                cells.append(f"{med[name]:9.3g} [{min(sps):.2g}..{max(sps):.2g}]")
            print(f"  {label:<30}{cells[0]:>30}{cells[1]:>30}{med['adapter'] / med['core']:>13.3f}x")
    print(f"total {time.perf_counter() - t_start:.0f} s; {load()}; BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; "
          f"quantgate-env {quantgate_env.__version__}, jax {jax.__version__}")


if __name__ == "__main__":
    main()
