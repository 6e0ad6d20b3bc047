"""Sources of meta-data: studies, storages, DataFrames, CSV files and arrays → MetaTask lists."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import headstart as hs
from headstart.exceptions import (
    EmptySourceError,
    InvalidSettingError,
    InvalidValueError,
    MetaDataValueError,
    SourceFileError,
    SourceSpaceMismatchError,
    UnknownStudyError,
)
from headstart.sources import (
    MetaTask,
    data_hash,
    from_arrays,
    from_csv,
    from_dataframe,
    from_storage,
    from_study,
    resolve_sources,
    space_difference,
)
from headstart.storage import get_storage


def space4(x_high: float = 2.0) -> hs.SearchSpace:
    return hs.SearchSpace(
        {
            "x": hs.Float(-2.0, x_high),
            "lr": hs.Float(1e-4, 1e-1, log=True),
            "n": hs.Int(1, 4),
            "c": hs.Categorical(["a", "b"]),
        }
    )


def run_study(store, name, space, values, *, direction="minimize", failed=1, running=1):
    """A study with ``values`` completed, ``failed`` failed and ``running`` running trials."""
    study = hs.create_study(
        name, space, storage=store, direction=direction, method="random", seed=len(name)
    )
    for v in values:
        study.tell(study.ask(), v)
    for _ in range(failed):
        study.tell(study.ask(), failed=True)
    for _ in range(running):
        study.ask()
    return study


# --- studies --------------------------------------------------------------------------------------
def test_from_study_keeps_completed_trials_only():
    store = get_storage(None)
    space = space4()
    study = run_study(store, "a", space, [3.0, 1.0, 2.0], failed=2, running=1)
    task = from_study("a", store, space)
    done = [t for t in study.trials if t.state == "complete"]
    assert task.name == "a" and task.direction == "minimize" and task.n == 3
    np.testing.assert_array_equal(task.X, space.encode([t.params for t in done]))
    np.testing.assert_array_equal(task.y, [3.0, 1.0, 2.0])
    assert task.X.shape == (3, space.dim) and ((task.X >= 0) & (task.X <= 1)).all()
    again = from_study(study)  # a Study object, its own storage and space
    np.testing.assert_array_equal(again.X, task.X)


def test_maximize_source_is_flipped_for_a_minimize_study():
    store = get_storage(None)
    space = space4()
    run_study(store, "up", space, [1.0, 5.0], direction="maximize")
    run_study(store, "down", space, [1.0, 5.0])
    up, down = resolve_sources(["up", "down"], space, store, direction="minimize")
    assert up.direction == "maximize" and down.direction == "minimize"
    np.testing.assert_array_equal(up.y_max(), [1.0, 5.0])  # larger is better, as stored
    np.testing.assert_array_equal(down.y_max(), [-1.0, -5.0])


def test_all_picks_same_space_studies_and_excludes_the_target():
    store = get_storage(None)
    space = space4()
    run_study(store, "target", space, [1.0])
    run_study(store, "a", space, [1.0, 2.0])
    run_study(store, "wide", space4(x_high=3.0), [1.0])
    run_study(store, "no-trials", space, [], failed=1)
    believer = hs.SearchSpace(
        {
            "x": hs.Float(-2.0, 2.0, prior=hs.Normal(0.0, 1.0)),  # a prior is not the encoding
            "lr": hs.Float(1e-4, 1e-1, log=True),
            "n": hs.Int(1, 4),
            "c": hs.Categorical(["a", "b"], weights=[3, 1]),
        }
    )
    run_study(store, "b", believer, [4.0], direction="maximize")
    tasks = resolve_sources("all", space, store, direction="minimize", exclude=["target"])
    assert [t.name for t in tasks] == ["a", "b"]
    assert [t.direction for t in tasks] == ["minimize", "maximize"]
    assert [t.name for t in from_storage(store, space)] == ["target", "a", "b"]


def test_all_says_why_it_found_nothing():
    store = get_storage(None)
    space = space4()
    run_study(store, "target", space, [1.0])
    with pytest.raises(EmptySourceError, match="no other study"):
        resolve_sources("all", space, store, direction="minimize", exclude=["target"])
    run_study(store, "wide", space4(x_high=3.0), [1.0])
    with pytest.raises(SourceSpaceMismatchError) as e:
        resolve_sources("all", space, store, direction="minimize", exclude=["target"])
    assert "'wide'" in str(e.value) and "'x'" in str(e.value)
    run_study(store, "fresh", space, [], failed=0, running=1)
    with pytest.raises(EmptySourceError, match=r"'fresh'.*no completed trials"):
        resolve_sources("all", space, store, direction="minimize", exclude=["target"])


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        (hs.SearchSpace({"x": hs.Float(-2.0, 3.0)}), r"parameter 'x' is float in \[-2.0, 3.0\]"),
        (hs.SearchSpace({"x": hs.Float(-2.0, 2.0)}), "parameter 'n' is missing"),
        (
            hs.SearchSpace({"x": hs.Float(-2.0, 2.0), "n": hs.Int(1, 4), "z": hs.Int(0, 1)}),
            "extra parameter 'z'",
        ),
        (hs.SearchSpace({"x": hs.Float(-2.0, 2.0), "n": hs.Float(1, 4)}), "parameter 'n' is float"),
    ],
)
def test_space_mismatch_names_the_parameter(source, needle):
    store = get_storage(None)
    target = hs.SearchSpace({"x": hs.Float(-2.0, 2.0), "n": hs.Int(1, 4)})
    run_study(store, "src", source, [1.0])
    with pytest.raises(SourceSpaceMismatchError, match=needle) as e:
        from_study("src", store, target)
    assert "'src'" in str(e.value)


def test_space_difference_ignores_priors_and_parameter_order():
    a = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "c": hs.Categorical(["p", "q"])})
    b = hs.SearchSpace(
        {
            "c": hs.Categorical(["p", "q"], weights=[1, 2]),
            "x": hs.Float(0.0, 1.0, prior=hs.Beta(2, 2)),
        }
    )
    assert space_difference(a, b) is None
    c = hs.SearchSpace({"x": hs.Float(0.0, 1.0, log=False), "c": hs.Categorical(["p", "r"])})
    assert "categorical ['p', 'q'] in the source but categorical ['p', 'r']" in space_difference(
        a, c
    )


def test_unknown_study_lists_the_stored_ones_and_self_transfer_is_refused():
    store = get_storage(None)
    space = space4()
    run_study(store, "alpha", space, [1.0])
    with pytest.raises(UnknownStudyError, match=r"No study named 'nope'.*'alpha'"):
        resolve_sources(["nope"], space, store, direction="minimize")
    with pytest.raises(InvalidSettingError, match="cannot transfer from itself"):
        resolve_sources("alpha", space, store, direction="minimize", exclude=["alpha"])
    with pytest.raises(InvalidSettingError, match="got int"):
        resolve_sources([3], space, store, direction="minimize")
    assert resolve_sources(None, space, store, direction="minimize") == []
    assert resolve_sources([], space, store, direction="minimize") == []


def test_a_study_without_completed_trials_is_an_empty_source():
    store = get_storage(None)
    space = space4()
    run_study(store, "crashed", space, [], failed=3, running=1)
    with pytest.raises(EmptySourceError, match="'crashed' has no completed trials"):
        resolve_sources(["crashed"], space, store, direction="minimize")


# --- DataFrames and CSV ---------------------------------------------------------------------------
def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": ["t2", "t1", "t2", "t1"],
            "x": [0.0, -2.0, 2.0, 1.0],
            "lr": [1e-3, 1e-4, 1e-1, 1e-2],
            "n": [1, 2, 3, 4],
            "c": ["a", "b", "a", "b"],
            "value": [1.0, 2.0, 3.0, 4.0],
        }
    )


def test_from_dataframe_groups_tasks_in_order_of_appearance():
    space = space4()
    tasks = from_dataframe(frame(), space, direction="maximize")
    assert [t.name for t in tasks] == ["t2", "t1"]
    assert all(t.direction == "maximize" for t in tasks)
    np.testing.assert_array_equal(tasks[0].y, [1.0, 3.0])
    rows = frame().drop(columns=["task", "value"]).to_dict("records")
    np.testing.assert_array_equal(tasks[1].X, space.encode([rows[1], rows[3]]))
    single = from_dataframe(frame().drop(columns="task"), space, name="old")
    assert [(t.name, t.n) for t in single] == [("old", 4)]
    renamed = frame().rename(columns={"task": "dataset", "value": "loss"})
    assert len(from_dataframe(renamed, space, task_column="dataset", value_column="loss")) == 2


def test_a_trials_dataframe_export_reads_back_as_the_study():
    store = get_storage(None)
    space = space4()
    study = run_study(store, "exported", space, [3.0, 1.0, 2.0], failed=1, running=1)
    (task,) = from_dataframe(study.trials_dataframe(), space, name="exported")
    expected = from_study(study)
    np.testing.assert_array_equal(task.X, expected.X)
    np.testing.assert_array_equal(task.y, expected.y)


@pytest.mark.parametrize(
    ("row", "column", "value", "error", "needle"),
    [
        (2, "value", math.nan, MetaDataValueError, r"Task 't2', row 2: 'value' is nan"),
        (1, "value", math.inf, MetaDataValueError, r"Task 't1', row 1: 'value' is inf"),
        (3, "value", "oops", MetaDataValueError, r"Task 't1', row 3: 'value' is 'oops'"),
        (0, "x", math.nan, MetaDataValueError, r"Task 't2', row 0: parameter 'x' is nan"),
        (1, "x", 7.0, SourceSpaceMismatchError, r"Task 't1', row 1: .*'x' = 7\.0 is outside"),
        (2, "c", "z", SourceSpaceMismatchError, r"Task 't2', row 2: .*'c' = 'z' is not one of"),
    ],
)
def test_dataframe_errors_name_the_task_and_row(row, column, value, error, needle):
    df = frame()
    df[column] = df[column].astype(object)
    df.loc[row, column] = value
    with pytest.raises(error, match=needle):
        from_dataframe(df, space4())


def test_dataframe_columns_must_match_the_space():
    space = space4()
    with pytest.raises(SourceSpaceMismatchError, match="parameter 'lr' of the study has no column"):
        from_dataframe(frame().drop(columns="lr"), space)
    with pytest.raises(SourceSpaceMismatchError, match=r"column 'depth' is not a parameter"):
        from_dataframe(frame().assign(depth=3), space)
    with pytest.raises(MetaDataValueError, match="no 'value' column"):
        from_dataframe(frame().drop(columns="value"), space)
    with pytest.raises(EmptySourceError, match="no rows"):
        from_dataframe(frame().iloc[:0], space)


def test_from_csv_and_csv_paths_in_transfer_from(tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "k": hs.Categorical(["1", "2"])})
    path = tmp_path / "old_runs.csv"
    pd.DataFrame({"x": [0.25, 0.5], "k": ["1", "2"], "value": [1.0, 2.0]}).to_csv(path, index=False)
    (task,) = from_csv(path, space)  # pandas reads the "1"/"2" choices as integers
    assert task.name == "old_runs"
    np.testing.assert_array_equal(task.X, [[0.25, 0.25], [0.5, 0.75]])
    store = get_storage(None)
    tasks = resolve_sources([path, str(path)], space, store, direction="maximize")
    assert [t.name for t in tasks] == ["old_runs", "old_runs#2"]
    assert all(t.direction == "maximize" for t in tasks)
    bad = tmp_path / "bad.csv"
    bad.write_text("x,k,value\n0.1,1,1.0\n0.2,2,nan\n")
    with pytest.raises(MetaDataValueError, match=r"row 1 \(line 3 of bad\.csv\)"):
        from_csv(bad, space)
    with pytest.raises(SourceFileError, match="No CSV file"):
        from_csv(tmp_path / "missing.csv", space)
    with pytest.raises(SourceFileError, match="neither an existing CSV file nor a study"):
        resolve_sources("missing.csv", space, store, direction="minimize")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(EmptySourceError):
        from_csv(tmp_path / "empty.csv", space)


# --- arrays and MetaTask objects ------------------------------------------------------------------
def test_from_arrays_with_dicts_and_encoded_arrays():
    space = space4()
    configs = frame().drop(columns=["task", "value"]).to_dict("records")
    task = from_arrays("t", configs, [1, 2, 3, 4], space, direction="maximize")
    np.testing.assert_array_equal(task.X, space.encode(configs))
    again = from_arrays("t", task.X, task.y, space)
    np.testing.assert_array_equal(again.X, task.X)
    assert from_arrays("free", np.full((2, 7), 0.5), [0.0, 0.0]).X.shape == (2, 7)
    constant = from_arrays("flat", task.X, [2.0] * 4, space)  # constant y is valid meta-data
    assert constant.y.std() == 0.0


def test_from_arrays_errors():
    space = space4()
    with pytest.raises(SourceSpaceMismatchError, match=r"3 columns .* encodes to 4"):
        from_arrays("t", np.zeros((2, 3)), [1.0, 2.0], space)
    with pytest.raises(MetaDataValueError, match=r"Task 't', row 1, column 2: 1\.5 is not in"):
        from_arrays("t", [[0, 0, 0, 0], [0, 0, 1.5, 0]], [1.0, 2.0], space)
    with pytest.raises(MetaDataValueError, match="X has 2 rows but y has 3"):
        from_arrays("t", np.zeros((2, 4)), [1.0, 2.0, 3.0], space)
    with pytest.raises(MetaDataValueError, match=r"Task 't', row 1: y is nan"):
        from_arrays("t", np.zeros((2, 4)), [1.0, math.nan], space)
    with pytest.raises(EmptySourceError, match="'t' has no evaluations"):
        from_arrays("t", [], [], space)
    with pytest.raises(InvalidSettingError, match="need space="):
        from_arrays("t", [{"x": 0.0}], [1.0])
    with pytest.raises(SourceSpaceMismatchError, match=r"Task 't', row 0: .*'lr'"):
        from_arrays("t", [{"x": 0.0, "lr": 5.0, "n": 1, "c": "a"}], [1.0], space)
    assert issubclass(MetaDataValueError, InvalidValueError)


def test_meta_task_validates_itself():
    with pytest.raises(InvalidSettingError, match="direction"):
        MetaTask("t", np.zeros((1, 2)), [1.0], direction="down")
    with pytest.raises(MetaDataValueError, match="n x d"):
        MetaTask("t", np.zeros((2, 2)), [1.0])
    with pytest.raises(MetaDataValueError, match=r"Task 't', row 1: y is not finite"):
        MetaTask("t", np.zeros((2, 2)), [1.0, math.inf])


def test_meta_tasks_and_dataframes_mix_in_transfer_from_with_unique_names():
    store = get_storage(None)
    space = space4()
    run_study(store, "t1", space, [1.0])
    own = MetaTask("t1", np.full((1, 4), 0.5), [0.0], direction="maximize")
    tasks = resolve_sources(["t1", frame(), own], space, store, direction="minimize")
    assert [t.name for t in tasks] == ["t1", "t2", "t1#2", "t1#3"]
    assert tasks[-1] is not own and tasks[-1].direction == "maximize"
    with pytest.raises(SourceSpaceMismatchError, match="3 encoded columns"):
        resolve_sources(
            own.__class__("m", np.zeros((1, 3)), [0.0]), space, store, direction="minimize"
        )


def test_data_hash_is_a_canonical_key():
    a = MetaTask("a", np.array([[0.0, 0.5]]), [1.0])
    b = MetaTask("b", np.array([[0.25, 1.0]]), [2.0], direction="maximize")
    key = data_hash([a, b])
    assert len(key) == 64 and key == data_hash([a, b])
    assert key == data_hash([MetaTask("a", np.array([[-0.0, 0.5]]), [1.0]), b])
    assert key != data_hash([b, a])
    assert key != data_hash([a, MetaTask("b", np.array([[0.25, 1.0]]), [2.0])])
    assert key != data_hash([a, MetaTask("b", np.array([[0.25, 1.0]]), [2.5], "maximize")])
    assert key != data_hash([a, MetaTask("c", np.array([[0.25, 1.0]]), [2.0], "maximize")])
    assert data_hash([MetaTask("a", np.zeros((2, 1)), [0, 0])]) != data_hash(
        [MetaTask("a", np.zeros((1, 2)), [0])]
    )


# --- round trip -----------------------------------------------------------------------------------
ROUND_TRIP_SPACE = hs.SearchSpace(
    {
        "x": hs.Float(-3.0, 5.0),
        "lr": hs.Float(1e-5, 1.0, log=True),
        "n": hs.Int(-2, 9),
        "width": hs.Int(1, 1024, log=True),
        "c": hs.Categorical(["adam", 1, True, None, 2.5]),
        "fixed": hs.Fixed("on"),
    }
)

rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "task": st.sampled_from(["p", "q", "r"]),
            "x": st.floats(-3.0, 5.0),
            "lr": st.floats(1e-5, 1.0),
            "n": st.integers(-2, 9),
            "width": st.integers(1, 1024),
            "c": st.sampled_from(["adam", 1, True, None, 2.5]),
            "value": st.floats(-1e6, 1e6),
        }
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy)
def test_dataframe_to_meta_task_to_decode_gives_the_params_back(rows):
    df = pd.DataFrame(rows, columns=list(rows[0])).astype({"c": object})
    tasks = from_dataframe(df, ROUND_TRIP_SPACE)
    assert [t.name for t in tasks] == list(dict.fromkeys(r["task"] for r in rows))
    for task in tasks:
        mine = [r for r in rows if r["task"] == task.name]
        np.testing.assert_array_equal(task.y, [r["value"] for r in mine])
        for back, r in zip(ROUND_TRIP_SPACE.decode(task.X), mine, strict=True):
            assert back["x"] == pytest.approx(r["x"], rel=1e-12, abs=1e-12)
            assert back["lr"] == pytest.approx(r["lr"], rel=1e-12)
            assert (back["n"], back["width"], back["fixed"]) == (r["n"], r["width"], "on")
            assert type(back["c"]) is type(r["c"]) and back["c"] == r["c"]


@pytest.mark.parametrize("module", ["_task", "_studies", "_tables"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"headstart.sources.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("method", ["scaml", "mphd"])
def test_transfer_from_all_in_memory_says_it_has_no_earlier_studies(method):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.EmptySourceError, match="in-memory storage") as e:
        hs.create_study("t", space, storage=None, method=method, transfer_from="all")
    assert "%3A" not in str(e.value)
