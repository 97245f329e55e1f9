"""The simulated robot explores over DDS: with exploration 'active' it sees a few objects, asks the learner's
~/suggest_trial and does the trial it suggests; with the default 'random' it does not ask."""


import numpy as np
import pytest
from conftest import wait_for

from affordance_ros.core import LearningOptions, benchmark_network, fit_em, sample_cases

# the robot's world (truth_seed 0), the action seen by its label only, as the learner's configuration has it
TRUTH = benchmark_network("montesano", 1.0, 0).replace_variables({"Action": {"sensor": None}})


@pytest.fixture
def never_touched(tmp_path):
    """A model of the robot's world learned from trials that never 'touch': what touching does is unknown."""
    cases, _ = sample_cases(TRUTH, 600, np.random.default_rng(5), labelled=("Action",))
    kept = np.flatnonzero(cases.labels["Action"] != TRUTH["Action"].code("touch"))
    unlearned = TRUTH.replace_variables({v.name: {"cpt": None} for v in TRUTH.variables})
    model, _ = fit_em(unlearned, cases.take(kept), LearningOptions())
    model.save(tmp_path / "model.json")
    return model


def explore(ros, learner, n, **params):
    robot = ros.robot(count=n, seed=4, **params)
    ros.wait_for_robot(robot)
    wait_for(lambda: learner.counts["stored"] >= n, what=f"{n} stored cases")
    ros.remove(robot)
    wait_for(lambda: not learner.configured.trials.intake.storing, what="every trial taken stored")
    return [record.action for record in learner.configured.manager.store.records()]


def test_an_active_robot_does_the_trials_the_learner_suggests(ros, never_touched):
    learner = ros.learner()
    assert learner.configured.manager.current.model is not None and learner.configured.manager.current.model.has_counts
    actions = explore(ros, learner, 20, exploration="active", candidates=3)
    # every trial goes where the model knows least: what touching does
    assert actions == ["touch"] * 20
    assert learner.counts["suggest_ok"] == 20 and learner.counts["suggest_failed"] == 0


def test_a_suggestion_lost_on_the_way_back_is_asked_for_again(ros, never_touched, monkeypatch):
    """Fast DDS drops an answer sent before the learner discovered the robot: the robot asks again after
    suggest_timeout instead of waiting for ever (here the first answer is made to get lost: served, never read)."""
    from rclpy.client import Client
    from ros_harness import lose_the_first_answer

    sent = lose_the_first_answer(monkeypatch, Client, "call_async")
    learner = ros.learner()
    robot = ros.robot(count=5, seed=4, exploration="active", candidates=3, suggest_timeout=1.0)
    ros.wait_for_robot(robot)
    # (an answer may also come after the timeout when the machine is busy: then it is asked again once more)
    assert robot.explorer.unanswered >= 1 and len(sent) == 5 + robot.explorer.unanswered
    wait_for(lambda: learner.counts["stored"] >= 5, what="5 stored cases")
    assert [record.action for record in learner.configured.manager.store.records()] == ["touch"] * 5
    wait_for(lambda: learner.counts["suggest_ok"] == len(sent), what="every question answered, the lost one too")


def test_a_random_robot_does_not_ask(ros, never_touched):
    learner = ros.learner()
    actions = explore(ros, learner, 20)
    assert learner.counts["suggest_ok"] == 0
    assert set(actions) != {"touch"}  # the world's actions, as they come


def test_an_active_robot_without_a_model_follows_the_round_robin(ros):
    learner = ros.learner()
    actions = explore(ros, learner, 6, exploration="active", candidates=2)
    assert actions == ["grasp", "tap", "touch", "grasp", "tap", "touch"]
    assert learner.counts["suggest_ok"] == 6


def test_an_unknown_exploration_is_refused(ros):
    with pytest.raises(ValueError, match="exploration 'curious' is not one of"):
        ros.robot(exploration="curious")
