"""MPHD (Fan, Han & Wang 2024): contexts, the two pre-training steps, the prior file, the study."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats
import torch

import headstart as hs
from headstart._gp.exact import MATERN_FORM, fit_exact_gp, neg_log_lik, pad, prior_and_grad
from headstart._gp.fit_settings import MATERN_COORDS, Limits
from headstart._gp.hyperprior import FLAT_HYPERPRIOR, HyperPrior, gamma_hyperprior
from headstart._gp.params import GPParams
from headstart.mphd import Domain, PriorModel, dimension_context, fit_domains, gamma_mle, pretrain
from headstart.mphd.pretrain import fit_lengthscale_network
from helpers import backend_url, release_together


def _gp_draws(rng, d, ell, n=40, m=2, kinds=None):
    """``m`` sub-datasets of a Matérn-5/2 GP draw with lengthscales ``ell`` (plus small noise)."""
    from headstart._gp.kernels import matern52_np

    out = []
    for _ in range(m):
        X = rng.random((n, d))
        r2 = (((X[:, None, :] - X[None]) / ell) ** 2).sum(-1)
        K = np.asarray(matern52_np(r2)[0]) + 1e-3 * np.eye(n)
        out.append((X, np.linalg.cholesky(K) @ rng.standard_normal(n)))
    return Domain(f"d{d}-{ell[0]:.2f}", tuple(kinds or ["continuous"] * d), tuple(out))


def _map_objective(raw, Xs, ys, prior, is_cat):
    """``sum_i -log p(y_i | theta) - log p(theta)`` of the Matérn GP at ``raw`` (Matérn coords):
    a float, or one per row when ``raw`` is a ``G x (d + 2)`` batch of coordinates."""
    batch = torch.as_tensor(np.asarray(raw, dtype=np.float64))
    batch = batch.reshape(-1, batch.shape[-1])
    data = pad(Xs, ys)
    G, S = len(batch), len(Xs)  # every (row, data set) pair is one row of the likelihood
    sets = data.rows(torch.arange(S).repeat(G))
    nll = neg_log_lik(batch.repeat_interleave(S, 0), sets, is_cat, MATERN_FORM).reshape(G, S)
    out = nll.sum(1).numpy() - prior_and_grad(batch.numpy(), prior, MATERN_COORDS)[0]
    return float(out[0]) if np.ndim(raw) == 1 else out


def _map_fit(Xs, ys, prior, start, **options):
    """The core's MAP fit of one Matérn GP on data sets ``Xs``, ``ys`` from ``start``."""
    d = Xs[0].shape[1]
    raw, objective = fit_exact_gp(
        Xs,
        ys,
        np.zeros(d, bool),
        np.asarray(start)[None, None],
        prior=prior,
        form=MATERN_FORM,
        owner=np.zeros(len(Xs), int),
        per_datum=False,
        **options,
    )
    return raw[0], float(objective[0])


def _domains(seed=0, n_domains=4):
    rng = np.random.default_rng(seed)
    return [_gp_draws(rng, d, np.full(d, 0.15 + 0.05 * d)) for d in range(1, n_domains + 1)]


# --- context --------------------------------------------------------------------------------------
def test_context_features_for_every_parameter_type():
    space = hs.SearchSpace(
        {
            "lr": hs.Float(1e-4, 1.0, log=True),
            "x": hs.Float(0.0, 1.0),
            "depth": hs.Int(1, 8),
            "kind": hs.Categorical(["a", "b", "c"]),
        }
    )
    context = dimension_context([c.kind for c in space.columns])
    assert context.tolist() == [
        [0.0, 1.0, 2.0, 2.0],
        [0.0, 1.0, 2.0, 2.0],
        [1.0, 0.0, 2.0, 2.0],
        [1.0, 0.0, 2.0, 2.0],
    ]
    with pytest.raises(ValueError, match="Unknown column kinds"):
        dimension_context(["ordinal"])


# --- step 2: Gamma fits ---------------------------------------------------------------------------
def test_a_given_shared_prior_gives_every_lengthscale_its_gamma_and_round_trips(tmp_path):
    model = PriorModel.shared((2.0, 4.0), (2.0, 2.0), (1.1, 30.0), {"hand_specified": "test"})
    assert model == PriorModel(
        "shared", [], [0.0] * 4, [1.0] * 4, (2.0, 4.0), (2.0, 2.0), (1.1, 30.0),
        {"hand_specified": "test"},
    )  # fmt: skip
    a, b = model.lengthscale_gammas(["continuous", "integer", "categorical"])
    assert a.tolist() == [2.0] * 3 and b.tolist() == [4.0] * 3
    assert PriorModel.load(model.save(tmp_path / "p.json")) == model


def test_gamma_mle_is_scipys():
    x = np.random.default_rng(0).gamma(3.0, 1 / 12.0, size=400)
    a, _, scale = scipy.stats.gamma.fit(x, floc=0.0)
    assert gamma_mle(x) == pytest.approx((a, 1 / scale))
    assert gamma_mle(np.full(5, 0.3))[0] / gamma_mle(np.full(5, 0.3))[1] == pytest.approx(0.3)


def test_network_recovers_each_contexts_gamma_mle():
    rng = np.random.default_rng(1)
    cont = rng.gamma(8.0, 1 / 40.0, size=300)  # continuous dims: mean 0.2
    disc = rng.gamma(2.0, 1 / 2.0, size=300)  # discrete dims: mean 1.0
    contexts = np.vstack(
        [np.tile([0.0, 1.0, 1.0, 1.0], (300, 1)), np.tile([1.0, 0.0, 1.0, 1.0], (300, 1))]
    )
    layers, mean, std, _ = fit_lengthscale_network(contexts, np.concatenate([cont, disc]), seed=0)
    model = PriorModel("network", layers, mean, std, (1.0, 1.0), (1.0, 1.0), (1.0, 1.0))
    a, b = model.lengthscale_gammas(["continuous", "integer"])
    for k, sample in enumerate((cont, disc)):
        ref_a, ref_b = gamma_mle(sample)
        assert a[k] == pytest.approx(ref_a, rel=0.05)
        assert b[k] == pytest.approx(ref_b, rel=0.05)


# --- step 1 ---------------------------------------------------------------------------------------
def test_batched_step1_equals_separate_maximum_likelihood_fits():
    domains = _domains(n_domains=3)
    fits = fit_domains(domains, n_points=40)
    for domain, fit in zip(domains, fits, strict=True):
        # the same data, one space at a time: a flat prior makes the MAP a type-II ML fit
        Xs = [X for X, _ in domain.datasets]
        ys = [(y - y.mean()) / y.std() for _, y in domain.datasets]
        is_cat = torch.zeros(domain.dim, dtype=torch.bool)
        batched = GPParams(1.0 / fit.lengthscales**2, fit.outputscale, fit.noise)
        raw = batched.to_raw(MATERN_COORDS)[0]
        total = _map_objective(raw, Xs, ys, FLAT_HYPERPRIOR, is_cat)
        assert total == pytest.approx(fit.neg_log_likelihood, abs=1e-6)
        # no single-dataset ML start does better on the sum than the batched optimum
        default = GPParams(np.ones(domain.dim), 1.0, 1e-2).to_raw(MATERN_COORDS)[0]
        best_single = min(
            _map_objective(
                _map_fit([X], [y], FLAT_HYPERPRIOR, default)[0], Xs, ys, FLAT_HYPERPRIOR, is_cat
            )
            for X, y in zip(Xs, ys, strict=True)
        )
        assert fit.neg_log_likelihood <= best_single + 1e-3


def test_step1_recovers_the_generating_lengthscales():
    rng = np.random.default_rng(3)
    domains = [_gp_draws(rng, 2, np.array([0.1, 0.4]), n=60, m=4) for _ in range(3)]
    fits = fit_domains(domains, n_points=60)
    ell = np.mean([f.lengthscales for f in fits], axis=0)
    assert ell[0] < ell[1]  # the short lengthscale is told apart from the long one
    assert 0.05 < ell[0] < 0.2 and 0.2 < ell[1] < 0.8


# --- MAP under learned priors ---------------------------------------------------------------------
def test_map_under_gamma_priors_matches_brute_force_on_1d():
    rng = np.random.default_rng(0)
    X = rng.random((12, 1))
    y = np.sin(6 * X[:, 0])
    y = (y - y.mean()) / y.std()
    prior = gamma_hyperprior(((3.0,), (10.0,)), (2.0, 2.0), (1.0, 1.0))
    ell, s, noise = prior.initial_values(1)
    start = GPParams.from_values(ell, s, noise).to_raw(MATERN_COORDS, deterministic=True)[0]
    _, objective = _map_fit([X], [y], prior, start, deterministic=True, limits=Limits(pgtol=1e-8))
    is_cat = torch.zeros(1, dtype=torch.bool)
    lw, ls = np.meshgrid(np.linspace(-2, 6, 161), np.linspace(-3, 3, 121))
    grid = _map_objective(
        np.column_stack([lw.ravel(), ls.ravel(), np.full(lw.size, -30.0)]), [X], [y], prior, is_cat
    )
    assert objective <= min(grid) + 1e-6
    assert objective == pytest.approx(min(grid), abs=5e-3)


# --- the prior file -------------------------------------------------------------------------------
def test_prior_file_round_trip_and_tampering(tmp_path):
    prior = pretrain(_domains(), seed=0)
    path = prior.save(tmp_path / "prior.json")
    loaded = PriorModel.load(path)
    assert loaded == prior
    kinds = ["continuous", "integer", "categorical"]
    np.testing.assert_array_equal(
        loaded.lengthscale_gammas(kinds)[0], prior.lengthscale_gammas(kinds)[0]
    )
    info = loaded.trained_on
    assert [s["n_subdatasets"] for s in info["spaces"]] == [2, 2, 2, 2]
    assert info["points_per_subdataset"] == 64 and "headstart_version" in info

    data = json.loads(path.read_text())
    data["model"]["noise"][0] *= 2  # an edit by hand
    path.write_text(json.dumps(data))
    with pytest.raises(hs.PriorModelError, match="checksum"):
        PriorModel.load(path)
    data["version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(hs.PriorModelError, match="version 99"):
        PriorModel.load(path)
    path.write_text(path.read_text()[:50])  # truncated
    with pytest.raises(hs.PriorModelError, match="not a readable"):
        PriorModel.load(path)
    with pytest.raises(hs.PriorModelError, match="No MPHD prior file"):
        PriorModel.load(tmp_path / "missing.json")


def test_shared_variant_gives_every_dimension_one_gamma():
    prior = pretrain(_domains(), lengthscale="shared")
    a, b = prior.lengthscale_gammas(["continuous", "integer"])
    assert a[0] == a[1] and b[0] == b[1]
    assert (a[0], b[0]) == pytest.approx(prior.shared_lengthscale)


def test_too_few_spaces_and_constant_values_are_refused():
    with pytest.raises(hs.PretrainingDataError, match="at least 3 search spaces"):
        pretrain(_domains(n_domains=2))
    flat = Domain(
        "flat", ("continuous",), ((np.random.default_rng(0).random((20, 1)), np.ones(20)),)
    )
    with pytest.raises(hs.PretrainingDataError, match="'flat' has no sub-dataset"):
        pretrain([*_domains(n_domains=2), flat])
    with pytest.raises(hs.PretrainingDataError, match="X must be"):
        Domain("bad", ("continuous",), ((np.zeros((3, 2)), np.zeros(3)),))


# --- the study ------------------------------------------------------------------------------------
def _fill(url, name, space, seed, n=20):
    study = hs.create_study(name, space, storage=url, method="random", seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(n):
        trial = study.ask()
        study.tell(trial, float(rng.random()) + len(str(trial.params)) * 0.01)


@pytest.fixture
def three_spaces(tmp_path):
    url = f"sqlite:///{tmp_path / 'mphd.db'}"
    _fill(url, "svm", hs.SearchSpace({"C": hs.Float(1e-3, 1e3, log=True), "g": hs.Float(0, 1)}), 0)
    _fill(url, "tree", hs.SearchSpace({"depth": hs.Int(1, 10), "frac": hs.Float(0.1, 1.0)}), 1)
    _fill(
        url,
        "net",
        hs.SearchSpace(
            {"act": hs.Categorical(["relu", "tanh"]), "lr": hs.Float(0, 1), "w": hs.Int(8, 64)}
        ),
        2,
    )
    return url


def test_transfer_from_all_across_three_spaces_pretrains_once(three_spaces, monkeypatch):
    import headstart.sources._domains as domains_module

    calls = []
    real = domains_module.pretrain
    monkeypatch.setattr(
        domains_module, "pretrain", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    space = hs.SearchSpace({"alpha": hs.Float(0, 1), "n": hs.Int(1, 4), "beta": hs.Float(0, 1)})
    study = hs.create_study(
        "new", space, storage=three_spaces, method="mphd", transfer_from="all", seed=0
    )
    for _ in range(8):
        trial = study.ask()
        study.tell(trial, (trial.params["alpha"] - 0.3) ** 2 + trial.params["beta"])
    assert len(calls) == 1
    key = study._strategy.config.prior_model
    trained = hs.mphd.PriorModel.from_json(study.storage.get_cache(key)).trained_on
    assert {s["name"] for s in trained["spaces"]} == {"svm", "tree", "net"}
    # the same sources again: the cached prior is used
    hs.create_study(
        "again",
        space,
        storage=three_spaces,
        method="mphd",
        transfer_from=["svm", "tree", "net"],
        seed=0,
    )
    assert len(calls) == 1
    # ... also by a study with another seed, or none: the prior depends on the data only
    for seed in (1, None):
        other = hs.create_study(
            f"seed-{seed}",
            space,
            storage=three_spaces,
            method="mphd",
            transfer_from=["svm", "tree", "net"],
            seed=seed,
        )
        assert other._strategy.config.prior_model == key
    assert len(calls) == 1
    hyperprior = study._strategy.engine.surrogate.hyperprior
    assert isinstance(hyperprior, HyperPrior) and hyperprior.dim == 3


def test_a_saved_prior_serves_any_space_by_path_or_name(three_spaces, tmp_path):
    from headstart.sources import save_prior_model
    from headstart.storage import get_storage

    prior = pretrain(_domains())
    path = prior.save(tmp_path / "p.json")
    space = hs.SearchSpace({f"x{i}": hs.Int(0, 3) for i in range(5)})  # no continuous dimension
    study = hs.create_study("by-path", space, storage=None, method="mphd", prior_model=str(path))
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, float(sum(trial.params.values())))
    save_prior_model(prior, "mine", get_storage(three_spaces))
    named = hs.create_study(
        "by-name",
        hs.SearchSpace({"z": hs.Float(0, 1)}),
        storage=three_spaces,
        method="mphd",
        prior_model="mine",
    )
    named.tell(named.ask(), 1.0)


def test_mphd_setting_errors(three_spaces, tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    with pytest.raises(hs.InvalidSettingError, match="exactly one of"):
        hs.create_study("a", space, storage=three_spaces, method="mphd")
    with pytest.raises(hs.InvalidSettingError, match="exactly one of"):
        hs.create_study(
            "b",
            space,
            storage=three_spaces,
            method="mphd",
            transfer_from="all",
            prior_model=str(tmp_path / "p.json"),
        )
    with pytest.raises(hs.PriorModelError, match="neither a prior file"):
        hs.create_study("c", space, storage=three_spaces, method="mphd", prior_model="nope")
    with pytest.raises(hs.InvalidSettingError, match="prior_model is for method='mphd'"):
        hs.create_study("d", space, storage=None, method="gp", prior_model="nope")
    with pytest.raises(hs.PretrainingDataError, match="at least 3"):
        hs.create_study(
            "e", space, storage=three_spaces, method="mphd", transfer_from=["svm", "tree"]
        )
    assert [r.name for r in hs.load_study("svm", three_spaces).storage.get_studies()] == [
        "svm",
        "tree",
        "net",
    ]


def test_same_space_transfer_points_to_mphd_for_other_spaces(three_spaces):
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    with pytest.raises(hs.SourceSpaceMismatchError, match="method='mphd'"):
        hs.create_study("s", space, storage=three_spaces, method="scaml", transfer_from="svm")
    with pytest.raises(hs.SourceSpaceMismatchError, match="method='mphd'"):
        hs.create_study("t", space, storage=three_spaces, method="scaml", transfer_from="all")


def test_gamma_kl_matches_numerical_integration():
    from scipy.integrate import quad

    from headstart.mphd.pretrain import gamma_kl

    p, q = scipy.stats.gamma(2.5, scale=1 / 4.0), scipy.stats.gamma(1.2, scale=1 / 1.5)
    numeric = quad(lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x)), 0, np.inf)[0]
    assert gamma_kl(2.5, 4.0, 1.2, 1.5) == pytest.approx(numeric, rel=1e-6)
    assert gamma_kl(2.0, 3.0, 2.0, 3.0) == pytest.approx(0.0, abs=1e-12)


def test_beliefs_combine_with_mphd():
    prior = pretrain(_domains())
    belief = hs.SearchSpace({"x": hs.Float(0, 1, prior=hs.Normal(0.8, 0.05)), "y": hs.Float(0, 1)})
    study = hs.create_study("pibo", belief, storage=None, method="mphd", prior_model=prior, seed=0)
    study.optimize(lambda p: (p["x"] - 0.8) ** 2 + p["y"], n_trials=6)
    assert study.belief is not None and study.prior_weight() > 0


def _create_and_run(url: str, name: str, sources: list[str], barrier) -> None:
    space = hs.SearchSpace({"a": hs.Float(0, 1), "b": hs.Int(1, 3)})
    barrier.wait(timeout=120)  # every process pre-trains and stores the prior at the same moment
    study = hs.create_study(name, space, storage=url, method="mphd", transfer_from=sources, seed=0)
    for _ in range(3):
        trial = study.ask()
        study.tell(trial, trial.params["a"] + trial.params["b"])


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres"))]
)
def test_overlapping_mphd_studies_share_one_prior(tmp_path, backend):
    import uuid

    url = backend_url(backend, tmp_path, "par.db")
    tag = uuid.uuid4().hex[:6]
    spaces = [
        hs.SearchSpace({"C": hs.Float(1e-3, 1e3, log=True), "g": hs.Float(0, 1)}),
        hs.SearchSpace({"depth": hs.Int(1, 10), "frac": hs.Float(0.1, 1.0)}),
        hs.SearchSpace({"lr": hs.Float(0, 1), "w": hs.Int(8, 64), "x": hs.Float(0, 1)}),
    ]
    sources = [f"src{i}-{tag}" for i in range(3)]
    for i, (name, space) in enumerate(zip(sources, spaces, strict=True)):
        _fill(url, name, space, i)
    names = [f"mphd{i}-{tag}" for i in range(3)]
    release_together(
        _create_and_run, lambda barrier, i: (url, names[i], sources, barrier), 3, preloaded=True
    )
    studies = [hs.load_study(n, url) for n in names]
    keys = {s._strategy.config.prior_model for s in studies}
    assert len(keys) == 1 and all(len(s.trials) == 3 for s in studies)
    assert studies[0].storage.get_cache(keys.pop())["format"] == "headstart.mphd-prior"
    for n in names + sources:
        hs.delete_study(n, url)


def test_cached_step1_fits_are_read_back_without_refitting(tmp_path):
    from headstart.mphd.pretrain import cached_fit_domains

    calls = []

    def make():
        calls.append(1)
        return _domains(n_domains=3)

    path = tmp_path / "step1.json"
    fits, kinds, stored = cached_fit_domains(path, make, n_points=20)
    again, kinds_again, _ = cached_fit_domains(path, make, n_points=20)
    assert len(calls) == 1 and stored["n_points"] == 20 and kinds_again == kinds
    for a, b in zip(fits, again, strict=True):
        np.testing.assert_array_equal(a.lengthscales, b.lengthscales)
        assert (a.name, a.noise, a.neg_log_likelihood) == (b.name, b.noise, b.neg_log_likelihood)


def test_pretraining_reports_its_progress_through_both_steps():
    from headstart.mphd.pretrain import STEP1, STEP2, pretrain

    seen: dict[str, list[tuple[int, int]]] = {}
    pretrain(_domains(n_domains=3), progress=lambda stage, done, total: seen.setdefault(
        stage, []).append((done, total)))  # fmt: skip
    assert list(seen) == [STEP1, STEP2]
    for updates in seen.values():
        assert updates[-1][0] == updates[-1][1]  # each step ends full
        assert [d for d, _ in updates] == sorted(d for d, _ in updates)
