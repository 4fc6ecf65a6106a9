"""IPPO runs written before IPPO became PPO over an agent axis still resume, to the same numbers.

`tests/data/ippo-runs/ippo_lagrangian_s1_old` is an IPPO-Lagrangian run on the toy core written by
the code before that change (its own `ippo/compiled.py` and `ippo/update.py`), interrupted after 4
of its 8 updates: its checkpoint and progress.csv hold updates 1-3. Resuming it with today's code must finish it
exactly as a run started today does: the checkpoint layout (`ippo.programs.IPPOState`) and the
update's arithmetic are unchanged.
"""

import os
import shutil

import numpy as np

from jaxrl_agents.common.fileio import load_npz
from jaxrl_agents.run import trainer
from jaxrl_agents.run.run_files import read_progress

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "data", "ippo-runs",
                       "ippo_lagrangian_s1_old")
CORE = "tests.jaxrl_agents.marl_toy_envs:RiskyCore"
# The fixture's config (config.json records it too).
CFG = {"n_envs": 4, "n_steps": 16, "hidden": (16,), "n_minibatches": 2, "lr": 3e-3,
       "cost_limit": 2.0, "lagrangian_lr": 0.2, "total_steps": 512}


def _rows(d):
    return [{k: v for k, v in r.items() if k != "wall"}
            for r in read_progress(os.path.join(d, "progress.csv"))]


def _arrays(path):
    return {k: v for k, v in load_npz(path).items() if k != "__meta__"}


def test_an_ippo_run_of_the_old_code_resumes_to_todays_run(tmp_path):
    old = str(tmp_path / "old" / "ippo_lagrangian_s1_old")
    shutil.copytree(FIXTURE, old)
    assert len(_rows(old)) == 3  # interrupted: the rows up to its checkpoint (update 3 of 8)
    resumed = trainer.resume(old, progress="off")
    assert resumed.finished
    fresh = trainer.train("ippo_lagrangian", CORE, {"horizon": 8}, CFG, seeds=(1,),
                          eval_every=128, checkpoint_every=3, out=str(tmp_path / "new"),
                          progress="off")
    new = fresh.run_dirs[0]
    assert _rows(old) == _rows(new) and len(_rows(new)) == 8
    for name in ("checkpoint.npz", "evals.npz"):
        a, b = _arrays(os.path.join(old, name)), _arrays(os.path.join(new, name))
        assert sorted(a) == sorted(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name}:{k}")
