"""TrialAssembler and PartValidator: pairing the three parts of a trial, checking them."""

import pytest

from affordance_ros.core.ground_truth import benchmark_structure
from affordance_ros.pairing import DuplicatePartError, PairingError, PartValidator, TrialAssembler

OBJ = {"color": 1.0}
EFF = {"obj_vel": 2.0}


def test_pairs_by_trial_id_in_any_order():
    asm = TrialAssembler(slop=0.1, trial_timeout=5.0)
    assert asm.add("effect", "a", 10.0, EFF, now=1.0) is None
    assert asm.add("object", "b", 20.0, {"color": 7.0}, now=1.1) is None
    assert asm.add("action", "a", 9.0, "tap", now=1.2) is None
    assert asm.pending == 2
    trial = asm.add("object", "a", 99.0, OBJ, now=1.3)  # stamps do not matter with an id
    assert (trial.trial_id, trial.action, trial.object_features, trial.effects) == ("a", "tap", OBJ, EFF)
    assert (trial.stamp, trial.received) == (9.0, 1.3)
    assert asm.pending == 1 and asm.counts["completed"] == 1


def test_duplicate_parts_are_counted_and_first_kept():
    asm = TrialAssembler()
    asm.add("action", "a", 1.0, "tap", now=0.0)
    with pytest.raises(DuplicatePartError, match="already has its 'action' part"):
        asm.add("action", "a", 1.0, "grasp", now=0.1)
    asm.add("object", "a", 1.0, OBJ, now=0.2)
    assert asm.add("effect", "a", 1.0, EFF, now=0.3).action == "tap"
    with pytest.raises(DuplicatePartError, match="already complete"):
        asm.add("effect", "a", 1.0, EFF, now=0.4)
    assert asm.counts == {"completed": 1, "duplicate_parts": 2, "dropped": 0}
    assert asm.pending == 0


def test_pairs_by_stamp_within_slop_nearest_first():
    asm = TrialAssembler(slop=0.05, trial_timeout=5.0)
    # two trials 0.2 s apart, parts interleaved and jittered
    asm.add("action", "", 100.00, "tap", now=0.0)
    asm.add("action", "", 100.20, "grasp", now=0.0)
    asm.add("object", "", 100.21, OBJ, now=0.0)
    asm.add("object", "", 100.01, {"color": 3.0}, now=0.0)
    first = asm.add("effect", "", 100.03, EFF, now=0.1)
    second = asm.add("effect", "", 100.19, {"obj_vel": 4.0}, now=0.1)
    assert (first.action, first.object_features, first.trial_id) == ("tap", {"color": 3.0}, "stamp-100.000000")
    assert (second.action, second.object_features, second.effects) == ("grasp", OBJ, {"obj_vel": 4.0})
    assert asm.pending == 0


def test_stamps_further_apart_than_slop_do_not_pair():
    asm = TrialAssembler(slop=0.05, trial_timeout=1.0)
    asm.add("action", "", 100.0, "tap", now=0.0)
    asm.add("object", "", 100.04, OBJ, now=0.0)
    # within slop of the object part but not of the action: all three must lie within slop
    assert asm.add("effect", "", 100.08, EFF, now=0.0) is None
    assert asm.pending == 2


def test_stamp_pairing_needs_a_stamp_and_spots_resent_parts():
    asm = TrialAssembler()
    with pytest.raises(PairingError, match="no trial_id and no header stamp"):
        asm.add("action", "", 0.0, "tap", now=0.0)
    asm.add("action", "", 5.0, "tap", now=0.0)
    with pytest.raises(DuplicatePartError):
        asm.add("action", "", 5.0, "tap", now=0.0)


def test_incomplete_trials_expire_on_the_given_clock():
    asm = TrialAssembler(slop=0.1, trial_timeout=2.0)
    asm.add("action", "a", 1.0, "tap", now=10.0)
    asm.add("object", "", 50.0, OBJ, now=11.0)
    assert asm.expire(now=12.0) == []  # 2.0 s is not more than the timeout
    dropped = asm.expire(now=12.5)
    assert [(d.trial_id, d.parts) for d in dropped] == [("a", ("action",))]
    assert "'object' or 'effect'" in dropped[0].reason and "2 s" in dropped[0].reason
    assert [d.parts for d in asm.expire(now=13.5)] == [("object",)]
    assert asm.counts["dropped"] == 2 and asm.pending == 0
    # a dropped id may complete later from scratch
    asm.add("action", "a", 1.0, "tap", now=20.0)
    asm.add("object", "a", 1.0, OBJ, now=20.0)
    assert asm.add("effect", "a", 1.0, EFF, now=20.0).trial_id == "a"


def test_bag_like_stream_judged_on_receive_times():
    """Parts in the order and with the receive times a bag holds; no wall clock involved."""
    parts = [(0.00, "action", 0.00, "tap"), (0.01, "object", 0.00, OBJ), (0.50, "action", 0.50, "grasp"),
             (0.51, "object", 0.50, OBJ), (0.55, "effect", 0.50, EFF), (0.70, "effect", 0.00, EFF)]

    def run(timeout):
        asm = TrialAssembler(slop=0.05, trial_timeout=timeout)
        events = []
        for now, kind, stamp, payload in parts:
            events += [f"dropped {d.stamp}" for d in asm.expire(now)]
            trial = asm.add(kind, "", stamp + 1000.0, payload, now)
            if trial:
                events.append(f"{trial.action} {trial.trial_id}")
        return events

    # the first trial's effect comes 0.7 s after its action
    assert run(timeout=0.6) == ["grasp stamp-1000.500000", "dropped 1000.0"]
    assert run(timeout=1.0) == ["grasp stamp-1000.500000", "tap stamp-1000.000000"]


def test_clock_jumping_back_restarts_the_wait():
    asm = TrialAssembler(trial_timeout=1.0)
    asm.add("action", "a", 1.0, "tap", now=100.0)
    assert asm.expire(now=5.0) == []  # e.g. a looped bag: the clock starts over
    assert asm.expire(now=5.9) == []
    assert len(asm.expire(now=6.1)) == 1


def test_bad_settings():
    with pytest.raises(ValueError, match="trial_timeout"):
        TrialAssembler(trial_timeout=0)
    with pytest.raises(ValueError, match="slop"):
        TrialAssembler(slop=float("nan"))


def test_part_validator_on_montesano():
    config = benchmark_structure("montesano", 1.0)
    check = PartValidator(config)
    assert check.action_variable == "Action" and check.action("tap") == "tap"
    with pytest.raises(PairingError, match=r"unknown action 'push'; expected one of \['grasp', 'tap', 'touch'\]"):
        check.action("push")
    assert check.readings("object", ["color", "size"], [1.0, 2.5]) == {"color": 1.0, "size": 2.5}
    with pytest.raises(PairingError, match="2 names but 1 values"):
        check.readings("object", ["color", "size"], [1.0])
    with pytest.raises(PairingError, match="unknown sensor 'weight'"):
        check.readings("object", ["weight"], [1.0])
    with pytest.raises(PairingError, match="'obj_vel' is an effect sensor"):
        check.readings("object", ["obj_vel"], [1.0])
    with pytest.raises(PairingError, match="'color' appears twice"):
        check.readings("object", ["color", "color"], [1.0, 1.0])
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(PairingError, match="finite"):
            check.readings("effect", ["contact"], [bad])


def test_part_validator_needs_one_labelled_action_variable():
    with pytest.raises(ValueError, match="exactly one variable in the group 'action'"):
        PartValidator(benchmark_structure("simple", 1.0))
