"""Every kind of bad input: a warning or success false with a message, never a crash or a lost case."""

import math
import re

import pytest
from conftest import sampled_records, wait_for

from affordance_ros.data.storage import CaseStore
from affordance_ros.msg import Action, Features

OBJECT = (["color", "shape", "size"], [5.0, 0.0, 10.0])
EFFECT = (["obj_vel", "obj_hand_vel", "hand_vel", "contact"], [10.0, 5.0, 0.0, 5.0])


class Robot:
    """Publishes hand-made parts to the learner."""

    def __init__(self, ros):
        self.action = ros.publisher(Action, "action")
        self.object = ros.publisher(Features, "object_features")
        self.effect = ros.publisher(Features, "effects")

    def send_action(self, trial_id, label="tap", stamp=0):
        msg = Action(trial_id=trial_id, action=label)
        msg.header.stamp.sec = stamp
        self.action.publish(msg)

    def send_features(self, kind, trial_id, names, values, stamp=0):
        msg = Features(trial_id=trial_id, names=names, values=values)
        msg.header.stamp.sec = stamp
        (self.object if kind == "object" else self.effect).publish(msg)

    def send_trial(self, trial_id, label="tap", stamp=0):
        self.send_action(trial_id, label, stamp)
        self.send_features("object", trial_id, *OBJECT, stamp=stamp)
        self.send_features("effect", trial_id, *EFFECT, stamp=stamp)


@pytest.fixture
def setup(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(5):
            store.add(record)
    learner = ros.learner(trial_timeout=0.5)
    return ros, learner, Robot(ros)


def expect(learner, counter, before, what):
    wait_for(lambda: learner.counts[counter] > before, timeout=10.0, what=what)


def test_bad_messages_are_rejected_and_stored_cases_kept(setup):
    ros, learner, robot = setup
    assert learner.configured.manager.store.count() == 5

    robot.send_trial("good-1")
    wait_for(lambda: learner.counts["stored"] == 1, what="a good trial")

    bad_parts = [
        ("lengths", lambda: robot.send_features("object", "b1", ["color", "shape"], [1.0])),
        ("unknown sensor", lambda: robot.send_features("object", "b2", ["weight"], [1.0])),
        ("effect sensor in the object part", lambda: robot.send_features("object", "b3", ["obj_vel"], [1.0])),
        ("NaN", lambda: robot.send_features("effect", "b4", ["obj_vel"], [math.nan])),
        ("inf", lambda: robot.send_features("effect", "b5", ["contact"], [math.inf])),
        ("-inf", lambda: robot.send_features("object", "b6", ["size"], [-math.inf])),
        ("repeated sensor", lambda: robot.send_features("object", "b7", ["size", "size"], [1.0, 2.0])),
        ("unknown action", lambda: robot.send_action("b8", "push")),
        ("empty action", lambda: robot.send_action("b9", "")),
        ("no id and no stamp", lambda: robot.send_action("", "tap", stamp=0)),
        # serialized bytes no Features deserialiser can read (the learner reads its parts from their bytes)
        ("bytes that end early", lambda: robot.object.publish(b"\x00\x01\x00\x00\x07\x00\x00")),
    ]
    for what, send in bad_parts:
        before = learner.counts["rejected_parts"]
        send()
        expect(learner, "rejected_parts", before, what)

    # the same trial id again, as a whole trial: refused, the stored case is kept
    before = learner.counts["duplicate_trials"]
    robot.send_trial("good-1", label="grasp")
    wait_for(lambda: learner.counts["duplicate_trials"] >= before + 3, what="3 parts of a stored trial")
    # a trial id stored before the node started
    robot.send_action("r00000")
    expect(learner, "duplicate_trials", before + 3, "a part of a trial stored in an earlier run")

    # a part twice while its trial is pending: the first is kept
    before = learner.counts["duplicate_parts"]
    robot.send_action("twice")
    robot.send_action("twice", "grasp")
    expect(learner, "duplicate_parts", before, "a duplicate part")
    robot.send_features("object", "twice", *OBJECT)
    robot.send_features("effect", "twice", *EFFECT)
    wait_for(lambda: learner.configured.manager.store.contains("twice"), what="the trial 'twice'")
    assert learner.configured.manager.store.records()[-1].labels == {"Action": "tap"}

    # an incomplete trial is dropped after trial_timeout (0.5 s)
    before = learner.counts["dropped_incomplete"]
    robot.send_action("lonely")
    expect(learner, "dropped_incomplete", before, "an incomplete trial to be dropped")

    # nothing crashed, nothing was lost: a good trial still goes in, the first version of good-1 stays
    robot.send_trial("good-2")
    wait_for(lambda: learner.counts["stored"] == 3, what="a last good trial")
    records = {r.trial_id: r for r in learner.configured.manager.store.records()}
    assert sorted(records) == ["good-1", "good-2", "r00000", "r00001", "r00002", "r00003", "r00004", "twice"]
    assert records["good-1"].labels == {"Action": "tap"}
    assert learner.counts["store_errors"] == 0


def test_service_requests_that_cannot_be_answered(ros, tmp_path):
    learner = ros.learner(database_path=str(tmp_path / "empty.db"))
    no_model = ros.predict(query=["action"])
    assert not no_model.success and "no model yet: call ~/learn first" in no_model.message
    no_cases = ros.learn()
    assert not no_cases.success and "no cases" in no_cases.message
    assert not (tmp_path / "model.json").exists()
    unknown = ros.learn(structure="greedy")
    assert not unknown.success and "'greedy' is not one of ['average', 'k2', 'mcmc', 'fixed']" in unknown.message

    with CaseStore(tmp_path / "empty.db") as store:
        for record in sampled_records(40):
            store.add(record)
    # no model yet and no arcs in the configuration: nothing to keep
    fixed = ros.learn(structure="fixed")
    assert not fixed.success and "needs 'parents'" in fixed.message
    assert learner.counts["learn_failed"] == 3
    assert ros.learn().success

    bad_requests = [
        (dict(query=["Weight"]), "unknown variable 'Weight'"),
        (dict(query=["actions"]), "unknown variable 'actions'"),
        (dict(query=[]), "empty query"),
        (dict(query=["action"], sensor_names=["color", "size"], sensor_values=[1.0]),
         "2 sensor_names but 1 sensor_values"),
        (dict(query=["action"], variable_names=["Shape"], variable_values=[]), "1 variable_names but 0"),
        (dict(query=["action"], sensor_names=["weight"], sensor_values=[1.0]), "unknown sensor 'weight'"),
        (dict(query=["action"], sensor_names=["color"], sensor_values=[math.nan]), "finite"),
        (dict(query=["action"], sensor_names=["color"], sensor_values=[math.inf]), "finite"),
        (dict(query=["action"], sensor_names=["color", "color"], sensor_values=[1.0, 2.0]), "given twice"),
        (dict(query=["effect"], variable_names=["Shape"], variable_values=["sphere"]), "unknown label 'sphere'"),
        (dict(query=["effect"], variable_names=["Mass"], variable_values=["big"]), "unknown variable 'Mass'"),
    ]
    for fields, message in bad_requests:
        response = ros.predict(**fields)
        assert not response.success, fields
        assert message in response.message, (fields, response.message)
        assert list(response.marginals) == []
    assert learner.counts["predict_failed"] == len(bad_requests) + 1
    assert ros.predict(query=["action"]).success


def test_a_planner_repeating_a_mistake_in_a_loop_cannot_flood_the_log(ros, tmp_path):
    """Each refused request is answered and counted, but the log gets one line per kind of mistake and period,
    then how many more came ("N more like that in the last 5 s; the latest: ..."), as for bad trial parts: with
    a warning per request, a client repeating a mistake back to back would write megabytes of log a minute."""
    from ros_harness import start, stop

    from affordance_ros.nodes.qos import reply_qos
    from affordance_ros.srv import Learn, Predict

    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db",
                    model_path=tmp_path / "model.json", status_period=0.0)
    try:
        calls = [(Predict, "predict", dict(query=["effect"])),  # (no model yet)
                 (Learn, "learn", dict(structure="greedy"))]
        for srv_type, name, fields in calls:
            client = ros.client_node.create_client(srv_type, f"/affordance_learner/{name}", qos_profile=reply_qos())
            assert client.wait_for_service(timeout_sec=30.0)
            ros.call(srv_type, f"/affordance_learner/{name}", **fields)  # (its answer reached us: matched)
            for _ in range(60):  # 300 requests, 5 at a time (a burst beyond the server's request queue is lost)
                futures = [client.call_async(srv_type.Request(**fields)) for _ in range(5)]
                wait_for(lambda: all(f.done() for f in futures), timeout=30, what=f"5 answers of ~/{name}")
                assert not any(f.result().success for f in futures)
    finally:
        assert stop(learner) == 0
    log = (tmp_path / "learner.log").read_text()
    lines = {kind: [line for line in log.splitlines() if kind in line]
             for kind in ("predict: no model yet", "learn: structure 'greedy' is not one of", "learn refused: ")}
    for kind, found in lines.items():  # (two learns sent at once: the second is refused, 'already running')
        assert 1 <= len(found) <= 6, (kind, log[-3000:])
        assert any("more like that in the last" in line for line in found), (kind, log[-3000:])
    assert "predict ok/failed: 0/301" in log  # every request counted
    learns = re.search(r"learn ok/failed/refused: 0/(\d+)/(\d+)", log)
    assert learns and int(learns[1]) + int(learns[2]) == 301, log[-3000:]
