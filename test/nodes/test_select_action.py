"""~/select_action over DDS: the ranking rank_actions gives on the node's model, close to the
ground truth's; every bad request answered with success false and a message."""

import math

import pytest
from conftest import sampled_records

from affordance_ros.core import AffordanceNetwork, rank_actions
from affordance_ros.core.ground_truth import benchmark_network
from affordance_ros.data.storage import CaseStore
from affordance_ros.srv import SelectAction

SERVICE = "/affordance_learner/select_action"
TRUTH = benchmark_network("montesano", 1.0, 0)  # what sampled_records draws from
QUERIES = [  # (desired effects, object evidence: labels, sensor readings)
    ({"ObjVel": "fast"}, {}, {}),
    ({"ObjVel": "slow"}, {"Shape": "box", "Size": "small"}, {}),
    ({"ObjVel": "fast"}, {"Shape": "box", "Size": "small"}, {}),
    ({"HandVel": "fast"}, {}, {"color": 5.0, "size": 0.2}),
    ({"ObjVel": "fast", "Contact": "long"}, {}, {}),
    ({"ObjVel": "slow", "HandVel": "still"}, {"Shape": "box"}, {"color": 10.1}),
    ({"Contact": "short"}, {}, {"color": 5.0, "size": 0.0}),
    ({"HandVel": "still"}, {}, {}),
]


def select(ros, effects, values=None, sensors=None, **fields):
    values, sensors = values or {}, sensors or {}
    request = dict(effect_names=list(effects), effect_values=list(effects.values()),
                   variable_names=list(values), variable_values=list(values.values()),
                   sensor_names=list(sensors), sensor_values=[float(x) for x in sensors.values()])
    request.update(fields)
    return ros.call(SelectAction, SERVICE, **request)


@pytest.fixture
def learned(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(1000):
            store.add(record)
    learner = ros.learner()
    assert ros.learn().success
    return learner, AffordanceNetwork.load(tmp_path / "model.json")


def test_the_ranking_is_rank_actions_on_the_nodes_model_and_near_the_ground_truth(ros, learned):
    learner, model = learned
    agreeing = 0
    for effects, values, sensors in QUERIES:
        answer = select(ros, effects, values, sensors)
        assert answer.success, answer.message
        expected = rank_actions(model, effects, sensors=sensors, values=values)
        assert answer.action_variable == "Action"
        assert list(answer.actions) == expected.actions
        assert list(answer.probabilities) == pytest.approx(expected.probabilities, abs=1e-12)
        assert sorted(answer.actions) == ["grasp", "tap", "touch"]
        assert list(answer.probabilities) == sorted(answer.probabilities, reverse=True)
        assert all(0.0 < p < 1.0 for p in answer.probabilities)

        truth = rank_actions(TRUTH, effects, sensors=sensors, values=values)
        learned_p = dict(zip(answer.actions, answer.probabilities))
        truth_p = dict(zip(truth.actions, truth.probabilities))
        assert all(abs(learned_p[a] - truth_p[a]) < 0.15 for a in truth_p), (effects, learned_p, truth_p)
        if truth.probabilities[0] - truth.probabilities[1] > 0.1:  # a clear best action: the node finds it
            assert answer.actions[0] == truth.actions[0], (effects, learned_p, truth_p)
            agreeing += 1
    assert agreeing >= 3  # the queries above have clear winners
    assert learner.counts["select_ok"] == len(QUERIES) and learner.counts["select_failed"] == 0


def test_bad_requests_get_success_false_and_a_message(ros, learned):
    learner, _ = learned
    fast = {"ObjVel": "fast"}
    bad = [
        (dict(effects={}), "name at least one desired effect"),
        (dict(effects=fast, effect_values=[]), "1 effect_names but 0 effect_values"),
        (dict(effects=fast, sensors={"color": 1.0}, sensor_values=[]), "1 sensor_names but 0 sensor_values"),
        (dict(effects=fast, values={"Shape": "box"}, variable_values=["box", "circle"]),
         "1 variable_names but 2 variable_values"),
        (dict(effects={"Speed": "fast"}), "unknown variable 'Speed'"),
        (dict(effects={"ObjVel": "zoom"}), "unknown label 'zoom' for variable 'ObjVel'"),
        (dict(effects={"ObjVel": ""}), "unknown label '' for variable 'ObjVel'"),
        (dict(effects=fast, effect_names=["ObjVel", "ObjVel"], effect_values=["fast", "slow"]), "given twice"),
        (dict(effects={"Shape": "box"}), "'Shape' is not an effect variable"),
        (dict(effects={"Action": "tap"}), "'Action' is not an effect variable"),
        (dict(effects=fast, values={"Action": "tap"}), "'Action' is what is being chosen"),
        (dict(effects=fast, values={"ObjVel": "slow"}), "'ObjVel' is a desired effect"),
        (dict(effects=fast, sensors={"obj_vel": 1.0}), "'ObjVel' is a desired effect"),
        (dict(effects=fast, values={"Shape": "sphere"}), "unknown label 'sphere' for variable 'Shape'"),
        (dict(effects=fast, sensors={"weight": 1.0}), "unknown sensor 'weight'"),
        (dict(effects=fast, sensors={"color": math.nan}), "finite"),
        (dict(effects=fast, sensors={"size": -math.inf}), "finite"),
    ]
    for fields, message in bad:
        answer = select(ros, **fields)
        assert not answer.success, fields
        assert message in answer.message, (fields, answer.message)
        assert list(answer.actions) == [] and list(answer.probabilities) == []
    assert learner.counts["select_failed"] == len(bad)
    assert select(ros, fast, {"Shape": "box"}).success  # still answering


def test_no_model_yet(ros, tmp_path):
    learner = ros.learner()
    answer = select(ros, {"ObjVel": "fast"})
    assert not answer.success and "no model yet: call ~/learn first (0 cases stored)" in answer.message
    assert learner.counts["select_failed"] == 1
