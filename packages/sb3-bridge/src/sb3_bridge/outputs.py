"""The overwrite policy of every file sb3-bridge writes.

An existing file is kept unless the caller asks for it to be replaced (``overwrite=True``,
``--force`` on the command line). The policy is defined once, on the workspace's ground floor
(``jaxrl_agents.run.fileio.refuse_existing``, which ``jaxrl-plot`` shares); this module names it
for sb3-bridge's writers.

The writes themselves go through ``jaxrl_agents.run.fileio.atomic_write`` (temporary file in the same
directory, then ``os.replace``), so a replaced file is whole before or after, never half written.
"""

from __future__ import annotations

from jaxrl_agents.run.fileio import check_writable, refuse_existing

__all__ = ["refuse_existing", "check_writable"]
