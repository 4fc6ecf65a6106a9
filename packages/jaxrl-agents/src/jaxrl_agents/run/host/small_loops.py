"""XLA:CPU's small-loop kernels: the threshold a run compiles under, fixed before JAX's backend starts.

XLA's CPU runtime executes a program as a sequence of thunks, one per fusion, dot or copy, each
with a fixed dispatch cost. A ``while`` loop runs its body's thunks once per iteration, so a loop
of many tiny steps pays that cost over and over: the exact propagation's Taylor series
(quantgate-env) is 24 iterations of ~25 thunks per pulse sample. XLA compiles a loop into one
kernel instead when the bytes it touches are below ``xla_cpu_small_while_loop_byte_threshold``
(an ``--xla_backend_extra_options`` entry of ``XLA_FLAGS``; 1 KiB by default). At 256 KiB
(`DEFAULT_BYTES`) the gate's loops of up to ~64 envs become kernels: measured on a 2-core EPYC, an
env step at batch 4 ran 3.0x faster and the paper's TRPO update 1.2-1.8x (bench/README.md, "Small
loops as kernels"); PPO with 64 envs is unchanged, and the networks' loops (megabytes) are never
hoisted.

The kernel rounds some operations differently from the thunks (within float64 rounding: ~1e-15
in a propagated state), so the threshold is part of a run, like its precision:

- a new run started by a command (``jaxrl-train``, a campaign's children) compiles under
  `DEFAULT_BYTES`, unless ``XLA_FLAGS`` already names a threshold (the user's choice is kept);
- config.json records the threshold in effect as ``xla_cpu_small_loop_bytes`` (staged runs also
  in staged_run.json), and writes no key for XLA's default: every run written before this
  module has none, and resumes under XLA's default, bit for bit as it would have;
- a resume sets the recorded threshold before the backend starts; in a process whose backend has
  started already (a notebook, the test suite), it must be the one in effect, or the resume
  stops with an error that says how to go on (a new process).

XLA reads ``XLA_FLAGS`` once, when JAX's backend starts. So the threshold in effect is the one
``XLA_FLAGS`` names now, on the assumption that nothing changed the variable after the backend
started (nothing in this project does).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_BYTES", "RECORD_KEY", "OPTION", "flags_with", "threshold_in", "in_effect",
           "backend_started", "configure_for_command", "configure_for_new_run", "configure_for_record",
           "new_run_threshold", "recorded", "record_entry", "require_recorded"]

#: The threshold new runs compile under, bytes (see the module docstring for the measurements).
DEFAULT_BYTES = 256 * 1024
#: config.json's (and staged_run.json's) key for the threshold a run compiled under.
RECORD_KEY = "xla_cpu_small_loop_bytes"
#: XLA's name of the threshold, an entry of ``--xla_backend_extra_options``.
OPTION = "xla_cpu_small_while_loop_byte_threshold"
_EXTRA = "--xla_backend_extra_options"


def _split_extra(value: str) -> list[tuple[str, str | None]]:
    """``k1=v1,k2`` -> [("k1", "v1"), ("k2", None)] (XLA's format of the extra options)."""
    out = []
    for item in value.split(","):
        if item:
            key, eq, val = item.partition("=")
            out.append((key, val if eq else None))
    return out


def threshold_in(xla_flags: str | None) -> int | None:
    """The small-loop threshold an ``XLA_FLAGS`` string sets, bytes; None where it sets none.

    Raises:
        ValueError: the threshold is there but not a non-negative integer.
    """
    found = None
    for token in shlex.split(xla_flags or ""):
        name, eq, value = token.partition("=")
        if name != _EXTRA or not eq:
            continue
        for key, val in _split_extra(value):
            if key == OPTION:  # the last one wins, as XLA reads them
                if val is None or not val.isdigit():
                    raise ValueError(f"XLA_FLAGS: {OPTION} expects a non-negative integer "
                                     f"(bytes), got {val!r}")
                found = int(val)
    return found


def flags_with(xla_flags: str | None, threshold: int | None) -> str:
    """`xla_flags` with the small-loop threshold set to `threshold` (None: removed).

    Every other flag and every other extra option is kept, in order; the threshold is the last
    entry of the last ``--xla_backend_extra_options`` (one is appended where there is none).
    """
    tokens = shlex.split(xla_flags or "")
    extra_at = [i for i, t in enumerate(tokens) if t.partition("=")[0] == _EXTRA and "=" in t]
    for i in extra_at:
        kept = [(k, v) for k, v in _split_extra(tokens[i].partition("=")[2]) if k != OPTION]
        tokens[i] = f"{_EXTRA}=" + ",".join(k if v is None else f"{k}={v}" for k, v in kept)
    if threshold is not None:
        if extra_at:
            last = extra_at[-1]
            sep = "" if tokens[last].endswith("=") else ","
            tokens[last] += f"{sep}{OPTION}={threshold}"
        else:
            tokens.append(f"{_EXTRA}={OPTION}={threshold}")
    # an emptied option would be an empty map entry: drop it
    tokens = [t for t in tokens if t != f"{_EXTRA}="]
    return " ".join(shlex.quote(t) for t in tokens)


def in_effect() -> int | None:
    """The threshold this process's programs compile under (None: XLA's default, 1 KiB)."""
    return threshold_in(os.environ.get("XLA_FLAGS"))


def backend_started() -> bool:
    """Whether JAX's backend has started (``XLA_FLAGS`` is read then, and never again)."""
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # a JAX without it: assume started, so nothing is set too late
        return True
    return backends_are_initialized()


def _set(threshold: int | None) -> None:
    flags = flags_with(os.environ.get("XLA_FLAGS"), threshold)
    if flags:
        os.environ["XLA_FLAGS"] = flags
    else:
        os.environ.pop("XLA_FLAGS", None)


def new_run_threshold() -> int:
    """The threshold a new run compiles under in a process whose backend has not started.

    The one ``XLA_FLAGS`` names (the user's choice is kept), else `DEFAULT_BYTES`: what
    `configure_for_new_run` sets here, and what a sweep records for its trial workers.
    """
    threshold = in_effect()
    return DEFAULT_BYTES if threshold is None else threshold


def configure_for_new_run() -> int | None:
    """Before a command's new run: `new_run_threshold`, where the backend has not started yet.

    Nothing changes once the backend has started (the run then records what is in effect).

    Returns:
        The threshold in effect.
    """
    if in_effect() is None and not backend_started():
        _set(new_run_threshold())
    return in_effect()


def configure_for_record(threshold: int | None) -> int | None:
    """Before a resume: the threshold the run recorded (None: XLA's default), where still possible.

    Returns:
        The threshold in effect (the caller compares it with the record: `require_recorded`).
    """
    if not backend_started():
        _set(threshold)
    return in_effect()


def configure_for_command(record_file: str | None) -> int | None:
    """A command's threshold, before anything starts the backend: a new run's, or a resume's.

    Args:
        record_file: None for a new run (`configure_for_new_run`); else the config.json or
            staged_run.json of the run to resume, whose record is set (`configure_for_record`). A
            file that cannot be read changes nothing: the resume that reads it next names what is
            wrong with it.

    Returns:
        The threshold in effect.
    """
    if record_file is None:
        return configure_for_new_run()
    from ..run_files import read_json_object  # numpy and the standard library only: no backend

    try:
        threshold = recorded(read_json_object(record_file))
    except (OSError, ValueError):
        return in_effect()
    return configure_for_record(threshold)


def recorded(record: Mapping[str, Any], where: str | None = None) -> int | None:
    """The threshold a config.json, staged_run.json or sweep's xla.json records (None: XLA's default).

    Args:
        record: the file's dict.
        where: the file, named first in the error (None: the key alone).

    Raises:
        ValueError: the key holds something other than a non-negative integer (names the key).
    """
    value = record.get(RECORD_KEY)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        prefix = "" if where is None else f"{where}: "
        raise ValueError(f"{prefix}{RECORD_KEY}: expected a non-negative integer (bytes), got "
                         f"{value!r}")
    return value


def record_entry() -> dict[str, int]:
    """The record's entry for the threshold in effect: {} for XLA's default (the old files' form)."""
    threshold = in_effect()
    return {} if threshold is None else {RECORD_KEY: threshold}


def require_recorded(record: Mapping[str, Any], where: str, command: list[str] | None = None) -> None:
    """Resume only under the threshold `record` names: set it, or check the one in effect.

    Args:
        record: the run's config.json (or staged_run.json) dict.
        where: the file, for messages.
        command: the command that resumes the run in a new process (named in the error).

    Raises:
        ValueError: the record is malformed, or the backend started under another threshold.
    """
    want = recorded(record, where)
    have = configure_for_record(want)
    if have != want:
        def describe(t):
            return "XLA's default" if t is None else f"{t} bytes"

        how = (f"; resume it in a new process: {' '.join(shlex.quote(a) for a in command)}"
               if command else "; resume it in a new process, before anything uses JAX")
        raise ValueError(f"{where}: {RECORD_KEY}: the run compiled its loops under {describe(want)}, "
                         f"but this process's JAX backend started under {describe(have)} "
                         f"(XLA_FLAGS' {OPTION}), which rounds differently{how}")
