"""TrialIntake below ROS: what moves data time, stamp skew, size limits, ranges, the answers for ~/stored."""

import sqlite3

import pytest

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.intake import DUPLICATE, REJECTED, STORED, TrialIntake
from affordance_ros.data.pairing import PartValidator, SizeLimits, TrialAssembler
from affordance_ros.data.storage import CaseStore
from affordance_ros.data.text import printable, quoted
from affordance_ros.share import share_directory

CONFIG = share_directory() / "config" / "montesano.json"
OBJECT = (["color", "shape", "size"], [5.0, 0.0, 10.0])
EFFECT = (["obj_vel", "obj_hand_vel", "hand_vel", "contact"], [10.0, 5.0, 0.0, 5.0])


@pytest.fixture
def store(tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        yield store


def intake_for(store, limits=SizeLimits(), **kw):
    return TrialIntake(PartValidator(AffordanceNetwork.load(CONFIG), limits), TrialAssembler(trial_timeout=5.0),
                       store.insert, store.record_of, expire_period=1.0, **kw)


def send(intake, trial_id, stamp=1000.0, now=1000.0, label="tap", obj=OBJECT, eff=EFFECT):
    return (intake.take("action", trial_id, stamp, label, now) + intake.take("object", trial_id, stamp, obj, now)
            + intake.take("effect", trial_id, stamp, eff, now))


def statuses(events):
    return [e.status for e in events if e.status is not None]


def test_a_rejected_part_stamped_far_ahead_does_not_move_data_time(store):
    intake = intake_for(store)
    intake.take("action", "t1", 1000.0, "tap", now=1000.0)
    bad = intake.take("action", "bad", 1000.0 + 1e6, "push", now=1000.0)  # unknown label, far future
    assert [e.counter for e in bad] == ["received_action", "rejected_parts"]
    assert intake.assembler.data_time == 1000.0
    events = intake.take("object", "t1", 1001.0, OBJECT, now=1001.0) + intake.take("effect", "t1", 1001.0, EFFECT,
                                                                                      now=1001.0)
    assert "stored" in [e.counter for e in events] and store.count() == 1


def test_stamps_too_far_ahead_of_the_clock_are_rejected_counted_and_answered(store):
    intake = intake_for(store, max_stamp_skew=3600.0)
    events = intake.take("action", "f", 1000.0 + 3601.0, "tap", now=1000.0)
    (rejected,) = [e for e in events if e.counter == "rejected_parts"]
    assert "ahead of the node's clock" in rejected.message and rejected.also == ("out_of_range_parts",)
    assert rejected.status[:2] == ("f", REJECTED)
    assert intake.assembler.data_time is None
    assert statuses(send(intake, "ok", stamp=1000.0 + 3599.0)) == [("ok", STORED, "")]
    # a clock that has not started (use_sim_time before /clock): not judged
    assert statuses(send(intake_for(store, max_stamp_skew=1.0), "sim", stamp=5e9, now=0.0)) == [("sim", STORED, "")]


def test_a_resent_trial_is_confirmed_and_a_conflicting_one_is_a_duplicate(store):
    intake = intake_for(store)
    assert statuses(send(intake, "a")) == [("a", STORED, "")]
    again = send(intake, "a")
    assert [e.counter for e in again if not e.counter.startswith("received")] == ["resent_parts"] * 3
    assert statuses(again) == [("a", STORED, "already stored")] * 3
    assert all(not e.message for e in again)  # not an error: nothing logged
    other = send(intake, "a", eff=(EFFECT[0], [1.0, 5.0, 0.0, 5.0]))
    assert [s[1] for s in statuses(other)] == [STORED, STORED, DUPLICATE]
    then = send(intake, "a")  # once a conflict is seen, every part of that id is a duplicate
    assert [s[1] for s in statuses(then)] == [DUPLICATE] * 3
    assert store.count() == 1 and store.record_of("a").effects["obj_vel"] == 10.0


def test_a_trial_that_could_not_be_stored_can_be_sent_again(store):
    failures = []

    def flaky(record):
        if not failures:
            failures.append(record.trial_id)
            raise sqlite3.OperationalError("disk I/O error")
        return store.insert(record)
    intake = TrialIntake(PartValidator(AffordanceNetwork.load(CONFIG)), TrialAssembler(), flaky, store.record_of,
                         expire_period=1.0)
    first = send(intake, "x")
    assert [e.counter for e in first][-1] == "store_errors" and statuses(first) == []  # no answer: sent again
    assert statuses(send(intake, "x")) == [("x", STORED, "")] and store.count() == 1


def test_size_limits_and_valid_ranges_at_the_door(store):
    intake = intake_for(store, SizeLimits(max_trial_id_length=8, max_name_length=10, max_list_length=3))
    (long_id,) = [e for e in intake.take("action", "x" * 9, 1.0, "tap", 1.0) if e.counter == "rejected_parts"]
    assert "trial_id is 9 characters long, more than max_trial_id_length 8" in long_id.message
    assert long_id.status is None and long_id.also == ("oversized_parts",)
    cases = {
        "label": ("action", "y" * 11, "action label is 11 characters long"),
        "name": ("object", (["c" * 11], [1.0]), "sensor name is 11 characters long"),
        "list": ("effect", (EFFECT[0], EFFECT[1]), "4 names or values, more than max_list_length 3"),
        "range": ("object", (["color"], [2e154]), "outside its valid_range [-1e+09, 1e+09]"),
    }
    for trial_id, (kind, fields, message) in cases.items():
        (event,) = [e for e in intake.take(kind, trial_id, 1.0, fields, 1.0) if e.counter == "rejected_parts"]
        assert message in event.message and event.status[:2] == (trial_id, REJECTED)
    assert store.count() == 0


def test_printable_escapes_control_characters_and_bounds_length():
    assert (printable("t1\n[INFO] forged \x1b[31mred\r\t\x00\u2028")
            == "t1\\n[INFO] forged \\x1b[31mred\\r\\t\\x00\\u2028")
    long = printable("x" * 5000, limit=100)
    assert long == "x" * 100 + "... (4900 more characters)"
    assert quoted("\n" * 200).startswith("\\n" * 40) and len(quoted("a" * 10**6)) < 120
