"""Cost of the gymnax and JaxMARL adapters over the functional core, under jit(vmap) + lax.scan.

Usage:
    uv run --group test python bench/jax_adapters.py            # paper config, 5 rounds, both precisions
    uv run --group test python bench/jax_adapters.py --quick    # 3 rounds, fewer steps
    uv run --group test python bench/jax_adapters.py --precision float32   # one precision only

Measured, in one run, interleaved round by round (the machine is shared: medians over rounds,
ratios of medians; rates per wall-clock second and per CPU second of this process):

    gymnax N         jax.jit of a lax.scan over jax.vmap(quantgate_env.gymnax env.step), N = 64 and
                     1024 environments, actions drawn inside the scan; beside the same scan over
                     jax.vmap(GateEnv.step_autoreset), the functional core's own auto-resetting step.
    jaxmarl N        the same with quantgate_env.jaxmarl's env.step (coupler, q0, q1) beside
                     jax.vmap(MultiGateEnv.step_autoreset).

Each in both precisions: ``precision="float64"`` traced under x64 (the default) and
``precision="float32"`` traced with x64 off (as inside a float32 program); the last table puts the
two side by side (float32 / float64 steps per second).

The adapter's work is the float32 casts, the step counter, the time-limit flag and its own select
of the reset state; the physics, the episode-end flags and the frozen finished state are the core's. Both loops sum
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
from timing import interleaved, load  # noqa: E402  (bench/ is on sys.path when a bench runs)

ACTION_STD = 0.1


def _actions(key, num_envs, k, agents=None):
    a = ACTION_STD * jax.random.normal(key, (num_envs, k) if agents is None else (len(agents), num_envs, k))
    a = a - a.mean(axis=-1, keepdims=True)
    return a if agents is None else {agent: a[i] for i, agent in enumerate(agents)}


def scan_rollout(step, reset, num_envs: int, n_steps: int, k: int, agents=None, x64: bool = True):
    """A zero-argument callable running jit(scan over n_steps of vmap(step)) to completion.

    Args:
        step: (key, state, action) -> (obs, state, reward(s), ...), one environment.
        reset: key -> (obs, state), one environment.
        num_envs: N, vmapped environments.
        n_steps: scan length.
        k: samples per step (action length per line).
        agents: agent names for dict actions (None: one array action).
        x64: trace and run under x64 (float64 envs) or with it off (float32 envs).
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

    with jax.enable_x64(x64):
        _, state = jax.vmap(reset)(jax.random.split(jax.random.PRNGKey(1), num_envs))
        compiled = jax.jit(run).lower(jax.random.PRNGKey(2), state).compile()

    def call():
        with jax.enable_x64(x64):
            jax.block_until_ready(compiled(jax.random.PRNGKey(2), state))

    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 5, fewer steps")
    parser.add_argument("--only", choices=("gymnax", "jaxmarl"), help="time one adapter only")
    parser.add_argument("--precision", choices=("both", "float64", "float32"), default="both",
                        help="environment precision(s) to time (default both, side by side)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    rounds = 3 if args.quick else 5
    steps = {64: 111 if args.quick else 333, 1024: 20 if args.quick else 60}

    precisions = ("float64", "float32") if args.precision == "both" else (args.precision,)
    rows = []
    for precision in precisions:
        x64 = precision == "float64"
        gym_env = qg.make(precision=precision)
        gym_params, core = gym_env.default_params, gym_env.core
        marl_env = qj.make(precision=precision)
        marl_core, marl_params, agents = marl_env.core, marl_env.params, tuple(marl_env.agents)
        k = core.config.n_time_steps
        for n, n_steps in steps.items() if args.only != "jaxmarl" else ():
            pair = {
                "adapter": scan_rollout(lambda key, s, a, e=gym_env, p=gym_params: e.step(key, s, a, p),
                                        lambda key, e=gym_env, p=gym_params: e.reset(key, p), n, n_steps, k, x64=x64),
                "core": scan_rollout(lambda key, s, a, c=core: c.step_autoreset(key, s, a, c.default_params),
                                     lambda key, c=core: c.reset(key, c.default_params), n, n_steps, k, x64=x64),
            }
            for call in pair.values():
                call()  # warm-up
            rows.append((f"gymnax N={n}, {n_steps} steps", precision, n, n_steps, interleaved(pair, rounds)))
        for n, n_steps in steps.items() if args.only != "gymnax" else ():
            pair = {
                "adapter": scan_rollout(marl_env.step, marl_env.reset, n, n_steps, k, agents, x64=x64),
                "core": scan_rollout(lambda key, s, a, c=marl_core, p=marl_params: c.step_autoreset(key, s, a, p),
                                     lambda key, c=marl_core, p=marl_params: c.reset(key, p), n, n_steps, k, agents,
                                     x64=x64),
            }
            for call in pair.values():
                call()
            rows.append((f"jaxmarl N={n}, {n_steps} steps", precision, n, n_steps, interleaved(pair, rounds)))

    medians = {}
    for col, what in ((0, "env steps per wall-clock second"), (1, "env steps per CPU second of this process")):
        print(f"\n{what} (median over {rounds} interleaved rounds [slowest..fastest])")
        print(f"  {'path':<30}{'precision':>10}{'adapter':>30}{'functional core':>30}{'adapter/core':>14}")
        for label, precision, n_envs, n_steps, t in rows:
            cells, med = [], {}
            for name in ("adapter", "core"):
                sps = [n_envs * n_steps / s[col] for s in t[name]]
                med[name] = statistics.median(sps)
                cells.append(f"{med[name]:9.3g} [{min(sps):.2g}..{max(sps):.2g}]")
            medians[(col, label, precision)] = med
            print(f"  {label:<30}{precision:>10}{cells[0]:>30}{cells[1]:>30}{med['adapter'] / med['core']:>13.3f}x")
    if len(precisions) == 2:
        print("\nfloat32 beside float64 (env steps per CPU second, medians)")
        print(f"  {'path':<30}{'core f64':>12}{'core f32':>12}{'f32/f64':>10}{'adapter f64':>14}{'adapter f32':>14}{'f32/f64':>10}")
        for label in dict.fromkeys(row[0] for row in rows):
            a, b = medians[(1, label, "float64")], medians[(1, label, "float32")]
            print(f"  {label:<30}{a['core']:>12.3g}{b['core']:>12.3g}{b['core'] / a['core']:>9.2f}x"
                  f"{a['adapter']:>14.3g}{b['adapter']:>14.3g}{b['adapter'] / a['adapter']:>9.2f}x")
    print(f"total {time.perf_counter() - t_start:.0f} s; {load()}; BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; "
          f"quantgate-env {quantgate_env.__version__}, jax {jax.__version__}")


if __name__ == "__main__":
    main()
