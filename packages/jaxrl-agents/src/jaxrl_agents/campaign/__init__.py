"""jaxrl-campaign: declarative campaigns of jaxrl-train runs, each run a Ray task (optional extra).

A campaign file (``campaigns/<name>.toml``, `spec`) lists entries: an algorithm, a preset and its
overrides, environment options, seeds and a step budget, and optionally the entry whose best
policy each seed fine-tunes from (``init_from``, a dependency between tasks) and an early test
that restarts a seed (``restart``); or a staged recipe (``jaxrl-train --preset gate``), each seed
one staged run. ``jaxrl-campaign run FILE`` starts every run that does not exist yet and continues
every interrupted one, each as a Ray task on a local Ray or a cluster (``--address``); after each
run stops, the summariser the campaign file names (``summariser = "module:function"``, imported
by that name, so this package knows no physics) writes its summary into the campaign's committed
folder. Running the command again goes on where it stopped.

Install with ``pip install 'jaxrl-agents[campaign]'``. Importing this package imports neither Ray
nor the trainer: campaign files validate without them.

Modules: `spec` (the campaign file; each entry's `RunSpec`), `preflight` (every entry's run
settings, checked before anything trains), `deadline` (``--minutes``, ``--until``), `rundirs`
(which run a seed's folder holds; `RunDir` reads it), `committed` (a committed summary's status),
`task` (one (entry, seed): start, resume, skip, summarise), `child` (jaxrl-train as a task's
child process), `executors` (Ray tasks, or inline for tests), `driver` (submission, init_from dependencies, the restart rule, the deadline), `cli`.
"""

from .spec import Campaign, Entry, Restart, load_campaign

__all__ = ["Campaign", "Entry", "Restart", "load_campaign", "run_campaign"]


def run_campaign(*args, **kwargs):
    """`driver.run_campaign` (imported on use: it starts Ray)."""
    from .driver import run_campaign as _run

    return _run(*args, **kwargs)
