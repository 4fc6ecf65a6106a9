"""Where one PPO / TRPO update's time goes, phase by phase (paper configurations, gate env, CPU).

Each phase is jitted on its own with the shapes it has inside the update and timed with the others,
interleaved round by round (bench/timing.py); the table gives the best round in ms (on a shared
machine the least disturbed round; the median is printed beside it) and as a share of the whole
compiled update (``compile_algorithm(...).update``, seed axis S = 1):

- rollout: ``collect`` (n_steps x vmapped ``step_autoreset`` + policy sample + critic values);
- rollout: env alone: the same scan with fixed actions (no network), the floor of the rollout;
- GAE: the reverse scan over (n_steps, n_envs);
- gradient steps: PPO's ``learn_phase`` (epochs x minibatches, permutations and gathers included),
  its permutation + gather part alone and its loss gradients alone (the floor of the phase);
  TRPO's actor step (with CG alone and the line search alone) and the critic's epochs;
- overlap (TRPO): what one seed could take from the second core, each pair at once in two threads:
  the actor step beside the critic epochs (independent given the batch), and the rollout (and the
  env steps alone) as two halves of the envs; against the sum of the two phases alone, or the
  whole rollout, the headroom a threaded update could have (the pieces are the phases above, not
  a program the trainer runs);
- evaluation: ``compiled.evaluate`` (one deterministic episode), amortised per update by the
  trainer's ``--eval-every``;
- host: ``jax.device_get`` of the update's stats, and the trainer's own per-update time around the
  compiled update (``run.loop.Run.advance`` over 6 updates minus the time inside the update):
  plain, with an evaluation after every update (the presets' cadence), with a checkpoint after
  every update;
- with ``--against REV``: the whole update of jaxrl_agents and quantgate_env at git revision REV
  (an agent's change or an environment's), built in the same process, timed interleaved, and
  checked bit for bit against this one; ``--update-only`` times just the two whole updates.

``--gate-stage explore`` (PPO) or ``--gate-stage polish`` (TRPO) profiles a stage of the gate recipe
(its config, 17.25 ns episodes) instead of the paper configuration.

Phases overlap (XLA fuses across them inside the update), so the shares need not sum to 100 %.

    uv run --locked --group test python bench/profile_update.py            # both, 7 rounds (~5 min)
    uv run --locked --group test python bench/profile_update.py --algo trpo --rounds 3
    uv run --locked --group test python bench/profile_update.py --trace /tmp/trace  # + jax.profiler
    uv run --locked --group test python bench/profile_update.py --against 8721776  # A/B, bits
    uv run --locked --group test python bench/profile_update.py --algo trpo --gate-stage polish \
        --against HEAD --update-only --rounds 15
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from timing import interleaved, load, trainer_threshold  # noqa: E402

TOTAL_STEPS = 20_000_000  # a long run's schedule, as bench/train_throughput.py


def _ready(x):
    return jax.block_until_ready(x)


def _import_revision(rev: str):
    """jaxrl_agents and quantgate_env as of git revision `rev`, side by side with this checkout's.

    Imported as the packages ``jaxrl_agents_at_rev`` and ``quantgate_env_at_rev``: each imports
    itself relatively only, so the two versions live in one process and their updates can be timed
    interleaved and compared bit for bit. Returns (REV's ``run.algorithms``, REV's quantgate_env).
    """
    import atexit
    import importlib
    import io
    import shutil
    import subprocess
    import tarfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dst = tempfile.mkdtemp(prefix="packages_at_rev_")
    atexit.register(shutil.rmtree, dst, True)
    for src in ("packages/jaxrl-agents/src/jaxrl_agents", "packages/quantgate-env/src/quantgate_env"):
        tar = subprocess.run(["git", "-C", root, "archive", rev, src], capture_output=True,
                             check=True).stdout
        tarfile.open(fileobj=io.BytesIO(tar)).extractall(dst, filter="data")
        os.rename(os.path.join(dst, src), os.path.join(dst, os.path.basename(src) + "_at_rev"))
    sys.path.insert(0, dst)
    return (importlib.import_module("jaxrl_agents_at_rev.run.algorithms"),
            importlib.import_module("quantgate_env_at_rev"))


def _against(rev_algorithms, algo, env, cfg_dict, state, compiled, own_params):
    """(callable timing REV's update, bit-identical?) for the same seed and config.

    `env` is REV's build of the environment (the same options); this checkout's update runs on
    its own, with the parameters of its own environment.
    """
    cfg = rev_algorithms.make_config(algo, cfg_dict)
    theirs = rev_algorithms.compile_algorithm(algo, env, cfg)
    s_rev = theirs.init(jnp.stack([jax.random.PRNGKey(1)]), env.default_params)
    s_new = jax.tree_util.tree_map(jnp.copy, state)
    same = True
    for _ in range(2):  # two updates: the second starts from the first's state
        s_rev, st_rev = theirs.update(s_rev, env.default_params)
        s_new, st_new = compiled.update(s_new, own_params)
        a, b = jax.device_get(((s_rev, st_rev), (s_new, st_new)))
        same &= all(np.asarray(x).tobytes() == np.asarray(y).tobytes()
                    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))
    holder = {"state": s_rev}

    def run():
        holder["state"], stats = theirs.update(holder["state"], env.default_params)
        _ready(stats)

    return run, same


def _phases(algo: str, env, cfg, compiled, state, env_params):
    """Name -> zero-argument callable running that phase once (blocking)."""
    from jax.flatten_util import ravel_pytree
    from jaxrl_agents.common.cg import conjugate_gradient
    from jaxrl_agents.common.gae import gae
    from jaxrl_agents.common.minibatch import minibatch_epochs
    from jaxrl_agents.common.rollout import collect
    from jaxrl_agents.run.algorithms import get_algorithm
    from jaxrl_agents.trpo.losses import kl_hessian_vector_product, mean_kl, surrogate

    module = get_algorithm(algo).module
    model = compiled.model
    rollout_phase, learn_phase = module.make_phases(model, env, cfg)
    one = jax.tree_util.tree_map(lambda x: x[0], state)  # seed 0 of the S = 1 group

    @jax.jit
    def f_collect(s):
        return collect(model, env, env_params, s.params, s.env_state, s.obs, s.key, cfg.n_steps,
                       cfg.gamma)

    v_step = jax.vmap(env.step_autoreset, in_axes=(0, 0, 0, None))

    @jax.jit
    def f_env_only(s):
        def body(carry, _):
            env_state, obs, key = carry
            key, k_env = jax.random.split(key)
            action = jnp.zeros((obs.shape[0],) + env.action_space.shape, jnp.float32)
            nobs, env_state, r, te, tr, info = v_step(jax.random.split(k_env, obs.shape[0]),
                                                      env_state, action, env_params)
            return (env_state, nobs, key), (nobs, r, te, tr, info)
        return jax.lax.scan(body, (s.env_state, s.obs, s.key), None, length=cfg.n_steps)

    (_, traj) = f_collect(one)
    last_v = model.value(one.params["critic"], one.obs)
    f_gae = jax.jit(lambda r, v, d, lv: gae(r, v, d, lv, cfg.gamma, cfg.gae_lambda))
    f_rollout_phase = jax.jit(lambda s: rollout_phase(s, env_params))
    _, batch = f_rollout_phase(one)
    f_learn = jax.jit(functools.partial(learn_phase, settings=module.traced_settings(cfg)))

    holder = {"state": state}

    def whole_update():
        holder["state"], stats = compiled.update(holder["state"], env_params)
        _ready(stats)

    out = {
        "update (compiled, whole)": whole_update,
        "rollout: collect (env + policy)": lambda: _ready(f_collect(one)),
        "rollout: env steps alone": lambda: _ready(f_env_only(one)),
        "GAE": lambda: _ready(f_gae(traj.reward, traj.value, traj.done, last_v)),
        "rollout phase (collect+GAE+stats)": lambda: _ready(f_rollout_phase(one)),
        "learn phase (all gradient steps)": lambda: _ready(f_learn(one, batch)),
    }
    data = batch[0]
    if algo == "ppo":
        @jax.jit
        def f_gather(d, key):
            def step(carry, mb, e, m):
                # Sums consume every gathered element (a single element would let XLA shrink the
                # gather); they cost one pass over the minibatch, small against the gather.
                used = sum(x.astype(jnp.float32).sum() for x in jax.tree_util.tree_leaves(mb))
                return carry + used, None
            return minibatch_epochs(step, jnp.float32(0), d, key, cfg.n_epochs,
                                    cfg.n_minibatches)[0]
        from jaxrl_agents.common.losses import ppo_loss

        @jax.jit
        def f_grads(s, d, key):
            # The loss gradients alone, every minibatch of every epoch: the floor of the learning
            # phase (each gradient is consumed by one sum, so XLA cannot drop it).
            def step(carry, mb, e, m):
                g = jax.grad(lambda p: ppo_loss(model, p, mb, cfg.clip_eps, cfg.vf_coef,
                                                cfg.ent_coef, cfg.normalize_advantage)[0])(
                    s.params)
                return carry + sum(x.sum() for x in jax.tree_util.tree_leaves(g)), None
            return minibatch_epochs(step, jnp.float32(0), d, key, cfg.n_epochs,
                                    cfg.n_minibatches)[0]

        out["  of which permutations + gathers"] = lambda: _ready(f_gather(data, one.key))
        out["  of which loss gradients (fwd + bwd) alone"] = lambda: _ready(
            f_grads(one, data, one.key))
    else:
        actor = one.params["actor"]
        flat0, unravel = ravel_pytree(actor)

        @jax.jit
        def f_actor(d):
            return module.actor_step(model, actor, d["obs"], d["action"], d["logp"], d["adv"], cfg)

        @jax.jit
        def f_cg(d):
            g = jax.grad(lambda f: surrogate(model, unravel(f), d["obs"], d["action"], d["logp"],
                                             d["adv"]))(flat0)
            hvp = kl_hessian_vector_product(model, unravel, flat0, d["obs"])
            return conjugate_gradient(lambda v: hvp(v) + cfg.cg_damping * v, g, cfg.cg_max_steps,
                                      cfg.cg_residual_tol)

        step_dir = f_cg(data)

        @jax.jit
        def f_line_search(d, step_dir):
            dist_old = model.dist(actor, d["obs"])
            coeffs = cfg.line_search_shrinking_factor ** jnp.arange(cfg.line_search_max_iter,
                                                                    dtype=jnp.float32)
            cands = flat0[None] + (coeffs * 1e-3)[:, None] * step_dir[None]
            objs = jax.vmap(lambda f: surrogate(model, unravel(f), d["obs"], d["action"],
                                                d["logp"], d["adv"]))(cands)
            kls = jax.vmap(lambda f: mean_kl(model, unravel(f), d["obs"], dist_old))(cands)
            return objs, kls

        from jaxrl_agents.common.losses import value_loss
        from jaxrl_agents.common.optimizer import apply_adam, make_optimizer
        tx = make_optimizer(cfg.adam_eps)

        @jax.jit
        def f_critic(s, d):
            def mb_step(carry, mb, e, m):
                critic, opt = carry
                loss, g = jax.value_and_grad(lambda c, o, r: value_loss(model, c, o, r))(critic, *mb)
                return apply_adam(tx, g, opt, critic, jnp.float32(1e-4)), loss
            return minibatch_epochs(mb_step, (s.params["critic"], s.opt_state),
                                    (d["obs"], d["ret"]), s.key, cfg.n_critic_updates,
                                    cfg.n_minibatches)

        out["  actor step (CG + line search)"] = lambda: _ready(f_actor(data))
        out["    CG (gradient + 15 FVPs)"] = lambda: _ready(f_cg(data))
        out["    line search (10 candidates)"] = lambda: _ready(f_line_search(data, step_dir))
        out["  critic epochs"] = lambda: _ready(f_critic(one, data))
        # What a single seed could gain from the second core (issue 36): the two halves that do
        # not depend on each other, each in its own thread, as run.host.seed_groups runs slices.
        halves = [one._replace(env_state=jax.tree_util.tree_map(lambda x, a=a, b=b: x[a:b],
                                                                one.env_state),
                               obs=one.obs[a:b])
                  for a, b in ((0, cfg.n_envs // 2), (cfg.n_envs // 2, cfg.n_envs))]
        out["overlap: actor step | critic epochs, 2 threads"] = lambda: _concurrently(
            lambda: _ready(f_actor(data)), lambda: _ready(f_critic(one, data)))
        out["overlap: collect, 2 threads x half the envs"] = lambda: _concurrently(
            *(lambda h=h: _ready(f_collect(h)) for h in halves))
        out["overlap: env steps alone, 2 threads x half"] = lambda: _concurrently(
            *(lambda h=h: _ready(f_env_only(h)) for h in halves))
    ev_key = jax.random.PRNGKey(0)
    out["evaluation (1 episode)"] = lambda: _ready(
        compiled.evaluate(holder["state"].params["actor"], env.eval_params, ev_key))
    out["host: device_get(stats)"] = _device_get_stats(compiled, holder, env_params)
    return out


def _concurrently(*calls) -> None:
    """Run the zero-argument callables at once, one thread each, and wait for all of them.

    Each thread computes under the caller's x64 setting (``jax.enable_x64`` is thread-local, and
    a jitted function traced under the other setting would be traced again).
    """
    import concurrent.futures

    x64 = bool(jax.config.read("jax_enable_x64"))

    def under_callers_precision(call):
        with jax.enable_x64(x64):
            return call()

    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        for future in [pool.submit(under_callers_precision, c) for c in calls]:
            future.result()


def _device_get_stats(compiled, holder, env_params):
    _, stats = compiled.update(jax.tree_util.tree_map(jnp.copy, holder["state"]), env_params)
    _ready(stats)
    return lambda: jax.device_get(stats)


def _trainer_overhead(algo: str, cfg, modes: dict, n_updates: int = 6) -> dict[str, float]:
    """Seconds per update the training loop (`run.loop.Run.advance`) spends outside the update.

    `modes` maps a name to (evaluate every update?, checkpoint every update?). Each mode runs
    `n_updates` updates of one fresh run directory, short of the run's budget (so no end-of-run
    writes), after a warm-up run that compiled the update and the evaluation.
    """
    from jaxrl_agents.common.envs import DEFAULT_ENV, load_env
    from jaxrl_agents.run.loop import Run
    from jaxrl_agents.run.run_files import make_run_dirs
    from jaxrl_agents.run.spec import RunSpec

    config = {**cfg.to_dict(), "total_steps": (n_updates + 2) * cfg.rollout_size}

    def run_once(out, eval_each, ckpt_each, n):  # under x64: the env builds float64 physics
        spec = RunSpec(algo=algo, env=DEFAULT_ENV, config=config, seeds=(1,), out=out,
                       eval_every=cfg.rollout_size if eval_each else 10**12,
                       checkpoint_every=1 if ckpt_each else 10**9)
        env = load_env(DEFAULT_ENV, {})
        run = Run(spec, spec.algo_config(), env, make_run_dirs(out, algo, spec.seeds, ""), "off")
        update, timed = run.compiled.update, []

        def timed_update(s, p):
            t0 = time.perf_counter()
            s, stats = update(s, p)
            jax.block_until_ready((s, stats))
            timed.append(time.perf_counter() - t0)
            return s, stats

        run.compiled = run.compiled._replace(update=timed_update)
        state = run.compiled.init(run.seed_keys, run.train_params)
        t0 = time.perf_counter()
        try:
            run.advance(state, 0, 0.0, n)
        finally:
            run.close()
        return (time.perf_counter() - t0 - sum(timed)) / n

    out = {}
    with tempfile.TemporaryDirectory() as tmp, jax.enable_x64(True):
        run_once(os.path.join(tmp, "warm"), True, True, 1)
        for name, (eval_each, ckpt_each) in modes.items():
            out[name] = run_once(os.path.join(tmp, name), eval_each, ckpt_each, n_updates)
    return out


def _gate_stage(algo: str, stage: str) -> tuple[dict, dict]:
    """(config fields, env options) of the gate recipe's stage `stage` (its algorithm must be `algo`)."""
    from jaxrl_agents.stages.recipes import GATE

    found = {s.name: s for s in GATE.stages}
    if stage not in found or found[stage].algo != algo:
        raise SystemExit(f"--gate-stage: the gate recipe's {algo} stages are "
                         f"{[s.name for s in GATE.stages if s.algo == algo]}, got {stage!r}")
    return {**found[stage].config, "total_steps": found[stage].steps}, dict(GATE.env_options)


def profile(algo: str, rounds: int, trace: str | None, against: str | None,
            gate_stage: str | None = None, update_only: bool = False) -> None:
    """Print the phase table of `algo` (paper config, or a gate recipe stage's), best of `rounds` rounds."""
    import quantgate_env
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config

    cfg_dict, env_options = ({"total_steps": TOTAL_STEPS}, {}) if gate_stage is None else \
        _gate_stage(algo, gate_stage)
    cfg = make_config(algo, cfg_dict)
    with jax.enable_x64(True):
        env = quantgate_env.make(**env_options)
        compiled = compile_algorithm(algo, env, cfg)
        state = compiled.init(jnp.stack([jax.random.PRNGKey(1)]), env.default_params)
        if against:
            rev_algorithms, rev_env_package = _import_revision(against)
            rev_update, same = _against(rev_algorithms, algo, rev_env_package.make(**env_options),
                                        cfg_dict, state, compiled, env.default_params)
        phases = _phases(algo, env, cfg, compiled, state, env.default_params)
        if update_only:
            phases = {k: v for k, v in phases.items() if k == "update (compiled, whole)"}
        if against:
            phases[f"update at {against} (same process)"] = rev_update
        t0 = time.perf_counter()
        for f in phases.values():  # compile everything before the timed rounds
            f()
        print(f"{algo}: compiled the phases in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        times = interleaved(phases, rounds)
        if trace:
            with jax.profiler.trace(os.path.join(trace, algo)):
                for _ in range(2):
                    phases["update (compiled, whole)"]()
        overhead = {} if update_only else _trainer_overhead(algo, cfg, {
            "host: trainer loop per update (no eval, no checkpoint)": (False, False),
            "host: trainer loop per update, evaluating each": (True, False),
            "host: trainer loop per update, checkpointing each": (False, True)})
    # The machine is shared (load average 5-7 on 2 cores while this was written): the least
    # disturbed round (the minimum) estimates a phase's own cost; the median shows the spread.
    med = {k: min(w for w, _ in v) for k, v in times.items()}
    spread = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    whole = med["update (compiled, whole)"]
    rows = list(med.items()) + list(overhead.items())
    if algo == "ppo":
        desc = (f"PPO {cfg.n_envs} envs x {cfg.n_steps} steps, {cfg.n_epochs} epochs x "
                f"{cfg.n_minibatches} minibatches, {cfg.activation} {cfg.hidden}")
    else:
        desc = (f"TRPO {cfg.n_envs} envs x {cfg.n_steps} steps, CG {cfg.cg_max_steps}, critic "
                f"{cfg.n_critic_updates} epochs of {cfg.batch_size}, {cfg.activation} {cfg.hidden}")
    if gate_stage:
        desc += f"; the gate recipe's {gate_stage} stage, env {env_options}"
    print(f"\n{desc}; best of {rounds} interleaved rounds; {load()}")
    print(f"update: {whole * 1e3:.0f} ms = {cfg.rollout_size / whole:,.0f} env steps/s")
    if against:
        rev = med[f"update at {against} (same process)"]
        print(f"against {against}: {rev * 1e3:.0f} ms, speed-up {rev / whole:.3f}x; the two "
              f"updates are {'bit for bit identical' if same else 'DIFFERENT'} over 2 updates")
    print()
    print(f"| {'phase':<54} | {'ms':>8} | {'% of update':>11} | {'median ms':>9} |")
    print(f"| {'-' * 54} | {'-' * 8} | {'-' * 11} | {'-' * 9} |")
    for name, t in rows:
        m = f"{spread[name] * 1e3:9.1f}" if name in spread else f"{'':9}"
        print(f"| {name:<54} | {t * 1e3:8.1f} | {100 * t / whole:10.1f}% | {m} |")


def main() -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=("ppo", "trpo", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    ap.add_argument("--trace", default=None, help="also write a jax.profiler trace here")
    ap.add_argument("--against", default=None, metavar="REV",
                    help="also time the update of jaxrl_agents and quantgate_env at git revision "
                         "REV, interleaved in this process, and check the two are bit for bit "
                         "identical")
    ap.add_argument("--gate-stage", default=None, metavar="STAGE",
                    help="the gate recipe's stage (explore: PPO; polish: TRPO) instead of the "
                         "paper configuration: its config and 17.25 ns episodes")
    ap.add_argument("--update-only", action="store_true",
                    help="time the whole update only (and REV's with --against), no phases")
    args = ap.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does
    for algo in ("ppo", "trpo") if args.algo == "both" else (args.algo,):
        profile(algo, args.rounds, args.trace, args.against, args.gate_stage, args.update_only)


if __name__ == "__main__":
    main()
