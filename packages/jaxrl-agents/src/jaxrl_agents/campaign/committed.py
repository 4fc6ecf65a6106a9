"""What a campaign reads of a committed summary: its ``status``, and nothing else.

A summary is the summariser's (the campaign file names it); the campaign reads one only where a
seed has no run directory on this machine, to tell a run made elsewhere ("finished": skipped;
"interrupted": cannot resume here) from a run that was never made. A summary file that exists is
never taken for "no summary": one that cannot be read, or has no status (a hand edit), is
reported by name and its seed is skipped, so that a new run cannot replace it.
"""

from __future__ import annotations

import json
import os

__all__ = ["committed_status", "read_summary_object", "STATUSES"]

#: The statuses a summary may give a run.
STATUSES = ("finished", "interrupted", "incomplete")


def committed_status(path: str) -> str | None:
    """The ``status`` of the committed summary at `path`, or None when there is no such file.

    Raises:
        ValueError: naming `path`, when the file exists but is not a JSON object with a status
            of `STATUSES` (truncated, list-shaped, hand-edited, a directory, unreadable).
    """
    if not os.path.lexists(path):
        return None
    data = read_summary_object(path)
    status = data.get("status")
    if status not in STATUSES:
        raise ValueError(f"{path}: expected a summary whose status is one of {list(STATUSES)}, got "
                         f"{status!r}")
    return status


def read_summary_object(path: str) -> dict:
    """A committed summary file as a JSON object, whatever its content (the page checks more).

    Raises:
        ValueError: naming `path`: unreadable (a directory, permissions), not UTF-8, not JSON, or
            JSON that is not an object (truncated, list-shaped).
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(f"{path}: expected a campaign summary (a JSON object), got a file that "
                         f"cannot be read as one ({reason})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a campaign summary (a JSON object), got a JSON "
                         f"{type(data).__name__}")
    return data
