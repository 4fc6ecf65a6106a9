"""``jaxrl-plot RUN_DIR``: PNG figures of a training run (matplotlib, Agg backend).

Writes into ``RUN_DIR/plots/`` (or ``--out``):

- ``learning_curve.png``: evaluation J_T_min against environment steps (log scale), or the
  evaluation return for environments without J_T;
- ``best_episode.png``: along the best evaluation episode, the pulse u(t) (the env's ``amps``, or
  the actions), J_T (log), concurrence and 1 - U (log) against t (ns, or step index).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..common.evaluation import eval_summary
from .fileio import describe_os_error, load_npz
from .run_files import EVALS_NPZ

__all__ = ["plot_run", "main"]


def _best_index(evals: dict) -> int:
    scores = []
    for i in range(len(evals["step"])):
        s = eval_summary({k: v[i] for k, v in evals.items() if k != "step"})
        scores.append(s.get("eval_JT_min", -s["eval_return"]))
    scores = np.asarray(scores, float)
    return int(np.nanargmin(scores)) if not np.all(np.isnan(scores)) else len(scores) - 1


def _plot_pulse(ax, t_end, samples) -> None:
    """Piecewise-constant pulse: step i covers (t_{i-1}, t_i] (t_{-1} = 0) and its K samples
    split that segment evenly, in order (the contract's ``amps`` layout)."""
    starts = np.concatenate([[0.0], t_end[:-1]])
    k = samples.shape[1]
    frac = np.arange(k + 1) / k
    edges = (starts[:, None] + (t_end - starts)[:, None] * frac[None, :])
    values = samples.ravel()
    bounds = np.concatenate([edges[:, :-1].ravel(), edges[-1:, -1]])
    ax.stairs(values, bounds, baseline=None)


def plot_run(run_dir: str, out_dir: str | None = None) -> list[str]:
    """Write the figures of `run_dir`; returns the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = os.path.join(run_dir, EVALS_NPZ)
    if not os.path.isfile(path):
        raise ValueError(f"run_dir: expected a run directory with {EVALS_NPZ}, got {run_dir!r} "
                         f"(has the run evaluated yet?)")
    evals = load_npz(path)
    out_dir = out_dir or os.path.join(run_dir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    name = os.path.basename(os.path.normpath(run_dir))
    steps = evals["step"]
    summaries = [eval_summary({k: v[i] for k, v in evals.items() if k != "step"})
                 for i in range(len(steps))]
    written = []

    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    if "JT" in evals:
        ax.semilogy(steps, [s["eval_JT_min"] for s in summaries], "o-", ms=3)
        ax.set_ylabel("eval $J_T$ min over the episode")
    else:
        ax.plot(steps, [s["eval_return"] for s in summaries], "o-", ms=3)
        ax.set_ylabel("eval return")
    ax.set_xlabel("environment steps")
    ax.set_title(name, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    written.append(os.path.join(out_dir, "learning_curve.png"))
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    b = _best_index(evals)
    alive = evals["alive"][b].astype(bool)
    t = evals["t"][b][alive] if "t" in evals else np.flatnonzero(alive)
    xlabel = "t (ns)" if "t" in evals else "step"
    panels = [("amps" if "amps" in evals else "action", "pulse u(t)", "linear")]
    panels += [(k, lab, sc) for k, lab, sc in (("JT", "$J_T$", "log"),
                                               ("concurrence", "concurrence", "linear"),
                                               ("unitarity", "1 - U", "log")) if k in evals]
    fig, axes = plt.subplots(len(panels), 1, figsize=(6, 2.2 * len(panels)), sharex=True,
                             constrained_layout=True, squeeze=False)
    for ax, (key, label, scale) in zip(axes[:, 0], panels):
        y = evals[key][b][alive]
        if key in ("amps", "action"):
            _plot_pulse(ax, t, y.reshape(len(t), -1))
        else:
            ax.plot(t, 1.0 - y if key == "unitarity" else y)
        if scale == "log":
            ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[-1, 0].set_xlabel(xlabel)
    s = summaries[b]
    title = f"{name}\nbest eval at step {int(steps[b])}: return {s['eval_return']:.3f}"
    if "eval_JT_min" in s:
        title += f", J_T min {s['eval_JT_min']:.3e}"
    axes[0, 0].set_title(title, fontsize=8)
    written.append(os.path.join(out_dir, "best_episode.png"))
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jaxrl-plot``."""
    p = argparse.ArgumentParser(prog="jaxrl-plot", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="run directory written by jaxrl-train")
    p.add_argument("--out", default=None, help="output directory (default RUN_DIR/plots)")
    args = p.parse_args(argv)
    try:
        for path in plot_run(args.run_dir, args.out):
            print(path)
    except ValueError as e:  # not a run directory, or a corrupt evals.npz (named)
        print(f"jaxrl-plot: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unwritable --out
        print(f"jaxrl-plot: error: {describe_os_error(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
