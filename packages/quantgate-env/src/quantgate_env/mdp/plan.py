"""The propagation plan of an environment: which Taylor plan covers its lines, bounds and drift.

The exact propagator (``propagation``) needs a static bound theta on ||(H - c) dt|| per sample. An
environment's bound comes from its control lines' amplitude bounds on the nominal device
(``propagation.theta_bound_lines``), a 2 % margin, the configured drift and a frequency slack so
that robustness maps and evaluation on nearby devices stay exact (a sample outside the plan reports
NaN, never a silently wrong state). Settings beyond ``propagation.MAX_THETA`` are refused here, in
Python, with a message naming the options responsible. The single- and multi-line environments
(one core, ``core.GateCore``) take their plan from ``lines_plan``. A fixed pulse's plan
(``quantgate_env.tools.pulses.pulse_plan``) lives with the fixed pulses: it names the pulse file's lines in its errors.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..physics.device import nominal_device
from ..physics.hamiltonian import line_diagonals
from ..physics.propagation import MAX_THETA, TaylorPlan, taylor_plan, theta_bound, theta_bound_lines
from .config import EnvConfig, MultiGateConfig

__all__ = ["lines_plan", "plan_for"]

# Frequency slack (GHz) the propagation plan covers beyond the configured drift, so that
# robustness maps and evaluation on nearby devices stay exact (a sample outside the plan would
# report NaN, never a silently wrong state).
_PLAN_SLACK_GHZ = 0.1

_DRIFT_OPTIONS = ("max_drift", "qubit_drift_mhz", "coupler_drift_mhz", "g_drift_mhz")


def _drift_theta(cfg: EnvConfig, slack_ghz: float) -> float:
    """How far the configured drift (plus ``slack_ghz``) can move the Gershgorin bound, x dt."""
    nominal = nominal_device()
    qubit_shift = cfg.max_drift * float(np.max(nominal.omega_q)) + 1e-3 * cfg.qubit_drift_mhz
    freq_shift = max(qubit_shift, 1e-3 * cfg.coupler_drift_mhz) + slack_ghz
    g_shift = 1e-3 * cfg.g_drift_mhz + slack_ghz
    # A row of the N=2 block holds at most two quanta on a mode (2 x frequency shift) and
    # couplings up to sqrt(2) 2 pi g on two neighbours: bound how far Gershgorin can move.
    return 2 * math.pi * (2 * freq_shift + 2 * math.sqrt(2) * g_shift) * cfg.dt


def plan_for(cfg: EnvConfig, control_theta: float, amplitude_options: dict[str, float] | None = None) -> TaylorPlan:
    """Taylor plan exact for the controls' ``control_theta`` on the nominal device plus drift.

    Args:
        cfg: configuration (dt and drift magnitudes).
        control_theta: ``theta_bound``/``theta_bound_lines`` of the controls' bounds on the
            nominal device (dimensionless).
        amplitude_options: the options that set the controls' bounds, by name, for the error
            message (default: ``a_scale`` and ``a_norm_max``).

    Raises:
        ValueError: the settings need more than ``propagation.MAX_THETA`` per sample; the message
            names the options responsible (dt = T / pulse_length, the amplitude bound or the
            drift) and the largest dt that would be accepted.
    """
    theta = 1.02 * control_theta + _drift_theta(cfg, _PLAN_SLACK_GHZ)
    if not theta <= MAX_THETA:  # also catches NaN
        amplitude_options = amplitude_options or {"a_scale": cfg.a_scale, "a_norm_max": cfg.a_norm_max}
        raise ValueError(_plan_bound_message(cfg, control_theta, theta, amplitude_options))
    return taylor_plan(theta)


def _plan_bound_message(cfg: EnvConfig, control_theta: float, theta: float, amplitude_options: dict[str, float]) -> str:
    """Which options push a sample beyond the propagator's bound, and how to fix it."""
    device = 1.02 * theta_bound(nominal_device(), 0.0, cfg.dt)  # no control, no drift
    controls = 1.02 * control_theta - device
    no_drift = dataclasses.replace(cfg, **{k: 0.0 for k in _DRIFT_OPTIONS})
    slack = _drift_theta(no_drift, _PLAN_SLACK_GHZ)
    drift = _drift_theta(cfg, _PLAN_SLACK_GHZ) - slack
    # dt is to blame if the paper's amplitude bound without drift would already be too much
    paper_theta = 1.02 * theta_bound(nominal_device(), EnvConfig().amp_bound, cfg.dt) + slack
    shorter = f"keep dt <= {MAX_THETA / theta * cfg.dt:.3g} ns (raise pulse_length or lower T)" if math.isfinite(theta) else ""
    if paper_theta > MAX_THETA:
        culprit, fix = f"T={cfg.T!r}, pulse_length={cfg.pulse_length!r}", shorter
    elif not (math.isfinite(controls) and controls <= drift):
        culprit = ", ".join(f"{k}={v!r}" for k, v in amplitude_options.items())
        fix = "lower the amplitude bound(s)" + (f", or {shorter}" if shorter else "")
    else:
        culprit = ", ".join(f"{k}={getattr(cfg, k)!r}" for k in _DRIFT_OPTIONS if getattr(cfg, k))
        fix = f"lower the drift, or {shorter}"
    return (
        f"{culprit}: samples of dt = T / pulse_length = {cfg.dt:.4g} ns would have a phase spread theta = "
        f"{theta:.4g} rad each (device {device:.3g}, control bounds {controls:.3g}, drift {drift:.3g}, "
        f"slack {slack:.3g}), beyond the {MAX_THETA:g} the exact propagator covers (see quantgate_env.physics.propagation); {fix}"
    )


def lines_plan(cfg: MultiGateConfig) -> TaylorPlan:
    """The plan of an environment with these control lines: every line at its bound, plus drift.

    Raises:
        ValueError: beyond ``propagation.MAX_THETA``, naming the options responsible.
    """
    lines = [(*line_diagonals(a), cfg.bound(a)) for a in cfg.actuators]
    amplitude_options = {"a_scale": cfg.env.a_scale, "a_norm_max": cfg.env.a_norm_max}
    amplitude_options.update({f"{a}_amp_bound": cfg.bound(a) for a in cfg.actuators if a != "coupler"})
    return plan_for(cfg.env, theta_bound_lines(nominal_device(), lines, cfg.env.dt), amplitude_options)
