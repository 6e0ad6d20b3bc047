r"""One self-contained HTML report of a study: ``headstart report STUDY -o report.html``.

Everything is inside the file (figures as base64 PNG, inline CSS, a few lines of inline script),
so it opens offline, can be mailed, and needs no server. Sections, where they apply:

* summary: direction, trial counts by state, method and storage;
* best configuration (a table) and the convergence curve; several objectives: the Pareto front
  (a table, and a plot of 2 or 3 objectives) and the hypervolume curve; infeasible trials
  (constraints) are marked on the slices and the contour;
* parameter importance (:mod:`headstart.importance`), slices, contour of the two most important
  parameters and parallel coordinates (:mod:`headstart.plots`);
* transfer studies: each source's learned weight;
* user priors: each prior against where the trials went.

The inline script marks ``<body data-rendered="k/n">`` once the page loaded (``k`` of the ``n``
figures decoded) and counts script errors in ``data-errors``: what the headless-browser test reads.

Everything a user or an imported file controls (study, parameter, choice and source names,
attributes, settings) is HTML-escaped, and a Content-Security-Policy lets that one script run
(by its SHA-256) and nothing else: no other script, event handler, frame or network request, so
a name crafted to inject markup cannot run code even if an escape were missed.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
from pathlib import Path
from typing import Any

from headstart import plots
from headstart.exceptions import HeadstartError
from headstart.importance import parameter_importance

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; } td, th { padding: 0.25em 0.8em; border: 1px solid #ddd; }
th { background: #f4f4f4; text-align: left; } img { max-width: 100%; }
.note { color: #666; font-size: 0.9em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
"""
_SCRIPT = """
document.body.dataset.errors = "0";
window.addEventListener("error", function () {
  document.body.dataset.errors = String(Number(document.body.dataset.errors) + 1);
});
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var ok = images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.dataset.rendered = ok + "/" + images.length;
});
"""

_CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; script-src 'sha256-"
    + base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    + "'"
)


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(title: str, fig: Any, note: str = "") -> str:
    tail = f'<p class="note">{html.escape(note)}</p>' if note else ""
    return (
        f"<h2>{html.escape(title)}</h2>"
        f'<img alt="{html.escape(title)}" src="data:image/png;base64,{_png(fig)}">{tail}'
    )


def _cell(value: Any) -> str:
    """A table cell's text: floats to 6 significant digits, everything escaped."""
    if isinstance(value, float):
        value = f"{value:.6g}"
    return html.escape(str(value))


def _table(rows: list[tuple[str, Any]], head: tuple[str, str]) -> str:
    cells = "".join(f"<tr><td>{_cell(k)}</td><td>{_cell(v)}</td></tr>" for k, v in rows)
    return f"<table><tr><th>{_cell(head[0])}</th><th>{_cell(head[1])}</th></tr>{cells}</table>"


def _sections(study: Any) -> list[str]:
    trials = study.trials
    done = [t for t in trials if t.state == "complete"]
    counts = {s: sum(t.state == s for t in trials) for s in ("complete", "running", "failed")}
    out = [
        _table(
            [
                ("direction", ", ".join(study.directions)),
                ("method", study.settings.get("method", "gp")),
                ("trials", ", ".join(f"{v} {k}" for k, v in counts.items())),
                ("storage", "in memory" if "memory" in study.storage.url else study.storage.url),
                *((f"attribute {k}", json.dumps(v)) for k, v in study.user_attrs.items()),
            ],
            ("study", study.name),
        )
    ]
    if not done:
        return [*out, "<p>No completed trial yet: nothing to plot.</p>"]
    if not any(t.feasible for t in done):
        return [*out, "<p>No feasible trial yet (every constraint &lt;= 0): nothing to plot.</p>"]
    if len(study.directions) > 1:
        out += _pareto_sections(study)
    else:
        best = study.best_trial
        out.append("<h2>Best configuration</h2>")
        out.append(
            _table(
                [("trial", best.number), ("value", best.value), *best.params.items()],
                ("parameter", "value"),
            )
        )
        out.append(_figure("Convergence", plots.plot_convergence(study, log="auto")))
    free = [c.name for c in study.space.columns]
    shares = parameter_importance(study) if len(done) >= 3 and free else None
    if shares is not None:
        out.append(
            _figure(
                "Parameter importance",
                plots.plot_importance(study, shares=shares),
                "Total-effect Sobol indices of a GP fitted to the completed trials, as shares "
                "(see headstart.importance).",
            )
        )
    if free:
        out.append(_figure("Slices", plots.plot_slice(study)))
    if shares is not None and len(free) >= 2:
        x, y = list(shares)[:2]  # the two most important, as plot_contour's default
        out.append(_figure("Contour (GP mean)", plots.plot_contour(study, x, y)))
    if free:
        out.append(_figure("Parallel coordinates", plots.plot_parallel_coordinates(study)))
    if study.config.spec.uses_sources:
        try:
            transfer = study.transfer_report()
        except HeadstartError as e:  # e.g. a model that cannot be conditioned yet
            out.append(f"<p>Transfer report unavailable: {html.escape(str(e))}</p>")
        else:
            if transfer.warm_start is not None:
                out.append(f"<h2>Transfer</h2><p>{html.escape(transfer.summary())}</p>")
            else:
                title = "Transfer: priors" if transfer.prior is not None else "Transfer: sources"
                out.append(_figure(title, transfer.plot(), transfer.summary()))
    prior = plots.plot_prior_vs_observed(study)
    if prior is not None:
        out.append(_figure("User priors vs observed", prior))
    return out


def _pareto_sections(study: Any) -> list[str]:
    """Several objectives: the Pareto front's table, its plot (2 or 3 objectives) and the
    hypervolume curve."""
    front = study.best_trials
    names = [f"objective {j} ({d})" for j, d in enumerate(study.directions)]
    rows = "".join(
        "<tr>"
        + "".join(f"<td>{_cell(v)}</td>" for v in (t.number, *t.values, json.dumps(t.params)))
        + "</tr>"
        for t in front
    )
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ("trial", *names, "params"))
    out = [f"<h2>Pareto front ({len(front)} trials)</h2><table><tr>{head}</tr>{rows}</table>"]
    if len(study.directions) in (2, 3):
        out.append(_figure("Pareto front", plots.plot_pareto_front(study)))
    reference = plots.default_reference(study)
    note = f"Reference point: {plots.reference_description(study)}."
    out.append(_figure("Hypervolume", plots.plot_hypervolume(study, reference=reference), note))
    return out


def write_report(study: Any, path: str | Path) -> Path:
    """Write ``study``'s self-contained HTML report to ``path`` and return the path."""
    body = "\n".join(_sections(study))
    title = html.escape(f"headstart report: {study.name}")
    settings = html.escape(json.dumps(study.settings, default=str, indent=1))
    text = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}"><title>{title}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{title}</h1>{body}"
        f'<h2>Settings</h2><pre class="note">{settings}</pre>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["write_report"]
