"""IPPO runs written before IPPO became PPO over an agent axis still resume, and today's update continues them.

`tests/data/ippo-runs/ippo_lagrangian_s1_old` is an IPPO-Lagrangian run on the toy core written by
the code before that change (its own `ippo/compiled.py` and `ippo/update.py`), interrupted after 4
of its 8 updates: its checkpoint and progress.csv hold updates 1-3. Its float32 numbers are the
rounding of the CPU it was computed on (an AVX-512 one reproduces them bit for bit): XLA compiled
for another ISA (AVX2, AVX, SSE4.2) contracts other FMAs and sums in another order, and
`a0/pg_loss` of update 1 differs in its 6th significant digit. So nothing here compares float
arithmetic done on that CPU with float arithmetic done on this one bit for bit:

- layout: the old checkpoint has the leaf paths, shapes and dtypes of a checkpoint written today
  (exact: no arithmetic), and resuming keeps its three rows as written;
- continuation: resumed in one go, and resumed in two slices through a checkpoint that today's code
  writes from the old state, the run ends with identical rows, checkpoint and evaluations (both
  sides computed here, on this CPU: exact);
- same run as today's: against a run started today on this CPU, the integer state (PRNG key, update
  and Adam counters, episode clocks, masks) is equal (integer arithmetic rounds on no CPU), and every
  float within a bound derived from float32 rounding (`_close`), far below what a mis-read leaf (an
  agent, a network or an Adam moment in the wrong place) would give.
"""

import os
import shutil

import numpy as np
import pytest
from jaxrl_agents.common.fileio import load_npz
from jaxrl_agents.run import trainer
from jaxrl_agents.run.checkpoint import read_checkpoint
from jaxrl_agents.run.run_files import read_progress

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "data", "ippo-runs",
                       "ippo_lagrangian_s1_old")
CORE = "tests.jaxrl_agents.marl_toy_envs:RiskyCore"
# The fixture's config (config.json records it too; n_epochs is the default 4).
CFG = {"n_envs": 4, "n_steps": 16, "hidden": (16,), "n_minibatches": 2, "lr": 3e-3,
       "cost_limit": 2.0, "lagrangian_lr": 0.2, "total_steps": 512}
N_UPDATES, N_EPOCHS = CFG["total_steps"] // (CFG["n_envs"] * CFG["n_steps"]), 4

# The bound for floats of two runs that differ only in how some of their updates were rounded.
# float32's unit: EPS32 = 2^-23 (the spacing of floats in [1, 2)). Every SGD step (N_SGD of them:
# updates x epochs x minibatches = 8 x 4 x 2) rounds each parameter and Adam moment once and takes
# its direction from gradients rounded at the same relative level (Adam divides by the gradient's
# own scale), so each step perturbs a leaf by about EPS32 of its magnitude. The two runs take the
# same actions (another action changes an episode return by 0.5, far outside the bound), so nothing
# amplifies the perturbations and they add up: |a - b| <= N_SGD * EPS32 * scale (64 * 1.2e-7 = 7.6e-6 of the scale). The scale of an
# array is its largest magnitude; a progress statistic is a batch mean of O(1) quantities
# (normalised advantages, probability ratios near 1, log-probabilities of 2 actions, returns), so
# its scale is at least 1 even where the mean cancels to ~1e-3 (pg_loss, approx_kl).
EPS32 = float(np.finfo(np.float32).eps)
N_SGD = N_UPDATES * N_EPOCHS * CFG["n_minibatches"]
TOL = N_SGD * EPS32


def _close(got, want, scale, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bound = TOL * scale
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= bound, f"{what}: differs by {err:.3g} > {bound:.3g} (N_SGD * EPS32 * {scale:.3g})"


def _rows(d):
    return [{k: v for k, v in r.items() if k != "wall"}
            for r in read_progress(os.path.join(d, "progress.csv"))]


def _arrays(path):
    return {k: v for k, v in load_npz(path).items() if k != "__meta__"}


def _layout(path):
    _, header = read_checkpoint(path)
    return list(zip(header["paths"], map(tuple, header["shapes"]), header["dtypes"], strict=True))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The old run resumed in one go and in two slices, and the same run started today, all here."""
    tmp = tmp_path_factory.mktemp("old_runs")
    whole = str(tmp / "whole" / "ippo_lagrangian_s1_old")
    sliced = str(tmp / "sliced" / "ippo_lagrangian_s1_old")
    shutil.copytree(FIXTURE, whole)
    shutil.copytree(FIXTURE, sliced)
    assert len(_rows(whole)) == 3  # interrupted: the rows up to its checkpoint (update 3 of 8)
    assert trainer.resume(whole, progress="off").finished
    # updates 4-6, stopped on the checkpoint of update 6 (checkpoint_every=3), written by today's code
    assert not trainer.resume(sliced, progress="off", stop_after=3).finished
    assert read_checkpoint(os.path.join(sliced, "checkpoint.npz"))[1]["meta"]["update"] == 6
    assert trainer.resume(sliced, progress="off").finished
    fresh = trainer.train("ippo_lagrangian", CORE, {"horizon": 8}, CFG, seeds=(1,),
                          eval_every=128, checkpoint_every=3, out=str(tmp / "new"),
                          progress="off")
    return {"whole": whole, "sliced": sliced, "today": fresh.run_dirs[0]}


def test_the_old_checkpoint_has_todays_layout_and_its_rows_are_kept(runs):
    """The old checkpoint's leaves are today's (paths, shapes, dtypes); a resume keeps rows 1-3."""
    old = _layout(os.path.join(FIXTURE, "checkpoint.npz"))
    assert old == _layout(os.path.join(runs["today"], "checkpoint.npz"))
    assert any(".opt_state" in p for p, *_ in old) and any(".lam" == p for p, *_ in old)
    # the resume appended updates 4-8 and left the old code's rows 1-3 as they were written
    resumed = _rows(runs["whole"])
    assert resumed[:3] == _rows(FIXTURE)
    assert [int(r["step"]) for r in resumed] == [64 * u for u in range(1, N_UPDATES + 1)]


def test_the_resumed_old_run_equals_itself_resumed_in_two_slices(runs):
    """Both continue the same old checkpoint on this CPU, one through today's checkpoint of update 6: exact."""
    whole, sliced = runs["whole"], runs["sliced"]
    assert _rows(whole) == _rows(sliced) and len(_rows(whole)) == N_UPDATES
    for name in ("checkpoint.npz", "evals.npz"):
        a, b = _arrays(os.path.join(whole, name)), _arrays(os.path.join(sliced, name))
        assert sorted(a) == sorted(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name}:{k}")


def test_the_resumed_old_run_is_the_run_started_today(runs):
    """Integer state equal, floats within N_SGD * EPS32 of their scale: same run, other rounding."""
    old, today = runs["whole"], runs["today"]
    rows_old, rows_today = _rows(old), _rows(today)
    assert len(rows_old) == len(rows_today) == N_UPDATES
    assert [sorted(r) for r in rows_old] == [sorted(r) for r in rows_today]
    for key in sorted(set().union(*rows_today)):  # eval fields are on eval rows only
        a = np.array([float(r[key]) for r in rows_old if key in r])
        b = np.array([float(r[key]) for r in rows_today if key in r])
        if key in ("step", "update"):
            np.testing.assert_array_equal(a, b, err_msg=key)
        else:
            _close(a, b, max(float(np.abs(b).max()), 1.0), f"progress.csv:{key}")
    arrays_old, header = read_checkpoint(os.path.join(old, "checkpoint.npz"))
    arrays_today, _ = read_checkpoint(os.path.join(today, "checkpoint.npz"))
    n_int = 0
    for i, path in enumerate(header["paths"]):
        a, b = arrays_old[f"leaf_{i:05d}"], arrays_today[f"leaf_{i:05d}"]
        if b.dtype.kind in "biu":  # PRNG key, update and Adam counters, env clocks, masks
            np.testing.assert_array_equal(a, b, err_msg=f"checkpoint.npz:{path}")
            n_int += 1
        else:
            _close(a, b, float(np.abs(b).max()), f"checkpoint.npz:{path}")
    assert n_int >= 5  # key, update, Adam count, env t, masks: the state an update consumes exactly
    evals_old = _arrays(os.path.join(old, "evals.npz"))
    evals_today = _arrays(os.path.join(today, "evals.npz"))
    assert sorted(evals_old) == sorted(evals_today)
    for k, b in evals_today.items():
        assert evals_old[k].shape == b.shape and evals_old[k].dtype == b.dtype, k
        if b.dtype.kind in "biu":
            np.testing.assert_array_equal(evals_old[k], b, err_msg=f"evals.npz:{k}")
        else:
            _close(evals_old[k], b, max(float(np.abs(b).max()), 1.0), f"evals.npz:{k}")
