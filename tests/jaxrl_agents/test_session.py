"""The trainer session: advancing in pieces is the one-call run, bit for bit; it locks until closed."""

import os

import numpy as np
import pytest

from jaxrl_agents.common.fileio import DirectoryLockedError, load_npz
from jaxrl_agents.run import trainer
from jaxrl_agents.run.session import Session

from .conftest import PPO_CFG, SEEDS, TOY_ENV, TOY_OPTIONS

ARGS = dict(env_options=TOY_OPTIONS, config=PPO_CFG, seeds=SEEDS, eval_every=3 * 512,
            checkpoint_every=4, progress="off")


def _rows(run_dir):
    from jaxrl_agents.run.run_files import read_progress

    return [{k: v for k, v in r.items() if k != "wall"}
            for r in read_progress(os.path.join(run_dir, "progress.csv"))]


def _same_tree(a, b):
    import jax

    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))


def test_advancing_in_pieces_is_the_one_call_run(tmp_path):
    full = trainer.train("ppo", TOY_ENV, out=str(tmp_path / "full"), **ARGS)
    with Session.open("ppo", TOY_ENV, out=str(tmp_path / "steps"), **ARGS) as s:
        assert (s.update, s.n_updates, s.finished) == (0, 30, False)
        part = s.advance(8)  # ends on a checkpoint (every 4 updates)
        assert not part.finished and s.update == 8
        # In use while open: a second session (or train/resume) on it is refused.
        with pytest.raises(DirectoryLockedError):
            Session.resume(s.run_dirs[0], progress="off")
        assert len(part.rows[0]) == 8
        s.advance(7)
        result = s.advance()  # to the end
        assert result.finished and s.finished and s.update == 30
        assert s.advance(5).finished  # nothing left: returns at once
    assert _same_tree(full.state, result.state)
    for a, b in zip(full.run_dirs, result.run_dirs):
        assert _rows(a) == _rows(b)
        ea, eb = load_npz(os.path.join(a, "evals.npz")), load_npz(os.path.join(b, "evals.npz"))
        assert all(np.array_equal(ea[k], eb[k]) for k in ea)
    with pytest.raises(ValueError, match="closed"):
        s.advance(1)


def test_resumed_session_continues_from_the_checkpoint(tmp_path):
    with Session.open("ppo", TOY_ENV, out=str(tmp_path), **ARGS) as s:
        s.advance(10)  # checkpoint at 8; updates 9-10 are not written (a resume recomputes them)
        run_dir = s.run_dirs[0]
    with Session.resume(run_dir, progress="off") as r:
        assert r.update == 8
        assert [os.path.basename(d) for d in r.run_dirs] == [os.path.basename(d) for d in s.run_dirs]
        r.advance(2)
        assert r.update == 10
    s.close()  # closing twice is harmless


def test_bad_arguments_fail_before_a_directory_exists(tmp_path):
    with pytest.raises(ValueError, match="seeds"):
        Session.open("ppo", TOY_ENV, out=str(tmp_path), **{**ARGS, "seeds": (1, 1)})
    assert not os.listdir(tmp_path)
    with Session.open("ppo", TOY_ENV, out=str(tmp_path), **ARGS) as s:
        with pytest.raises(ValueError, match="n_updates"):
            s.advance(0)
