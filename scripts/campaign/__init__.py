"""Training campaigns: declarative files of runs that start, continue and summarise themselves.

A campaign file (``campaigns/<name>.toml``, `spec`) lists entries: an algorithm, a preset and its
overrides, environment options, seeds and a step budget, and optionally the entry whose best
policy each seed fine-tunes from; or a staged recipe (``jaxrl-train --preset gate``), each seed one
staged run. ``python -m scripts.campaign run FILE`` (`runner`) starts every
run that does not exist yet and continues every interrupted one with ``jaxrl-train --resume``;
after each run stops, finished or not, the summariser the campaign file names (``summariser =
"quantgate_analysis.campaign:summarise"``, imported by that name) writes a small JSON summary and
the best pulses as CSVs into the campaign's committed folder. ``python -m scripts.campaign page``
delegates to quantgate-analysis (``quantgate-results page``), which regenerates docs/results.md
from those committed summaries alone, never from run directories, so the page can be rebuilt on
any clone.

The run directories themselves live under ``runs/`` and are never committed.
"""
