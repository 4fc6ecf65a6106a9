"""A tiny functional environment following docs/contracts.md, reporting a pulse like the gate env.

Used to test sb3-bridge's functional evaluation path without quantgate-env: observations (3,)
(matches the Pendulum fixtures), Box(1) actions in [-1, 1] scaled to rad/ns, K = 3 samples per step
of DT = 0.05 ns, and info leaves JT / concurrence / unitarity / t / amps like the gate env's, with
an evaluation description (`ToyEvaluation`) whose summary and line have the gate env's field names.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

K = 3
DT = 0.05
SCALE = 2.0


class ToyEvaluation:
    """The docs/contracts.md evaluation description: best J_T and its time, 1 - U there, first PE."""

    score, score_mode, plots = "JT_min", "min", {}

    def record(self, info):
        return {k: v for k, v in info.items() if k != "final_obs"}

    def summarise(self, episode):
        idx = np.flatnonzero(np.asarray(episode["alive"], bool))
        jt, t = np.asarray(episode["JT"])[idx], np.asarray(episode["t"])[idx]
        best = int(np.argmin(jt))
        pe = np.flatnonzero(np.asarray(episode["concurrence"])[idx] >= 1.0)
        return {"JT_min": float(jt[best]), "t_JT_min": float(t[best]),
                "1mU_at_best": float(1.0 - np.asarray(episode["unitarity"])[idx][best]),
                "t_first_PE": float(t[pe[0]]) if pe.size else float("nan")}

    def format(self, s):
        pe = "none yet" if np.isnan(s["t_first_PE"]) else f"{s['t_first_PE']:.2f}ns"
        return f"minJT={s['JT_min']:.3e}@{s['t_JT_min']:.1f}ns  firstPE={pe}  1-U={s['1mU_at_best']:.1e}"

    def rollout_stats(self, info):
        return {}


@dataclasses.dataclass(frozen=True)
class ToyPulseEnv:
    max_episode_steps: int = 10

    @property
    def evaluation(self):
        return ToyEvaluation()

    @property
    def observation_space(self):
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    @property
    def action_space(self):
        return spaces.Box(-1.0, 1.0, (1,), np.float32)

    @property
    def default_params(self):
        return {"gain": jnp.asarray(0.5)}

    @property
    def eval_params(self):
        return {"gain": jnp.asarray(0.5)}

    def reset(self, key, params):
        x = jnp.zeros(3) + 0.1
        state = {"x": x, "k": jnp.asarray(0)}
        return x, state

    def step(self, key, state, action, params):
        u = jnp.clip(jnp.reshape(action, (1,)), -1.0, 1.0)[0] * SCALE
        x = jnp.tanh(state["x"] * params["gain"] + u * jnp.array([1.0, -0.5, 0.25]))
        k = state["k"] + 1
        jt = jnp.sum(x**2) / 3.0
        info = {"JT": jt, "concurrence": 1.0 - jt, "unitarity": 1.0 - 0.1 * jt,
                "t": k * K * DT, "amps": jnp.full((K,), u)}
        terminated = k >= self.max_episode_steps
        return x, {"x": x, "k": k}, -jt, terminated, jnp.asarray(False), info

    def step_autoreset(self, key, state, action, params):
        obs, new_state, r, term, trunc, info = self.step(key, state, action, params)
        info = dict(info, final_obs=obs)
        obs0, state0 = self.reset(key, params)
        done = term | trunc
        obs = jnp.where(done, obs0, obs)
        new_state = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), state0, new_state)
        return obs, new_state, r, term, trunc, info


def make(**options):
    return ToyPulseEnv(**options)
