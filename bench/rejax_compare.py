"""jaxrl-agents PPO against rejax's PPO on gymnax CartPole-v1, in one process.

The same env, budget and hyper-parameters for both.

    uv run --locked --group test python bench/rejax_compare.py [--seeds 0 1 2] [--updates 32]

Both train 16 envs x 128 steps per update for `--updates` updates, 4 epochs x 4 minibatches,
constant lr 3e-4 (our harmonic decay off), Adam eps 1e-8 (rejax's), gamma 0.99, lambda 0.95,
clip 0.2, vf_coef 0.5, no entropy bonus, grad-norm clip 0.5, tanh MLP (64, 64) actor and critic.
Not equal (each library's own choice): network init (ours: SB3's orthogonal gains; rejax: flax's
lecun normal), and time limits: rejax 0.1.3 unpacks gymnax < 1.0's five-value step, so it gets
a view with done = terminated | truncated (`_FiveValueCartPole`) and does not bootstrap an
episode cut at 500 steps, while ours bootstraps V(final_obs) there (SB3's rule).

Throughput: env steps per second of whole updates (rollout + GAE + all gradient steps), after
compilation (timed separately; our update program is compiled once and reused by the later
seeds, rejax's ``train`` is compiled per call), median over the seeds. Ours runs as the trainer
runs it, under x64 (gymnax's CartPole then steps in float64), rejax in float32. Ours runs `compile_algorithm`'s update,
rejax runs its jitted ``train`` with evaluation switched off (a no-op callback), so neither pays
for evaluation. Final return: the same evaluator for both final policies: 64 episodes of
gymnax CartPole with the greedy (arg-max) action, mean undiscounted return (500 = perfect).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

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


def greedy_return(act, seed: int) -> float:
    """Mean return of `EVAL_EPISODES` CartPole episodes with ``act(obs) -> action`` (jitted)."""
    import gymnax

    env, params = gymnax.make("CartPole-v1")
    steps = params.max_steps_in_episode

    def episode(key):
        obs, state = env.reset(key, params)

        def body(carry, k):
            obs, state, alive, ret = carry
            obs2, state2, r, term, trunc, _ = env.step(k, state, act(obs), params)
            ret = ret + jnp.where(alive, r, 0.0)
            return (obs2, state2, alive & ~(term | trunc), ret), None

        (_, _, _, ret), _ = jax.lax.scan(body, (obs, state, jnp.asarray(True), 0.0),
                                         jax.random.split(key, steps))
        return ret

    keys = jax.random.split(jax.random.PRNGKey(1000 + seed), EVAL_EPISODES)
    return float(jnp.mean(jax.jit(jax.vmap(episode))(keys)))


def run_ours(seed: int, updates: int) -> dict:
    from jaxrl_agents.common.gymnax_env import make
    from jaxrl_agents.run.algorithms import compile_algorithm, make_config

    cfg = make_config("ppo", dict(total_steps=N_ENVS * N_STEPS * updates, n_envs=N_ENVS,
                                  n_steps=N_STEPS, n_epochs=EPOCHS, n_minibatches=MINIBATCHES,
                                  lr=HP["lr"], lr_decay=0.0, adam_eps=1e-8, gamma=HP["gamma"],
                                  gae_lambda=HP["gae_lambda"], clip_eps=HP["clip_eps"],
                                  vf_coef=HP["vf_coef"], ent_coef=HP["ent_coef"],
                                  max_grad_norm=HP["max_grad_norm"], hidden=HP["hidden"],
                                  activation="tanh"))
    env = make("CartPole-v1")
    with jax.enable_x64(True):  # as the trainer runs it
        comp = compile_algorithm("ppo", env, cfg)
        state = comp.init(jnp.stack([jax.random.PRNGKey(seed)]), env.default_params)
        t0 = time.perf_counter()
        state, stats = comp.update(state, env.default_params)  # compiles
        jax.block_until_ready(stats)
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(updates - 1):
            state, stats = comp.update(state, env.default_params)
        jax.block_until_ready(stats)
        run_s = time.perf_counter() - t0
        actor = jax.tree_util.tree_map(lambda x: x[0], state.params["actor"])
    model = comp.model
    ret = greedy_return(lambda obs: model.mode(actor, obs), seed)
    return {"sps": (updates - 1) * N_ENVS * N_STEPS / run_s, "compile_s": compile_s,
            "return": ret}


def run_rejax(seed: int, updates: int) -> dict:
    from rejax import PPO

    total = N_ENVS * N_STEPS * updates
    algo = PPO.create(env=_FiveValueCartPole(), total_timesteps=total, num_envs=N_ENVS,
                      num_steps=N_STEPS, num_epochs=EPOCHS, num_minibatches=MINIBATCHES,
                      learning_rate=HP["lr"], gamma=HP["gamma"], gae_lambda=HP["gae_lambda"],
                      clip_eps=HP["clip_eps"], vf_coef=HP["vf_coef"], ent_coef=HP["ent_coef"],
                      max_grad_norm=HP["max_grad_norm"], eval_freq=total,
                      skip_initial_evaluation=True,
                      agent_kwargs={"hidden_layer_sizes": HP["hidden"], "activation": "tanh"})
    algo = algo.replace(eval_callback=lambda algo, ts, rng: ())  # time training only
    t0 = time.perf_counter()
    train = jax.jit(algo.train).lower(jax.random.PRNGKey(seed)).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ts, _ = train(jax.random.PRNGKey(seed))
    jax.block_until_ready(ts)
    run_s = time.perf_counter() - t0
    params = ts.actor_ts.params

    def act(obs):
        logits = algo.actor.apply(params, obs[None], method="_action_dist").logits
        return jnp.argmax(logits[0])

    return {"sps": total / run_s, "compile_s": compile_s, "return": greedy_return(act, seed)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--updates", type=int, default=32)
    args = p.parse_args()
    print(f"gymnax CartPole-v1, {args.updates} updates x {N_ENVS} envs x {N_STEPS} steps = "
          f"{args.updates * N_ENVS * N_STEPS} env steps, seeds {args.seeds}")
    results = {}
    for name, fn in (("jaxrl-agents PPO", run_ours), ("rejax PPO", run_rejax)):
        runs = [fn(s, args.updates) for s in args.seeds]
        results[name] = runs
        for s, r in zip(args.seeds, runs):
            print(f"  {name:17s} seed {s}: {r['sps']:>9,.0f} steps/s  compile {r['compile_s']:5.1f}"
                  f" s  greedy return {r['return']:6.1f}")
    print("\n| | env steps/s (median) | compile s (first seed) | greedy return, mean of seeds (each) |")
    print("| --- | --- | --- | --- |")
    for name, runs in results.items():
        rets = [r["return"] for r in runs]
        print(f"| {name} | {statistics.median(r['sps'] for r in runs):,.0f} | "
              f"{runs[0]['compile_s']:.1f} | {np.mean(rets):.1f} "
              f"({', '.join(f'{x:.0f}' for x in rets)}) |")


if __name__ == "__main__":
    main()
