"""The overwrite policy of every file sb3-bridge writes.

An existing file is kept unless the caller asks for it to be replaced (``overwrite=True``,
``--force`` on the command line). The policy is defined once, on the workspace's ground floor
(``jaxrl_agents.common.fileio.refuse_existing``, which ``jaxrl-plot`` shares); these names delegate to
it when called, so that ``import sb3_bridge`` still imports neither jax nor torch.

The writes themselves go through ``jaxrl_agents.common.fileio.atomic_write`` (temporary file in the same
directory, then ``os.replace``), so a replaced file is whole before or after, never half written.
"""

from __future__ import annotations

__all__ = ["refuse_existing", "check_writable"]


def refuse_existing(paths, *, overwrite: bool) -> None:
    """``jaxrl_agents.common.fileio.refuse_existing``: FileExistsError unless every path is free."""
    from jaxrl_agents.common.fileio import refuse_existing as refuse

    refuse(paths, overwrite=overwrite)


def check_writable(path) -> None:
    """``jaxrl_agents.common.fileio.check_writable``: OSError naming `path` if it cannot be created."""
    from jaxrl_agents.common.fileio import check_writable as check

    check(path)
