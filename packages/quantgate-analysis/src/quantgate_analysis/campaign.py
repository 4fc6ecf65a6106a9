"""The campaign summariser: one seed's run -> its committed summary (JSON) and best pulses (CSV).

A campaign file names it as ``summariser = "quantgate_analysis.campaign:summarise"``; the campaign
runner imports it by that name and calls it after each run stops, so the runner itself never
imports physics. It is called as ``summarise(campaign, entry, seed, run_dir, code_version)`` with
the runner's parsed campaign and entry; of them it reads:

- ``campaign.summary_path(entry, seed)``: where the seed's summary goes (its pulses go beside it);
- ``campaign.summaries`` (its own changes do not make the code version dirty), ``campaign.name``,
  ``campaign.frontier_ns`` (the frontier's gate times, ns);
- ``entry.name``, ``entry.description``, ``entry.robustness`` (map the policy when the run has
  finished) and ``entry.staged`` (`run_dir` is a staged run's top directory).

A pure-RL pulse is exactly what the deterministic policy played in an evaluation episode, cut at
its gate time: no GRAPE and no edits. Its CSV is in the paper's format (``tlist``, ``amplist``;
``amplist[0]`` is not applied), so any propagator reads it.
"""

from __future__ import annotations

import json
import os
import subprocess

from .paper import PAPER_GATE_NS
from .summary import summarize_run, summarize_staged

__all__ = ["summarise", "summary_paths", "code_version"]


def summary_paths(campaign, entry, seed: int) -> dict[str, str]:
    """Where the summary of (`entry`, `seed`) and its pulses live in the campaign's committed folder.

    Returns:
        {"folder", "json" (``campaign.summary_path``), "best_csv", "short_csv"}: paths.
    """
    path = campaign.summary_path(entry, seed)
    folder = os.path.dirname(path)
    return {"folder": folder, "json": path,
            "best_csv": os.path.join(folder, f"s{seed}_best.csv"),
            "short_csv": os.path.join(folder, f"s{seed}_best_within_{PAPER_GATE_NS:g}ns.csv")}


def code_version(cwd: str | None = None, ignore: tuple[str, ...] = ()) -> str:
    """``git describe --always --abbrev=10`` at `cwd`, ``-dirty`` if a tracked file changed.

    ``unknown`` outside git. Changes under the paths of `ignore` do not count: a campaign rewrites its own tracked summaries
    while it runs, which says nothing of the code that trained.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        top = git("rev-parse", "--show-toplevel")
        skip = [f":(top,exclude){os.path.relpath(os.path.abspath(p), top)}" for p in ignore]
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", *skip)
        return git("describe", "--always", "--abbrev=10") + ("-dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def summarise(campaign, entry, seed: int, run_dir: str, code_version: str | None = None) -> str:
    """Write (replace) the committed summary and pulse CSVs of (`entry`, `seed`); returns the JSON path.

    The GRAPE frontier (and a robustness map) is computed once the run has finished. The summary
    keeps every code version that contributed to the run (one per session that advanced it).

    Args:
        campaign: the runner's parsed campaign file (the attributes the module docstring lists).
        entry: its entry of `seed`.
        seed: the campaign seed (the file is ``s<seed>.json``; a restarted run's own seed differs).
        run_dir: the run directory, or a staged entry's staged run (its top directory).
        code_version: the version to record (default: `code_version` of this checkout, ignoring
            the campaign's summaries).

    Returns:
        The path of the summary JSON.
    """
    from jaxrl_agents.common.fileio import atomic_write_json
    from quantgate_env import save_pulse_csv

    paths = summary_paths(campaign, entry, seed)
    os.makedirs(paths["folder"], exist_ok=True)
    if entry.staged:
        from jaxrl_agents.stages.staged_run import read_staged_run

        finished = bool(read_staged_run(run_dir)["finished"])
        summary, gates = summarize_staged(run_dir, refine=finished,
                                          robustness=entry.robustness and finished,
                                          gate_times=campaign.frontier_ns)
    else:
        from .rundir import run_status

        status = run_status(run_dir)
        finished = status[0] == "finished"
        summary, gates = summarize_run(run_dir, refine=finished,
                                       robustness=entry.robustness and finished,
                                       gate_times=campaign.frontier_ns, status=status)
    version = code_version or _this_code_version(campaign)
    previous = []
    if os.path.isfile(paths["json"]):
        with open(paths["json"]) as handle:
            old = json.load(handle)
        if old.get("run") == summary["run"]:
            previous = old.get("code_versions", [])
    summary["code_versions"] = previous + ([version] if version not in previous else [])
    summary.update(campaign=campaign.name, entry=entry.name, description=entry.description)
    for name, key in (("best", "best_csv"), ("short", "short_csv")):
        if name not in gates:
            continue
        gate = gates[name]
        if name == "short" and "best" in gates and gates["best"]["step"] == gate["step"] \
                and gates["best"]["n_samples"] == gate["n_samples"]:
            summary[name]["pulse_csv"] = summary["best"]["pulse_csv"]  # the same gate: one file
            if os.path.isfile(paths[key]):
                os.remove(paths[key])  # an earlier summary's, superseded
            continue
        save_pulse_csv(paths[key], gate["amps"], gate["dt_ns"], overwrite=True)  # regenerated
        summary[name]["pulse_csv"] = os.path.basename(paths[key])
    # Strict JSON: atomic_write_json writes every non-finite float as null (`fileio.json_ready`).
    atomic_write_json(paths["json"], summary)
    return paths["json"]


def _this_code_version(campaign) -> str:
    return code_version(os.path.dirname(os.path.abspath(__file__)), ignore=(campaign.summaries,))
