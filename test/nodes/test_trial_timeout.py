"""The fallback on the receive clock for incomplete trials when messages stop (data time is tested
with replays in test/tools/test_replay.py and on the assembler in test/data/test_pairing.py): on
``TrialIntake`` with a clock of the test's own, and on the node over DDS."""


from conftest import MONTESANO_CONFIG, wait_for

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.intake import TrialIntake
from affordance_ros.data.pairing import PartValidator, TrialAssembler
from affordance_ros.msg import Action, Features

OBJECT = (["color", "shape", "size"], [5.0, 0.0, 10.0])
EFFECT = (["obj_vel", "obj_hand_vel", "hand_vel", "contact"], [10.0, 5.0, 0.0, 5.0])


def counters(events):
    return [e.counter for e in events]


class HandedOver:
    """Stands in for the CaseWriter (and its store): keeps what the intake hands over for storing."""

    confirming = True

    def __init__(self):
        self.records = {}
        self.store = self

    def submit(self, record):
        self.records.setdefault(record.trial_id, record)

    def record_of(self, trial_id):
        return self.records.get(trial_id)


def test_the_fallback_drops_after_a_silence_but_not_right_after_the_caller_was_held_up():
    writer = HandedOver()
    stored = writer.records
    intake = TrialIntake(PartValidator(AffordanceNetwork.load(MONTESANO_CONFIG)), TrialAssembler(trial_timeout=0.5),
                         writer, expire_period=0.125)
    assert counters(intake.take("action", "held", 1000.0, "tap", now=100.0)) == ["received_action"]
    assert intake.expire(100.0) == []
    # the caller was held up for 10 s: the other parts may be queued behind the timer
    assert intake.expire(110.0) == [] and intake.pending == 1
    intake.take("object", "held", 1000.0, OBJECT, now=110.0)
    assert counters(intake.take("effect", "held", 1000.0, EFFECT, now=110.0)) == ["received_effect"]
    assert "held" in stored and intake.storing == 1  # complete: handed over for storing

    # a real silence: the timer keeps running and nothing arrives
    intake.take("action", "lonely", 1000.0, "tap", now=110.0)
    for t in (110.125, 110.25, 110.375, 110.5):
        assert intake.expire(t) == []
    (dropped,) = intake.expire(110.625)
    assert dropped.counter == "dropped_incomplete" and "'lonely' (has action)" in dropped.message
    assert intake.pending == 0


def test_the_node_drops_a_trial_whose_parts_stop_coming(ros):
    learner = ros.learner(trial_timeout=0.5)
    publisher = ros.publisher(Action, "action")
    msg = Action(trial_id="lonely", action="tap")
    msg.header.stamp.sec = 1000
    publisher.publish(msg)
    wait_for(lambda: learner.counts["received_action"] == 1, what="the action part")
    assert learner.counts["dropped_incomplete"] == 0
    wait_for(lambda: learner.counts["dropped_incomplete"] == 1, timeout=5.0, what="the trial to be dropped")
    wait_for(lambda: learner.configured.trials.intake.pending == 0, what="nothing left pending")
    assert learner.configured.trials.intake.pending == 0 and learner.configured.manager.store.count() == 0


def test_a_robot_and_a_bag_of_another_year_sent_at_once_lose_no_trial(ros):
    """A robot streaming now and a replay of a bag recorded in 2023 (or a robot whose clock was never set), their
    parts taking turns: a turn must not move the node's data time by two years, forward or back, which would drop
    every trial waiting ('no ... part while the header stamps moved on by trial_timeout')."""
    learner = ros.learner()
    publishers = {"action": ros.publisher(Action, "action"), "object": ros.publisher(Features, "object_features"),
                  "effect": ros.publisher(Features, "effects")}
    now = ros.client_node.get_clock().now().nanoseconds // 10**9
    for k in range(4):
        for kind, make in (("action", lambda i: Action(trial_id=i, action="tap")),
                           ("object", lambda i: Features(trial_id=i, names=OBJECT[0], values=OBJECT[1])),
                           ("effect", lambda i: Features(trial_id=i, names=EFFECT[0], values=EFFECT[1]))):
            for trial_id, sec in ((f"live{k}", now), (f"bag{k}", 1_700_000_000 + k)):
                msg = make(trial_id)
                msg.header.stamp.sec = sec
                publishers[kind].publish(msg)
                count = learner.counts[f"received_{kind}"]
                wait_for(lambda: learner.counts[f"received_{kind}"] > count, what=f"the {kind} part of {trial_id}")
    wait_for(lambda: learner.configured.manager.store.count() == 8, timeout=10.0, what="the 8 trials stored")
    assert learner.counts["dropped_incomplete"] == 0
