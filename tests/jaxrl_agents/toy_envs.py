"""A toy functional environment following docs/contracts.md, for testing jaxrl-agents.

"Reach": a point p in the plane must reach a goal g. Observation (5,) = (p, g, t / horizon);
action (2,) in [-1, 1] (clipped by the environment); p <- p + gain * clip(a).
Reward = -|p - g|^2 after the move. The episode terminates after `horizon` steps (like the end of a
pulse) and is truncated when |p|_inf > bound (like an out-of-bounds pulse). info mirrors the gate
env's keys: JT (= squared distance), concurrence, unitarity, tv_penalty, oob, t, amps, and the
env describes its evaluation episode (`ReachEvaluation`, the contracts.Evaluation protocol) with
summary fields named as the gate env's (best J_T, its time, J_T at the end, 1 - U at the best
step, first "PE" time), so the trainer's path for a describing env is tested on a toy.
``describe=False`` gives the same env without an ``evaluation`` (the generic record: return and
length).
A good policy moves straight to the goal: return ~ -1 versus ~ -15 for a random one.

``nan_after=N`` (tests of the non-finite stop): every environment counts its steps across episodes
and returns a NaN reward from its N-th step on, so a training run goes non-finite at a known update
(0, the default, keeps the plain environment with the plain state).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces


@dataclasses.dataclass(frozen=True)
class ReachEvaluation:
    """Reach's evaluation description: record every info field, summarise like the gate env."""

    score = "JT_min"
    score_mode = "min"
    plots = {"curve": {"field": "JT_min", "label": "best squared distance", "scale": "log"},
             "x": {"key": "t", "label": "t"},
             "panels": [{"key": "amps", "label": "move", "kind": "stairs"},
                        {"key": "JT", "label": "squared distance", "scale": "log"},
                        {"key": "unitarity", "label": "1 - U", "scale": "log",
                         "complement": True}]}

    def record(self, info):
        return {k: v for k, v in info.items() if k != "final_obs"}

    def summarise(self, episode):
        idx = np.flatnonzero(np.asarray(episode["alive"], bool))
        jt, t = np.asarray(episode["JT"], np.float64), np.asarray(episode["t"], np.float64)
        if not idx.size or np.all(np.isnan(jt[idx])):
            nan = float("nan")
            return {"JT_min": nan, "t_JT_min": nan, "JT_end": nan, "1mU_at_best": nan,
                    "t_first_PE": nan}
        best = idx[int(np.nanargmin(jt[idx]))]
        pe = idx[np.asarray(episode["concurrence"])[idx] >= 1.0]
        return {"JT_min": float(jt[best]), "t_JT_min": float(t[best]),
                "JT_end": float(jt[idx[-1]]),
                "1mU_at_best": float(1.0 - np.asarray(episode["unitarity"])[best]),
                "t_first_PE": float(t[pe[0]]) if pe.size else float("nan")}

    def format(self, summary):
        pe = summary["t_first_PE"]
        return (f"minJT={summary['JT_min']:.3e}@{summary['t_JT_min']:.1f}ns  "
                f"firstPE={'none yet' if np.isnan(pe) else f'{pe:.2f}ns'}")

    def rollout_stats(self, info):
        return {"min_JT": info["JT"].min()}


@dataclasses.dataclass(frozen=True)
class Reach:
    horizon: int = 16
    bound: float = 2.0
    dt: float = 0.5  # "ns" per step, for the t info field
    nan_after: int = 0
    describe: bool = True
    # Like the gate env it mirrors (float64 observations), it asks the trainer for x64: the runs
    # and committed numbers of these tests were made so. RunSpec(x64=False) trains it in float32.
    requires_x64 = True

    @property
    def evaluation(self):
        if not self.describe:
            return None
        return ReachEvaluation()

    @property
    def max_episode_steps(self) -> int:
        return self.horizon

    @property
    def observation_space(self):
        return spaces.Box(-np.inf, np.inf, (5,), np.float64)

    @property
    def action_space(self):
        return spaces.Box(-1.0, 1.0, (2,), np.float32)

    @property
    def default_params(self):
        return {"gain": jnp.asarray(0.25), "randomize": jnp.asarray(1.0),
                "start": jnp.zeros(2), "goal": jnp.zeros(2)}

    @property
    def eval_params(self):
        return {"gain": jnp.asarray(0.25), "randomize": jnp.asarray(0.0),
                "start": jnp.asarray([-0.8, 0.5]), "goal": jnp.asarray([0.6, -0.4])}

    def _obs(self, state):
        frac = state["t"].astype(state["p"].dtype) / self.horizon
        return jnp.concatenate([state["p"], state["g"], frac[None]])

    def reset(self, key, params):
        k1, k2 = jax.random.split(key)
        dtype = params["start"].dtype
        r = params["randomize"]
        p = r * jax.random.uniform(k1, (2,), dtype, -1, 1) + (1 - r) * params["start"]
        g = r * jax.random.uniform(k2, (2,), dtype, -1, 1) + (1 - r) * params["goal"]
        state = {"p": p, "g": g, "t": jnp.zeros((), jnp.int32)}
        if self.nan_after:
            state["clock"] = jnp.zeros((), jnp.int32)
        return self._obs(state), state

    def step(self, key, state, action, params):
        del key  # deterministic dynamics
        a = jnp.clip(action, -1.0, 1.0).astype(state["p"].dtype)
        p = state["p"] + params["gain"] * a
        t = state["t"] + 1
        new = {"p": p, "g": state["g"], "t": t}
        jt = jnp.sum((p - state["g"]) ** 2)
        reward = -jt
        if self.nan_after:
            new["clock"] = state["clock"] + 1
            reward = jnp.where(new["clock"] >= self.nan_after, jnp.nan, reward)
        oob = jnp.max(jnp.abs(p)) > self.bound
        terminated = t >= self.horizon
        truncated = oob & ~terminated
        info = {"JT": jt, "concurrence": jnp.exp(-jt), "unitarity": 1.0 - 1e-3 * jnp.sum(a**2),
                "tv_penalty": jnp.zeros_like(jt), "oob": oob, "t": t.astype(jt.dtype) * self.dt,
                "amps": a}
        return self._obs(new), new, reward, terminated, truncated, info

    def step_autoreset(self, key, state, action, params):
        k_step, k_reset = jax.random.split(key)
        obs, state, reward, term, trunc, info = self.step(k_step, state, action, params)
        obs_reset, state_reset = self.reset(k_reset, params)
        if self.nan_after:  # the step counter runs on across episodes
            state_reset = {**state_reset, "clock": state["clock"]}
        done = term | trunc
        info = {**info, "final_obs": obs}
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), state_reset, state)
        obs = jnp.where(done, obs_reset, obs)
        return obs, state, reward, term, trunc, info


def make_reach(**options) -> Reach:
    """Factory for the CLI: ``--env toy_envs:make_reach --env-option horizon=8``."""
    return Reach(**options)


def not_an_env(**options):
    """A factory that returns something that is not an environment (for error tests)."""
    return object()
