"""Compare the numbers of two sets of jaxrl-agents run directories, bit for bit.

Used to show that a refactoring changed no behaviour: run the same commands before and after, then

    python bench/compare_runs.py BASE NEW

where BASE and NEW are run directories or parents of run directories. Parents are paired by run
name without its timestamp (``ppo_20260101-120000_s1_tag`` -> ``ppo_s1_tag``). For each pair it
compares, where the baseline has them:

- ``progress.csv``: every column except wall-clock/throughput ones (``wall``, ``*time*``, ``*sps*``,
  ``*fps*``), cell by cell as written (floats are written with ``repr``, so equal text is equal bits);
- ``evals.npz``, ``checkpoint.npz`` and every ``params.npz`` below the run directory (best/last
  policies, IPPO's ``policies/<agent>/``): each baseline array bit for bit (dtype, shape, bytes);
  ``checkpoint.npz``'s JSON header likewise, except wall-clock fields;
- ``history.json`` (IPPO) and each ``policy.json``'s network and metadata, value by value.

Files or arrays only the new run has (later issues added some, e.g. lock files) are listed, not
counted as differences: the numbers are compared, not the file lists. Exit status 0 when every
compared number is identical, 1 otherwise. Reads files with numpy and json only (no jaxrl_agents
import), so it can compare runs of any two versions.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys

import numpy as np

_STAMP = re.compile(r"_\d{8}-\d{6}")
_CLOCK = re.compile(r"wall|time|sps|fps|throughput", re.IGNORECASE)


def _is_clock(name: str) -> bool:
    return bool(_CLOCK.search(name))


def _run_dirs(path: str) -> dict[str, str]:
    """Run name without timestamp -> directory; `path` itself if it is a run directory."""
    if os.path.isfile(os.path.join(path, "config.json")):
        return {_STAMP.sub("", os.path.basename(os.path.normpath(path))): path}
    out = {}
    for name in sorted(os.listdir(path)):
        d = os.path.join(path, name)
        if os.path.isfile(os.path.join(d, "config.json")):
            key = _STAMP.sub("", name)
            if key in out:
                raise SystemExit(f"compare_runs: two runs named {key!r} in {path}; pass run "
                                 f"directories instead")
            out[key] = d
    return out


def _load_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b  # == keeps 0.0 vs -0.0 apart below
    return a == b and type(a) is type(b)


def _compare_tree(a, b, where: str, diffs: list[str]) -> int:
    """Recursive comparison of JSON values, skipping wall-clock keys; returns values compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        n = 0
        for k in a:
            if _is_clock(str(k)):
                continue
            if k not in b:
                diffs.append(f"{where}/{k}: missing in the new run")
                continue
            n += _compare_tree(a[k], b[k], f"{where}/{k}", diffs)
        return n
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{where}: {len(a)} entries vs {len(b)}")
            return 0
        return sum(_compare_tree(x, y, f"{where}[{i}]", diffs) for i, (x, y) in enumerate(zip(a, b)))
    same = _same_value(a, b)
    if same and isinstance(a, float) and a == 0.0:
        same = math.copysign(1, a) == math.copysign(1, b)
    if not same:
        diffs.append(f"{where}: {a!r} vs {b!r}")
    return 1


def _compare_progress(base: str, new: str, diffs: list[str]) -> int:
    with open(base, newline="") as f:
        rows_a = list(csv.DictReader(f))
    with open(new, newline="") as f:
        rows_b = list(csv.DictReader(f))
    if len(rows_a) != len(rows_b):
        diffs.append(f"progress.csv: {len(rows_a)} rows vs {len(rows_b)}")
        return 0
    n = 0
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b)):
        for col, va in ra.items():
            if _is_clock(col):
                continue
            if col not in rb:
                diffs.append(f"progress.csv: column {col!r} missing in the new run")
                return n
            n += 1
            if va != rb[col]:
                diffs.append(f"progress.csv row {i + 1} {col}: {va} vs {rb[col]}")
    return n


def _compare_npz(base: str, new: str, name: str, diffs: list[str], extra: list[str]) -> int:
    a, b = _load_npz(base), _load_npz(new)
    extra.extend(f"{name}:{k}" for k in sorted(set(b) - set(a)))
    n = 0
    for k, va in a.items():
        if k not in b:
            diffs.append(f"{name}:{k}: missing in the new run")
        elif k == "__meta__":  # checkpoint header: UTF-8 JSON, wall-clock fields skipped
            n += _compare_tree(json.loads(va.tobytes()), json.loads(b[k].tobytes()),
                               f"{name}:__meta__", diffs)
        else:
            n += va.size
            if not _same_array(va, b[k]):
                diffs.append(f"{name}:{k}: arrays differ ({va.dtype}{va.shape} vs "
                             f"{b[k].dtype}{b[k].shape})")
    return n


def _files(run_dir: str) -> list[str]:
    out = []
    for root, _, files in os.walk(run_dir):
        out.extend(os.path.relpath(os.path.join(root, f), run_dir) for f in files)
    return sorted(out)


def compare_run(base: str, new: str) -> tuple[int, list[str], list[str]]:
    """(numbers compared, differences, entries only the new run has) of two run directories."""
    diffs: list[str] = []
    files_a, files_b = _files(base), _files(new)
    extra = [f for f in files_b if f not in files_a]
    n = 0
    for rel in files_a:
        pa, pb = os.path.join(base, rel), os.path.join(new, rel)
        name = os.path.basename(rel)
        compared = (name in ("progress.csv", "history.json", "policy.json")
                    or name.endswith(".npz"))
        if not compared:
            continue
        if not os.path.exists(pb):
            diffs.append(f"{rel}: missing in the new run")
        elif name == "progress.csv":
            n += _compare_progress(pa, pb, diffs)
        elif name.endswith(".npz"):
            n += _compare_npz(pa, pb, rel, diffs, extra)
        else:
            with open(pa) as fa, open(pb) as fb:
                ja, jb = json.load(fa), json.load(fb)
            if name == "policy.json":
                ja = {k: ja.get(k) for k in ("network", "metadata")}
            n += _compare_tree(ja, jb, rel, diffs)
    return n, diffs, extra


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", help="baseline run directory, or a parent of run directories")
    p.add_argument("new", help="run directory, or parent of run directories, to compare with it")
    args = p.parse_args(argv)
    runs_a, runs_b = _run_dirs(args.base), _run_dirs(args.new)
    if not runs_a:
        print(f"compare_runs: no run directory in {args.base}", file=sys.stderr)
        return 2
    if len(runs_a) == len(runs_b) == 1 and set(runs_a) != set(runs_b):
        runs_b = {next(iter(runs_a)): next(iter(runs_b.values()))}
    failed = False
    for key, da in runs_a.items():
        if key not in runs_b:
            print(f"{key}: no matching run in {args.new}")
            failed = True
            continue
        n, diffs, extra = compare_run(da, runs_b[key])
        status = "identical" if not diffs and n else "DIFFERENT"
        failed |= bool(diffs) or not n
        print(f"{key}: {status} ({n} numbers compared, {len(diffs)} differences)")
        for d in diffs[:20]:
            print(f"    {d}")
        if len(diffs) > 20:
            print(f"    ... {len(diffs) - 20} more")
        if extra:
            print(f"    only in the new run (not compared): {', '.join(extra)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
