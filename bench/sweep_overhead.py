"""Overhead of one jaxrl-sweep trial against the same jaxrl-train run.

Runs, each in a fresh process: (1) ``trainer.train`` of the run, timed around the call (imports
excluded); (2) ``jaxrl-sweep`` with a one-trial SPEC of the same run on a local Ray, timed from the
trial's start to its end (trial_log.jsonl: segments, reports, resumes; worker start-up excluded),
and as a whole command (Ray start and stop included). Prints the figures and the overhead in %.

Run: ``uv run --group test python bench/sweep_overhead.py`` (1M steps of PPO on the gate env,
~6 min on 2 cores); ``--quick``: the toy env of the tests, 64k steps.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLAIN = """
import json, sys, time
from jaxrl_agents.run import trainer
a = json.loads(sys.argv[1])
t0 = time.perf_counter()
r = trainer.train(a["algo"], a["env"], {}, a["config"], seeds=a["seeds"],
                  eval_every=a["eval_every"], out=a["out"], progress="off")
print(json.dumps({"wall": time.perf_counter() - t0, "finished": r.finished}))
"""


def _iso(s: str) -> float:
    return datetime.datetime.fromisoformat(s).timestamp()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="toy env, 64k steps")
    p.add_argument("--total-steps", type=int, default=None)
    args = p.parse_args(argv)
    if args.quick:
        run = {"algo": "ppo", "env": "tests.jaxrl_agents.toy_envs:make_reach",
               "config": {"n_envs": 16, "n_steps": 32, "hidden": [32, 32],
                          "total_steps": args.total_steps or 65_536},
               "eval_every": 8192, "seeds": [0]}
    else:
        run = {"algo": "ppo", "env": "quantgate_env:make",
               "config": {"total_steps": args.total_steps or 1_048_576},
               "eval_every": 65_536, "seeds": [0]}
    cpus = os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        plain = dict(run, out=os.path.join(tmp, "plain"))
        out = subprocess.run([sys.executable, "-c", PLAIN, json.dumps(plain)], cwd=ROOT,
                             capture_output=True, text=True, check=True)
        plain_wall = json.loads(out.stdout.strip().splitlines()[-1])["wall"]

        config = "\n".join(f"{k} = {json.dumps(v)}" for k, v in run["config"].items()
                           if k != "total_steps")
        spec = os.path.join(tmp, "one.toml")
        with open(spec, "w") as f:
            f.write(textwrap.dedent(f"""
                name = "one"
                out = "{tmp}"
                cpus_per_trial = {cpus}
                [train]
                algo = "{run['algo']}"
                env = "{run['env']}"
                total_steps = {run['config']['total_steps']}
                eval_every = {run['eval_every']}
                seeds = {run['seeds']}
                [space]
                seeds = {{values = [{run['seeds']}]}}
                [train.config]
            """) + config + "\n")
        ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
        t0 = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", "jaxrl_agents.sweep.cli", spec,
                                   "--progress", "off"], cwd=ROOT,
                                  env=dict(os.environ, RAY_TMPDIR=ray_tmp), capture_output=True,
                                  text=True)
        finally:
            shutil.rmtree(ray_tmp, ignore_errors=True)
        if done.returncode:
            sys.exit(f"jaxrl-sweep failed:\n{done.stdout}\n{done.stderr}")
        command_wall = time.perf_counter() - t0
        runs = os.path.join(tmp, "one", "runs")
        (trial,) = os.listdir(runs)
        with open(os.path.join(runs, trial, "trial_log.jsonl")) as f:
            log = [json.loads(line) for line in f]
        trial_wall = _iso(log[-1]["time"]) - _iso(log[0]["time"])
    steps = run["config"]["total_steps"]
    print(f"{run['algo']} on {run['env']}, {steps} steps, seeds {run['seeds']}, {cpus} CPUs")
    print(f"jaxrl-train run (train() call):          {plain_wall:8.1f} s")
    print(f"jaxrl-sweep trial (start -> finished):   {trial_wall:8.1f} s  "
          f"overhead {100 * (trial_wall / plain_wall - 1):+.1f} %")
    print(f"jaxrl-sweep command (Ray start, stop):   {command_wall:8.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
