r"""Plots and a markdown table from a benchmark CSV (see :mod:`headstart.benchmarks.runner`).

Everything here is computed from the rows in the frame and nothing else: the number of seeds a
method has on a task is the number of seeds with complete rows in the CSV.

* Simple regret at iteration t: ``min_{i <= t} f(x_i) - f*`` (the ``regret`` column).
* Mean ± standard error over seeds: ``s.e. = std(ddof=1) / sqrt(n_seeds)`` (0 for one seed).
* Suggestion overhead: the median of ``seconds_suggest`` over every suggestion of every seed
  (initial design included).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from headstart.exceptions import InvalidSettingError

_REGRET_FLOOR = 1e-12  # log-scale plots cannot show 0; regrets below this are drawn at it
_REQUIRED = ("method", "task", "seed", "budget", "iteration", "regret", "seconds_suggest")


def _check_frame(df) -> None:
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise InvalidSettingError(
            f"The benchmark frame lacks columns {missing}; read it with "
            "headstart.benchmarks.runner.read_results(csv_path)."
        )
    if df.empty:
        raise InvalidSettingError("The benchmark frame has no rows; run the benchmark first.")


def _panels(df) -> list[tuple[str, object]]:
    """``(title, rows)`` per task, split by budget when a task was run with several budgets."""
    panels = []
    for task in sorted(df["task"].unique()):
        rows = df[df["task"] == task]
        budgets = sorted(rows["budget"].unique())
        for budget in budgets:
            title = task if len(budgets) == 1 else f"{task} (budget {budget})"
            panels.append((title, rows[rows["budget"] == budget]))
    return panels


def _colors(df) -> dict[str, object]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {m: cmap(i % 10) for i, m in enumerate(sorted(df["method"].unique()))}


def _mean_se(rows, column: str):
    """Per (method, iteration): mean, standard error and seed count of ``column``."""
    stats = rows.groupby(["method", "iteration"])[column].agg(["mean", "std", "count"])
    stats["se"] = (stats["std"] / np.sqrt(stats["count"])).fillna(0.0)
    return stats


def _draw_regret(ax, rows, colors) -> None:
    stats = _mean_se(rows, "regret")
    for method in sorted(rows["method"].unique()):
        s = stats.loc[method]
        mean = s["mean"].clip(lower=_REGRET_FLOOR)
        low = (s["mean"] - s["se"]).clip(lower=_REGRET_FLOOR)
        high = (s["mean"] + s["se"]).clip(lower=_REGRET_FLOOR)
        n = int(s["count"].iloc[-1])
        ax.plot(s.index, mean, color=colors[method], lw=1.8, label=f"{method} ({n} seeds)")
        ax.fill_between(s.index, low, high, color=colors[method], alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("simple regret (mean ± s.e.)")
    ax.grid(alpha=0.3, which="both")


def _draw_overhead(ax, rows, colors) -> None:
    medians = rows.groupby(["method", "iteration"])["seconds_suggest"].median()
    for method in sorted(rows["method"].unique()):
        s = medians.loc[method].clip(lower=1e-6)
        ax.plot(s.index, s.values, color=colors[method], lw=1.5, label=method)
    ax.set_yscale("log")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("seconds per suggestion (median)")
    ax.grid(alpha=0.3, which="both")


def _save(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _figure(n_rows: int, n_cols: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(4.6 * n_cols, 3.6 * n_rows), dpi=110, squeeze=False
    )
    return fig, axes


def regret_plot(df, path: str | Path) -> Path:
    """Save mean simple regret vs evaluation (log y, ± s.e. band), one panel per task.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        path: PNG file to write.

    Returns:
        The path written.
    """
    _check_frame(df)
    panels, colors = _panels(df), _colors(df)
    fig, axes = _figure(1, len(panels))
    for ax, (title, rows) in zip(axes[0], panels, strict=True):
        _draw_regret(ax, rows, colors)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def overhead_plot(df, path: str | Path) -> Path:
    """Save the median seconds per suggestion vs evaluation (log y), one panel per task.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        path: PNG file to write.

    Returns:
        The path written.
    """
    _check_frame(df)
    panels, colors = _panels(df), _colors(df)
    fig, axes = _figure(1, len(panels))
    for ax, (title, rows) in zip(axes[0], panels, strict=True):
        _draw_overhead(ax, rows, colors)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def benchmark_plot(df, path: str | Path) -> Path:
    """Save one PNG: regret panels (top row) above overhead panels (bottom row), per task.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        path: PNG file to write.

    Returns:
        The path written.
    """
    _check_frame(df)
    panels, colors = _panels(df), _colors(df)
    fig, axes = _figure(2, len(panels))
    for j, (title, rows) in enumerate(panels):
        _draw_regret(axes[0, j], rows, colors)
        axes[0, j].set_title(f"{title}: regret")
        axes[0, j].legend(fontsize=7, loc="best")
        _draw_overhead(axes[1, j], rows, colors)
        axes[1, j].set_title(f"{title}: suggestion overhead")
    return _save(fig, path)


# --- markdown -------------------------------------------------------------------------------------
def _ratio(num: float, den: float) -> float:
    if den == 0:
        return 1.0 if num == 0 else math.inf
    return num / den


def _fmt(x: float) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.3g}"


def _verdict(stats: dict[str, dict], reference: str, target: str) -> str:
    absent = [m for m in (target, reference) if m not in stats]
    if absent:
        return f"cannot judge {target} vs {reference}: no results for {', '.join(absent)}."
    t, r = stats[target], stats[reference]
    regret = _ratio(t["regret"], r["regret"])
    overhead = _ratio(t["overhead"], r["overhead"])
    parts = [
        f"regret ratio {_fmt(regret)} {'≤' if regret <= 1 else '>'} 1",
        f"overhead ratio {_fmt(overhead)} {'≤' if overhead <= 1 else '>'} 1",
    ]
    seeds = f" ({t['seeds']} vs {r['seeds']} seeds)"
    missed = [p for p, ok in zip(parts, (regret <= 1, overhead <= 1), strict=True) if not ok]
    if not missed:
        return f"target met: {parts[0]} and {parts[1]}{seeds}."
    return f"target missed: {' and '.join(missed)}{seeds}."


def _task_stats(rows) -> dict[str, dict]:
    """Final mean regret, its s.e., median overhead and seed count per method."""
    stats = {}
    for method in sorted(rows["method"].unique()):
        m = rows[rows["method"] == method]
        final = m[m["iteration"] == m["budget"]]["regret"].to_numpy(dtype=np.float64)
        n = len(final)
        se = float(final.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        stats[method] = {
            "seeds": int(m["seed"].nunique()),
            "regret": float(final.mean()),
            "se": se,
            "overhead": float(m["seconds_suggest"].median()),
        }
    return stats


def markdown_summary(df, reference: str = "optuna-gp", target: str = "headstart-gp") -> str:
    r"""A markdown report: per task, one row per method, and a verdict for ``target``.

    Columns: seeds present, final simple regret (mean ± s.e. over seeds), its ratio to
    ``reference``, median seconds per suggestion and its ratio to ``reference``. The verdict says
    whether ``target`` meets "regret ratio ≤ 1 and overhead ratio ≤ 1" against ``reference``.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        reference: Method the ratios are computed against.
        target: Method the verdict is about.

    Returns:
        Markdown text.
    """
    _check_frame(df)
    lines = [
        "Final simple regret = best value after the last evaluation − known minimum (mean ± "
        "standard error over seeds); overhead = median wall-clock seconds per suggestion over all "
        "evaluations (initial design included). Ratios are relative to "
        f"`{reference}`; lower is better.",
        "",
    ]
    for title, rows in _panels(df):
        budget = int(rows["budget"].iloc[0])
        stats = _task_stats(rows)
        ref = stats.get(reference)
        lines += [
            f"### {title} (budget {budget})",
            "",
            f"| method | seeds | final regret | regret / {reference} | s / suggestion | "
            f"overhead / {reference} |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for method, s in stats.items():
            regret_ratio = "-" if ref is None else _fmt(_ratio(s["regret"], ref["regret"]))
            overhead_ratio = "-" if ref is None else _fmt(_ratio(s["overhead"], ref["overhead"]))
            name = f"**{method}**" if method == target else method
            lines.append(
                f"| {name} | {s['seeds']} | {_fmt(s['regret'])} ± {_fmt(s['se'])} | "
                f"{regret_ratio} | {_fmt(s['overhead'])} | {overhead_ratio} |"
            )
        lines += ["", f"Verdict: {_verdict(stats, reference, target)}", ""]
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["benchmark_plot", "markdown_summary", "overhead_plot", "regret_plot"]
