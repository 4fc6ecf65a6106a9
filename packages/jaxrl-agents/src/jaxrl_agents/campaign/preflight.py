"""Every entry's run settings, checked before the first run of a campaign trains.

`spec.load_campaign` checks the file's shape; this checks what ``jaxrl-train`` would refuse only
when an entry's turn came: the algorithm, the preset, that each ``flags`` key is a field of the
algorithm's config, and that the `run.spec.RunSpec` the entry's runs get (`spec.Entry.run_spec`)
is valid. A typo in the last entry is
thus an error before the first entry trains, and no run folder is created for it.
"""

from __future__ import annotations

import dataclasses
import difflib

from .spec import Campaign, Entry

__all__ = ["check_entries"]


def _close(name: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _check_entry(path: str, entry: Entry) -> None:
    from ..run.algorithms import get_algorithm

    where = f"{path}: entry {entry.name!r}"
    try:
        algorithm = get_algorithm(entry.algo)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    fields = sorted(f.name for f in dataclasses.fields(algorithm.config) if f.name != "total_steps")
    for key in entry.flags:
        if key not in fields:
            raise ValueError(f"{where}: flags: expected fields of {algorithm.config.__name__} "
                             f"(the jaxrl-train flags of algo {entry.algo!r}), got {key!r}"
                             f"{_close(key, fields)}")
    try:  # the preset, and the RunSpec a run gets (a fine-tune's source is only a path here)
        entry.run_spec(entry.seeds[0], "runs", None if entry.init_from is None else "source")
    except (TypeError, ValueError) as e:  # names the field (a flag, or total_steps)
        raise ValueError(f"{where}: {e}") from None


def check_entries(campaign: Campaign, names: set[str] | None = None) -> None:
    """Check the run settings of every entry (or of the entries `names`) of `campaign`.

    Staged entries are their recipe's (checked when the recipe is registered); their file keys are
    checked by `spec.load_campaign`.

    Raises:
        ValueError: naming the file, the entry and the key, what was expected and what arrived.
    """
    for entry in campaign.entries:
        if entry.staged or (names is not None and entry.name not in names):
            continue
        _check_entry(campaign.path, entry)
