"""/diagnostics (OK / WARN / ERROR with key values) and the ~/model topic (transient local)."""

import json
import shutil

from conftest import sampled_records, wait_for
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros_harness import Listener
from std_msgs.msg import String

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.storage import CaseStore
from affordance_ros.msg import Features
from affordance_ros.srv import SelectAction

NAME = "affordance_learner: learner"
MODEL_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def learner_status(listener, level=None, text=""):
    """The newest status of the learner, if it has ``level`` and ``text`` in its message."""
    msg = listener.last()
    statuses = [s for s in msg.status if s.name == NAME] if msg else []
    if statuses and (level is None or statuses[0].level == level) and text in statuses[0].message:
        return statuses[0]
    return None


def test_diagnostics_say_ok_warn_and_error_with_key_values(ros, tmp_path):
    db = tmp_path / "db" / "cases.db"
    with CaseStore(db) as store:
        for record in sampled_records(80):
            store.add(record)
    diagnostics = Listener(ros, DiagnosticArray, "/diagnostics")
    learner = ros.learner(diagnostics_period=0.2, database_path=str(db))

    wait_for(lambda: learner_status(diagnostics, DiagnosticStatus.WARN, "no model yet"), what="WARN: no model")
    values = {kv.key: kv.value for kv in learner_status(diagnostics).values}
    assert values["cases stored"] == "80" and values["model age [s]"] == "no model"
    assert values["state"] == "active" and values["last learn duration [s]"] == "-"

    learned = ros.learn()
    assert learned.success, learned.message
    wait_for(lambda: learner_status(diagnostics, DiagnosticStatus.OK), what="OK once a model exists")
    values = {kv.key: kv.value for kv in learner_status(diagnostics).values}
    assert float(values["last learn duration [s]"]) == round(learned.duration, 3)
    assert float(values["last learn log-likelihood"]) == round(learned.log_likelihood, 3)
    assert 0 <= float(values["model age [s]"]) < 60 and values["online updates"] == "off"
    assert values["predict answered"] == values["select_action answered"] == "0"
    for _ in range(3):
        ros.predict(query=["action"], sensor_names=["obj_vel"], sensor_values=[9.0])
    ros.call(SelectAction, "/affordance_learner/select_action", effect_names=["nothing"], effect_values=["x"])
    # (one status message with both: the one with 3 predicts may have been sent before the select_action's answer)
    wait_for(lambda: [{kv.key: kv.value for kv in learner_status(diagnostics).values}[f"{name} answered"]
                      for name in ("predict", "select_action")] == ["3", "1"], what="3 predicts, 1 select_action")

    bad = ros.publisher(Features, "object_features")
    bad.publish(Features(trial_id="bad", names=["weight"], values=[1.0]))
    wait_for(lambda: learner_status(diagnostics, DiagnosticStatus.WARN, "1 parts rejected"), what="WARN: rejected")
    assert {kv.key: kv.value for kv in learner_status(diagnostics).values}["rejected parts"] == "1"

    db.unlink()  # the database file is removed: the node writes what it holds back to its path
    wait_for(lambda: db.exists() and learner.configured.manager.store.file_problem() == "",
             what="the database written back")
    with CaseStore(db, read_only=True) as store:
        assert store.count() == 80
    shutil.rmtree(db.parent)  # and its folder: nowhere to write it back, trials would be lost at a restart
    wait_for(lambda: learner_status(diagnostics, DiagnosticStatus.ERROR, "case database was removed"),
             what="ERROR")
    assert "not confirming trials" in learner_status(diagnostics).message
    assert learner_status(diagnostics).hardware_id == "/affordance_learner"


def test_the_model_topic_has_the_model_at_start_up_and_after_every_learn(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(80):
            store.add(record)
    learner = ros.learner()
    learned = ros.learn()
    assert learned.success, learned.message
    late = Listener(ros, String, "/affordance_learner/model", MODEL_QOS)  # joins after the learn: still gets it
    wait_for(lambda: late.last() is not None, what="the model on ~/model")
    on_topic = AffordanceNetwork.from_dict(json.loads(late.last().data))
    assert on_topic.to_dict() == AffordanceNetwork.load(tmp_path / "model.json").to_dict()
    assert json.loads(late.last().data) == json.loads(json.dumps(learner.configured.manager.current.model.to_dict()))

    again = ros.learn(structure="fixed")
    assert again.success
    wait_for(lambda: len(late.messages) == 2, what="the second model")

    # a restarted learner publishes the model it loaded, for subscribers that come later
    ros.remove(learner)
    ros.learner()
    restarted = Listener(ros, String, "/affordance_learner/model", MODEL_QOS)
    wait_for(lambda: restarted.last() is not None, what="the model at start-up")
    assert json.loads(restarted.last().data) == AffordanceNetwork.load(tmp_path / "model.json").to_dict()
