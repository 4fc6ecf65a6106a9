"""A results page of any training run directories (tables and figures), read from their files.

    quantgate-results runs RUN_DIR [RUN_DIR ...] [--out results.md] [--robustness] [--refine N]

The project's own results page, docs/results.md, is built from committed campaign summaries
instead (`page`, ``quantgate-results page``).

Nothing in the page is typed by hand: every figure comes from the run directories (config.json,
progress.csv, evals.npz, best_policy/) and from the paper's stored pulse (`quantgate_env.paper_pulse`);
the paper's and the reference's figures are the cited constants in `REFERENCE`. Runs that are still
going are summarised as far as they got (the page says how far).

Per run: best evaluation J_T and its gate time, 1 - U at best, the first perfect entangler of the
best episode, steps and wall-clock to J_T < 1e-2, 1e-3, 1e-4, and, with ``robustness``, the best
policy's J_T over an 11 x 11 grid of qubit detunings in the recool range (+-5.7 MHz).
"""

from __future__ import annotations

import csv
import math
import os
import statistics

import numpy as np

from .gates import best_index
from .paper import PAPER_GATE_NS, PAPER_JT
from .rundir import load_evals, to_float
from .rundir import run_dir as rundir_of

__all__ = ["read_run", "write_runs_page", "expand_sweeps"]

DECADES = (1e-2, 1e-3, 1e-4)  # the J_T the table counts steps and wall-clock to
# Per-update diagnostics summarised over the second half of training (medians), when present.
DIAGNOSTICS = ("approx_kl", "clip_frac", "kl", "grad_steps", "std")

# Cited figures (shared/spec/reference-results.md): the paper's TRPO agent and the JAX reference.
REFERENCE = [
    ("paper (v1 TRPO, SB3)", "9.5e-5", "17.25", "12.6M", "~9 h", "1.2e-4 to 1.3e-4"),
    ("JAX reference TRPO s123", "9.8e-4", "46.8", "19.9M", "115 min / 20M (16 threads)", "1.3e-3"),
    ("JAX reference PPO best seed (s3)", "1.1e-4", "-", "16.8M", "~1 h / 20M (16 threads)", "1.4e-4"),
    ("JAX reference PPO median of 4 seeds", "4.3e-4", "-", "-", "-", "5.7e-4"),
]


def read_run(run_dir: str) -> dict:
    """Summary of one run directory (works on unfinished runs)."""
    run = rundir_of(run_dir)
    config, rows = run.record, run.rows()
    # Field names come from the run: config.json's "evaluation" (the env's description, written
    # by jaxrl-train) names the score; the gate env's other fields are eval_<quantgate field>.
    score = run.score_column
    evals = [r for r in rows if r.get(score) not in (None, "")]
    summary = {
        "run": os.path.basename(os.path.normpath(run_dir)),
        "dir": run_dir,
        "algo": config["algo"],
        "seed": config["seed"],
        "tag": config.get("tag", ""),
        "argv": " ".join(config.get("argv", [])),
        "total_steps": config["algo_config"]["total_steps"],
        "steps_done": int(to_float(rows[-1]["step"])) if rows else 0,
        "wall_done": to_float(rows[-1]["wall"]) if rows else math.nan,
        "env_options": config.get("env_options", {}),
        "extended_to": [e["to_total_steps"] for e in config.get("extensions", [])],
    }
    if not evals:
        return summary
    jt = np.array([to_float(r[score]) for r in evals])
    best = int(np.nanargmin(jt))
    summary.update(
        best_JT=jt[best],
        best_t=to_float(evals[best].get("eval_t_JT_min")),
        best_step=int(to_float(evals[best]["step"])),
        best_wall=to_float(evals[best]["wall"]),
        best_1mU=to_float(evals[best].get("eval_1mU_at_best")),
        best_first_PE=to_float(evals[best].get("eval_t_first_PE")),
    )
    for threshold in DECADES:
        hit = run.to_threshold(threshold)
        summary[f"steps_{threshold:.0e}"] = hit.step if hit else None
        summary[f"wall_{threshold:.0e}"] = hit.wall if hit else None
    summary["curve"] = (np.array([to_float(r["step"]) for r in evals]), jt)
    # The best evaluation is a minimum over hundreds of checkpoints; the median of the last quarter
    # says how good the policy the run ends with typically is.
    summary["late_JT"] = float(np.nanmedian(jt[len(jt) - max(1, len(jt) // 4):]))
    summary.update(_best_within(run_dir, PAPER_GATE_NS))
    late = rows[len(rows) // 2:]
    summary["diagnostics"] = {k: statistics.median(to_float(r[k]) for r in late)
                              for k in DIAGNOSTICS if k in rows[0]}
    return summary


def _best_within(run_dir: str, t_max: float) -> dict:
    """Best J_T over all evaluation episodes at gate times t <= t_max (ns), from evals.npz."""
    evals = load_evals(run_dir, ("step", "JT", "t", "alive"))
    if evals is None:
        return {}
    at = best_index(evals, t_max)
    if at is None:
        return {}
    e, k = at
    return {"short_JT": float(evals["JT"][e, k]), "short_t": float(evals["t"][e, k]),
            "short_step": int(evals["step"][e]), "short_index": (e, k)}


def _refine_short_gate(summary: dict, n_iter: int) -> dict | None:
    """GRAPE-polish the pulse of the best gate within the paper's gate time (nominal device).

    The pulse is the evaluation episode's amplitudes up to that step (3 samples a step), exactly
    what the deterministic policy played; the refinement keeps its length (the gate time).
    """
    from quantgate_env.tools.grape import refine_pulse

    if "short_index" not in summary or summary["env_options"].get("objective", "pe") != "pe":
        return None
    e, k = summary["short_index"]
    amps = np.asarray(load_evals(summary["dir"])["amps"][e, :k + 1], dtype=np.float64).reshape(-1)
    dt = summary["short_t"] / amps.size
    result = refine_pulse(amps, dt=dt, n_iter=n_iter)
    return {"gate_time_ns": summary["short_t"], "JT_initial": result.JT_initial,
            "JT_refined": result.JT_best, "n_iter": n_iter}


def _fmt(x, kind="g") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if kind == "steps":
        return f"{x / 1e6:.2f}M"
    if kind == "wall":
        return f"{x / 60:.1f} min"
    if kind == "t":
        return f"{x:.2f}"
    return f"{x:.2e}"


def _robustness(summary: dict, figures: str) -> dict:
    """Best policy of a run over the recool detuning grid (11 x 11), with a PNG heat map.

    Mapped twice: in the run's own MDP (in terminate mode, leaving the amplitude bound ends the
    episode: J_T = 1), and with amplitudes clipped at the bound, as saturating hardware would.
    """
    from jaxrl_agents import load_policy
    from quantgate_env import make
    from quantgate_env.tools.robustness import policy_robustness

    policy = load_policy(summary["dir"])
    act = lambda obs: policy.act(obs, deterministic=True)  # noqa: E731
    own = policy_robustness(act, env=make(**summary["env_options"]), half_width_mhz="recool", n=11)
    clipped = policy_robustness(act, env=make(**{**summary["env_options"], "oob_mode": "clip"}),
                                half_width_mhz="recool", n=11)
    path = os.path.join(figures, f"robustness_{summary['run']}.png")
    own.save_png(path, title=f"{summary['run']}: best policy, recool range", overwrite=True)  # regenerated
    return dict(own.summary(), png=path, clipped=clipped.summary())


def _learning_curves(groups: dict, figures: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    # One colour per group (configuration), one line style per seed within it.
    colours = plt.get_cmap("tab10").colors
    styles = ("-", "--", ":", "-.")
    for g, (name, runs) in enumerate(groups.items()):
        for i, run in enumerate(r for r in runs if "curve" in r):
            steps, jt = run["curve"]
            ax.plot(steps / 1e6, np.minimum.accumulate(jt), color=colours[g % len(colours)],
                    ls=styles[i % len(styles)], label=f"{name} s{run['seed']}")
    ax.axhline(PAPER_JT, color="k", ls="--", lw=0.8, label=f"paper {PAPER_JT:.3g}")
    ax.set_yscale("log")
    ax.set_xlabel("environment steps (millions)")
    ax.set_ylabel("best evaluation J_T so far")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(figures, "learning_curves.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_runs_page(runs: list[dict], out: str, figures: str, robustness: bool, refine_iters: int = 0) -> str:
    """Write the results page of `runs` (`read_run` dicts) to `out`, its figures to `figures`.

    Args:
        runs: the runs, grouped on the page by algorithm and tag.
        out: the markdown file.
        figures: the folder of the learning-curve, pulse and map figures.
        robustness: also map each best policy over the recool grid.
        refine_iters: GRAPE iterations polishing each run's best gate within 17.25 ns (0: none).

    Returns:
        `out`.
    """
    from jaxrl_agents.console.plot import plot_run
    from quantgate_env import paper_pulse
    from quantgate_env.tools.grape import refine_pulse
    from quantgate_env.tools.robustness import pulse_robustness

    os.makedirs(figures, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    for run in runs:
        groups.setdefault(f"{run['algo']} {run['tag']}".strip(), []).append(run)
    rel = lambda p: os.path.relpath(p, os.path.dirname(os.path.abspath(out)))  # noqa: E731

    lines = ["# Results", "", "Generated by `quantgate-results runs` from the run directories listed below; "
             "do not edit by hand.", ""]
    lines += ["## Training runs on the paper's environment", "",
              f"| run | steps done | best J_T | at (ns) | 1 - U there | first PE (ns) | best J_T at <= {PAPER_GATE_NS} ns (at) | last-quarter median J_T | to 1e-2 | to 1e-3 | to 1e-4 | wall to 1e-2 / 1e-3 / 1e-4 |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in runs:
        walls = " / ".join(_fmt(run.get(f"wall_{t:.0e}"), "wall") for t in DECADES)
        lines.append(
            f"| {run['run']} | {_fmt(run['steps_done'], 'steps')} of {_fmt(run['total_steps'], 'steps')} | "
            f"{_fmt(run.get('best_JT'))} | {_fmt(run.get('best_t'), 't')} | {_fmt(run.get('best_1mU'))} | "
            f"{_fmt(run.get('best_first_PE'), 't')} | "
            f"{_fmt(run.get('short_JT'))} ({_fmt(run.get('short_t'), 't')}) | {_fmt(run.get('late_JT'))} | "
            + " | ".join(_fmt(run.get(f"steps_{t:.0e}"), "steps") for t in DECADES) + f" | {walls} |")
    lines += ["", "Per group (median over seeds of the best J_T):", ""]
    for name, group in groups.items():
        best = [r["best_JT"] for r in group if "best_JT" in r]
        if best:
            lines.append(f"- {name}: {len(best)} seed(s), median best J_T {statistics.median(best):.2e}, "
                         f"best {min(best):.2e}")
    lines += ["", "Update diagnostics (medians over the second half of each run; PPO's approx_kl and "
              "clip_frac, TRPO's accepted KL, gradient steps applied per PPO update, policy std):", "",
              "| run | " + " | ".join(DIAGNOSTICS) + " |", "|" + " --- |" * (len(DIAGNOSTICS) + 1)]
    for run in runs:
        diag = run.get("diagnostics", {})
        lines.append(f"| {run['run']} | " + " | ".join(
            f"{diag[k]:.3g}" if k in diag else "-" for k in DIAGNOSTICS) + " |")
    lines += ["", "For comparison (cited, not measured here):", "",
              "| agent | best J_T | at (ns) | steps to best | wall | 1 - U at best |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(row)} |" for row in REFERENCE]

    lines += ["", "## Figures", "", f"![learning curves]({rel(_learning_curves(groups, figures))})", ""]
    for name, group in groups.items():
        done = [r for r in group if "best_JT" in r]
        if not done:
            continue
        top = min(done, key=lambda r: r["best_JT"])
        target = os.path.join(figures, top["run"])
        # The figures directory belongs to the generated page: regenerating it replaces them.
        for png in plot_run(top["dir"], target, overwrite=True):
            lines.append(f"![{name} {os.path.basename(png)}]({rel(png)})")
        lines.append("")

    if robustness:
        lines += ["## Robustness of the best policies (recool range, +-5.7 MHz on both qubits, 11 x 11)", "",
                  "| run | gate time (ns) | nominal J_T | median J_T | worst J_T | median / worst, amplitudes clipped |",
                  "| --- | --- | --- | --- | --- | --- |"]
        pngs = []
        for run in runs:
            if "best_JT" not in run:
                continue
            rob = _robustness(run, figures)
            pngs.append(rob["png"])
            clipped = rob["clipped"]
            lines.append(f"| {run['run']} | {rob['gate_time_ns']:.2f} | {rob['nominal_JT']:.2e} | "
                         f"{rob['median_JT']:.2e} | {rob['worst_JT']:.2e} | "
                         f"{clipped['median_JT']:.2e} / {clipped['worst_JT']:.2e} |")
        amps, dt = paper_pulse()  # the paper's stored pulse, open loop, for comparison
        result = pulse_robustness(amps, dt=dt, half_width_mhz="recool", n=11)
        path = os.path.join(figures, "robustness_paper_RL_pulse.png")
        result.save_png(path, title="paper RL pulse (open loop), recool range", overwrite=True)
        pngs.append(path)
        s = result.summary()
        lines.append(f"| paper RL pulse (stored, open loop) | {s['gate_time_ns']:.2f} | {s['nominal_JT']:.2e} | "
                     f"{s['median_JT']:.2e} | {s['worst_JT']:.2e} | (within the bound) |")
        lines += ["", "A policy acts closed loop on each detuned device, and the gate stops at the time of "
                  "its best J_T on the nominal device. In the run's own MDP, J_T = 1 marks devices on which it "
                  "left the amplitude bound (episode truncated) before that time; the last column maps the "
                  "same policy with amplitudes clipped at the bound instead (oob_mode clip).", ""]
        lines += [f"![robustness]({rel(p)})" for p in pngs] + [""]

    if refine_iters:
        lines += [f"## Best gates within {PAPER_GATE_NS} ns, polished by GRAPE ({refine_iters} iterations)", "",
                  "Each run's best evaluation pulse no longer than the paper's gate, refined with "
                  "`quantgate_env.tools.grape.refine_pulse` (exact gradients, Adam, lr 3e-4, same gate time, |u| <= 20); "
                  "the paper's stored RL pulse refined the same way for comparison.", "",
                  "| pulse | gate time (ns) | J_T (RL) | J_T after GRAPE |", "| --- | --- | --- | --- |"]
        for run in runs:
            polished = _refine_short_gate(run, refine_iters)
            if polished:
                lines.append(f"| {run['run']} | {polished['gate_time_ns']:.2f} | {polished['JT_initial']:.2e} | "
                             f"{polished['JT_refined']:.2e} |")
        amps, dt = paper_pulse()
        n = int(round(PAPER_GATE_NS / dt))
        result = refine_pulse(amps[:n], dt=dt, n_iter=refine_iters)
        lines.append(f"| paper RL pulse (stored) | {n * dt:.2f} | {result.JT_initial:.2e} | {result.JT_best:.2e} |")
        lines.append("")

    lines += ["## Commands", "", "Each run was started with (see its config.json):", ""]
    for run in runs:
        extensions = "".join(f", then `jaxrl-train --resume {run['run']} --total-steps {n}`"
                             for n in run["extended_to"])
        lines.append(f"- `{run['run']}`: `{run['argv']}`{extensions}")
    lines += ["", "Interrupted runs continue with `jaxrl-train --resume RUN_DIR`.", ""]
    with open(out, "w") as handle:
        handle.write("\n".join(lines))
    return out


def expand_sweeps(paths: list[str]) -> list[str]:
    """Run directories of the arguments, with each jaxrl-sweep directory expanded.

    A sweep directory (it holds sweep.json) stands for the current run directories of all its
    trials, in the ranked order of its summary.csv.
    """
    out = []
    for p in paths:
        if not os.path.isfile(os.path.join(p, "sweep.json")):
            out.append(p)
            continue
        summary = os.path.join(p, "summary.csv")
        if os.path.isfile(summary):
            with open(summary) as handle:
                out += [os.path.join(p, d) for row in csv.DictReader(handle)
                        for d in row["run_dirs"].split(";") if d]
        else:  # interrupted before its first summary: every trial's run directories
            runs = os.path.join(p, "runs")
            for trial in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
                t = os.path.join(runs, trial)
                out += sorted(os.path.join(t, d) for d in os.listdir(t)
                              if os.path.isfile(os.path.join(t, d, "config.json")))
    return out
