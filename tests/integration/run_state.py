"""How far a campaign's run got, read as the campaign reads it (`jaxrl_agents.run.rundir.RunDir`)."""

from jaxrl_agents.campaign.rundirs import read_run


def run_status(run_dir) -> tuple[str, int, int]:
    """(state, steps done, steps of the budget) of the run in `run_dir` (`RunDir.status`)."""
    status = read_run(str(run_dir)).status()
    return status.state, status.steps, status.budget
