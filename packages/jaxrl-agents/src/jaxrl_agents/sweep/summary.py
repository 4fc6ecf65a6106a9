"""Trial metrics from progress rows, and the ranked summary of a sweep (summary.csv + a table).

The same function (`trial_metrics`) computes what a trial reports to Tune after each segment and
what the summary ranks, from the progress rows of the trial's run directories: the summary reads
the run directories themselves (through `run.rundir.RunDir`), so it is right also after a driver was killed and resumed.
"""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
from typing import Any

from . import jaxrl

__all__ = ["trial_metrics", "trial_groups", "collect", "write_summary", "format_table",
           "SUMMARY_CSV", "RUNS_DIR", "TRIAL_LOG"]

SUMMARY_CSV = "summary.csv"
RUNS_DIR = "runs"  # <sweep>/runs/<trial_id>/<run directories of the trial's seed group>
TRIAL_LOG = "trial_log.jsonl"  # <sweep>/runs/<trial_id>/: one line per start of the trial


def _evals(rows: list[dict[str, str]], metric: str) -> list[tuple[int, float]]:
    out = []
    for r in rows:
        v = r.get(metric)
        if v not in (None, ""):
            x = float(v)
            if not math.isnan(x):
                out.append((int(r["step"]), x))
    return out


def _reduce_run(evals: list[tuple[int, float]], reduce: str, mode: str) -> float | None:
    if not evals:
        return None
    values = [v for _, v in evals]
    if reduce == "best":
        return min(values) if mode == "min" else max(values)
    if reduce == "last":
        return values[-1]
    # last_quarter_median: the evaluations in the last quarter of the steps trained so far
    end = evals[-1][0]
    return statistics.median(v for s, v in evals if s >= 0.75 * end)


def _reduce_seeds(values: list[float], how: str, mode: str) -> float | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    if how == "median":
        return statistics.median(values)
    if how == "mean":
        return statistics.fmean(values)
    best = how == "best"
    return min(values) if (mode == "min") == best else max(values)


def trial_metrics(rows_per_seed: list[list[dict[str, str]]], metric: str, seeds_reduce: str,
                  mode: str) -> dict[str, Any]:
    """The metrics of one trial from its seeds' progress rows.

    Returns:
        ``step`` (environment steps done), and for each reduction r in best, last and
        last_quarter_median: ``{r}_{metric}`` over the seeds (`seeds_reduce`) and
        ``{r}_{metric}_per_seed`` (a list, None for a seed without evaluation yet). Values are
        None until the first evaluation.
    """
    step = min((int(rows[-1]["step"]) for rows in rows_per_seed if rows), default=0)
    out: dict[str, Any] = {"step": step}
    per_seed_evals = [_evals(rows, metric) for rows in rows_per_seed]
    for reduce in ("best", "last", "last_quarter_median"):
        per_seed = [_reduce_run(e, reduce, mode) for e in per_seed_evals]
        out[f"{reduce}_{metric}"] = _reduce_seeds(per_seed, seeds_reduce, mode)
        out[f"{reduce}_{metric}_per_seed"] = per_seed
    return out


def trial_groups(trial_root: str) -> list[list[str]]:
    """The seed groups (lists of run directories, in seed order) directly under `trial_root`.

    A trial normally holds one; dot-directories (staging) and subfolders that are not run
    directories (``replaced/`` of PBT) are skipped.
    """
    rf = jaxrl.run_files
    groups: dict[str, list[tuple[int, str]]] = {}
    if not os.path.isdir(trial_root):
        return []
    for entry in sorted(os.scandir(trial_root), key=lambda e: e.name):
        path = os.path.join(entry.path, rf.RUN_CONFIG)
        if entry.name.startswith(".") or not entry.is_dir() or not os.path.isfile(path):
            continue
        try:
            rc = jaxrl.RunDir(entry.path).config
        except ValueError:
            continue
        groups.setdefault(rc.get("group_id") or entry.name, []).append((rc["seed"], entry.path))
    return [[d for _, d in sorted(members)] for members in groups.values()]


def read_rows(run_dirs: list[str]) -> list[list[dict[str, str]]]:
    """Each run directory's progress rows (`run.rundir.RunDir.rows`; [] before the first)."""
    return [jaxrl.RunDir(d).rows() for d in run_dirs]


def _status(info: dict, step: int, final_step: int) -> str:
    if info.get("error"):
        return "error"
    if info.get("non_finite"):
        return "non-finite"
    if step >= final_step:
        return "finished"
    if info.get("terminated"):
        return "stopped"  # ended by the scheduler (ASHA) before its budget
    return "unfinished" if step else "pending"


def collect(spec, trials: list[dict]) -> list[dict[str, Any]]:
    """One summary row per trial, ranked on the sweep's metric (trials without a value last).

    Args:
        spec: the `SweepSpec`.
        trials: per trial, ``trial_id``, ``config`` (its sampled values), and optionally
            ``error`` (str), ``terminated`` (bool) and ``non_finite`` (bool) from Tune.
    """
    rows = []
    total = spec.train["total_steps"]
    rollout = jaxrl.make_config(spec.train["algo"], spec.train["config"] |
                                {"total_steps": total}).rollout_size
    final_step = (total // rollout) * rollout  # runs end at whole updates
    for info in trials:
        trial_root = os.path.join(spec.sweep_dir, RUNS_DIR, info["trial_id"])
        groups = trial_groups(trial_root)
        run_dirs = groups[-1] if groups else []
        m = trial_metrics(read_rows(run_dirs), spec.metric, spec.seeds_reduce, spec.mode)
        row = {"trial_id": info["trial_id"],
               "status": _status(info, m["step"], final_step), "step": m["step"]}
        for reduce in ("best", "last", "last_quarter_median"):
            row[f"{reduce}_{spec.metric}"] = m[f"{reduce}_{spec.metric}"]
        row["per_seed"] = jaxrl.fileio.json_text(m[f"{spec.reduce}_{spec.metric}_per_seed"], indent=None)
        for key in sorted(spec.space):
            row[key] = jaxrl.fileio.json_text(info["config"].get(key), indent=None)
        for key in sorted(spec.scheduler.get("mutations", {})):
            row[key] = jaxrl.fileio.json_text(info["config"].get(key), indent=None)
        row["run_dirs"] = ";".join(os.path.relpath(d, spec.sweep_dir) for d in run_dirs)
        error_lines = (info.get("error") or "").strip().splitlines()
        row["error"] = error_lines[-1] if error_lines else ""
        rows.append(row)
    key = spec.metric_key
    sign = 1 if spec.mode == "min" else -1
    rows.sort(key=lambda r: (r[key] is None, sign * r[key] if r[key] is not None else 0,
                             r["trial_id"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i if r[key] is not None else ""
    return [{"rank": r.pop("rank"), **r} for r in rows]


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def write_summary(sweep_dir: str, rows: list[dict[str, Any]]) -> str:
    """Write ``summary.csv`` atomically (the ranked table) and return its path."""
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    path = os.path.join(sweep_dir, SUMMARY_CSV)
    jaxrl.fileio.atomic_write(path, buf.getvalue().encode())
    return path


def format_table(rows: list[dict[str, Any]], metric_key: str, max_rows: int = 20) -> str:
    """A fixed-width table of the ranked trials: rank, trial, status, steps, metric, params."""
    if not rows:
        return "(no trials)"
    skip = {"per_seed", "run_dirs", "error"}
    cols = ["rank", "trial_id", "status", "step", metric_key] + \
        [k for k in rows[0] if k not in skip and k not in
         ("rank", "trial_id", "status", "step") and not k.startswith(("best_", "last_"))]
    cells = [[_cell(r.get(c)) for c in cols] for r in rows[:max_rows]]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    if len(rows) > max_rows:
        lines.append(f"... {len(rows) - max_rows} more in {SUMMARY_CSV}")
    return "\n".join(lines)
