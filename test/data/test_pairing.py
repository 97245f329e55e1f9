"""TrialAssembler and PartValidator: pairing the three parts of a trial, checking them."""

import sys

import pytest

from affordance_ros.core.ground_truth import benchmark_structure
from affordance_ros.data.pairing import DuplicatePartError, PairingError, PartValidator, TrialAssembler

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


def feed(asm, parts):
    """Parts (receive time, kind, trial_id, stamp, payload) as the node and offline import feed them:
    observe every message, then add it; returns what happened, in order."""
    events = []
    for now, kind, trial_id, stamp, payload in parts:
        events += [f"dropped {d.trial_id or d.stamp} ({'stamps' if 'stamps' in d.reason else 'idle'})"
                   for d in asm.expire(now) + asm.observe(stamp, now)]
        trial = asm.add(kind, trial_id, stamp, payload, now)
        if trial:
            events.append(f"{trial.action} {trial.trial_id}")
    return events


def test_incomplete_trials_time_out_on_data_time():
    asm = TrialAssembler(slop=0.1, trial_timeout=2.0)
    assert asm.observe(100.0, now=10.0) == []
    asm.add("action", "a", 100.0, "tap", now=10.0)
    assert asm.observe(102.0, now=10.1) == []  # 2.0 s of stamps is not more than the timeout
    asm.add("object", "", 102.0, OBJ, now=10.1)
    dropped = asm.observe(102.5, now=10.2)  # receive time hardly moved: the stamps decide
    assert [(d.trial_id, d.parts) for d in dropped] == [("a", ("action",))]
    assert dropped[0].reason == "no 'object' or 'effect' part while the header stamps moved on by trial_timeout 2 s"
    assert asm.data_time == 102.5 and asm.pending == 1
    # an old stamp (a late part) does not move data time back
    assert asm.observe(101.0, now=10.3) == [] and asm.data_time == 102.5
    assert [d.parts for d in asm.observe(104.2, now=10.4)] == [("object",)]
    assert asm.counts["dropped"] == 2 and asm.pending == 0
    # a dropped id may complete later from scratch
    for kind, payload in (("action", "tap"), ("object", OBJ), ("effect", EFF)):
        asm.observe(104.3, now=10.5)
        trial = asm.add(kind, "a", 104.3, payload, now=10.5)
    assert trial.trial_id == "a"


def test_the_same_stream_gives_the_same_trials_at_any_speed():
    """A bag-like stream: the late 'effect' of trial 'x' (stamped at its start) comes 6 s after it,
    while other trials go on; replayed at any rate (receive times scaled) the same trials come out."""
    parts = []
    for k in range(10):
        t = 1000.0 + k
        parts += [(t, "action", f"t{k}", t, "tap"), (t + 0.01, "object", f"t{k}", t, OBJ),
                  (t + 0.02, "effect", f"t{k}", t, EFF)]
    parts += [(1001.5, "action", "x", 1001.5, "grasp"), (1001.51, "object", "x", 1001.5, OBJ),
              (1007.6, "effect", "x", 1001.5, EFF)]
    parts.sort(key=lambda p: p[0])

    def run(rate, timeout=5.0):
        start = parts[0][0]
        scaled = [(start + (now - start) / rate, *rest) for now, *rest in parts]
        return feed(TrialAssembler(trial_timeout=timeout), scaled)

    at_1x = run(1.0)
    assert "dropped x (stamps)" in at_1x and not any(e.startswith("grasp") for e in at_1x)
    assert len([e for e in at_1x if e.startswith("tap")]) == 10
    assert run(10.0) == run(0.5) == run(1000.0) == at_1x
    assert "grasp x" in run(1.0, timeout=7.0)


def test_by_stamp_pairing_times_out_on_data_time_too():
    parts = [(0.00, "action", "", 1000.00, "tap"), (0.01, "object", "", 1000.00, OBJ),
             (0.02, "action", "", 1000.50, "grasp"), (0.03, "object", "", 1000.50, OBJ),
             (0.04, "effect", "", 1000.50, EFF), (0.05, "effect", "", 1000.00, EFF)]
    # the first trial's effect comes after the stamps moved on by 0.5 s (received at once, as in a fast replay)
    assert feed(TrialAssembler(slop=0.05, trial_timeout=0.4), parts) == [
        "dropped 1000.0 (stamps)", "grasp stamp-1000.500000"]
    assert feed(TrialAssembler(slop=0.05, trial_timeout=0.6), parts) == [
        "grasp stamp-1000.500000", "tap stamp-1000.000000"]


def test_when_messages_stop_the_receive_clock_drops_what_is_left():
    asm = TrialAssembler(trial_timeout=2.0)
    asm.observe(500.0, now=10.0)
    asm.add("action", "a", 500.0, "tap", now=10.0)
    assert asm.expire(now=12.0) == []
    dropped = asm.expire(now=12.1)
    assert [d.trial_id for d in dropped] == ["a"]
    assert dropped[0].reason == "no 'object' or 'effect' part and no message at all for trial_timeout 2 s"
    # judged on the receive clock only: stamps do not move on meanwhile
    asm.observe(600.0, now=20.0)
    asm.add("action", "b", 600.0, "tap", now=20.0)
    assert asm.observe(600.0, now=20.5) == []
    assert asm.expire(now=22.4) == []
    assert [d.trial_id for d in asm.expire(now=22.6)] == ["b"]
    assert asm.pending == 0


def test_parts_without_stamps_use_the_receive_clock():
    asm = TrialAssembler(trial_timeout=1.0)
    asm.observe(0.0, now=50.0)
    asm.add("action", "a", 0.0, "tap", now=50.0)
    for now in (50.4, 50.8):  # other messages keep coming, none stamped
        assert asm.observe(0.0, now=now) == []
    assert [d.trial_id for d in asm.observe(0.0, now=51.2)] == ["a"]


def test_a_clock_that_starts_over_restarts_data_time():
    asm = TrialAssembler(trial_timeout=1.0)
    asm.observe(1_700_000_000.0, now=0.0)
    asm.add("action", "a", 1_700_000_000.0, "tap", now=0.0)
    assert asm.observe(5.0, now=0.1) == []  # e.g. a simulator restarted: its clock starts over
    assert asm.data_time == 5.0 and asm.pending == 1
    assert asm.observe(5.9, now=0.2) == []
    assert len(asm.observe(6.1, now=0.3)) == 1
    # the receive clock jumping back (a looped bag) restarts the wait for messages
    asm.observe(6.1, now=100.0)
    asm.add("action", "b", 6.1, "tap", now=100.0)
    assert asm.expire(now=5.0) == [] and asm.expire(now=5.9) == []
    assert len(asm.expire(now=6.1)) == 1



def test_two_senders_whose_clocks_are_hours_apart_do_not_time_out_each_others_trials():
    """A bag of 2023 replayed while a robot streams now (or a robot whose clock was never set): their parts take
    turns: a turn must not move data time by two years, forward or back, which would drop every trial waiting
    ('while the header stamps moved on')."""
    now, old = 1_795_000_000.0, 1_700_000_000.0
    parts = []
    for k in range(5):
        for kind, payload in (("action", "tap"), ("object", OBJ), ("effect", EFF)):
            parts += [(0.1 * k, kind, f"live{k}", now + k, payload), (0.1 * k, kind, f"bag{k}", old + k, payload)]
    events = feed(TrialAssembler(trial_timeout=5.0), parts)
    assert sorted(events) == sorted([f"tap live{k}" for k in range(5)] + [f"tap bag{k}" for k in range(5)])
    # trials missing a part are still dropped, trial_timeout after the last turn of the clocks
    asm = TrialAssembler(trial_timeout=5.0)
    assert feed(asm, [(0.0, "action", "lost", now, "tap"), (0.1, "action", "b", old, "tap"),
                      (0.2, "object", "c", now + 4.0, OBJ), (0.3, "object", "d", now + 8.9, OBJ)]) == []
    assert asm.pending == 4
    assert feed(asm, [(0.4, "object", "e", now + 9.1, OBJ)]) == [
        "dropped lost (stamps)", "dropped b (stamps)", "dropped c (stamps)"]
    assert asm.pending == 2

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
    # a robot's name wrong in case only: the refusal (on ~/stored) names the one meant
    with pytest.raises(PairingError, match=r"unknown sensor 'Size' \(did you mean 'size'\? names are case-sensitive\); "
                                           r"the object sensors are"):
        check.readings("object", ["Size"], [1.0])
    with pytest.raises(PairingError, match=r"unknown action 'Tap' \(did you mean 'tap'\? names are case-sensitive\)"):
        check.action("Tap")
    with pytest.raises(PairingError, match="'color' appears twice"):
        check.readings("object", ["color", "color"], [1.0, 1.0])
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(PairingError, match="finite"):
            check.readings("effect", ["contact"], [bad])


def test_part_validator_needs_one_labelled_action_variable():
    with pytest.raises(ValueError, match="exactly one variable in the group 'action'"):
        PartValidator(benchmark_structure("simple", 1.0))


def test_at_most_max_pending_trials_wait_and_lone_parts_are_dropped_first():
    asm = TrialAssembler(trial_timeout=60.0, max_pending=3)
    dropped = []

    def part(kind, trial_id, payload, stamp=10.0):
        dropped.extend(asm.observe(stamp, now=0.0))
        return asm.add(kind, trial_id, stamp, payload, now=0.0)
    part("object", "good", OBJ)
    part("effect", "good", EFF)  # its action is late (queued behind a flood on the action topic)
    for k in range(50):  # a flood of action parts of trials that never complete
        part("action", f"flood{k}", "tap")
        assert asm.pending <= 3
    assert len(dropped) == 48 and all(d.parts == ("action",) for d in dropped)
    assert "while max_pending_trials 3 trials waited for parts" in dropped[0].reason
    assert part("action", "good", "tap").trial_id == "good"  # the trial with two parts was kept
    # by stamp too: a flood of action parts 1 us apart does not pair with itself, and a trial still pairs
    for k in range(2000):
        part("action", "", "tap", stamp=20.0 + k * 1e-6)
    assert asm.pending <= 3
    part("object", "", OBJ, stamp=20.0 + 1999e-6)
    trial = part("effect", "", EFF, stamp=20.0 + 1999e-6)
    assert trial is not None and trial.stamp == pytest.approx(20.0 + 1999e-6)


def _calls(function) -> int:
    """The Python and C calls ``function()`` makes: its work, counted (not timed)."""
    calls = [0]

    def count(frame, event, arg):
        if event in ("call", "c_call"):
            calls[0] += 1
    sys.setprofile(count)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls[0]


@pytest.mark.parametrize("parts_each", [1, 2])
def test_a_flood_part_costs_the_same_work_however_many_trials_wait(parts_each):
    """At max_pending, each new trial's first part drops one waiting trial: finding it looks at no more trials
    with 10,000 waiting than with 100, whether those have one part (a flood of lone parts) or two (its lone
    trials are then only the newest: a scan for them would pass every trial with two parts)."""
    def calls_of_a_part(max_pending):
        asm = TrialAssembler(trial_timeout=60.0, max_pending=max_pending, remember_completed=0)
        kinds, payloads = ("action", "object"), ("tap", OBJ)
        for k in range(max_pending - 1):
            for kind, payload in zip(kinds[:parts_each], payloads):
                asm.observe(10.0, now=0.0)
                asm.add(kind, f"waiting{k}", 10.0, payload, now=0.0)

        def part(trial_id):
            dropped = asm.observe(10.0, now=0.0)
            asm.add("action", trial_id, 10.0, "tap", now=0.0)
            return [d.trial_id for d in dropped]
        assert part("flood0") == [] and asm.pending == max_pending
        dropped = []
        calls = _calls(lambda: dropped.extend(part("flood1")))
        assert dropped == ["waiting0" if parts_each == 1 else "flood0"] and asm.pending == max_pending
        return calls
    assert calls_of_a_part(10_000) == calls_of_a_part(100)
