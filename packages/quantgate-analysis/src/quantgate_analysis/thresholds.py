"""The J_T thresholds a summary records the first crossing of, and their keys in the summary.

The summary writer (`summary`) records steps and wall-clock to each; the results page (`page`)
reads them back by key. A summary written before the paper's J_T joined the thresholds lacks its
key, and the page says so (``n/a``).
"""

from __future__ import annotations

from .paper import PAPER_JT

__all__ = ["THRESHOLDS", "threshold_key"]

THRESHOLDS = (1e-2, 1e-3, 1e-4, PAPER_JT)


def threshold_key(threshold: float) -> str:
    """The key of `threshold` in a summary's ``thresholds``: the fewest digits that give it back.

    ``1e-02``, ``1e-03``, ``1e-04``, ``9.486e-05``.
    """
    for digits in range(17):
        key = f"{threshold:.{digits}e}"
        if float(key) == threshold:
            return key
    return repr(threshold)
