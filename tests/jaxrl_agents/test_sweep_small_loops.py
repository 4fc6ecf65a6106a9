"""A sweep's trials compile their small loops as kernels, like jaxrl-train's runs, and old sweeps
keep XLA's default.

The threshold is recorded once per sweep (``<sweep>/xla.json``) and set in each trial's worker
before JAX's backend starts (`sweep.resources.use_small_loops`). The workers are fresh processes,
so these tests run the worker's side in a subprocess whose backend has not started; the real Ray
sweep that checks a trial's config.json records it is `test_sweep.py` (slow).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jaxrl_agents.run.host import small_loops
from jaxrl_agents.sweep import parse_spec
from jaxrl_agents.sweep.driver import SWEEP_JSON, prepare_sweep_dir
from jaxrl_agents.sweep.resources import XLA_RECORD, use_small_loops

from .test_sweep_spec import base

FLAG = f"--xla_backend_extra_options={small_loops.OPTION}="


def _worker(sweep_dir, xla_flags):
    """What a fresh trial worker whose environment has `xla_flags` compiles under, after
    `use_small_loops`, and what a run it starts records: (threshold, record_entry)."""
    code = textwrap.dedent(f"""
        import json
        from jaxrl_agents.run.host import small_loops
        from jaxrl_agents.sweep.resources import use_small_loops
        assert not small_loops.backend_started()
        threshold = use_small_loops({sweep_dir!r})
        import jax.numpy as jnp
        jnp.zeros(1).block_until_ready()  # the backend starts here, reading XLA_FLAGS
        print(json.dumps([threshold, small_loops.in_effect(), small_loops.record_entry()]))
    """)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    threshold, effect, entry = json.loads(out.stdout.strip().splitlines()[-1])
    assert threshold == effect
    return threshold, entry


def test_a_new_sweep_records_the_default_and_its_workers_use_it(tmp_path, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    d, existed = prepare_sweep_dir(parse_spec(base(out=str(tmp_path))), None)
    assert not existed
    with open(os.path.join(d, XLA_RECORD)) as f:
        assert json.load(f) == {small_loops.RECORD_KEY: small_loops.DEFAULT_BYTES}
    # a worker started without any threshold in its environment gets the sweep's
    assert _worker(d, None) == (small_loops.DEFAULT_BYTES,
                                {small_loops.RECORD_KEY: small_loops.DEFAULT_BYTES})
    # and one that inherited another (a driver's, a cluster's) gets the sweep's too
    assert _worker(d, f"--xla_cpu_enable_fast_math=false {FLAG}4096")[0] == small_loops.DEFAULT_BYTES


def test_the_drivers_own_threshold_is_kept_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", f"{FLAG}1024")  # the user asks for XLA's default value
    d, _ = prepare_sweep_dir(parse_spec(base(out=str(tmp_path))), None)
    with open(os.path.join(d, XLA_RECORD)) as f:
        assert json.load(f) == {small_loops.RECORD_KEY: 1024}
    assert _worker(d, None) == (1024, {small_loops.RECORD_KEY: 1024})


def test_a_sweep_written_before_keeps_xlas_default(tmp_path, monkeypatch):
    """No xla.json (a sweep from before the record): its trials compile as they did, whatever the
    driver's XLA_FLAGS say, so their runs resume bit for bit; resuming adds no record."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    spec = parse_spec(base(out=str(tmp_path)))
    d, _ = prepare_sweep_dir(spec, None)
    os.unlink(os.path.join(d, XLA_RECORD))  # as an old sweep directory has it
    monkeypatch.setenv("XLA_FLAGS", f"{FLAG}{small_loops.DEFAULT_BYTES}")
    assert prepare_sweep_dir(spec, None) == (d, True)
    assert not os.path.exists(os.path.join(d, XLA_RECORD))
    assert _worker(d, f"{FLAG}{small_loops.DEFAULT_BYTES}") == (None, {})


@pytest.mark.parametrize("content, expected", [
    ('{"xla_cpu_small_loop_bytes": "big"}', "expected a non-negative integer"),
    ('{"xla_cpu_small_loop_bytes": -1}', "expected a non-negative integer"),
    ("[262144]", "expected a JSON object"),
    ("{", "not valid JSON"),
])
def test_a_bad_record_is_named_before_anything_compiles(tmp_path, content, expected):
    (tmp_path / SWEEP_JSON).write_text("{}")
    (tmp_path / XLA_RECORD).write_text(content)
    with pytest.raises(ValueError) as e:
        use_small_loops(str(tmp_path))
    message = str(e.value)
    assert message.startswith(str(tmp_path / XLA_RECORD)) and expected in message
    assert message.count(XLA_RECORD) == 1  # the file is named once
