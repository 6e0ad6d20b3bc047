"""Search space: encoding round trips, validation errors, priors and serialisation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import headstart as hs
from headstart.exceptions import InvalidParamsError, SearchSpaceError


def mixed_space() -> hs.SearchSpace:
    return hs.SearchSpace(
        {
            "lr": hs.Float(1e-5, 1e-1, log=True),
            "x": hs.Float(-2.0, 3.0),
            "layers": hs.Int(1, 8),
            "width": hs.Int(16, 512, log=True),
            "opt": hs.Categorical(["adam", "sgd", "rmsprop"]),
            "flag": hs.Categorical([True, False]),
            "seed": 7,
        }
    )


# --- round trips ------------------------------------------------------------------------------------
@st.composite
def valid_configs(draw):
    return {
        "lr": draw(st.floats(1e-5, 1e-1)),
        "x": draw(st.floats(-2.0, 3.0)),
        "layers": draw(st.integers(1, 8)),
        "width": draw(st.integers(16, 512)),
        "opt": draw(st.sampled_from(["adam", "sgd", "rmsprop"])),
        "flag": draw(st.booleans()),
    }


@settings(max_examples=200, deadline=None)
@given(valid_configs())
def test_encode_decode_round_trip(config):
    space = mixed_space()
    params = space.validate(config)
    U = space.encode([params])
    assert U.shape == (1, space.dim) and np.all((U >= 0) & (U <= 1))
    back = space.decode(U)[0]
    for name in ("layers", "width", "opt", "flag", "seed"):
        assert back[name] == params[name] and type(back[name]) is type(params[name])
    assert math.isclose(back["x"], params["x"], rel_tol=0, abs_tol=4 * np.finfo(float).eps * 5)
    assert math.isclose(back["lr"], params["lr"], rel_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
def test_decode_encode_is_idempotent(u):
    space = mixed_space()
    config = space.decode(np.array(u))[0]
    assert space.validate(config) == config  # every decoded point is valid
    again = space.decode(space.encode([config]))[0]
    assert again["layers"] == config["layers"] and again["opt"] == config["opt"]


def test_integer_encoding_is_uniform_over_values():
    p = hs.Int(1, 4)
    counts = np.bincount(p.from_unit(np.linspace(0, 1, 4001)[:-1]) - 1)
    assert counts.tolist() == [1000, 1000, 1000, 1000]
    assert np.allclose(p.grid(), [0.125, 0.375, 0.625, 0.875])


def test_categorical_codes_and_grid():
    c = hs.Categorical(["a", "b", "c", "d"])
    assert np.allclose(c.grid(), [0.125, 0.375, 0.625, 0.875])
    assert c.from_unit_index(np.array([0.0, 0.2499, 0.25, 1.0])).tolist() == [0, 0, 1, 3]


def test_columns_describe_kinds_and_grids():
    cols = mixed_space().columns
    assert [c.kind for c in cols] == [
        "continuous",
        "continuous",
        "integer",
        "integer",
        "categorical",
        "categorical",
    ]
    assert len(cols[2].grid) == 8 and len(cols[3].grid) == 497 and len(cols[4].grid) == 3
    assert cols[0].grid is None


def test_json_round_trip_and_equality():
    space = hs.SearchSpace(
        {
            "a": hs.Float(0.1, 10, log=True, prior=hs.Normal(1.0, 0.5)),
            "b": hs.Int(0, 10, prior=hs.Beta(2, 3)),
            "c": hs.Categorical(["x", 1, 2.5, None, True], weights=[1, 2, 3, 4, 5]),
            "d": "fixed",
        }
    )
    data = json.loads(json.dumps(space.to_json()))
    again = hs.SearchSpace.from_json(data)
    assert again == space
    assert again["c"].choices == ("x", 1, 2.5, None, True)
    assert again != hs.SearchSpace({"a": hs.Float(0.1, 10, log=True)})


# --- validation errors ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: hs.Float(1.0, 1.0), "low must be < high"),
        (lambda: hs.Float(2.0, 1.0), "low must be < high"),
        (lambda: hs.Float(0.0, 1.0, log=True), "> 0 on a log scale"),
        (lambda: hs.Float(-1.0, 1.0, log=True), "> 0 on a log scale"),
        (lambda: hs.Float(0.0, math.inf), "finite"),
        (lambda: hs.Float(math.nan, 1.0), "finite"),
        (lambda: hs.Float("0", 1.0), "must be a number"),
        (lambda: hs.Int(0, 5, log=True), "> 0 on a log scale"),
        (lambda: hs.Int(1.5, 5), "integer"),
        (lambda: hs.Int(3, 3), "low must be < high"),
        (lambda: hs.Categorical(["a", "a", "b"]), "duplicated: 'a'"),
        (lambda: hs.Categorical(["a"]), "at least two"),
        (lambda: hs.Categorical("ab"), "must be a list"),
        (lambda: hs.Categorical(["a", "b"], weights=[1.0]), "match the choices"),
        (lambda: hs.Categorical(["a", "b"], weights=[-1.0, 2.0]), ">= 0"),
        (lambda: hs.Categorical(["a", "b"], weights=[0.0, 0.0]), "not all zero"),
        (lambda: hs.Normal(0.0, 0.0), "std must be > 0"),
        (lambda: hs.Normal(0.0, -1.0), "std must be > 0"),
        (lambda: hs.Beta(0.0, 1.0), "a must be > 0"),
        (lambda: hs.Beta(1.0, -2.0), "b must be > 0"),
        (lambda: hs.Float(0.0, 1.0, prior=hs.Normal(2.0, 0.1)), "outside the bounds"),
        (lambda: hs.SearchSpace({"a": hs.Float(0, 1, prior=hs.Normal(2.0, 0.1))}), "outside"),
        (lambda: hs.SearchSpace({}), "non-empty"),
        (lambda: hs.SearchSpace({"a": 1}), "not fixed"),
        (lambda: hs.SearchSpace({"a": [1, 2]}), "must be hs.Float"),
    ],
)
def test_bad_declarations_raise_search_space_error(make, match):
    with pytest.raises(SearchSpaceError, match=match):
        space = make()
        if isinstance(space, hs.Float):  # priors are bound when a space is built
            hs.SearchSpace({"p": space})


def test_true_and_one_are_distinct_choices():
    c = hs.Categorical([True, 1, 1.0])
    assert c.index(1) == 1 and c.index(True) == 0 and c.index(1.0) == 2


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"x": 0.5, "zzz": 1}, "Unknown parameter"),
        ({}, "Missing value"),
        ({"x": 5.0}, "outside its bounds"),
        ({"x": "0.5"}, "must be a number"),
        ({"x": True}, "must be a number"),
        ({"x": math.nan}, "outside its bounds"),
        ({"x": 0.5, "n": 2.5}, "must be an integer"),
        ({"x": 0.5, "n": 99}, "outside its bounds"),
        ({"x": 0.5, "c": "nope"}, "not one of its choices"),
        ({"x": 0.5, "k": 4}, "fixed at 3"),
        ("x=0.5", "dict"),
    ],
)
def test_invalid_params_raise(config, match):
    space = hs.SearchSpace(
        {"x": hs.Float(0, 1), "n": hs.Int(1, 5), "c": hs.Categorical(["a", "b"]), "k": 3}
    )
    if isinstance(config, dict):
        config = {"n": 1, "c": "a", **config} if config else config
    with pytest.raises(InvalidParamsError, match=match):
        space.validate(config)


def test_validate_casts_types_and_fills_fixed():
    space = hs.SearchSpace({"x": hs.Float(0, 1), "n": hs.Int(1, 5), "k": 3})
    out = space.validate({"x": 1, "n": np.int64(2), "k": 3})
    assert out == {"x": 1.0, "n": 2, "k": 3}
    assert type(out["x"]) is float and type(out["n"]) is int
    assert space.validate({"x": 0.5, "n": 4.0})["k"] == 3


# --- priors -----------------------------------------------------------------------------------------
def test_uniform_prior_density_is_one():
    space = hs.SearchSpace({"x": hs.Float(0, 1), "c": hs.Categorical(["a", "b", "c"])})
    U = np.random.default_rng(0).random((5, 2))
    assert np.allclose(space.prior_log_pdf(U), 0.0)
    assert not space.has_priors


def test_normal_prior_is_truncated_normal_on_unit_interval():
    space = hs.SearchSpace({"x": hs.Float(0.0, 10.0, prior=hs.Normal(3.0, 2.0))})
    u = np.linspace(0, 1, 7)
    ref = stats.truncnorm.logpdf(u, (0 - 0.3) / 0.2, (1 - 0.3) / 0.2, loc=0.3, scale=0.2)
    assert np.allclose(space.prior_log_pdf(u[:, None]), ref)
    assert space.has_priors


def test_log_parameter_normal_prior_lives_in_log_space():
    p = hs.Float(1e-5, 1e-1, log=True, prior=hs.Normal(1e-3, 1.0))
    space = hs.SearchSpace({"lr": p})
    span = math.log(1e-1) - math.log(1e-5)
    loc = (math.log(1e-3) - math.log(1e-5)) / span
    u = np.array([[0.1], [loc], [0.9]])
    a, b = -loc / (1 / span), (1 - loc) / (1 / span)
    ref = stats.truncnorm.logpdf(u[:, 0], a, b, loc=loc, scale=1 / span)
    assert np.allclose(space.prior_log_pdf(u), ref)
    assert math.isclose(space.prior_mode()["lr"], 1e-3, rel_tol=1e-9)


def test_beta_prior_and_categorical_weights():
    space = hs.SearchSpace(
        {"x": hs.Float(0, 1, prior=hs.Beta(2, 5)), "c": hs.Categorical(["a", "b"], weights=[3, 1])}
    )
    U = np.array([[0.2, 0.25], [0.7, 0.75]])
    ref = stats.beta.logpdf(U[:, 0], 2, 5) + np.log([2 * 0.75, 2 * 0.25])
    assert np.allclose(space.prior_log_pdf(U), ref)
    assert space.prior_mode() == {"x": pytest.approx(0.2), "c": "a"}


def test_prior_density_is_floored():
    space = hs.SearchSpace({"x": hs.Float(0, 1, prior=hs.Normal(0.0, 0.001))})
    assert space.prior_log_pdf(np.array([[1.0]]))[0] == pytest.approx(math.log(1e-12))


def test_sampling_from_prior_concentrates_and_respects_bounds():
    space = hs.SearchSpace(
        {
            "x": hs.Float(0, 10, prior=hs.Normal(2.0, 0.5)),
            "n": hs.Int(1, 9),
            "c": hs.Categorical(["a", "b"], weights=[9, 1]),
        }
    )
    rng = np.random.default_rng(1)
    draws = space.sample(4000, rng=rng, from_prior=True)
    xs = np.array([d["x"] for d in draws])
    assert xs.min() >= 0 and xs.max() <= 10
    assert abs(xs.mean() - 2.0) < 0.05 and abs(xs.std() - 0.5) < 0.05
    assert abs(np.mean([d["c"] == "a" for d in draws]) - 0.9) < 0.02
    uniform = space.sample(4000, rng=rng)
    assert abs(np.mean([d["x"] for d in uniform]) - 5.0) < 0.2


def test_configspace_import():
    cs_mod = pytest.importorskip("ConfigSpace")
    cs = cs_mod.ConfigurationSpace(
        {
            "lr": cs_mod.Float("lr", (1e-5, 1e-1), log=True, distribution=cs_mod.Normal(1e-3, 0.5)),
            "x": cs_mod.Float("x", (0.0, 1.0), distribution=cs_mod.Beta(2.0, 3.0)),
            "y": cs_mod.Float("y", (-1.0, 4.0), distribution=cs_mod.Normal(1.0, 2.0)),
            "n": cs_mod.Integer("n", (1, 10)),
            "opt": cs_mod.Categorical("opt", ["adam", "sgd"], weights=[0.8, 0.2]),
            "k": cs_mod.Constant("k", 5),
        }
    )
    space = hs.from_configspace(cs)
    assert math.isclose(space["lr"].prior.mean, 1e-3) and space["lr"].log
    assert space["x"].prior == hs.Beta(2.0, 3.0)
    assert space["n"] == hs.Int(1, 10)
    assert space["opt"].probabilities == pytest.approx((0.8, 0.2))
    assert space["k"] == hs.Fixed(5)
    # Our prior densities equal ConfigSpace's on the encoded interval (same vector space).
    u = np.linspace(0.01, 0.99, 9)
    for name in ("lr", "x", "y"):
        ours = np.exp(hs.SearchSpace({name: space[name]}).prior_log_pdf(u[:, None]))
        assert np.allclose(ours, cs[name].pdf_vector(u), rtol=1e-6), name


def _space_strategy():
    from hypothesis import strategies as st

    def numeric(draw_log, kind):
        low = st.floats(0.01, 5.0) if draw_log else st.floats(-5.0, 5.0)
        return st.tuples(low, st.floats(0.5, 20.0), st.sampled_from(["uniform", "normal", "beta"]))

    def build(spec):
        params = {}
        for i, (kind, log, (low, width, prior_kind), extra) in enumerate(spec):
            name = f"p{i}"
            if kind == "cat":
                params[name] = hs.Categorical(
                    ["a", "b", "c"][: 2 + extra % 2],
                    weights=None if extra % 3 else [1.0, 2.0, 3.0][: 2 + extra % 2],
                )
                continue
            if kind == "fixed":
                params[name] = hs.Fixed(round(low, 3))
                continue
            high = low + width
            if kind == "int":
                low, high = math.ceil(low) if log else int(low), int(low) + int(width) + 2
                low = max(low, 1) if log else low
            mid = math.exp((math.log(low) + math.log(high)) / 2) if log else (low + high) / 2
            prior = {
                "uniform": hs.Uniform(),
                "normal": hs.Normal(mid, 0.3 + extra / 10),
                "beta": hs.Beta(1.5 + extra, 2.5),
            }[prior_kind]
            make = hs.Int if kind == "int" else hs.Float
            params[name] = make(low, high, log=log, prior=prior)
        if all(isinstance(p, hs.Fixed) for p in params.values()):
            params["free"] = hs.Float(0.0, 1.0)
        return hs.SearchSpace(params)

    entry = st.sampled_from(["float", "int", "cat", "fixed"]).flatmap(
        lambda kind: st.booleans().flatmap(
            lambda log: st.tuples(
                st.just(kind), st.just(log), numeric(log, kind), st.integers(0, 5)
            )
        )
    )
    return st.lists(entry, min_size=1, max_size=5).map(build)


@settings(max_examples=60, deadline=None)
@given(space=_space_strategy())
def test_configspace_round_trip_keeps_types_bounds_and_prior_densities(space):
    pytest.importorskip("ConfigSpace")
    from headstart.configspace import from_configspace, to_configspace

    try:
        exported = to_configspace(space, seed=0)
    except hs.SearchSpaceError as e:  # ConfigSpace's log-normal sigma = e^std - lower must be > 0
        assert "sigma would be negative" in str(e)
        return
    back = from_configspace(exported)
    assert sorted(back) == sorted(space)  # ConfigSpace orders parameters by name
    for name, p in space.items():
        q = back[name]
        assert type(q) is type(p)
        if isinstance(p, hs.Categorical):
            assert q.choices == p.choices
            assert q.probabilities == pytest.approx(p.probabilities)
        elif isinstance(p, hs.Fixed):
            assert q.value == p.value
        else:
            assert q.log == p.log  # ConfigSpace keeps bounds to ~13 significant digits
            assert (q.low, q.high) == pytest.approx((p.low, p.high), rel=1e-10, abs=1e-12)
            assert type(q.prior) is type(p.prior)
    free = [c.name for c in space.columns]
    U = np.random.default_rng(0).random((50, len(free)))
    order = [free.index(c.name) for c in back.columns]
    assert np.allclose(space.prior_log_pdf(U), back.prior_log_pdf(U[:, order]), atol=1e-6)


def test_configspace_conditions_are_named_in_the_error():
    cs_mod = pytest.importorskip("ConfigSpace")
    cs = cs_mod.ConfigurationSpace({"kernel": ["rbf", "poly"], "degree": (1, 5)})
    cs.add(cs_mod.EqualsCondition(cs["degree"], cs["kernel"], "poly"))
    with pytest.raises(hs.SearchSpaceError, match="condition degree \\| kernel == 'poly'"):
        hs.from_configspace(cs)
