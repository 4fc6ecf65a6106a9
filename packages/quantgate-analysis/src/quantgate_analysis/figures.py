"""The results page's figures (PNG, matplotlib's file-only Agg backend): curves, frontier, maps.

Each function draws one figure from summary data and writes it to `path`; matplotlib is imported
on first use, so nothing else in the package needs it.
"""

from __future__ import annotations

import numpy as np

from .paper import PAPER_GATE_NS, PAPER_JT

__all__ = ["learning_curves", "frontier_plot", "robustness_maps", "is_generated", "FIGURE_MARK"]

DPI = 110
#: Written into every figure's PNG metadata ("Description"), so that the page can tell its own
#: figures from a user's file of the same name (`is_generated`) before replacing one.
FIGURE_MARK = "quantgate-results page figure"
_METADATA = {"Description": FIGURE_MARK}


def is_generated(path: str) -> bool:
    """Whether the file at `path` is a figure this module wrote (it carries `FIGURE_MARK`)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)  # PNG text chunks come before the image data
    except OSError:
        return False
    return head.startswith(b"\x89PNG") and FIGURE_MARK.encode() in head
# The reference's GRAPE at the 20 rad/ns bound (cited): best J_T at 8, 10 and 12 ns.
REFERENCE_GRAPE_20 = ([8, 10, 12], [1.0e-2, 2.2e-5, 4.2e-5])


def _pyplot():
    """Pyplot on matplotlib's file-only Agg backend (the page is built without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish_log_plot(plt, fig, ax, xlabel: str, ylabel: str, path: str) -> None:
    """Log y axis, labels and legend; write the figure to `path` and close it."""
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=_METADATA)
    plt.close(fig)


def learning_curves(summaries: dict[str, list[dict]], path: str) -> None:
    """Each run's best evaluation J_T so far against environment steps, one colour per entry.

    A fine-tuning run's curve starts at its source's step (``init_from.step``).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = plt.get_cmap("tab10").colors
    for i, (name, runs) in enumerate(summaries.items()):
        for j, s in enumerate(runs):
            offset = (s.get("init_from") or {}).get("step") or 0
            steps = np.asarray(s["curve"]["step"], float) + offset
            ax.plot(steps / 1e6, s["curve"]["best_JT"], color=colours[i % 10], lw=1,
                    label=name if j == 0 else None)
    ax.axhline(PAPER_JT, color="k", ls="--", lw=0.8, label=f"paper {PAPER_JT:.3g}")
    _finish_log_plot(plt, fig, ax, "environment steps (millions; fine-tuning runs after their "
                     "source's best)", "best evaluation J_T so far", path)


def frontier_plot(front: dict, path: str) -> None:
    """The gate-time frontier (`frontier.best_frontier`) by RL and after GRAPE, with the paper's gate."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    t = np.array(front["t"])
    for key, label, style in (("rl", "RL alone (deterministic policy)", "o-"),
                              ("grape", "RL then GRAPE (200 iterations)", "s--")):
        y = np.array([np.nan if v is None else v for v in front[key]], float)
        if np.isfinite(y).any():
            ax.plot(t, y, style, ms=4, label=label)
    ax.plot([PAPER_GATE_NS], [PAPER_JT], "k*", ms=10, label="paper's RL pulse")
    ax.plot(*REFERENCE_GRAPE_20, "x", color="grey",
            label="reference GRAPE at the 20 rad/ns bound (cited)")
    ax.axhline(1e-4, color="grey", lw=0.6, ls=":")
    _finish_log_plot(plt, fig, ax, "gate time T (ns): best gate no longer than T", "J_T", path)


def robustness_maps(rob: dict, title: str, paper, path: str) -> None:
    """A policy's map beside the paper pulse's, on one colour scale (log10 J_T at the gate time).

    Args:
        rob: the policy's summary ``robustness`` (n, offsets_mhz, jt_at_gate_time, ...).
        title: the policy's panel title.
        paper: the paper pulse's `RobustnessResult` (`robustness.paper_map`).
        path: the PNG to write.
    """
    plt = _pyplot()
    n = rob["n"]
    grids = [np.log10(np.asarray(rob["jt_at_gate_time"]).reshape(n, n)),
             np.log10(np.asarray(paper.jt_at_gate_time).reshape(paper.n, paper.n))]
    axis = np.asarray(rob["offsets_mhz"])[::n, 0]
    lo, hi = min(g.min() for g in grids), max(g.max() for g in grids)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    titles = [title,
              f"paper RL pulse, open loop\nmedian {np.median(paper.jt_at_gate_time):.2g}, "
              f"worst {np.max(paper.jt_at_gate_time):.2g}"]
    for ax, grid, panel in zip(axes, grids, titles):
        image = ax.imshow(grid.T, origin="lower", extent=[axis[0], axis[-1], axis[0], axis[-1]],
                          cmap="viridis_r", vmin=lo, vmax=hi, aspect="auto")
        ax.set_title(panel, fontsize=8)
        ax.set_xlabel("qubit 0 detuning (MHz)")
        ax.set_ylabel("qubit 1 detuning (MHz)")
    fig.colorbar(image, ax=axes, label="log10 J_T at the gate time")
    fig.savefig(path, dpi=DPI, metadata=_METADATA)
    plt.close(fig)
