"""A tiny campaign with one committed summary: the input of the page tests (no run directory).

Written with the standard library alone, so a fresh virtual environment can be given it too.
"""

import json
import pathlib

CAMPAIGN = """
name = "tiny"
runs = "runs"
summaries = "summaries"
seeds = [1, 2]
summariser = "quantgate_analysis.campaign:summarise"

[[entry]]
name = "ppo"
description = "a made-up PPO entry"
algo = "ppo"
preset = "fast"
total_steps = 2048

[[entry]]
name = "ppo-ft"
description = "its made-up fine-tune"
algo = "trpo"
preset = "fast"
total_steps = 1024
init_from = "ppo"
"""


def _summary(seed: int, jt: float, init_from=None) -> dict:
    gate = {"JT": jt, "JT_repropagated": jt, "t_ns": 16.5, "one_minus_U": 2e-3, "concurrence": 1.0,
            "step": 1024, "n_samples": 330, "dt_ns": 0.05, "pulse_csv": f"s{seed}_best.csv"}
    return {
        "format": "quantgate.campaign_summary", "format_version": 1, "run": f"ppo_s{seed}",
        "status": "finished", "algo": "ppo", "seed": seed, "preset": "fast", "steps_done": 2048,
        "budget": 2048, "wall_s": 20.0, "steps_per_s": 102.4,
        "command": f"jaxrl-train --preset fast --seed {seed}",
        "thresholds": {"1e-02": {"steps": 512, "wall_s": 5.0}, "1e-03": {"steps": 1024, "wall_s": 10.0},
                       "1e-04": None, "9.486e-05": None},
        "curve": {"step": [512, 1024, 2048], "best_JT": [5e-3, jt, jt]},
        "diagnostics": {"approx_kl": 0.01, "std": 0.2}, "init_from": init_from,
        "evaluations": 4, "best": gate, "short": gate,
        "frontier": {"gate_time_ns": [10.0, 15.0, 20.0], "rl_JT": [0.3, 2e-2, jt],
                     "rl_t_ns": [10.0, 15.0, 16.5], "grape_JT": [0.1, 1e-5, 1e-6],
                     "grape_iterations": 200},
        "code_versions": ["v-test"], "campaign": "tiny", "entry": "ppo", "description": "",
    }


def write_tiny_campaign(root) -> pathlib.Path:
    """Write tiny.toml and its summaries (two seeds of ``ppo``, one fine-tune) under `root`.

    Returns:
        The campaign file's path (relative paths in it are relative to `root`).
    """
    root = pathlib.Path(root)
    (root / "tiny.toml").write_text(CAMPAIGN)
    for entry, seed, jt, init_from in (("ppo", 1, 1.5e-3, None), ("ppo", 2, 8e-4, None),
                                       ("ppo-ft", 1, 4e-4, {"run": "ppo_s1", "step": 1024,
                                                            "wall_s": 10.0, "chain": ["ppo_s1"]})):
        folder = root / "summaries" / entry
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"s{seed}.json").write_text(json.dumps(_summary(seed, jt, init_from), indent=2))
    return root / "tiny.toml"
