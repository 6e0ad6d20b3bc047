"""Plots a person would rather look at than a table: convergence of a study."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_convergence(study: Any, path: str | Path, *, optimum: float | None = None) -> Path:
    """Save a convergence plot: every completed value and the best value so far, per trial.

    With a known ``optimum`` the y axis shows the simple regret ``best - optimum`` on a log scale.
    Returns the path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = [t for t in study.trials if t.state == "complete"]
    numbers = [t.number for t in trials]
    values = [t.value for t in trials]
    sign = 1.0 if study.direction == "minimize" else -1.0
    best, running = [], None
    for v in values:
        running = v if running is None else (min(running, v) if sign > 0 else max(running, v))
        best.append(running)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    if optimum is not None and sign > 0:
        floor = 1e-12
        ax.scatter(
            numbers,
            [max(v - optimum, floor) for v in values],
            s=14,
            alpha=0.5,
            label="trial regret",
        )
        ax.step(
            numbers,
            [max(b - optimum, floor) for b in best],
            where="post",
            lw=2,
            label="best regret so far",
        )
        ax.set_yscale("log")
        ax.set_ylabel("simple regret (value - known minimum)")
    else:
        ax.scatter(numbers, values, s=14, alpha=0.5, label="trial value")
        ax.step(numbers, best, where="post", lw=2, label="best so far")
        ax.set_ylabel("objective value")
    n_initial = getattr(study, "n_initial", None)
    if n_initial:
        ax.axvline(n_initial - 0.5, color="grey", ls="--", lw=1, label="end of initial design")
    ax.set_xlabel("trial number")
    ax.set_title(f"{study.name} ({study.direction})")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
