"""Run directories and their files.

Creating the directories, file names, the progress table, and the checks a resume makes first.

A resume trusts nothing it reads: before anything is compiled it checks that ``config.json`` is a
run configuration, that the checkpoint is readable, and that ``progress.csv`` and ``evals.npz`` hold
every update and every evaluation up to the checkpoint. A file that fails is named with what is
wrong, so history is never lost silently (a truncated table would otherwise be continued from the
checkpoint on, its missing rows gone for good) and no raw ``BadZipFile``, ``EOFError``, ``KeyError``
or JSON traceback reaches the user.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
import os
import shutil
from typing import Any

import numpy as np

from ..common.fileio import LOCK_FILE, atomic_write, load_npz

__all__ = ["RUN_CONFIG", "PROGRESS_CSV", "EVALS_NPZ", "CHECKPOINT", "check_out", "timestamp",
           "make_run_dirs", "remove_new_run_dirs", "write_progress", "read_progress",
           "read_run_config", "read_json_object", "check_history"]

RUN_CONFIG = "config.json"
PROGRESS_CSV = "progress.csv"
EVALS_NPZ = "evals.npz"
CHECKPOINT = "checkpoint.npz"

# config.json keys a resume needs, with the JSON types they must have.
_RUN_KEYS = {"algo": str, "algo_config": dict, "env_options": dict, "seed": int, "seeds": list,
             "group": list, "eval_every": int, "checkpoint_every": int}


def check_out(out) -> str:
    """`out` as a path of a directory (existing or not); ValueError if it is not a path or a file."""
    if isinstance(out, bytes) or not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise ValueError(f"out: expected a directory path, got {out!r}")
    out = os.fspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"out: expected a directory (the parent of the run directories), got "
                         f"{out!r}, which is a file")
    return out


def timestamp() -> str:
    """Local time as the run directory names carry it, YYYYmmdd-HHMMSS."""
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def make_run_dirs(out: str, algo: str, seeds, tag: str) -> list[str]:
    """Create one new run directory per seed under `out` (never an existing one).

    ``<out>/<algo>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]``, for PPO/TRPO and IPPO runs alike.

    Raises:
        ValueError: a run directory of that name exists, or `out` is a file.
        OSError: `out` cannot be written (read-only, full disk); no directory is left behind.
    """
    out = check_out(out)
    stamp = timestamp()
    names = [f"{algo}_{stamp}_s{s}" + (f"_{tag}" if tag else "") for s in seeds]
    dirs = [os.path.join(out, n) for n in names]
    for d in dirs:
        if os.path.exists(d):
            raise ValueError(f"out: run directory {d!r} already exists; runs are never "
                             f"overwritten: use another --tag or --out, or --resume it")
    os.makedirs(out, exist_ok=True)
    made = []
    try:
        for d in dirs:
            os.makedirs(d, exist_ok=False)
            made.append(d)
    except BaseException:
        remove_new_run_dirs(made)
        raise
    return dirs


def remove_new_run_dirs(dirs: list[str]) -> None:
    """Remove run directories this process just created, when the run could not start.

    Only the files a starting run writes (config.json, the lock file) may be there; a directory
    holding anything else is left alone, so nothing of a user's is ever deleted.
    """
    for d in dirs:
        with contextlib.suppress(OSError):
            if set(os.listdir(d)) <= {RUN_CONFIG, LOCK_FILE}:
                shutil.rmtree(d)


def write_progress(path: str, rows: list[dict[str, str]]) -> None:
    """Write progress rows atomically: columns ``step, wall`` then the others sorted by name."""
    keys = set().union(*(r.keys() for r in rows)) if rows else set()
    columns = ["step", "wall"] + sorted(keys - {"step", "wall"})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue().encode())


def read_progress(path: str) -> list[dict[str, str]]:
    """Rows of a progress table (empty fields dropped); [] if the file does not exist.

    Raises:
        ValueError: the file is not a progress table (not UTF-8 CSV, no ``step`` column, a row with
            missing or extra fields, a step that is not an integer); the message names the file
            and the row.
    """
    if not os.path.exists(path):
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            raw = list(reader)
            fields = reader.fieldnames
    except (UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"{path}: not a readable progress table ({e})") from None
    if raw and (not fields or "step" not in fields):
        raise ValueError(f"{path}: not a progress table (expected a 'step' column, the header is "
                         f"{fields})")
    rows = []
    for n, row in enumerate(raw, start=2):  # line 1 is the header
        if None in row or None in row.values():
            raise ValueError(f"{path}: line {n} has {'more' if None in row else 'fewer'} fields "
                             f"than the header (a truncated or edited file)")
        if not row["step"].isdigit():
            raise ValueError(f"{path}: line {n}: expected an integer step, got {row['step']!r}")
        rows.append({k: v for k, v in row.items() if v != ""})
    return rows


def read_json_object(path: str) -> dict[str, Any]:
    """Read a JSON file holding one object (a run's config.json, a staged run's record).

    Raises:
        ValueError: not UTF-8, not JSON or not an object; the message names the file.
    """
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a UTF-8 text file ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") \
            from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def read_run_config(path: str) -> dict[str, Any]:
    """Read a run's ``config.json`` and check the keys a resume uses.

    Raises:
        ValueError: not JSON, not an object, or a needed key missing or of the wrong type; the
            message names the file and the key.
    """
    rc = read_json_object(path)
    for key, typ in _RUN_KEYS.items():
        if key not in rc:
            raise ValueError(f"{path}: missing key {key!r}; is this a jaxrl-train PPO/TRPO run "
                             f"directory?")
        if not isinstance(rc[key], typ) or isinstance(rc[key], bool):
            raise ValueError(f"{path}: {key!r} expected a JSON {typ.__name__}, got "
                             f"{rc[key]!r}")
    if "env" not in rc or not (rc["env"] is None or isinstance(rc["env"], str)):
        raise ValueError(f"{path}: 'env' expected a 'module:factory' string or null, got "
                         f"{rc.get('env', '<missing>')!r}")
    seeds, group = rc["seeds"], rc["group"]
    if (not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)
            or rc["seed"] not in seeds):
        raise ValueError(f"{path}: 'seeds' expected a list of integers holding seed "
                         f"{rc['seed']!r}, got {seeds!r}")
    if len(group) != len(seeds) or not all(isinstance(g, str) and g for g in group):
        raise ValueError(f"{path}: 'group' expected one directory name per seed {seeds}, got "
                         f"{group!r}")
    return rc


def check_history(run_dir: str, step: int, rollout_size: int) -> tuple[list, dict]:
    """Check that a run directory's records cover every step up to checkpoint `step`.

    ``progress.csv`` must hold one row per update, steps ``rollout_size, 2 * rollout_size, ...,
    step``, and ``evals.npz`` exactly the evaluations those rows record (the trainer writes both
    before each checkpoint). Records after `step` (written after the checkpoint, before an
    interruption) are dropped: the resumed run recomputes them.

    Args:
        run_dir: a run directory.
        step: environment steps at the checkpoint (a multiple of `rollout_size`).
        rollout_size: environment steps per update.

    Returns:
        (rows, evals): progress rows up to `step`, and the evaluation arrays up to `step` (each
        with leading axis n_evals; {} if the run had not evaluated yet).

    Raises:
        ValueError: a file is missing, unreadable, or lacks records before the checkpoint; the
            message names the file.
    """
    csv_path = os.path.join(run_dir, PROGRESS_CSV)
    if not os.path.isfile(csv_path):
        raise ValueError(f"{csv_path}: missing; it must hold the {step // rollout_size} updates "
                         f"up to the checkpoint (step {step}); restore it or start a new run")
    rows = [r for r in read_progress(csv_path) if int(r["step"]) <= step]
    steps = [int(r["step"]) for r in rows]
    expected = list(range(rollout_size, step + 1, rollout_size))
    if steps != expected:
        missing = sorted(set(expected) - set(steps))
        what = (f"rows for {len(missing)} of them are missing (first at step {missing[0]})"
                if missing else f"its steps {steps[:3]}... do not follow the updates")
        raise ValueError(f"{csv_path}: expected one row per update up to the checkpoint (steps "
                         f"{rollout_size}, {2 * rollout_size}, ..., {step}), but {what}; the "
                         f"file was truncated or edited, and resuming would lose that history: "
                         f"restore it or start a new run")
    eval_steps = [int(r["step"]) for r in rows if "eval_return" in r]
    npz_path = os.path.join(run_dir, EVALS_NPZ)
    if not os.path.isfile(npz_path):
        if eval_steps:
            raise ValueError(f"{npz_path}: missing, but {PROGRESS_CSV} records evaluations at "
                             f"{len(eval_steps)} steps up to the checkpoint ({eval_steps[:3]}...); "
                             f"restore it or start a new run")
        return rows, {}
    data = load_npz(npz_path)
    if "step" not in data or data["step"].ndim != 1 or any(
            v.ndim == 0 or len(v) != len(data["step"]) for v in data.values()):
        raise ValueError(f"{npz_path}: not an evaluation record (expected a 'step' array and "
                         f"every array with one entry per evaluation)")
    keep = data["step"] <= step
    if [int(s) for s in data["step"][keep]] != eval_steps:
        raise ValueError(f"{npz_path}: holds evaluations at steps "
                         f"{[int(s) for s in data['step'][keep]]} up to the checkpoint, but "
                         f"{PROGRESS_CSV} records them at {eval_steps}; the files do not belong "
                         f"together: restore them or start a new run")
    return rows, {k: np.asarray(v[keep]) for k, v in data.items()}
