r"""One stage of the gate recipe, alone, with a config change: the levers of bench/README's table.

    uv run --locked python bench/stage_from.py --stage polish SOURCE_RUN_DIR --seeds 200106 \\
        --out runs/levers --tag s106-seed200106 [--updates 489] [--set log_std_init=-3.5066]
    uv run --locked python bench/stage_from.py --stage explore --seeds 103 100103 \\
        --out runs/levers --tag s103-explore-g999 --updates 600 --set gamma=0.999

Opens the run the `gate` recipe's staged run would open for that stage (`stage_spec` of
`jaxrl_agents.stages.staged_run`, so the two cannot drift apart): the stage's config and budget,
every update evaluated, a checkpoint every 25 updates, preset ``gate``. A stage after the first
starts from SOURCE_RUN_DIR's best policy (the directory of the attempt member it follows) and keeps
its learned std; the first stage takes no source. ``--seeds`` with the recipe's own seeds repeats
the recipe's stage bit for bit (the polish's is the staged run's seed; explore's first attempt's are
the seed and seed + 100000); another seed gives a second sample from the same start (what a
population would add). ``--set KEY=VALUE`` (VALUE read as JSON, as ``--env-option``'s) changes one config field, e.g.
``log_std_init`` to restart the polish at another std or ``gamma`` for a longer horizon.
``--updates`` stops early (the run resumes with ``jaxrl-train --resume``). Compare steps, not
seconds, when two run at once.
"""

from __future__ import annotations

import argparse

from jaxrl_agents.common.envs import DEFAULT_ENV, parse_env_options
from jaxrl_agents.run.session import Session
from jaxrl_agents.run.spec import RunSpec
from jaxrl_agents.stages.recipes import GATE
from jaxrl_agents.stages.staged_run import stage_spec


def lever_spec(stage: str, source: str | None, seeds: tuple[int, ...], out: str, tag: str,
               changes: dict | None = None) -> RunSpec:
    """The RunSpec of the gate recipe's stage `stage` from `source`, with `changes` to its config."""
    names = [s.name for s in GATE.stages]
    if stage not in names:
        raise ValueError(f"--stage: expected one of {names}, got {stage!r}")
    index = names.index(stage)
    if (source is None) != (index == 0):
        raise ValueError(f"SOURCE_RUN_DIR: stage {stage!r} "
                         + ("takes none (it starts from scratch)" if index == 0 else
                            "starts from a stored policy: name the run directory"))
    return stage_spec(GATE, index, seeds=seeds, env=DEFAULT_ENV, env_options=GATE.env_options,
                      out=out, tag=tag, checkpoint_every=25, init_from=source, changes=changes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", nargs="?", default=None,
                   help="run directory whose best policy a later stage starts from")
    p.add_argument("--stage", default="polish", help="the recipe's stage (default: polish)")
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--updates", type=int, default=None, help="stop after this many updates")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config field (VALUE read as JSON, else a string)")
    args = p.parse_args()
    try:
        changes = parse_env_options(args.set, flag="--set")
        spec = lever_spec(args.stage, args.source, tuple(args.seeds), args.out, args.tag, changes)
    except ValueError as e:
        p.error(str(e))
    with Session.open(spec, progress="lines") as session:
        session.advance(args.updates)


if __name__ == "__main__":
    main()
