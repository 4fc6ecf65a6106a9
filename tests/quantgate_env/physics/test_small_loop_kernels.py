"""The exact propagation compiled as loop kernels (XLA's small-loop threshold) stays exact to rounding.

``jaxrl-train`` compiles new runs with XLA:CPU's ``xla_cpu_small_while_loop_byte_threshold`` raised
(jaxrl_agents/run/host/small_loops.py), which turns the Taylor series' loop (and, for few envs,
the loop over a step's samples) into single kernels. Those round some operations differently, so
the claim is not bit equality but the physics' own bound: a subprocess started with the threshold
steps 4 envs through a full paper episode (333 steps, 1000 samples, random actions), and its
states after every step must match dense 27x27 ``scipy.linalg.expm`` products within the bound
test_fast_propagation.py derives for the exact series, as this process's (XLA's default) do; J_T
within the bound that follows. The subprocess also reports that its program holds loop kernels,
so the test cannot pass by compiling the default program twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
from quantgate_env import make
from quantgate_env.physics.metrics import state_metrics
from quantgate_env.physics.propagation import SectorState

from .test_fast_propagation import _amplitude_bound, _dense_states, _metric_bounds

#: the threshold jaxrl-train uses (jaxrl_agents.run.host.small_loops.DEFAULT_BYTES); the env
#: package does not depend on the agents, so the number is repeated here
THRESHOLD = 256 * 1024
N_ENVS = 4

_EPISODE = textwrap.dedent("""
    import sys
    import jax, numpy as np
    if __name__ == "__main__":
        jax.config.update("jax_enable_x64", True)
    from quantgate_env import make

    env = make()
    params = env.eval_params

    def episode(actions):
        _, state = jax.vmap(lambda k: env.reset(k, params))(jax.random.split(jax.random.PRNGKey(0), {n}))

        def body(state, a):
            _, state, _, _, _, info = jax.vmap(lambda s, x: env.step(None, s, x, params))(state, a)
            return state, (state.sectors.psi1, state.sectors.psi2, info["JT"], info["amps"])

        return jax.lax.scan(body, state, actions)[1]

    def run(actions):
        compiled = jax.jit(episode).lower(actions).compile()
        return jax.device_get(compiled(actions)), "xla_cpu_small_call" in compiled.as_text()

    if __name__ == "__main__":
        with np.load(sys.argv[1]) as f:
            actions = f["actions"]
        (psi1, psi2, jt, amps), kernels = run(actions)
        np.savez(sys.argv[2], psi1=psi1, psi2=psi2, jt=jt, amps=amps, kernels=kernels)
""").format(n=N_ENVS)


def _episode_in_subprocess(tmp_path, actions: np.ndarray, xla_flags: str) -> dict:
    script, inputs, outputs = tmp_path / "episode.py", tmp_path / "actions.npz", tmp_path / "out.npz"
    script.write_text(_EPISODE)
    np.savez(inputs, actions=actions)
    subprocess.run([sys.executable, str(script), str(inputs), str(outputs)], check=True,
                   env=dict(os.environ, XLA_FLAGS=xla_flags), timeout=600)
    with np.load(outputs) as f:
        return {k: f[k] for k in f.files}


def _episode_here(actions: np.ndarray) -> dict:
    namespace: dict = {"__name__": "episode"}
    with jax.enable_x64(True):  # the same program, this process's flags (and x64 only in here)
        exec(compile(_EPISODE, "episode", "exec"), namespace)
        (psi1, psi2, jt, amps), kernels = namespace["run"](actions)
    return dict(psi1=psi1, psi2=psi2, jt=jt, amps=amps, kernels=kernels)


def _check_against_dense(out: dict, what: str) -> None:
    env = make()
    cfg = env.config
    ref_metrics = jax.jit(lambda s: state_metrics(s, cfg.objective, cfg.concurrence_weight, cfg.unitarity_weight))
    for e in range(N_ENVS):
        amps = out["amps"][:, e].reshape(-1).astype(np.float64)  # (n_steps * K,) the samples played
        refs = _dense_states(env.eval_params.device, amps, cfg.dt)
        for i in range(cfg.n_steps):
            n_done = (i + 1) * cfg.n_time_steps
            delta = _amplitude_bound(env.plan, n_done, np.float64)
            ref = refs[n_done - 1]
            err = max(np.max(np.abs(out["psi1"][i, e] - ref.psi1)), np.max(np.abs(out["psi2"][i, e] - ref.psi2)))
            assert err <= delta, (what, e, i, err, delta)
        with jax.enable_x64(True):
            jt_ref = float(ref_metrics(SectorState(np.asarray(ref.psi1), np.asarray(ref.psi2))).JT)
        assert abs(float(out["jt"][-1, e]) - jt_ref) <= _metric_bounds(delta)[1], (what, e)


def test_loop_kernels_keep_the_exact_series_within_its_bound(tmp_path):
    cfg = make().config
    rng = np.random.default_rng(11)
    a = rng.normal(0.0, 0.15, size=(cfg.n_steps, N_ENVS, cfg.n_time_steps))
    actions = a - a.mean(axis=-1, keepdims=True)  # zero-mean steps: the full 333 steps in bounds
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_extra_options=" \
            f"xla_cpu_small_while_loop_byte_threshold={THRESHOLD}".strip()
    kernels = _episode_in_subprocess(tmp_path, actions, flags)
    assert bool(kernels["kernels"]), "the threshold made no loop a kernel: nothing was tested"
    here = _episode_here(actions)
    np.testing.assert_array_equal(kernels["amps"], here["amps"])  # the same pulses were played
    _check_against_dense(kernels, "loop kernels")
    _check_against_dense(here, "XLA's default")
