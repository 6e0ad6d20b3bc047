"""Plots a person would rather look at than a table: convergence, and piBO's prior slices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_LOG_RANGE = 30.0  # heat maps of log acquisitions show the top 30 nats


def plot_convergence(study: Any, path: str | Path, *, optimum: float | None = None) -> Path:
    """Save a convergence plot: every completed value and the best value so far, per trial.

    With a known ``optimum`` the y axis shows the simple regret ``best - optimum`` on a log scale.
    Returns the path written.
    """
    from matplotlib.figure import Figure

    trials = [t for t in study.trials if t.state == "complete"]
    numbers = [t.number for t in trials]
    values = [t.value for t in trials]
    sign = 1.0 if study.direction == "minimize" else -1.0
    best, running = [], None
    for v in values:
        running = v if running is None else (min(running, v) if sign > 0 else max(running, v))
        best.append(running)
    fig = Figure(figsize=(6.4, 4.0), dpi=110)
    ax = fig.subplots()
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
    return path


def plot_prior_slice(
    study: Any, path: str | Path, param: str, param2: str | None = None, *, points: int = 101
) -> Path:
    """Save the prior, the plain acquisition and the piBO acquisition on a 1-D or 2-D slice.

    See :meth:`headstart.Study.acquisition_slice`; other parameters sit at the best trial.
    Returns the path written.
    """
    import numpy as np
    from matplotlib.figure import Figure

    data = study.acquisition_slice(param, param2, points=points)
    name = {"logei": "LogEI", "ei": "EI", "pi": "PI", "ucb": "UCB"}[data["kind"]]
    logged = data["kind"] == "logei" or (data["kind"] == "ucb" and data["pibo"] is not None)
    panels = [
        ("prior: log pi(x)", data["prior"]),
        (f"acquisition: {name}", data["acquisition"]),
    ]
    if data["pibo"] is not None:
        gamma = data["exponent"]
        title = (
            f"piBO: {'log softplus(UCB - best)' if data['kind'] == 'ucb' else name} "
            f"+ {gamma:.3g} log pi(x)"
            if logged
            else f"piBO: {name} x pi(x)^{gamma:.3g}"
        )
        panels.append((title, data["pibo"]))
    if param2 is None:
        fig = Figure(figsize=(6.4, 2.2 * len(panels)))
        axes = fig.subplots(len(panels), 1, sharex=True)
        x, labels = _numeric_axis(data["grid"][0])
        for ax, (title, values) in zip(np.atleast_1d(axes), panels, strict=True):
            ax.plot(x, values, lw=1.8, marker="o" if labels else None)
            ax.set_title(title, fontsize=9)
            ax.grid(alpha=0.3)
        np.atleast_1d(axes)[-1].set_xlabel(param)
        if labels:
            np.atleast_1d(axes)[-1].set_xticks(range(len(labels)), labels)
    else:
        fig = Figure(figsize=(4.2 * len(panels), 3.8))
        axes = fig.subplots(1, len(panels))
        (x, xlabels), (y, ylabels) = _numeric_axis(data["grid"][0]), _numeric_axis(data["grid"][1])
        for ax, (title, values) in zip(np.atleast_1d(axes), panels, strict=True):
            top = float(np.nanmax(values))
            floor = top - _LOG_RANGE if logged and title != panels[0][0] else None
            mesh = ax.pcolormesh(x, y, values, shading="auto", cmap="viridis", vmin=floor)
            fig.colorbar(mesh, ax=ax, fraction=0.046)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel(param)
            ax.set_ylabel(param2)
            if xlabels:
                ax.set_xticks(range(len(xlabels)), xlabels)
            if ylabels:
                ax.set_yticks(range(len(ylabels)), ylabels)
    fig.suptitle(f"{study.name}: slice through the best trial", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def _numeric_axis(values):
    """Plot coordinates for slice values: numbers as they are, categories as 0, 1, ... + labels."""
    import numpy as np

    try:
        return values.astype(float), None
    except (TypeError, ValueError):
        labels = list(dict.fromkeys(values.ravel().tolist()))
        codes = np.vectorize(labels.index)(values).astype(float)
        return codes, [str(v) for v in labels]


def plot_kernel_fit(result: Any, X: Any, y: Any, path: str | Path, *, target: str = "y") -> Path:
    """Save the fit of a kernel search's best kernel with its uncertainty.

    One input: the data, the posterior mean and a 95% band (of ``f`` and of ``y``) over the input
    range extended by 10% on each side. Several inputs: predicted against observed values with
    95% error bars. A second panel shows the best criterion value against oracle calls.
    """
    import numpy as np
    from matplotlib.figure import Figure

    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=float)
    fig = Figure(figsize=(11, 4.0), dpi=110)
    ax, ax2 = fig.subplots(1, 2, width_ratios=[2, 1])
    model = result.model
    if X.shape[1] == 1:
        lo, hi = X[:, 0].min(), X[:, 0].max()
        pad = 0.1 * (hi - lo)
        grid = np.linspace(lo - pad, hi + pad, 400)[:, None]
        mean, std_f = model.predict(grid)
        _, std_y = model.predict(grid, include_noise=True)
        ax.fill_between(grid[:, 0], mean - 1.96 * std_y, mean + 1.96 * std_y, color="C0",
                        alpha=0.12, label="95% of y")  # fmt: skip
        ax.fill_between(grid[:, 0], mean - 1.96 * std_f, mean + 1.96 * std_f, color="C0",
                        alpha=0.3, label="95% of f")  # fmt: skip
        ax.plot(grid[:, 0], mean, color="C0", label="posterior mean")
        ax.plot(X[:, 0], y, "k.", markersize=4, label="data")
        ax.set_xlabel(result.columns[0] if result.columns else "x0")
        ax.set_ylabel(target)
    else:
        mean, std = model.predict(X, include_noise=True)
        ax.errorbar(y, mean, yerr=1.96 * std, fmt=".", color="C0", ecolor="C0", alpha=0.6,
                    markersize=4, label="prediction ± 95%")  # fmt: skip
        span = [min(y.min(), mean.min()), max(y.max(), mean.max())]
        ax.plot(span, span, "k--", linewidth=1, label="y = prediction")
        ax.set_xlabel(f"observed {target}")
        ax.set_ylabel(f"predicted {target}")
    ax.set_title(
        result.expression if len(result.expression) < 70 else result.expression[:67] + "..."
    )
    ax.legend(fontsize=8)
    scores = [e.result.score for e in result.history]
    ax2.plot(np.arange(1, len(scores) + 1), np.maximum.accumulate(scores), color="C1")
    ax2.plot(np.arange(1, len(scores) + 1), scores, ".", color="C1", alpha=0.4)
    ax2.set_xlabel("kernels scored")
    ax2.set_ylabel("log evidence / N (best so far)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    return path
