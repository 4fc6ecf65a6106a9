"""The README's "What is supported" table says what the loader does (issue 37, row 2).

It listed "pi != vf widths" as rejected after the loader had learnt them (test_sb3_pi_vf.py loads
real SB3 models built with ``net_arch=dict(pi=..., vf=...)``). The rejected column of each row is
checked against the loader's own refusals, so the next change to either shows here.
"""

from __future__ import annotations

import pathlib

from sb3_bridge import keymap

README = pathlib.Path(__file__).resolve().parents[2] / "packages" / "sb3-bridge" / "README.md"

# What a user reads in the README for each state-dict marker the loader refuses (keymap).
MARKER_WORDS = {
    "mlp_extractor.shared_net.": "shared between actor and critic",
    "features_extractor.": "custom extractors",
    "pi_features_extractor.": "custom extractors",
    "vf_features_extractor.": "custom extractors",
    "lstm_actor.": "recurrent",
    "actor.": "SAC",
    "q_net.": "DQN",
}


def _supported_table() -> dict[str, tuple[str, str]]:
    text = README.read_text()
    section = text.split("## What is supported", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and not set(cells[0]) <= {"-", " "}:
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_the_network_row_says_separate_widths_load_and_names_what_is_refused():
    supported, rejected = _supported_table()["network"]
    assert "pi != vf" not in rejected and "same** hidden widths" not in supported
    assert "net_arch=dict(pi=[64, 64], vf=[32, 32])" in supported and "critic_hidden" in supported
    # the loader's refusals of a network (keymap's shared_net marker, describe's empty towers)
    assert "shared between actor and critic" in rejected and "net_arch=[]" in rejected


def test_every_refused_layout_of_the_loader_is_in_the_table():
    assert {prefix for prefix, _ in keymap._UNSUPPORTED_MARKERS} == set(MARKER_WORDS)
    rejected = " ".join(r for _, r in _supported_table().values())
    for prefix, words in MARKER_WORDS.items():
        assert words in rejected, f"{prefix}: the README's rejected column does not say {words!r}"


def test_critic_hidden_is_documented_where_users_look():
    jaxrl_readme = README.parents[1] / "jaxrl-agents" / "README.md"
    assert "--critic-hidden" in README.read_text()
    assert "--critic-hidden" in jaxrl_readme.read_text()
