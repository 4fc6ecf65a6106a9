"""The commands a run suggests: `jaxrl_agents.terminal.commands`, under the name it had before.

They moved to ``terminal/`` so that `run/` and `common/` print install hints without importing
the console (a layer above them); this name stays for code written against it.
"""

from ..terminal.commands import *  # noqa: F403
from ..terminal.commands import __all__  # noqa: F401
