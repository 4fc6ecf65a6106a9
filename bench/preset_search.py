r"""Screen hyper-parameter candidates for a preset: sample efficiency to J_T < 1e-2 and < 1e-3.

Each candidate is a JSON dict of config fields, trained on a few seeds *together* (one vmapped
program, every update evaluated) for a fixed step budget; the table gives, per seed, the best
evaluation J_T reached by each step mark, the steps to 1e-2 and 1e-3, and the steps/s per seed of
the run (for ranking wall-clock, re-measure the winners alone: ``train_throughput.py --gate``).
This is how console/presets.py's ``fast`` was chosen (bench/README.md, "Time to a gate").

    uv run python bench/preset_search.py ppo '{"lr": 6e-4, "log_std_init": -1.5}' '{}' \
        --steps 3000000 --seeds 1 2 --out /tmp/search
    uv run python bench/preset_search.py --table /tmp/search     # the table of earlier runs

Run directories go under ``--out`` (one folder per candidate, named by its fields), so a search can
be extended and re-tabulated; a candidate already trained there is not trained again.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys

MARKS = (0.5e6, 1e6, 1.5e6, 2e6, 2.5e6, 3e6, 4e6, 6e6, 8e6, 12e6)
THRESHOLDS = (1e-2, 1e-3)


def _name(algo: str, fields: dict) -> str:
    parts = [algo] + [f"{k}={fields[k]}" for k in sorted(fields)]
    return ",".join(parts).replace("/", "_") or algo


def _train(algo: str, fields: dict, steps: int, seeds: list[int], out: str) -> str:
    from jaxrl_agents.run import trainer
    from jaxrl_agents.run.algorithms import make_config

    folder = os.path.join(out, _name(algo, fields))
    if glob.glob(os.path.join(folder, "*", "progress.csv")):
        return folder
    cfg = make_config(algo, {**fields, "total_steps": steps})
    trainer.train(algo, "quantgate_env:make", {}, cfg, seeds=seeds,
                  eval_every=cfg.rollout_size, out=folder, progress="off",
                  checkpoint_every=100)
    return folder


def _evaluations(progress_csv: str) -> list[tuple[int, float, float]]:
    """(step, wall s, eval J_T min) of every evaluated update."""
    with open(progress_csv, newline="") as f:
        return [(int(r["step"]), float(r["wall"]), float(r["eval_JT_min"]))
                for r in csv.DictReader(f) if r.get("eval_JT_min")]


def table(out: str) -> None:
    """Print the table of every candidate under `out`."""
    print(f"{'candidate / seed':<64}" + "".join(f"{m / 1e6:>7.1f}M" for m in MARKS)
          + f"{'to 1e-2':>10}{'to 1e-3':>10}{'steps/s':>9}")
    for folder in sorted(glob.glob(os.path.join(out, "*"))):
        for path in sorted(glob.glob(os.path.join(folder, "*", "progress.csv"))):
            ev = _evaluations(path)
            if not ev:
                continue
            seed = os.path.basename(os.path.dirname(path)).split("_")[2]
            cells = []
            for m in MARKS:
                seen = [jt for step, _, jt in ev if step <= m]
                cells.append(f"{min(seen):>8.1e}" if seen and ev[-1][0] >= m else f"{'':>8}")
            for th in THRESHOLDS:
                hit = next((step for step, _, jt in ev if jt < th), None)
                cells.append(f"{hit / 1e6:>9.2f}M" if hit else f"{'-':>10}")
            rate = (ev[-1][0] - ev[0][0]) / max(ev[-1][1] - ev[0][1], 1e-9)
            label = f"{os.path.basename(folder)[:58]} {seed}"
            print(f"{label:<64}{''.join(cells)}{rate:>9,.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("algo", nargs="?", choices=("ppo", "trpo"))
    ap.add_argument("candidates", nargs="*", metavar="JSON", help="config fields of a candidate")
    ap.add_argument("--steps", type=int, default=3_000_000, help="budget of each candidate")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", default="search", help="parent of the candidates' run directories")
    ap.add_argument("--table", metavar="OUT", default=None, help="only print the table of OUT")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return 0
    if args.algo is None or not args.candidates:
        ap.error("give an algorithm and at least one candidate (JSON), or --table OUT")
    for text in args.candidates:
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as e:
            ap.error(f"candidate {text!r}: not JSON ({e})")
        if not isinstance(fields, dict):
            ap.error(f"candidate {text!r}: expected a JSON object of config fields")
        print(f"training {_name(args.algo, fields)} ...", file=sys.stderr, flush=True)
        _train(args.algo, fields, args.steps, args.seeds, args.out)
    table(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
