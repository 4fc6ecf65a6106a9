"""JAX's persistent compilation cache for the command-line tools: a repeated run loads its programs.

A run's compiled programs depend on its config and environment, not on its seed. So the next run of
a preset (another seed, a resume after Ctrl-C, a staged run's next attempt) can load from disk what
an earlier one compiled instead of compiling it again. On the 2-core AMD EPYC of bench/README.md
("Start-up", ``bench/startup.py``), that brings the gate preset's first update about 17 s sooner.

``jaxrl-train`` and ``jaxrl-campaign``'s runs call `configure_for_command` before compiling
anything. It picks the directory, in this order:

1. ``--compile-cache DIR``;
2. the ``JAXRL_COMPILE_CACHE`` variable;
3. JAX's own ``JAX_COMPILATION_CACHE_DIR``, left exactly as the user set it up;
4. ``$XDG_CACHE_HOME/jaxrl-agents/jax``, else ``~/.cache/jaxrl-agents/jax``.

``off`` (as the flag's or the variable's value) disables the cache. A library caller of
`jaxrl_agents` gets none of this: only the commands touch JAX's configuration.

The cache holds at most `MAX_BYTES`: JAX evicts the least recently used programs, and its file lock
(``filelock``) keeps two runs that compile the same program from reading each other's half-written
entry.

**Why the cache is probed first.** On some Intel CPUs XLA rejects every cached executable on load
(jax-ml/jax#38445): it compiles again and logs an error line per program. So the first use of a
directory, for each jaxlib, CPU and ``XLA_FLAGS``, runs `loads_back_cleanly` in a subprocess. The
probe compiles a small function, loads it back, and must get a cache hit with nothing on stderr.
The answer is kept in the directory (``probe-<key>.json``), and a cache that fails it is not used.

**Bits.** A loaded program is the executable XLA compiled from the same HLO with the same options
(``XLA_FLAGS`` are part of JAX's key), so a run computes the same bits with the cache as without
(tests/jaxrl_agents/test_compile_cache.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

from ...common.fileio import atomic_write_json

__all__ = ["configure_for_command", "resolve_directory", "enable", "loads_back_cleanly",
           "ENV_VARIABLE", "OFF", "MAX_BYTES", "PROBE_SOURCE"]

#: the variable that names the cache directory of the commands (or ``off``)
ENV_VARIABLE = "JAXRL_COMPILE_CACHE"
OFF = "off"
#: the cache's size bound: a gate run's programs take ~1.5 MB, so this holds hundreds of configs
MAX_BYTES = 2 << 30

#: Compiles one function, drops JAX's in-memory caches and compiles it again: the second must come
#: from the cache on disk. Prints the number of cache hits and whether both results agree.
PROBE_SOURCE = """
import jax, jax.numpy as jnp
from jax import monitoring
hits = []
monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("/cache_hits") else None)
f = lambda x: jnp.tanh(x @ x.T).sum(0)
x = jnp.linspace(0.0, 1.0, 64).reshape(8, 8)
first = jax.jit(f)(x)
jax.clear_caches()  # the second call compiles again, so it must come from the cache on disk
second = jax.jit(f)(x)
print(len(hits), bool((first == second).all()))
"""


def default_directory(environ=None) -> str:
    """``$XDG_CACHE_HOME/jaxrl-agents/jax``, else ``~/.cache/jaxrl-agents/jax``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxrl-agents", "jax")


def resolve_directory(choice: str | None, environ=None) -> tuple[str | None, str]:
    """Which cache directory a command uses, and who chose it.

    Args:
        choice: ``--compile-cache``'s value (None: not typed).
        environ: the environment (default ``os.environ``).

    Returns:
        (directory, or None for no cache of ours; one of ``"flag"``, ``"variable"``, ``"jax"``
        (JAX's own variable: JAX reads it itself), ``"default"``).

    Raises:
        ValueError: an empty value, naming the flag or the variable.
    """
    environ = os.environ if environ is None else environ
    for value, source, name in ((choice, "flag", "--compile-cache"),
                                (environ.get(ENV_VARIABLE), "variable", ENV_VARIABLE)):
        if value is None:
            continue
        if not value.strip():
            raise ValueError(f"{name}: expected a directory or {OFF!r}, got an empty value")
        return (None if value == OFF else os.path.abspath(os.path.expanduser(value))), source
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None, "jax"
    return default_directory(environ), "default"


def enable(directory: str) -> None:
    """Point this process's JAX at `directory`, caching every program (before it compiles one).

    Every program, however fast it compiles: JAX's default of 1 s would leave out the ~130 small
    programs of a run's set-up, ~7 s on a small CPU.

    Args:
        directory: the cache directory (made if missing).
    """
    import jax

    os.makedirs(directory, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    try:
        import filelock  # noqa: F401  (JAX's lock, which a size bound needs)
    except ImportError:
        return  # unbounded, as JAX's default
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)


def loads_back_cleanly(directory: str, environ=None, timeout_s: float = 120) -> tuple[bool, str]:
    """Compile a function into a cache at `directory` and load it back, in a subprocess.

    Returns:
        (a cache hit with identical results and nothing on stderr, why not: the last stderr line).
    """
    env = dict(os.environ if environ is None else environ, JAX_COMPILATION_CACHE_DIR=directory,
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    env.pop(ENV_VARIABLE, None)
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE_SOURCE], env=env, capture_output=True,
                               text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as err:
        return False, str(err)
    works = probe.returncode == 0 and probe.stdout.split() == ["1", "True"] and not probe.stderr
    return works, " ".join(probe.stderr.strip().splitlines()[-1:] or probe.stdout.split())


def _machine_key() -> str:
    """What decides whether cached programs load back: jaxlib, the CPU, XLA_FLAGS."""
    import jaxlib

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            # the first processor's model and feature flags (the loader checks the features)
            lines = [ln for ln in f.read().split("\n\n")[0].splitlines()
                     if ln.startswith(("model name", "flags", "Features"))]
        cpu = "\n".join(lines) or cpu
    except OSError:
        pass
    text = "\n".join([jaxlib.__version__, platform.machine(), platform.system(), cpu,
                      os.environ.get("XLA_FLAGS", "")])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _probed(directory: str) -> tuple[bool, str]:
    """The probe's answer for this machine, run once per directory and kept there."""
    record = os.path.join(directory, f"probe-{_machine_key()}.json")
    try:
        with open(record, encoding="utf-8") as f:
            kept = json.load(f)
        return bool(kept["works"]), str(kept["why"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    scratch = tempfile.mkdtemp(prefix="probe-", dir=directory)
    try:
        works, why = loads_back_cleanly(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    atomic_write_json(record, {"works": works, "why": why})
    return works, why


def configure_for_command(choice: str | None, command: str) -> str | None:
    """Set up the cache for a command-line run (`resolve_directory`), probed (module docstring).

    A cache that cannot be used is no error: the run compiles as without one. Where the user named
    the directory (flag or variable), one line on stderr says why it is not used.

    Args:
        choice: ``--compile-cache``'s value (None: not typed).
        command: the command's name, for that line.

    Returns:
        The directory in use, or None (off, JAX's own variable, or unusable).

    Raises:
        ValueError: an empty value, naming the flag or the variable.
    """
    directory, source = resolve_directory(choice)
    if directory is None:
        return None
    try:
        os.makedirs(directory, exist_ok=True)
        works, why = _probed(directory)
        if not works:
            why = f"a cached program did not load back cleanly on this machine: {why[:200]}"
    except OSError as err:  # not writable, not a directory, a full disk
        works, why = False, f"cannot write there: {err.strerror or err}"
    if not works:
        if source != "default":
            print(f"{command}: note: compilation cache {directory} not used ({why}); the run "
                  f"compiles its programs", file=sys.stderr)
        return None
    enable(directory)
    return directory
