"""``python -m jaxrl_agents.run.cli``: the ``jaxrl-train`` command under its path before issue 35.

The command is `jaxrl_agents.console.cli`. Command lines written before it moved (a campaign runner
started earlier, scripts, shell histories) still run it through this module; new ones name
``jaxrl-train`` or ``python -m jaxrl_agents.console.cli``.
"""

import sys

from ..console.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
