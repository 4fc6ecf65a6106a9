"""The code under packages/ and bench/ is lint-clean: ruff with the repository's rules (pyproject.toml
[tool.ruff]: pycodestyle, pyflakes, import order, bugbear, pyupgrade and Google-style docstrings).

Run as a test so that the README's one test command (and so CI) checks it; `ruff check packages`
shows the same findings with their fixes. (bench/'s programs skip only the missing-docstring
rules, by pyproject's per-file-ignores.)
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (it is in the `test` dependency group)")
    return [exe]


@pytest.mark.parametrize("tree", ["packages", "bench"])
def test_the_code_is_ruff_clean(tree):
    proc = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", tree],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff check {tree} found:\n{proc.stdout}{proc.stderr}"


def test_the_rules_include_docstrings():
    """The docstring rules stay selected: dropping them would make the test above pass vacuously."""
    proc = subprocess.run([*_ruff(), "check", "--show-settings", "packages/jaxrl-agents/src/jaxrl_agents/__init__.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    enabled = proc.stdout.split("linter.rules.enabled", 1)[-1].split("linter.rules.should_fix", 1)[0]
    for rule in ("undocumented-public-method (D102)", "undocumented-public-function (D103)",
                 "missing-blank-line-after-summary (D205)", "undocumented-param (D417)"):
        assert rule in enabled, f"{rule} is no longer selected in pyproject.toml [tool.ruff.lint]"
