"""Environment steps per second of quantgate-env (paper config, float64) against an eigh-step baseline.

Usage:
    uv run python bench/env_throughput.py            # ~1.5 min idle, ~2.5 min on the loaded shared machine
    uv run python bench/env_throughput.py --quick    # 3 rounds instead of 5, fewer steps

Measured, each beside the same harness driving a baseline step, in the same run, the two
interleaved round by round (the machine is shared; medians over rounds, ratios of medians):

    gym single       gymnasium.make("quantgate_env:ZCQPEE-v0") stepped from Python (steps/s and
                     microseconds per step, the user-facing latency).

Each path runs twice, interleaved in the same rounds: the default ``propagation="exact"`` ("pkg",
"exact") and the opt-in ``propagation="fast"`` ("fast", ``quantgate_env.physics.fast_propagation``).
    vector N         gymnasium.make_vec(..., num_envs=N, vectorization_mode="vector_entry_point"),
                     N = 64 and 1024, stepped from Python.
    scan N=1024      jax.jit of a lax.scan over jax.vmap(GateEnv.step_autoreset), 1024 envs, actions
                     drawn inside the scan; no Python in the loop.

The single step is also timed beside what bounds it (issue 16), interleaved in the same rounds:

    pytree adapter   the Gymnasium step path before issue 16 over the same core: the state as a pytree
                     of ~24 device arrays in and out of the compiled call (``PytreeGymEnv``).
    compiled step    the adapter's packed compiled step alone, its one device-to-host copy included,
                     no validation or unpacking (GateGymEnv._step).
    no-op floor      a jitted no-op taking the step's very inputs (key and state pytree, numpy action,
                     packed parameters) and returning a copy of the state and an array of the packed
                     output's size, plus the copy back:
                     the dispatch cost no adapter of this shape can go below.

The baseline ("eigh step") is this file's ``eigh_step``: GateEnv.step's exact observation, reward,
flags and info (paper config: terminate mode, PE objective), with the propagation done the
straightforward way of spec 1.3 (jnp.linalg.eigh of the 3x3 and 6x6 blocks every sample,
psi <- V diag(e^{-i w dt}) V^T psi, in lax.scan). Its results are checked against GateEnv.step
before timing. The baselines use the same harness as the measured path: a Gymnasium-style
Python adapter (key split, x64 scope, numpy float32 conversion) for "gym single", a jitted
vmapped autoreset step called from Python with numpy conversion for "vector N", and the same
scan for "scan N=1024". Actions: zero-mean per step (the K deltas sum to 0), std 0.1, so
amplitudes stay inside the bound and episodes run their full 333 steps.

Rates are given per wall-clock second and per CPU second of this process: the latter is far less
disturbed by other jobs on a shared machine (the wall-clock figure is what a user sees when the
machine is theirs only if the two agree).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

# Single-threaded BLAS/LAPACK (jaxlib's CPU eigh uses scipy's LAPACK): on a shared 2-core machine
# extra OpenBLAS threads only fight over the cores and make the eigh baseline slower and erratic.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gymnasium  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import quantgate_env  # noqa: E402,F401  (registers ZCQPEE-v0)
from quantgate_env import GateEnv, make  # noqa: E402
from quantgate_env.adapters.gymnasium import _check_action  # noqa: E402
from quantgate_env.adapters.packing import FlatLayout  # noqa: E402
from quantgate_env.physics.hamiltonian import SECTOR1_CONTROL, SECTOR2_CONTROL  # noqa: E402
from quantgate_env.physics.metrics import state_metrics  # noqa: E402
from quantgate_env.physics.propagation import SectorState  # noqa: E402
from quantgate_env.precision import x64_scope  # noqa: E402
from timing import interleaved, load  # noqa: E402  (bench/ is on sys.path when a bench runs)

ACTION_STD = 0.1


# ---- the baseline step ------------------------------------------------------------------------


def _eigh_propagate(sectors: SectorState, drift, amps, dt) -> SectorState:
    def apply(h, control, u, psi):
        w, v = jnp.linalg.eigh(h + u * jnp.diag(jnp.asarray(control)))
        return v @ (jnp.exp(-1j * w * dt)[:, None] * (v.T @ psi))

    def body(s, u):
        psi1 = apply(drift.h1, SECTOR1_CONTROL, u, s.psi1)
        psi2 = apply(drift.h2, SECTOR2_CONTROL, u, s.psi2[:, None])[:, 0]
        return SectorState(psi1, psi2), None

    return jax.lax.scan(body, sectors, amps)[0]


def eigh_step(core: GateEnv):
    """GateEnv.step (terminate mode, PE objective) with eigh-per-sample propagation."""
    cfg = core.config
    assert cfg.oob_mode == "terminate" and cfg.objective == "pe", "the baseline covers the paper config"

    def step(key, state, action, params):
        action = jnp.clip(jnp.asarray(action, dtype=jnp.float64), -1.0, 1.0)
        requested = state.amps[0, -1] + jnp.cumsum(action * cfg.delta_per_action)  # amps: (1, K), one line
        oob = jnp.sum(jnp.maximum(jnp.abs(requested) / cfg.amp_bound - 1.0, 0.0)) > 0
        amps = jnp.clip(requested, -cfg.amp_bound, cfg.amp_bound)
        sectors = _eigh_propagate(state.sectors, state.drift_blocks, amps, cfg.dt)
        metrics = state_metrics(sectors, cfg.objective, cfg.concurrence_weight, cfg.unitarity_weight)
        tv = cfg.tv_penalty_scale * jnp.sum(jnp.abs(jnp.diff(amps)))
        reward = -jnp.log10(jnp.maximum(metrics.JT, cfg.jt_floor)) * cfg.rew_scale - cfg.reward_offset - tv
        reward = jnp.where(oob, cfg.terminal_penalty * (1.0 - state.idx / cfg.pulse_length), reward)
        idx = state.idx + cfg.n_time_steps
        terminated = idx + cfg.n_time_steps - 1 >= cfg.pulse_length
        new_state = state._replace(sectors=sectors, amps=amps[None], idx=idx, obs_idx=state.idx,
                                   terminated=terminated, truncated=oob)
        obs = core.observe(new_state)  # the core's observation of the state (time feature before the advance)
        info = {"JT": metrics.JT, "concurrence": metrics.concurrence, "unitarity": metrics.unitarity,
                "tv_penalty": tv, "oob": oob, "t": idx * cfg.dt, "amps": amps}
        return obs, new_state, reward, terminated, oob, info

    return step


def eigh_step_autoreset(core: GateEnv):
    step = eigh_step(core)

    def step_autoreset(key, state, action, params):  # GateEnv.step_autoreset with the eigh step
        obs, state, reward, terminated, truncated, info = step(key, state, action, params)
        reset_obs, reset_state = core.reset(key, params)
        done = terminated | truncated
        info = dict(info, final_obs=obs)
        state = jax.tree.map(lambda new, old: jnp.where(done, new, old), reset_state, state)
        return jnp.where(done, reset_obs, obs), state, reward, terminated, truncated, info

    return step_autoreset


def check_baseline(core: GateEnv, n_steps: int = 40) -> float:
    """Max |difference| of obs and reward between GateEnv.step and the eigh step over a trajectory."""
    with x64_scope():
        params = core.default_params
        obs, s_pkg = core.reset(jax.random.PRNGKey(0), params)
        s_eig = s_pkg
        pkg, eig = jax.jit(core.step), jax.jit(eigh_step(core))
        worst = 0.0
        for a in zero_mean_actions(np.random.default_rng(1), (n_steps, core.config.n_time_steps)):
            o1, s_pkg, r1, *_ = pkg(None, s_pkg, a, params)
            o2, s_eig, r2, *_ = eig(None, s_eig, a, params)
            worst = max(worst, float(jnp.max(jnp.abs(o1 - o2))), float(jnp.abs(r1 - r2)))
    return worst


def zero_mean_actions(rng, shape):
    a = rng.normal(0.0, ACTION_STD, size=shape)
    return (a - a.mean(axis=-1, keepdims=True)).astype(np.float32)


# ---- harnesses ----------------------------------------------------------------------------------


class EighGymEnv:
    """GateGymEnv's step path (key split, x64 scope, jitted step, numpy conversion) over eigh_step."""

    def __init__(self, core: GateEnv):
        self.core, self.params = core, core.default_params
        self._step, self._reset = jax.jit(eigh_step(core)), jax.jit(core.reset)
        self._key = jax.random.PRNGKey(0)
        self.reset()

    def reset(self):
        self._key, sub = jax.random.split(self._key)
        with x64_scope():
            _, self._state = self._reset(sub, self.params)

    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        self._key, sub = jax.random.split(self._key)
        with x64_scope():
            obs, self._state, reward, term, trunc, info = self._step(sub, self._state, action, self.params)
            return (np.asarray(obs, dtype=np.float32), float(reward), bool(term), bool(trunc),
                    {k: np.asarray(v) for k, v in info.items()})


class PytreeGymEnv:
    """GateGymEnv's step path before issue 16: the state as a pytree in and out of every compiled call."""

    def __init__(self, core: GateEnv):
        self.core = core
        with x64_scope():
            self.params = jax.device_put(core.default_params)

        def step(key, state, action, params):
            key, sub = jax.random.split(key)
            obs, state, reward, terminated, truncated, info = core.step(sub, state, action, params)
            return key, state, self._layout.pack((obs, reward, terminated, truncated, info))

        def reset(key, params):
            key, sub = jax.random.split(key)
            return key, core.reset(sub, params)[1]

        with x64_scope():
            _, state = jax.eval_shape(core.reset, jax.random.PRNGKey(0), core.default_params)
            out = jax.eval_shape(core.step, jax.random.PRNGKey(0), state, jnp.zeros(3), core.default_params)
        self._layout = FlatLayout.of((out[0],) + out[2:])
        self._unpack = self._layout.host_unpacker()
        self._step, self._reset = jax.jit(step), jax.jit(reset)
        self._key = jax.random.PRNGKey(0)
        self.reset()

    def reset(self):
        with x64_scope():
            self._key, self._state = self._reset(self._key, self.params)

    def step(self, action):
        action = _check_action(action, (self.core.config.n_time_steps,))
        with x64_scope():
            self._key, self._state, packed = self._step(self._key, self._state, action, self.params)
        obs, reward, terminated, truncated, info = self._unpack(np.asarray(packed))
        return obs.astype(np.float32), float(reward), bool(terminated), bool(truncated), info


class _Floor:
    """A zero-argument-step stand-in with ``step(action)`` timing only a compiled call and its copy back."""

    def __init__(self, call):
        self.step, self.reset = call, lambda: None


def step_floors(env) -> dict:
    """The packed compiled step alone, and a jitted no-op with the same inputs, as ``step(action)`` objects."""
    gym = env.unwrapped
    carry, params = gym._carry, gym._params
    with x64_scope():
        n_out = gym._step(carry, np.zeros(3), params)[1].shape[0]
        noop = jax.jit(lambda c, a, p: (jax.tree.map(jnp.copy, c), jnp.zeros(n_out) + a[0]))

    def compiled(action):
        with x64_scope():
            return np.asarray(gym._step(carry, np.asarray(action, np.float64), params)[1])

    def floor(action):
        with x64_scope():
            return np.asarray(noop(carry, np.asarray(action, np.float64), params)[1])

    return {"compiled step": _Floor(compiled), "no-op floor": _Floor(floor)}


class EighVectorEnv:
    """A jitted vmapped eigh autoreset step called from Python, outputs converted to numpy."""

    def __init__(self, core: GateEnv, num_envs: int):
        self.core, self.params, self.num_envs = core, core.default_params, num_envs
        self._step = jax.jit(jax.vmap(eigh_step_autoreset(core), in_axes=(0, 0, 0, None)))
        self._key = jax.random.PRNGKey(0)
        with x64_scope():
            _, self._state = jax.jit(jax.vmap(core.reset, in_axes=(0, None)))(
                jax.random.split(self._key, num_envs), self.params)

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.float64)
        self._key, sub = jax.random.split(self._key)
        with x64_scope():
            obs, self._state, reward, term, trunc, info = self._step(
                jax.random.split(sub, self.num_envs), self._state, actions, self.params)
            return (np.asarray(obs, dtype=np.float32), np.asarray(reward), np.asarray(term), np.asarray(trunc),
                    {k: np.asarray(v) for k, v in info.items()})


def python_loop_seconds(env, actions) -> tuple[float, float]:
    """(wall, process CPU) seconds for env.step over the given actions (the first axis), from Python."""
    t0, c0 = time.perf_counter(), time.process_time()
    for a in actions:
        env.step(a)
    return time.perf_counter() - t0, time.process_time() - c0


def scan_rollout(step_autoreset, core: GateEnv, num_envs: int, n_steps: int):
    """jit(lax.scan over n_steps of vmap(step_autoreset)), actions drawn inside: returns a callable."""
    params = core.default_params
    k = core.config.n_time_steps

    def run(key, state):
        def body(carry, _):
            key, state = carry
            key, k_act, k_env = jax.random.split(key, 3)
            a = ACTION_STD * jax.random.normal(k_act, (num_envs, k))
            a = a - a.mean(axis=-1, keepdims=True)
            obs, state, reward, *_ = jax.vmap(step_autoreset, in_axes=(0, 0, 0, None))(
                jax.random.split(k_env, num_envs), state, a, params)
            return (key, state), reward.sum()

        (key, state), rewards = jax.lax.scan(body, (key, state), None, length=n_steps)
        return key, state, rewards.sum()

    with x64_scope():
        _, state = jax.vmap(core.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(1), num_envs), params)
        compiled = jax.jit(run).lower(jax.random.PRNGKey(2), state).compile()

    def call():
        with x64_scope():
            out = compiled(jax.random.PRNGKey(2), state)
            jax.block_until_ready(out)

    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    args = parser.parse_args()
    t_start = time.perf_counter()
    rounds = 3 if args.quick else 5
    gym_steps, vec_steps, scan_steps = (100, 10, 30) if args.quick else (200, 30, 60)
    rng = np.random.default_rng(0)

    core = make()
    cfg = core.config
    print(f"jax {jax.__version__} on cpu; paper config (K = {cfg.n_time_steps}, {cfg.pulse_length} samples, "
          f"{cfg.n_steps} steps/episode), float64; {load()}")
    print(f"Taylor plan of make(): {core.plan}")
    print(f"eigh-step baseline vs GateEnv.step over 40 steps: max |obs, reward difference| = {check_baseline(core):.1e}")
    rows = []

    # -- Gymnasium env stepped from Python, beside the pre-16 adapter and the floors ------------------
    env = gymnasium.make("quantgate_env:ZCQPEE-v0")
    env.reset(seed=0)
    fast_env = gymnasium.make("quantgate_env:ZCQPEE-v0", propagation="fast")
    fast_env.reset(seed=0)
    single = {"pkg": env, "fast": fast_env, "eigh": EighGymEnv(make()), "pytree adapter": PytreeGymEnv(make()),
              **step_floors(env)}
    acts = zero_mean_actions(rng, (gym_steps, cfg.n_time_steps))
    for e in single.values():  # compile and warm up
        python_loop_seconds(e, acts[:5])

    single_t = {name: [] for name in single}
    names = list(single)
    for r in range(rounds):  # interleaved, order rotated every round; resets untimed (no episode ends: gym_steps < 333)
        for name in names[r % len(names):] + names[:r % len(names)]:
            single[name].reset()
            single_t[name].append(python_loop_seconds(single[name], acts))
    rows.append(("gym single (Python loop)", 1, gym_steps, single_t))

    # -- vector env stepped from Python ------------------------------------------------------------
    for n in (64, 1024):
        venv = gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=n, vectorization_mode="vector_entry_point")
        venv.reset(seed=0)
        vfast = gymnasium.make_vec("quantgate_env:ZCQPEE-v0", num_envs=n, vectorization_mode="vector_entry_point",
                                   propagation="fast")
        vfast.reset(seed=0)
        vbase = EighVectorEnv(make(), n)
        vacts = zero_mean_actions(rng, (vec_steps, n, cfg.n_time_steps))
        for e in (venv, vfast, vbase):
            python_loop_seconds(e, vacts[:2])
        t = interleaved({"pkg": lambda e=venv, a=vacts: python_loop_seconds(e, a),
                         "fast": lambda e=vfast, a=vacts: python_loop_seconds(e, a),
                         "eigh": lambda e=vbase, a=vacts: python_loop_seconds(e, a)}, rounds)
        rows.append((f"vector N={n} (Python loop)", n, vec_steps, t))
        venv.close()
        vfast.close()

    # -- jitted scan over vmapped step_autoreset ---------------------------------------------------
    n = 1024
    fast_core = make(propagation="fast")
    pkg_scan = scan_rollout(core.step_autoreset, core, n, scan_steps)
    fast_scan = scan_rollout(fast_core.step_autoreset, fast_core, n, scan_steps)
    eigh_scan = scan_rollout(eigh_step_autoreset(core), core, n, scan_steps)
    pkg_scan(), fast_scan(), eigh_scan()
    t = interleaved({"pkg": pkg_scan, "fast": fast_scan, "eigh": eigh_scan}, rounds)
    rows.append((f"jit scan N={n}, {scan_steps} steps", n, scan_steps, t))

    for col, what in ((0, "env steps per wall-clock second"), (1, "env steps per CPU second of this process")):
        print(f"\n{what} (median over {rounds} interleaved rounds [slowest..fastest]); baseline = eigh step, same harness")
        print(f"  {'path':<30}{'exact (default)':>28}{'fast':>28}{'eigh baseline':>28}"
              f"{'exact/eigh':>12}{'fast/eigh':>11}{'fast/exact':>12}")
        for label, n_envs, steps, t in rows:
            cells, med = [], {}
            for name in ("pkg", "fast", "eigh"):
                sps = [n_envs * steps / s[col] for s in t[name]]
                med[name] = statistics.median(sps)
                cells.append(f"{med[name]:9.3g} [{min(sps):.2g}..{max(sps):.2g}]")
            print(f"  {label:<30}{cells[0]:>28}{cells[1]:>28}{cells[2]:>28}{med['pkg'] / med['eigh']:>11.2f}x"
                  f"{med['fast'] / med['eigh']:>10.2f}x{med['fast'] / med['pkg']:>11.2f}x")
        label, _, steps, t = rows[0]
        us = {name: 1e6 * statistics.median(s[col] for s in t[name]) / steps for name in t}
        print("  gym single step, " + ("CPU " if col else "") + "us per step (median): "
              + ", ".join(f"{name} {v:.0f}" for name, v in us.items())
              + f"; pytree adapter / pkg {us['pytree adapter'] / us['pkg']:.2f}x, eigh / pkg {us['eigh'] / us['pkg']:.2f}x,"
              f" eigh / fast {us['eigh'] / us['fast']:.2f}x")
    print(f"total {time.perf_counter() - t_start:.0f} s; {load()}; BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}")


if __name__ == "__main__":
    main()
