"""``jaxrl-train --algo ippo|ippo_lag``: IPPO / IPPO-Lagrangian on a PettingZoo ParallelEnv (or a
functional multi-agent core) named ``module:factory``.

Examples::

    jaxrl-train --algo ippo --env quantgate_env.pettingzoo:parallel_env \\
        --env-option action_mode=discrete --timesteps 20000
    jaxrl-train --algo ippo_lag --env my_envs:make --cost-limit 5 --progress off

Every field of the config is a flag (``--n-steps``, ``--lr``, ``--hidden 64 64``, ``--cost-limit``,
...). The run directory ``<out>/<algo>_<YYYYmmdd-HHMMSS>_s<seed>[_<tag>]`` gets ``config.json``,
``history.json`` (one entry per rollout/update cycle) and ``policies/<agent>/`` (one jaxrl_agents
Policy per agent). The progress bar advances at most every 10 % of the budget (a bar that redraws
every rollout floods logs and notebooks); ``--progress off`` removes it. The run directory is locked
while the run uses it, as jaxrl-train's PPO/TRPO runs are.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

from ..common.config import ConfigHelpFormatter, add_config_flags
from ..common.envs import load_env, parse_env_options
from ..ippo.config import IPPOConfig, IPPOLagrangianConfig

__all__ = ["main", "build_parser", "MilestoneBar", "DEFAULT_MARL_ENV"]

DEFAULT_MARL_ENV = "quantgate_env.pettingzoo:parallel_env"
DEMO_TIMESTEPS = 20_000
_CONFIGS = {"ippo": IPPOConfig, "ippo_lag": IPPOLagrangianConfig}


class MilestoneBar:
    """A tqdm bar fed by ``progress_callback(completed, total)`` that moves only at 10 % milestones.

    Args:
        total: the budget in environment steps.
        enabled: False gives a no-op callback (``--progress off``).
        step_fraction: milestone size (0.1 = every 10 %).
    """

    def __init__(self, total: int, enabled: bool = True, step_fraction: float = 0.1):
        self.total, self.step_fraction, self.milestone = total, step_fraction, 0
        self.updates = 0  # bar advances so far (tests read it)
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            # A huge maxinterval stops tqdm's monitor thread from redrawing an unchanged bar.
            self._bar = tqdm(total=total, unit="step", unit_scale=True, maxinterval=1e9,
                             mininterval=0, dynamic_ncols=True)

    def __call__(self, completed: int, total: int) -> None:
        n_milestones = int(round(1 / self.step_fraction))
        milestone = min(n_milestones, int(completed * n_milestones // max(total, 1)))
        if milestone > self.milestone:
            self.milestone = milestone
            self.updates += 1
            if self._bar is not None:
                self._bar.update(completed - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def build_parser(algo: str) -> argparse.ArgumentParser:
    """Parser of the run options plus every field of `algo`'s config as a flag."""
    cfg_cls = _CONFIGS[algo]
    p = argparse.ArgumentParser(prog="jaxrl-train", description=__doc__.split("\n\n")[0],
                                formatter_class=ConfigHelpFormatter)
    run = p.add_argument_group("run")
    run.add_argument("--algo", choices=sorted(_CONFIGS), default=algo, help="algorithm")
    run.add_argument("--env", default=DEFAULT_MARL_ENV,
                     help="factory of a PettingZoo ParallelEnv or functional multi-agent core, "
                          "as module:factory")
    run.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                     help="keyword option of the env factory (repeatable; VALUE parsed as JSON)")
    run.add_argument("--seed", type=int, default=0, help="random seed")
    run.add_argument("--timesteps", "--total-steps", dest="timesteps", type=int,
                     default=DEMO_TIMESTEPS, help="environment steps to train for")
    run.add_argument("--out", default="runs", help="parent directory of run directories")
    run.add_argument("--tag", default="", help="suffix of the run directory name")
    run.add_argument("--progress", choices=("auto", "bar", "off"), default="auto",
                     help="progress bar at 10%% milestones (auto: only on a terminal)")
    fields = p.add_argument_group(f"{algo} config ({cfg_cls.__name__})")
    add_config_flags(fields, cfg_cls)
    return p


def _safe_name(agent) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(agent))


def main(argv: list[str] | None = None) -> int:
    """Run IPPO / IPPO-Lagrangian from the command line; returns the exit code.

    Exit 2 for bad input or a run directory in use, 1 when a file could not be written; the error
    is one line on stderr. Every setting is checked before the run directory is created; if the
    run then fails, its directory (holding only config.json) is removed again.
    """
    from .fileio import atomic_write_json, describe_os_error, lock_directory
    from ..ippo import IPPO, IPPO_Lagrangian, check_budget
    from .run_files import make_run_dirs, remove_new_run_dirs

    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default="ippo")
    algo = pre.parse_known_args(argv)[0].algo
    args = build_parser(algo).parse_args(argv)
    cfg = {f.name: getattr(args, f"cfg_{f.name}") for f in dataclasses.fields(_CONFIGS[algo])
           if getattr(args, f"cfg_{f.name}") is not None}
    enabled = args.progress == "bar" or (args.progress == "auto" and sys.stderr.isatty())
    try:
        trainer = (IPPO_Lagrangian if algo == "ippo_lag" else IPPO)(cfg, seed=args.seed)
        timesteps = check_budget(args.timesteps)
        options = parse_env_options(args.env_option)
        env = load_env(args.env, options, check=False)
        (run_dir,) = make_run_dirs(args.out, algo, (args.seed,), args.tag)
        finished = False
        with lock_directory(run_dir):
            try:
                atomic_write_json(os.path.join(run_dir, "config.json"), {
                    "algo": algo, "env": args.env, "env_options": options, "seed": args.seed,
                    "timesteps": timesteps, "algo_config": trainer.cfg.to_dict(),
                    "argv": ["jaxrl-train", *argv]})
                bar = MilestoneBar(timesteps, enabled)
                try:
                    result = trainer.train(env, timesteps, progress_callback=bar)
                finally:
                    bar.close()
                finished = True
            finally:
                if not finished:  # nothing but config.json was written: leave no orphan
                    remove_new_run_dirs([run_dir])
            atomic_write_json(os.path.join(run_dir, "history.json"), result.history)
            for agent, policy in result.policies.items():
                policy.save(os.path.join(run_dir, "policies", _safe_name(agent)))
    except ValueError as e:
        print(f"jaxrl-train: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"jaxrl-train: error: {describe_os_error(e)} (every file written before is "
              f"intact)", file=sys.stderr)
        return 1
    last = result.history[-1]["agents"]
    summary = "  ".join(f"{a}: episode_return={r.get('episode_return', float('nan')):.3g}"
                        for a, r in last.items())
    print(f"run directory: {run_dir}\nlast update: {summary}")
    return 0
