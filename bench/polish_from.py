r"""One polish of the gate recipe from a stored policy: the levers of bench/README's table.

    uv run --locked python bench/polish_from.py SOURCE_RUN_DIR --seeds 200106 --out runs/levers \\
        --tag s106-seed200106 [--updates 489] [--set log_std_init=-3.5066]

Builds the run the `gate` recipe's polish stage opens (`jaxrl_agents.stages.staged_run`): TRPO
with the stage's config, the source's learned std kept (``log_std_init`` 0), every update
evaluated, a checkpoint every 25 updates, preset ``gate``, starting from SOURCE_RUN_DIR's best
policy (an explore attempt's member directory). ``--seeds`` with the recipe's own polish seed
repeats the recipe's polish; another seed gives a second sample from the same start (what a
population of two in the polish would add); ``--set KEY=VALUE`` (a JSON value) changes one config
field, e.g. ``log_std_init`` to restart the polish at another std. ``--updates`` stops early (the
run resumes with ``jaxrl-train --resume``). Compare steps, not seconds, when two run at once.
"""

from __future__ import annotations

import argparse
import json

from jaxrl_agents.common.envs import DEFAULT_ENV
from jaxrl_agents.run.session import Session
from jaxrl_agents.run.spec import RunSpec
from jaxrl_agents.stages.recipes import GATE
from jaxrl_agents.stages.staged_run import stage_spec


def polish_spec(source: str, seeds: tuple[int, ...], out: str, tag: str,
                changes: dict | None = None) -> RunSpec:
    """The RunSpec of the gate recipe's first polish from `source`, with `changes` to its config."""
    return stage_spec(GATE, 1, seeds=seeds, env=DEFAULT_ENV, env_options=GATE.env_options,
                      out=out, tag=tag, checkpoint_every=25, init_from=source, changes=changes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="run directory whose best policy the polish starts from")
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--updates", type=int, default=None, help="stop after this many updates")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config field (JSON value)")
    args = p.parse_args()
    changes = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--set: expected KEY=VALUE, got {item!r}")
        changes[key] = json.loads(value)
    spec = polish_spec(args.source, tuple(args.seeds), args.out, args.tag, changes)
    with Session.open(spec, progress="lines") as session:
        session.advance(args.updates)


if __name__ == "__main__":
    main()
