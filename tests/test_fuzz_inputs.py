"""Fuzzing the inputs a user or a received file controls (hypothesis): spaces, objective values,
imported trials and model-cache rows. Every generated input is either accepted and works, or
gets a :class:`HeadstartError` with nothing stored -- or, for a cache row, is dropped with a
warning. No other exception may escape."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

import headstart as hs
from headstart.storage import get_storage

FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

plain_names = st.sampled_from(["x", "lr", "n_layers", "[/]", "$a", "<b>", "é", "value"])
names = st.one_of(  # mostly plain names; and any code point: NUL, lone surrogates, controls
    plain_names,
    plain_names,
    plain_names,
    st.text(alphabet=st.characters(blacklist_categories=()), min_size=0, max_size=6),
)
numbers = st.one_of(
    st.integers(min_value=-10, max_value=10),  # mostly usable bounds, so that spaces get built
    st.floats(min_value=-10, max_value=10),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, names)
positive = st.floats(min_value=0.01, max_value=100)
usable = st.one_of(  # parameters that should build
    st.builds(
        lambda a, w, log: lambda: hs.Float(a, a + w, log=log), positive, positive, st.booleans()
    ),
    st.builds(lambda a, w: lambda: hs.Int(a, a + w), st.integers(-5, 5), st.integers(1, 2**40)),
    st.builds(
        lambda c: lambda: hs.Categorical(c), st.lists(names, min_size=2, max_size=4, unique=True)
    ),
)
params = st.one_of(  # deferred: built inside the test, where a HeadstartError is an answer
    usable,
    usable,
    st.builds(lambda a, b, log: lambda: hs.Float(a, b, log=log), numbers, numbers, st.booleans()),
    st.builds(lambda a, b, log: lambda: hs.Int(a, b, log=log), numbers, numbers, st.booleans()),
    st.builds(lambda c: lambda: hs.Categorical(c), st.lists(scalars, min_size=0, max_size=4)),
    st.builds(lambda v: lambda: hs.Fixed(v), scalars),
    st.builds(lambda v: lambda: v, scalars),
)
spaces = st.dictionaries(names, params, min_size=1, max_size=2)  # {} is tested elsewhere


def _build(make):
    """``make()``, or ``None`` when it raised a HeadstartError (anything else fails the test)."""
    try:
        return make()
    except hs.HeadstartError as e:
        event(f"refused: {str(e)[:40]}")
        return None


@FUZZ
@given(spec=spaces, name=names)
def test_any_space_and_name_is_usable_or_refused_with_nothing_stored(spec, name):
    space = _build(lambda: hs.SearchSpace({k: make() for k, make in spec.items()}))
    event("space refused" if space is None else "space built")
    if space is None:
        return
    assert hs.SearchSpace.from_json(json.loads(json.dumps(space.to_json()))) == space
    store = get_storage(None)
    study = _build(lambda: hs.create_study(name, space, storage=store, method="random", seed=0))
    event("study refused" if study is None else "study created")
    if study is None:
        assert store.list_studies() == []
        return
    for _ in range(2):
        trial = study.ask()
        assert space.validate(trial.params) == trial.params
        study.tell(trial, 1.0)
    exported = study.trials_dataframe()
    copy = hs.create_study(name + "-copy", space, storage=store, method="random")
    copy.add_trials(exported)
    assert [t.params for t in copy.trials] == [t.params for t in study.trials]


objective_values = st.one_of(
    scalars,
    st.lists(st.floats(), max_size=3).map(np.asarray),
    st.floats(allow_nan=True).map(np.float32),
    st.integers(min_value=-(2**2000), max_value=2**2000),
)


@FUZZ
@given(value=objective_values)
def test_any_objective_value_is_stored_or_refused_leaving_the_trial_running(value):
    study = hs.create_study("v", hs.SearchSpace({"x": hs.Float(0, 1)}), storage=None)
    trial = study.ask()
    try:
        told = study.tell(trial, value)
    except hs.InvalidValueError:
        event("value refused")
        assert study.trials[0].state == "running"
        return
    event("value stored")
    assert told.state == "complete" and math.isfinite(told.value)


valid_rows = st.fixed_dictionaries(
    {
        "params": st.fixed_dictionaries(
            {"x": st.floats(min_value=0, max_value=1), "c": st.sampled_from(["a", "b"])}
        ),
        "value": st.floats(min_value=-5, max_value=5),
    },
    optional={"state": st.sampled_from(["complete", "failed", "running", "COMPLETE"])},
)
rows = st.one_of(
    st.lists(valid_rows, max_size=4),
    st.lists(
        st.one_of(
            valid_rows,
            valid_rows,
            st.fixed_dictionaries(
                {"params": st.dictionaries(st.sampled_from(["x", "c", "y"]), scalars, max_size=3)},
                optional={
                    "value": scalars,
                    "state": names,
                    "user_attrs": st.dictionaries(names, scalars),
                },
            ),
            st.tuples(st.dictionaries(st.sampled_from(["x", "c"]), scalars), scalars),
            scalars,
        ),
        max_size=4,
    ),
)


@FUZZ
@given(trials=rows)
def test_any_import_is_taken_whole_or_refused_whole(trials):
    space = hs.SearchSpace({"x": hs.Float(0, 1), "c": hs.Categorical(["a", "b"])})
    study = hs.create_study("i", space, storage=None, method="random")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hs.HeadstartWarning)  # skipped-row counts
        added = _build(lambda: study.add_trials(trials))
    event("import refused" if added is None else "import taken")
    if added is None:
        assert study.trials == []  # one transaction: nothing half-imported
        return
    assert len(study.trials) == len(added)
    for t in added:
        assert space.validate(t.params) == t.params


cache_rows = st.one_of(
    st.text(max_size=40),
    st.recursive(
        scalars.filter(lambda v: not (isinstance(v, float) and not math.isfinite(v))),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(names, inner, max_size=3)
        ),
        max_leaves=8,
    ).map(lambda v: json.dumps({"raw": v})),
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=3, max_size=3).map(
        lambda raw: json.dumps({"raw": raw, "n_at_default_fit": 0})
    ),
)

_CACHE_STUDY = {}


def _cache_study():
    """One GP study with a saved surrogate state (fitted once for every example)."""
    if not _CACHE_STUDY:
        store = get_storage(None)
        study = hs.create_study(
            "cache", hs.SearchSpace({"x": hs.Float(0, 1)}), storage=store, seed=0, n_initial=3
        )
        study.optimize(lambda p: (p["x"] - 0.3) ** 2, 4, show_progress=False)
        _CACHE_STUDY["store"] = store
    return _CACHE_STUDY["store"]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(row=cache_rows)
def test_any_surrogate_state_row_is_used_or_dropped_never_fatal(row):
    store = _cache_study()
    with store._engine.begin() as conn:
        conn.execute(
            text("UPDATE model_cache SET value_json = :v WHERE kind = 'surrogate-state'"),
            {"v": row},
        )
    study = hs.load_study("cache", store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hs.HeadstartWarning)  # "dropped and is rebuilt"
        trial = study.ask()
    assert 0.0 <= trial.params["x"] <= 1.0
    study.tell(trial, (trial.params["x"] - 0.3) ** 2)
