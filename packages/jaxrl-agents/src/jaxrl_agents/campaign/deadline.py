"""The campaign's deadline: ``--minutes`` from now or ``--until HH:MM``, as a time.time() value.

The driver owns it: it hands each run the seconds left (``jaxrl-train --minutes``, so the run
stops itself on an update boundary with a checkpoint, and no signal is needed), and starts
nothing once it has passed.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

__all__ = ["parse_deadline", "seconds_left", "passed"]


def parse_deadline(minutes: float | None, until: str | None,
                   say: Callable[[str], None] = print,
                   now: datetime.datetime | None = None) -> float | None:
    """time.time() of ``--minutes`` from now, or of ``--until HH:MM`` (None: no deadline).

    A time of day already past today means tomorrow (a campaign started at 23:50 with
    ``--until 07:00`` runs overnight), and `say` is told so on one line: a typo in the hour must
    not silently buy a day of training.

    Args:
        minutes: positive minutes from now, or None.
        until: ``HH:MM`` local time, or None.
        say: where the note on a past ``--until`` goes.
        now: the local time to count from (default: now).

    Raises:
        ValueError: naming the option, for both options given, a non-positive ``--minutes`` or a
            malformed ``--until``.
    """
    if minutes is not None and until is not None:
        raise ValueError("--minutes, --until: expected at most one of them, got both")
    if minutes is not None:
        if not minutes > 0 or minutes != minutes or minutes == float("inf"):
            raise ValueError(f"--minutes: expected a positive number of minutes, got {minutes!r}")
        return time.time() + 60.0 * minutes
    if until is None:
        return None
    try:
        at = datetime.datetime.strptime(until, "%H:%M").time()
    except ValueError:
        raise ValueError(f"--until: expected a local time HH:MM (e.g. 17:30), got {until!r}") from None
    now = datetime.datetime.now() if now is None else now
    target = datetime.datetime.combine(now.date(), at)
    if target <= now:
        target += datetime.timedelta(days=1)
        hours = (target - now).total_seconds() / 3600.0
        say(f"campaign: --until {until}: that time has passed today, so the campaign stops "
            f"tomorrow at {until} ({hours:.1f} h from now); stop it earlier with Ctrl-C or "
            f"--minutes")
    return target.timestamp()


def seconds_left(deadline: float | None) -> float | None:
    """Seconds until `deadline` (None: no deadline); at most 0 once it has passed."""
    return None if deadline is None else deadline - time.time()


def passed(deadline: float | None) -> bool:
    """Whether `deadline` (time.time()) has passed."""
    return deadline is not None and time.time() >= deadline
