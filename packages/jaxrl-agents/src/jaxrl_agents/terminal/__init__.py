"""What a run shows a person: the live progress line and the commands it suggests.

The bottom of the package beside `common/`: these modules import nothing of jaxrl_agents (the
standard library only), so every layer may print with them: the run's loop draws its live line
(progress.py: `ProgressReporter`, `format_duration`), and install hints, the end-of-run block and
``--resume`` lines name commands spelled for uv or pip (commands.py: `suggest`, `install_extra`).
The commands a person types and the blocks they print are `jaxrl_agents.console`.
"""
