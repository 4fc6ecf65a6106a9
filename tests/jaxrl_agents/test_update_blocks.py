"""Blocks of updates in one compiled call (run/host/update_blocks.py, `Compiled.update_block`).

A block must give the bits of its updates called one by one, stop after a non-finite update, and
leave a run's files as the one-call-per-update loop wrote them; its boundaries are absolute update
numbers, so a resumed run cuts the same blocks.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.run import loop, trainer
from jaxrl_agents.run.algorithms import FINITE_STAT, compile_algorithm, make_config
from jaxrl_agents.run.host.update_blocks import (MIN_UPDATES_FOR_BLOCKS, UPDATES_PER_CALL,
                                                block_end, updates_per_call)

from .conftest import CFG, SEEDS, TOY_ENV, TOY_OPTIONS
from .marl_toy_envs import RiskyCore
from .test_faults import NAN_AT_UPDATE_6
from .test_main_output import _compare_runs
from .toy_envs import Reach

IPPO_CFG = {"n_envs": 4, "n_steps": 16, "hidden": (16,), "n_minibatches": 2, "lr": 3e-3,
            "total_steps": 512}


def _programs(algo: str, env_options: dict | None = None):
    if algo == "ippo":
        env, cfg = RiskyCore(horizon=8), make_config("ippo", IPPO_CFG)
    else:
        env, cfg = Reach(**(env_options or {})), make_config(algo, CFG[algo])
    compiled = compile_algorithm(algo, env, cfg)
    state = compiled.init(jnp.stack([jax.random.PRNGKey(s) for s in SEEDS]), env.default_params)
    return compiled, state, env.default_params


def _assert_trees_equal(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# IPPO's block is the same while_loop over its update (`run.algorithms._update_programs`); its
# 14 s of compiling run with -m slow, to keep the default run within 12 minutes.
@pytest.mark.parametrize("algo", ["ppo", "trpo", pytest.param("ippo", marks=pytest.mark.slow)])
def test_a_block_gives_the_bits_of_its_updates_called_one_by_one(algo, x64):
    compiled, state, params = _programs(algo)
    copy = jax.tree_util.tree_map(jnp.copy, state)
    singles = []
    for _ in range(3):
        state, stats = compiled.update(state, params)
        singles.append(jax.device_get(stats))
    block_state, block_stats = compiled.update_block(copy, params, jnp.int32(3), 4)
    block_stats = jax.device_get(block_stats)
    _assert_trees_equal(state, block_state)
    for k, rows in block_stats.items():
        assert rows.shape[:2] == (len(SEEDS), 4), k
        for j, single in enumerate(singles):
            np.testing.assert_array_equal(rows[:, j], single[k], err_msg=f"{k}, update {j + 1}")
    # The fourth row was never run: zeros, and not finite.
    assert not block_stats[FINITE_STAT][:, 3].any()
    assert all(np.all(v[:, 3] == 0) for v in block_stats.values())


def test_a_block_stops_after_its_first_non_finite_update(x64):
    compiled, state, params = _programs("ppo", NAN_AT_UPDATE_6)
    state, stats = compiled.update_block(state, params, jnp.int32(8), 8)
    finite = np.asarray(stats[FINITE_STAT])
    np.testing.assert_array_equal(finite, [[True] * 5 + [False] * 3] * 2)
    # Updates 7 and 8 were not run: the state counts 6 updates, and their rows are zeros where
    # a NaN update would have written NaN losses.
    np.testing.assert_array_equal(np.asarray(state.update), [6, 6])
    assert np.isnan(stats["pg_loss"][:, 5]).all() and (stats["pg_loss"][:, 6:] == 0).all()


@pytest.mark.parametrize("done, end, expected", [
    (0, 30, 3),  # the first evaluation
    (3, 30, 4),  # the checkpoint cadence
    (4, 30, 6),
    (5, 30, 6),  # a run stopped at update 5 resumes into the block every run cuts there
    (24, 30, 27),
    (28, 29, 29),  # the end of this call (n updates, or the run's end)
])
def test_blocks_end_at_evaluations_checkpoints_and_every_few_updates(done, end, expected):
    assert block_end(done, end, (3, 4), 4) == expected
    assert block_end(done, end, (1, 25), 4) == done + 1  # an evaluation after every update
    assert block_end(0, 100, (50, 25), 4) == 4


def test_long_runs_get_blocks_and_the_environment_can_say_otherwise(monkeypatch):
    monkeypatch.delenv("JAXRL_UPDATES_PER_CALL", raising=False)
    assert updates_per_call(MIN_UPDATES_FOR_BLOCKS) == UPDATES_PER_CALL
    assert updates_per_call(MIN_UPDATES_FOR_BLOCKS - 1) == 1  # a short run: one call each
    monkeypatch.setenv("JAXRL_UPDATES_PER_CALL", "1")
    assert updates_per_call(10_000) == 1
    monkeypatch.setenv("JAXRL_UPDATES_PER_CALL", "3")
    assert updates_per_call(10) == 3
    for bad in ("0", "two", "-3"):
        monkeypatch.setenv("JAXRL_UPDATES_PER_CALL", bad)
        with pytest.raises(ValueError, match="JAXRL_UPDATES_PER_CALL: expected a positive integer"):
            updates_per_call(10_000)


def test_a_run_in_blocks_writes_the_files_of_one_call_per_update(tmp_path, monkeypatch):
    args = dict(env_options=TOY_OPTIONS, config=CFG["ppo"], seeds=SEEDS, eval_every=3 * 512,
                checkpoint_every=4, progress="off")
    monkeypatch.setenv("JAXRL_UPDATES_PER_CALL", "1")
    singles = trainer.train("ppo", TOY_ENV, out=str(tmp_path / "singles"), **args)
    monkeypatch.setenv("JAXRL_UPDATES_PER_CALL", "4")  # blocks, though the run is short
    ends = []
    real_block_end = loop.block_end
    monkeypatch.setattr(loop, "block_end", lambda *a: ends.append(real_block_end(*a)) or ends[-1])
    blocks = trainer.train("ppo", TOY_ENV, out=str(tmp_path / "blocks"), **args)
    # Blocks of up to 3 updates, cut at evaluations (3), checkpoints (4) and progress.csv
    # rewrites (10).
    assert ends[:8] == [3, 4, 6, 8, 9, 10, 12, 15] and ends[-1] == 30
    compare = _compare_runs()
    for a, b in zip(singles.run_dirs, blocks.run_dirs):
        n, diffs, _ = compare.compare_run(a, b)
        assert n > 0 and diffs == [], diffs


def test_a_staged_rule_gets_one_update_a_call(tmp_path, monkeypatch):
    """A `stop_when` rule is asked after every update, so the loop cannot run blocks."""
    ends, asked = [], []
    real_block_end = loop.block_end
    monkeypatch.setattr(loop, "block_end", lambda *a: ends.append(real_block_end(*a)) or ends[-1])
    spec = trainer.RunSpec(algo="ppo", env=TOY_ENV, config=CFG["ppo"], seeds=SEEDS,
                           eval_every=3 * 512, checkpoint_every=4, out=str(tmp_path))
    with trainer.Session.start(trainer.plan_run(spec, None, "off")) as session:
        session.advance(stop_when=lambda update, records: asked.append(update) or update == 5)
        assert session.update == 5 and session.stopped_by_rule
    assert ends == asked == [1, 2, 3, 4, 5]
