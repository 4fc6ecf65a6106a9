"""Robustness maps over the recool detuning range: a run's kept policy, closed loop, and the paper's pulse.

Both maps are quantgate-env's (`quantgate_env.tools.robustness`) on the 11 x 11 grid of qubit
detunings in the recool range (both qubits +-5.7 MHz); this module chooses what is mapped.
"""

from __future__ import annotations

import functools

import numpy as np

from .paper import PAPER_GATE_NS

__all__ = ["ROBUST_CANDIDATES", "VALIDATION_DEVICES", "VALIDATION_SEED", "GRID", "policy_map",
           "paper_map"]

# A robustness entry maps the one of these kept policies that does best on VALIDATION_DEVICES
# devices drawn (VALIDATION_SEED) from the recool range: see `policy_map`.
ROBUST_CANDIDATES = ("best", "last")
VALIDATION_DEVICES = 128
VALIDATION_SEED = 0
GRID = 11  # points per detuning axis


def policy_map(run_dir: str, rc: dict) -> dict:
    """A domain-randomised run's policy, closed loop, over the 11 x 11 recool detuning grid.

    Of the run's two kept policies, "best" (ranked by its evaluations, on the nominal device only)
    and "last", the one mapped is the one with the lower worst J_T on `policy_validation`'s
    devices: drawn from the same range, none of them on the grid but the nominal one, so the
    choice is not made on the map it reports. The nominal ranking alone can keep a policy tuned to
    the nominal device (ppo-dr-short-tft s1's "best": worst 7.2e-3 on the grid, its "last" 1.8e-3).

    Args:
        run_dir: the run directory (its best_policy/ and last_policy/ are loaded).
        rc: its config.json (``env_options`` build the environment, amplitudes clipped).

    Returns:
        The map's summary (gate time, nominal, median and worst J_T) with "n", "policy" (the kept
        policy mapped), "validation" ({policy: its validation summary}), "offsets_mhz" ((n * n, 2)
        as lists) and "jt_at_gate_time" ((n * n,)).
    """
    from jaxrl_agents import load_policy
    from quantgate_env import make
    from quantgate_env.tools.robustness import policy_robustness, policy_validation

    env = make(**{**rc.get("env_options", {}), "oob_mode": "clip"})
    acts, validation = {}, {}
    for which in ROBUST_CANDIDATES:
        policy = load_policy(run_dir, which)
        acts[which] = lambda obs, policy=policy: policy.act(obs, deterministic=True)
        validation[which] = policy_validation(acts[which], env=env, half_width_mhz="recool",
                                              count=VALIDATION_DEVICES, seed=VALIDATION_SEED)
    chosen = min(ROBUST_CANDIDATES, key=lambda which: validation[which]["worst_JT"])  # "best" on ties
    result = policy_robustness(acts[chosen], env=env, half_width_mhz="recool", n=GRID)
    return {**result.summary(), "n": result.n, "policy": chosen, "validation": validation,
            "offsets_mhz": np.asarray(result.offsets_mhz).tolist(),
            "jt_at_gate_time": np.asarray(result.jt_at_gate_time).tolist()}


@functools.lru_cache(maxsize=1)
def paper_map():
    """The paper's stored pulse, open loop and cut at its gate time, over the recool 11 x 11 grid.

    Computed once per process (`quantgate_env.tools.robustness.pulse_robustness`): the results
    page's aims row and robustness section both need it.
    """
    from quantgate_env import paper_pulse
    from quantgate_env.tools.robustness import pulse_robustness

    amps, dt = paper_pulse()
    return pulse_robustness(amps[:int(round(PAPER_GATE_NS / dt))], dt=dt, half_width_mhz="recool",
                            n=GRID, gate_time=PAPER_GATE_NS)
