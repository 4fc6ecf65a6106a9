"""The console: the commands a person types and what they print.

``jaxrl-train`` (cli.py: every algorithm; flags.py gives each config field its ``--field`` flag,
presets.py the named starting points), ``jaxrl-plot`` (plot.py), the block a run ends with
(run_summary.py), and the run ``jaxrl-train`` makes of IPPO on a PettingZoo ParallelEnv stepped
from Python, which has no session (parallel_env_run.py: `IPPO.train` and its files).

The run itself (session, loop, run files, checkpoints, resume) is `jaxrl_agents.run`. The live
progress line and the commands a run suggests are `jaxrl_agents.terminal`, at the bottom of the
package, so the run's loop and install hints print without importing this layer above them
(commands.py here re-exports terminal's under its earlier name).
"""
