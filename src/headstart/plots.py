"""Plots a person would rather look at than a table.

Every function returns a matplotlib ``Figure`` (shown inline by notebooks) and, given ``path``,
also saves it there. Log-scaled parameters are drawn on log axes, categorical ones at their
choices.

* :func:`plot_convergence` - values and best so far per trial;
* :func:`plot_importance` - GP/Sobol total-effect importance (:mod:`headstart.importance`);
* :func:`plot_slice` - the objective against each parameter;
* :func:`plot_contour` - the GP's mean over two parameters, with the trials;
* :func:`plot_parallel_coordinates` - every trial as a line across the parameters;
* :func:`plot_prior_vs_observed` - each user prior against where the trials went;
* :func:`plot_prior_slice` - piBO's prior and acquisition on a slice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from headstart._display import literal_text

_LOG_RANGE = 30.0  # heat maps of log acquisitions show the top 30 nats


def _finish(fig: Any, tight: bool = True) -> Any:
    literal_text(fig)
    if tight:
        fig.tight_layout()
    return fig


def _save(fig: Any, path: str | Path | None) -> Any:
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig


def plot_convergence(
    study: Any,
    path: str | Path | None = None,
    *,
    optimum: float | None = None,
    log: bool | str = False,
    clip: bool = True,
):
    """Every completed value and the best value so far, per trial (a ``Figure``).

    Args:
        study: The study.
        path: Where to save the PNG (optional).
        optimum: A known optimum: the y axis then shows the simple regret ``best - optimum`` on
            a log scale.
        log: A log y axis (symmetric-log when a value is <= 0); ``"auto"``: when the values are
            positive and span more than two decades.
        clip: Keep the y axis on the bulk of the values: the best-so-far curve and the values
            within 1.5 inter-decile ranges of the 10-90% deciles; values beyond (a diverged
            run) are drawn at the edge as triangles and counted in the legend.
    """
    import numpy as np
    from matplotlib.figure import Figure

    trials = [t for t in study.trials if t.state == "complete" and t.feasible]  # constraints
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
        shown, limits = np.asarray(values, dtype=float), None
        if clip and len(values) >= 5:
            q10, q90 = np.quantile(shown, [0.1, 0.9])
            spread = (q90 - q10) or abs(q90) or 1.0
            limits = (  # the fences, but no wider than the values; the best curve always in
                min(max(q10 - 1.5 * spread, shown.min()), min(best)),
                max(min(q90 + 1.5 * spread, shown.max()), max(best)),
            )
        inside = np.ones(len(shown), dtype=bool)
        if limits is not None:
            inside = (shown >= limits[0]) & (shown <= limits[1])
        ax.scatter(np.asarray(numbers)[inside], shown[inside], s=14, alpha=0.5, label="trial value")
        if not inside.all():
            above = shown > limits[1]
            edge = np.where(above, limits[1], limits[0])[~inside]
            marks = np.where(above[~inside], "^", "v")
            for m in ("^", "v"):
                sel = marks == m
                if sel.any():
                    ax.scatter(
                        np.asarray(numbers)[~inside][sel], edge[sel], marker=m, s=24,
                        color="#c44e52",
                        label=f"{int(sel.sum())} beyond the axis",
                    )  # fmt: skip
        ax.step(numbers, best, where="post", lw=2, label="best so far")
        if log == "auto":
            log = bool(len(values)) and min(values) > 0 and max(values) / min(values) > 100
        if log:
            ax.set_yscale("log" if min(values) > 0 else "symlog")
        if limits is not None:
            pad = 0.03 * (limits[1] - limits[0])
            low = limits[0] - pad if not (log and min(values) > 0) else limits[0] / 1.1
            ax.set_ylim(low, limits[1] + pad)
        ax.set_ylabel("objective value")
    n_initial = getattr(study, "n_initial", None)
    if n_initial:
        ax.axvline(n_initial - 0.5, color="grey", ls="--", lw=1, label="end of initial design")
    ax.set_xlabel("trial number")
    ax.set_title(f"{study.name} ({study.direction})")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    _finish(fig)
    return _save(fig, path)


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
    _finish(fig)
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
    _finish(fig)
    path = Path(path)
    fig.savefig(path)
    return path


# --- the study's landscape ---------------------------------------------------------------------------
def _completed(study: Any) -> list:
    from headstart.exceptions import NoCompletedTrialsError

    done = [t for t in study.trials if t.state == "complete"]
    if not done:
        raise NoCompletedTrialsError(f"Study {study.name!r} has no completed trial to plot.")
    return done


def _is_log(param: Any) -> bool:
    return bool(getattr(param, "log", False))


def _is_categorical(param: Any) -> bool:
    return hasattr(param, "choices")


def _positions(param: Any, values: list) -> tuple[list, list | None]:
    """Axis positions of ``values`` and, for a categorical parameter, its tick labels."""
    if _is_categorical(param):
        labels = [str(c) for c in param.choices]
        return [param.index(v) for v in values], labels
    return [float(v) for v in values], None


def _set_axis(ax: Any, param: Any, which: str = "x") -> None:
    if _is_categorical(param):
        labels = [str(c) for c in param.choices]
        getattr(ax, f"set_{which}ticks")(range(len(labels)), labels, rotation=30, fontsize=7)
    elif _is_log(param):
        from matplotlib.ticker import NullFormatter

        getattr(ax, f"set_{which}scale")("log")
        getattr(ax, f"{which}axis").set_minor_formatter(NullFormatter())


def _free(study: Any, params: list[str] | None) -> list[str]:
    from headstart.exceptions import InvalidSettingError

    free = [c.name for c in study.space.columns]
    if params is None:
        return free
    for name in params:
        if name not in free:
            raise InvalidSettingError(
                f"Study {study.name!r} has no free parameter {name!r}; choose from {free}."
            )
    return list(params)


def plot_importance(
    study: Any, path: str | Path | None = None, *, shares: dict[str, float] | None = None
):
    """A bar per parameter: its share of the GP's total-effect variance (:mod:`~headstart.importance`;
    pass ``shares`` when they are already computed)."""
    from matplotlib.figure import Figure

    from headstart.importance import parameter_importance

    if shares is None:
        shares = parameter_importance(study)
    fig = Figure(figsize=(6.4, 0.5 + 0.45 * len(shares)), dpi=110)
    ax = fig.subplots()
    names = list(shares)[::-1]
    ax.barh(names, [shares[n] for n in names], color="tab:blue")
    ax.set_xlabel("importance (share of total-effect Sobol indices of the GP mean)")
    ax.set_xlim(0, 1)
    ax.set_title(f"{study.name}: parameter importance")
    _finish(fig)
    return _save(fig, path)


def plot_slice(study: Any, params: list[str] | None = None, path: str | Path | None = None):
    """The objective value of every completed trial against each parameter (one panel each)."""
    from matplotlib.figure import Figure

    done = _completed(study)
    names = _free(study, params)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig = Figure(figsize=(4.0 * cols + 1.0, 3.4 * rows + 0.4), dpi=110, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    import numpy as np

    numbers = np.array([t.number for t in done])
    values = np.array([t.value for t in done], dtype=float)
    ok = np.array([t.feasible for t in done])
    label = "objective value" if len(study.directions) == 1 else "objective 0"
    for ax, name in zip(axes, names, strict=False):
        param = study.space[name]
        x, _ = _positions(param, [t.params[name] for t in done])
        x = np.asarray(x, dtype=float)
        points = ax.scatter(x[ok], values[ok], c=numbers[ok], cmap="viridis", s=16)
        if not ok.all():  # constraints: where they bite
            ax.scatter(x[~ok], values[~ok], marker="x", color="grey", s=18, label="infeasible")
            ax.legend(loc="best", fontsize=7)
        _set_axis(ax, param)
        ax.set_xlabel(name + (" (log)" if _is_log(param) else ""))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    fig.colorbar(points, ax=list(axes[: len(names)]), label="trial number", shrink=0.8)
    fig.suptitle(f"{study.name}: slices")
    return _save(_finish(fig, tight=False), path)


def plot_contour(
    study: Any,
    x: str | None = None,
    y: str | None = None,
    path: str | Path | None = None,
    *,
    points: int = 60,
):
    """The GP's posterior mean over ``x`` and ``y`` (the other parameters at the best trial's
    values; several objectives: the first objective, at the first Pareto-optimal trial) with
    the completed trials on top, infeasible ones marked; default: the two most important
    parameters."""
    import numpy as np
    from matplotlib.figure import Figure

    from headstart.exceptions import InvalidSettingError
    from headstart.importance import fit_mean, parameter_importance

    done = _completed(study)
    free = [c.name for c in study.space.columns]
    if len(free) < 2:
        raise InvalidSettingError(f"A contour needs 2 free parameters; {study.name!r} has {free}.")
    if x is None or y is None:
        ranked = list(parameter_importance(study))
        x = x or next(n for n in ranked if n != y)
        y = y or next(n for n in ranked if n != x)
    _free(study, [x, y])
    sign = -1.0 if study.direction == "minimize" else 1.0
    mean = fit_mean(study.space, [t.params for t in done], [sign * t.value for t in done])
    space = study.space
    i, j = free.index(x), free.index(y)
    axes_u = []
    for k in (i, j):
        grid = space.columns[k].grid
        axes_u.append(np.asarray(grid) if grid is not None else np.linspace(0, 1, points))
    gu, gv = np.meshgrid(*axes_u, indexing="ij")
    front = study.best_trials  # the best trial, or the Pareto front; empty if none is feasible
    best = space.encode([(front[0] if front else done[0]).params])[0]
    U = np.repeat(best[None, :], gu.size, axis=0)
    U[:, i], U[:, j] = gu.ravel(), gv.ravel()
    Z = sign * mean(U).reshape(gu.shape)
    decoded = space.decode(U)
    px, _ = _positions(space[x], [c[x] for c in decoded])
    py, _ = _positions(space[y], [c[y] for c in decoded])
    fig = Figure(figsize=(6.4, 5.0), dpi=110)
    ax = fig.subplots()
    mesh = ax.contourf(
        np.reshape(px, gu.shape), np.reshape(py, gu.shape), Z, levels=20, cmap="viridis_r"
    )
    tx, _ = _positions(space[x], [t.params[x] for t in done])
    ty, _ = _positions(space[y], [t.params[y] for t in done])
    ok = np.array([t.feasible for t in done])
    tx, ty = np.asarray(tx, dtype=float), np.asarray(ty, dtype=float)
    ax.scatter(tx[ok], ty[ok], c="white", edgecolors="black", s=18, label="trials")
    if not ok.all():
        ax.scatter(tx[~ok], ty[~ok], marker="x", c="#c44e52", s=22, label="infeasible")
    _set_axis(ax, space[x], "x")
    _set_axis(ax, space[y], "y")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    fig.colorbar(mesh, ax=ax, label="GP mean of the objective (its units)")
    ax.set_title(f"{study.name}: {y} vs {x} (others at the best trial)")
    ax.legend(loc="best", fontsize=7)
    _finish(fig)
    return _save(fig, path)


def plot_parallel_coordinates(
    study: Any, params: list[str] | None = None, path: str | Path | None = None
):
    """Every completed trial as a line through its parameters (log ones in log space), colored
    by value; the best trial is drawn thick."""
    import math

    from matplotlib import cm, colors
    from matplotlib.figure import Figure

    done = _completed(study)
    names = _free(study, params)

    def scaled(name: str, value: Any) -> float:
        param = study.space[name]
        if _is_categorical(param):
            return param.index(value) / max(len(param.choices) - 1, 1)
        low, high, v = float(param.low), float(param.high), float(value)
        if _is_log(param):
            low, high, v = math.log(low), math.log(high), math.log(v)
        return (v - low) / (high - low) if high > low else 0.5

    values = [t.value for t in done]
    norm = colors.Normalize(min(values), max(values))
    cmap = cm.viridis_r if study.direction == "minimize" else cm.viridis
    fig = Figure(figsize=(1.6 * len(names) + 2.5, 4.2), dpi=110)
    ax = fig.subplots()
    # the best trial (several objectives: the Pareto front) is drawn thick
    best = {t.number for t in study.best_trials}  # empty while nothing is feasible
    for t in sorted(done, key=lambda t: t.number in best):
        ys = [scaled(n, t.params[n]) for n in names]
        thick = t.number in best
        ax.plot(range(len(names)), ys, color=cmap(norm(t.value)), lw=3 if thick else 0.8)
    ax.set_xticks(
        range(len(names)), [n + (" (log)" if _is_log(study.space[n]) else "") for n in names]
    )
    for k, n in enumerate(names):
        param = study.space[n]
        ends = (
            [str(c) for c in (param.choices[0], param.choices[-1])]
            if _is_categorical(param)
            else [f"{param.low:.3g}", f"{param.high:.3g}"]
        )
        ax.annotate(ends[0], (k, 0), xytext=(2, -10), textcoords="offset points", fontsize=6)
        ax.annotate(ends[1], (k, 1), xytext=(2, 4), textcoords="offset points", fontsize=6)
        ax.axvline(k, color="grey", lw=0.5)
    ax.set_yticks([])
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="objective value")
    thick = "the Pareto front" if len(study.directions) > 1 else "best trial"
    ax.set_title(f"{study.name}: parallel coordinates (thick: {thick})")
    _finish(fig)
    return _save(fig, path)


def plot_prior_vs_observed(study: Any, path: str | Path | None = None):
    """For each parameter with a user prior: the prior's density and where the trials went.

    Returns ``None`` when no parameter carries a prior.
    """
    import numpy as np
    from matplotlib.figure import Figure

    from headstart.priors import Uniform

    space = study.space
    done = [t for t in study.trials if t.state == "complete"]
    with_prior = [
        (i, c.name)
        for i, c in enumerate(space.columns)
        if getattr(space[c.name], "weights", None) is not None
        or not isinstance(getattr(space[c.name], "prior", Uniform()), Uniform)
    ]
    if not with_prior:
        return None
    fig = Figure(figsize=(4.0 * len(with_prior), 3.2), dpi=110)
    axes = fig.subplots(1, len(with_prior), squeeze=False).ravel()
    u = np.linspace(0.0005, 0.9995, 400)
    for ax, (i, name) in zip(axes, with_prior, strict=True):
        U = np.full((u.size, space.dim), 0.5)  # the joint prior is a product: this is its factor
        U[:, i] = u
        density = np.exp(space.prior_log_pdf(U))
        density /= np.trapezoid(density, u)
        observed = space.encode([t.params for t in done])[:, i] if done else np.zeros(0)
        ax.hist(observed, bins=20, range=(0, 1), density=True, alpha=0.5, label="trials")
        ax.plot(u, density, lw=2, label="prior density")
        log = ", log scale" if _is_log(space[name]) else ""
        ax.set_xlabel(f"{name} (0 = low, 1 = high{log})")
        ax.legend(fontsize=7)
    fig.suptitle(f"{study.name}: user priors vs where the trials went")
    _finish(fig)
    return _save(fig, path)


# --- several objectives and constraints -----------------------------------------------------------
def default_reference(study: Any) -> list[float]:
    """A hypervolume reference point: the study's ``reference_point`` if it was created with
    one, else each objective's worst feasible value, 10% of its range further (BoTorch's
    default rule), in the objective's own direction (:func:`reference_description`)."""
    import numpy as np

    from headstart.exceptions import NoCompletedTrialsError

    given = _given_reference(study)
    if given is not None:
        return [float(r) for r in given]
    done = [t for t in study.trials if t.state == "complete" and t.feasible]
    if not done:
        raise NoCompletedTrialsError(
            f"Study {study.name!r} has no completed feasible trial; pass a reference point."
        )
    from headstart._config import to_max
    from headstart._engine.multi_output import infer_reference

    maximized = to_max(np.array([t.values for t in done], dtype=float), study.directions)
    reference = infer_reference(maximized, len(study.directions))  # maximized units
    return [float(r) for r in to_max(reference, study.directions)]  # back: the same flip


def reference_description(study: Any) -> str:
    """What :func:`default_reference` chose for ``study``, for labels."""
    if _given_reference(study) is not None:
        return "the study's reference_point"
    return "each objective's worst feasible value, 10% of its range further"


def _given_reference(study: Any):
    """The ``reference_point`` the study was created with, or ``None``."""
    return getattr(getattr(study, "config", None), "reference_point", None)


def plot_pareto_front(study: Any, path: str | Path | None = None):
    """Every completed trial in objective space, the Pareto front highlighted (2 objectives: a
    plane, the front's staircase drawn; 3: a 3-D scatter), infeasible trials as grey crosses."""
    import numpy as np
    from matplotlib.figure import Figure

    from headstart.exceptions import InvalidSettingError

    k = len(study.directions)
    if k not in (2, 3):
        raise InvalidSettingError(
            f"plot_pareto_front draws 2 or 3 objectives; study {study.name!r} has {k}."
        )
    done = _completed(study)
    front = {t.number for t in study.best_trials}
    Y = np.array([t.values for t in done], dtype=float)
    ok = np.array([t.feasible for t in done])
    on = np.array([t.number in front for t in done])
    numbers = np.array([t.number for t in done])
    labels = [f"objective {j} ({d})" for j, d in enumerate(study.directions)]
    fig = Figure(figsize=(6.4, 5.0), dpi=110)
    ax = fig.add_subplot(projection="3d" if k == 3 else None)
    cols = [Y[:, j] for j in range(k)]
    rest = ok & ~on
    points = ax.scatter(
        *[c[rest] for c in cols], c=numbers[rest], cmap="viridis", s=16, alpha=0.7,
        label="feasible trials",
    )  # fmt: skip
    if (~ok).any():
        ax.scatter(*[c[~ok] for c in cols], marker="x", color="grey", s=20, label="infeasible")
    ax.scatter(
        *[c[on] for c in cols], s=46, facecolors="none", edgecolors="#c44e52", lw=1.6,
        label=f"Pareto front ({int(on.sum())})",
    )  # fmt: skip
    if k == 2 and on.any():
        order = np.argsort(Y[on, 0] if study.directions[0] == "minimize" else -Y[on, 0])
        ax.step(Y[on, 0][order], Y[on, 1][order], where="post", color="#c44e52", lw=1)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    if k == 3:
        ax.set_zlabel(labels[2])
    if rest.any():
        fig.colorbar(points, ax=ax, label="trial number", shrink=0.7)
    ax.set_title(f"{study.name}: Pareto front")
    ax.legend(loc="best", fontsize=8)
    return _save(_finish(fig, tight=k == 2), path)


def plot_hypervolume(study: Any, path: str | Path | None = None, *, reference: Any = None):
    """The hypervolume of the feasible Pareto front after each trial (against ``reference``,
    default :func:`default_reference`): the convergence curve of several objectives."""
    import numpy as np
    from matplotlib.figure import Figure

    from headstart._objectives import hypervolume

    reference = default_reference(study) if reference is None else list(reference)
    trials = [t for t in study.trials if t.state == "complete"]
    numbers, volumes, seen = [], [], []
    for t in trials:
        if t.feasible:
            seen.append(t.values)
        numbers.append(t.number)
        front = np.array(seen, dtype=float).reshape(-1, len(study.directions))
        volumes.append(hypervolume(front, reference, study.directions))
    fig = Figure(figsize=(6.4, 4.0), dpi=110)
    ax = fig.subplots()
    ax.step(numbers, volumes, where="post", lw=2)
    n_initial = getattr(study, "n_initial", None)
    if n_initial:
        ax.axvline(n_initial - 0.5, color="grey", ls="--", lw=1, label="end of initial design")
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel("trial number")
    ax.set_ylabel("hypervolume of the feasible front")
    ref_text = ", ".join(f"{r:.3g}" for r in reference)
    ax.set_title(f"{study.name}: hypervolume (reference {ref_text})")
    ax.grid(alpha=0.3)
    return _save(_finish(fig), path)
