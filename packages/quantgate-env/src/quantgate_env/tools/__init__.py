"""Tools: fixed pulses, GRAPE refinement, robustness maps and the two console scripts.

Modules: files (atomic output files), pulses (the paper's pulse files, a fixed pulse's plan and
rollout), grape, robustness, robustness_cli (``quantgate-robustness``), refine_cli
(``quantgate-refine``). May import mdp, physics and the ground floor, never adapters.
"""
