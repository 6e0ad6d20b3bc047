"""The HTML report, rendered by a real headless Chromium; plots, importance and their inputs."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import headstart as hs
from headstart import plots
from headstart.importance import parameter_importance, sobol_total_effects
from headstart.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("HEADSTART_REQUIRE_CHROMIUM"),
    reason="no chromium (CI installs Debian's and sets HEADSTART_REQUIRE_CHROMIUM=1)",
)


def objective(p) -> float:
    return (math.log10(p["lr"]) + 3) ** 2 + 0.1 * abs(p["layers"] - 3) + 0.5 * (p["opt"] == "sgd")


SPACE = hs.SearchSpace(
    {
        "lr": hs.Float(1e-5, 1e-1, log=True, prior=hs.Normal(1e-3, 1.0)),
        "layers": hs.Int(1, 8),
        "opt": hs.Categorical(["adam", "sgd"]),
    }
)


@pytest.fixture(scope="module")
def transfer_study():
    old = hs.create_study("old", SPACE, storage=None, method="random", seed=1)
    old.optimize(objective, 15, show_progress=False)
    study = hs.create_study(
        "new", SPACE, storage=old.storage, method="scaml", transfer_from=["old"], seed=0
    )
    study.optimize(objective, 8, show_progress=False)
    return study


def _chromium(*args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None, "HEADSTART_REQUIRE_CHROMIUM is set but chromium is missing"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    return subprocess.run(
        [CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True
    )


@needs_chromium
def test_the_report_renders_every_figure_in_chromium_offline(tmp_path, transfer_study):
    path = write_report(transfer_study, tmp_path / "report.html")
    text = path.read_text()
    assert "http://" not in text and "https://" not in text  # self-contained: no network
    n_figures = text.count("<img ")
    assert n_figures == 7  # convergence, importance, slices, contour, parallel, weights, prior
    dom = _chromium("--dump-dom", path.as_uri()).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert f'data-rendered="{n_figures}/{n_figures}"' in body  # every image decoded
    assert 'data-errors="0"' in body  # no script error
    shot = tmp_path / "shot.png"
    _chromium("--window-size=1200,4000", f"--screenshot={shot}", path.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.std() > 0.05  # not blank
    lower_half = pixels[pixels.shape[0] // 2 :]
    assert (lower_half < 0.9).mean() > 0.01  # figures further down were drawn too


def test_a_study_without_completed_trials_still_gets_a_report(tmp_path):
    study = hs.create_study("empty", SPACE, storage=None)
    study.ask()
    text = write_report(study, tmp_path / "r.html").read_text()
    assert "No completed trial yet" in text and "<img" not in text


def test_total_effects_match_the_closed_form_of_a_linear_function():
    space = hs.SearchSpace({"a": hs.Float(0, 1), "b": hs.Float(0, 1)})
    effects = sobol_total_effects(lambda U: 3.0 * U[:, 0] + U[:, 1], space, n=20000)
    assert effects["a"] == pytest.approx(0.9, abs=0.02)  # a_i^2 / sum a_j^2 for uniform inputs
    assert effects["b"] == pytest.approx(0.1, abs=0.01)
    interaction = sobol_total_effects(lambda U: U[:, 0] * U[:, 1], space, n=20000)
    # f = ab: Var = 7/144, E[Var(f | b)] = (1/12) E[b^2] = 1/36: S_T = (1/36) / (7/144) = 4/7
    assert interaction["a"] == pytest.approx(4 / 7, abs=0.03)


def test_importance_of_a_study_ranks_the_parameter_that_matters_first():
    space = hs.SearchSpace({"big": hs.Float(0, 1), "small": hs.Float(0, 1), "none": hs.Int(0, 5)})
    study = hs.create_study("imp", space, storage=None, method="random", seed=0)
    study.optimize(lambda p: 5 * p["big"] ** 2 + 0.5 * p["small"], 30, show_progress=False)
    shares = parameter_importance(study)
    assert list(shares) == ["big", "small", "none"]
    assert sum(shares.values()) == pytest.approx(1.0) and shares["none"] < 0.02
    raw = parameter_importance(study, raw=True)
    # closed form: Var(5 big^2) = 25 (1/5 - 1/9) = 2.222, Var(0.5 small) = 0.0208: S_T = 0.991
    assert raw["big"] == pytest.approx(0.991, abs=0.03)
    with pytest.raises(hs.NoCompletedTrialsError, match="at least 3"):
        parameter_importance(hs.create_study("e", space, storage=None))


def test_plots_return_figures_with_log_axes_for_log_parameters(tmp_path, transfer_study):
    from matplotlib.figure import Figure

    figures = {
        "slice": plots.plot_slice(transfer_study),
        "contour": plots.plot_contour(transfer_study, "lr", "layers"),
        "parallel": plots.plot_parallel_coordinates(transfer_study),
        "importance": plots.plot_importance(transfer_study, path=tmp_path / "imp.png"),
        "prior": plots.plot_prior_vs_observed(transfer_study),
        "convergence": plots.plot_convergence(transfer_study),
    }
    assert all(isinstance(f, Figure) for f in figures.values())
    assert (tmp_path / "imp.png").stat().st_size > 1000
    lr_slice = figures["slice"].axes[0]
    assert lr_slice.get_xscale() == "log" and lr_slice.get_xlabel() == "lr (log)"
    assert figures["slice"].axes[1].get_xscale() == "linear"
    assert figures["contour"].axes[0].get_xscale() == "log"
    lows = [t.get_text() for t in figures["slice"].axes[2].get_xticklabels()]
    assert lows == ["adam", "sgd"]
    with pytest.raises(hs.InvalidSettingError, match="no free parameter 'x1'"):
        plots.plot_slice(transfer_study, ["x1"])
    flat = hs.create_study("flat", hs.SearchSpace({"x": hs.Float(0, 1)}), storage=None)
    assert plots.plot_prior_vs_observed(flat) is None
    assert np.isfinite(figures["contour"].axes[0].get_xlim()).all()


def test_contour_colours_the_objective_in_its_own_units():
    """Issue 27: values 0.039-0.37 were coloured as -0.47 to 3.69 (the standardized GP mean)."""
    from headstart.importance import fit_mean

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})

    def f(p):
        return 0.04 + 0.1 * p["x"] + 0.23 * p["y"] ** 2

    study = hs.create_study("known", space, storage=None, method="random", seed=3)
    study.optimize(f, 30, show_progress=False)
    values = [t.value for t in study.trials]
    mean = fit_mean(space, [t.params for t in study.trials], values)
    grid = np.array([[a, b] for a in np.linspace(0, 1, 7) for b in np.linspace(0, 1, 7)])
    truth = [f(c) for c in space.decode(grid)]
    np.testing.assert_allclose(mean(grid), truth, atol=0.01 * (max(values) - min(values)) + 1e-3)
    fig = plots.plot_contour(study, "x", "y")
    low, high = fig.axes[1].get_ylim()  # the colour bar: f spans [0.04, 0.37] on the plot
    assert 0.0 <= low <= 0.06 and 0.3 <= high <= 0.42, (low, high)


def test_convergence_keeps_the_axis_on_the_bulk_and_counts_outliers():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study("c", space, storage=None, method="random", seed=0)
    for i in range(30):
        trial = study.ask()
        study.tell(trial, 1e6 if i in (4, 17) else 0.1 + trial.params["x"])  # two diverged runs
    fig = plots.plot_convergence(study)
    low, high = fig.axes[0].get_ylim()
    assert high < 3.0 and low > 0.0
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "2 beyond the axis" in legend
    assert plots.plot_convergence(study, clip=False).axes[0].get_ylim()[1] > 1e5
    assert plots.plot_convergence(study, log=True).axes[0].get_yscale() == "log"


def test_report_tables_round_numbers_and_name_their_columns(tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study("r", space, storage=None, method="random", seed=0)
    study.optimize(lambda p: p["x"] / 3, 5, show_progress=False)
    text = write_report(study, tmp_path / "r.html").read_text()
    assert "<th></th>" not in text and "<th>parameter</th><th>value</th>" in text
    best = study.best_trial.params["x"]
    assert f"<td>{best:.6g}</td>" in text and f"<td>{best!r}</td>" not in text
    assert "white-space: pre-wrap" in text and "\n &quot;method&quot;" in text  # one per line


_RUNS = '<img src=x onerror="document.body.dataset.pwned=1">'  # an event handler
_SCRIPT = "<script>document.body.dataset.pwned=2</script>"
_PAYLOADS = (_RUNS + "$", _SCRIPT + "$x$", '"><svg onload="document.body.dataset.pwned=3">')


@pytest.fixture(scope="module")
def payload_study():
    """A transfer study with a script payload in every field a user or an imported file sets:
    study, source, parameter and choice names, a fixed value and attributes."""
    a, b, c = _PAYLOADS
    space = hs.SearchSpace(
        {a: hs.Float(0, 1), b: hs.Categorical([a, b, c, "$"]), c: hs.Fixed(b), "x": hs.Int(1, 9)}
    )
    source = hs.create_study(b + "source", space, storage=None, method="random", seed=0)
    source.set_user_attr(c, a)
    source.optimize(lambda p: p[a] + p["x"], 8, show_progress=False)
    study = hs.create_study(
        a + b + c, space, storage=source.storage, method="scaml", transfer_from=[b + "source"]
    )
    study.set_user_attr(a, {b: c})
    study.optimize(lambda p: p[a] + p["x"], 6, show_progress=False)
    return study


def _body(path) -> str:
    return re.search(r"<body[^>]*>", _chromium("--dump-dom", path.as_uri()).stdout).group(0)


@needs_chromium
def test_no_payload_in_any_user_field_runs_in_the_report(tmp_path, payload_study):
    path = write_report(payload_study, tmp_path / "report.html")
    text = path.read_text()
    n = text.count("<img ")
    assert all(p not in text for p in _PAYLOADS)  # escaped where they appear
    body = _body(path)
    assert "pwned" not in body and f'data-rendered="{n}/{n}"' in body and 'data-errors="0"' in body
    # the escaping alone holds: the same page without its Content-Security-Policy
    bare = tmp_path / "no-csp.html"
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text))
    assert "pwned" not in _body(bare)
    # the test can see a payload run, and the policy alone stops one an escape missed
    raw = text.replace("<h2>Settings</h2>", _RUNS + _SCRIPT + "<h2>Settings</h2>")
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", raw))
    assert "data-pwned" in _body(bare)
    guarded = tmp_path / "csp.html"
    guarded.write_text(raw)
    assert "pwned" not in _body(guarded) and 'data-rendered="' in _body(guarded)


def test_names_with_dollar_signs_are_drawn_as_written(tmp_path, payload_study):
    """A ``$`` in a name would start matplotlib's mathtext (an unbalanced one raised)."""
    from matplotlib.text import Text

    figures = [
        plots.plot_convergence(payload_study),
        plots.plot_slice(payload_study),
        plots.plot_parallel_coordinates(payload_study),
        plots.plot_contour(payload_study, _PAYLOADS[0], "x"),
        payload_study.transfer_report().plot(),
    ]
    for k, fig in enumerate(figures):
        fig.savefig(tmp_path / f"{k}.png")
        texts = [t.get_text() for t in fig.findobj(Text)]
        assert any(_PAYLOADS[0] in t for t in texts)
