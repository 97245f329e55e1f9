"""The tools scenario over DDS: vector readings arrive by name in Features messages; Predict returns the
predicted readings (appended response fields), as the core predicts them from the node's model."""


import pytest
from conftest import wait_for

from affordance_ros.core import AffordanceNetwork, predict
from affordance_ros.core.scenarios import SHAPE_DESCRIPTORS, TOOL_DESCRIPTORS
from affordance_ros.share import share_directory

TOOLS_CONFIG = share_directory() / "config" / "tools.json"
BALL = [0.96, 0.14, 0.84, 0.89, 0.11, 0.07]   # the six descriptors of a round object
HOOK = [0.70, 0.60, 0.25]


def test_tools_scenario_learned_over_dds_and_predicted_readings_answered(ros, tmp_path):
    learner = ros.learner(config_path=str(TOOLS_CONFIG))
    robot = ros.robot(count=400, scenario="tools", seed=4)
    ros.wait_for_robot(robot, timeout=120)
    wait_for(lambda: learner.counts["stored"] >= 400, what="400 stored cases")
    ros.remove(robot)
    wait_for(lambda: not learner.configured.trials.intake.storing, what="every trial taken stored")
    assert learner.counts["rejected_parts"] == 0
    record = learner.configured.manager.store.records()[0]
    assert set(record.readings) == {*TOOL_DESCRIPTORS, *SHAPE_DESCRIPTORS, "dx", "dy"}

    learned = ros.learn(timeout=120)
    assert learned.success, learned.message
    assert "Action->Effect" in learned.arcs
    model = AffordanceNetwork.load(tmp_path / "model.json")
    assert model["Shape"].sensor.vector and model["Effect"].sensor.names == ("dx", "dy")

    sensors = dict(zip([*TOOL_DESCRIPTORS, *SHAPE_DESCRIPTORS], HOOK + BALL))
    answer = ros.predict(query=["Effect"], sensor_names=list(sensors), sensor_values=list(sensors.values()),
                         variable_names=["Action"], variable_values=["pull"])
    assert answer.success, answer.message
    assert list(answer.reading_names) == ["dx", "dy"]
    direct = predict(model, ["Effect"], sensors=sensors, values={"Action": "pull"})
    for name, mean, std in zip(answer.reading_names, answer.reading_means, answer.reading_stddevs):
        assert mean == pytest.approx(direct.readings[name]["mean"])
        assert std == pytest.approx(direct.readings[name]["stddev"]) and std > 0
    assert answer.reading_means[1] < -5.0     # the hook pulls the ball towards the robot

    # a query without sensors has no predicted readings; a partial vector is evidence too
    action = ros.predict(query=["action"], sensor_names=["dx", "dy", "circleness"], sensor_values=[0.2, 9.0, 0.9])
    assert action.success and list(action.reading_names) == [] and action.most_probable == ["push"]
