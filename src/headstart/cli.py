r"""The ``headstart`` command line: a demo, study management, kernel search and the benchmarks.

Data (tables, CSV, JSON) goes to stdout; messages, progress bars and errors go to stderr.
Every command takes ``--storage`` (default: ``$HEADSTART_STORAGE`` or ``sqlite:///headstart.db``).
Exit codes: 0 success, 1 a headstart error (one-line message), 2 a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from headstart._display import mask_url, redact, remember_url, safe_text
from headstart.exceptions import HeadstartError
from headstart.storage import DEFAULT_STORAGE_URL

app = typer.Typer(
    name="headstart",
    help="Bayesian optimization that starts from what you already know.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
studies_app = typer.Typer(
    help="List, inspect, export and delete stored studies.", no_args_is_help=True
)
app.add_typer(studies_app, name="studies")
kernels_app = typer.Typer(
    help="Search a GP kernel structure for a data set (BOSOT).", no_args_is_help=True
)
app.add_typer(kernels_app, name="kernels")


def _remember_storage(url: str) -> str:
    remember_url(url)  # whatever a command prints, this password is masked
    return url


StorageOpt = Annotated[
    str,
    typer.Option(
        "--storage",
        envvar="HEADSTART_STORAGE",
        help="SQLAlchemy URL of the storage, e.g. sqlite:///headstart.db or "
        "postgresql+psycopg://user:pw@host/db (env: HEADSTART_STORAGE).",
        show_default=mask_url(DEFAULT_STORAGE_URL),  # never the password of $HEADSTART_STORAGE
        callback=_remember_storage,
    ),
]

_state = {"debug": False}


class _Redacting:
    """A text stream that masks every password headstart has seen (:mod:`headstart._display`)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(redact(text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _console(stderr: bool = True):
    """The console every command prints through. Markup is off (a study named ``[/]`` is text,
    not a style tag), strings lose their control characters, and the stream masks passwords."""
    from rich.console import Console

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs):
            return super().render_str(safe_text(text), **kwargs)

    stream = sys.stderr if stderr else sys.stdout
    return SafeConsole(file=_Redacting(stream), markup=False, emoji=False)


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks on errors.")] = False,
) -> None:
    _state["debug"] = debug


# --- demo -------------------------------------------------------------------------------------------
@app.command()
def demo(
    storage: StorageOpt = DEFAULT_STORAGE_URL,
    function: Annotated[
        str, typer.Option(help="Built-in test function: branin, hartmann3, hartmann6, forrester.")
    ] = "branin",
    trials: Annotated[int, typer.Option(min=1, help="Number of evaluations.")] = 30,
    seed: Annotated[int, typer.Option(help="Seed of the study (same seed, same run).")] = 0,
    plot: Annotated[Path, typer.Option(help="Where to save the convergence plot (PNG).")] = Path(
        "headstart_demo.png"
    ),
    name: Annotated[
        str | None, typer.Option(help="Study name (default: demo-<function>-<n>, a fresh one).")
    ] = None,
) -> None:
    """Optimize a built-in test function with GP-BO, show progress, and save a convergence plot."""
    import headstart as hs
    from headstart.benchmarks.functions import get_task
    from headstart.plots import plot_convergence
    from headstart.storage import get_storage

    task = get_task(function)
    store = get_storage(storage)
    if name is None:
        existing = {s.name for s in store.list_studies()}
        n = 1
        while f"demo-{task.name}-{n}" in existing:
            n += 1
        name = f"demo-{task.name}-{n}"
    study = hs.create_study(
        name,
        task.space,
        direction="minimize",
        storage=store,
        seed=seed,
        budget=trials,
        deterministic=True,  # test functions are noise-free
    )
    console = _console()
    console.print(
        f"Optimizing {task.name} ({task.space.dim}-D, known minimum {task.optimum:.6g}) "
        f"with GP-BO for {trials} trials (first {study.n_initial} from a Sobol design)."
    )
    study.optimize(task.objective, trials, show_progress=True)
    best = study.best_trial
    plot_convergence(study, plot, optimum=task.optimum)
    console.print(f"Best value {best.value:.6g} (regret {best.value - task.optimum:.3g})")
    console.print(f"Best params {best.params}")
    console.print(f"Convergence plot: {plot}")
    console.print(f"Study {study.name} is stored in {store.url}; inspect it with")
    console.print(f"  headstart studies show {study.name} --storage {store.url}")


# --- methods ---------------------------------------------------------------------------------------
@app.command()
def methods(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print JSON (name, sources, options with defaults).")
    ] = False,
) -> None:
    """List the methods of create_study(method=...): what each learns from, and its options.

    Options are passed to create_study as keywords (create_study(..., method="scaml",
    fit_factr=1e7)) or as options={...}; they are stored with the study.
    """
    from rich.table import Table

    from headstart._methods import get_method, method_names

    rows = []
    for name in method_names():
        spec = get_method(name)
        defaults = spec.options().to_json()
        rows.append(
            {
                "method": name,
                "sources": spec.sources,
                "description": spec.description,
                "options": defaults,
            }
        )
    if json_output:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table("method", "sources", "options (defaults)", "description")
    for row in rows:
        options = ", ".join(f"{k}={v!r}" for k, v in row["options"].items()) or "-"
        table.add_row(row["method"], row["sources"], options, row["description"])
    _console(stderr=False).print(table)


# --- studies ----------------------------------------------------------------------------------------
@studies_app.command("list")
def studies_list(storage: StorageOpt = DEFAULT_STORAGE_URL) -> None:
    """List the studies in the storage with their trial counts and best values."""
    from rich.table import Table

    from headstart.storage import get_storage

    summaries = get_storage(storage, create=False).list_studies()
    table = Table("name", "direction", "trials", "complete", "best value", "created")
    for s in summaries:
        best = "-" if s.best_value is None else f"{s.best_value:.6g}"
        table.add_row(
            s.name,
            s.direction,
            str(s.n_trials),
            str(s.n_complete),
            best,
            s.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    _console(stderr=False).print(table)
    if not summaries:
        _console().print(f"No studies in {mask_url(storage)}.")


@studies_app.command("show")
def studies_show(
    name: Annotated[str, typer.Argument(help="Name of the study.")],
    storage: StorageOpt = DEFAULT_STORAGE_URL,
    last: Annotated[int, typer.Option(help="How many of the latest trials to list.")] = 10,
    plot: Annotated[
        Path | None, typer.Option(help="Also save a convergence plot (PNG) here.")
    ] = None,
    weights_plot: Annotated[
        Path | None,
        typer.Option(
            help="Transfer studies: also save a bar plot (PNG) of each source's learned weight."
        ),
    ] = None,
) -> None:
    """Show a study: its space, settings, best trial, latest trials and, for transfer-learning
    studies, each source's learned weight."""
    from rich.table import Table

    import headstart as hs

    study = hs.load_study(name, storage)
    out = _console(stderr=False)
    out.print(f"{study.name} ({', '.join(study.directions)}) in {study.storage.url}")
    settings = dict(study.settings)
    transfer = settings.pop("transfer", None)
    out.print(f"settings: {json.dumps(settings)}")
    space = Table("parameter", "definition")
    for pname, p in study.space.items():
        space.add_row(pname, json.dumps(p.to_json()))
    out.print(space)
    trials = study.trials
    counts = {
        s: sum(t.state == s for t in trials) for s in ("complete", "running", "failed", "waiting")
    }
    out.print("trials: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    several = len(study.directions) > 1
    feasible = [t for t in trials if t.state == "complete" and t.feasible]
    if study.config.constrained:
        out.print(f"feasible (every constraint <= 0): {len(feasible)} of {counts['complete']}")
    if several and feasible:
        _show_front(study, out)
    elif feasible:
        best = study.best_trial
        out.print(f"best: trial {best.number}, value {best.value:.6g}, params {best.params}")
    table = Table("number", "state", "values" if several else "value", "params", "source")
    if study.config.constrained:
        table.add_column("constraints")
    for t in trials[-last:]:
        value = "-" if t.values is None else ", ".join(f"{v:.6g}" for v in t.values)
        row = [str(t.number), t.state, value, json.dumps(t.params), t.source]
        if study.config.constrained:
            row.append(
                "-" if t.constraints is None else ", ".join(f"{c:.4g}" for c in t.constraints)
            )
        table.add_row(*row)
    out.print(table)
    if study.belief is not None:
        out.print(
            f"piBO: the next suggestion weights the priors by pi(x)^{study.prior_weight():.3g} "
            "(beta / n, decaying with every step)"
        )
    kernel = (study.settings.get("options") or {}).get("kernel", "matern")
    if kernel != "matern":
        current = study.kernel_expression or "(not fitted yet)"
        out.print(f"GP kernel ({'searched by BOSOT' if kernel == 'auto' else 'given'}): {current}")
    if plot is not None:
        from headstart.plots import plot_convergence, plot_hypervolume

        (plot_hypervolume if several else plot_convergence)(study, plot)
        _console().print(f"{'Hypervolume' if several else 'Convergence'} plot: {plot}")
    if (transfer or study.config.spec.uses_sources) and study.config.multi_output:
        sources = ", ".join((transfer or {}).get("sources", []))
        out.print(f"transfer: one model per objective and constraint, from {sources}")
    elif transfer or study.config.spec.uses_sources:
        _show_transfer(study, out, weights_plot)
    elif weights_plot is not None:
        raise typer.BadParameter(
            f"study {name!r} does not use transfer learning; --weights-plot needs a study created "
            "with transfer_from=... (method='scaml', 'mphd', ...).",
            param_hint="--weights-plot",
        )


@studies_app.command("prior-plot")
def studies_prior_plot(
    name: Annotated[str, typer.Argument(help="Name of the study.")],
    out: Annotated[Path, typer.Argument(help="PNG file to write.")],
    param: Annotated[str, typer.Option(help="Parameter to vary along the slice.")],
    param2: Annotated[
        str | None, typer.Option(help="Second parameter, for a 2-D slice (heat maps).")
    ] = None,
    points: Annotated[int, typer.Option(min=5, help="Grid points per varied parameter.")] = 101,
    storage: StorageOpt = DEFAULT_STORAGE_URL,
) -> None:
    """Plot the prior, the plain acquisition and the piBO acquisition on a 1-D or 2-D slice
    through the best trial (every other parameter at its best value)."""
    import headstart as hs
    from headstart.plots import plot_prior_slice

    study = hs.load_study(name, storage)
    plot_prior_slice(study, out, param, param2, points=points)
    _console().print(f"Prior / acquisition slice: {out}")


def _show_front(study, out) -> None:
    """Print a multi-objective study's Pareto front and its hypervolume."""
    from rich.table import Table

    from headstart.plots import default_reference, reference_description

    front = study.best_trials
    names = [f"{j}: {d}" for j, d in enumerate(study.directions)]
    table = Table("trial", *names, "params", title=f"Pareto front ({len(front)} trials)")
    for t in front:
        table.add_row(str(t.number), *(f"{v:.6g}" for v in t.values), json.dumps(t.params))
    out.print(table)
    reference = default_reference(study)
    out.print(
        f"hypervolume {study.hypervolume(reference):.6g} (reference "
        f"{', '.join(f'{r:.4g}' for r in reference)}: {reference_description(study)})"
    )


def _show_transfer(study, out, weights_plot: Path | None) -> None:
    """Print (and optionally plot) the transfer report of a transfer-learning study."""
    from rich.table import Table

    report = study.transfer_report()
    if report.prior is not None or report.warm_start is not None:
        out.print(f"transfer ({report.method}): {report.summary()}")
    else:
        head = f"transfer ({report.method}) from {len(report.weights)} sources"
        if report.residual_variance is not None:
            head += f", residual variance {report.residual_variance:.4g}"
        out.print(head + f", conditioned on {report.n_trials} trials:")
        table = Table("source", "weight")
        for source, weight in report.ranked():
            table.add_row(source, f"{weight:.4g}")
        out.print(table)
    if weights_plot is not None and report.warm_start is not None:
        _console().print("A warm start learns no weights: no plot written.")
    elif weights_plot is not None:
        report.plot(weights_plot)
        _console().print(f"Transfer plot: {weights_plot}")


@studies_app.command("export")
def studies_export(
    name: Annotated[str, typer.Argument(help="Name of the study.")],
    storage: StorageOpt = DEFAULT_STORAGE_URL,
    csv: Annotated[
        Path | None,
        typer.Option(
            "--csv",
            help="Write the trials as CSV (one row per trial, params_<name> columns) to this file "
            "('-' = stdout). add_trials and transfer_from read it back.",
        ),
    ] = None,
    as_json: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the whole study (space, direction, trials, attributes) as one JSON "
            "document to this file ('-' = stdout). add_trials, transfer_from and `headstart "
            "import json` read it back.",
        ),
    ] = None,
) -> None:
    """Export a study's trials as CSV (default: to stdout) and/or as a JSON document."""
    import headstart as hs

    study = hs.load_study(name, storage)
    if as_json is not None:
        doc = json.dumps(study.export(), indent=1, default=str)
        if str(as_json) == "-":
            sys.stdout.write(doc + "\n")
        else:
            as_json.write_text(doc + "\n", encoding="utf-8")
            _console().print(f"Wrote study {name!r} ({len(study.trials)} trials) to {as_json}")
    if csv is None and as_json is not None:
        return
    frame = study.trials_dataframe()
    if csv is None or str(csv) == "-":
        frame.to_csv(sys.stdout, index=False)
    else:
        frame.to_csv(csv, index=False)
        _console().print(f"Wrote {len(frame)} trials to {csv}")


@studies_app.command("delete")
def studies_delete(
    name: Annotated[str, typer.Argument(help="Name of the study.")],
    storage: StorageOpt = DEFAULT_STORAGE_URL,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a study and all its trials."""
    import headstart as hs

    study = hs.load_study(name, storage)  # fails early, with the list of names, if unknown
    if not yes and not typer.confirm(f"Delete study {name!r} and its {len(study.trials)} trials?"):
        raise typer.Exit(1)
    hs.delete_study(name, storage)
    _console().print(f"Deleted study {name!r} from {study.storage.url}.")  # password masked


@studies_app.command("fail-stale")
def studies_fail_stale(
    name: Annotated[str, typer.Argument(help="Name of the study.")],
    older_than: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Fail running trials started (or, with heartbeats, last beating) more than this "
            "many seconds ago.",
        ),
    ],
    storage: StorageOpt = DEFAULT_STORAGE_URL,
    reenqueue: Annotated[
        bool, typer.Option(help="Enqueue each failed trial's configuration again (once).")
    ] = False,
) -> None:
    """Fail the running trials of workers that are gone (killed without heartbeats, say): every
    later ask treats a running trial as a pending point, so one left behind steers the search.
    A trial whose worker is alive but slower than --older-than is failed too (its tell then
    raises), and without heartbeats the age of a claimed enqueued trial counts from when it was
    enqueued: choose an age longer than any evaluation."""
    from headstart.storage import get_storage

    store = get_storage(storage, create=False)
    record = store.get_study(name)
    failed = store.fail_stale_trials(
        record.study_id, older_than, reenqueue=reenqueue, silent=True, reason="stale"
    )
    numbers = ", ".join(str(t.number) for t in failed) or "none"
    _console().print(f"Failed {len(failed)} stale running trial(s) of {name!r}: {numbers}.")


# --- report -------------------------------------------------------------------------------------
@app.command()
def report(
    name: Annotated[str, typer.Argument(help="Name of the study.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path(
        "report.html"
    ),
    storage: StorageOpt = DEFAULT_STORAGE_URL,
) -> None:
    """Write one self-contained HTML report of a study (opens offline): convergence, best
    configuration, parameter importance, slices, contour, parallel coordinates, transfer
    weights and priors vs observed values."""
    import headstart as hs
    from headstart.report import write_report

    path = write_report(hs.load_study(name, storage), output)
    _console().print(f"Report: {path}")


# --- import -------------------------------------------------------------------------------------
import_app = typer.Typer(
    help="Copy finished evaluations from Optuna, CSV or JSON exports into the storage, as "
    "studies that transfer_from can name.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


def _create_imported(
    name: str,
    space,
    direction: str,
    storage: str,
    trials,
    user_attrs: dict | None = None,
    *,
    directions: list[str] | None = None,
    constrained: bool = False,
) -> None:
    """A new study ``name`` holding ``trials`` (see ``Study.add_trials``) and ``user_attrs``
    (several objectives: ``directions``; ``constrained``: the rows carry constraints)."""
    import warnings

    import headstart as hs
    from headstart.storage import get_storage

    store = get_storage(storage)
    objectives = {"directions": directions} if directions else {"direction": direction}
    try:
        study = hs.create_study(
            name,
            space,
            **objectives,
            constraints=constrained,
            storage=store,
            method="random",
            load_if_exists=False,
        )
    except hs.DuplicatedStudyError as e:
        raise hs.DuplicatedStudyError(
            f"A study named {name!r} already exists in {store.url}; pass --name (or --prefix) to "
            "import under another name, or delete it first."
        ) from e
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", hs.HeadstartWarning)
        added = study.add_trials(trials)
    for key, value in (user_attrs or {}).items():
        study.set_user_attr(key, value)
    failed = sum(t.state == "failed" for t in added)
    _console().print(
        f"Imported {len(added) - failed} complete and {failed} failed trials into study {name!r} "
        f"({store.url})."
    )
    for w in caught:
        _console().print(str(w.message), style="yellow")


@import_app.command("optuna")
def import_optuna(
    source: Annotated[
        str, typer.Option("--from", help="The Optuna storage URL, e.g. sqlite:///optuna.db.")
    ],
    study: Annotated[
        list[str] | None,
        typer.Option("--study", help="An Optuna study to import (repeatable; default: all)."),
    ] = None,
    prefix: Annotated[str, typer.Option(help="Prefix of the imported studies' names.")] = "",
    storage: StorageOpt = DEFAULT_STORAGE_URL,
) -> None:
    """Copy Optuna studies' complete and failed trials, with their user attributes and the
    study's, into headstart studies of the same names. The search space is the parameters every
    completed trial has (Optuna's distributions); pruned and running trials are skipped (and
    counted). Multi-objective studies keep every objective's values and direction; trials with
    constraint values (Optuna's constraints_func) keep them, and a completed trial without them
    in such a study counts as skipped. The Optuna storage is only read."""
    import optuna

    from headstart.integrations.optuna_space import space_from_distributions
    from headstart.sources import from_optuna
    from headstart.sources._optuna import trial_constraints

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for found in from_optuna(source, study).studies():
        complete = found.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if not complete:
            _console().print(f"Skipped {found.study_name!r}: no completed trial.")
            continue
        space = space_from_distributions(optuna.search_space.intersection_search_space(complete))
        directions = ["maximize" if d.name == "MAXIMIZE" else "minimize" for d in found.directions]
        constrained = any(trial_constraints(t) is not None for t in complete)
        rows = []
        for t in found.get_trials(deepcopy=False):
            whole = all(n in t.params for n in space)
            cons = trial_constraints(t)
            if constrained and t.state.name == "COMPLETE" and cons is None:
                whole = False  # no constraint values to tell: skipped as partial
            rows.append(
                {  # a trial without the whole configuration counts as skipped ("partial")
                    "params": {n: t.params.get(n) for n in space},
                    "values": t.values,
                    "constraints": cons if constrained else None,
                    "state": t.state.name if whole else "partial",
                    "user_attrs": t.user_attrs,
                }
            )
        _create_imported(
            prefix + found.study_name,
            space,
            directions[0],
            storage,
            rows,
            found.user_attrs,
            directions=directions if len(directions) > 1 else None,
            constrained=constrained,
        )


@import_app.command("csv")
def import_csv(
    file: Annotated[
        Path,
        typer.Argument(
            help="One row per evaluation: a column per parameter "
            "(or params_<name>) and a 'value' column."
        ),
    ],
    space: Annotated[
        Path,
        typer.Option(
            "--space",
            help="JSON file of the search space: SearchSpace.to_json(), e.g. "
            '{"params": {"x": {"type": "float", "low": 0, "high": 1}}}, or a study export.',
        ),
    ],
    name: Annotated[str | None, typer.Option(help="Study name (default: the file's stem).")] = None,
    direction: Annotated[str, typer.Option(help="minimize or maximize.")] = "minimize",
    storage: StorageOpt = DEFAULT_STORAGE_URL,
) -> None:
    """Copy a CSV file of finished evaluations into a new headstart study."""
    from headstart.sources._export import read_json_file
    from headstart.sources._tables import read_csv_file
    from headstart.space import SearchSpace

    frame = read_csv_file(file)  # missing, empty or binary files: one clear error, nothing stored
    spec = read_json_file(space)
    parsed = SearchSpace.from_json(spec.get("space", spec) if isinstance(spec, dict) else spec)
    _create_imported(name or file.stem, parsed, direction, storage, frame)


@import_app.command("json")
def import_json(
    file: Annotated[Path, typer.Argument(help="A `headstart studies export NAME --json` file.")],
    name: Annotated[
        str | None, typer.Option(help="Study name (default: the exported one).")
    ] = None,
    storage: StorageOpt = DEFAULT_STORAGE_URL,
) -> None:
    """Copy an exported study (from another storage or machine) into this storage: its complete
    and failed trials and the study's and trials' user attributes."""
    from headstart.sources._export import read_export
    from headstart.space import SearchSpace

    doc = read_export(file)
    space = SearchSpace.from_json(doc["space"])
    name = name or doc["name"]
    _create_imported(name, space, doc["direction"], storage, doc["trials"], doc.get("user_attrs"))


# --- worker -------------------------------------------------------------------------------------
def _load_objective(spec: str):
    """``module:function`` -> the function (the module is imported as Python would)."""
    import importlib

    from headstart.exceptions import InvalidSettingError

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidSettingError(
            f"--objective must look like 'module:function' (e.g. 'train:objective'); got {spec!r}."
        )
    if os.getcwd() not in sys.path:  # console scripts do not put the working directory first
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InvalidSettingError(
            f"Cannot import {module_name!r} for --objective ({e}); run the worker from the "
            "directory that holds it, or put it on PYTHONPATH."
        ) from None
    func = getattr(module, attr, None)
    if not callable(func):
        raise InvalidSettingError(f"{module_name!r} has no function {attr!r} for --objective.")
    return func


@app.command()
def worker(
    study: Annotated[str, typer.Option("--study", help="Name of the study to work on.")],
    objective: Annotated[
        str,
        typer.Option(
            help="The objective as module:function; it receives the configuration dict and "
            "returns the value (the module is imported from the working directory)."
        ),
    ],
    storage: StorageOpt = DEFAULT_STORAGE_URL,
    n_trials: Annotated[int, typer.Option(min=1, help="Evaluations this worker runs.")] = 10,
    timeout: Annotated[
        float | None, typer.Option(help="Start no new trial after this many seconds.")
    ] = None,
    heartbeat_interval: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Seconds between heartbeats of this worker's running trial (default: the "
            "study's, or 10 s when it sets none).",
        ),
    ] = None,
    grace_period: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Seconds without a heartbeat after which a running trial is failed by the next "
            "ask of any worker (default: the study's, or 60 s when it sets none).",
        ),
    ] = None,
) -> None:
    """Run one worker loop (ask, evaluate, tell) on a shared study.

    Start several, on one machine or many, against the same database (PostgreSQL for many
    machines): each ask reserves its own trial, so workers never evaluate the same configuration,
    and heartbeats fail the trials of workers that die (the study's create_study(
    heartbeat_interval=...), else 10 s beats and a 60 s grace period).
    """
    import headstart as hs
    from headstart._config import worker_heartbeat
    from headstart.storage import get_storage

    func = _load_objective(objective)
    store = get_storage(storage, create=False)
    beats = {"heartbeat_interval": heartbeat_interval, "grace_period": grace_period}
    if heartbeat_interval is None and grace_period is None:
        beats = worker_heartbeat(store.get_study(study).settings)
    target = hs.load_study(study, store, **beats)
    target.optimize(func, n_trials, timeout=timeout, show_progress=sys.stderr.isatty())
    done = [t for t in target.trials if t.state == "complete"]
    _console().print(f"Worker finished: study {study!r} has {len(done)} completed trials.")


# --- kernels ------------------------------------------------------------------------------------
@kernels_app.command("example")
def kernels_example(
    name: Annotated[str, typer.Argument(help="The data set: 'airline'.")] = "airline",
    output: Annotated[
        Path, typer.Option("--output", "-o", help="CSV file to write ('-' = stdout).")
    ] = Path("-"),
) -> None:
    """Write a bundled example data set as CSV, to try `headstart kernels search` on: 'airline'
    is the Box-Jenkins monthly airline passengers 1949-1960 (columns year, passengers)."""
    from importlib.resources import files

    from headstart.exceptions import InvalidSettingError

    bundled = {"airline": "airline.csv"}
    if name not in bundled:
        raise InvalidSettingError(f"No example data set {name!r}; choose from {sorted(bundled)}.")
    text = files("headstart.kernels").joinpath("data", bundled[name]).read_text(encoding="utf-8")
    if str(output) == "-":
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        _console().print(f"Wrote {name} ({text.count(chr(10)) - 1} rows) to {output}")


@kernels_app.command("search")
def kernels_search(
    data: Annotated[Path, typer.Argument(help="CSV file with a header row; numeric columns.")],
    target: Annotated[str, typer.Option(help="Name of the column to model.")],
    column: Annotated[
        list[str] | None,
        typer.Option(help="Input column (repeat for several; default: every other column)."),
    ] = None,
    budget: Annotated[int, typer.Option(min=1, help="Kernels to score (oracle calls).")] = 50,
    space: Annotated[
        str,
        typer.Option(
            help="Base kernels on every input: 'full' (SE, LIN, PER, RQ) or 'se-rq' (SE, RQ), "
            "joined by + and *."
        ),
    ] = "full",
    method: Annotated[
        str,
        typer.Option(
            help="Search strategy: bosot (default; the paper plus simplification, cost-aware and local proposals), bosot-paper (the paper as published), greedy or random."
        ),
    ] = "bosot",
    criterion: Annotated[
        str, typer.Option(help="laplace (log evidence / N, default) or bic (BIC / N).")
    ] = "laplace",
    restarts: Annotated[
        int, typer.Option(min=1, help="MAP restarts per scored kernel (paper: 10).")
    ] = 10,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Processes scoring kernels in parallel; BOSOT then proposes that many kernels "
            "per step.",
        ),
    ] = 1,
    ea_steps: Annotated[
        int, typer.Option(min=1, help="BOSOT's evolutionary-algorithm generations per step.")
    ] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the search (same seed, same run).")] = 0,
    plot: Annotated[
        Path | None,
        typer.Option(help="PNG of the fit with its uncertainty (default: <data>_kernel.png)."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON to stdout.")
    ] = False,
) -> None:
    """Find the kernel with the highest Laplace evidence for TARGET given the other columns.

    Prints the best expression (e.g. SE[0] * PER[0] + LIN[0]; the number in brackets is the
    position of the input column, counting from 0), its evidence and its fitted
    hyperparameters (on inputs scaled to [0, 1] and a standardised target), and saves a plot of
    the fit with its uncertainty. Inputs are every column but TARGET, or the --column ones.
    """
    from headstart.kernels.api import load_csv, search
    from headstart.plots import plot_kernel_fit

    X, y, columns = load_csv(data, target, column)
    result = search(
        X, y, budget=budget, space=space, method=method, criterion=criterion,
        restarts=restarts, workers=workers, seed=seed, ea_steps=ea_steps, columns=columns,
    )  # fmt: skip
    plot = plot or data.with_name(f"{data.stem}_kernel.png")
    plot_kernel_fit(result, X, y, plot, target=target)
    if json_out:
        payload = {
            "expression": result.expression,
            "score": result.score,
            "log_evidence": result.log_evidence,
            "hyperparameters": result.hyperparameters,
            "columns": columns,
            "calls": len(result.history),
        }
        typer.echo(json.dumps(payload, indent=2))
    else:
        from rich.table import Table

        legend = ", ".join(f"[{i}] = {c}" for i, c in enumerate(columns))
        typer.echo(f"best kernel: {result.expression}    ({legend})")
        typer.echo(
            f"log evidence / N: {result.score:.4f}   log evidence: {result.log_evidence:.2f}   "
            f"({len(result.history)} kernels scored)"
        )
        table = Table("hyperparameter", "value", title="MAP hyperparameters (scaled data)")
        for name, value in result.hyperparameters.items():
            table.add_row(name, f"{value:.4g}")
        _console(stderr=False).print(table)
    _console().print(f"Saved the fit to {plot}.")


def _mount_bench() -> None:
    try:
        from headstart.bench_cli import bench_app
    except ImportError:  # pragma: no cover - the benchmark extras are part of the package
        return
    app.add_typer(bench_app, name="bench", help="Run benchmarks: methods x tasks x seeds.")


_mount_bench()


def main() -> None:
    """Entry point of the ``headstart`` script."""
    try:
        app()
    except HeadstartError as e:
        if _state["debug"]:
            raise
        from rich.text import Text

        _console().print(Text.assemble(("error: ", "red"), safe_text(str(e))))
        sys.exit(1)


if __name__ == "__main__":  # python -m headstart.cli
    main()
