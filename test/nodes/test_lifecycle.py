"""The learner as a managed node: configure / activate / deactivate / cleanup / shutdown over ~/change_state."""

import pytest
from conftest import sampled_records, wait_for
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.parameter import Parameter
from ros_harness import Waiter

from affordance_ros.data.learn_worker import LearnWorker
from affordance_ros.data.model_manager import StartupError
from affordance_ros.data.storage import CaseStore
from affordance_ros.nodes.learner.learner_node import LearnerNode
from affordance_ros.share import default_config_path
from affordance_ros.srv import Learn, Predict

NAMESPACE = "/lifecycle_test"  # (a namespace of its own: other learners in the domain do not matter)
NODE = f"{NAMESPACE}/affordance_learner"


def managed_learner(ros, tmp_path, **params):
    params = {"database_path": str(tmp_path / "cases.db"), "model_path": str(tmp_path / "model.json"),
              "status_period": 0.0, **params}
    return ros.add(LearnerNode(context=ros.context, namespace=NAMESPACE, parameter_overrides=[
        Parameter(name, value=value) for name, value in params.items()]))


def state(ros) -> str:
    return ros.call(GetState, f"{NODE}/get_state").current_state.label


def change(ros, transition: int) -> bool:
    return ros.call(ChangeState, f"{NODE}/change_state", transition=Transition(id=transition)).success


def services(ros) -> set:
    """The learner's services (servers only) in the ROS graph."""
    return {name for name, _ in ros.client_node.get_service_names_and_types_by_node("affordance_learner", NAMESPACE)}


def test_a_lifecycle_manager_drives_the_learner(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(60):
            store.add(record)
    learner = managed_learner(ros, tmp_path, autostart=False)
    assert state(ros) == "unconfigured"
    assert learner.configured is None  # no database opened yet
    assert f"{NODE}/predict" not in services(ros)

    assert change(ros, Transition.TRANSITION_CONFIGURE)
    assert state(ros) == "inactive"
    assert learner.configured.manager.store.count() == 60  # configure opened the database
    assert f"{NODE}/predict" not in services(ros)  # inactive: no services, no subscriptions
    assert ros.client_node.count_subscribers(f"{NAMESPACE}/action") == 0

    assert change(ros, Transition.TRANSITION_ACTIVATE)
    assert state(ros) == "active"
    wait_for(lambda: {f"{NODE}/learn", f"{NODE}/predict", f"{NODE}/select_action"} <= services(ros),
             what="the services")
    wait_for(lambda: ros.client_node.count_subscribers(f"{NAMESPACE}/action") == 1, what="the action subscription")
    learned = ros.call(Learn, f"{NODE}/learn")
    assert learned.success and learned.num_cases == 60, learned.message
    assert ros.call(Predict, f"{NODE}/predict", query=["action"], sensor_names=["obj_vel"],
                    sensor_values=[9.0]).success

    assert change(ros, Transition.TRANSITION_DEACTIVATE)
    assert state(ros) == "inactive"
    wait_for(lambda: f"{NODE}/predict" not in services(ros), what="the services to go")
    wait_for(lambda: ros.client_node.count_subscribers(f"{NAMESPACE}/action") == 0, what="the subscriptions to go")

    assert change(ros, Transition.TRANSITION_CLEANUP)
    assert state(ros) == "unconfigured" and learner.configured is None
    # configure again: the model learned before is loaded from its file
    assert change(ros, Transition.TRANSITION_CONFIGURE) and change(ros, Transition.TRANSITION_ACTIVATE)
    client = ros.client(Predict, f"{NODE}/predict")
    answer = Waiter(client.call_async(Predict.Request(query=["action"], sensor_names=["obj_vel"],
                                                       sensor_values=[9.0]))).result(20.0)
    assert answer.success, answer.message

    assert change(ros, Transition.TRANSITION_ACTIVE_SHUTDOWN)
    assert state(ros) == "finalized" and learner.configured is None


def test_configure_fails_with_a_bad_configuration_and_can_be_retried(ros, tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{not json")
    learner = managed_learner(ros, tmp_path, autostart=False, config_path=str(config))
    assert not change(ros, Transition.TRANSITION_CONFIGURE)
    assert state(ros) == "unconfigured" and learner.configured is None
    config.write_text(default_config_path().read_text())  # fixed: configure again
    assert change(ros, Transition.TRANSITION_CONFIGURE)
    assert state(ros) == "inactive"


def test_a_configure_that_fails_half_way_says_why_and_undoes_what_it_made(ros, tmp_path, monkeypatch):
    def cannot_start(worker):
        raise PermissionError(13, "Permission denied", "python")
    monkeypatch.setattr(LearnWorker, "start", cannot_start)
    learner = managed_learner(ros, tmp_path, autostart=False)
    assert not change(ros, Transition.TRANSITION_CONFIGURE)
    assert state(ros) == "unconfigured" and learner.configured is None
    monkeypatch.undo()
    assert change(ros, Transition.TRANSITION_CONFIGURE)  # the database was let go: it can be opened again
    assert state(ros) == "inactive"
    with pytest.raises(StartupError, match=r"configure failed: PermissionError\(13, 'Permission denied'\)"):
        monkeypatch.setattr(LearnWorker, "start", cannot_start)
        LearnerNode(context=ros.context, namespace="/other", parameter_overrides=[
            Parameter("database_path", value=str(tmp_path / "other.db")), Parameter("status_period", value=0.0)])
