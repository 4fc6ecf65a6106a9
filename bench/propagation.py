"""Samples per second of quantgate-env's sector propagation against eigh and dense-expm baselines.

Usage:
    uv run python bench/propagation.py            # batches of 1, 64, 1024 pulses (~2 min)
    uv run python bench/propagation.py --quick    # 3, 3 and 1 rounds instead of 5, 5 and 3

Every method maps a batch of B pulses of 1000 samples (u uniform in [-20, 20] rad/ns, dt = 50 ps,
the paper's nominal device) to the final images of the computational states, float64, jitted, one
``lax.scan`` over samples, and is timed in the same run, methods interleaved round by round so
that load from other processes on the shared machine hits all of them alike. Reported: the median
over rounds of samples/s (B * 1000 / seconds per call) and ratios of medians, both per wall-clock
second and per CPU second of the process (the latter is what other jobs on the machine disturb
least; XLA's CPU backend runs these small ops on one thread, so the two agree on an idle machine).

Methods:
    pkg taylor        quantgate_env.physics.propagation.propagate_samples (vmap over pulses): real-arithmetic
                      Taylor series of the Gershgorin-shifted 3x3 and 6x6 blocks, batch-first.
    pkg taylor+metr   quantgate_env.tools.pulses.pulse_metrics: the same plus J_T, C, U after every sample
                      (B = 1 and 64).
    pkg unroll=8      the package's propagate_sample in a lax.scan with unroll=8 (bench-side change).
    complex taylor    the same Taylor series in complex arithmetic (bench-side variant).
    batch-last taylor the same series, batch on the last axis, matvecs unrolled into elementwise
                      multiply-adds, real and imaginary parts carried separately, Taylor terms in a
                      rolled fori_loop (bench-side variant).
    (B = 1024 runs only pkg taylor, batch-last taylor and eigh, to keep the run under ~3 minutes.)
    eigh baseline     jnp.linalg.eigh of each 3x3 and 6x6 block per sample, psi <- V e^{-i w dt} V^T psi.
    dense expm (jax)  jax.scipy.linalg.expm of the full 27x27 H(u) per sample applied to the four
                      computational kets, jitted, pulses in lax.map (B = 1 only).
    dense expm (scipy) scipy.linalg.expm of the 27x27 H(u) per sample in a numpy loop (B = 1 only).

Accuracy: each method's final state on one pulse against scipy.linalg.expm of the 27x27
Hamiltonian applied sample by sample in numpy (max abs deviation over the 12 tracked amplitudes).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

# Single-threaded BLAS/LAPACK (jaxlib's CPU eigh calls scipy's LAPACK): on a shared 2-core machine
# OpenBLAS threads only fight over the cores and make the scipy/eigh baselines 10x slower and erratic.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # a benchmark program: float64 physics throughout

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from quantgate_env import nominal_device  # noqa: E402
from quantgate_env.physics.hamiltonian import (  # noqa: E402
    SECTOR1_CONTROL,
    SECTOR1_IDX,
    SECTOR2_CONTROL,
    SECTOR2_IDX,
    full_control_hamiltonian,
    full_drift_hamiltonian,
    sector_drift,
)
from quantgate_env.physics.propagation import (  # noqa: E402
    SectorState,
    TaylorPlan,
    initial_sector_state,
    propagate_sample,
    propagate_samples,
    taylor_plan,
    theta_bound,
)
from quantgate_env.tools.pulses import PLAN_MARGIN, pulse_metrics  # noqa: E402
from timing import load  # noqa: E402  (bench/ is on sys.path when a bench runs)

N_SAMPLES = 1000
DT = 0.05  # ns
U_MAX = 20.0  # rad/ns
# Full-space indices of |010>, |100>, |110> and of the four computational kets |000>,|010>,|100>,|110>.
KET_010, KET_100, KET_110 = 3, 9, 12
COMPUTATIONAL = np.array([0, KET_010, KET_100, KET_110])


# ---- methods: (B, N) amps -> final SectorState (batched) -------------------------------------


def pkg_taylor(drift, plan):
    def one(amps):
        final, _ = propagate_samples(initial_sector_state(), drift, amps, DT, plan)
        return final  # the stacked per-sample states are dead code under jit (scan DCE)

    return jax.vmap(one)


def pkg_metrics(drift, plan):
    device = nominal_device()
    return jax.vmap(lambda amps: pulse_metrics(amps, device, DT, plan).JT[-1])


def pkg_unrolled(drift, plan, unroll=8):
    def one(amps):
        def body(state, u):
            return propagate_sample(state, drift, u, DT, plan), None

        return jax.lax.scan(body, initial_sector_state(), amps, unroll=unroll)[0]

    return jax.vmap(one)


def _gershgorin(h):
    diag = jnp.diagonal(h, axis1=-2, axis2=-1)
    radius = jnp.sum(jnp.abs(h), axis=-1) - jnp.abs(diag)
    lo, hi = jnp.min(diag - radius, axis=-1), jnp.max(diag + radius, axis=-1)
    return 0.5 * (lo + hi), 0.5 * (hi - lo)


def complex_taylor(drift, plan: TaylorPlan):
    """Same series and checks as the package, with complex matvecs."""

    def apply(h, control, u, psi):
        hu = h + u * jnp.diag(jnp.asarray(control))
        centre, half_width = _gershgorin(hu)
        tau = DT / plan.substeps
        m = (-1j * tau) * (hu - centre * jnp.eye(h.shape[0]))
        for _ in range(plan.substeps):
            term = psi
            for k in range(1, plan.degree + 1):
                term = (m @ term) / k
                psi = psi + term
        psi = psi * jnp.exp(-1j * centre * DT)
        return jnp.where(half_width * tau <= plan.theta_max / plan.substeps * (1 + 1e-9), psi, jnp.nan)

    def one(amps):
        def body(state, u):
            psi1 = apply(drift.h1, SECTOR1_CONTROL, u, state.psi1)
            psi2 = apply(drift.h2, SECTOR2_CONTROL, u, state.psi2[:, None])[:, 0]
            return SectorState(psi1, psi2), None

        return jax.lax.scan(body, initial_sector_state(), amps)[0]

    return jax.vmap(one)


def batch_last_taylor(drift, plan: TaylorPlan, unroll=1):
    """Batch on the last axis; each matvec is n^2 fused elementwise multiply-adds over the batch."""

    def apply(h, control, u, re, im):
        # h (n, n); u (B,); re, im (n, k, B).
        n = h.shape[0]
        hu = h[:, :, None] + jnp.asarray(np.diag(control))[:, :, None] * u  # (n, n, B)
        diag = jnp.stack([hu[i, i] for i in range(n)])  # (n, B)
        radius = sum(jnp.abs(hu[:, j]) for j in range(n)) - jnp.abs(diag)
        lo, hi = jnp.min(diag - radius, axis=0), jnp.max(diag + radius, axis=0)
        centre, half_width = 0.5 * (lo + hi), 0.5 * (hi - lo)
        tau = DT / plan.substeps
        a = (hu - jnp.eye(n)[:, :, None] * centre) * tau

        def matvec(x):  # (n, k, B) -> (n, k, B): out[i] = sum_j a[i, j] x[j], unrolled over j
            return sum(a[:, j, None, :] * x[j][None] for j in range(n))

        def term(k, carry):  # one Taylor term: (-i a)(x + i y) / k = (a y - i a x) / k
            t_re, t_im, re, im = carry
            t_re, t_im = matvec(t_im) / k, -matvec(t_re) / k
            return t_re, t_im, re + t_re, im + t_im

        for _ in range(plan.substeps):
            # A rolled loop over terms keeps the compiled program (and compile time) small.
            re, im = jax.lax.fori_loop(1, plan.degree + 1, term, (re, im, re, im))[2:]
        cos, sin = jnp.cos(centre * DT), jnp.sin(centre * DT)  # times e^{-i c dt}
        re, im = re * cos + im * sin, im * cos - re * sin
        ok = half_width * tau <= plan.theta_max / plan.substeps * (1 + 1e-9)
        return jnp.where(ok, re, jnp.nan), jnp.where(ok, im, jnp.nan)

    def run(amps):  # (B, N)
        batch = amps.shape[0]
        init = initial_sector_state()
        psi1 = jnp.broadcast_to(init.psi1[:, :, None], (3, 2, batch))
        psi2 = jnp.broadcast_to(init.psi2[:, None, None], (6, 1, batch))
        carry = (psi1.real, psi1.imag, psi2.real, psi2.imag)

        def body(carry, u):
            r1, i1, r2, i2 = carry
            r1, i1 = apply(drift.h1, SECTOR1_CONTROL, u, r1, i1)
            r2, i2 = apply(drift.h2, SECTOR2_CONTROL, u, r2, i2)
            return (r1, i1, r2, i2), None

        (r1, i1, r2, i2), _ = jax.lax.scan(body, carry, amps.T, unroll=unroll)
        psi1 = jnp.moveaxis(jax.lax.complex(r1, i1), -1, 0)
        psi2 = jnp.moveaxis(jax.lax.complex(r2, i2), -1, 0)[:, :, 0]
        return SectorState(psi1, psi2)

    return run


def eigh_baseline(drift, plan=None):
    """The straightforward exact method of spec 1.3: eigh of each block, every sample."""
    c1, c2 = jnp.asarray(SECTOR1_CONTROL), jnp.asarray(SECTOR2_CONTROL)

    def apply(h, control, u, psi):
        w, v = jnp.linalg.eigh(h + u * jnp.diag(control))
        return v @ (jnp.exp(-1j * w * DT)[:, None] * (v.T @ psi))

    def one(amps):
        def body(state, u):
            psi1 = apply(drift.h1, c1, u, state.psi1)
            psi2 = apply(drift.h2, c2, u, state.psi2[:, None])[:, 0]
            return SectorState(psi1, psi2), None

        return jax.lax.scan(body, initial_sector_state(), amps)[0]

    return jax.vmap(one)


def dense_expm(drift=None, plan=None):
    """jax.scipy.linalg.expm of the 27x27 H(u) per sample, applied to the four computational kets."""
    h0 = full_drift_hamiltonian(nominal_device())
    hc = jnp.asarray(full_control_hamiltonian())
    kets = jnp.eye(27, dtype=complex)[:, COMPUTATIONAL]

    def one(amps):
        def body(psi, u):
            return jax.scipy.linalg.expm(-1j * DT * (h0 + u * hc)) @ psi, None

        psi = jax.lax.scan(body, kets, amps)[0]  # (27, 4) images
        return SectorState(psi[SECTOR1_IDX][:, 1:3], psi[SECTOR2_IDX, 3])

    # lax.map, not vmap: under vmap the expm's norm-dependent branches and squaring loop turn
    # into selects over the batch and the per-sample cost grows.
    return lambda amps: jax.lax.map(one, amps)


# ---- reference and timing --------------------------------------------------------------------


def scipy_reference(amps: np.ndarray) -> SectorState:
    """Dense 27x27 scipy.linalg.expm product, sample by sample, in numpy."""
    h0 = np.asarray(full_drift_hamiltonian(nominal_device()))
    hc = full_control_hamiltonian()
    psi = np.eye(27, dtype=complex)[:, COMPUTATIONAL]
    for u in amps:
        psi = scipy.linalg.expm(-1j * DT * (h0 + u * hc)) @ psi
    return SectorState(psi[SECTOR1_IDX][:, 1:3], psi[SECTOR2_IDX, 3])


def deviation(state: SectorState, ref: SectorState) -> float:
    return max(float(np.max(np.abs(np.asarray(a)[0] - b))) for a, b in zip(state, ref))


def block(x):
    return jax.tree.map(lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a, x)


def scipy_dense(amps: np.ndarray) -> SectorState:
    """The numpy reference as a timed method: (B, N) amps, pulses one after another."""
    return [scipy_reference(np.asarray(a)) for a in amps]


def time_round_robin(fns: dict, args, rounds: int, warmup: bool = True, min_call_s: float = 0.2):
    """Wall and process-CPU seconds per call of each fn, interleaved (order rotated each round).

    With ``warmup`` the first call of each fn is untimed and sets how many calls make one timed
    measurement of at least ``min_call_s``; without it (large batches) every call is timed once.
    CPU time (all threads of this process) is far less sensitive than wall time to other jobs
    on a shared machine.

    Returns:
        {name: [(wall_s, cpu_s) per round]}
    """
    inner = {name: 1 for name in fns}
    for name, fn in fns.items() if warmup else ():
        t0 = time.perf_counter()
        block(fn(args))
        inner[name] = max(1, math.ceil(min_call_s / max(time.perf_counter() - t0, 1e-6)))
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(inner[name]):
                out = fns[name](args)
            block(out)
            times[name].append(((time.perf_counter() - t0) / inner[name], (time.process_time() - c0) / inner[name]))
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (3, 3, 1)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    rounds = {1: 3, 64: 3, 1024: 1} if args.quick else {1: 5, 64: 5, 1024: 3}

    device = nominal_device()
    drift = jax.tree.map(jnp.asarray, sector_drift(device))
    plan = taylor_plan(PLAN_MARGIN * theta_bound(device, U_MAX, DT))
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; float64; {N_SAMPLES} samples/pulse, "
          f"dt = {DT} ns, u uniform in [-{U_MAX}, {U_MAX}] rad/ns; {load()}")
    print(f"Taylor plan (rollout_pulse's for |u| <= {U_MAX}): theta_max = {plan.theta_max:.4f}, "
          f"substeps = {plan.substeps}, degree = {plan.degree}")

    methods = {
        "pkg taylor": pkg_taylor,
        "pkg taylor+metr": pkg_metrics,
        "pkg unroll=8": pkg_unrolled,
        "complex taylor": complex_taylor,
        "batch-last taylor": batch_last_taylor,
        "eigh baseline": eigh_baseline,
        "dense expm (jax)": dense_expm,
    }
    jitted = {name: jax.jit(make(drift, plan)) for name, make in methods.items()}
    methods["dense expm (scipy)"] = None
    dense = {"dense expm (jax)", "dense expm (scipy)"}
    run_at = {1: set(methods), 64: set(methods) - dense}
    run_at[1024] = {"pkg taylor", "batch-last taylor", "eigh baseline"}

    # Accuracy on one pulse.
    rng = np.random.default_rng(0)
    one = rng.uniform(-U_MAX, U_MAX, size=(1, N_SAMPLES))
    ref = scipy_reference(one[0])
    print("\nmax |deviation| of the final state from scipy dense 27x27 expm, one pulse of 1000 samples:")
    for name, fn in jitted.items():
        if name != "pkg taylor+metr":
            print(f"  {name:<18} {deviation(fn(jnp.asarray(one)), ref):.1e}")

    batches = (1, 64, 1024)
    median, spread = {}, {}
    for batch in batches:
        amps = jnp.asarray(rng.uniform(-U_MAX, U_MAX, size=(batch, N_SAMPLES)))
        fns = {n: f.lower(amps).compile() for n, f in jitted.items() if n in run_at[batch]}
        if "dense expm (scipy)" in run_at[batch]:
            fns["dense expm (scipy)"] = lambda a: scipy_dense(np.asarray(a))
        times = time_round_robin(fns, amps, rounds[batch], warmup=batch < 1024)
        for clock, col in (("wall", 0), ("cpu", 1)):
            rates = {n: [batch * N_SAMPLES / t[col] for t in ts] for n, ts in times.items()}
            median.setdefault(clock, {})[batch] = {n: statistics.median(r) for n, r in rates.items()}
            spread.setdefault(clock, {})[batch] = {n: (min(r), max(r)) for n, r in rates.items()}

    for clock, what in (("wall", "samples per wall-clock second"), ("cpu", "samples per CPU second of this process")):
        med, spr = median[clock], spread[clock]
        print(f"\n{what}: median over {rounds} interleaved rounds per batch [slowest..fastest round]")
        print(f"  {'method':<18}" + "".join(f"{f'B = {b}':>26}" for b in batches))
        for name in methods:
            cells = [
                f"{med[b][name]:9.3g} [{spr[b][name][0]:.2g}..{spr[b][name][1]:.2g}]" if name in med[b] else "-"
                for b in batches
            ]
            print(f"  {name:<18}" + "".join(f"{c:>26}" for c in cells))
        dense_name = max(("dense expm (jax)", "dense expm (scipy)"), key=med[1].get)
        dense = med[1][dense_name]
        print(f"  ratios of these medians: x faster than eigh at the same B, and than {dense_name} at B = 1")
        print("  (the faster dense baseline here; a per-sample 27x27 expm does not get cheaper with batching)")
        print(f"  {'method':<18}" + "".join(f"{f'B={b} /eigh':>13}{'/dense':>9}" for b in batches))
        for name in methods:
            cells = []
            for b in batches:
                if name in med[b]:
                    cells.append(f"{med[b][name] / med[b]['eigh baseline']:>12.2f}x{med[b][name] / dense:>8.0f}x")
                else:
                    cells.append(f"{'-':>13}{'-':>9}")
            print(f"  {name:<18}" + "".join(cells))
        for b in batches:
            fastest = max(med[b], key=med[b].get)
            print(f"  fastest at B = {b}: {fastest} ({med[b][fastest]:.3g}/s = "
                  f"{med[b][fastest] / med[b]['pkg taylor']:.2f}x pkg taylor, "
                  f"{med[b][fastest] / med[b]['eigh baseline']:.2f}x eigh)")
    print(f"total {time.perf_counter() - t_start:.0f} s; {load()}; BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}")


if __name__ == "__main__":
    main()
