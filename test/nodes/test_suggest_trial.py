"""~/suggest_trial over DDS: a round robin before the first learn; then the ranking suggest_trials gives on the
node's model, with the effects it expects; a model without counts ranked by predictive entropy, saying so;
every bad request answered with success false and a message, and counted."""

import itertools
import json
import math

import pytest
from conftest import learned_node

from affordance_ros.core.suggest import Candidate, suggest_trials
from affordance_ros.srv import SuggestTrial

SERVICE = "/affordance_learner/suggest_trial"
CANDIDATES = [  # (readings, labels) of objects the robot could act on
    ({"color": 0.1, "shape": 5.2, "size": 9.9}, {}),
    ({}, {"Shape": "circle", "Size": "small"}),
    ({"size": 4.8}, {"Shape": "box"}),
]


def suggest(ros, candidates, **fields):
    request = dict(num_candidates=len(candidates), sensor_candidates=[], sensor_names=[], sensor_values=[],
                   variable_candidates=[], variable_names=[], variable_values=[])
    for c, (sensors, values) in enumerate(candidates):
        request["sensor_candidates"] += [c] * len(sensors)
        request["sensor_names"] += list(sensors)
        request["sensor_values"] += [float(x) for x in sensors.values()]
        request["variable_candidates"] += [c] * len(values)
        request["variable_names"] += list(values)
        request["variable_values"] += list(values.values())
    request.update(fields)
    return ros.call(SuggestTrial, SERVICE, **request)


def core_suggestions(model, candidates, **options):
    return suggest_trials(model, [Candidate(sensors, values) for sensors, values in candidates], **options)


@pytest.fixture
def learned(ros, tmp_path):
    return learned_node(ros, tmp_path, 500)


def test_before_the_first_learn_a_round_robin_over_action_and_candidate(ros):
    learner = ros.learner()
    picks = []
    for _ in range(7):
        answer = suggest(ros, CANDIDATES[:2], max_suggestions=1)
        assert answer.success, answer.message
        assert answer.criterion == "round_robin" and answer.message.startswith("no model yet")
        assert answer.action_variable == "Action" and list(answer.scores) == [0.0]
        picks.append((answer.actions[0], answer.candidates[0]))
    assert picks == [("grasp", 0), ("tap", 0), ("touch", 0), ("grasp", 1), ("tap", 1), ("touch", 1), ("grasp", 0)]
    every = suggest(ros, CANDIDATES[:2])  # every pair, the round robin going on from where it is
    assert list(zip(every.actions, every.candidates)) == [("tap", 0), ("touch", 0), ("grasp", 1), ("tap", 1),
                                                          ("touch", 1), ("grasp", 0)]
    assert list(every.effect_variables) == [] and list(every.expected_labels) == []
    only_tap = suggest(ros, CANDIDATES[:2], actions=["tap"], max_suggestions=2)
    assert list(only_tap.actions) == ["tap", "tap"]
    assert learner.counts["suggest_ok"] == 9 and learner.counts["suggest_failed"] == 0


def test_with_a_model_the_ranking_is_suggest_trials_on_the_nodes_model(ros, learned):
    learner, model = learned
    assert model.has_counts
    answer = suggest(ros, CANDIDATES)
    assert answer.success, answer.message
    expected = core_suggestions(model, CANDIDATES)
    assert answer.criterion == "information_gain" and answer.message == "ranked by information_gain"
    assert list(zip(answer.actions, answer.candidates)) == [(s.action, s.candidate) for s in expected.suggestions]
    assert set(zip(answer.actions, answer.candidates)) == set(itertools.product(("grasp", "tap", "touch"), range(3)))
    assert list(answer.scores) == pytest.approx([s.score for s in expected.suggestions], abs=1e-12)
    assert list(answer.scores) == sorted(answer.scores, reverse=True) and answer.scores[-1] > 0
    assert list(answer.information_gains) == list(answer.scores)
    assert list(answer.predictive_entropies) == pytest.approx([s.predictive_entropy for s in expected.suggestions])

    effects = list(answer.effect_variables)
    assert effects == ["ObjVel", "ObjHandVel", "HandVel", "Contact"]
    assert list(answer.reading_names) == ["obj_vel", "obj_hand_vel", "hand_vel", "contact"]
    for s, suggestion in enumerate(expected.suggestions):
        at = slice(s * len(effects), (s + 1) * len(effects))
        assert list(answer.expected_labels[at]) == [suggestion.expected[name] for name in effects]
        assert list(answer.expected_probabilities[at]) == pytest.approx(
            [max(suggestion.effects[name].values()) for name in effects])
        stddevs = list(answer.probability_stddevs[at])
        assert stddevs == pytest.approx([suggestion.effect_stddevs[name][suggestion.expected[name]]
                                         for name in effects])
        assert all(0.0 < x < 0.5 for x in stddevs)
        assert list(answer.reading_means[at]) == pytest.approx([r["mean"] for r in suggestion.readings.values()])
        assert list(answer.reading_stddevs[at]) == pytest.approx([r["stddev"] for r in suggestion.readings.values()])

    least = suggest(ros, CANDIDATES, criterion="least_tried", actions=["tap", "touch"], max_suggestions=2)
    core = core_suggestions(model, CANDIDATES, criterion="least_tried", actions=["tap", "touch"], top=2)
    assert least.criterion == "least_tried"
    assert list(zip(least.actions, least.candidates)) == [(s.action, s.candidate) for s in core.suggestions]
    assert list(least.scores) == pytest.approx([s.score for s in core.suggestions])
    assert len(least.expected_labels) == 2 * len(effects)
    # about the candidates' effects with every action, though only two are to be tried
    epig = suggest(ros, CANDIDATES, criterion="predictive_information", actions=["tap", "touch"])
    core = core_suggestions(model, CANDIDATES, criterion="predictive_information", actions=["tap", "touch"])
    assert epig.criterion == "predictive_information" and epig.message == "ranked by predictive_information"
    assert list(zip(epig.actions, epig.candidates)) == [(s.action, s.candidate) for s in core.suggestions]
    assert list(epig.scores) == pytest.approx([s.score for s in core.suggestions], abs=1e-12)
    assert list(epig.scores) == sorted(epig.scores, reverse=True) and epig.scores[-1] > 0
    assert learner.counts["suggest_ok"] == 3 and learner.counts["suggest_failed"] == 0


def test_a_model_without_counts_is_ranked_by_predictive_entropy_and_the_answer_says_so(ros, learned, tmp_path):
    learner, _ = learned
    ros.remove(learner)
    doc = json.loads((tmp_path / "model.json").read_text())
    doc.pop("structures", None)
    for variable in doc["variables"]:   # as a model from an earlier version or an imported one (no posterior either)
        for key in ("counts", "draws", "prior"):
            variable.pop(key, None)
    (tmp_path / "model.json").write_text(json.dumps(doc))
    learner = ros.learner()
    answer = suggest(ros, CANDIDATES, max_suggestions=3)
    assert answer.success, answer.message
    assert answer.criterion == "predictive_entropy" and "no Dirichlet counts" in answer.message
    assert list(answer.scores) == list(answer.predictive_entropies)
    assert list(answer.scores) == sorted(answer.scores, reverse=True)
    assert all(math.isnan(x) for x in answer.information_gains)
    assert len(answer.probability_stddevs) == 3 * 4 and all(math.isnan(x) for x in answer.probability_stddevs)


BAD = [
    (dict(num_candidates=0), "num_candidates is 0"),
    (dict(sensor_values=[]), "1 sensor_candidates, 1 sensor_names and 0 sensor_values"),
    (dict(sensor_candidates=[3]), "sensor_candidates names candidate 3, but num_candidates is 1"),
    (dict(sensor_names=["nope"]), "unknown sensor 'nope'"),
    (dict(sensor_values=[float("nan")]), "must be a finite number"),
    (dict(variable_values=["cube"]), "unknown label 'cube'"),
    (dict(variable_names=["Action"], variable_values=["tap"]), "the action, which is what is being chosen"),
    (dict(sensor_names=["obj_vel"]), "an effect, which the trial is to show"),
    (dict(variable_candidates=[0, 0], variable_names=["Shape", "Shape"], variable_values=["box", "box"]),
     "variable 'Shape' is given twice for candidate 0"),
    (dict(actions=["kick"]), "unknown label 'kick'"),
    (dict(actions=["tap", "tap"]), "repeated actions"),
    (dict(criterion="curiosity"), "unknown criterion 'curiosity'"),
    (dict(num_candidates=10**6), "more than max_list_length"),
]


def bad_request(fields):
    request = dict(num_candidates=1, sensor_candidates=[0], sensor_names=["size"], sensor_values=[4.9],
                   variable_candidates=[0], variable_names=["Shape"], variable_values=["box"])
    request.update(fields)
    return request


@pytest.mark.parametrize("with_model", [True, False], ids=["model", "no model"])
def test_bad_requests_get_success_false_and_a_message(ros, tmp_path, with_model):
    learner = learned_node(ros, tmp_path, 200)[0] if with_model else ros.learner()
    for fields, message in BAD:
        answer = ros.call(SuggestTrial, SERVICE, **bad_request(fields))
        assert not answer.success, fields
        assert message in answer.message, (fields, answer.message)
        assert list(answer.actions) == []
    good = ros.call(SuggestTrial, SERVICE, **bad_request({}))
    assert good.success, good.message
    assert learner.counts["suggest_failed"] == len(BAD) and learner.counts["suggest_ok"] == 1
