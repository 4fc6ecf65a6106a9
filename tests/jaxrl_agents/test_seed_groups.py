"""Seed groups split over cores (run/host/seed_groups.py): slices in threads, recorded, resumed alike.

Every comparison computes both sides here, on this CPU.
"""

import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.run import trainer
from jaxrl_agents.common.fileio import load_npz
from jaxrl_agents.run.checkpoint import read_checkpoint, replace_checkpoint_meta
from jaxrl_agents.run.host.seed_groups import over_seed_groups, seed_slices, worker_count

from .conftest import CFG, SEEDS, TOY_ENV, TOY_OPTIONS

SEEDS4 = (1, 2, 3, 4)


@pytest.mark.parametrize("n, workers, expected", [
    (8, 2, [(0, 4), (4, 8)]), (5, 2, [(0, 3), (3, 5)]), (3, 8, [(0, 1), (1, 2), (2, 3)]),
    (1, 16, [(0, 1)]), (4, 1, [(0, 4)])])
def test_slices_are_contiguous_and_even(n, workers, expected):
    assert seed_slices(n, workers) == expected


def test_the_thread_count_can_be_set_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("JAXRL_SEED_THREADS", "3")
    assert worker_count() == 3
    for bad in ("0", "two", "-1", ""):
        monkeypatch.setenv("JAXRL_SEED_THREADS", bad)
        with pytest.raises(ValueError, match="JAXRL_SEED_THREADS: expected a positive integer"):
            worker_count()
    monkeypatch.delenv("JAXRL_SEED_THREADS")
    assert worker_count() >= 1


def test_each_slice_computes_under_the_callers_x64_setting():
    """jax.enable_x64 is thread-local: without carrying it over, the workers would compute
    (and return) float32."""
    program = jax.jit(lambda x, y: (x * y, x.sum(axis=1)))
    grouped = over_seed_groups(program, 2)
    with jax.enable_x64(True):
        x = jnp.arange(8.0, dtype=jnp.float64).reshape(4, 2) / 3
        product, sums = grouped(x, jnp.float64(1 / 7))
        assert product.dtype == sums.dtype == jnp.float64
        np.testing.assert_array_equal(product, program(x, jnp.float64(1 / 7))[0])
    assert product.shape == (4, 2) and sums.shape == (4,)


def test_a_slice_that_raises_raises_in_the_caller():
    def program(x):
        if x.shape[0] == 1:  # only when split
            raise RuntimeError("slice failed")
        return x

    grouped = over_seed_groups(program, 2)
    with pytest.raises(RuntimeError, match="slice failed"):
        grouped(jnp.zeros((2, 3)))


def _arrays(path):
    return {k: v for k, v in load_npz(path).items() if k != "__meta__"}


def _assert_same_files(dirs_a, dirs_b):
    for d1, d2 in zip(dirs_a, dirs_b, strict=True):
        for name in ("checkpoint.npz", "evals.npz"):
            a, b = _arrays(os.path.join(d1, name)), _arrays(os.path.join(d2, name))
            assert sorted(a) == sorted(b)
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name}: {k}")


def test_the_slices_run_in_separate_threads():
    seen = set()

    def program(x):
        seen.add(threading.current_thread().name)
        return x + 1

    out = over_seed_groups(program, 2)(jnp.zeros((4, 1)))
    np.testing.assert_array_equal(out, np.ones((4, 1)))
    assert len(seen) == 2 and threading.current_thread().name not in seen


def test_a_split_run_records_its_slices_and_resumes_bit_identically(tmp_path, monkeypatch):
    """TRPO (whose one-seed slices round differently), four seeds in two slices; cut after 9
    updates, resumed with this machine asking for four: the files of the uninterrupted split run.
    A damaged record is refused, naming the file, before anything trains."""
    args = dict(env_options=TOY_OPTIONS, config=CFG["trpo"], seeds=SEEDS4, eval_every=1536,
                checkpoint_every=4, progress="off")
    monkeypatch.setenv("JAXRL_SEED_THREADS", "2")
    whole = trainer.train("trpo", TOY_ENV, out=str(tmp_path / "whole"), **args).run_dirs
    cut = trainer.train("trpo", TOY_ENV, out=str(tmp_path / "cut"), stop_after=9, **args).run_dirs
    path = os.path.join(cut[0], "checkpoint.npz")
    _, header = read_checkpoint(path)
    assert header["meta"]["seed_slices"] == 2
    replace_checkpoint_meta(path, dict(header["meta"], seed_slices=0))
    with pytest.raises(ValueError, match=f"{path}: seed_slices: expected a positive integer, got 0"):
        trainer.resume(cut[0], progress="off")
    replace_checkpoint_meta(path, header["meta"])  # the record as the run wrote it
    monkeypatch.setenv("JAXRL_SEED_THREADS", "4")
    trainer.resume(cut[0], progress="off")
    _assert_same_files(whole, cut)


def test_a_checkpoint_from_before_the_split_resumes_as_one_program(tmp_path, monkeypatch):
    """A group checkpointed when seeds ran as one program (no seed_slices in its meta) resumes
    as one program on a many-core machine, and ends with the one-program run's files.

    Two seeds: split on resume they would be one-seed slices, which round differently (module
    docstring of seed_groups), and as one program they are the two-seed update the other TRPO
    tests compile."""
    args = dict(env_options=TOY_OPTIONS, config=CFG["trpo"], seeds=SEEDS, eval_every=1536,
                checkpoint_every=4, progress="off")
    monkeypatch.setenv("JAXRL_SEED_THREADS", "1")
    whole = trainer.train("trpo", TOY_ENV, out=str(tmp_path / "whole"), **args).run_dirs
    cut = trainer.train("trpo", TOY_ENV, out=str(tmp_path / "cut"), stop_after=8, **args).run_dirs
    for d in cut:  # as the trainer wrote checkpoints before seed_slices existed
        path = os.path.join(d, "checkpoint.npz")
        meta = dict(read_checkpoint(path)[1]["meta"])
        assert meta.pop("seed_slices") == 1
        replace_checkpoint_meta(path, meta)
    monkeypatch.setenv("JAXRL_SEED_THREADS", "4")
    trainer.resume(cut[0], progress="off")
    _assert_same_files(whole, cut)
