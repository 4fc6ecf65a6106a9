"""jaxrl-agents traces the gate env under x64 because the env says so (issue 36), never by its name.

Only plans are built here (the environment, no compilation): that a planned run's programs are
traced under ``plan.x64`` is tested on toy and gymnax envs in tests/jaxrl_agents/test_run_precision.py,
and a short gate run before and after the change was compared bit for bit (bench/README, issue 36).
"""

from __future__ import annotations

from jaxrl_agents.run.session import plan_run
from jaxrl_agents.run.spec import RunSpec

SHORT = {"pulse_length": 30, "T": 1.5}


def test_a_gate_run_keeps_x64_and_a_float32_gate_run_drops_it(tmp_path):
    for algo, env in (("ppo", "quantgate_env:make"), ("ippo", "quantgate_env:make_multi")):
        spec = RunSpec(algo, env, env_options=SHORT, out=str(tmp_path))
        assert plan_run(spec, progress="off").x64 is True
        f32 = spec.replace(env_options={**SHORT, "precision": "float32"})
        assert plan_run(f32, progress="off").x64 is False
        assert plan_run(f32.replace(x64=True), progress="off").x64 is True  # the spec overrides
