r"""How long a `jaxrl-train` command takes to its first update, with and without the compile cache.

    uv run --locked python bench/startup.py                 # demo, gate, TRPO polish; 2 rounds
    uv run --locked python bench/startup.py --rounds 3 --runs gate

Each run is a `jaxrl-train` process, timed from its start to its first progress row and killed
there (its run directory is a temporary one): the imports, the set-up, the compilation and one
update, which is what a user waits for before training shows. Three ways, interleaved round by
round:

- ``off``: ``--compile-cache off``, every program compiled (what every run did before
  run/host/compile_cache.py);
- ``cold``: a fresh cache directory: the first run on a machine, its probe included (a
  subprocess that checks the cache loads back, once per directory and machine);
- ``warm``: the same directory again: a second run of the same config (another seed, a resume, the
  campaign's next seed).

The runs: the demo (``jaxrl-train``: PPO, paper episodes), the gate preset's first stage (PPO, two
members, 17.25 ns episodes) and TRPO with the gate's polish config (16 x 512, tanh, gamma 0.999,
lambda 0.99, 17.25 ns episodes; a polish compiles the same programs, from a stored policy).

The row "run clock" is what the run itself reports beside its first row (its clock starts after
the set-up, so the thresholds' wall times in a summary count from there); "to first row" is the
process's whole wait.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import load  # noqa: E402

_GATE_EPISODES = ["--env-option", "T=17.25", "--env-option", "pulse_length=345"]
RUNS = {
    "demo": [],
    "gate": ["--preset", "gate"],
    "polish": ["--algo", "trpo", "--preset", "fast", "--n-envs", "16", "--n-steps", "512",
               "--activation", "tanh", "--gamma", "0.999", "--gae-lambda", "0.99",
               *_GATE_EPISODES],
}
MODES = ("off", "cold", "warm")
# The first evaluation row, "[    8192]     16s  R=..." (one seed) or "seed 1 [...] ..." (several):
# the run clock's seconds.
_ROW = re.compile(r"^(?:seed \d+ )?\[\s*\d+\]\s+(\d+)s ")


def _first_row(args: list[str], out: str, cache: str) -> tuple[float, float]:
    """(seconds from the process's start to its first progress row, the run clock's seconds there)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE", "JAXRL_COMPILE"))}
    cmd = ["jaxrl-train", *args, "--seed", "1", "--minutes", "5", "--progress", "lines",
           "--out", out, "--compile-cache", cache]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    for line in proc.stdout:
        m = _ROW.match(line)
        if m:
            found = (time.perf_counter() - t0, float(m.group(1)))
            proc.kill()  # what came after the first row is not measured
            proc.wait()
            return found
    raise SystemExit(f"startup: {' '.join(cmd)} printed no progress row (exit {proc.wait()})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=list(RUNS))
    args = p.parse_args()
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = [load(loops_here=False)]
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        for r in range(args.rounds):
            for name in args.runs:
                cache = os.path.join(tmp, f"cache-{name}-{r}")  # cold: a new directory a round
                for mode in MODES:
                    out = os.path.join(tmp, f"runs-{name}-{r}-{mode}")
                    row = _first_row(RUNS[name], out, "off" if mode == "off" else cache)
                    times.setdefault((name, mode), []).append(row)
                    shutil.rmtree(out, ignore_errors=True)
                    print(f"round {r + 1} {name:<7} {mode:<5} first row after {row[0]:6.1f} s "
                          f"(run clock {row[1]:.0f} s)", file=sys.stderr, flush=True)
            loads.append(load(loops_here=False))
    print(f"\njaxrl-train to its first update; medians of {args.rounds} interleaved rounds, seconds")
    for line in loads:
        print(f"  {line}")
    print()
    print("| run | what | off | cold (first run) | warm | off / warm |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.runs:
        for i, what in enumerate(("to first row", "run clock")):
            med = {m: statistics.median(t[i] for t in times[(name, m)]) for m in MODES}
            print(f"| {name} | {what} | {med['off']:.1f} | {med['cold']:.1f} | {med['warm']:.1f} "
                  f"| {med['off'] / max(med['warm'], 1e-9):.2f}x |")


if __name__ == "__main__":
    main()
