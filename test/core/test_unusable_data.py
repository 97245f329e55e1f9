"""Data a configuration cannot learn from: a configured variable or sensor column that no case has (an error naming
it, unless latent or allowed), a reading outside its sensor's valid_range (refused, naming sensor, reading, range)."""

import dataclasses
import re

import numpy as np
import pytest

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    DataError,
    EvidenceError,
    LearningOptions,
    ModelFormatError,
    SensorModel,
    Variable,
    benchmark_network,
    predict,
    predict_batch,
    rank_actions,
    sample_cases,
)
from affordance_ros.share import default_config_path


@pytest.fixture(scope="module")
def montesano():
    truth = benchmark_network("montesano", sigma=1.0, seed=3)
    cases, _ = sample_cases(truth, 400, np.random.default_rng(0), labelled=("Action",))
    config = AffordanceNetwork.load(default_config_path())  # (its Action has no sensor: observed by label)
    return config, cases.with_network(config)


def without(cases, *names, empty=False):
    """The cases without the label or reading columns ``names`` (``empty``: the columns kept, every entry missing)."""
    labels = {n: (np.full(cases.n_cases, -1) if empty else None) if n in names else c for n, c in cases.labels.items()}
    readings = {n: (np.full(cases.n_cases, np.nan) if empty else None) if n in names else x
                for n, x in cases.readings.items()}
    return CaseSet(cases.network, {n: c for n, c in labels.items() if c is not None},
                   {n: x for n, x in readings.items() if x is not None}, cases.trial_ids)


@pytest.mark.parametrize("column, variable, state", [
    ("Action", "Action", "no column 'Action'"),
    ("size", "Size", "no column 'size'"),
])
@pytest.mark.parametrize("empty", [False, True])
def test_a_variable_without_data_is_an_error_naming_it_and_its_column(montesano, column, variable, state, empty):
    config, cases = montesano
    if empty:
        state = f"column '{column}' is empty"
    with pytest.raises(DataError, match=f"variable '{variable}' \\({state}\\).*'latent'.*allow_missing"):
        AffordanceLearner().fit(config, without(cases, column, empty=empty))


def test_every_variable_without_data_is_named_at_once(montesano):
    config, cases = montesano
    with pytest.raises(DataError) as error:
        AffordanceLearner().fit(config, without(cases, "Action", "size", "contact"))
    assert ("variable 'Action' (no column 'Action'), variable 'Size' (no column 'size') and variable 'Contact' "
            "(no column 'contact')") in str(error.value)


def test_allow_missing_learns_with_a_warning_in_the_result_and_the_model(montesano):
    config, cases = montesano
    learner = AffordanceLearner(allow_missing=True).fit(config, without(cases, "size"))
    [warning] = learner.result_.warnings
    assert "variable 'Size' (no column 'size')" in warning and "allow_missing" in warning
    assert learner.model_.metadata["learned"]["warnings"] == [warning]
    assert learner.model_.parameterised
    complete = AffordanceLearner().fit(config, cases)
    assert complete.result_.warnings == [] and "warnings" not in complete.model_.metadata["learned"]


def test_allow_missing_comes_from_the_configurations_learning_block_too(montesano):
    config, cases = montesano
    allowed = AffordanceNetwork(config.variables, learning={"allow_missing": True})
    assert AffordanceLearner().fit(allowed, without(cases, "Action")).result_.warnings


def test_a_variable_observed_by_label_needs_no_readings_of_its_sensor(montesano):
    config, cases = montesano
    codes = sample_cases(benchmark_network("montesano", sigma=1.0, seed=3), 300, np.random.default_rng(1),
                         labelled=tuple(config.names))[0]
    assert codes.readings == {}
    assert AffordanceLearner().fit(config, codes).result_.warnings == []


def test_a_vector_sensor_with_a_column_left_out_is_an_error():
    rng = np.random.default_rng(0)
    shape = Variable("Shape", "object", ("round", "long"), (),
                     sensor=SensorModel(names=("convexity", "elongation"), means=np.array([[0.0, 0.0], [5.0, 5.0]]),
                                        covariances=np.stack([np.eye(2)] * 2)))
    config = AffordanceNetwork([Variable("Action", "action", ("push", "pull"), ()), shape])
    n = 200
    action = rng.integers(0, 2, n)
    cases = CaseSet(config, {"Action": action}, {"convexity": rng.normal(5.0 * action, 1.0)})
    with pytest.raises(DataError, match=r"sensor of 'Shape' \(no column 'elongation'\)"):
        AffordanceLearner().fit(config, cases)


def test_latent_variables_of_the_configuration_need_no_data():
    h = Variable("H", "object", ("h0", "h1"), ())
    children = [Variable(n, "effect", ("x", "y"), ("H",)) for n in "AB"]
    rng = np.random.default_rng(0)
    labels = {n: rng.integers(0, 2, 300) for n in "AB"}
    config = AffordanceNetwork([h, *children], learning={"structure": "fixed"})
    with pytest.raises(DataError, match="variable 'H' \\(no column 'H'\\)"):
        AffordanceLearner().fit(config, CaseSet(config, labels, {}))
    learner = AffordanceLearner(latent=("H",)).fit(config, CaseSet(config, labels, {}))
    assert learner.result_.warnings == [] and learner.model_.parameterised
    with pytest.raises(ModelFormatError, match="'latent' names \\['Nope'\\], not variables"):
        AffordanceLearner(latent=("Nope",)).fit(config, CaseSet(config, labels, {}))


@pytest.mark.parametrize("options, message", [
    ({"latent": "H"}, "'latent' must be a list of variable names"),
    ({"latent": [1]}, "'latent' must be a list of variable names"),
    ({"allow_missing": "yes"}, "'allow_missing' must be true or false"),
])
def test_the_options_are_checked(options, message):
    with pytest.raises(ModelFormatError, match=message):
        LearningOptions(**options)


def test_a_reading_outside_the_valid_range_is_refused_naming_the_sensor_the_reading_and_the_range(montesano):
    config, cases = montesano
    model = AffordanceLearner().fit(config, cases).model_
    expected = ("reading of sensor 'size' is 1e+300, outside its valid_range [-1e+09, 1e+09] (set 'valid_range' in "
                "the sensor's configuration if such readings are real)")
    with pytest.raises(DataError) as error:
        CaseSet.from_columns(config, {"size": [1.0, 1e300]}, ["t0", "t1"])
    assert str(error.value) == f"trial 't1' (case index 1): {expected}"
    for query in (lambda: predict(model, ["action"], sensors={"size": 1e300}),
                  lambda: predict_batch(model, ["action"], sensors={"size": [1.0, 1e300]}),
                  lambda: rank_actions(model, {"ObjVel": "fast"}, sensors={"size": 1e300})):
        with pytest.raises(EvidenceError, match=re.escape(expected)):
            query()
    narrow = dataclasses.replace(config["Size"].sensor, valid_range=(0.0, 12.0))
    config = config.replace_variables({"Size": {"sensor": narrow}})
    with pytest.raises(DataError, match=re.escape("reading of sensor 'size' is -0.5, outside its valid_range [0, 12]")):
        CaseSet.from_columns(config, {"size": [-0.5]})
    assert predict(model, ["action"], sensors={"size": 1e9}).most_probable
