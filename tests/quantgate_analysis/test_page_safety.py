"""The page never destroys a user's file and never publishes a number it cannot stand behind.

Rows of issue 35's table of probes of the campaign tools (2, 3, 6 and the page's part of 10),
each as a test of ``quantgate-results page`` on tests/quantgate_analysis/tiny_campaign.py.
"""

import json

import pytest
from quantgate_analysis.cli import main

from .tiny_campaign import write_tiny_campaign

pytest.importorskip("matplotlib")


def test_a_user_s_png_in_the_figures_folder_is_not_replaced_without_force(tmp_path, monkeypatch,
                                                                           capsys):
    """Row 2: ``--figures DIR`` holding the user's PNG of a figure's name: refused, the file kept."""
    monkeypatch.chdir(tmp_path)
    write_tiny_campaign(tmp_path)
    (tmp_path / "figs").mkdir()
    mine = tmp_path / "figs" / "learning_curves_tiny-ppo.png"
    mine.write_bytes(b"\x89PNG my own plot")
    assert main(["page", "tiny.toml", "--out", "page.md", "--figures", "figs"]) == 2
    err = capsys.readouterr().err
    assert "--figures: " in err and "learning_curves_tiny-ppo.png" in err and "--force" in err
    assert mine.read_bytes() == b"\x89PNG my own plot" and not (tmp_path / "page.md").exists()
    # the page's own figures are replaced on the next build, and --force replaces the user's
    assert main(["page", "tiny.toml", "--out", "page.md", "--figures", "figs", "--force"]) == 0
    assert main(["page", "tiny.toml", "--out", "page.md", "--figures", "figs"]) == 0
    assert mine.read_bytes().startswith(b"\x89PNG") and mine.stat().st_size > 1000


def test_a_user_s_file_beside_the_page_is_not_its_temporary_file(tmp_path, monkeypatch):
    """Row 3: ``--out r.md`` beside a user's ``r.md.tmp``: the page's temporary name is unique."""
    monkeypatch.chdir(tmp_path)
    write_tiny_campaign(tmp_path)
    (tmp_path / "r.md.tmp").write_text("my draft\n")
    assert main(["page", "tiny.toml", "--out", "r.md", "--figures", "figs"]) == 0
    assert (tmp_path / "r.md.tmp").read_text() == "my draft\n"
    assert (tmp_path / "r.md").read_text().startswith("# Results")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")) == []


def test_a_hand_edited_repropagated_jt_is_refused_naming_the_file(tmp_path, monkeypatch, capsys):
    """Row 6: ``JT_repropagated = 1e-9`` typed into a summary is not published as 1.00e-09."""
    monkeypatch.chdir(tmp_path)
    write_tiny_campaign(tmp_path)
    path = tmp_path / "summaries" / "ppo" / "s2.json"
    s = json.loads(path.read_text())
    s["best"]["JT_repropagated"] = 1e-9
    path.write_text(json.dumps(s))
    assert main(["page", "tiny.toml", "--out", "page.md", "--figures", "figs"]) == 2
    err = capsys.readouterr().err
    assert "summaries/ppo/s2.json: best: JT_repropagated (1.000000e-09) is not the J_T" in err
    assert err.count("\n") == 1 and not (tmp_path / "page.md").exists()


@pytest.mark.parametrize("name, text, message", [
    ("s2.json", '{"status": "finished", "best": {"JT', "cannot be read as one"),
    ("s2.json", "[1, 2]", "expected a campaign summary (a JSON object), got a JSON list"),
    ("s2-old.json", "{}", "expected a summary named s<seed>.json"),
    ("s2.json", b"\xff\xfe\x00garbage", "cannot be read as one"),
])
def test_a_summary_the_page_cannot_read_is_named(tmp_path, monkeypatch, capsys, name, text, message):
    """Row 10: truncated, list-shaped, stray or binary summary files: one line naming the file."""
    monkeypatch.chdir(tmp_path)
    write_tiny_campaign(tmp_path)
    path = tmp_path / "summaries" / "ppo" / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["page", "tiny.toml", "--out", "page.md", "--figures", "figs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"summaries/ppo/{name}" in err and message in err


def test_a_page_into_a_missing_folder_and_odd_campaign_paths_are_named(tmp_path, monkeypatch, capsys):
    """Row 10: ``--out`` in a missing folder; a binary file or a directory as the campaign file."""
    monkeypatch.chdir(tmp_path)
    write_tiny_campaign(tmp_path)
    assert main(["page", "tiny.toml", "--out", "no/such/page.md", "--figures", "figs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: no/such/page.md: cannot write it" in err
    assert not (tmp_path / "figs").exists()  # found before anything was written
    (tmp_path / "binary.toml").write_bytes(b"\x00\xff\xfe\x89")
    assert main(["page", "binary.toml"]) == 2
    assert "binary.toml: expected a campaign file (TOML, UTF-8 text)" in capsys.readouterr().err
    assert main(["page", "summaries"]) == 2
    assert "got 'summaries', a directory" in capsys.readouterr().err
