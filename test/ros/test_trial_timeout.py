"""The node's fallback on its clock for incomplete trials when messages stop (data time is tested
with replays in test_replay.py and on the assembler in test_pairing.py)."""

from rclpy.parameter import Parameter

from affordance_ros.learner_node import LearnerNode
from affordance_ros.msg import Action, Features

OBJECT = dict(names=["color", "shape", "size"], values=[5.0, 0.0, 10.0])
EFFECT = dict(names=["obj_vel", "obj_hand_vel", "hand_vel", "contact"], values=[10.0, 5.0, 0.0, 5.0])


def stamped(msg, sec=1000):
    msg.header.stamp.sec = sec
    return msg


def test_the_fallback_drops_after_a_silence_but_not_right_after_the_executor_was_held_up(ros, tmp_path):
    # the node's callbacks called one by one, with a clock of the test's own (no executor)
    node = LearnerNode(context=ros.context, parameter_overrides=[
        Parameter("database_path", value=str(tmp_path / "cases.db")),
        Parameter("model_path", value=str(tmp_path / "model.json")),
        Parameter("trial_timeout", value=0.5), Parameter("status_period", value=0.0)])
    try:
        clock = [100.0]
        node._now = lambda: clock[0]
        assert node._expire_period == 0.125
        node._on_action(stamped(Action(trial_id="held", action="tap")))
        node._expire_trials()
        clock[0] = 110.0  # the executor was held up for 10 s: the other parts may be queued behind the timer
        node._expire_trials()
        assert node.assembler.pending == 1 and node.counts["dropped_incomplete"] == 0
        node._on_object_features(stamped(Features(trial_id="held", **OBJECT)))
        node._on_effects(stamped(Features(trial_id="held", **EFFECT)))
        assert node.store.contains("held")

        # a real silence: the timer keeps running and nothing arrives
        node._on_action(stamped(Action(trial_id="lonely", action="tap")))
        for t in (110.125, 110.25, 110.375, 110.5):
            clock[0] = t
            node._expire_trials()
            assert node.counts["dropped_incomplete"] == 0
        clock[0] = 110.625
        node._expire_trials()
        assert node.counts["dropped_incomplete"] == 1 and node.assembler.pending == 0
    finally:
        node.destroy_node()
