"""jaxrl-agents PPO against rejax's PPO, matched, in one process (issue 36).

    uv run --locked --group test python bench/rejax_compare.py [--env cartpole gate] [--rounds 5]
        [--updates 32]

Both sides train 16 envs x 128 steps per update for `--updates` updates, 4 epochs x 4
minibatches, constant lr 3e-4 (our harmonic decay off), Adam eps 1e-8 (rejax's), gamma 0.99,
lambda 0.95, clip 0.2, vf_coef 0.5, no entropy bonus, gradient clip 0.5, tanh MLP (64, 64) actor
and critic, in float32 (no x64 anywhere: CartPole declares no need for it, and the gate env is
built with ``precision="float32"``, the build a float32 stack such as rejax takes). Two
environments:

- ``cartpole``: gymnax CartPole-v1; rejax gets a view with done = terminated | truncated
  (`_FiveValueCartPole`: rejax 0.1.3 unpacks gymnax < 1.0's five-value step);
- ``gate``: quantgate-env's paper pulse (333 steps): ours trains the functional env
  (``quantgate_env.make(precision="float32")``), rejax the same env through its gymnax adapter with
  the documented one-line view, ``quantgate_env.gymnax.LegacyStepView(quantgate_env.gymnax.make(
  precision="float32"))``.

Gradient clipping, each side both ways (the one difference of semantics that matters here):

- ``global-norm``: ours natively (``optax.clip_by_global_norm``, one optimiser over actor and
  critic); rejax with its two optimisers rebuilt in the train state it is handed as
  ``clip_by_global_norm`` + Adam (so the norm is per network: actor and critic separately);
- ``element-wise``: rejax natively (``optax.clip`` of every gradient entry to +-0.5, separate actor
  and critic optimisers); ours with that transformation in place of its own (the update of
  bench/ppo_ablation.py in a ``lax.scan`` of the trainer's block length, without its seed axis).

Still not equal (each library's own choice): network init (ours: SB3's orthogonal gains; rejax:
flax's lecun normal), value clipping (rejax clips the value update by clip_eps; ours, as SB3 by
default, does not), and time limits (rejax does not bootstrap an episode cut by the time limit;
ours bootstraps V(final_obs) there, SB3's rule).

Rounds: every round trains each of the four (library x clipping), and ours global-norm also one
call per update (the trainer before its blocks of updates), from a fresh state with that
round's seed, in an order that alternates between rounds, after one compilation each (timed
separately, not counted). Throughput: env steps per second of the whole budget (rollouts, GAE,
all gradient steps; ours as the trainer runs it, 4 updates a compiled call with the host reading
every call's stats, rejax its one ``train`` program with evaluation switched off); the table gives medians over rounds and the ratio to
rejax with the same clipping. Final return: the same evaluator for every final policy:
CartPole, 64 episodes with the greedy (arg-max) action, mean undiscounted return (500 =
perfect); the gate, the nominal device (no drift) with the mean action, undiscounted return of
the one deterministic episode (higher is better; -log10 J_T per sample, minus the penalties).

On the gate it then times an update's env steps alone, through each side's env (`env_share`): the
part of the update both libraries pay alike, which bounds any lead.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxrl_agents.run.host.update_blocks import UPDATES_PER_CALL
from timing import load, trainer_calls, trainer_threshold

N_ENVS, N_STEPS, EPOCHS, MINIBATCHES = 16, 128, 4, 4
HP = dict(lr=3e-4, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, vf_coef=0.5, ent_coef=0.0,
          max_grad_norm=0.5, hidden=(64, 64))
EVAL_EPISODES = 64


class _FiveValueCartPole:
    """gymnax 1.0 CartPole with gymnax < 1.0's step ``(obs, state, reward, done, info)``.

    rejax 0.1.3 unpacks that older step. Explicit members, no ``__getattr__``: rejax deep-copies
    its config.
    """

    def __init__(self):
        import gymnax

        self.env, self.default_params = gymnax.make("CartPole-v1")
        self.name, self.num_actions = self.env.name, self.env.num_actions

    def reset(self, key, params=None):
        return self.env.reset(key, params)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self.env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info

    def action_space(self, params=None):
        return self.env.action_space(params)

    def observation_space(self, params=None):
        return self.env.observation_space(params)


def _episode_return(env, params, act, n_steps: int, ret0):
    """``episode(key) -> return``: one undiscounted episode of `env` under ``act(obs)``.

    `n_steps` steps at most; rewards after the episode's first end are not counted; `ret0` (a zero)
    sets the return's dtype.
    """
    def episode(key):
        obs, state = env.reset(key, params)

        def body(carry, k):
            obs, state, alive, ret = carry
            obs2, state2, r, term, trunc, _ = env.step(k, state, act(obs), params)
            ret = ret + jnp.where(alive, r, 0.0)
            return (obs2, state2, alive & ~(term | trunc), ret), None

        (_, _, _, ret), _ = jax.lax.scan(body, (obs, state, jnp.asarray(True), ret0),
                                         jax.random.split(key, n_steps))
        return ret

    return episode


def cartpole_return(act, seed: int) -> float:
    """Mean return of `EVAL_EPISODES` CartPole episodes with ``act(obs) -> action`` (jitted)."""
    import gymnax

    env, params = gymnax.make("CartPole-v1")
    episode = _episode_return(env, params, act, params.max_steps_in_episode, 0.0)
    keys = jax.random.split(jax.random.PRNGKey(1000 + seed), EVAL_EPISODES)
    return float(jnp.mean(jax.jit(jax.vmap(episode))(keys)))


def gate_return(act, seed: int) -> float:
    """Return of the deterministic episode on the nominal device (``eval_params``: no drift)."""
    import quantgate_env

    env = quantgate_env.make(precision="float32")
    episode = _episode_return(env, env.eval_params, act, env.max_episode_steps, jnp.float32(0))
    return float(jax.jit(episode)(jax.random.PRNGKey(1000 + seed)))


def environments(name: str):
    """(ours: the functional env, rejax's: its gymnax view, the final-return evaluator)."""
    if name == "cartpole":
        from jaxrl_agents.common.gymnax_env import make

        return make("CartPole-v1"), _FiveValueCartPole(), cartpole_return
    import quantgate_env
    import quantgate_env.gymnax as qgx

    return (quantgate_env.make(precision="float32"),
            qgx.LegacyStepView(qgx.make(precision="float32")), gate_return)


def ours(env, updates: int, clip: str, per_call: int = UPDATES_PER_CALL):
    """``train(seed) -> (seconds, act)``, compiled; `clip`: "global-norm" or "element-wise".

    As the trainer runs it: `per_call` updates in one compiled call (its blocks,
    run/host/update_blocks.py; 1: one call per update, as before the blocks), the stats of every
    call read by the host.
    """
    from jaxrl_agents.ppo.update import init
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config, model_for
    from ppo_ablation import _update

    if updates % per_call:
        raise ValueError(f"--updates: expected a multiple of {per_call} (updates per call), "
                         f"got {updates}")
    cfg = make_config("ppo", dict(total_steps=N_ENVS * N_STEPS * updates, n_envs=N_ENVS,
                                  n_steps=N_STEPS, n_epochs=EPOCHS, n_minibatches=MINIBATCHES,
                                  lr=HP["lr"], lr_decay=0.0, adam_eps=1e-8, gamma=HP["gamma"],
                                  gae_lambda=HP["gae_lambda"], clip_eps=HP["clip_eps"],
                                  vf_coef=HP["vf_coef"], ent_coef=HP["ent_coef"],
                                  max_grad_norm=HP["max_grad_norm"], hidden=HP["hidden"],
                                  activation="tanh"))
    params = env.default_params
    model = model_for(env, cfg)
    if clip == "global-norm":  # the programs jaxrl-train compiles
        comp = compile_algorithm("ppo", env, cfg)
        start = lambda seed: comp.init(jnp.stack([jax.random.PRNGKey(seed)]), params)  # noqa: E731
        program = trainer_calls(comp, per_call)
        step = lambda st: program(st, params)  # noqa: E731
        actor = lambda st: jax.tree_util.tree_map(lambda x: x[0], st.params["actor"])  # noqa: E731
    else:
        tx = optax.chain(optax.clip(HP["max_grad_norm"]), optax.scale_by_adam(eps=1e-8))
        one = _update(model, env, cfg, tx=tx)
        step = jax.jit(lambda st: jax.lax.scan(lambda c, _: one(c, params), st, None, per_call))
        start = lambda seed: init(jax.random.PRNGKey(seed), model, env, params, cfg)  # noqa: E731
        actor = lambda st: st.params["actor"]  # noqa: E731

    def train(seed, n=updates):
        t0 = time.perf_counter()
        state = start(seed)
        for _ in range(n // per_call):
            state, stats = step(state)
            jax.device_get(stats)  # the trainer's host sync after every call
        jax.block_until_ready(state)
        seconds = time.perf_counter() - t0
        a = actor(state)
        return seconds, jax.jit(lambda obs: model.mode(a, obs))

    return train


def rejax(env, updates: int, clip: str):
    """``train(seed) -> (seconds, act)``, compiled; `clip`: "element-wise" (rejax's) or "global-norm"."""
    import rejax as rj
    from flax.training.train_state import TrainState

    total = N_ENVS * N_STEPS * updates
    algo = rj.PPO.create(env=env, total_timesteps=total, num_envs=N_ENVS,
                         num_steps=N_STEPS, num_epochs=EPOCHS, num_minibatches=MINIBATCHES,
                         learning_rate=HP["lr"], gamma=HP["gamma"], gae_lambda=HP["gae_lambda"],
                         clip_eps=HP["clip_eps"], vf_coef=HP["vf_coef"], ent_coef=HP["ent_coef"],
                         max_grad_norm=HP["max_grad_norm"], eval_freq=total,
                         skip_initial_evaluation=True,
                         agent_kwargs={"hidden_layer_sizes": HP["hidden"], "activation": "tanh"})
    algo = algo.replace(eval_callback=lambda algo, ts, rng: ())  # time training only

    if clip == "element-wise":
        fn = jax.jit(algo.train)
    else:
        # rejax 0.1.3 hard-codes optax.clip; its train takes a train state, so hand it one whose two
        # optimisers (actor, critic) clip by global norm instead.
        tx = optax.chain(optax.clip_by_global_norm(HP["max_grad_norm"]),
                         optax.adam(learning_rate=HP["lr"]))

        def with_global_norm(key):
            ts = algo.init_state(key)
            return ts.replace(
                actor_ts=TrainState.create(apply_fn=(), params=ts.actor_ts.params, tx=tx),
                critic_ts=TrainState.create(apply_fn=(), params=ts.critic_ts.params, tx=tx))

        fn = jax.jit(lambda key: algo.train(train_state=with_global_norm(key)))
    discrete = hasattr(env.action_space(env.default_params), "n")

    def train(seed):
        t0 = time.perf_counter()
        ts, _ = fn(jax.random.PRNGKey(seed))
        jax.block_until_ready(ts)
        seconds = time.perf_counter() - t0
        params = ts.actor_ts.params

        def act(obs):
            dist = algo.actor.apply(params, obs[None], method="_action_dist")
            return jnp.argmax(dist.logits[0]) if discrete else dist.mean()[0]

        return seconds, jax.jit(act)

    return train


SIDES = [("jaxrl-agents", "global-norm"), ("rejax", "global-norm"),
         ("jaxrl-agents", "element-wise"), ("rejax", "element-wise"),
         ("jaxrl-agents, 1 update a call", "global-norm")]  # the trainer before its blocks


def compare(env_name: str, rounds: int, updates: int) -> dict:
    """Compile the five sides, then `rounds` interleaved rounds; name -> list of (sps, return)."""
    ours_env, rejax_env, final_return = environments(env_name)
    trainers = {}
    for lib, clip in SIDES:
        t0 = time.perf_counter()
        train = (rejax(rejax_env, updates, clip) if lib == "rejax"
                 else ours(ours_env, updates, clip, 1 if "1 update" in lib else UPDATES_PER_CALL))
        train(10_000)  # compiles (the whole budget on a throw-away seed)
        print(f"  {lib:12s} {clip:12s} compiled (and one budget run) in "
              f"{time.perf_counter() - t0:5.1f} s", flush=True)
        trainers[(lib, clip)] = train
    out = {k: [] for k in trainers}
    names = list(trainers)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            seconds, act = trainers[k](r)
            out[k].append((updates * N_ENVS * N_STEPS / seconds, final_return(act, r)))
    return out


def env_share(sps: dict, rounds: int) -> None:
    """Print the gate env's own share of an update, which both libraries pay alike.

    Times one update's environment steps alone (N_STEPS steps of N_ENVS envs in a `lax.scan`,
    fixed actions): through the gymnax view (rejax's) and through the functional env (ours),
    interleaved over `rounds`, beside each side's update time (from `sps`, the medians above).
    If the env takes E ms of rejax's U ms, leading rejax by L takes ours' other work below
    U / L - E, against rejax's U - E.
    """
    import quantgate_env
    import quantgate_env.gymnax as qgx
    from timing import interleaved

    def scan_of(step, reset, params):
        def run(key):
            obs, state = jax.vmap(reset, in_axes=(0, None))(jax.random.split(key, N_ENVS), params)
            action = jnp.full((N_ENVS, 3), 0.1, jnp.float32)

            def body(state, k):
                out = jax.vmap(step, in_axes=(0, 0, 0, None))(jax.random.split(k, N_ENVS), state,
                                                              action, params)
                return out[1], out[2]
            return jax.lax.scan(body, state, jax.random.split(key, N_STEPS))[1]
        fn = jax.jit(run)
        fn(jax.random.PRNGKey(0)).block_until_ready()  # compiles
        return lambda: fn(jax.random.PRNGKey(1)).block_until_ready()

    ours_env = quantgate_env.make(precision="float32")
    view = qgx.make(precision="float32")
    scans = {"gymnax view (rejax's)": scan_of(view.step, view.reset, view.default_params),
             "functional env (ours)": scan_of(ours_env.step_autoreset, ours_env.reset,
                                              ours_env.default_params)}
    env_ms = {k: 1e3 * statistics.median(w for w, _ in v)
              for k, v in interleaved(scans, rounds).items()}
    steps = N_ENVS * N_STEPS
    print("\nThe env's own share of an update (its steps alone, medians of "
          f"{rounds} interleaved rounds):")
    for name, ms in env_ms.items():
        print(f"  env steps of one update, {name}: {ms:.1f} ms")
    for (lib, clip), rate in sps.items():
        print(f"  {lib}, {clip}: {1e3 * steps / rate:.1f} ms an update")
    u = 1e3 * steps / sps[("rejax", "global-norm")]
    e = env_ms["gymnax view (rejax's)"]
    print(f"  rejax's update (global-norm) is {u:.1f} ms, {e / u:.0%} of it the env: a 1.10x lead "
          f"needs ours' other work at {u / 1.1 - e:.1f} ms against rejax's {u - e:.1f} "
          f"({1 - (u / 1.1 - e) / (u - e):.0%} less)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", nargs="+", choices=["cartpole", "gate"], default=["cartpole", "gate"])
    p.add_argument("--rounds", type=int, default=5, help="rounds (one seed each: 0, 1, ...)")
    p.add_argument("--updates", type=int, default=32)
    args = p.parse_args()
    trainer_threshold()  # before the first computation: compile as jaxrl-train does
    with jax.enable_x64(False):  # float32 on both sides (the default; said here, not assumed)
        for env_name in args.env:
            print(f"{env_name}: {args.updates} updates x {N_ENVS} envs x {N_STEPS} steps = "
                  f"{args.updates * N_ENVS * N_STEPS} env steps a run, {args.rounds} rounds; "
                  f"{load()}", flush=True)
            res = compare(env_name, args.rounds, args.updates)
            sps = {k: statistics.median(x for x, _ in v) for k, v in res.items()}
            print(f"\n| {env_name} | clipping | env steps/s (median) | vs rejax, same clipping | "
                  f"final return, mean (each round) |")
            print("| --- | --- | --- | --- | --- |")
            for (lib, clip), v in res.items():
                rets = [x for _, x in v]
                print(f"| {lib} | {clip} | {sps[(lib, clip)]:,.0f} | "
                      f"{sps[(lib, clip)] / sps[('rejax', clip)]:.2f}x | {np.mean(rets):.1f} "
                      f"({', '.join(f'{x:.0f}' for x in rets)}) |")
            if env_name == "gate":
                env_share(sps, args.rounds)
            print(load() + "\n", flush=True)


if __name__ == "__main__":
    main()
