"""Session-wide test setup: the paper's pulses, and one JAX compilation cache per test run.

Compiling is most of what the suite costs on a small CPU (a PPO update on the toy environment takes
~10 s of CPU to compile and milliseconds to run). The same programs are compiled again and again:
by both xdist workers, by every `jaxrl-train` subprocess a CLI test starts, and by tests that build
an equal program under a new function object. So the run points JAX's persistent compilation cache
(the one `jaxrl-sweep` uses for its trials) at a fresh temporary directory: the first process to
compile a program writes it, the others load it. The directory is made when the run starts and
removed when it ends, so every run (and every fresh clone) starts with an empty cache, and what a
test asserts does not change: a loaded program is the executable XLA compiled from the same HLO,
with the same flags (XLA_FLAGS are part of the key, so the restricted-ISA subprocess of
test_fixtures_on_an_older_cpu.py compiles its own).

The cache is used only where it works: a subprocess first compiles a small function, loads it
back from the cache, and must get it with nothing on stderr (on some Intel CPUs XLA rejects every
cached executable and logs an error per load, which would land in the stderr that CLI tests
check). A run that already has JAX_COMPILATION_CACHE_DIR keeps it untouched. `pytest` prints which
cache is used in its header.

Python's own compiled bytecode is shared the same way where PYTHONDONTWRITEBYTECODE would make
every process compile each module it imports from source (`_start_bytecode_cache`).
"""

import os
import pathlib
import shutil
import sys
import tempfile

import pytest

DATA = pathlib.Path(__file__).parent / "data"

#: set (to the cache directory) by the process that made this run's cache; xdist workers and test
#: subprocesses inherit it with the JAX variables
OWNER_VARIABLE = "QUANTGATE_TESTS_JAX_CACHE"
#: filelock is what makes concurrent reads and writes of one entry safe (JAX locks the directory
#: only when the cache has a maximum size); every program that takes 0.1 s or more to compile
CACHE_VARIABLES = {"JAX_COMPILATION_CACHE_MAX_SIZE": str(4 << 30),
                   "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.1"}

#: the commands' cache variable (jaxrl_agents.run.host.compile_cache.ENV_VARIABLE)
COMMANDS_CACHE_VARIABLE = "JAXRL_COMPILE_CACHE"
_cache_state = {"dir": None, "note": ""}
#: the temporary folders this process made for the run (the cache, bytecode, SB3 logs): removed
#: when the run ends, so only the controller (or a run without xdist) removes anything
_run_folders: list[str] = []


def _start_compile_cache() -> None:
    _start_run_cache()
    # `jaxrl-train`, in a subprocess or called in-process, uses a cache of its own in the user's
    # home unless told otherwise (run/host/compile_cache.py): with this run's cache it defers to
    # JAX_COMPILATION_CACHE_DIR, and without one it is off, so no test writes outside the run.
    if _cache_state["dir"] is None:
        os.environ.setdefault(COMMANDS_CACHE_VARIABLE, "off")


def _start_run_cache() -> None:
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        owned_by_run = os.environ.get(OWNER_VARIABLE) == os.environ["JAX_COMPILATION_CACHE_DIR"]
        _cache_state.update(dir=os.environ["JAX_COMPILATION_CACHE_DIR"],
                            note="this run's" if owned_by_run else "from JAX_COMPILATION_CACHE_DIR")
        return
    try:
        import filelock  # noqa: F401
    except ImportError:
        _cache_state["note"] = "off (no filelock)"
        return
    path = tempfile.mkdtemp(prefix="quantgate-tests-jax-cache-")
    works, why = _loads_back_cleanly(os.path.join(path, "probe"))
    shutil.rmtree(os.path.join(path, "probe"), ignore_errors=True)  # the run starts empty
    if not works:
        shutil.rmtree(path, ignore_errors=True)
        _cache_state["note"] = f"off (a cached program did not load back cleanly: {why[:200]})"
        return
    os.environ.update(JAX_COMPILATION_CACHE_DIR=path, **CACHE_VARIABLES, **{OWNER_VARIABLE: path})
    if "jax" in sys.modules:  # imported before this hook (by a plugin): tell it too
        import jax

        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_compilation_cache_max_size",
                          int(CACHE_VARIABLES["JAX_COMPILATION_CACHE_MAX_SIZE"]))
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(CACHE_VARIABLES["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
    _run_folders.append(path)
    _cache_state.update(dir=path, note="this run's")


def _loads_back_cleanly(path: str) -> tuple[bool, str]:
    """Compile a function into a cache at `path`, load it back: (a hit and a silent stderr, why not).

    The commands' own probe (`jaxrl_agents.run.host.compile_cache`), with this run's settings.
    """
    from jaxrl_agents.run.host.compile_cache import loads_back_cleanly

    return loads_back_cleanly(path, dict(os.environ, **CACHE_VARIABLES))


#: SB3's `learn` makes a logger folder, ``$TMPDIR/SB3-<date>``, for every model when SB3_LOGDIR is
#: unset, and never removes it: the suite left dozens behind per run. They go to one folder of the
#: run instead, made and removed as the compilation cache is (workers inherit the variable).
SB3_LOG_VARIABLE = "SB3_LOGDIR"


_bytecode_state = {"note": "written beside the sources (Python's default)"}


def _start_bytecode_cache() -> None:
    """Let the run's processes share compiled bytecode where PYTHONDONTWRITEBYTECODE forbids it.

    With it set (some container images do), every process compiles each module it imports from
    source: importing jaxrl_agents takes ~4 s of CPU instead of ~1.5, and the suite starts two
    xdist workers and dozens of `jaxrl-train` and probe subprocesses. The children instead write
    bytecode under a temporary PYTHONPYCACHEPREFIX (nothing beside the sources, which is what
    the variable is for) and read it back; the folder goes when the run ends, as the JAX cache.
    """
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        _bytecode_state["note"] = f"under PYTHONPYCACHEPREFIX {os.environ['PYTHONPYCACHEPREFIX']}"
        return
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    path = tempfile.mkdtemp(prefix="quantgate-tests-pycache-")
    _run_folders.append(path)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = path
    _bytecode_state.update(note=f"this run's {path} (PYTHONDONTWRITEBYTECODE was set)")


def pytest_configure(config):
    """Start the run's compilation cache, bytecode folder and SB3 log folder.

    In xdist's controller, before its workers start: they inherit the variables.
    """
    _start_bytecode_cache()  # first: the cache's probe subprocess then writes jax's bytecode too
    _start_compile_cache()
    if SB3_LOG_VARIABLE not in os.environ:
        os.environ[SB3_LOG_VARIABLE] = tempfile.mkdtemp(prefix="quantgate-tests-sb3-")
        _run_folders.append(os.environ[SB3_LOG_VARIABLE])
    _start_jax_backend()


def _start_jax_backend() -> None:
    """Start JAX's backend now, under the XLA_FLAGS the run was given (in every process of the run).

    `jaxrl-train` raises XLA's small-loop threshold for a new run when the backend has not started
    yet (jaxrl_agents/run/host/small_loops.py). Called in-process by a test, it would do so only
    where it happened to be the first thing to use JAX, and every later test of that worker would
    compile under it: an order-dependent run. Started here, in-process runs compile under the run's
    XLA_FLAGS (XLA's default unless given) and resume the committed old runs as they were made;
    the `jaxrl-train` subprocesses of the CLI tests take the threshold as users' commands do.
    """
    import jax

    jax.devices()


def pytest_unconfigure(config):
    """Remove the run's compilation cache, bytecode and SB3 log folders (where this process made them)."""
    for path in _run_folders:
        shutil.rmtree(path, ignore_errors=True)


def pytest_report_header(config):
    """Say which compilation cache and bytecode folder the run uses."""
    where = f" {_cache_state['dir']}" if _cache_state["dir"] else ""
    return [f"JAX compilation cache: {_cache_state['note']}{where}",
            f"Python bytecode: {_bytecode_state['note']}"]


#: files that are one long test in a subprocess each: xdist's default (load) scheduling hands out
#: tests in collection order, and these come last in it, where one worker would finish them alone
#: while the other waits; they start first instead (the order of everything else is unchanged)
START_FIRST = ("tests/test_fixtures_on_an_older_cpu.py", "tests/quantgate_env/test_standalone_install.py")


def pytest_collection_modifyitems(config, items):
    """Move the START_FIRST files to the front (a stable sort: every worker collects the same order)."""
    rank = {path: i for i, path in enumerate(START_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def pulse_dir() -> pathlib.Path:
    """The paper's stored pulses (copied with provenance in tests/data/SOURCES.md)."""
    return DATA / "paper-pulses"
