"""SB3 PPO's environment steps per second on ``quantgate_env.sb3.make_vec_env`` beside SB3's own DummyVecEnv.

Usage:
    uv run --locked --group test python bench/sb3_vec_env.py            # paper PPO config, 5 rounds
    uv run --locked --group test python bench/sb3_vec_env.py --quick    # 3 rounds, 64 x 32-step rollouts

Two SB3 PPO models with the same hyper-parameters (the paper's PPO: 64 envs, 128 steps per env per
rollout, 10 epochs of minibatches of 256, tanh 128x128, torch on one CPU thread as SB3 advises), one on

    compiled   ``quantgate_env.sb3.make_vec_env(64, seed=0)``: one compiled call per step for all
               64 envs, same-step auto-reset, in SB3's ``VecMonitor``;
    dummy      ``stable_baselines3.common.env_util.make_vec_env("quantgate_env:ZCQPEE-v0", 64, seed=0,
               vec_env_cls=DummyVecEnv)``: 64 ``gymnasium.make`` envs stepped one by one, each in a
               ``Monitor`` (what an SB3 user runs today).

Each round runs one PPO update (``learn`` of one rollout: collection plus the gradient epochs) of
each model, interleaved (order swapped every round) after one warm-up update each (compilation).
A second pair of rows times the environments alone (their own instances): ``n_steps`` calls of
``venv.step`` with fixed random actions in place of the policy's, so the environment's share shows
without SB3's policy and update. Printed: per-round figures, medians over rounds (wall and process-CPU env steps per second),
the ratio of medians, and the load average before and after (the machine is shared: compare
ratios, not absolute figures, across runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import interleaved, load  # noqa: E402

GYM_ID = "quantgate_env:ZCQPEE-v0"


def _venvs(n_envs: int, options: dict) -> dict:
    import quantgate_env
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    return {
        "compiled": quantgate_env.sb3.make_vec_env(n_envs, seed=0, **options),
        "dummy": make_vec_env(GYM_ID, n_envs=n_envs, seed=0, vec_env_cls=DummyVecEnv, env_kwargs=options),
    }


def _models(n_envs: int, n_steps: int, options: dict) -> dict:
    import torch
    from stable_baselines3 import PPO

    hyper = dict(n_steps=n_steps, batch_size=256, n_epochs=10, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95,
                 clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, device="cpu", seed=0,
                 policy_kwargs=dict(net_arch=dict(pi=[128, 128], vf=[128, 128]), activation_fn=torch.nn.Tanh))
    return {name: PPO("MlpPolicy", venv, **hyper) for name, venv in _venvs(n_envs, options).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds, 32 steps per env per rollout")
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (default 5, --quick 3)")
    ap.add_argument("--n-envs", type=int, default=64)
    ap.add_argument("--n-steps", type=int, default=None, help="steps per env per rollout (default 128, --quick 32)")
    ap.add_argument("--oob-mode", choices=("terminate", "clip"), default="terminate")
    args = ap.parse_args()
    rounds = args.rounds or (3 if args.quick else 5)
    n_steps = args.n_steps or (32 if args.quick else 128)
    if rounds < 1 or args.n_envs < 1 or n_steps < 1:
        ap.error("--rounds, --n-envs and --n-steps: expected positive integers")

    import numpy as np
    import torch

    # SB3's make_vec_env asks every env for render_mode="rgb_array"; Gymnasium warns once per env
    warnings.filterwarnings("ignore", message=".*render_mode='rgb_array'")
    torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "1")))
    print(f"start: {load()}")
    options = dict(oob_mode=args.oob_mode)
    models = _models(args.n_envs, n_steps, options)
    venvs = _venvs(args.n_envs, options)  # their own envs: stepping the models' would move their rollouts
    rollout = args.n_envs * n_steps
    for model in models.values():  # warm-up: compilation, torch's first calls
        model.learn(total_timesteps=rollout)

    def update(model):
        return lambda: model.learn(total_timesteps=rollout, reset_num_timesteps=False)

    rng = np.random.default_rng(0)
    actions = rng.uniform(-0.3, 0.3, size=(n_steps, args.n_envs, 3)).astype(np.float32)

    def collect(venv):
        venv.reset()
        for a in actions[:2]:  # warm-up
            venv.step(a)

        def run():
            for a in actions:
                venv.step(a)
        return run

    cases = {f"PPO update, {name}": update(model) for name, model in models.items()}
    cases.update({f"env steps only, {name}": collect(venv) for name, venv in venvs.items()})
    times = interleaved(cases, rounds)
    assert all(model.num_timesteps == (rounds + 1) * rollout for model in models.values())

    print(f"\nSB3 PPO, {args.n_envs} envs x {n_steps} steps per rollout ({rollout} env steps), oob_mode="
          f"{args.oob_mode}, torch threads {torch.get_num_threads()}, {rounds} interleaved rounds")
    print(f"{'case':32s} {'steps/s (wall), per round':44s} {'median wall':>12s} {'median CPU':>12s}")
    medians = {}
    for name, rows in times.items():
        per_round = [rollout / wall for wall, _ in rows]
        medians[name] = (statistics.median(per_round), statistics.median(rollout / cpu for _, cpu in rows))
        print(f"{name:32s} {' '.join(f'{x:8.0f}' for x in per_round):44s} {medians[name][0]:12.0f} {medians[name][1]:12.0f}")
    for what in ("PPO update", "env steps only"):
        ours, base = medians[f"{what}, compiled"], medians[f"{what}, dummy"]
        print(f"{what}: compiled / DummyVecEnv = {ours[0] / base[0]:.2f}x wall, {ours[1] / base[1]:.2f}x CPU")
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
