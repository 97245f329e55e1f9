"""The fallback on the receive clock for incomplete trials when messages stop (data time is tested
with replays in test/tools/test_replay.py and on the assembler in test/data/test_pairing.py): on
``TrialIntake`` with a clock of the test's own, and on the node over DDS."""

import time

from conftest import MONTESANO_CONFIG, wait_for

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.intake import TrialIntake
from affordance_ros.data.pairing import PartValidator, TrialAssembler
from affordance_ros.msg import Action

OBJECT = (["color", "shape", "size"], [5.0, 0.0, 10.0])
EFFECT = (["obj_vel", "obj_hand_vel", "hand_vel", "contact"], [10.0, 5.0, 0.0, 5.0])


def counters(events):
    return [e.counter for e in events]


def test_the_fallback_drops_after_a_silence_but_not_right_after_the_caller_was_held_up():
    stored = {}
    intake = TrialIntake(PartValidator(AffordanceNetwork.load(MONTESANO_CONFIG)), TrialAssembler(trial_timeout=0.5),
                         submit=lambda record: stored.setdefault(record.trial_id, record),
                         stored=stored.get, confirming=lambda: True, expire_period=0.125)
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
    time.sleep(0.2)
    assert learner.intake.pending == 0 and learner.manager.store.count() == 0
