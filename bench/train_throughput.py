"""Training throughput: jaxrl-agents PPO/TRPO vs Stable-Baselines3 PPO / sb3-contrib TRPO.

Prints environment steps per second *including the updates* for the paper configurations on the
quantgate environment (PPO 64 envs x 128 steps, 10 epochs x 32 minibatches; TRPO 4 envs x 2048 steps,
CG 15, critic 10 epochs of 128), beside SB3 PPO and sb3-contrib TRPO with the same hyper-parameters on
the Gymnasium env ``quantgate_env:ZCQPEE-v0`` (DummyVecEnv, as an SB3 user would run it), the speed-up
ratios, each run's peak memory (max RSS of its own process), and the per-seed cost of S seeds trained
together against seeds trained apart (S separate single-seed runs). S seeds run as the trainer runs
them: the rollout vmapped over a slice of the seeds and one slice per core, each in its own thread
(run/host/seed_groups.py); every case compiles under jaxrl-train's small-loop threshold
(timing.trainer_threshold). One compiled call per update, the stats left on the device: the
trainer's blocks of 4 updates (bench/throughput_table.py's CartPole cells) are for runs that do not
evaluate after every update, and the gate preset does.

Each case runs in its own subprocess so the peak memory is that case's alone. Timing starts after one
warm-up update (compilation for JAX, the environment's jit for SB3).

Time to a gate (``--gate``): the wall-clock from starting ``jaxrl-train --preset P`` (imports and
compilation included, as a user waits for them) to the first evaluation with J_T < 1e-2 and < 1e-3,
for each preset and seed, every update evaluated. Each seed runs alone in its own process (the
2-core laptop case) unless ``--gate-together`` trains them in one program (S times the work per
update, so its per-seed times are an upper bound of the alone ones). A run stops once it reaches
1e-3 or ``--gate-limit-s``.

    uv run python bench/train_throughput.py                  # everything, 4 timed updates each
    uv run python bench/train_throughput.py --updates 2 --skip-sb3
    uv run python bench/train_throughput.py --gate-only --gate ppo:fast --gate-seeds 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from timing import load, trainer_threshold

UPDATE_STEPS = 8192  # both paper configs collect 8192 environment steps per update
# Same-size rollouts collected by more, shorter environments: TRPO's 4 envs x 2048 sequential steps
# dominate its update, and 16 x 512 is the option the issue-8 runs use (same 8192 steps, same
# algorithm otherwise).
VARIANTS = {"trpo-16x512": ("trpo", {"n_envs": 16, "n_steps": 512})}
GYM_ID = "quantgate_env:ZCQPEE-v0"
HARMONIC_K = 10**0.4
LR0 = 3e-4


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def _jax_case(algo: str, n_seeds: int, updates: int) -> dict:
    import jax
    import jax.numpy as jnp
    import quantgate_env
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config
    from jaxrl_agents.run.host.seed_groups import over_seed_groups, seed_slices, worker_count

    # A long run's config (20M steps), so the learning-rate schedule is the paper's.
    algo, overrides = VARIANTS.get(algo, (algo, {}))
    cfg = make_config(algo, {"total_steps": 20_000_000, **overrides})
    with jax.enable_x64(True):
        env = quantgate_env.make()
        compiled = compile_algorithm(algo, env, cfg)
        # S seeds as the trainer runs them: one slice of the seed axis per core, a thread each
        # (run/host/seed_groups.py); one seed calls the program as it is.
        update = over_seed_groups(compiled.update, len(seed_slices(n_seeds, worker_count())))
        keys = jnp.stack([jax.random.PRNGKey(s) for s in range(n_seeds)])
        state = compiled.init(keys, env.default_params)
        t0 = time.perf_counter()
        state, stats = update(state, env.default_params)
        jax.block_until_ready(state)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(updates):
            state, stats = update(state, env.default_params)
        jax.block_until_ready(state)
        elapsed = time.perf_counter() - t0
    steps = updates * cfg.rollout_size * n_seeds
    return {"steps_per_s": steps / elapsed, "s_per_update": elapsed / updates,
            "first_update_s": first, "seeds": n_seeds}


def _harmonic(progress_remaining: float) -> float:
    # SB3 passes progress_remaining 1 -> 0; lr = lr0 / (1 + k * progress_done).
    return LR0 / (1.0 + HARMONIC_K * (1.0 - progress_remaining))


def _sb3_case(algo: str, updates: int) -> dict:
    import gymnasium
    import torch

    # One intra-op thread: with more, torch's OpenMP workers spin between the tiny MLP calls and
    # starve the JAX environment steps interleaved with them (measured: SB3 PPO 41 steps/s with
    # torch's default 2 threads vs several hundred with 1). SB3 itself advises 1 thread on CPU.
    torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "1")))
    import quantgate_env  # noqa: F401  (registers the Gymnasium id)
    from stable_baselines3.common.env_util import make_vec_env

    def make_env():
        # A callable rather than the id: make_vec_env would pass render_mode="rgb_array".
        return gymnasium.make(GYM_ID)

    if algo == "ppo":
        from stable_baselines3 import PPO

        venv = make_vec_env(make_env, n_envs=64)
        model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, n_epochs=10,
                    learning_rate=_harmonic, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
                    ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, device="cpu", seed=0,
                    policy_kwargs=dict(net_arch=dict(pi=[128, 128], vf=[128, 128]),
                                       activation_fn=torch.nn.Tanh))
    else:
        from sb3_contrib import TRPO

        venv = make_vec_env(make_env, n_envs=4)
        model = TRPO("MlpPolicy", venv, n_steps=2048, batch_size=128, gamma=0.99, gae_lambda=0.95,
                     cg_max_steps=15, cg_damping=0.1, line_search_shrinking_factor=0.8,
                     line_search_max_iter=10, n_critic_updates=10, target_kl=0.01,
                     learning_rate=_harmonic, device="cpu", seed=0,
                     policy_kwargs=dict(net_arch=dict(pi=[128, 128], vf=[128, 128]),
                                        activation_fn=torch.nn.ReLU))
    t0 = time.perf_counter()
    model.learn(total_timesteps=UPDATE_STEPS, reset_num_timesteps=True)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.learn(total_timesteps=updates * UPDATE_STEPS, reset_num_timesteps=False)
    elapsed = time.perf_counter() - t0
    return {"steps_per_s": updates * UPDATE_STEPS / elapsed, "s_per_update": elapsed / updates,
            "first_update_s": first, "seeds": 1, "torch_threads": torch.get_num_threads()}


def _run_one(case: str, updates: int) -> dict:
    kind, algo, seeds = case.split(":")
    if kind == "jax":
        out = _jax_case(algo, int(seeds), updates)
    else:
        out = _sb3_case(algo, updates)
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def _spawn(case: str, updates: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", case, "--updates", str(updates)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"}
    return json.loads(p.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ time to a gate
GATE_THRESHOLDS = (1e-2, 1e-3)
# An evaluation line of jaxrl-train (common/evaluation.format_eval_line + the gate env's fields).
_EVAL_LINE = re.compile(r"^(?:seed (\d+) )?\[\s*(\d+)\]\s+\d+s\s+R=\s*\S+\s+minJT=([0-9.eE+-]+)")


def _time_to_gate(algo: str, preset: str, seeds: list[int], limit_s: float) -> dict[int, dict]:
    """Run ``jaxrl-train --preset`` for `seeds` in one process; per seed, when each threshold fell.

    Returns {seed: {"t": {threshold: seconds since the process started}, "step": {threshold:
    steps}, "best": lowest J_T seen, "last_step": steps reached}}.
    """
    out = tempfile.mkdtemp(prefix="gate_")
    cmd = [sys.executable, "-m", "jaxrl_agents.console.cli", "--algo", algo, "--preset", preset,
           "--seeds", *map(str, seeds), "--progress", "lines", "--report-every", "1",
           "--checkpoint-every", "1000000", "--out", out, "--tag", "gate"]
    res = {s: {"t": {}, "step": {}, "best": float("inf"), "last_step": 0} for s in seeds}
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    try:
        for line in p.stdout:
            now = time.perf_counter() - t0
            m = _EVAL_LINE.match(line)
            if m:
                seed = int(m.group(1)) if m.group(1) else seeds[0]
                step, jt = int(m.group(2)), float(m.group(3))
                r = res[seed]
                r["best"], r["last_step"] = min(r["best"], jt), step
                for th in GATE_THRESHOLDS:
                    if jt < th and th not in r["t"]:
                        r["t"][th], r["step"][th] = now, step
            if all(GATE_THRESHOLDS[-1] in r["t"] for r in res.values()) or now > limit_s:
                break
    finally:
        p.kill()
        p.wait()
    return res


def _gate_report(cases: list[str], seeds: list[int], together: bool, limit_s: float) -> None:
    print(f"\ntime to a gate: wall-clock s from the command's start (imports and compilation "
          f"included) to the first evaluation below each J_T, every update evaluated, seeds "
          f"{'together in one process' if together else 'each alone'}; limit {limit_s:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f} at the start\n")
    print(f"{'preset':<12}{'seed':>5}{'t(1e-2) s':>11}{'steps':>12}{'t(1e-3) s':>11}{'steps':>12}"
          f"{'best J_T':>11}")
    for case in cases:
        algo, preset = case.split(":")
        if together:
            found = _time_to_gate(algo, preset, seeds, limit_s)
        else:
            found = {}
            for s in seeds:
                found.update(_time_to_gate(algo, preset, [s], limit_s))
        for s in seeds:
            r = found[s]
            cells = []
            for th in GATE_THRESHOLDS:
                cells += ([f"{r['t'][th]:>11.0f}", f"{r['step'][th]:>12,}"] if th in r["t"]
                          else [f"{'>' + str(int(limit_s)) if r['last_step'] else '-':>11}",
                                f"{'(' + format(r['last_step'], ',') + ')':>12}"])
            print(f"{case:<12}{s:>5}{''.join(cells)}{r['best']:>11.2e}")
        for th in GATE_THRESHOLDS:
            times = sorted(found[s]["t"][th] for s in seeds if th in found[s]["t"])
            median = f"median {times[len(times) // 2]:.0f} s" if len(times) * 2 > len(seeds) \
                else "median not reached"
            print(f"{case:<12} J_T < {th:.0e}: {len(times)}/{len(seeds)} seeds within "
                  f"{limit_s:.0f} s, {median}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=4, help="timed updates per case (after warm-up)")
    ap.add_argument("--seeds-together", type=int, default=4, help="S for the seeds comparison")
    ap.add_argument("--skip-sb3", action="store_true", help="JAX cases only")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one case
    ap.add_argument("--gate", nargs="*", default=["ppo:fast", "trpo:fast", "ppo:paper",
                                                   "trpo:paper"], metavar="ALGO:PRESET",
                    help="presets timed to J_T < 1e-2 and < 1e-3 (none: skip)")
    ap.add_argument("--gate-seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--gate-limit-s", type=float, default=1200.0,
                    help="wall-clock limit of one time-to-gate run")
    ap.add_argument("--gate-together", action="store_true",
                    help="train the seeds together in one process (an upper bound per seed)")
    ap.add_argument("--gate-only", action="store_true", help="only the time-to-gate runs")
    args = ap.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does
    if args.one:
        print(json.dumps(_run_one(args.one, args.updates)))
        return
    if args.gate_only:
        _gate_report(args.gate, args.gate_seeds, args.gate_together, args.gate_limit_s)
        return

    try:
        import quantgate_env  # noqa: F401
    except ImportError:
        sys.exit("bench/train_throughput.py needs quantgate_env (the environment package)")
    s = args.seeds_together
    cases = ["jax:ppo:1", "jax:trpo:1", "jax:trpo-16x512:1"]
    if not args.skip_sb3:
        cases += ["sb3:ppo:1", "sb3:trpo:1"]
    cases += [f"jax:ppo:{s}", f"jax:trpo:{s}"]
    results = {}
    for case in cases:
        print(f"running {case} ...", file=sys.stderr, flush=True)
        results[case] = _spawn(case, args.updates)

    print(f"\ntraining throughput, {args.updates} timed updates of {UPDATE_STEPS} steps per case "
          f"(env steps/s include the updates); {load()}\n")
    print(f"{'case':<26}{'steps/s':>10}{'s/update':>10}{'1st update s':>14}{'peak RSS MB':>13}")
    labels = {"jax:ppo:1": "jaxrl-agents PPO", "jax:trpo:1": "jaxrl-agents TRPO",
              "jax:trpo-16x512:1": "jaxrl-agents TRPO 16x512",
              "sb3:ppo:1": "SB3 PPO", "sb3:trpo:1": "sb3-contrib TRPO",
              f"jax:ppo:{s}": f"jaxrl-agents PPO x{s} seeds", f"jax:trpo:{s}": f"jaxrl-agents TRPO x{s} seeds"}
    for case in cases:
        r = results[case]
        if "error" in r:
            print(f"{labels[case]:<26}  error: {r['error']}")
            continue
        print(f"{labels[case]:<26}{r['steps_per_s']:>10,.0f}{r['s_per_update']:>10.2f}"
              f"{r['first_update_s']:>14.1f}{r['peak_rss_mb']:>13,.0f}")
    print()
    for algo in ("ppo", "trpo"):
        j, b = results.get(f"jax:{algo}:1", {}), results.get(f"sb3:{algo}:1", {})
        if "steps_per_s" in j and "steps_per_s" in b:
            print(f"speed-up {algo.upper()}: jaxrl-agents / SB3 = {j['steps_per_s'] / b['steps_per_s']:.1f}x")
    j, v = results.get("jax:trpo:1", {}), results.get("jax:trpo-16x512:1", {})
    if "steps_per_s" in j and "steps_per_s" in v:
        print(f"TRPO 16 envs x 512 steps / 4 x 2048 (same 8192 steps per update) = "
              f"{v['steps_per_s'] / j['steps_per_s']:.1f}x")
    for algo in ("ppo", "trpo"):
        one, many = results.get(f"jax:{algo}:1", {}), results.get(f"jax:{algo}:{s}", {})
        if "s_per_update" in one and "s_per_update" in many:
            together = many["s_per_update"] / s
            print(f"{algo.upper()} per seed and update: {s} seeds together {together:.2f} s, apart "
                  f"{one['s_per_update']:.2f} s ({one['s_per_update'] / together:.2f}x cheaper together)")
    if args.gate:
        _gate_report(args.gate, args.gate_seeds, args.gate_together, args.gate_limit_s)


if __name__ == "__main__":
    main()
