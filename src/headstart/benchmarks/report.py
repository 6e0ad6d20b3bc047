r"""Plots and a markdown table from a benchmark CSV (see :mod:`headstart.benchmarks.runner`).

Everything here is computed from the rows in the frame and nothing else: the number of seeds a
method has on a task is the number of seeds with complete rows in the CSV.

* Simple regret at iteration t: ``min_{i <= t} f(x_i) - f*`` (the ``regret`` column).
* Mean ± standard error over seeds: ``s.e. = std(ddof=1) / sqrt(n_seeds)`` (0 for one seed).
* Suggestion overhead: the median of ``seconds_suggest`` over every suggestion of every seed
  (initial design included).
* Cumulative regret (optional column): the sum over iterations of the simple regret, averaged over
  seeds (the ScaML-GP paper's Fig. 3 metric).

For task families the optimum is that of each seed's instance, so regrets are comparable within a
family (one panel) but not across families; :func:`overall_summary` therefore compares methods by
ratios to a reference method, panel by panel.
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


def draw_mean_curves(
    ax, frame, column: str, ylabel: str, *, x: str = "iteration", stat: str = "mean"
) -> None:
    """One line per method: ``stat`` (``"mean"``, ``"median"``) of ``column`` over tasks and
    seeds at each value of ``x`` (the evaluation count), on a log scale."""
    curve = frame.groupby(["method", x])[column].agg(stat).unstack(0)
    for method in curve.columns:
        ax.plot(curve.index, curve[method], label=method)
    ax.set_yscale("log")
    ax.set_xlabel("evaluations")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    return path


def _figure(n_rows: int, n_cols: int):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.6 * n_cols, 3.6 * n_rows), dpi=110)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    return fig, axes


def _grid(n_panels: int, ncols: int | None) -> tuple[int, int]:
    """``(rows, cols)`` of a layout with at most ``ncols`` panels per row (None: one row)."""
    if ncols is not None and (isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1):
        raise InvalidSettingError(f"ncols must be a positive integer or None; got {ncols!r}.")
    cols = n_panels if ncols is None else min(ncols, n_panels)
    return math.ceil(n_panels / cols), cols


def _single_plot(df, path: str | Path, draw, ncols: int | None) -> Path:
    _check_frame(df)
    panels, colors = _panels(df), _colors(df)
    n_rows, n_cols = _grid(len(panels), ncols)
    fig, axes = _figure(n_rows, n_cols)
    flat = axes.reshape(-1)
    for ax, (title, rows) in zip(flat, panels, strict=False):
        draw(ax, rows, colors)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="best")
    for ax in flat[len(panels) :]:
        ax.set_visible(False)
    return _save(fig, path)


def regret_plot(df, path: str | Path, *, ncols: int | None = None) -> Path:
    """Save mean simple regret vs evaluation (log y, ± s.e. band), one panel per task.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        path: PNG file to write.
        ncols: Panels per row (default: all in one row).

    Returns:
        The path written.
    """
    return _single_plot(df, path, _draw_regret, ncols)


def overhead_plot(df, path: str | Path, *, ncols: int | None = None) -> Path:
    """As :func:`regret_plot`, for the median seconds per suggestion (log y)."""
    return _single_plot(df, path, _draw_overhead, ncols)


def benchmark_plot(df, path: str | Path, *, ncols: int | None = None) -> Path:
    """Save one PNG: per task, a regret panel above an overhead panel.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        path: PNG file to write.
        ncols: Tasks per row of panel pairs (default: all tasks side by side).

    Returns:
        The path written.
    """
    _check_frame(df)
    panels, colors = _panels(df), _colors(df)
    n_rows, n_cols = _grid(len(panels), ncols)
    fig, axes = _figure(2 * n_rows, n_cols)
    for k, (title, rows) in enumerate(panels):
        i, j = divmod(k, n_cols)
        _draw_regret(axes[2 * i, j], rows, colors)
        axes[2 * i, j].set_title(f"{title}: regret")
        axes[2 * i, j].legend(fontsize=7, loc="best")
        _draw_overhead(axes[2 * i + 1, j], rows, colors)
        axes[2 * i + 1, j].set_title(f"{title}: suggestion overhead")
    for k in range(len(panels), n_rows * n_cols):
        i, j = divmod(k, n_cols)
        axes[2 * i, j].set_visible(False)
        axes[2 * i + 1, j].set_visible(False)
    return _save(fig, path)


# --- markdown -------------------------------------------------------------------------------------
def mean_gap_interval(
    groups, *, paired: bool, n_draws: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    r"""Mean over ``groups`` of ``mean(a) - mean(b)``, with a bootstrap interval.

    Each group (one task, one trial) is a pair ``(a, b)`` of per-seed values of two methods. The
    interval resamples seeds within every group ``n_draws`` times and takes the central ``level``
    share of the resampled figures. ``paired``: ``a[i]`` and ``b[i]`` come from one seed that
    both runs share (for example the same initial design), so seeds are resampled jointly;
    otherwise each method's seeds are resampled on their own (a two-sample bootstrap). The tasks
    are held fixed, and a group with one seed adds no width. Returns ``(gap, low, high)``.

    Example:
        >>> import numpy as np
        >>> mean_gap_interval([(np.array([2.0, 2.0]), np.array([1.0, 1.0]))], paired=False)
        (1.0, 1.0, 1.0)
    """
    if n_draws < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"mean_gap_interval needs n_draws >= 1 and 0 < level < 1; got "
                         f"{n_draws} and {level}.")  # fmt: skip
    pairs = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in groups]
    if not pairs or any(not len(a) or not len(b) for a, b in pairs):
        raise ValueError("mean_gap_interval needs at least one group, each with values of both.")
    if any(not (np.isfinite(a).all() and np.isfinite(b).all()) for a, b in pairs):
        raise ValueError("mean_gap_interval needs finite values (drop the missing seeds first).")
    if paired and any(len(a) != len(b) for a, b in pairs):
        raise ValueError("Paired groups need one value of each method per seed.")
    rng = np.random.default_rng(seed)
    gap = float(np.mean([a.mean() - b.mean() for a, b in pairs]))
    draws = np.zeros(n_draws)
    for a, b in pairs:
        if paired:
            draws += (a - b)[rng.integers(0, len(a), size=(n_draws, len(a)))].mean(axis=1)
        else:
            draws += a[rng.integers(0, len(a), size=(n_draws, len(a)))].mean(axis=1)
            draws -= b[rng.integers(0, len(b), size=(n_draws, len(b)))].mean(axis=1)
    draws /= len(pairs)
    tail = 50.0 * (1.0 - level)
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return gap, float(low), float(high)


def method_gap_interval(
    rows, column: str, target: str, other: str, *, by: str | None = None, paired: bool = False
) -> tuple[float, float, float]:
    """:func:`mean_gap_interval` of ``target`` against ``other`` on the ``column`` of ``rows``
    (one row per method and seed, and per value of ``by`` if given: the groups); missing values
    are dropped, and paired groups keep the seeds both methods have."""
    rows = rows[rows["method"].isin([target, other])].dropna(subset=[column])
    keys = [by] if by else []
    wide = rows.pivot_table(index=[*keys, "seed"], columns="method", values=column)
    if target not in wide or other not in wide:
        raise ValueError(f"No rows of {target!r} and {other!r} with a {column!r} to compare.")
    parts = wide.groupby(level=by) if by else [(None, wide)]
    groups = []
    for _, part in parts:
        if paired:
            part = part.dropna()
        a, b = part[target].dropna().to_numpy(), part[other].dropna().to_numpy()
        if len(a) and len(b):
            groups.append((a, b))
    if not groups:
        raise ValueError(f"{target!r} and {other!r} share no group with values of both.")
    return mean_gap_interval(groups, paired=paired)


def _ratio(num: float, den: float) -> float:
    if den == 0:
        return 1.0 if num == 0 else math.inf
    return num / den


def _fmt(x: float) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.3g}"


CRITERIA = ("regret", "overhead", "cumulative")
_CRITERION_LABEL = {
    "regret": "regret ratio",
    "overhead": "overhead ratio",
    "cumulative": "cumulative-regret ratio",
}


def _check_criteria(criteria) -> tuple[str, ...]:
    criteria = tuple(criteria)
    bad = [c for c in criteria if c not in CRITERIA]
    if bad or not criteria:
        raise InvalidSettingError(
            f"criteria must be a non-empty subset of {CRITERIA}; got {list(criteria)}."
        )
    return criteria


def _verdict(
    stats: dict[str, dict],
    reference: str,
    target: str,
    criteria: tuple[str, ...] = ("regret", "overhead"),
) -> str:
    absent = [m for m in (target, reference) if m not in stats]
    if absent:
        return f"cannot judge {target} vs {reference}: no results for {', '.join(absent)}."
    t, r = stats[target], stats[reference]
    ratios = [_ratio(t[c], r[c]) for c in criteria]
    parts = [
        f"{_CRITERION_LABEL[c]} {_fmt(x)} {'≤' if x <= 1 else '>'} 1"
        for c, x in zip(criteria, ratios, strict=True)
    ]
    seeds = f" ({t['seeds']} vs {r['seeds']} seeds)"
    missed = [p for p, x in zip(parts, ratios, strict=True) if x > 1]
    if not missed:
        return f"target met: {' and '.join(parts)}{seeds}."
    return f"target missed: {' and '.join(missed)}{seeds}."


def _mean_and_se(values: np.ndarray) -> tuple[float, float]:
    n = len(values)
    se = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    return float(values.mean()), se


def _task_stats(rows) -> dict[str, dict]:
    """Final and cumulative mean regret with s.e., median overhead and seed count per method."""
    stats = {}
    for method in sorted(rows["method"].unique()):
        m = rows[rows["method"] == method]
        final = m[m["iteration"] == m["budget"]]["regret"].to_numpy(dtype=np.float64)
        cumulative = m.groupby("seed")["regret"].sum().to_numpy(dtype=np.float64)
        regret, se = _mean_and_se(final)
        cum, cum_se = _mean_and_se(cumulative)
        stats[method] = {
            "seeds": int(m["seed"].nunique()),
            "regret": regret,
            "se": se,
            "cumulative": cum,
            "cumulative_se": cum_se,
            "overhead": float(m["seconds_suggest"].median()),
        }
    return stats


def _ratio_cell(stats: dict, ref: dict | None, key: str) -> str:
    return "-" if ref is None else _fmt(_ratio(stats[key], ref[key]))


def markdown_summary(
    df,
    reference: str = "optuna-gp",
    target: str = "headstart-gp",
    *,
    criteria: tuple[str, ...] = ("regret", "overhead"),
    cumulative: bool = False,
    overall: bool = False,
) -> str:
    r"""A markdown report: per task, one row per method, and a verdict for ``target``.

    Columns: seeds present, final simple regret (mean ± s.e. over seeds), its ratio to
    ``reference``, optionally the cumulative regret and its ratio, median seconds per suggestion
    and its ratio to ``reference``. The verdict says whether ``target`` has every ratio named in
    ``criteria`` ≤ 1 against ``reference``: the default "regret ratio ≤ 1 and overhead ratio ≤ 1"
    suits a method against a peer; a transfer method against plain GP-BO (which is bound to
    be cheaper) is judged with ``criteria=("regret", "cumulative")``.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        reference: Method the ratios are computed against.
        target: Method the verdict is about (shown in bold).
        criteria: Ratios the verdict requires ≤ 1: any of ``"regret"`` (final), ``"overhead"``
            and ``"cumulative"``.
        cumulative: Add the cumulative-regret columns.
        overall: Start with the cross-task table of :func:`overall_summary`.

    Returns:
        Markdown text.
    """
    _check_frame(df)
    criteria = _check_criteria(criteria)
    cumulative = cumulative or "cumulative" in criteria
    lines = [
        "Final simple regret = best value after the last evaluation − the task's minimum (for a "
        "task family, the minimum of each seed's instance), mean ± standard error over seeds"
        + ("; cumulative regret = sum over evaluations of the simple regret" if cumulative else "")
        + "; overhead = median wall-clock seconds per suggestion over all evaluations (initial "
        f"design included). Ratios are relative to `{reference}`; lower is better.",
        "",
    ]
    if overall:
        lines += [overall_summary(df, reference=reference, target=target), ""]
    for title, rows in _panels(df):
        budget = int(rows["budget"].iloc[0])
        stats = _task_stats(rows)
        ref = stats.get(reference)
        cum_head = f"cumulative regret | cumulative / {reference} | " if cumulative else ""
        lines += [
            f"### {title} (budget {budget})",
            "",
            f"| method | seeds | final regret | regret / {reference} | {cum_head}s / suggestion | "
            f"overhead / {reference} |",
            "|---|---:|---:|---:|" + ("---:|---:|" if cumulative else "") + "---:|---:|",
        ]
        for method, s in stats.items():
            cum = (
                f"{_fmt(s['cumulative'])} ± {_fmt(s['cumulative_se'])} | "
                f"{_ratio_cell(s, ref, 'cumulative')} | "
                if cumulative
                else ""
            )
            name = f"**{method}**" if method == target else method
            lines.append(
                f"| {name} | {s['seeds']} | {_fmt(s['regret'])} ± {_fmt(s['se'])} | "
                f"{_ratio_cell(s, ref, 'regret')} | {cum}{_fmt(s['overhead'])} | "
                f"{_ratio_cell(s, ref, 'overhead')} |"
            )
        lines += ["", f"Verdict: {_verdict(stats, reference, target, criteria)}", ""]
    return "\n".join(lines).rstrip() + "\n"


def early_regret_summary(
    df,
    target: str,
    baselines: tuple[str, ...] = ("headstart-warmstart", "headstart-gp"),
    trials: tuple[int, ...] = (1, 3, 5, 10),
) -> str:
    r"""Mean simple regret at the given trials and at the final budget, and ``target``'s ratios.

    The first table has one row per task and method (mean over the seeds ``target`` and every
    baseline completed on that task, so the compared rows share one seed set); the second compares ``target`` with
    each baseline per task: the ratio of mean regrets at each trial (<= 1: ``target`` at or below
    the baseline). Trials beyond a task's budget are left out.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        target: The method judged (for example the default transfer method).
        baselines: Methods it is compared with.
        trials: Trials (1-based evaluation counts) to report besides the final one.

    Returns:
        Markdown text.
    """
    _check_frame(df)
    heads = [f"t={t}" for t in trials] + ["final"]
    lines = [
        "### Regret at the first trials",
        "",
        "Mean simple regret over seeds after t evaluations, on the seeds the target and its "
        "baselines all completed on the task (a method with fewer shows its count).",
        "",
        "| task | method | seeds | " + " | ".join(heads) + " |",
        "|---|---|---:|" + "---:|" * len(heads),
    ]
    ratio_rows, gap_rows = [], []
    for title, rows in _panels(df):
        budget = int(rows["budget"].iloc[0])
        methods = sorted(rows["method"].unique())
        core = [set(rows[rows["method"] == m]["seed"]) for m in (target, *baselines)]
        core = [c for c in core if c]
        seeds = set.intersection(*core) if core else set(rows["seed"])
        at = [t for t in trials if t <= budget] + [budget]
        means = {}
        for m in methods:
            r = rows[(rows["method"] == m) & rows["seed"].isin(seeds)]
            means[m] = [float(r[r["iteration"] == t]["regret"].mean()) for t in at]
            cells = [_fmt(v) for v in means[m]] + ["-"] * (len(heads) - len(at))
            name = f"**{m}**" if m == target else m
            n = r["seed"].nunique()
            lines.append(f"| {title} | {name} | {n} | " + " | ".join(cells) + " |")
        if target in means:
            for base in baselines:
                if base in means:
                    ratios = [
                        _fmt(_ratio(a, b)) for a, b in zip(means[target], means[base], strict=True)
                    ]
                    ratios += ["-"] * (len(heads) - len(at))
                    ratio_rows.append(f"| {title} | {base} | " + " | ".join(ratios) + " |")
                    gaps = [_gap_cell(rows, target, base, seeds, t) for t in at]
                    gaps += ["-"] * (len(heads) - len(at))
                    gap_rows.append(f"| {title} | {base} | " + " | ".join(gaps) + " |")
    if ratio_rows:
        lines += [
            "",
            f"`{target}` / baseline, mean regret at each trial (<= 1: at or below the baseline):",
            "",
            "| task | baseline | " + " | ".join(heads) + " |",
            "|---|---|" + "---:|" * len(heads),
            *ratio_rows,
            "",
            f"`{target}` minus baseline, mean regret at each trial, with a 95% bootstrap interval "
            "over seeds (an interval that holds 0: these seeds cannot tell the two apart):",
            "",
            "| task | baseline | " + " | ".join(heads) + " |",
            "|---|---|" + "---:|" * len(heads),
            *gap_rows,
        ]
    return "\n".join(lines) + "\n"


def _gap_cell(rows, target: str, base: str, seeds: set, trial: int) -> str:
    """``target``'s mean regret minus ``base``'s at ``trial`` over ``seeds`` (unrelated runs:
    the two-sample bootstrap), and its interval."""
    at = rows[(rows["iteration"] == trial) & rows["seed"].isin(seeds)]
    try:
        gap, low, high = method_gap_interval(at, "regret", target, base)
    except ValueError:
        return "-"
    return f"{_fmt(gap)} [{_fmt(low)}, {_fmt(high)}]"


def overall_summary(df, reference: str = "optuna-gp", target: str | None = None) -> str:
    r"""A markdown table across tasks: how each method ranks and compares with ``reference``.

    Regrets of different tasks (and families) are on different scales, so this table only uses
    per-task comparisons. Per method: the number of tasks it ran on, its average rank by final and
    by cumulative regret (1 = lowest mean over seeds; ties share the average rank), the number of
    tasks where its final regret is ≤ that of ``reference``, and the median over tasks of its
    final-regret ratio to ``reference``.

    Args:
        df: Rows as returned by :func:`headstart.benchmarks.runner.read_results`.
        reference: Method the ratios are relative to.
        target: Method shown in bold (optional).

    Returns:
        Markdown text (a heading and one table).
    """
    import pandas as pd

    _check_frame(df)
    per_task = []
    for title, rows in _panels(df):
        stats = _task_stats(rows)
        frame = pd.DataFrame(stats).T
        frame["rank"] = frame["regret"].rank(method="average")
        frame["cum_rank"] = frame["cumulative"].rank(method="average")
        ref = stats.get(reference)
        frame["ratio"] = [
            _ratio(s["regret"], ref["regret"]) if ref else math.nan for s in stats.values()
        ]
        frame["task"] = title
        per_task.append(frame)
    table = pd.concat(per_task)
    n_tasks = len(per_task)
    lines = [
        f"### All tasks ({n_tasks})",
        "",
        f"| method | tasks | mean rank (final) | mean rank (cumulative) | final ≤ {reference} | "
        f"median regret / {reference} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for method in sorted(table.index.unique()):
        m = table.loc[[method]]
        ratios = m["ratio"].astype(float)
        wins = int((ratios <= 1).sum())
        has_ref = bool(ratios.notna().any())
        name = f"**{method}**" if method == target else method
        lines.append(
            f"| {name} | {len(m)} | {m['rank'].mean():.2f} | {m['cum_rank'].mean():.2f} | "
            f"{f'{wins}/{int(ratios.notna().sum())}' if has_ref else '-'} | "
            f"{_fmt(float(ratios.median())) if has_ref else '-'} |"
        )
    return "\n".join(lines)


__all__ = [
    "CRITERIA",
    "benchmark_plot",
    "draw_mean_curves",
    "early_regret_summary",
    "markdown_summary",
    "overall_summary",
    "overhead_plot",
    "regret_plot",
]
