"""quantgate-analysis: the quantgate analysis in one place.

Campaign summaries (`campaign.summarise`, the summariser a campaign file names), the results page
(`page.write_page`, ``quantgate-results page``) and a page of any run directories (`runs_page`,
``quantgate-results runs``), the gate-time frontier by RL and after GRAPE (`frontier`), robustness
maps (`robustness`), and the paper's gate constants (`paper`: one definition).

Layout: `paper` (constants) <- `thresholds`, `gates` (best gates of evaluation episodes) <-
`frontier`, `robustness` <- `summary` (one run -> its summary) <- `campaign` (the summariser:
JSON and pulse CSVs); `page` (+ `figures`, `campaign_file`) reads summaries only; `rundir` reads
run directories through jaxrl-agents' file readers; `cli` is ``quantgate-results``.

The names below load on first use (PEP 562): importing the package, or its `paper` constants,
imports neither JAX, the agents nor matplotlib.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "PAPER_GATE_NS": "paper", "PAPER_JT": "paper",
    "THRESHOLDS": "thresholds", "threshold_key": "thresholds",
    "summarise": "campaign", "summarize_run": "summary", "summarize_staged": "summary",
    "write_page": "page", "read_campaign": "campaign_file", "write_runs_page": "runs_page",
    "run_frontier": "frontier", "best_frontier": "frontier",
    "policy_map": "robustness", "paper_map": "robustness",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
