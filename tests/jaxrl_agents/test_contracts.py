"""env_check.check_env: the quantgate cores and a gymnax env pass; deliberately broken envs fail
with a ContractError naming the broken part, and jaxrl-train refuses them before compiling."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_agents.common.contracts import (ContractError, Evaluation, FunctionalEnv,
                                           MultiAgentEnv, ReturnEvaluation, evaluation_of)
from jaxrl_agents.common.envs.check import check_env
from jaxrl_agents.console import cli

from .toy_envs import Reach


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):  # the cores' physics is float64; the trainer does the same
        yield


def test_quantgate_cores_and_their_descriptions_pass():
    qg = pytest.importorskip("quantgate_env")
    single, multi = qg.make(pulse_length=30, T=1.5), qg.make_multi(pulse_length=30, T=1.5)
    check_env(single, "quantgate_env:make")
    check_env(multi, "quantgate_env:make_multi")
    assert isinstance(single, FunctionalEnv) and isinstance(multi, MultiAgentEnv)
    assert isinstance(single.evaluation, Evaluation) and isinstance(multi.evaluation, Evaluation)


def test_gymnax_env_passes():
    pytest.importorskip("gymnax")
    from jaxrl_agents.common.gymnax_env import make

    for env_id in ("CartPole-v1", "Pendulum-v1"):
        env = make(env_id)
        check_env(env, env_id)
        assert isinstance(evaluation_of(env), ReturnEvaluation)  # describes no evaluation


# ------------------------------------------------------------------ deliberately broken envs
@dataclasses.dataclass(frozen=True)
class FiveValues(Reach):
    """gymnax-0.x style step: (obs, state, reward, done, info)."""

    def step(self, key, state, action, params):
        obs, state, reward, term, trunc, info = super().step(key, state, action, params)
        return obs, state, reward, term | trunc, info


@dataclasses.dataclass(frozen=True)
class FloatDone(Reach):
    def step(self, key, state, action, params):
        obs, state, reward, term, trunc, info = super().step(key, state, action, params)
        return obs, state, reward, term.astype(jnp.float32), trunc, info


@dataclasses.dataclass(frozen=True)
class NoFinalObs(Reach):
    def step_autoreset(self, key, state, action, params):
        obs, state, reward, term, trunc, info = super().step_autoreset(key, state, action, params)
        return obs, state, reward, term, trunc, {k: v for k, v in info.items() if k != "final_obs"}


@dataclasses.dataclass(frozen=True)
class InfoDiffers(Reach):
    def step_autoreset(self, key, state, action, params):
        obs, state, reward, term, trunc, info = super().step_autoreset(key, state, action, params)
        return obs, state, reward, term, trunc, {**info, "extra": reward}


@dataclasses.dataclass(frozen=True)
class StateDtypeDrifts(Reach):
    def step(self, key, state, action, params):
        obs, state, reward, term, trunc, info = super().step(key, state, action, params)
        return obs, {**state, "p": state["p"].astype(jnp.float32)}, reward, term, trunc, info


@dataclasses.dataclass(frozen=True)
class PythonBranch(Reach):
    """Python control flow on a traced value: works eagerly, not under jit."""

    def step(self, key, state, action, params):
        out = super().step(key, state, action, params)
        if out[2] > -1.0:
            return out
        return out


@dataclasses.dataclass(frozen=True)
class WrongObsShape(Reach):
    def reset(self, key, params):
        obs, state = super().reset(key, params)
        return obs[:4], state


@dataclasses.dataclass(frozen=True)
class VectorReward(Reach):
    def step(self, key, state, action, params):
        obs, state, reward, term, trunc, info = super().step(key, state, action, params)
        return obs, state, jnp.stack([reward, reward]), term, trunc, info


class Unhashable(Reach):
    __hash__ = None


@dataclasses.dataclass(frozen=True)
class BadEvalParams(Reach):
    @property
    def eval_params(self):
        return {"gain": jnp.asarray(0.25)}


class _Eval(ReturnEvaluation):
    def __init__(self, **overrides):
        self.__dict__.update(overrides)


@dataclasses.dataclass(frozen=True)
class ReservedRecord(Reach):
    @property
    def evaluation(self):
        return _Eval(record=lambda info: {"reward": info["JT"]})


@dataclasses.dataclass(frozen=True)
class UnknownScore(Reach):
    @property
    def evaluation(self):
        return _Eval(score="best_distance", summarise=lambda ep: {"distance": 0.0})


BROKEN = [
    (FiveValues(), "terminated/truncated", "terminated and truncated separately"),
    (FloatDone(), "terminated/truncated", "dtype float32, expected bool"),
    (NoFinalObs(), "final_obs", "info['final_obs']"),
    (InfoDiffers(), "info", "must equal step's"),
    (StateDtypeDrifts(), "state", "another structure than reset's"),
    (PythonBranch(), "jit", "cannot be traced by jax.jit"),
    (WrongObsShape(), "reset", "shape (4,), expected (5,)"),
    (VectorReward(), "step", "reward is (2,), expected a scalar"),
    (Unhashable(), "hashable", "unhashable Unhashable"),
    (BadEvalParams(), "eval_params", "structure, shapes and dtypes of default_params"),
    (ReservedRecord(), "evaluation", "reserved names ['reward']"),
    (UnknownScore(), "evaluation", "got 'best_distance'"),
    (object(), "members", "lacks"),
]


@pytest.mark.parametrize("env,part,text", BROKEN, ids=[type(b[0]).__name__ for b in BROKEN])
def test_broken_env_gets_a_named_error(env, part, text):
    with pytest.raises(ContractError) as err:
        check_env(env, "mine")
    assert err.value.part == part
    assert text in str(err.value) and str(err.value).startswith(f"mine: contract part '{part}'")


def test_broken_multi_agent_envs_get_named_errors():
    class MissingFinal:
        agents = ("a", "b")
        default_params = {"x": jnp.zeros(())}

        def observation_space(self, agent):
            from gymnasium import spaces
            return spaces.Box(-1, 1, (2,), np.float32)

        def action_space(self, agent):
            from gymnasium import spaces
            return spaces.Discrete(2)

        def reset(self, key, params):
            return {a: jnp.zeros(2) for a in self.agents}, jnp.zeros(())

        def step_autoreset(self, key, state, actions, params):
            obs = {a: jnp.zeros(2) for a in self.agents}
            flags = {a: jnp.asarray(False) for a in self.agents}
            rewards = {a: jnp.zeros(()) for a in self.agents}
            return obs, state, rewards, flags, flags, {a: {"cost": jnp.zeros(())}
                                                       for a in self.agents}

    with pytest.raises(ContractError) as err:
        check_env(MissingFinal(), "marl")
    assert err.value.part == "final_obs" and "missing for 'a'" in str(err.value)

    class RewardsNotPerAgent(MissingFinal):
        def step_autoreset(self, key, state, actions, params):
            obs, state, rewards, t, tr, _ = super().step_autoreset(key, state, actions, params)
            return obs, state, rewards["a"], t, tr, {a: {"final_obs": obs[a]} for a in obs}

    with pytest.raises(ContractError) as err:
        check_env(RewardsNotPerAgent(), "marl")
    assert err.value.part == "step_autoreset" and "rewards as a dict keyed by the agents" \
        in str(err.value)


def test_jaxrl_train_refuses_a_broken_env_before_compiling(tmp_path, capsys, monkeypatch):
    import sys
    import types

    mod = types.ModuleType("broken_envs_for_test")
    mod.make = lambda **kw: NoFinalObs(**kw)
    monkeypatch.setitem(sys.modules, "broken_envs_for_test", mod)
    compiled = []
    from jaxrl_agents.run import loop

    monkeypatch.setattr(loop, "compile_algorithm", lambda *a: compiled.append(a))
    assert cli.main(["--env", "broken_envs_for_test:make", "--out", str(tmp_path),
                     "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert "broken_envs_for_test:make: contract part 'final_obs'" in err
    assert not compiled and not any(tmp_path.iterdir())  # nothing compiled, no run directory
