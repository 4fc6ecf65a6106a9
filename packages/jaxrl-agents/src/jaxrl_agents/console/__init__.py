"""The console: the commands a person types and what they print.

``jaxrl-train`` (cli.py: every algorithm; flags.py gives each config field its ``--field`` flag,
presets.py the named starting points), ``jaxrl-plot`` (plot.py), the block a run ends with
(run_summary.py) and the commands it suggests, spelled for uv or pip (commands.py), the live
progress line (progress.py), and the run ``jaxrl-train`` makes of IPPO on a PettingZoo ParallelEnv
stepped from Python, which has no session (parallel_env_run.py: `IPPO.train` and its files).

The run itself (session, loop, run files, checkpoints, resume) is `jaxrl_agents.run`. Two modules
here import nothing of the package, so every part of it may print with them: progress.py (the
run's loop draws its live line with it) and commands.py (install hints name the command to run).
"""
