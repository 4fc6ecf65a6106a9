"""``python -m scripts.campaign``: run, summarise or publish a training campaign.

    python -m scripts.campaign run campaigns/replication.toml [--minutes 120 | --until 17:45]
    python -m scripts.campaign summarize campaigns/replication.toml
    python -m scripts.campaign page campaigns/replication.toml [--out docs/results.md]

``run`` starts or continues every run (see `runner`), ``summarize`` rewrites the summaries of the
runs that exist with the summariser the campaign file names, and ``page`` regenerates the results
page from the committed summaries only (it delegates to ``quantgate-results page``, in
quantgate-analysis).
Errors are one line on stderr with exit 2 (bad input); ``run`` exits 3 when its deadline stopped it.
"""

from __future__ import annotations

import argparse
import sys

from .spec import load_campaign


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m scripts.campaign",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start or continue every run of the campaign")
    run.add_argument("campaign", help="campaign file (TOML)")
    run.add_argument("--minutes", type=float, default=None,
                     help="stop the current run cleanly after this many minutes")
    run.add_argument("--until", default=None, metavar="HH:MM", help="stop at this local time")
    run.add_argument("--entry", action="append", default=None, metavar="NAME",
                     help="run only this entry (repeatable)")
    run.add_argument("--seed", action="append", type=int, default=None, metavar="N",
                     help="run only this seed (repeatable)")
    run.add_argument("--progress", choices=("bar", "lines", "off"), default="lines")
    summ = sub.add_parser("summarize", help="rewrite the summaries of the runs that exist")
    summ.add_argument("campaign")
    summ.add_argument("--entry", action="append", default=None, metavar="NAME",
                      help="rewrite only this entry's summaries (repeatable)")
    summ.add_argument("--seed", action="append", type=int, default=None, metavar="N",
                      help="rewrite only this seed's summaries (repeatable)")
    page = sub.add_parser("page", help="regenerate the results page from committed summaries")
    page.add_argument("campaign", nargs="+")
    page.add_argument("--out", default="docs/results.md")
    page.add_argument("--figures", default="docs/figures/campaign")
    page.add_argument("--force", action="store_true",
                      help="replace --out even if it is not a page this command generated")
    args = parser.parse_args(argv)
    try:
        if args.command == "page":
            from quantgate_analysis.page import write_page

            print(write_page([load_campaign(p) for p in args.campaign], args.out, args.figures,
                             args.force))
            return 0
        campaign = load_campaign(args.campaign)
        if args.command == "summarize":
            from .rundirs import find_run_dir, find_staged_dir, staged_has_progress

            summarise = campaign.load_summariser()
            for name in args.entry or ():
                campaign.entry(name)  # ValueError naming the choices
            for entry, seed in campaign.schedule():
                if (args.entry and entry.name not in args.entry) or (args.seed and seed not in args.seed):
                    continue
                parent = campaign.run_parent(entry, seed)
                if entry.staged:
                    run_dir = find_staged_dir(parent)
                    if run_dir is not None and not staged_has_progress(run_dir):
                        run_dir = None  # no attempt has trained yet: nothing to summarise
                else:
                    run_dir = find_run_dir(parent)
                if run_dir is not None:
                    print(summarise(campaign, entry, seed, run_dir, None))
            return 0
        from .runner import parse_deadline, run_campaign

        deadline = parse_deadline(args.minutes, args.until)
        return run_campaign(campaign, deadline=deadline, entries=args.entry, seeds=args.seed,
                            progress=args.progress)
    except ValueError as e:
        print(f"campaign: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
