"""``jaxrl-plot RUN_DIR``: PNG figures of a training run (matplotlib, Agg backend).

Writes into ``RUN_DIR/plots/`` (or ``--out``):

- ``learning_curve.png``: an evaluation field against environment steps;
- ``best_episode.png``: panels of recorded per-step quantities along the best evaluation episode.

An existing file of either name is replaced only with ``--force`` (both are checked before either
is drawn, so a refused command writes nothing), and each is written atomically.

What is plotted comes from the run directory (read through `run.rundir.RunDir`), not from this
module: config.json's ``"evaluation"`` (the environment's description: score, score_mode and plot
hints, see docs/contracts.md), the eval rows of progress.csv and evals.npz. Without a
description (an env that describes none, an older run directory) it plots the evaluation return
and the actions against the step index.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import math
import os
import sys

import numpy as np

from ..common.evaluation import EVAL_PREFIX, eval_summary, score_to_minimise
from ..common.fileio import atomic_write, describe_os_error, refuse_existing
from ..run.run_files import EVALS_NPZ
from ..run.rundir import RunDir

__all__ = ["plot_run", "main", "FIGURES"]

#: The files `plot_run` writes, in order.
FIGURES = ("learning_curve.png", "best_episode.png")

_CURVE = {"field": "return", "label": "eval return", "scale": "linear"}
_PANELS = [{"key": "action", "label": "action", "kind": "stairs"}]


def _summaries(run: RunDir, evals: dict) -> list[dict]:
    """Per evaluation: return and length from evals.npz, plus the env's fields.

    The env's fields are as the trainer wrote them to the eval rows of progress.csv (matched by step).
    """
    rows = {r["step"]: r for r in run.rows() if "eval_return" in r}
    out = []
    for i, step in enumerate(evals["step"]):
        s = eval_summary({k: v[i] for k, v in evals.items() if k != "step"})
        for k, v in rows.get(str(int(step)), {}).items():
            if k.startswith(EVAL_PREFIX) and k not in s:
                try:
                    s[k] = float(v)
                except ValueError:
                    pass
        out.append(s)
    return out


def _best_index(summaries: list[dict], desc: dict) -> int:
    scores = np.asarray([score_to_minimise(s, desc.get("score", "return"),
                                           desc.get("score_mode", "max")) for s in summaries],
                        float)
    return int(np.nanargmin(scores)) if not np.all(np.isnan(scores)) else len(scores) - 1


def _plot_pulse(ax, t_end, samples) -> None:
    """Piecewise-constant signal: step i covers (t_{i-1}, t_i] (t_{-1} = 0).

    Its K samples split that segment evenly, in order.
    """
    starts = np.concatenate([[0.0], t_end[:-1]])
    k = samples.shape[1]
    frac = np.arange(k + 1) / k
    edges = (starts[:, None] + (t_end - starts)[:, None] * frac[None, :])
    values = samples.ravel()
    bounds = np.concatenate([edges[:, :-1].ravel(), edges[-1:, -1]])
    ax.stairs(values, bounds, baseline=None)


def _save(fig, path: str) -> None:
    """The figure as a PNG at `path`, atomically (a reader never sees half an image)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    atomic_write(path, buf.getvalue())


def plot_run(run_dir: str, out_dir: str | None = None, *, overwrite: bool = False) -> list[str]:
    """Write the figures of `run_dir` (`FIGURES`) into `out_dir`.

    Args:
        run_dir: a run directory written by jaxrl-train (it needs evals.npz).
        out_dir: where the PNGs go (default ``run_dir/plots``; created if missing).
        overwrite: replace existing files of the same names (default: refuse, before drawing).

    Returns:
        The PNG paths written.

    Raises:
        ValueError: `run_dir` is not a run directory, or its evals.npz is unreadable (named).
        FileExistsError: a file `plot_run` would write exists and `overwrite` is False; nothing
            is written then.
        OSError: `out_dir` cannot be created or written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = RunDir(run_dir)
    evals = run.evaluations()
    if evals is None:
        raise ValueError(f"run_dir: expected a run directory with {EVALS_NPZ}, got {run_dir!r} "
                         f"(has the run evaluated yet?)")
    # The env's description (score, score_mode, plot hints), or the generic one when the run
    # records none (an env that describes none, an older run directory).
    desc = run.evaluation
    hints = desc.get("plots") or {}
    out_dir = out_dir or os.path.join(run_dir, "plots")
    curve_path, episode_path = (os.path.join(out_dir, name) for name in FIGURES)
    # Every file, before any is drawn: a user's learning_curve.png in --out is never replaced.
    refuse_existing([curve_path, episode_path], overwrite=overwrite)
    os.makedirs(out_dir, exist_ok=True)
    name = os.path.basename(os.path.normpath(run_dir))
    steps = evals["step"]
    summaries = _summaries(run, evals)
    written = []

    curve = hints.get("curve") or _CURVE
    field = EVAL_PREFIX + curve.get("field", "return")
    if not any(field in s for s in summaries):
        curve, field = _CURVE, EVAL_PREFIX + "return"
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    ax.plot(steps, [s.get(field, math.nan) for s in summaries], "o-", ms=3)
    if curve.get("scale") == "log":
        ax.set_yscale("log")
    ax.set_ylabel(curve.get("label", field))
    ax.set_xlabel("environment steps")
    ax.set_title(name, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, curve_path)
    written.append(curve_path)
    plt.close(fig)

    b = _best_index(summaries, desc)
    alive = evals["alive"][b].astype(bool)
    x_hint = hints.get("x") or {}
    x_key = x_hint.get("key")
    if x_key in evals:
        t, xlabel = evals[x_key][b][alive], x_hint.get("label", x_key)
    else:
        t, xlabel = np.flatnonzero(alive).astype(float), "step"
    panels = [p for p in (hints.get("panels") or _PANELS) if p.get("key") in evals] or _PANELS
    fig, axes = plt.subplots(len(panels), 1, figsize=(6, 2.2 * len(panels)), sharex=True,
                             constrained_layout=True, squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        y = np.asarray(evals[panel["key"]][b][alive], float)
        if panel.get("complement"):
            y = 1.0 - y
        if panel.get("kind") == "stairs":
            # (T, K) samples per step, or (T, lines, K): one staircase per line
            lines = y.reshape(len(t), -1, y.shape[-1]) if y.ndim == 3 else y.reshape(len(t), 1, -1)
            for j in range(lines.shape[1]):
                _plot_pulse(ax, t, lines[:, j, :])
        else:
            ax.plot(t, y.reshape(len(t), -1))
        if panel.get("scale") == "log":
            ax.set_yscale("log")
        ax.set_ylabel(panel.get("label", panel["key"]))
        ax.grid(True, which="both", alpha=0.3)
    axes[-1, 0].set_xlabel(xlabel)
    s = summaries[b]
    title = f"{name}\nbest eval at step {int(steps[b])}: return {s['eval_return']:.3f}"
    score_field = EVAL_PREFIX + desc.get("score", "return")
    if score_field in s and score_field != "eval_return":
        title += f", {desc['score']} {s[score_field]:.3e}"
    axes[0, 0].set_title(title, fontsize=8)
    _save(fig, episode_path)
    written.append(episode_path)
    plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jaxrl-plot``."""
    p = argparse.ArgumentParser(prog="jaxrl-plot", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="run directory written by jaxrl-train")
    p.add_argument("--out", default=None, help="output directory (default RUN_DIR/plots)")
    p.add_argument("--force", action="store_true",
                   help=f"replace {' and '.join(FIGURES)} if the output directory holds them")
    args = p.parse_args(argv)
    if importlib.util.find_spec("matplotlib") is None:
        from ..terminal.commands import install_extra

        print(f"jaxrl-plot: error: matplotlib is not installed (the extra jaxrl-agents[plot]): "
              f"{install_extra('plot', ['jaxrl-plot', args.run_dir])}", file=sys.stderr)
        return 2
    try:
        for path in plot_run(args.run_dir, args.out, overwrite=args.force):
            print(path)
    except ValueError as e:  # not a run directory, or a corrupt evals.npz (named)
        print(f"jaxrl-plot: error: {e}", file=sys.stderr)
        return 2
    except FileExistsError as e:  # a file in the output directory (named; nothing written)
        print(f"jaxrl-plot: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unwritable --out
        print(f"jaxrl-plot: error: {describe_os_error(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
