"""``quantgate-results``: the results page of campaigns (from their summaries) or of run directories.

    quantgate-results page campaigns/replication.toml [--out docs/results.md] [--figures DIR] [--force]
    quantgate-results runs RUN_DIR [RUN_DIR ...] [--out results.md] [--figures DIR] [--robustness] [--refine N]

``page`` regenerates the project's results page from the committed campaign summaries alone
(`page`); ``runs`` writes a page of any run directories at hand, or of every trial of a jaxrl-sweep
directory (`runs_page`). Errors are one line on stderr with exit 2 (bad input, an --out that
cannot be written).
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quantgate-results", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    page = sub.add_parser("page", help="regenerate the results page from committed campaign summaries")
    page.add_argument("campaign", nargs="+", help="campaign file(s) (TOML)")
    page.add_argument("--out", default="docs/results.md")
    page.add_argument("--figures", default="docs/figures/campaign")
    page.add_argument("--force", action="store_true",
                      help="replace --out even if it is not a page this command generated")
    runs = sub.add_parser("runs", help="a results page of run directories")
    runs.add_argument("runs", nargs="+", help="run directories, or jaxrl-sweep directories "
                                              "(standing for all their trials' runs)")
    runs.add_argument("--out", default="results.md")
    runs.add_argument("--figures", default="results-figures")
    runs.add_argument("--robustness", action="store_true",
                      help="also map each best policy over the recool grid")
    runs.add_argument("--refine", type=int, default=0, metavar="N",
                      help="also polish each run's best gate within the paper's gate time with N GRAPE "
                           "iterations")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "page":
            from .campaign_file import read_campaign
            from .page import write_page

            print(write_page([read_campaign(p) for p in args.campaign], args.out, args.figures,
                             args.force))
            return 0
        from .runs_page import expand_sweeps, read_run, write_runs_page

        if args.refine < 0:
            raise ValueError(f"--refine: expected a non-negative number of iterations, got {args.refine}")
        runs = [read_run(d) for d in expand_sweeps(args.runs)
                if os.path.exists(os.path.join(d, "progress.csv"))]
        if not runs:
            raise ValueError(f"runs: expected run directories with a progress.csv, got none among "
                             f"{args.runs}")
        print(write_runs_page(runs, args.out, args.figures, args.robustness, args.refine))
        return 0
    except ValueError as e:
        print(f"quantgate-results: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # --out in a missing or read-only folder: found before anything is written
        from jaxrl_agents.common.fileio import describe_os_error

        print(f"quantgate-results: error: --out: {describe_os_error(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
