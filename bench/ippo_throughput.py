"""IPPO throughput on the discrete multi-actuator gate env: Python-loop vs compiled path.

Prints agent-steps per second (environment steps x 3 agents) *including the updates*:

- python: ``quantgate_env.pettingzoo.parallel_env`` stepped from Python by IPPO (one env; each step
  is one compiled policy call for the three agents, which share a network definition, plus the
  adapter's compiled physics step), rollouts of `--n-steps`;
- python rollout only: the same collection without the updates, to show where the time goes;
- compiled: a trainer session (`jaxrl_agents.run.session.Session`) on the env's functional core
  (``env.core``), `n_envs` environments, rollout + every agent's PPO epochs in one jitted update (rollouts of 16
  steps per env); run files go to a temporary directory, and no evaluation or checkpoint falls
  inside the timed updates.

All runs use the same network and PPO settings (hidden 64x64, 4 epochs x 4 minibatches). Timing
starts after a warm-up run that compiles everything.

    uv run python bench/ippo_throughput.py
    uv run python bench/ippo_throughput.py --pulse-length 1000 --n-envs 64 256 --lagrangian
"""

from __future__ import annotations

import argparse
import time

import jax
from timing import load, trainer_threshold


def _python(env_opts, cfg, algo_cls, rollouts) -> dict:
    from jaxrl_agents.common.state import stack_trees
    from jaxrl_agents.ippo.agent_axis import group_agents
    from jaxrl_agents.ippo.learn import init_agent_params
    from jaxrl_agents.ippo.rollout import ParallelRunner
    from jaxrl_agents.ippo.spaces import AgentSpaces
    from quantgate_env.pettingzoo import parallel_env

    env = parallel_env(**env_opts)
    n_agents = len(env.possible_agents)
    algo_cls(cfg, seed=0).train(env, cfg["n_steps"] * 2)  # compile (update shapes, env step)
    t0 = time.perf_counter()
    algo_cls(cfg, seed=1).train(env, cfg["n_steps"] * rollouts)
    train_s = time.perf_counter() - t0

    sp = {a: AgentSpaces.build(a, env.observation_space(a), env.action_space(a), cfg["hidden"],
                               "tanh") for a in env.possible_agents}
    groups = group_agents(sp)
    params = [stack_trees([init_agent_params(g.model, jax.random.PRNGKey(i), False)
                            for i in range(len(g.agents))]) for g in groups]
    runner = ParallelRunner(env, sp, groups, seed=0)
    runner.collect(params, 8, jax.random.PRNGKey(0))
    t0 = time.perf_counter()
    runner.collect(params, cfg["n_steps"] * rollouts, jax.random.PRNGKey(1))
    collect_s = time.perf_counter() - t0
    steps = cfg["n_steps"] * rollouts
    return {"steps": steps, "train": steps * n_agents / train_s,
            "collect": steps * n_agents / collect_s, "n_agents": n_agents}


def _compiled(env_opts, cfg, algo_cls, n_envs, updates) -> dict:
    import tempfile

    from jaxrl_agents.run.session import Session
    from quantgate_env.pettingzoo import parallel_env

    env = parallel_env(**env_opts)
    n_agents = len(env.possible_agents)
    algo = "ippo_lagrangian" if algo_cls.lagrangian else "ippo"
    per_update = n_envs * 16
    run_cfg = dict(cfg, n_envs=n_envs, n_steps=16, total_steps=per_update * (updates + 2))
    with tempfile.TemporaryDirectory() as out, Session.open(
            algo, env, config=run_cfg, seeds=(1,), eval_every=10**12, checkpoint_every=10**6,
            out=out, progress="off") as session:
        t0 = time.perf_counter()
        session.advance(1)  # compiles the update
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        session.advance(updates)
        elapsed = time.perf_counter() - t0
    return {"steps": per_update * updates, "train": per_update * updates * n_agents / elapsed,
            "compile_s": compile_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pulse-length", type=int, default=60, help="samples per pulse (paper: 1000)")
    p.add_argument("--n-steps", type=int, default=128, help="Python path: steps per rollout")
    p.add_argument("--rollouts", type=int, default=3, help="Python path: timed rollouts")
    p.add_argument("--n-envs", type=int, nargs="+", default=[16, 64, 256],
                   help="compiled path: environments per update")
    p.add_argument("--updates", type=int, default=5, help="compiled path: timed updates")
    p.add_argument("--lagrangian", action="store_true", help="IPPO-Lagrangian instead of IPPO")
    args = p.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does

    from jaxrl_agents import IPPO, IPPO_Lagrangian

    algo = IPPO_Lagrangian if args.lagrangian else IPPO
    env_opts = {"action_mode": "discrete", "pulse_length": args.pulse_length}
    cfg = {"n_steps": args.n_steps, "hidden": (64, 64), "n_epochs": 4, "n_minibatches": 4}
    print(f"{algo.__name__} on quantgate_env.pettingzoo.parallel_env({env_opts}), "
          f"backend {jax.default_backend()}, {jax.device_count()} device(s); {load()}")
    py = _python(env_opts, cfg, algo, args.rollouts)
    print(f"{'path':<34}{'agent-steps/s':>15}{'env-steps timed':>17}")
    print(f"{'python (rollout + update)':<34}{py['train']:>15,.0f}{py['steps']:>17,}")
    print(f"{'python (rollout only)':<34}{py['collect']:>15,.0f}{py['steps']:>17,}")
    for n in args.n_envs:
        c = _compiled(env_opts, cfg, algo, n, args.updates)
        label = f"compiled, {n} envs (compile {c['compile_s']:.0f} s)"
        print(f"{label:<34}{c['train']:>15,.0f}{c['steps']:>17,}   x{c['train'] / py['train']:.0f}")


if __name__ == "__main__":
    main()
