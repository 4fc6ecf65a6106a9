"""PPO and TRPO learn the toy control problem within a small budget."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.run import trainer

from .conftest import CFG, SEEDS, TOY_ENV, TOY_OPTIONS
from .toy_envs import Reach


def _controller_return(env: Reach) -> float:
    """Return of the hand-written controller a = clip((g - p) / gain) on the evaluation episode."""
    with jax.enable_x64(True):
        params = env.eval_params
        _, state = env.reset(jax.random.PRNGKey(0), params)
        total = 0.0
        for _ in range(env.horizon):
            a = jnp.clip((state["g"] - state["p"]) / params["gain"], -1, 1)
            _, state, r, *_ = env.step(None, state, a, params)
            total += float(r)
    return total


@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_learns_the_toy_problem(algo, tmp_path):
    env = Reach()
    res = trainer.train(algo, TOY_ENV, TOY_OPTIONS, CFG[algo], seeds=SEEDS, eval_every=512 * 29,
                        out=str(tmp_path), progress="off")
    best = _controller_return(env)  # about -3.3
    for rows in res.rows:
        evals = [float(r["eval_return"]) for r in rows if "eval_return" in r]
        first_reward, last_reward = float(rows[0]["mean_reward"]), float(rows[-1]["mean_reward"])
        # Standing still scores ~ -44; the trained deterministic policy is near the controller.
        assert evals[-1] > 1.3 * best, (evals, best)
        assert last_reward > 0.3 * first_reward  # rewards are negative: at least 3x closer to 0
    assert np.isfinite(best) and best > -5


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_paper_network_learns_the_toy_problem_closely(algo, tmp_path):
    """Longer run with the paper's network size ([128, 128]): every seed gets within 5% of the
    hand-written controller."""
    cfg = dict(CFG[algo], hidden=(128, 128), total_steps=512 * 100)
    res = trainer.train(algo, TOY_ENV, {}, cfg, seeds=(0, 1, 2), eval_every=512 * 100,
                        out=str(tmp_path), progress="off")
    best = _controller_return(Reach())
    for rows in res.rows:
        assert float(rows[-1]["eval_return"]) > 1.05 * best
