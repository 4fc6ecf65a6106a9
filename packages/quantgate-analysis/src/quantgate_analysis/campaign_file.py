"""What the results page reads of a campaign file: its name, summaries folder and entries.

``jaxrl-campaign`` (jaxrl_agents.campaign) validates a campaign file as a whole before anything runs; the page needs only
a few of its keys, and must build where the runner is not installed, so it reads those itself:
``name``, ``summaries`` and each ``[[entry]]``'s ``name``, ``description`` and ``init_from``.
Other keys are the runner's and are not looked at.
"""

from __future__ import annotations

import dataclasses

from jaxrl_agents.common.fileio import read_toml

__all__ = ["PageCampaign", "PageEntry", "read_campaign"]


@dataclasses.dataclass(frozen=True)
class PageEntry:
    """An entry of a campaign, as the page shows it.

    Attributes:
        name: the entry's name (its summaries' folder under the campaign's).
        description: one line for the page.
        init_from: the name of the entry whose best policy each seed fine-tunes, or None.
    """

    name: str
    description: str
    init_from: str | None


@dataclasses.dataclass(frozen=True)
class PageCampaign:
    """A campaign, as the page shows it.

    Attributes:
        path: the campaign file (the page names it in its commands).
        name: the campaign's name.
        summaries: the folder of its committed summaries.
        entries: its entries in file order.
    """

    path: str
    name: str
    summaries: str
    entries: tuple[PageEntry, ...]


def _string(path: str, where: str, value, *, optional: bool = False) -> str | None:
    if optional and value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{path}: {where}: expected a non-empty string, got {value!r}")
    return value


def read_campaign(path: str) -> PageCampaign:
    """Read what the page needs of the campaign file at `path`.

    Raises:
        ValueError: naming the file and the key: no such file, not TOML, or a key the page reads
            missing or of the wrong type.
    """
    data = read_toml(path, "campaign", "a campaign file")
    tables = data.get("entry")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{path}: entry: expected one or more [[entry]] tables, got {tables!r}")
    entries = []
    for i, table in enumerate(tables):
        name = _string(path, f"entry {i + 1}: name", table.get("name"))
        description = table.get("description", "")
        if not isinstance(description, str):
            raise ValueError(f"{path}: entry {name!r}: description: expected a string, got {description!r}")
        entries.append(PageEntry(name, description,
                                 _string(path, f"entry {name!r}: init_from", table.get("init_from"),
                                         optional=True)))
    return PageCampaign(path, _string(path, "name", data.get("name")),
                        _string(path, "summaries", data.get("summaries")), tuple(entries))
