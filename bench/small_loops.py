"""XLA's small-loop threshold: XLA's default (1 KiB) against the one jaxrl-train sets (256 KiB).

XLA reads its flags once per process, so the two thresholds cannot be interleaved inside one
process: each round starts one child process per threshold, alternating, and every child measures
the same cases (compiled first, then timed). The table gives medians over rounds, and whether the
two thresholds computed the same bits (a SHA-256 over every output):

    env step N        jit(scan over 512 steps of vmap(GateEnv.step_autoreset)) over N envs, paper
                      config, float64, fixed actions: microseconds per step of all N envs
    gym single step   gymnasium.make("quantgate_env:ZCQPEE-v0") stepped from Python (latency)
    TRPO update       compile_algorithm("trpo", paper config).update, 4 envs x 2048 steps
    PPO update        the same for PPO's paper config, 64 envs x 128 steps

    uv run --locked --group test python bench/small_loops.py            # 3 rounds, ~6 min
    uv run --locked --group test python bench/small_loops.py --rounds 5

(``--child BYTES`` is the child's entry point.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import load  # noqa: E402

XLA_DEFAULT = 1024  # XLA:CPU's own default (cpu_options.cc): the same program as no flag at all
RAISED = 256 * 1024  # jaxrl_agents.run.host.small_loops.DEFAULT_BYTES
ENV_BATCHES = (1, 4, 16, 64)
SCAN_STEPS = 512


def _digest(tree) -> str:
    import jax
    import numpy as np

    return hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in jax.tree.leaves(tree))).hexdigest()[:16]


def _timed(fn, repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn` (already compiled)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _env_scan(n: int):
    import jax
    import jax.numpy as jnp
    from quantgate_env import GateEnv

    env = GateEnv()
    params = env.default_params
    k = env.config.n_time_steps
    _, state = jax.vmap(lambda key: env.reset(key, params))(jax.random.split(jax.random.PRNGKey(0), n))

    def run(state):
        def body(s, t):
            a = 0.1 * jnp.sin(0.37 * t + jnp.arange(n * k).reshape(n, k))
            a = a - jnp.mean(a, axis=-1, keepdims=True)
            _, s, r, _, _, info = jax.vmap(lambda s, a: env.step_autoreset(jax.random.PRNGKey(0), s, a, params))(s, a)
            return s, (r, info["JT"])
        return jax.lax.scan(body, state, jnp.arange(SCAN_STEPS))

    compiled = jax.jit(run).lower(state).compile()
    out = jax.block_until_ready(compiled(state))
    return (lambda: jax.block_until_ready(compiled(state))), _digest(out)


def _gym_single():
    import gymnasium
    import numpy as np
    import quantgate_env  # noqa: F401  (registers the id)

    env = gymnasium.make("quantgate_env:ZCQPEE-v0")
    env.reset(seed=0)
    action = np.zeros(3, dtype=np.float32)
    for _ in range(20):  # compiled
        env.step(action)

    def steps():
        env.reset(seed=0)
        for _ in range(200):
            env.step(action)
    return steps


def _update(algo: str):
    import jax
    import jax.numpy as jnp
    import quantgate_env
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config

    cfg = make_config(algo, {"total_steps": 20_000_000})
    env = quantgate_env.make()
    compiled = compile_algorithm(algo, env, cfg)
    holder = {"state": compiled.init(jnp.stack([jax.random.PRNGKey(1)]), env.default_params)}

    def one():
        holder["state"], stats = compiled.update(holder["state"], env.default_params)
        jax.block_until_ready(stats)
    one()
    one()
    digest = _digest(jax.device_get(holder["state"]))  # after two updates
    return one, digest


def child(threshold: int) -> None:
    """Measure every case in this process (compiled under `threshold`); print one JSON line."""
    import jax
    from jaxrl_agents.run.host.small_loops import in_effect

    assert in_effect() == threshold, (in_effect(), threshold)
    out = {}
    with jax.enable_x64(True):
        for n in ENV_BATCHES:
            fn, digest = _env_scan(n)
            out[f"env step N={n}, us"] = (_timed(fn, 3) / SCAN_STEPS * 1e6, digest)
        fn = _gym_single()
        out["gym single step, us"] = (_timed(fn, 3) / 200 * 1e6, None)
        for algo, repeats in (("trpo", 5), ("ppo", 3)):
            fn, digest = _update(algo)
            out[f"{algo.upper()} paper update, ms"] = (_timed(fn, repeats) * 1e3, digest)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args.child)
    from jaxrl_agents.run.host.small_loops import flags_with

    results = {XLA_DEFAULT: [], RAISED: []}
    print(f"start: {load(loops_here=False)}", flush=True)
    for r in range(args.rounds):
        for threshold in (XLA_DEFAULT, RAISED) if r % 2 == 0 else (RAISED, XLA_DEFAULT):
            env = dict(os.environ, XLA_FLAGS=flags_with(os.environ.get("XLA_FLAGS"), threshold),
                       OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
            line = subprocess.run([sys.executable, __file__, "--child", str(threshold)], env=env,
                                  capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            results[threshold].append(json.loads(line))
            print(f"round {r + 1}, threshold {threshold}: done", file=sys.stderr, flush=True)
    print(f"end: {load(loops_here=False)}; medians of {args.rounds} rounds, one process per threshold and round")
    print()
    print(f"| case | XLA's default ({XLA_DEFAULT} B) | {RAISED // 1024} KiB | speed-up | same bits |")
    print("| --- | --- | --- | --- | --- |")
    for case in results[XLA_DEFAULT][0]:
        a = statistics.median(r[case][0] for r in results[XLA_DEFAULT])
        b = statistics.median(r[case][0] for r in results[RAISED])
        digests = {r[case][1] for r in results[XLA_DEFAULT]} | {r[case][1] for r in results[RAISED]}
        same = "n/a" if None in digests else ("yes" if len(digests) == 1 else "no")
        print(f"| {case} | {a:,.1f} | {b:,.1f} | {a / b:.2f}x | {same} |")


if __name__ == "__main__":
    main()
