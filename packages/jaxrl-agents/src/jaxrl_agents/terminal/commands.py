"""The commands a run suggests, spelled for the tool that started it.

Under ``uv run`` (uv sets the ``UV`` environment variable in the processes it starts) a suggestion
is a ``uv run`` command that works from the checkout's root: the workspace root declares
jaxrl-agents' extras (``plot``, ``tensorboard``, ``sweep``, ``gymnax``), so ``uv run --extra plot jaxrl-plot RUN`` installs
matplotlib from the lock and plots. Elsewhere (pip, a plain virtual environment) it is the bare
console script, preceded by the ``pip install`` of the extra it needs when that is missing.
Every command is a list of arguments first (`Suggestion.argv`, which the tests parse with the real
command-line parsers) and a line of text second (`Suggestion.text`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shlex
import sys

__all__ = ["Suggestion", "under_uv", "suggest", "suggest_viewer", "install_extra", "missing_ray",
           "EXTRA_MODULES"]

#: jaxrl-agents' optional extras and the module each one brings.
EXTRA_MODULES = {"plot": "matplotlib", "tensorboard": "tensorboardX", "sweep": "ray", "gymnax": "gymnax"}


def under_uv() -> bool:
    """Whether this process was started by ``uv run`` (uv sets ``UV`` to its own path)."""
    return bool(os.environ.get("UV"))


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """A command to print.

    Attributes:
        prefix: what runs the program (``["uv", "run", "--extra", "plot"]``, or nothing).
        argv: the program and its arguments (``["jaxrl-plot", "runs/ppo_..._s1"]``).
        install: a command to run first (``pip install "jaxrl-agents[plot]"``), or "".
    """

    prefix: tuple[str, ...]
    argv: tuple[str, ...]
    install: str = ""

    @property
    def text(self) -> str:
        """The line to type (the install command first, joined with ``&&``)."""
        cmd = shlex.join([*self.prefix, *self.argv])
        return f"{self.install} && {cmd}" if self.install else cmd


def suggest(argv: list[str], extra: str | None = None) -> Suggestion:
    """`argv` (a console script of this checkout and its arguments) as the user should run it.

    Args:
        argv: e.g. ``["jaxrl-plot", run_dir]``.
        extra: the jaxrl-agents extra the program needs (a key of `EXTRA_MODULES`), or None.
    """
    if under_uv():
        return Suggestion(("uv", "run", *(("--extra", extra) if extra else ())), tuple(argv))
    missing = extra is not None and importlib.util.find_spec(EXTRA_MODULES[extra]) is None
    return Suggestion((), tuple(argv), f'pip install "jaxrl-agents[{extra}]"' if missing else "")


def suggest_viewer(logdir: str) -> Suggestion:
    """The TensorBoard application on `logdir`.

    It is not a dependency of any package here (only its file format is: tensorboardX writes it),
    so under uv it comes as a ``--with`` layer of this one command, and under pip by its name.
    """
    argv = ("tensorboard", "--logdir", logdir)
    if under_uv():
        return Suggestion(("uv", "run", "--with", "tensorboard"), argv)
    missing = importlib.util.find_spec("tensorboard") is None
    return Suggestion((), argv, "pip install tensorboard" if missing else "")


def install_extra(extra: str, argv: list[str]) -> str:
    """How to get a missing `extra` and run `argv` with it: one line for an error message."""
    if under_uv():
        return suggest(argv, extra).text
    return f'pip install "jaxrl-agents[{extra}]"'


def missing_ray(error: ModuleNotFoundError, prog: str, extra: str, argv: list[str]) -> int:
    """Print the error line of a command whose Ray is not installed; its exit code (2).

    Args:
        error: what the import raised; raised again when the missing module is not Ray.
        prog: the command (``jaxrl-sweep``, ``jaxrl-campaign``).
        extra: the jaxrl-agents extra that brings Ray (``sweep``, ``campaign``).
        argv: the command's arguments (the line repeats them with the extra).
    """
    if not error.name or error.name.split(".")[0] != "ray":
        raise error
    print(f"{prog}: error: Ray is not installed; it comes with the {extra} extra: "
          f"{install_extra(extra, [prog, *argv])}", file=sys.stderr)
    return 2
