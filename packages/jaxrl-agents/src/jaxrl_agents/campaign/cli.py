"""``jaxrl-campaign``: run or summarise a training campaign, each run a Ray task.

    jaxrl-campaign run campaigns/replication.toml [--minutes 120 | --until 17:45]
    jaxrl-campaign run campaigns/replication.toml --entry gate --seed 101
    jaxrl-campaign run campaigns/replication.toml --address head:6379   # on a Ray cluster
    jaxrl-campaign summarize campaigns/replication.toml [--entry NAME] [--seed N]

``run`` starts or continues every run (`driver`, `task`) on a local Ray (one run at a time by
default) or on a cluster (``--address``, as ``jaxrl-sweep``); running it again goes on where it
stopped. ``summarize`` rewrites the summaries of the runs that exist with the summariser the
campaign file names. The results page is the summariser's package's (for the quantgate
campaigns: ``quantgate-results page``, in quantgate-analysis).

Errors are one line on stderr with exit 2 (bad input, found before anything trains); ``run``
exits 3 when its deadline or a stop ended it first (run it again to go on), 1 when a run failed.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``jaxrl-campaign`` parser: ``run`` and ``summarize``."""
    parser = argparse.ArgumentParser(prog="jaxrl-campaign", description=__doc__.split("\n\n")[0],
                                     epilog="campaign files: campaigns/README.md")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start or continue every run of the campaign")
    run.add_argument("campaign", help="campaign file (TOML)")
    run.add_argument("--minutes", type=float, default=None,
                     help="stop the runs cleanly (on a checkpoint) after this many minutes")
    run.add_argument("--until", default=None, metavar="HH:MM",
                     help="stop at this local time (a time already past today means tomorrow, "
                          "and is said)")
    run.add_argument("--entry", action="append", default=None, metavar="NAME",
                     help="run only this entry (repeatable)")
    run.add_argument("--seed", action="append", type=int, default=None, metavar="N",
                     help="run only this seed (repeatable)")
    run.add_argument("--address", default=None,
                     help="join a running Ray cluster: 'auto' or HOST:PORT (the --port of `ray "
                          "start --head`); default: start a local Ray for this campaign")
    run.add_argument("--num-cpus", type=int, default=None,
                     help="CPUs of the local Ray (default: --cpus-per-run, one run at a time)")
    run.add_argument("--cpus-per-run", type=int, default=1,
                     help="CPUs Ray reserves for each run (default 1)")
    run.add_argument("--progress", choices=("bar", "lines", "off"), default="lines")
    summ = sub.add_parser("summarize", help="rewrite the summaries of the runs that exist")
    summ.add_argument("campaign")
    summ.add_argument("--entry", action="append", default=None, metavar="NAME",
                      help="rewrite only this entry's summaries (repeatable)")
    summ.add_argument("--seed", action="append", type=int, default=None, metavar="N",
                      help="rewrite only this seed's summaries (repeatable)")
    return parser


def _summarize(campaign, entries, seeds) -> int:
    from .rundirs import find_run_dir, find_staged_dir, staged_has_progress

    summarise = campaign.load_summariser()
    for name in entries or ():
        campaign.entry(name)  # ValueError naming the choices
    for entry, seed in campaign.schedule():
        if (entries and entry.name not in entries) or (seeds and seed not in seeds):
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jaxrl-campaign``; returns the exit code."""
    args = build_parser().parse_args(argv)
    # As jaxrl-train: an env factory's module may live in the working directory.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    from .spec import load_campaign

    try:
        campaign = load_campaign(args.campaign)
        if args.command == "summarize":
            return _summarize(campaign, args.entry, args.seed)
        for flag in ("num_cpus", "cpus_per_run"):
            value = getattr(args, flag)
            if value is not None and value < 1:
                raise ValueError(f"--{flag.replace('_', '-')}: expected a positive integer, got "
                                 f"{value}")
        from ..sweep.driver import check_address
        from .deadline import parse_deadline

        check_address(args.address)
        deadline = parse_deadline(args.minutes, args.until)
        from .driver import run_campaign

        return run_campaign(campaign, deadline=deadline, entries=args.entry, seeds=args.seed,
                            progress=args.progress, address=args.address, num_cpus=args.num_cpus,
                            cpus_per_run=args.cpus_per_run)
    except ValueError as e:  # SpecError (the address) is one too
        print(f"jaxrl-campaign: error: {e}", file=sys.stderr)
        return 2
    except ConnectionError as e:
        print(f"jaxrl-campaign: error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        from ..terminal.commands import missing_ray

        return missing_ray(e, "jaxrl-campaign", "campaign", sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # before the runs started (Ray starting): nothing to stop
        print("jaxrl-campaign: interrupted before any run started", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
