"""~/predict and ~/select_action over DDS say how sure the model is: the fields appended to their responses carry
the core's standard deviations, 90 % intervals and support on the node's model; SelectAction ranks by the
request's strategy, thompson's draws come from the node's seeded generator (select_seed), and a model without the
posterior of its CPTs answers NaN and refuses the strategies that need it."""

import math

import numpy as np
import pytest
from conftest import sampled_records, write_config
from ros_harness import Waiter

from affordance_ros.core import AffordanceNetwork, predict, rank_actions
from affordance_ros.data.storage import CaseStore
from affordance_ros.srv import SelectAction

# the node's learns draw the posterior of the CPTs (conftest.py's learn_without_posterior turns it off otherwise),
# but for the test of a model without it
pytestmark = pytest.mark.posterior
SERVICE = "/affordance_learner/select_action"
SMALL_BOX = {"color": 5.1, "shape": 5.0, "size": 0.1}
SEED = 7


def stored(tmp_path, n=300):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(n):
            store.add(record)


@pytest.fixture
def learned(ros, tmp_path):
    stored(tmp_path)
    learner = ros.learner(select_seed=SEED)
    assert ros.learn().success
    return learner, AffordanceNetwork.load(tmp_path / "model.json")


def request(effects, sensors=None, strategy=None):
    sensors = sensors or {}
    fields = dict(effect_names=list(effects), effect_values=list(effects.values()), sensor_names=list(sensors),
                  sensor_values=[float(x) for x in sensors.values()])
    return fields if strategy is None else dict(fields, strategy=strategy)


def test_predict_carries_the_spread_of_every_probability(ros, learned):
    _, model = learned
    answer = ros.predict(query=["effect", "Shape"], variable_names=["Action"], variable_values=["tap"],
                         sensor_names=list(SMALL_BOX), sensor_values=list(SMALL_BOX.values()))
    assert answer.success, answer.message
    here = predict(model, ["effect", "Shape"], sensors=SMALL_BOX, values={"Action": "tap"})
    labels = [(d.variable, label) for d in answer.marginals for label in d.values]
    assert len(answer.stddevs) == len(answer.interval_lows) == len(answer.interval_highs) == len(labels)
    for k, (name, label) in enumerate(labels):
        assert answer.stddevs[k] == pytest.approx(here.stddevs[name][label], rel=1e-12)
        assert (answer.interval_lows[k], answer.interval_highs[k]) == pytest.approx(here.intervals[name][label],
                                                                                  rel=1e-12)
        assert 0.0 <= answer.interval_lows[k] <= answer.interval_highs[k] <= 1.0 and answer.stddevs[k] > 0
    assert [d.variable for d in answer.marginals] == list(here.support)
    assert list(answer.support) == pytest.approx(list(here.support.values()), rel=1e-9)
    assert all(s > 0 for s in answer.support)


@pytest.mark.parametrize("strategy", ["expected", "optimistic", "cautious"])
def test_select_action_ranks_by_the_strategy_asked_for(ros, learned, strategy):
    _, model = learned
    answer = ros.call(SelectAction, SERVICE, **request({"ObjVel": "fast"}, SMALL_BOX, strategy))
    assert answer.success, answer.message
    here = rank_actions(model, {"ObjVel": "fast"}, sensors=SMALL_BOX, strategy=strategy)
    assert answer.strategy == strategy and list(answer.actions) == here.actions
    assert list(answer.scores) == pytest.approx(here.scores, rel=1e-12)
    assert all(a >= b - 1e-9 * abs(a) for a, b in zip(answer.scores, answer.scores[1:]))  # best first (ties: any order)
    assert list(answer.stddevs) == pytest.approx(here.stddevs, rel=1e-12)
    assert list(answer.interval_lows) == pytest.approx([low for low, _ in here.intervals], rel=1e-12)
    assert list(answer.interval_highs) == pytest.approx([high for _, high in here.intervals], rel=1e-12)
    assert list(answer.support) == pytest.approx(here.support, rel=1e-9)
    bound = {"expected": list(answer.probabilities), "cautious": list(answer.interval_lows)}.get(strategy)
    assert bound is None or list(answer.scores) == pytest.approx(bound, rel=1e-12)   # (optimistic's: test_gittins.py)


def test_a_request_without_a_strategy_is_ranked_as_before(ros, learned):
    _, model = learned
    answer = ros.call(SelectAction, SERVICE, **request({"ObjVel": "fast"}, SMALL_BOX))
    assert answer.success and answer.strategy == "expected"
    assert list(answer.actions) == rank_actions(model, {"ObjVel": "fast"}, sensors=SMALL_BOX).actions


def test_thompson_draws_come_from_the_nodes_seeded_generator(ros, learned):
    learner, model = learned
    wanted = ({"ObjVel": "fast"}, SMALL_BOX)
    assert ros.call(SelectAction, SERVICE, **request(*wanted)).success  # (the client matched: no re-sends below)
    rng = np.random.default_rng(SEED)
    for _ in range(learner.counts["select_ok"]):  # the node's draws so far (re-sends of the first request too)
        rank_actions(model, *wanted, rng=rng)
    for _ in range(30):
        answer = Waiter(ros.client(SelectAction, SERVICE).call_async(
            SelectAction.Request(**request(*wanted, "thompson")))).result(60.0)
        here = rank_actions(model, *wanted, strategy="thompson", rng=rng)
        assert answer.success and answer.strategy == "thompson"
        assert list(answer.actions) == here.actions and list(answer.scores) == pytest.approx(here.scores, rel=1e-12)
        # the score is the action's probability under one posterior draw: inside the posterior's range
        assert all(0.0 < s < 1.0 for s in answer.scores)


def test_a_model_without_the_posterior_answers_nan_and_refuses_the_strategies_that_need_it(ros, tmp_path):
    stored(tmp_path, 200)
    ros.learner(config_path=str(write_config(tmp_path / "config.json", posterior_draws=0)))
    assert ros.learn().success
    answer = ros.predict(query=["effect"], variable_names=["Action"], variable_values=["tap"])
    assert answer.success and answer.stddevs and all(math.isnan(x) for x in answer.stddevs)
    assert all(math.isnan(x) for x in [*answer.interval_lows, *answer.interval_highs, *answer.support])
    ranked = ros.call(SelectAction, SERVICE, **request({"ObjVel": "fast"}))
    assert ranked.success and all(math.isnan(x) for x in ranked.stddevs)
    refused = ros.call(SelectAction, SERVICE, **request({"ObjVel": "fast"}, strategy="optimistic"))
    assert not refused.success
    assert refused.message.startswith("strategy 'optimistic' needs the posterior of the CPTs"), refused.message
