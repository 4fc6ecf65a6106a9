"""What each suspected cause of issue 36 costs PPO's update on a CPU: an ablation, in one process.

    uv run --locked --group test python bench/ppo_ablation.py [--env cartpole|gate] [--rounds 5]

One update = 16 envs x 128 steps, 4 epochs x 4 minibatches, (64, 64) tanh actor and critic (the
settings of bench/rejax_compare.py), on gymnax CartPole-v1 or the gate env (quantgate-env, the
paper's 333-step pulse, float64 physics, so every variant there runs under x64). Each variant is
built from the library's own pieces (rollout phase, loss, learner, optimiser) and differs from
the one above it in one thing:

- ``trainer``: what ``jaxrl-train`` runs (`run.algorithms.compile_algorithm`'s programs: the seed
  axis, the learning phase under ``lax.map``, the per-seed non-finite flag), 4 updates a call
  (`Compiled.update_block`, the trainer's blocks: run/host/update_blocks.py) and the stats fetched
  to the host after each call (the trainer's progress rows), in the precision the run takes now
  (float32 on CartPole; x64 on the gate);
- ``trainer, 1 update a call``: the same with one call of `Compiled.update` per update and its
  stats fetched after each, as the trainer ran before its blocks;
- ``trainer, x64``: the same under ``jax.enable_x64(True)``, as every run was before issue 36
  (CartPole only);
- ``plain``: ``jit(ppo.update.make_update(...))``, stats fetched after each update: no seed axis,
  no non-finite flag;
- ``no stats``: ``plain`` whose loss carries no statistics out (no entropy, approx_kl, clip_frac,
  pg_loss or v_loss means) and whose learner compiles no KL-stop check;
- ``element-wise clip``: ``plain`` with rejax's ``optax.clip`` instead of global-norm clipping;
- ``no host sync``: ``plain`` with the stats left on the device (the calls queue asynchronously;
  one wait at the end);
- ``scan of 4``: ``plain`` run as 4 updates in one ``lax.scan`` (one program per 4 updates, its
  stats fetched once), against one call per update.

Throughput: env steps/s of whole updates after compilation; each round times every variant
over the same number of updates, in an order that alternates between rounds (bench/timing.py);
medians over rounds, with the ratio to ``trainer`` (> 1: faster than what the trainer runs).
Beside wall-clock: env steps per CPU-second of this process (all its threads), which other jobs
on shared cores move less.
The figures are wall-clock on whatever machine runs it: print the load average beside them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import optax
from jaxrl_agents.run.host.update_blocks import UPDATES_PER_CALL
from timing import load, trainer_calls, trainer_threshold

N_ENVS, N_STEPS, EPOCHS, MINIBATCHES = 16, 128, 4, 4
HP = dict(lr=3e-4, lr_decay=0.0, adam_eps=1e-8, gamma=0.99, gae_lambda=0.95, clip_eps=0.2,
          vf_coef=0.5, ent_coef=0.0, max_grad_norm=0.5, hidden=(64, 64), activation="tanh")


def _env(name: str):
    if name == "cartpole":
        from jaxrl_agents.common.gymnax_env import make

        return make("CartPole-v1")
    with jax.enable_x64(True):
        import quantgate_env

        return quantgate_env.make()


def _config(updates: int):
    from jaxrl_agents.run.algorithms import make_config

    return make_config("ppo", dict(HP, total_steps=N_ENVS * N_STEPS * updates, n_envs=N_ENVS,
                                   n_steps=N_STEPS, n_epochs=EPOCHS, n_minibatches=MINIBATCHES))


def _update(model, env, cfg, *, stats: bool = True, tx=None):
    """One seed's ``update(state, env_params)``: `ppo.update.make_update`'s, or a variant of it.

    stats=False: the loss carries no statistics out and the learner compiles no KL check;
    tx: another optimiser direction (rejax's element-wise clip) in place of the global-norm one.
    """
    from jaxrl_agents.common.losses import ppo_loss
    from jaxrl_agents.common.optimizer import harmonic_lr, make_optimizer
    from jaxrl_agents.common.rollout import make_rollout_phase
    from jaxrl_agents.common.state import TrainState
    from jaxrl_agents.ppo.learner import make_learner
    from jaxrl_agents.ppo.update import kl_check, make_update, traced_settings

    if stats and tx is None:
        return make_update(model, env, cfg)
    tx = tx or make_optimizer(cfg.adam_eps, cfg.max_grad_norm)

    def loss_fn(params, batch):
        loss, s = ppo_loss(model, params, batch, cfg.clip_eps, cfg.vf_coef, cfg.ent_coef,
                           cfg.normalize_advantage)
        return loss, (s if stats else {})

    rollout = make_rollout_phase(model, env, cfg.n_steps, cfg.gamma, cfg.gae_lambda)
    learn = make_learner(loss_fn, tx, cfg.n_epochs, cfg.n_minibatches,
                         kl_check(cfg) if stats else None)
    settings = traced_settings(cfg)
    per_update = cfg.n_epochs * cfg.n_minibatches

    def update(state, env_params):  # as ppo.update.make_phases' learn_phase, minus its extras
        state, (data, roll_stats) = rollout(state, env_params)
        key, k_perm = jax.random.split(state.key)
        params, opt_state, s = learn(
            state.params, state.opt_state, data, k_perm, state.update * per_update,
            lambda i: harmonic_lr(cfg.lr, cfg.lr_decay, i / cfg.n_grad_steps),
            settings["kl_stop"])
        s.update(roll_stats)
        return TrainState(params, opt_state, state.env_state, state.obs, key, state.update + 1), s

    return update


def _variants(env, cfg, x64: bool, scan_n: int, with_x64_row: bool):
    """Variant name -> (x64, a factory of ``run(n)``, which trains n more updates of one state)."""
    from jaxrl_agents.ppo.update import init
    from jaxrl_agents.run.algorithms import compile_algorithm, model_for

    model = model_for(env, cfg)
    params = env.default_params

    def single(update, scan: int = 0, sync: bool = True):
        fn = (jax.jit(lambda s, p: jax.lax.scan(lambda c, _: update(c, p), s, None, scan))
              if scan else jax.jit(update))

        def make():
            state = init(jax.random.PRNGKey(0), model, env, params, cfg)

            def run(n):
                nonlocal state
                for _ in range(n // scan if scan else n):
                    state, stats = fn(state, params)
                    if sync:  # as the trainer: the row of every update (of every call) is read
                        stats = jax.device_get(stats)
                jax.block_until_ready(state)
            return run
        return make

    def trainer(per_call: int = scan_n):
        def make():
            comp = compile_algorithm("ppo", env, cfg)
            state = comp.init(jnp.stack([jax.random.PRNGKey(0)]), params)
            program = trainer_calls(comp, per_call)

            def run(n):
                nonlocal state
                for _ in range(n // per_call):
                    state, stats = program(state, params)
                    stats = jax.device_get(stats)  # the host sync of every call (run/loop.py)
                jax.block_until_ready(state)
            return run
        return make

    elementwise = optax.chain(optax.clip(cfg.max_grad_norm), optax.scale_by_adam(eps=cfg.adam_eps))
    rows = {"trainer": (x64, trainer()), "trainer, 1 update a call": (x64, trainer(1))}
    if with_x64_row:
        rows["trainer, x64"] = (True, trainer())
    rows.update({
        "plain": (x64, single(_update(model, env, cfg))),
        "no stats": (x64, single(_update(model, env, cfg, stats=False))),
        "element-wise clip": (x64, single(_update(model, env, cfg, tx=elementwise))),
        "no host sync": (x64, single(_update(model, env, cfg), sync=False)),
        f"scan of {scan_n}": (x64, single(_update(model, env, cfg), scan=scan_n)),
    })
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", choices=["cartpole", "gate"], default="cartpole")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--updates", type=int, default=8, help="updates timed per variant and round")
    args = p.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does
    if args.updates % 4:
        p.error("--updates: expected a multiple of 4 (the trainer and the scan run 4 updates a call)")
    env = _env(args.env)
    gate = args.env == "gate"
    cfg = _config(args.updates * (args.rounds + 1) + 8)
    rows = _variants(env, cfg, x64=gate, scan_n=UPDATES_PER_CALL, with_x64_row=not gate)
    runners = {}
    for name, (x64, make) in rows.items():
        with jax.enable_x64(x64):
            t0 = time.perf_counter()
            run = make()
            run(4)  # compiles (and trains 4 updates)
            print(f"  {name:18s} compiled and warmed in {time.perf_counter() - t0:5.1f} s", flush=True)
        runners[name] = (x64, run)
    print(f"{args.env}: {N_ENVS} envs x {N_STEPS} steps per update, {args.updates} updates per "
          f"variant per round, {args.rounds} rounds; {load()}")
    times = {name: [] for name in runners}
    names = list(runners)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            x64, run = runners[name]
            with jax.enable_x64(x64):
                t0, c0 = time.perf_counter(), time.process_time()
                run(args.updates)
                times[name].append((time.perf_counter() - t0, time.process_time() - c0))
    steps = args.updates * N_ENVS * N_STEPS
    sps = {n: steps / statistics.median(w for w, _ in t) for n, t in times.items()}
    # CPU seconds of this process (all its threads): less moved by other jobs on shared cores
    cpu = {n: steps / statistics.median(c for _, c in t) for n, t in times.items()}
    print(f"\n| variant ({args.env}) | env steps/s, wall (median of {args.rounds}) | vs trainer | "
          f"env steps per CPU-s (median) | vs trainer |")
    print("| --- | --- | --- | --- | --- |")
    for n, v in sps.items():
        print(f"| {n} | {v:,.0f} | {v / sps['trainer']:.2f}x | {cpu[n]:,.0f} | "
              f"{cpu[n] / cpu['trainer']:.2f}x |")
    print(load())


if __name__ == "__main__":
    main()
