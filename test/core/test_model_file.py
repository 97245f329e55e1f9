"""The model file contract: round trips, and every malformed file says exactly what is wrong."""

import copy
import json
import os
import stat

import numpy as np
import pytest

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    DataError,
    ModelFormatError,
    benchmark_network,
    predict,
    predict_batch,
)
from affordance_ros.core.errors import UnknownColumnError
from affordance_ros.core.scenarios import scenario_cases, simulate
from affordance_ros.share import configuration_file, default_config_path


@pytest.fixture
def doc():
    return benchmark_network("montesano", sigma=3.0, seed=0).to_dict()


def test_schema_fields(doc):
    assert doc["format"] == "affordance_ros/model/1"
    contact = next(v for v in doc["variables"] if v["name"] == "Contact")
    assert contact["parents"] == ["Action", "Shape", "Size", "ObjHandVel"]
    assert np.shape(contact["cpt"]) == (3, 2, 3, 3, 2)
    assert contact["sensor"] == {"name": "contact", "means": [0.0, 5.0], "stddevs": [3.0, 3.0]}
    assert AffordanceNetwork.from_dict(json.loads(json.dumps(doc))).to_dict() == doc


def mutate(doc, name, **changes):
    doc = copy.deepcopy(doc)
    var = next(v for v in doc["variables"] if v["name"] == name)
    var.update(changes)
    return doc


@pytest.mark.parametrize("change, message", [
    (lambda d: mutate(d, "Shape", cpt=[0.5, 0.4]), "rows must sum to 1"),
    (lambda d: mutate(d, "Shape", cpt=[0.5, 0.25, 0.25]), r"shape \[3\], expected \[2\]"),
    (lambda d: mutate(d, "Shape", cpt=[1.5, -0.5]), ">= 0"),
    (lambda d: mutate(d, "Shape", cpt=[[0.5], [0.5, 0.5]]), "nested lists"),
    (lambda d: mutate(d, "Shape", parents=["Nope"]), "unknown parent 'Nope'"),
    (lambda d: mutate(d, "Shape", parents=["Shape"], cpt=None), "own parent"),
    (lambda d: mutate(mutate(d, "Action", parents=["Contact"], cpt=None), "Contact", cpt=None), "cycle"),
    (lambda d: mutate(d, "Shape", group="thing"), "group 'thing'"),
    (lambda d: mutate(d, "Shape", values=["circle", "circle"]), "repeated values"),
    (lambda d: mutate(d, "Shape", sensor={"name": "shape", "means": [0.0], "stddevs": [1.0]}), "one per value"),
    (lambda d: mutate(d, "Shape", sensor={"name": "shape", "means": [0.0, 1.0], "stddevs": [1.0, 0.0]}), "> 0"),
    (lambda d: mutate(d, "Shape", sensor={"name": "size", "means": [0.0, 1], "stddevs": [1.0, 1]}), "used twice"),
    (lambda d: mutate(d, "Shape", colour="red"), "unknown keys"),
    (lambda d: {**d, "format": "other/2"}, "'format'"),
    (lambda d: {**d, "variables": {}}, "must be a list"),
    (lambda d: {**d, "extra": 1}, "unknown top-level keys"),
])
def test_invalid_models_are_rejected_with_the_reason(doc, change, message):
    with pytest.raises(ModelFormatError, match=message):
        AffordanceNetwork.from_dict(change(doc))


def test_corrupt_and_missing_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "affordance_ros/model/1", "variables": [')
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        AffordanceNetwork.load(bad)
    with pytest.raises(ModelFormatError, match="cannot read"):
        AffordanceNetwork.load(tmp_path / "missing.json")


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path):
    net = benchmark_network("simple", sigma=1.0, seed=0)
    path = tmp_path / "models" / "m.json"
    net.save(path)
    net.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["m.json"]


def test_config_without_cpts_and_parents_is_valid(doc):
    for v in doc["variables"]:
        del v["cpt"], v["parents"]
    net = AffordanceNetwork.from_dict(doc)
    assert not net.structure_known and not net.parameterised


def write_csv(path, text):
    path.write_text(text)
    return path


def test_cases_csv(tmp_path):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    path = write_csv(tmp_path / "c.csv", "trial_id,Action,obj_vel,contact\nt1,tap,1.5,\nt2,,2.0,7\n")
    cases = CaseSet.from_csv(net, path)
    assert cases.n_cases == 2
    assert cases.labels["Action"].tolist() == [1, -1]
    assert np.isnan(cases.readings["contact"][0]) and cases.readings["contact"][1] == 7.0
    assert cases.lines.tolist() == [2, 3] and cases.take([1]).where(0) == "line 3"
    # the file all of whose rows these are: a part of them is not (an empty part says nothing of the file)
    assert cases.source == path and cases.with_network(net).source == path and cases.take([1]).source is None
    cases.to_csv(tmp_path / "out.csv")
    again = CaseSet.from_csv(net, tmp_path / "out.csv")
    np.testing.assert_array_equal(again.readings["obj_vel"], cases.readings["obj_vel"])


@pytest.mark.parametrize("text, message", [
    ("trial_id,Action\nt1,kick\n", "unknown label 'kick'"),
    ("trial_id,obj_vel\nt1,nan\n", "finite"),
    ("trial_id,obj_vel\nt1,fast\n", "not a number"),
    ("trial_id,speed\nt1,1\n", "column 'speed'"),
    ("Action\ntap\n", "trial_id"),
    ("trial_id,obj_vel\nt1,1,2\n", "line 2"),
    ("", "empty"),
])
def test_bad_cases_csv(tmp_path, text, message):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    with pytest.raises(DataError, match=message):
        CaseSet.from_csv(net, write_csv(tmp_path / "c.csv", text))


def test_a_column_named_twice_is_an_error_naming_it(tmp_path):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    path = write_csv(tmp_path / "c.csv", "trial_id,size,Action,size\nt1,2.5,tap,1.0\nt2,3.5,grasp,1.0\n")
    with pytest.raises(DataError) as caught:
        CaseSet.from_csv(net, path)
    assert str(caught.value) == f"'{path}': the header names column 'size' twice; keep one of them"


def test_a_byte_order_mark_is_not_part_of_the_first_column_name(tmp_path):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    path = tmp_path / "excel.csv"
    path.write_bytes("trial_id,Action,obj_vel\r\nt1,tap,1.5\r\n".encode("utf-8-sig"))
    cases = CaseSet.from_csv(net, path)
    assert cases.trial_ids.tolist() == ["t1"] and cases.readings["obj_vel"].tolist() == [1.5]


@pytest.mark.parametrize("column, near", [("action", "Action"), ("OBJ_VEL", "obj_vel")])
def test_a_column_named_as_a_variable_or_sensor_but_for_case_is_said(tmp_path, column, near):
    net = AffordanceNetwork.load(default_config_path())  # (the action observed by label only)
    path = write_csv(tmp_path / "c.csv", f"trial_id,{column}\nt1,tap\n")
    with pytest.raises(UnknownColumnError) as caught:
        CaseSet.from_csv(net, path)
    assert str(caught.value) == f"'{path}': column '{column}': did you mean '{near}'? (names are case-sensitive)"
    assert caught.value.near == near


def test_a_repeated_trial_id_is_an_error_naming_it_and_its_lines(tmp_path):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    path = write_csv(tmp_path / "c.csv", "trial_id,Action\nt1,tap\nt2,tap\nt1,grasp\nt2,touch\nt3,tap\n")
    with pytest.raises(DataError) as caught:
        CaseSet.from_csv(net, path)
    assert str(caught.value) == (f"'{path}' line 4: trial_id 't1' is that of line 2 too (2 rows repeat an earlier "
                                 "trial_id); every case needs its own trial_id")


@pytest.mark.parametrize("text, message", [
    ("trial_id,Action,obj_vel\n\nt1,tap,1.5\n\nt2,tap,abc\n",
     "line 5: reading 'abc' of sensor 'obj_vel' is not a number"),
    ("trial_id,Action,obj_vel\n\n\nt1,tap,1.5\nt1,grasp,2\n", "line 5: trial_id 't1' is that of line 4 too"),
    ('trial_id,Action,obj_vel\n"t\n1",tap,1.5\nt2,tap\n', "line 4: 2 fields, the header has 3"),
    ("trial_id,Action,obj_vel\n\nt1,tap,1.5\n\nt2,tap,nan\n",
     "line 5: reading of sensor 'obj_vel' is nan, expected a finite number (leave it out when it is missing)"),
    ("trial_id,Action,obj_vel\n\nt1,tap,1.5\n\nt2,jump,2\nt3,hop,2\n",
     "line 5: unknown label 'jump' for variable 'Action'; expected one of ['grasp', 'tap', 'touch']"),
    ('trial_id,Action,obj_vel\n"t\n1",tap,1.5\nt2,tap,1e300\n',
     "line 4: reading of sensor 'obj_vel' is 1e+300, outside its valid_range"),
])
def test_a_csv_error_names_the_line_of_the_file_blank_lines_and_quoted_line_breaks_counted(tmp_path, text, message):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    path = write_csv(tmp_path / "c.csv", text)
    with pytest.raises(DataError) as caught:
        CaseSet.from_csv(net, path)
    assert str(caught.value).startswith(f"'{path}' {message}")


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 200000 + b"]" * 200000, "nested too deeply"),
    (json.dumps({"format": "affordance_ros/model/1",
                 "variables": [{"name": ["a"], "group": "action", "values": ["x"]}]}).encode(), "malformed model"),
    (json.dumps({"format": "affordance_ros/model/1",
                 "variables": [{"name": "A", "group": ["action"], "values": ["x"]}]}).encode(), "."),
    (json.dumps({"format": "affordance_ros/model/1", "variables": [
        {"name": "A", "group": "action", "values": ["x", ["y"]]}]}).encode(), "."),
    (b'{"format": "affordance_ros/model/1", "variables": [' + b"1" * 5000 + b"]}", "."),
])
def test_every_damaged_file_is_a_model_format_error(tmp_path, content, message):
    path = tmp_path / "model.json"
    path.write_bytes(content)
    with pytest.raises(ModelFormatError, match=message):
        AffordanceNetwork.load(path)


@pytest.mark.parametrize("content, kind, advice", [
    (b"trial_id,Action,color\nt1,tap,4.2\n", "a cases CSV file", "cases, to learn a model from (affordance-ros learn"),
    (b"\xef\xbb\xbfAction,trial_id\r\n", "a cases CSV file", "cases, to learn a model from"),
    (b"SQLite format 3\x00" + bytes(range(256)), "an SQLite database (the node's cases, or a bag's)", "cases, to"),
    (b"\x89MCAP0\r\n" + bytes(range(256)), "an MCAP bag", "cases, to learn a model from"),
    (b"network affordance {\n}\nvariable Action {\n", "a BIF network", "another tool's network, to make a model "
                                                                       "of with a configuration (affordance-ros "
                                                                       "import-model)"),
    (b"MARKOV\n2\n", "a UAI network", "another tool's network"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "a picture", ""),
])
@pytest.mark.parametrize("what", ["model file", "configuration"])
def test_a_file_of_another_kind_given_as_a_model_says_what_it_is(tmp_path, content, kind, advice, what):
    """It says that the file is the cases (or a database, ...), not the model: not only "not valid JSON" or "not
    UTF-8 text"."""
    path = tmp_path / "given"
    path.write_bytes(content)
    with pytest.raises(ModelFormatError) as caught:
        AffordanceNetwork.load(path, what=what)
    assert str(caught.value).startswith(f"'{path}' is {kind}, not a {what} (a JSON file)" + (f": {advice}" if advice
                                                                                             else "")), caught.value


def test_valid_range_round_trip_and_default(doc):
    config = AffordanceNetwork.from_dict(doc)
    assert config["Color"].sensor.valid_range is None and config["Color"].sensor.bounds == (-1e9, 1e9)
    ranged = mutate(doc, "Color", sensor={**doc["variables"][config.index("Color")]["sensor"], "valid_range": [-5, 50]})
    network = AffordanceNetwork.from_dict(ranged)
    assert network["Color"].sensor.bounds == (-5.0, 50.0)
    assert network.to_dict()["variables"][network.index("Color")]["sensor"]["valid_range"] == [-5.0, 50.0]
    for bad in ([1, 1], [2, 1], [0, float("inf")], ["a", 1], [1]):
        with pytest.raises(ModelFormatError, match="valid_range"):
            AffordanceNetwork.from_dict(mutate(doc, "Color", sensor={"name": "color", "valid_range": bad}))


def test_impossible_cases_are_found_and_can_be_left_out():
    network = benchmark_network("montesano", sigma=1.0, seed=0)
    # (built as stored cases are: from_columns refuses readings outside the sensors' valid_range)
    cases = CaseSet(network, {}, {"color": np.array([1.0, 2e154, 3.0]), "obj_vel": np.array([5.0, 5.0, -3e200])},
                    trial_ids=["ok", "huge", "huger"])
    assert cases.impossible().tolist() == [False, True, True]
    with pytest.raises(Exception, match="zero likelihood"):
        cases.evidence()
    kept = cases.take(~cases.impossible())
    assert list(kept.trial_ids) == ["ok"] and kept.evidence().n_cases == 1
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_model_files_get_the_permissions_of_the_umask(tmp_path, umask, mode):
    model = benchmark_network("montesano", sigma=1.0, seed=0)
    old = os.umask(umask)
    try:
        model.save(tmp_path / "model.json")
        model.save(tmp_path / "model.json")  # replaced: still the umask's
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "model.json").stat().st_mode) == mode


@pytest.fixture(scope="module")
def learned_hands():
    """A model learned with the shipped hands configuration: 1-D and vector sensors, an effect found per condition
    (cluster_by), counts, posterior draws and the learn's metadata."""
    config = AffordanceNetwork.load(configuration_file("hands"))
    return AffordanceLearner(structural_em=0).fit(config, scenario_cases(config, simulate("hands", 3, seed=0))).model_


@pytest.mark.posterior
def test_a_learned_model_read_back_from_its_file_is_the_same_model_and_predicts_to_the_last_bit(learned_hands,
                                                                                                 tmp_path):
    model = learned_hands
    assert model.has_vector_sensors and model.has_counts and model["Effect"].sensor.cluster_by
    assert model["Effect"].draws is not None
    model.save(tmp_path / "model.json")
    loaded = AffordanceNetwork.load(tmp_path / "model.json")
    assert loaded.to_dict() == json.loads((tmp_path / "model.json").read_text()) == json.loads(json.dumps(
        model.to_dict()))
    rng = np.random.default_rng(0)
    k = 300
    sensors = {name: np.where(rng.random(k) < 0.3, None, rng.normal(0, 2, k)).tolist()
               for name in model.sensor_variable}
    values = {"Action": np.where(rng.random(k) < 0.2, None, rng.choice(model["Action"].values, k)).tolist()}
    for query in (["effect"], ["Hand", "Object"], ["action", "effect"]):
        before, after = (predict_batch(m, query, sensors, values) for m in (model, loaded))
        np.testing.assert_array_equal(after.joint, before.joint)
        for name, readings in before.readings.items():
            np.testing.assert_array_equal(after.readings[name].mean, readings.mean)
            np.testing.assert_array_equal(after.readings[name].stddev, readings.stddev)
    one = {"sensors": {"dx": 1.5, "finger_flexion": 0.3}, "values": {"Action": model["Action"].values[1]}}
    assert predict(loaded, ["effect", "object"], **one) == predict(model, ["effect", "object"], **one)


def values_replaced(doc):
    """Copies of ``doc`` with one of its values (at any depth) replaced by a value of another JSON type or range."""
    replacements = [None, True, 0, -1, 1e308, 2 ** 70, "", "x", [], [1], [[1.0]], ["x"], {}, {"a": 1}]
    paths, todo = [], [()]
    while todo:
        path = todo.pop()
        paths.append(path)
        node = doc
        for key in path:
            node = node[key]
        if isinstance(node, (dict, list)):
            todo.extend(path + (key,) for key in (node if isinstance(node, dict) else range(len(node))))
    for path in paths[1:]:
        for value in replacements:
            changed = copy.deepcopy(doc)
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            yield path, changed


@pytest.mark.posterior
def test_every_truncation_damaged_byte_or_wrong_value_of_a_model_file_is_a_model_format_error(learned_hands,
                                                                                              tmp_path):
    """docs/model-format.md, Errors: 'Every damaged file is a ModelFormatError ..., never another exception': the
    file of a learned model cut at any point, with any byte changed, or with any value replaced by one of another
    type (what a hand edit does) either loads or is refused with ModelFormatError."""
    path = tmp_path / "model.json"
    small = AffordanceNetwork(learned_hands.variables[:3])  # (the Effect's 48 values make a long file)
    text = json.dumps(small.to_dict()).encode()
    rng = np.random.default_rng(0)
    damaged = [text[:n] for n in range(0, len(text), 7)]
    damaged += [text[:k] + bytes([int(b)]) + text[k + 1:] for k, b in zip(rng.integers(0, len(text), 2000),
                                                                        rng.integers(0, 256, 2000))]
    for content in damaged:
        path.write_bytes(content)
        try:
            AffordanceNetwork.load(path)
        except ModelFormatError:
            pass
    doc = json.loads(json.dumps(learned_hands.to_dict()))
    doc["variables"] = doc["variables"][:3] + [{**doc["variables"][3], "values": doc["variables"][3]["values"][:2],
                                                "cpt": [0.5, 0.5], "counts": [1.0, 1.0], "parents": [],
                                                "draws": [[1.0, 2.0], [3.5, 1.0]], "prior": [1.0, 0.5]}]
    doc["variables"][3]["sensor"] = {**doc["variables"][3]["sensor"],
                                     "means": doc["variables"][3]["sensor"]["means"][:2],
                                     "covariances": doc["variables"][3]["sensor"]["covariances"][:2]}
    for variable in doc["variables"]:   # (two posterior draws: every value of 200 would be replaced in turn)
        variable["draws"] = variable["draws"][:2]
    AffordanceNetwork.from_dict(doc)  # (sound: a value-sized effect)
    for where, changed in values_replaced(doc):
        try:
            AffordanceNetwork.from_dict(changed)
        except ModelFormatError:
            pass
        except Exception as exc:  # noqa: BLE001 (the claim is about every other exception)
            pytest.fail(f"{where}: {type(exc).__name__}: {exc}")


def with_draws(doc, n_draws=3):
    """``doc`` with ``n_draws`` posterior draws per variable: counts of 20 cases in the CPT's proportions, prior 1."""
    doc = copy.deepcopy(doc)
    for variable in doc["variables"]:
        counts = 20 * np.asarray(variable["cpt"])
        variable["draws"] = [counts.tolist()] * n_draws
        variable["prior"] = np.ones_like(counts).tolist()
    return doc


@pytest.mark.parametrize("row, message", [
    ([1e308, 1e308], "variable 'Shape': 'draws': the CPT rows of draw 1 must sum to 1, but its row sums to 0: "
                            "draw + prior there total inf, more than a double holds (draws are counts of cases, each "
                            "row's total with the prior a finite number)"),
    ([1.0, float("nan")], "variable 'Shape': 'draws' must be finite and >= 0 (they are counts of cases); draw 1, "
                               "entry [1] is nan"),
    ([float("inf"), 1.0], "variable 'Shape': 'draws' must be finite and >= 0 (they are counts of cases); draw 1, "
                               "entry [0] is inf"),
    ([1.0, -50.0], "variable 'Shape': 'draws' must be finite and >= 0 (they are counts of cases); draw 1, entry "
                        "[1] is -50"),
])
def test_draws_that_are_not_counts_or_whose_rows_cannot_sum_to_1_are_refused_at_load_naming_them(doc, tmp_path, row,
                                                                                                  message):
    """Draws are checked as draws at load: a draw of [1e308, 1e308] must not load and then fail every predict
    ("cpt rows must sum to 1 ... sums to 0"), and NaN, inf or -50 are named as bad draws, not as bad lists."""
    changed = with_draws(doc)
    shape = next(v for v in changed["variables"] if v["name"] == "Shape")
    assert len(shape["values"]) == len(row) and shape["parents"] == []
    shape["draws"][1] = row
    path = tmp_path / "model.json"
    path.write_text(json.dumps(changed))
    with pytest.raises(ModelFormatError) as refused:
        AffordanceNetwork.load(path)
    assert str(refused.value) == f"'{path}': {message}"


def test_draws_of_any_size_a_double_holds_load_and_answer(doc):
    changed = with_draws(doc)
    shape = next(v for v in changed["variables"] if v["name"] == "Shape")
    shape["draws"][1] = [1e308, 5e307]  # (their total, 1.5e308, is still a number)
    model = AffordanceNetwork.from_dict(changed)
    answer = predict(model, ["Shape"], values={"Action": model["Action"].values[0]})
    assert sum(answer.marginals["Shape"].values()) == pytest.approx(1.0)
    assert all(np.isfinite(list(answer.stddevs["Shape"].values())))
