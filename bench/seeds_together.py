"""Seeds trained together against apart, per seed and update, in one process (issue 36, item 3).

    uv run --locked python bench/seeds_together.py [--seeds 8] [--rounds 5] [--algos ppo trpo]

For each configuration, on the gate environment with the paper's hyper-parameters (PPO 64 envs x
128 steps, 10 epochs x 32 minibatches of 256; TRPO 4 envs x 2048 steps, and the 16 x 512 option
the gate recipe polishes with), three ways to train S seeds:

- **apart**: one seed's compiled update (what S separate runs would each pay), per seed;
- **one program**: the S seeds in one compiled update (the seed axis vmapped through the rollout,
  learning seed after seed), as the trainer ran them before seed slices;
- **slices**: the trainer's way now (`run.host.seed_groups`): the S seeds split into one slice per
  core, each slice's update in its own thread.

Each way runs as the trainer does: `--per-call` updates in one compiled call
(`Compiled.update_block`, run/host/update_blocks.py; 1: one call per update, as before the
trainer's blocks). Every case is compiled first; then rounds interleave the cases (so a burst of load on a shared
machine hits all of them alike) and the medians over rounds are printed with the ratio apart /
together. The PPO rows also give the update's achieved GFLOP/s (its network passes counted from
the layer shapes) beside a plain `jnp.dot` at the learning step's shape (256 x 128 x 128) and at
8192 rows, measured in the same process.

``--phases`` times the update's two halves instead, for one seed apart and for the S seeds in the
trainer's slices: the rollout (vmapped over a slice's seeds), the learning phase seed after seed
(`lax.map`, the trainer's) and vmapped (the alternative), as wall and process CPU seconds,
interleaved over rounds. From them it prints the bound that learning alone puts on "seeds
together": however cheap the batched rollout, apart / together <= (one seed's update) / (the S
seeds' learning per seed).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

import jax
import jax.numpy as jnp
from jaxrl_agents.run.host.update_blocks import UPDATES_PER_CALL
from timing import trainer_calls, trainer_threshold

CONFIGS = {
    "ppo": ("ppo", {}),
    "trpo": ("trpo", {}),
    "trpo-16x512": ("trpo", {"n_envs": 16, "n_steps": 512, "activation": "tanh"}),
}


def _layer_flops(sizes: list[int], rows: int) -> float:
    """Multiply-adds x 2 of one forward pass of an MLP with layer `sizes` over `rows` rows."""
    return 2.0 * rows * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))


def ppo_update_gflop(cfg, obs_dim: int, act_dim: int) -> float:
    """GFLOP of one PPO update's network passes.

    The rollout's forward passes, then each gradient step's forward and backward (backward = 2 x
    forward: the input and the weight gradients).
    """
    hidden = list(cfg.hidden)
    actor, critic = [obs_dim, *hidden, act_dim], [obs_dim, *hidden, 1]
    rollout = _layer_flops(actor, cfg.rollout_size) + _layer_flops(critic, cfg.rollout_size)
    mb = cfg.rollout_size // cfg.n_minibatches
    step = 3 * (_layer_flops(actor, mb) + _layer_flops(critic, mb))
    return (rollout + cfg.n_epochs * cfg.n_minibatches * step) / 1e9


def dot_gflops(rows: int, inner: int, cols: int, reps: int = 200) -> float:
    """Achieved GFLOP/s of a jitted float32 (rows x inner) @ (inner x cols), median of 5 timings."""
    a = jnp.ones((rows, inner), jnp.float32)
    b = jnp.ones((inner, cols), jnp.float32)
    if inner != cols:
        raise ValueError(f"cols: expected the chain's square shape ({inner}), got {cols}")

    @jax.jit
    def many(a, b):
        def body(x, _):  # a chain of products: each needs the whole previous one
            return (x @ b) * (1.0 / inner), None
        return jax.lax.scan(body, a, None, length=reps)[0]

    many(a, b).block_until_ready()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        many(a, b).block_until_ready()
        times.append(time.perf_counter() - t)
    return 2.0 * rows * inner * cols * reps / statistics.median(times) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8, help="S, the seeds trained together")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    ap.add_argument("--algos", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--per-call", type=int, default=UPDATES_PER_CALL,
                    help="updates per compiled call (the trainer's blocks; 1: one call each)")
    ap.add_argument("--phases", action="store_true",
                    help="time the rollout and learning halves, apart and in one slice (above)")
    args = ap.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does
    if args.per_call < 1:
        ap.error(f"--per-call: expected a positive integer, got {args.per_call}")
    if args.phases:
        phases(args.seeds, args.rounds, args.algos)
        return

    import quantgate_env
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config
    from jaxrl_agents.run.host.seed_groups import over_seed_groups, seed_slices, worker_count

    S = args.seeds
    slices = len(seed_slices(S, worker_count()))
    cases = {}  # (config, way) -> [update, state, n_seeds]
    with jax.enable_x64(True):
        env = quantgate_env.make()
        params = env.default_params
        for name in args.algos:
            algo, over = CONFIGS[name]
            cfg = make_config(algo, {"total_steps": 20_000_000, **over})
            compiled = compile_algorithm(algo, env, cfg)
            program = trainer_calls(compiled, args.per_call)
            for way, n, update in (("apart", 1, program),
                                   ("one program", S, program),
                                   (f"{slices} slices", S, over_seed_groups(program, slices))):
                state = compiled.init(jnp.stack([jax.random.PRNGKey(s) for s in range(n)]), params)
                state, _ = update(state, params)  # compiles
                jax.block_until_ready(state)
                cases[(name, way)] = [update, state, n, cfg]
            print(f"compiled {name}", flush=True)
        times = {key: [] for key in cases}
        for _ in range(args.rounds):
            for key, case in cases.items():
                update, state, n, _ = case
                t = time.perf_counter()
                state, _ = update(state, params)
                jax.block_until_ready(state)
                times[key].append((time.perf_counter() - t) / (n * args.per_call))
                case[1] = state
        small, large = dot_gflops(256, 128, 128), dot_gflops(8192, 128, 128)
    load = os.getloadavg()

    print(f"\nseeds together vs apart: gate env, paper hyper-parameters, S = {S} seeds, "
          f"{slices} slices on {worker_count()} cores, {args.per_call} updates a call, "
          f"medians of {args.rounds} interleaved rounds, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print("| config | way | s per seed and update | env steps/s (all seeds) | apart / this |")
    print("| --- | --- | --- | --- | --- |")
    for name in args.algos:
        apart = statistics.median(times[(name, "apart")])
        for (n, way), ts in times.items():
            if n != name:
                continue
            m = statistics.median(ts)
            cfg = cases[(n, way)][3]
            print(f"| {name} | {way} | {m:.3f} | {cfg.rollout_size / m:,.0f} | {apart / m:.2f}x |")
    if "ppo" in args.algos:
        cfg = cases[("ppo", "apart")][3]
        obs_dim = env.observation_space.shape[0]
        act_dim = env.action_space.shape[0]
        gflop = ppo_update_gflop(cfg, obs_dim, act_dim)
        print(f"\nPPO update: {gflop:.1f} GFLOP of network passes")
        for way in ("apart", "one program", f"{slices} slices"):
            m = statistics.median(times[("ppo", way)])
            print(f"  {way:<12} {gflop / m:6.1f} GFLOP/s")
        print(f"  jnp.dot 256 x 128 x 128:  {small:6.1f} GFLOP/s;  8192 x 128 x 128: {large:6.1f} "
              f"GFLOP/s (same process)")


def phases(n_seeds: int, rounds: int, algos: list[str]) -> None:
    """Print each half's wall and CPU seconds per seed, apart and together, and learning's bound."""
    import quantgate_env
    from jaxrl_agents import ppo, trpo
    from jaxrl_agents.common.state import stack_trees
    from jaxrl_agents.run.algorithms import make_config, model_for
    from jaxrl_agents.run.host.seed_groups import over_seed_groups, seed_slices, worker_count
    from timing import interleaved, load

    cores = worker_count()
    n_slices = len(seed_slices(n_seeds, cores))
    cases = {}
    with jax.enable_x64(True):
        env = quantgate_env.make()
        params = env.default_params
        for name in algos:
            algo, over = CONFIGS[name]
            module = {"ppo": ppo.update, "trpo": trpo.update}[algo]
            cfg = make_config(algo, {"total_steps": 20_000_000, **over})
            model = model_for(env, cfg)
            rollout_phase, learn_phase = module.make_phases(model, env, cfg)
            learn_phase = functools.partial(learn_phase, settings=module.traced_settings(cfg))
            # (states, batches) as one argument, so that the seed slices cut both
            learn_map = jax.jit(lambda sb, f=learn_phase: jax.lax.map(lambda x: f(*x), sb))
            learn_vmap = jax.jit(lambda sb, f=learn_phase: jax.vmap(f)(*sb))
            rollout = jax.jit(jax.vmap(rollout_phase, in_axes=(0, None)))
            for n in (1, n_seeds):
                states = stack_trees([module.init(jax.random.PRNGKey(s), model, env, params, cfg)
                                      for s in range(n)])
                ways = [("rollout", over_seed_groups(rollout, n_slices), (states, params))]
                after, batch = ways[0][1](states, params)
                jax.block_until_ready(batch)
                ways.append(("learning, seed after seed", over_seed_groups(learn_map, n_slices),
                             ((after, batch),)))
                if n > 1:
                    ways.append(("learning, vmapped", over_seed_groups(learn_vmap, n_slices),
                                 ((after, batch),)))
                for way, fn, fn_args in ways:
                    jax.block_until_ready(fn(*fn_args))  # compiles
                    cases[(name, n, way)] = functools.partial(
                        lambda f, a: jax.block_until_ready(f(*a)), fn, fn_args)
            print(f"compiled {name}", flush=True)
        times = interleaved(cases, rounds)

    print(f"\nupdate halves: gate env, paper hyper-parameters, 1 seed apart and {n_seeds} seeds "
          f"together ({n_slices} slices on {cores} cores, as the trainer runs them), medians of "
          f"{rounds} interleaved rounds, {load()}\n")
    print("| config | seeds | half | wall s per seed | CPU s per seed | cores busy |")
    print("| --- | --- | --- | --- | --- | --- |")
    wall = {}
    for (name, n, way), ts in times.items():
        w = statistics.median(t[0] for t in ts) / n
        c = statistics.median(t[1] for t in ts) / n
        wall[(name, n, way)] = w
        print(f"| {name} | {n} | {way} | {w:.3f} | {c:.3f} | {c / w:.2f} |")
    for name in algos:
        apart = wall[(name, 1, "rollout")] + wall[(name, 1, "learning, seed after seed")]
        learn = min(wall[(name, n_seeds, w)] for w in ("learning, seed after seed",
                                                       "learning, vmapped"))
        print(f"\n{name}: one seed's update {apart:.3f} s; the {n_seeds} seeds' learning alone "
              f"{learn:.3f} s per seed (the faster way), so apart / together <= {apart / learn:.2f}x "
              f"even with a free rollout")


if __name__ == "__main__":
    main()
