"""The published throughput table (issue 36, item 5): env steps/s of every cell from one process.

    uv run --locked --group test python bench/throughput_table.py [--rounds 3] [--seeds 8]
    uv run --locked --group test python bench/throughput_table.py --quick      # smoke run

Cells (rows x columns: gymnax CartPole-v1 and the gate, 1 seed and S = 8 seeds):

- **jaxrl-agents PPO, TRPO, IPPO**, compiled as the trainer compiles them (`compile_algorithm`),
  called as the trainer calls them: 4 updates a call (``compiled.update_block``, its blocks) where
  a unit holds whole blocks (CartPole's 16 updates), one call of ``compiled.update`` per update
  otherwise (the gate's unit of 1 update; the gate preset evaluates after every update), the
  stats read after every call; S seeds the trainer's way now:
  ``over_seed_groups(program, n_slices)`` with ``n_slices = len(seed_slices(S,
  worker_count()))`` (one slice per core, as bench/seeds_together.py's "slices").
  Precision as a run picks it (`run.host.precision`): CartPole float32 (it declares no need for
  x64), the gate float64 under ``jax.enable_x64(True)`` (``quantgate_env.make()``).
  IPPO needs a multi-agent environment: on the gate the trainer's default multi-agent core
  (``DEFAULT_MARL_ENV``, ``quantgate_env:make_multi``: 3 agents, one env step is 3 agent
  transitions; the table counts env steps); CartPole has none ("n/a").
- **rejax PPO** (0.1.3), bench/rejax_compare.py's builder (rejax's native element-wise clipping, its
  own one ``train`` program per budget of ``--updates`` updates, evaluation off), float32 on both
  environments (the gate through ``LegacyStepView(quantgate_env.gymnax.make(precision="float32"))``,
  what a float32 stack such as rejax takes); S seeds with rejax's documented
  ``jax.jit(jax.vmap(algo.train))`` over S keys.
- **SB3 PPO and sb3-contrib TRPO** on the gate (bench/train_throughput.py's ``_sb3_case``: the
  Gymnasium env in DummyVecEnv, torch on 1 thread, one model built and warmed up by one update each
  round, then ``--sb3-updates`` timed updates), SB3 PPO on gymnasium CartPole-v1 (DummyVecEnv, the
  CartPole settings below, the same warm-up). SB3 trains one seed per process: it has no vmapped
  seeds ("n/a").

Hyper-parameters. CartPole: bench/rejax_compare.py's matched settings for PPO, on every library
(16 envs x 128 steps, 4 epochs x 4 minibatches, tanh MLP (64, 64), constant lr 3e-4, Adam eps
1e-8, gamma 0.99, lambda 0.95, clip 0.2, vf 0.5, no entropy bonus, gradient clip 0.5); TRPO there
takes small settings of its own: the same 16 x 128 rollout and tanh (64, 64) networks, constant
lr 3e-4, its defaults otherwise (CG 15, damping 0.1, target KL 0.01, line search 10 x 0.8, critic
10 epochs of minibatches of 128). The gate: each algorithm's paper configuration (bench/
seeds_together.py's ``CONFIGS``: PPO 64 envs x 128 steps, 10 epochs x 32 minibatches, tanh (128,
128); TRPO 4 envs x 2048 steps, ReLU (128, 128), CG 15, critic 10 epochs of 128), rejax PPO and
SB3 with PPO's (rejax with its constant lr and element-wise clipping: neither changes the work of
an update), and IPPO its defaults (4 epochs x 4 minibatches, tanh (64, 64) per agent) with PPO's
rollout of 64 envs x 128 steps.

Timing. Every cell is built and compiled first (one untimed unit each); then ``--rounds`` rounds
each time every cell once, in an order reversed every other round, so load from other processes
hits all cells alike. A cell's unit: ``--cartpole-updates`` (CartPole) or ``--gate-updates`` (the
gate) updates of every seed, blocked on at the end (rejax: one ``train`` of that many updates;
SB3: as above). Printed: env steps/s of all seeds together, median over rounds, and per seed for
S seeds; the load average before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from unittest import mock

import jax
import jax.numpy as jnp
import rejax_compare
import seeds_together
import train_throughput
from jaxrl_agents.run.host.update_blocks import UPDATES_PER_CALL
from timing import load, trainer_calls, trainer_threshold

ENVS = ("cartpole", "gate")
ROWS = ("jaxrl-agents PPO", "jaxrl-agents TRPO", "jaxrl-agents IPPO", "rejax PPO", "SB3 PPO",
        "sb3-contrib TRPO")
# rejax_compare's CartPole settings, as our configs and SB3's fields.
_CARTPOLE_PPO = dict(n_envs=rejax_compare.N_ENVS, n_steps=rejax_compare.N_STEPS,
                     n_epochs=rejax_compare.EPOCHS, n_minibatches=rejax_compare.MINIBATCHES,
                     lr=rejax_compare.HP["lr"], lr_decay=0.0, adam_eps=1e-8,
                     gamma=rejax_compare.HP["gamma"], gae_lambda=rejax_compare.HP["gae_lambda"],
                     clip_eps=rejax_compare.HP["clip_eps"], vf_coef=rejax_compare.HP["vf_coef"],
                     ent_coef=rejax_compare.HP["ent_coef"],
                     max_grad_norm=rejax_compare.HP["max_grad_norm"],
                     hidden=rejax_compare.HP["hidden"], activation="tanh")
_CARTPOLE_TRPO = dict(n_envs=rejax_compare.N_ENVS, n_steps=rejax_compare.N_STEPS, lr=3e-4,
                      lr_decay=0.0, hidden=(64, 64), activation="tanh")
# rejax_compare's module settings for rejax on the gate: PPO's paper configuration.
_REJAX_GATE = dict(N_ENVS=64, N_STEPS=128, EPOCHS=10, MINIBATCHES=32,
                   HP={**rejax_compare.HP, "hidden": (128, 128)})
TOTAL = 20_000_000  # a long run's budget: schedules as in a real run


@dataclasses.dataclass
class Cell:
    row: str
    env: str
    seeds: int
    x64: bool
    run: Callable[[int], tuple[int, float]]  # round -> (env steps of all seeds, seconds)
    rates: list = dataclasses.field(default_factory=list)

    def time(self, r: int) -> float:
        with jax.enable_x64(self.x64):
            steps, seconds = self.run(r)
        rate = steps / seconds
        if r >= 0:
            self.rates.append(rate)
        return rate


def ours(algo: str, env, cfg, n_seeds: int, updates: int):
    """One unit of the trainer's updates: `updates` for `n_seeds` seeds (sliced when > 1).

    As the trainer calls them: blocks of `UPDATES_PER_CALL` updates a call when `updates` is a
    multiple of it (one call per update otherwise), the stats read after every call.
    """
    from jaxrl_agents.run.algorithms import compile_algorithm
    from jaxrl_agents.run.host.seed_groups import over_seed_groups, seed_slices, worker_count

    params = env.default_params
    compiled = compile_algorithm(algo, env, cfg)
    slices = len(seed_slices(n_seeds, worker_count()))
    # The trainer's blocks of updates (run/host/update_blocks.py) where the unit holds whole blocks.
    per_call = UPDATES_PER_CALL if updates % UPDATES_PER_CALL == 0 else 1
    update = over_seed_groups(trainer_calls(compiled, per_call), slices)
    box = [compiled.init(jnp.stack([jax.random.PRNGKey(s) for s in range(n_seeds)]), params)]

    def run(_r: int):
        state = box[0]
        t0 = time.perf_counter()
        for _ in range(updates // per_call):
            state, stats = update(state, params)
            jax.device_get(stats)  # the trainer's host sync after every call
        jax.block_until_ready(state)
        seconds = time.perf_counter() - t0
        box[0] = state
        return updates * cfg.rollout_size * n_seeds, seconds

    return run


def rejax_ppo(env_name: str, n_seeds: int, updates: int):
    """rejax_compare's rejax PPO (native clipping) on `env_name`; `n_seeds` > 1: vmapped over keys."""
    _, env, _ = rejax_compare.environments(env_name)
    # rejax_compare's settings are module constants, read while rejax() builds its algo.
    settings = mock.patch.multiple(rejax_compare, **_REJAX_GATE) if env_name == "gate" else nullcontext()
    with settings:
        train = rejax_compare.rejax(env, updates, "element-wise")
        steps = updates * rejax_compare.N_ENVS * rejax_compare.N_STEPS
    if n_seeds == 1:
        return lambda r: (steps, train(r)[0])
    # The algo that builder made (a closure variable of its `train`), trained with rejax's
    # documented vmap over seeds.
    train_seeds = jax.jit(jax.vmap(inspect.getclosurevars(train).nonlocals["algo"].train))

    def run(r: int):
        keys = jax.random.split(jax.random.PRNGKey(r), n_seeds)
        t0 = time.perf_counter()
        jax.block_until_ready(train_seeds(keys))
        return n_seeds * steps, time.perf_counter() - t0

    return run


def sb3_gate(algo: str, updates: int):
    def run(_r: int):
        out = train_throughput._sb3_case(algo, updates)
        steps = updates * train_throughput.UPDATE_STEPS
        return steps, steps / out["steps_per_s"]

    return run


def sb3_cartpole(updates: int):
    """SB3 PPO on gymnasium CartPole-v1 with rejax_compare's settings; built and warmed up each unit."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)  # as train_throughput._sb3_case (SB3's advice on CPU)
    hp, per_update = _CARTPOLE_PPO, _CARTPOLE_PPO["n_envs"] * _CARTPOLE_PPO["n_steps"]

    def run(r: int):
        model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=hp["n_envs"], seed=r + 1),
                    n_steps=hp["n_steps"], batch_size=per_update // hp["n_minibatches"],
                    n_epochs=hp["n_epochs"], learning_rate=hp["lr"], gamma=hp["gamma"],
                    gae_lambda=hp["gae_lambda"], clip_range=hp["clip_eps"], ent_coef=hp["ent_coef"],
                    vf_coef=hp["vf_coef"], max_grad_norm=hp["max_grad_norm"], device="cpu", seed=r + 1,
                    policy_kwargs=dict(net_arch=dict(pi=list(hp["hidden"]), vf=list(hp["hidden"])),
                                       activation_fn=torch.nn.Tanh))
        model.learn(total_timesteps=per_update)  # warm-up, as _sb3_case
        t0 = time.perf_counter()
        model.learn(total_timesteps=updates * per_update, reset_num_timesteps=False)
        return updates * per_update, time.perf_counter() - t0

    return run


def build(args) -> list[Cell]:
    import quantgate_env
    from jaxrl_agents.common.gymnax_env import make as gymnax_make
    from jaxrl_agents.run.algorithms import DEFAULT_MARL_ENV, get_algorithm, make_config

    cells = []
    seed_counts = (1, args.seeds)
    uc, ug = args.cartpole_updates, args.gate_updates

    def add(row, env, seeds, x64, make_run):
        t0 = time.perf_counter()
        with jax.enable_x64(x64):
            cell = Cell(row, env, seeds, x64, make_run())
        cell.time(-1)  # compiles (SB3: the env's jit); not counted
        print(f"  {row:<18} {env:<8} {seeds} seed(s): built and warmed up in "
              f"{time.perf_counter() - t0:5.1f} s", flush=True)
        cells.append(cell)

    if "cartpole" in args.env:
        env = gymnax_make("CartPole-v1")
        for algo, over in (("ppo", _CARTPOLE_PPO), ("trpo", _CARTPOLE_TRPO)):
            cfg = make_config(algo, {"total_steps": TOTAL, **over})
            for s in seed_counts:
                add(f"jaxrl-agents {algo.upper()}", "cartpole", s, False,
                    lambda algo=algo, cfg=cfg, s=s: ours(algo, env, cfg, s, uc))
        for s in seed_counts:
            add("rejax PPO", "cartpole", s, False, lambda s=s: rejax_ppo("cartpole", s, uc))
        if not args.skip_sb3:
            add("SB3 PPO", "cartpole", 1, False, lambda: sb3_cartpole(args.sb3_cartpole_updates))
    if "gate" in args.env:
        with jax.enable_x64(True):
            env = quantgate_env.make()
            for name in ("ppo", "trpo"):
                algo, over = seeds_together.CONFIGS[name]
                cfg = make_config(algo, {"total_steps": TOTAL, **over})
                for s in seed_counts:
                    add(f"jaxrl-agents {algo.upper()}", "gate", s, True,
                        lambda algo=algo, cfg=cfg, s=s: ours(algo, env, cfg, s, ug))
            cfg = make_config("ippo", {"total_steps": TOTAL, "n_envs": 64})
            _, marl = get_algorithm("ippo").environment(DEFAULT_MARL_ENV, {}, cfg)
            for s in seed_counts:
                add("jaxrl-agents IPPO", "gate", s, True,
                    lambda s=s: ours("ippo", marl, cfg, s, ug))
        for s in seed_counts:
            add("rejax PPO", "gate", s, False, lambda s=s: rejax_ppo("gate", s, ug))
        if not args.skip_sb3:
            add("SB3 PPO", "gate", 1, False, lambda: sb3_gate("ppo", args.sb3_updates))
            add("sb3-contrib TRPO", "gate", 1, False, lambda: sb3_gate("trpo", args.sb3_updates))
    return cells


def table(cells: list[Cell], envs, seeds: int) -> str:
    by = {(c.row, c.env, c.seeds): c for c in cells}
    head = [f"{'CartPole' if e == 'cartpole' else 'gate'}, {n} seed{'s' if n > 1 else ''}"
            for e in envs for n in (1, seeds)]
    lines = ["| library, algorithm | " + " | ".join(head) + " |",
             "| --- |" + " --- |" * len(head)]
    for row in ROWS:
        out = []
        for e in envs:
            for n in (1, seeds):
                c = by.get((row, e, n))
                if c is not None and c.rates:
                    m = statistics.median(c.rates)
                    out.append(f"{m:,.0f}" + (f" ({m / n:,.0f} per seed)" if n > 1 else ""))
                elif row.endswith("IPPO") and e == "cartpole":
                    out.append("n/a (single-agent env)")
                elif row.startswith("SB3") or row.startswith("sb3"):
                    out.append("n/a (no vmapped seeds)" if n > 1 else
                               "not run" if row.endswith("TRPO") and e == "cartpole" else "skipped")
                else:
                    out.append("-")
        lines.append(f"| {row} | " + " | ".join(out) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds")
    ap.add_argument("--seeds", type=int, default=8, help="S, the seeds trained together")
    ap.add_argument("--env", nargs="+", choices=ENVS, default=list(ENVS))
    ap.add_argument("--cartpole-updates", type=int, default=16, help="updates per CartPole unit")
    ap.add_argument("--gate-updates", type=int, default=1, help="updates per gate unit")
    ap.add_argument("--sb3-updates", type=int, default=1, help="timed SB3 updates per gate unit")
    ap.add_argument("--sb3-cartpole-updates", type=int, default=4,
                    help="timed SB3 updates per CartPole unit")
    ap.add_argument("--skip-sb3", action="store_true", help="no SB3 cells")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 round, 2 CartPole updates, 1 SB3 CartPole update")
    args = ap.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does
    if args.quick:
        args.rounds, args.cartpole_updates, args.sb3_cartpole_updates = 1, 2, 1
    from jaxrl_agents.run.host.seed_groups import seed_slices, worker_count

    envs = [e for e in ENVS if e in args.env]
    start_load = load()
    print(f"throughput table: {start_load}; building and compiling every cell", flush=True)
    t0 = time.perf_counter()
    cells = build(args)
    print(f"built in {time.perf_counter() - t0:.0f} s; {args.rounds} interleaved rounds", flush=True)
    t0 = time.perf_counter()
    for r in range(args.rounds):
        for cell in cells if r % 2 == 0 else cells[::-1]:
            cell.time(r)
        print(f"  round {r + 1}/{args.rounds} done ({time.perf_counter() - t0:.0f} s)", flush=True)

    slices = len(seed_slices(args.seeds, worker_count()))
    print(f"\nenv steps/s (all seeds together; per seed in brackets), median of {args.rounds} "
          f"interleaved round(s); {args.seeds} seeds: jaxrl-agents in {slices} slice(s) on "
          f"{worker_count()} core(s), rejax vmapped; CartPole float32, gate: jaxrl-agents float64 "
          f"(x64), rejax float32, SB3 the float64 Gymnasium env; units of {args.cartpole_updates} "
          f"(CartPole) and {args.gate_updates} (gate) updates\n")
    print(table(cells, envs, args.seeds))
    print(f"\nat the start: {start_load}\nat the end:   {load()}")


if __name__ == "__main__":
    main()
