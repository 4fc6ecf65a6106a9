"""The paper's gate, as every quantgate analysis compares with it: one definition of its constants.

The paper (Grech et al., Quantum Sci. Technol. 11, 015030, 2026) stored the pulse its TRPO agent
played; quantgate-env ships it (`quantgate_env.paper_pulse`). Its best gate is at 17.25 ns (sample
345 of 0.05 ns), where the pulse propagated exactly in float64 gives J_T = 9.4857e-5. The aim of the
replication is a better gate no longer than that, so the summaries, the results page, the claims
check and the time-to-gate bench all read these two numbers from here.

jaxrl-agents' ``gate`` recipe carries the same bar as data of its own
(`jaxrl_agents.stages.recipes`): jaxrl-agents knows no physics and depends on nothing here.
"""

from __future__ import annotations

__all__ = ["PAPER_GATE_NS", "PAPER_JT"]

#: ns: the paper agent's gate time (its stored pulse's best J_T is at this time).
PAPER_GATE_NS = 17.25
#: The paper's stored pulse at `PAPER_GATE_NS`, re-propagated exactly in float64 (9.4857e-5),
#: to four digits: the threshold summaries record as ``9.486e-05``, so it must not change.
PAPER_JT = 9.486e-5
