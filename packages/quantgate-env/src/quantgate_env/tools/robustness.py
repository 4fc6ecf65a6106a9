"""Robustness maps: how a pulse or a policy performs on devices detuned from the nominal one.

Both qubit frequencies are shifted on an n x n grid of offsets (MHz) and the gate is evaluated on
every device at once (``vmap`` over the device pytree). Two numbers per device:

* ``jt_at_gate_time``: J_T when the gate is stopped at the nominal device's best time (the gate
  duration is calibrated once, on the nominal device: what an experiment would do);
* ``jt_best``: the best J_T over the episode on that device (optimistic: re-calibrated timing).

A policy is anything with ``act(obs_batch) -> actions`` on a (B, obs_dim) batch, deterministic
(e.g. a jaxrl-agents ``Policy`` or an sb3-bridge import): it sees each device's state, so it can
adapt; a pulse is played open loop.

Limits (checked before anything compiles): n <= ``MAX_GRID_N`` = 101 points per axis (10201
devices; a 1000-sample pulse map holds ~0.4 MB per device, ~4 GB at the cap), and the half-width
below the lower qubit frequency (a larger detuning is no transmon).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..mdp.single_line import GateEnv, make
from ..physics.device import DeviceParams, nominal_device, validate_device
from ..physics.drift import DRIFT_RANGES
from ..physics.metrics import OBJECTIVES
from ..precision import x64_scope
from ..validation import choice, finite_array, positive_number
from .files import atomic_open
from .pulses import pulse_metrics, pulse_plan

__all__ = ["MAX_GRID_N", "RobustnessMap", "detuning_grid", "detuning_sample", "pulse_robustness",
           "policy_robustness", "policy_validation", "resolve_half_width"]

#: Most grid points per axis (odd, so that the centre is the nominal device). Every device of the
#: grid is evaluated in one vmapped call; at ~0.4 MB per device for a 1000-sample pulse, 101 x 101
#: needs ~4 GB, and a finer map than 2 % of the range shows nothing a heat map can.
MAX_GRID_N = 101


def resolve_half_width(half_width_mhz: float | str) -> float:
    """A half-width in MHz, or the name of a range in ``DRIFT_RANGES`` ("recool" = 5.7 MHz)."""
    if isinstance(half_width_mhz, str):
        if half_width_mhz not in DRIFT_RANGES:
            raise ValueError(f"half_width_mhz: expected a number or one of {tuple(DRIFT_RANGES)}, got {half_width_mhz!r}")
        return DRIFT_RANGES[half_width_mhz]
    return positive_number("half_width_mhz", half_width_mhz)


def detuning_grid(half_width_mhz: float | str, n: int = 11, device: DeviceParams | None = None):
    """Devices with both qubit frequencies offset on an n x n grid of linspace(-hw, hw, n) MHz.

    Returns:
        (devices, offsets): a DeviceParams whose leaves have a leading (n*n,) axis, and the
        (n*n, 2) offsets (MHz) of (q0, q1); row-major with q0 varying slowest. The centre (n odd)
        is the nominal device.
    """
    hw = resolve_half_width(half_width_mhz)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_GRID_N:
        raise ValueError(f"n: expected an integer from 1 to {MAX_GRID_N} (grid points per axis), got {n!r}")
    base = _detunable_device(hw, device)
    axis = np.linspace(-hw, hw, n) if n > 1 else np.zeros(1)
    offsets = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    return _offset_devices(base, offsets), offsets


def detuning_sample(half_width_mhz: float | str, count: int = 128, seed: int = 0,
                    device: DeviceParams | None = None):
    """The nominal device, then `count` devices with both qubit offsets uniform in [-hw, hw] MHz.

    A validation set for choosing among policies: drawn, not gridded, so it shares no device with
    ``detuning_grid`` but the nominal one, and a choice made on it is not made on the grid a map
    reports.

    Returns:
        (devices, offsets) as ``detuning_grid``: leaves with a leading (count + 1,) axis, and the
        (count + 1, 2) offsets (MHz) of (q0, q1); row 0 is the nominal device (offsets 0, 0).
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_GRID_N ** 2:
        raise ValueError(f"count: expected an integer from 1 to {MAX_GRID_N ** 2} (devices), got {count!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    hw = resolve_half_width(half_width_mhz)
    base = _detunable_device(hw, device)
    drawn = np.random.default_rng(seed).uniform(-hw, hw, size=(count, 2))
    offsets = np.concatenate([np.zeros((1, 2)), drawn])
    return _offset_devices(base, offsets), offsets


def _detunable_device(hw: float, device: DeviceParams | None) -> DeviceParams:
    """`device` (default: the nominal one), checked, and checked to stay a transmon `hw` MHz off."""
    base = validate_device(nominal_device() if device is None else device, "device")
    lowest = 1e3 * float(np.min(base.omega_q))
    if hw >= lowest:
        raise ValueError(
            f"half_width_mhz: expected less than the lower qubit frequency, {lowest:.6g} MHz (a detuning "
            f"that large is no transmon), got {hw!r}"
        )
    return base


def _offset_devices(base: DeviceParams, offsets: np.ndarray) -> DeviceParams:
    """`base` repeated once per row of `offsets` (B, 2), its qubit frequencies shifted by them (MHz)."""
    stacked = DeviceParams(*(np.broadcast_to(f, (len(offsets),) + f.shape).copy() for f in base))
    return stacked._replace(omega_q=stacked.omega_q + 1e-3 * offsets)


@dataclasses.dataclass
class RobustnessMap:
    """Result of a robustness scan.

    Attributes:
        offsets_mhz: (n*n, 2) qubit offsets (q0, q1), MHz.
        jt_at_gate_time: (n*n,) J_T at the nominal device's best time.
        jt_best: (n*n,) best J_T over time on each device.
        gate_time: the nominal best time, ns.
        n: grid size per axis.
    """

    offsets_mhz: np.ndarray
    jt_at_gate_time: np.ndarray
    jt_best: np.ndarray
    gate_time: float
    n: int

    def summary(self) -> dict[str, float]:
        """Nominal, median, mean and worst J_T at the gate time, and the median best J_T."""
        centre = int(np.argmin(np.abs(self.offsets_mhz).sum(axis=1)))
        jt = self.jt_at_gate_time
        return {
            "gate_time_ns": self.gate_time,
            "nominal_JT": float(jt[centre]),
            "median_JT": float(np.median(jt)),
            "mean_JT": float(np.mean(jt)),
            "worst_JT": float(np.max(jt)),
            "median_best_JT": float(np.median(self.jt_best)),
        }

    def save_npz(self, path, *, overwrite: bool = False) -> None:
        """Write the map as ``.npz`` (offsets_mhz, jt_at_gate_time, jt_best, gate_time, n), atomically.

        An existing file is replaced only with ``overwrite=True`` (else FileExistsError).
        """
        with atomic_open(path, overwrite=overwrite, binary=True) as handle:
            np.savez(handle, offsets_mhz=self.offsets_mhz, jt_at_gate_time=self.jt_at_gate_time,
                     jt_best=self.jt_best, gate_time=self.gate_time, n=self.n)

    def save_png(self, path, title: str = "", *, overwrite: bool = False) -> None:
        """Write a heat map of log10 J_T at the gate time over the detuning grid (needs matplotlib).

        Written atomically; an existing file is replaced only with ``overwrite=True`` (else
        FileExistsError).
        """
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as err:  # optional: quantgate-env[plot]
            raise ImportError("save_png needs matplotlib: pip install 'quantgate-env[plot]'") from err
        grid = np.log10(self.jt_at_gate_time.reshape(self.n, self.n))
        axis = self.offsets_mhz[:: self.n, 0]
        fig, ax = plt.subplots(figsize=(5, 4.2))
        extent = [axis[0], axis[-1], axis[0], axis[-1]] if self.n > 1 else None
        image = ax.imshow(grid.T, origin="lower", extent=extent, cmap="viridis_r", aspect="auto")
        fig.colorbar(image, ax=ax, label=r"$\log_{10} J_T$")
        ax.set_xlabel(r"$\Delta\omega_{q0}/2\pi$ (MHz)")
        ax.set_ylabel(r"$\Delta\omega_{q1}/2\pi$ (MHz)")
        s = self.summary()
        ax.set_title(title or f"J_T at {s['gate_time_ns']:.2f} ns: median {s['median_JT']:.2g}, worst {s['worst_JT']:.2g}", fontsize=9)
        fig.tight_layout()
        try:
            with atomic_open(path, overwrite=overwrite, binary=True) as handle:
                fig.savefig(handle, dpi=120, format="png")
        finally:
            plt.close(fig)


def _nominal_index(offsets: np.ndarray) -> int:
    return int(np.argmin(np.abs(offsets).sum(axis=1)))


def pulse_robustness(amps, *, dt: float = 0.05, half_width_mhz: float | str = "recool", n: int = 11,
                     gate_time: float | None = None, objective: str = "pe") -> RobustnessMap:
    """Robustness map of a fixed pulse (amplitudes in rad/ns, sample k on (t_k, t_{k+1}]).

    Args:
        amps: (T,) finite pulse amplitudes, rad/ns, one per sample of length ``dt``.
        dt: sample duration, ns.
        half_width_mhz: half-width of the qubit-detuning grid, MHz, or the name of a range in
            ``DRIFT_RANGES`` ("recool" = 5.7 MHz).
        n: grid points per axis (1 to ``MAX_GRID_N``); n x n devices in all.
        gate_time: stop time in ns; default: the time of the nominal device's best J_T.
        objective: "pe" (the paper's J_T) or "sqrt_iswap" (1 - F with free virtual Z).

    Returns:
        ``RobustnessMap`` over the (n*n,) devices of ``detuning_grid``, J_T taken at the sample
        nearest ``gate_time`` (default: the nominal device's best sample).
    """
    amps = finite_array("amps", amps, ndim=1)
    dt = positive_number("dt", dt)
    gate_time = None if gate_time is None else positive_number("gate_time", gate_time)
    objective = choice("objective", objective, OBJECTIVES)
    if amps.size == 0:
        raise ValueError("amps: expected at least one sample, got an empty array")
    devices, offsets = detuning_grid(half_width_mhz, n)
    # The Gershgorin half-width is convex in the qubit frequencies (affine diagonal, fixed
    # off-diagonal), so its maximum over the grid is at one of the four corners.
    corners = sorted({0, n - 1, n * (n - 1), n * n - 1})
    plan = pulse_plan(amps, dt, [DeviceParams(*(np.asarray(f[i]) for f in devices)) for i in corners])
    run = jax.jit(jax.vmap(pulse_metrics, in_axes=(None, 0, None, None, None)), static_argnums=(2, 3, 4))
    with x64_scope():
        jt = np.asarray(run(jnp.asarray(amps), devices, dt, plan, objective).JT)
    times = dt * np.arange(1, amps.size + 1)
    if gate_time is not None and gate_time > times[-1] + 0.5 * dt:
        raise ValueError(f"gate_time: expected at most the pulse's duration, {times[-1]:.6g} ns, got {gate_time!r}")
    centre = _nominal_index(offsets)
    stop = int(np.argmin(jt[centre])) if gate_time is None else int(np.argmin(np.abs(times - gate_time)))
    return RobustnessMap(offsets, jt[:, stop], jt.min(axis=1), float(times[stop]), n)


@functools.lru_cache(maxsize=8)
def _batched_step(env: GateEnv):
    return jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None))), jax.jit(jax.vmap(env.reset_to))


def policy_robustness(act: Callable[[np.ndarray], np.ndarray], *, env: GateEnv | None = None,
                      half_width_mhz: float | str = "recool", n: int = 11) -> RobustnessMap:
    """Robustness map of a policy: one deterministic episode per device, all devices in a batch.

    An episode stops at truncation (steps after it do not count), as the trainer's evaluation.

    Args:
        act: maps a (B, obs_dim) float32 batch to (B, K) actions (deterministic).
        env: the functional environment the policy was trained on (default: the paper's).
        half_width_mhz: half-width of the qubit-detuning grid, MHz, or the name of a range in
            ``DRIFT_RANGES`` ("recool" = 5.7 MHz).
        n: grid points per axis (1 to ``MAX_GRID_N``); B = n x n devices in all.

    Returns:
        ``RobustnessMap`` over the devices of ``detuning_grid``; the gate time is the nominal
        device's best step, and a device truncated before it counts J_T = 1 there.
    """
    env = _check_policy_args(act, env)
    devices, offsets = detuning_grid(half_width_mhz, n)
    jt, times = _policy_episodes(act, env, devices)
    stop, at_gate = _at_nominal_best(jt, _nominal_index(offsets))
    return RobustnessMap(offsets, at_gate, np.nanmin(jt, axis=1), float(times[stop]), n)


def policy_validation(act: Callable[[np.ndarray], np.ndarray], *, env: GateEnv | None = None,
                      half_width_mhz: float | str = "recool", count: int = 128,
                      seed: int = 0) -> dict:
    """A policy's J_T over the drawn devices of ``detuning_sample``, to choose among policies.

    The same episodes and gate time as ``policy_robustness`` (the nominal device's best step; a
    device truncated before it counts J_T = 1), on devices drawn rather than gridded.

    Returns:
        {"gate_time_ns", "median_JT", "worst_JT" (over the `count` drawn devices, the nominal one
        left out), "count", "seed", "half_width_mhz"}.

    Raises:
        ValueError: naming the argument: `act` not callable, or returning actions that are not a
            finite (B, K) array of real numbers for a (B, obs_dim) batch (checked at every step,
            before the environment plays them); `env` not a single-line ``GateEnv`` (a
            multi-line env, a "module:factory" string); bad `half_width_mhz`, `count`, `seed`.
    """
    env = _check_policy_args(act, env)
    devices, _ = detuning_sample(half_width_mhz, count, seed)
    jt, times = _policy_episodes(act, env, devices)
    stop, at_gate = _at_nominal_best(jt, 0)
    return {"gate_time_ns": float(times[stop]), "median_JT": float(np.median(at_gate[1:])),
            "worst_JT": float(np.max(at_gate[1:])), "count": count, "seed": seed,
            "half_width_mhz": resolve_half_width(half_width_mhz)}


def _check_policy_args(act, env) -> GateEnv:
    """`env` (default: the paper's), after checking that `act` is callable and `env` a GateEnv."""
    if not callable(act):
        raise ValueError(f"act: expected a callable mapping a (B, obs_dim) float32 batch of observations "
                         f"to (B, K) actions, got {type(act).__name__} {act!r:.80}")
    if env is None:
        return make()
    if not isinstance(env, GateEnv):
        hint = (" (a name: build the environment first, e.g. quantgate_env.make(...))" if isinstance(env, str)
                else " (the robustness tools play one policy on the coupler line; a multi-line env has "
                     "one policy per line)" if type(env).__name__ == "MultiGateEnv" else "")
        raise ValueError(f"env: expected a single-line quantgate_env.GateEnv (quantgate_env.make(...)) or None, "
                         f"got {type(env).__name__} {env!r:.80}{hint}")
    return env


def _checked_actions(action, n_devices: int, n_samples: int, obs_dim: int, step: int) -> np.ndarray:
    """`act`'s output as a (B, K) float64 array, or a ValueError naming ``act`` and the step."""
    got = np.asarray(action)
    where = f"act: at step {step}, for a ({n_devices}, {obs_dim}) batch of observations:"
    if got.shape != (n_devices, n_samples):
        raise ValueError(f"{where} expected actions of shape ({n_devices}, {n_samples}) (one row of K = {n_samples} "
                         f"samples per device), got shape {got.shape}")
    if got.dtype.kind not in "iuf":
        raise ValueError(f"{where} expected real numbers, got dtype {got.dtype}")
    bad = ~np.isfinite(got).all(axis=1)
    if bad.any():
        raise ValueError(f"{where} expected finite actions, got NaN or inf for {int(bad.sum())} of {n_devices} "
                         f"devices (first: device {int(np.argmax(bad))}, {got[np.argmax(bad)].tolist()}); a policy "
                         f"whose parameters went non-finite?")
    return got.astype(np.float64)


def _policy_episodes(act, env: GateEnv, devices: DeviceParams) -> tuple[np.ndarray, np.ndarray]:
    """(J_T (B, steps), NaN once a device's episode was truncated; times (steps,), ns)."""
    step, reset_to = _batched_step(env)
    jts, alive_steps, times = [], [], []
    n_devices, n_samples = len(devices.omega_q), env.action_space.shape[0]
    with x64_scope():
        obs, state = reset_to(devices)
        alive = np.ones(n_devices, dtype=bool)
        for s in range(env.max_episode_steps):
            action = _checked_actions(act(np.asarray(obs, dtype=np.float32)), n_devices, n_samples,
                                      env.observation_space.shape[0], s)
            obs, state, reward, term, trunc, info = step(jax.random.PRNGKey(0), state, jnp.asarray(action), env.eval_params)
            jts.append(np.asarray(info["JT"]))
            alive_steps.append(alive.copy())
            times.append(float(np.asarray(info["t"])[0]))
            alive &= ~np.asarray(trunc)
    return np.where(np.array(alive_steps), np.array(jts), np.nan).T, np.array(times)


def _at_nominal_best(jt: np.ndarray, nominal: int) -> tuple[int, np.ndarray]:
    """(the nominal device's best step, every device's J_T there: 1 where truncated before it)."""
    stop = int(np.nanargmin(jt[nominal]))
    return stop, np.where(np.isnan(jt[:, stop]), 1.0, jt[:, stop])
