"""The Python API (docs/python-api.md) as a scikit-learn user calls it: numpy's numbers and arrays where the docs
show Python's, and the mistakes such a user makes (a string for a list, wrong shapes, NaN, no cases, unknown
names, cases or a model of another configuration), each answered as it should be or with an error that says what
to fix."""

import json

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
    benchmark_network,
    predict,
    predict_batch,
    rank_actions,
    sample_cases,
)
from affordance_ros.core.suggest import Candidate, suggest_trials
from affordance_ros.share import default_config_path


@pytest.fixture(scope="module")
def model():
    """The montesano ground truth: a parameterised model, as a learned one is."""
    return benchmark_network("montesano", sigma=1.0, seed=0)


@pytest.mark.parametrize("reading", [np.float32(9.5), np.float64(9.5), np.int64(9), np.array([9.5, 1.0])[0]])
def test_a_reading_that_is_a_numpy_number_is_the_same_reading(model, reading):
    # what indexing an array gives: predict and rank_actions refused np.float32 and np.int64 as "not a finite number"
    plain = float(reading)
    assert predict(model, ["action"], sensors={"obj_vel": reading}) == predict(model, ["action"],
                                                                                sensors={"obj_vel": plain})
    assert rank_actions(model, {"ObjVel": "fast"}, sensors={"size": reading}) == rank_actions(
        model, {"ObjVel": "fast"}, sensors={"size": plain})


@pytest.mark.parametrize("reading", [True, np.bool_(True), "9.5", [9.5], np.float32("nan"), np.inf])
def test_a_reading_that_is_not_one_finite_number_is_refused_naming_it(model, reading):
    with pytest.raises(EvidenceError, match="reading of sensor 'obj_vel' must be a finite number, got"):
        predict(model, ["action"], sensors={"obj_vel": reading})


def test_learning_options_take_numpy_numbers_and_keep_python_ones():
    # a grid of options is an array: LearningOptions(max_iter=np.int64(10)) is an integer >= 1
    options = LearningOptions(max_iter=np.int64(10), seed=np.arange(3)[2], prior=np.float32(0.5), tol=np.float64(1e-4),
                              mcmc_samples=np.int32(7))
    assert (options.max_iter, options.seed, options.prior, options.tol, options.mcmc_samples) == (10, 2, 0.5, 1e-4, 7)
    assert [type(x) for x in (options.max_iter, options.seed, options.prior, options.mcmc_samples)] == [int, int,
                                                                                                      float, int]
    json.dumps(options.to_dict())  # (numpy's numbers are not JSON)
    assert LearningOptions(prior=1).to_dict()["prior"] == 1 and type(LearningOptions(prior=1).prior) is int
    for bad in ({"max_iter": np.float64(10.0)}, {"max_iter": np.bool_(True)}, {"seed": True}, {"prior": np.nan},
                {"max_iter": np.int64(0)}):
        with pytest.raises(ModelFormatError, match=f"learning option '{next(iter(bad))}' must be"):
            LearningOptions(**bad)


@pytest.mark.parametrize("query", ["Action", "action"])
def test_a_query_given_as_a_string_says_to_give_a_list(model, query):
    # not its letters taken for names: "unknown variable 'A'"
    for ask in (lambda: predict(model, query), lambda: predict_batch(model, query, sensors={"size": [1.0]})):
        with pytest.raises(EvidenceError) as caught:
            ask()
        assert str(caught.value) == (f"the query is the string '{query}': give a list of variable names or groups, "
                                     f"e.g. ['{query}']")


def test_a_batch_of_no_cases_has_no_rows(model):
    # (a one-line error, not AttributeError from inside)
    batch = predict_batch(model, ["effect"], sensors={"size": np.array([])}, values={"Action": []})
    assert batch.variables == ["ObjVel", "ObjHandVel", "HandVel", "Contact"]
    assert batch.marginals["ObjVel"].shape == (0, 3) and batch.most_probable.shape == (0, 4)
    assert batch.joint.shape == (0, 3, 3, 4, 2) and batch.joint_probability.shape == (0,)
    assert batch.readings["ObjVel"].mean.shape == (0, 1) and batch.readings["ObjVel"].stddev.shape == (0, 1)


def test_a_batch_column_vector_is_the_column_and_a_table_is_refused(model):
    column = np.array([[0.4], [5.2], [9.9]])
    np.testing.assert_array_equal(predict_batch(model, ["effect"], sensors={"size": column}).marginals["ObjVel"],
                                  predict_batch(model, ["effect"], sensors={"size": column[:, 0]}).marginals["ObjVel"])
    # a (3, 2) array is refused as such, not as "reading array([0., 0.]) of sensor 'size' is not a number"
    with pytest.raises(EvidenceError) as caught:
        predict_batch(model, ["effect"], sensors={"size": np.zeros((3, 2))})
    assert str(caught.value) == ("column 'size': an array of shape [3, 2]; give one entry per case (a list or a 1-D "
                                 "array)")


@pytest.mark.parametrize("column, given", [(np.zeros((3, 2)), "an array of shape [3, 2]"), (2.5, "a single value")])
def test_a_case_set_of_columns_that_are_not_one_entry_per_case_is_refused(model, column, given):
    # a (3, 2) array of readings is not 3 cases, and a single number is no IndexError: both are refused
    with pytest.raises(DataError) as caught:
        CaseSet(model, {}, {"size": column})
    assert str(caught.value) == (f"the readings of sensor 'size': {given}; give one entry per case (a list or a 1-D "
                                 "array)")
    with pytest.raises(DataError, match="column 'size'(: an array of shape| is 2.5)"):
        CaseSet.from_columns(model, {"size": column})


def test_columns_of_different_lengths_are_named_with_their_lengths(model):
    # saying which column, not only "columns of different lengths [2, 3]"
    with pytest.raises(EvidenceError) as caught:
        predict_batch(model, ["effect"], values={"Action": ["tap"] * 3}, sensors={"size": [0.4, 5.2], "color": [1, 2]})
    assert str(caught.value) == ("columns of different lengths: 2 in 'size', 'color'; 3 in 'Action' (one entry per "
                                 "case in each)")
    with pytest.raises(DataError, match=r"columns of different lengths: 1 in 'trial_ids'; 2 in 'size'"):
        CaseSet.from_columns(model, {"size": [1.0, 2.0]}, trial_ids=["t1"])


def test_a_missing_entry_given_as_nan_says_how_to_give_it(model):
    with pytest.raises(EvidenceError) as caught:
        predict_batch(model, ["effect"], sensors={"size": np.array([1.0, np.nan])})
    assert str(caught.value) == ("case index 1: reading of sensor 'size' is nan, expected a finite number (None where "
                                 "it is missing)")
    with pytest.raises(DataError) as caught:  # pandas' missing label
        CaseSet.from_columns(model, {"Action": ["tap", float("nan")]}, trial_ids=["t1", "t2"])
    assert str(caught.value) == ("trial 't2' (case index 1): unknown label 'nan' for variable 'Action'; expected one "
                                 "of ['grasp', 'tap', 'touch']; a missing label is None or ''")
    both = predict_batch(model, ["effect"], sensors={"size": [1.0, None]}, values={"Action": ["tap", None]})
    alone = predict_batch(model, ["effect"], sensors={"size": [1.0]}, values={"Action": ["tap"]})
    nothing = predict_batch(model, ["effect"])
    np.testing.assert_allclose(both.joint, np.concatenate([alone.joint, nothing.joint]), rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def config_and_cases():
    """The shipped montesano configuration and 150 cases of its ground truth, read for it."""
    truth = benchmark_network("montesano", sigma=1.0, seed=0)
    cases, _ = sample_cases(truth, 150, np.random.default_rng(0), labelled=("Action",))
    config = AffordanceNetwork.load(default_config_path())
    return config, cases.with_network(config)


def test_what_is_not_a_model_a_configuration_or_cases_says_what_to_give(config_and_cases, tmp_path):
    # each a one-line error, not AttributeError ("'str' object has no attribute 'n_cases'", ...)
    config, cases = config_and_cases
    for call, message in [
        (lambda: AffordanceLearner().fit(str(default_config_path()), cases),
         "fit(config, cases): the config is a str, expected an AffordanceNetwork: AffordanceNetwork.load(path)"),
        (lambda: AffordanceLearner().fit(config, str(tmp_path / "cases.csv")),
         "fit(config, cases): the cases are a str, expected a CaseSet: CaseSet.from_csv(config, path) or "
         "CaseSet.from_columns(config, {column: values})"),
        (lambda: AffordanceLearner().fit(config, {"size": [1.0]}),
         "fit(config, cases): the cases are a dict, expected a CaseSet: CaseSet.from_csv(config, path) or "
         "CaseSet.from_columns(config, {column: values})"),
        (lambda: AffordanceLearner().fit(config, cases, prior_model="model.json"),
         "fit(..., prior_model): the prior model is a str, expected an AffordanceNetwork: "
         "AffordanceNetwork.load(path)"),
        (lambda: predict("model.json", ["action"]),
         "the model is a str, expected an AffordanceNetwork: AffordanceNetwork.load(path), or a learner's model_"),
        (lambda: predict_batch(config.to_dict(), ["action"]),
         "the model is a dict, expected an AffordanceNetwork: AffordanceNetwork.load(path), or a learner's model_"),
        (lambda: rank_actions(AffordanceLearner(), {"ObjVel": "fast"}),
         "the model is a AffordanceLearner, expected an AffordanceNetwork: AffordanceNetwork.load(path), or a "
         "learner's model_"),
    ]:
        with pytest.raises(TypeError) as caught:
            call()
        assert str(caught.value) == message


def test_a_learner_not_fitted_yet_says_to_fit_it():
    learner = AffordanceLearner()
    for name in ("model_", "result_"):
        with pytest.raises(AttributeError) as caught:
            getattr(learner, name)
        assert str(caught.value) == f"this AffordanceLearner has no {name} yet: call fit(config, cases) first"
    assert not hasattr(learner, "model_")
    with pytest.raises(AttributeError, match="'AffordanceLearner' object has no attribute 'modle_'"):
        learner.modle_  # noqa: B018


def reordered(config, name, values):
    """``config`` with the values of variable ``name`` in another order."""
    doc = config.to_dict()
    next(v for v in doc["variables"] if v["name"] == name)["values"] = values
    return AffordanceNetwork.from_dict(doc)


def test_cases_read_for_one_configuration_are_refused_by_another_that_would_read_them_otherwise(config_and_cases):
    config, cases = config_and_cases
    other = reordered(config, "Action", ["touch", "grasp", "tap"])
    # the cases keep labels as codes: learned with the other configuration, 'grasp' trials would be learned as 'touch'
    with pytest.raises(DataError) as caught:
        AffordanceLearner().fit(other, cases)
    assert str(caught.value) == (
        "the cases were read for a network whose 'Action' has the values ['grasp', 'tap', 'touch']; this network's "
        "'Action' has ['touch', 'grasp', 'tap']; read the cases again for it (CaseSet.from_csv(network, path) or "
        "CaseSet.from_columns)")
    without_color = AffordanceNetwork([v for v in config.variables if v.name != "Color"], learning=config.learning)
    with pytest.raises(DataError, match="the cases have readings of sensor 'color', which this network does not "
                                        "have"):
        AffordanceLearner().fit(without_color, cases)
    # read again for it, they are the same trials, and learn the same model under the other order of values
    again = CaseSet.from_columns(other, {"Action": [config["Action"].values[c] for c in cases.labels["Action"]],
                                         **cases.readings})
    ours = AffordanceLearner(structure="fixed").fit(config.with_structure(STRUCTURE), cases).model_
    theirs = AffordanceLearner(structure="fixed").fit(other.with_structure(STRUCTURE), again).model_
    np.testing.assert_allclose(theirs["Action"].cpt, ours["Action"].cpt[[2, 0, 1]], atol=1e-9)
    np.testing.assert_allclose(theirs["ObjVel"].cpt, ours["ObjVel"].cpt[[2, 0, 1]], atol=1e-6)


STRUCTURE = {"ObjVel": ("Action", "Size")}


@pytest.mark.parametrize("order, message", [
    (["Nope", "Action"], "names unknown variables ['Nope']"),
    (["Action", "Action"], "names twice ['Action']"),
    (["Action", "Color", "Shape", "Size", "ObjVel", "ObjHandVel", "HandVel"], "leaves out ['Contact']"),
])
def test_a_k2_order_that_is_not_every_variable_once_says_which(config_and_cases, order, message):
    # an unknown name says it came from 'order' (not only "unknown variable 'Nope'"); the others say which
    config, cases = config_and_cases
    with pytest.raises(ModelFormatError) as caught:
        AffordanceLearner(order=order).fit(config, cases)
    assert str(caught.value) == (f"learning option 'order' {message}; it must name every variable once: "
                                 f"{list(config.names)}")


def test_suggest_trials_takes_numpy_readings_and_says_what_a_model_is(model):
    # a candidate's np.float32 reading is a finite number; a path is a one-line error, not AttributeError
    ranked = [[(s.action, s.score, s.effects, s.effect_stddevs) for s in suggest_trials(model, [candidate]).suggestions]
              for candidate in (Candidate(sensors={"size": 9.5}), Candidate(sensors={"size": np.float32(9.5)}))]
    assert repr(ranked[1]) == repr(ranked[0])  # (repr: the model has no counts, so some entries are NaN)
    with pytest.raises(TypeError, match="the model is a str, expected an AffordanceNetwork"):
        suggest_trials("model.json", [Candidate()])
