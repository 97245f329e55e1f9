"""What a new user hit: integers for double parameters, a robot that did not wait for the learner, seed 0, a world
that rarely showed what the docs ask about."""

import time
from collections import Counter

import numpy as np
import pytest
from conftest import wait_for
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters

from affordance_ros.core import AffordanceNetwork, benchmark_network, rank_actions
from affordance_ros.data.model_manager import StartupError
from affordance_ros.msg import Action, Features


def set_parameter(ros, name, value: ParameterValue):
    return ros.call(SetParameters, "/affordance_learner/set_parameters",
                    parameters=[ParameterMsg(name=name, value=value)]).results[0]


def test_integers_are_taken_for_double_parameters(ros):
    learner = ros.learner(slop=1, trial_timeout=2, prior_strength=3, online_save_period=0, status_period=0)
    settings = learner.settings
    assert (settings.slop, settings.trial_timeout, settings.prior_strength) == (1.0, 2.0, 3.0)
    assert all(isinstance(x, float) for x in (settings.slop, settings.trial_timeout, settings.prior_strength))
    # at run time too (prior_strength can be changed), and the range still holds
    ok = set_parameter(ros, "prior_strength", ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=4))
    assert ok.successful, ok.reason
    value = learner.get_parameter("prior_strength").value
    assert value == 4.0 and isinstance(value, float)
    negative = set_parameter(ros, "prior_strength",
                             ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=-1))
    assert not negative.successful
    text = set_parameter(ros, "prior_strength", ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                               string_value="lots"))
    assert not text.successful and "number" in text.reason
    assert learner.get_parameter("prior_strength").value == 4.0


@pytest.mark.parametrize("value, message", [("fast", "must be a number"), (-2, "from 0 to 3600")])
def test_a_double_parameter_of_the_wrong_kind_stops_the_start_with_a_clear_message(ros, value, message):
    with pytest.raises(StartupError, match=message):
        ros.learner(slop=value)


def test_the_robot_waits_for_the_learner_not_just_any_subscriber(ros):
    recorder = [ros.client_node.create_subscription(t, name, lambda _: None, 10)
                for t, name in ((Action, "action"), (Features, "object_features"), (Features, "effects"))]
    robot = ros.robot(count=15, rate=100.0)
    wait_for(lambda: all(robot.count_subscribers(f"/{t}") >= 1 for t in ("action", "object_features", "effects")),
             what="the recorder's subscriptions")
    time.sleep(1.0)
    assert robot.published == 0  # a recorder is up, the learner is not: nothing is published (and lost)
    assert robot.missing_subscribers() == [f"affordance_learner on /{t}" for t in ("action", "object_features",
                                                                                  "effects")] + [
        "affordance_learner's answers (status_topic)"]
    learner = ros.learner()
    wait_for(lambda: learner.counts["stored"] == 15, what="all 15 trials stored")
    assert robot.missing_subscribers() == [] and len(recorder) == 3


def test_robots_seed_their_trials_randomly_in_the_same_world_unless_told(ros):
    first, second = (ros.robot(count=1, min_subscribers=0, wait_for="") for _ in range(2))
    assert first.seed != second.seed  # two runs publish different readings ...
    world = benchmark_network("montesano", 1.0, 0)  # ... of the same ground truth
    for robot in (first, second):
        for v, w in zip(robot.truth.variables, world.variables):  # (its actions and objects: the design's)
            np.testing.assert_array_equal(v.cpt, w.cpt if v.group == "effect" else np.full(v.card, 1 / v.card))
    repeat = ros.robot(count=1, min_subscribers=0, wait_for="", seed=5)  # as before: seed sets both
    assert repeat.seed == 5
    np.testing.assert_array_equal(repeat.truth["ObjVel"].cpt, benchmark_network("montesano", 1.0, 5)["ObjVel"].cpt)
    drawn = ros.robot(count=1, min_subscribers=0, wait_for="", design="truth")  # the ground truth's own draws
    for v, w in zip(drawn.truth.variables, world.variables):
        np.testing.assert_array_equal(v.cpt, w.cpt)


def test_the_robot_does_every_action_on_every_kind_of_object_about_equally_often(ros):
    """With the ground truth's own draws, after 1000 trials the learned P(Size=big) was 0.0014 and P(Action=touch)
    0.012 (Dirichlet(1) CPT rows), while the docs ask about big objects: a robot's experimenter chooses what it
    tries and what is put in front of it. The default robot's 1000 trials, as the learner stored them."""
    learner = ros.learner()
    robot = ros.robot(count=1000, rate=1000.0, sigma=0.01)  # (readings that say each object's values exactly)
    ros.wait_for_robot(robot, timeout=180.0)
    wait_for(lambda: learner.counts["stored"] >= 1000, what="1000 stored trials")
    records = learner.configured.manager.store.records()
    actions = Counter(r.action for r in records)
    kinds = Counter(tuple(round(r.object_features[name] / 5) for name in ("color", "shape", "size")) for r in records)
    assert len(records) == 1000 and set(actions) == {"grasp", "tap", "touch"} and len(kinds) == 4 * 2 * 3
    for seen in (actions, kinds):
        assert max(seen.values()) <= 2 * min(seen.values()), seen
    # the student's question, of the docs' objects: which action moves a big blue circle fast
    assert ros.learn().success
    model = AffordanceNetwork.load(ros.tmp_path / "model.json")
    ranking = rank_actions(model, {"ObjVel": "fast"}, values={"Color": "blue", "Shape": "circle", "Size": "big"})
    assert min(ranking.support) > 20, ranking
    with pytest.raises(ValueError, match=r"design 'even' is not one of \['balanced', 'truth'\]"):
        ros.robot(count=1, design="even")
