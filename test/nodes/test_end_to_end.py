"""The simulated robot and the learner node over DDS: store, learn, predict, restart."""


from conftest import MONTESANO_CONFIG, assert_distributions, wait_for

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.storage import CaseStore

EFFECTS = ["ObjVel", "ObjHandVel", "HandVel", "Contact"]
OBJECT_FEATURES = dict(sensor_names=["color", "shape", "size"], sensor_values=[5.2, 0.3, 9.6])


def collect(ros, learner, n, **robot_params):
    robot = ros.robot(count=n, **robot_params)
    ros.wait_for_robot(robot)
    wait_for(lambda: learner.counts["stored"] >= n, what=f"{n} stored cases")
    ros.remove(robot)  # nothing more arrives: every trial of the robot's is confirmed, and it is gone
    wait_for(lambda: not learner.configured.trials.intake.storing, what="every trial taken stored")
    return learner.counts["stored"]


def test_trials_stored_learned_predicted_and_kept_over_a_restart(ros, tmp_path):
    config = AffordanceNetwork.load(MONTESANO_CONFIG)
    learner = ros.learner()
    assert collect(ros, learner, 120, seed=3) == 120
    assert learner.configured.manager.store.count() == 120
    assert learner.counts["rejected_parts"] == learner.counts["dropped_incomplete"] == 0

    learned = ros.learn()
    assert learned.success, learned.message
    assert learned.num_cases == 120
    assert learned.arcs and all("->" in arc for arc in learned.arcs)
    assert learned.iterations >= 1 and learned.duration > 0 and learned.log_likelihood < 0
    assert (tmp_path / "model.json").is_file()

    # the action from the object features and the effects it had
    action = ros.predict(query=["action"], sensor_names=["color", "shape", "size", "obj_vel", "contact"],
                         sensor_values=[5.2, 0.3, 9.6, 10.4, 0.2])
    assert_distributions(action, ["Action"], config)
    # the effects of an action on an object
    effects = ros.predict(query=["effect"], variable_names=["Action"], variable_values=["tap"], **OBJECT_FEATURES)
    assert_distributions(effects, EFFECTS, config)
    # variables named one by one come back in the network's order, without repeats
    mixed = ros.predict(query=["Contact", "Action", "Contact"])
    assert_distributions(mixed, ["Action", "Contact"], config)

    # restart: the cases and the model are still there, predictions work at once
    ros.remove(learner)
    learner = ros.learner()
    assert learner.configured.manager.store.count() == 120
    again = ros.predict(query=["effect"], variable_names=["Action"], variable_values=["tap"], **OBJECT_FEATURES)
    assert_distributions(again, EFFECTS, config)
    for before, after in zip(effects.marginals, again.marginals):
        assert list(before.probabilities) == list(after.probabilities)

    # more trials go to the same database; learning uses them all. (The restarted learner shares the DDS
    # participant of this process with the old one of the same name, and the robot's graph may not show the new
    # one's subscriptions under that name; a restart on a robot is a new process. So this robot waits for
    # subscribers, not for a node name: the confirmations still make sure that every trial is stored, and
    # test_frictions tests the waiting for the learner by name.)
    assert collect(ros, learner, 30, seed=4, wait_for="") == 30
    relearned = ros.learn(structure="fixed")
    assert relearned.success, relearned.message
    assert relearned.num_cases == 150
    assert sorted(relearned.arcs) == sorted(learned.arcs)
    with CaseStore(tmp_path / "cases.db", read_only=True) as store:
        assert store.count() == 150


def test_trials_without_ids_are_paired_by_stamp(ros):
    learner = ros.learner(slop=0.001)
    assert collect(ros, learner, 50, use_trial_ids=False, rate=100.0) == 50
    records = learner.configured.manager.store.records()
    assert len(records) == 50
    assert all(r.trial_id.startswith("stamp-") for r in records)
    assert all(len(r.readings) == 7 for r in records)
    assert learner.counts["dropped_incomplete"] == 0
    assert ros.learn().success


def test_default_paths_are_under_ros_home(ros, tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    learner = ros.learner(database_path=None, model_path=None)  # not set: the declared defaults
    assert learner.get_parameter("database_path").value == str(learner.configured.manager.database_path)
    assert learner.configured.manager.database_path == tmp_path / "ros_home" / "affordance_ros" / "cases.db"
    assert learner.configured.manager.model_path == tmp_path / "ros_home" / "affordance_ros" / "model.json"
    assert learner.configured.manager.database_path.is_file()
    assert learner.configured.manager.config_path == MONTESANO_CONFIG


def test_empty_paths_mean_the_defaults(ros, tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "elsewhere"))
    learner = ros.learner(database_path="", model_path="", config_path="")
    assert learner.configured.manager.database_path == tmp_path / "elsewhere" / "affordance_ros" / "cases.db"
    assert learner.configured.manager.config_path == MONTESANO_CONFIG


def test_robot_runs_started_together_have_distinct_trial_ids(ros):
    first, second = ros.robot(count=1, min_subscribers=0), ros.robot(count=1, min_subscribers=0)
    assert first.trial_id_prefix != second.trial_id_prefix
