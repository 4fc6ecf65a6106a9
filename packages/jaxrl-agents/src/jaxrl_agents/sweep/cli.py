"""``jaxrl-sweep SPEC``: a sweep or seed campaign of jaxrl-train runs on Ray Tune.

Examples::

    jaxrl-sweep lr.toml                         # starts a local Ray, runs the trials, ranks them
    jaxrl-sweep lr.toml                         # again after an interruption: resumes
    jaxrl-sweep lr.toml --dry-run               # validate the SPEC and list the trials' space
    jaxrl-sweep lr.toml --address auto          # join the Ray cluster of this node
    jaxrl-sweep lr.toml --address head:6379     # join a cluster by its head's GCS address

The SPEC format is in docs/sweeps.md. Errors are one line on stderr: exit 2 for a bad SPEC or
arguments (found before Ray starts), exit 1 when the sweep could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``jaxrl-sweep`` argument parser: SPEC and the options that override its fields."""
    p = argparse.ArgumentParser(prog="jaxrl-sweep", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="SPEC format: packages/jaxrl-agents/docs/sweeps.md")
    p.add_argument("spec", metavar="SPEC", help="the sweep's TOML file")
    p.add_argument("--address", default=None,
                   help="join a running Ray cluster from one of its nodes: 'auto' or HOST:PORT "
                        "(the --port of `ray start --head`); Ray Client addresses (ray://) are "
                        "not supported (default: start a local Ray for this sweep)")
    p.add_argument("--out", default=None, help="parent of the sweep directory (SPEC's out)")
    p.add_argument("--name", default=None, help="sweep directory name (SPEC's name)")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of the local Ray (SPEC's num_cpus; default all)")
    p.add_argument("--retry-errored", action="store_true",
                   help="on resume, also run again the trials that failed for good")
    p.add_argument("--progress", choices=("auto", "bar", "lines", "off"), default="auto")
    p.add_argument("--dry-run", action="store_true",
                   help="validate the SPEC, print it normalised and the number of trials; "
                        "start nothing")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jaxrl-sweep``. Returns the process exit code."""
    args = build_parser().parse_args(argv)
    # As uvicorn does for its app: the env factory's module may live in the working directory
    # (the trial workers get the same path, driver._init_ray).
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    from ..terminal.commands import missing_ray
    from .spec import SpecError, load_spec

    try:
        spec = load_spec(args.spec, {"out": args.out, "name": args.name,
                                     "num_cpus": args.num_cpus})
        from .driver import check_address

        check_address(args.address)
        if args.dry_run:
            print(json.dumps(spec.to_json(), indent=2))
            print(f"{spec.n_trials()} trial(s), {spec.segment_updates()} update(s) per report; "
                  f"sweep directory {spec.sweep_dir}")
            return 0
        import ray  # noqa: F401 (here, so that a missing Ray is named before the sweep's directory is made)

        from .driver import run_sweep

        run_sweep(spec, spec_path=args.spec, address=args.address,
                  retry_errored=args.retry_errored,
                  progress=None if args.progress == "auto" else args.progress)
    except SpecError as e:
        print(f"jaxrl-sweep: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        return missing_ray(e, "jaxrl-sweep", "sweep", sys.argv[1:] if argv is None else argv)
    except OSError as e:
        print(f"jaxrl-sweep: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
