"""TrialIntake below ROS: what moves data time, stamp skew, size limits, ranges, the answers for ~/stored."""

import sqlite3

import pytest
from conftest import committed_events

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.case_writer import CaseWriter
from affordance_ros.data.intake import DUPLICATE, REJECTED, RETRY, STORED, TrialIntake
from affordance_ros.data.log_text import printable, quoted
from affordance_ros.data.pairing import PartValidator, SizeLimits, TrialAssembler
from affordance_ros.data.storage import CaseStore
from affordance_ros.data.trial import Trial
from affordance_ros.share import share_directory

CONFIG = share_directory() / "config" / "montesano.json"
OBJECT = (["color", "shape", "size"], [5.0, 0.0, 10.0])
EFFECT = (["obj_vel", "obj_hand_vel", "hand_vel", "contact"], [10.0, 5.0, 0.0, 5.0])


@pytest.fixture
def store(tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        yield store


class Intake:
    """A TrialIntake storing through a CaseWriter, as the node has them; ``take`` and ``send`` give the events
    of what they stored too, once it is committed."""

    def __init__(self, store, limits=SizeLimits(), assembler=None, **kw):
        self.writer = CaseWriter(store, notify=lambda: None)
        self.intake = TrialIntake(PartValidator(AffordanceNetwork.load(CONFIG), limits),
                                  assembler or TrialAssembler(trial_timeout=5.0, remember_completed=0),
                                  self.writer, expire_period=1.0, **kw)
        self.assembler = self.intake.assembler

    def take(self, *args, **kw):
        return self.intake.take(*args, **kw) + committed_events(self.intake)


@pytest.fixture
def intake_for(store):
    made = []

    def make(store, limits=SizeLimits(), **kw):
        made.append(Intake(store, limits, **kw))
        return made[-1]
    yield make
    for intake in made:
        intake.writer.close()


def send(intake, trial_id, stamp=1000.0, now=1000.0, label="tap", obj=OBJECT, eff=EFFECT):
    return (intake.take("action", trial_id, stamp, label, now) + intake.take("object", trial_id, stamp, obj, now)
            + intake.take("effect", trial_id, stamp, eff, now))


def statuses(events):
    return [e.status for e in events if e.status is not None]


def test_a_rejected_part_stamped_far_ahead_does_not_move_data_time(store, intake_for):
    intake = intake_for(store)
    intake.take("action", "t1", 1000.0, "tap", now=1000.0)
    bad = intake.take("action", "bad", 1000.0 + 1e6, "push", now=1000.0)  # unknown label, far future
    assert [e.counter for e in bad] == ["received_action", "rejected_parts"]
    assert intake.assembler.data_time == 1000.0
    events = intake.take("object", "t1", 1001.0, OBJECT, now=1001.0) + intake.take("effect", "t1", 1001.0, EFFECT,
                                                                                      now=1001.0)
    assert "stored" in [e.counter for e in events] and store.count() == 1


def test_stamps_too_far_ahead_of_the_clock_are_not_taken_counted_and_answered_retry(store, intake_for):
    intake = intake_for(store, max_stamp_skew=3600.0)
    events = intake.take("action", "f", 1000.0 + 3601.0, "tap", now=1000.0)
    # the clock may be the learner's fault (use_sim_time and another /clock): not the trial's, so not rejected
    (ahead,) = [e for e in events if e.counter == "clock_ahead_parts"]
    assert "ahead of the node's clock" in ahead.message and "send it again later" in ahead.status[2]
    assert ahead.status[:2] == ("f", RETRY) and not any(e.counter == "rejected_parts" for e in events)
    assert intake.assembler.data_time is None
    assert statuses(send(intake, "ok", stamp=1000.0 + 3599.0)) == [("ok", STORED, "")]
    # a clock that has not started (use_sim_time before /clock): not judged
    assert statuses(send(intake_for(store, max_stamp_skew=1.0), "sim", stamp=5e9, now=0.0)) == [("sim", STORED, "")]


def test_a_resent_trial_is_confirmed_and_a_conflicting_one_is_a_duplicate(store, intake_for):
    intake = intake_for(store)
    assert statuses(send(intake, "a")) == [("a", STORED, "")]
    again = send(intake, "a")
    assert [e.counter for e in again if not e.counter.startswith("received")] == ["resent_parts"] * 3
    assert statuses(again) == [("a", STORED, "already stored")]  # once all three parts came again as stored
    assert all(not e.message for e in again)  # not an error: nothing logged
    other = send(intake, "a", eff=(EFFECT[0], [1.0, 5.0, 0.0, 5.0]))
    assert [s[1] for s in statuses(other)] == [DUPLICATE]  # never 'stored' before its effect part differs
    then = send(intake, "a")  # once a conflict is seen, every part of that id is a duplicate
    assert [s[1] for s in statuses(then)] == [DUPLICATE] * 3
    assert store.count() == 1 and store.record_of("a").effects["obj_vel"] == 10.0


def test_a_conflict_names_the_part_that_differs_in_the_answers_and_the_log(store, intake_for):
    intake = intake_for(store)
    assert statuses(send(intake, "b")) == [("b", STORED, "")]
    other = send(intake, "b", obj=(OBJECT[0], [1.0, 0.0, 10.0]))  # the action part comes first, as stored
    conflict = "a trial with this trial_id is stored already, with another 'object' part; kept the stored one"
    assert statuses(other) == [("b", DUPLICATE, conflict), ("b", DUPLICATE, conflict)]
    warnings = [e.message for e in other if e.message]
    assert [e.counter for e in other if e.message] == ["duplicate_trials"] * 2
    assert warnings[0].startswith("ignored the 'object' part of trial 'b': ") and "another 'object' part" in warnings[0]
    # the effect part is as stored: the log says so, and names the part that differs
    assert warnings[1].startswith("ignored the 'effect' part of trial 'b', the same as stored: ")
    assert "another 'object' part" in warnings[1]
    both = send(intake, "b", label="grasp")  # what differs adds up
    assert {s[2] for s in statuses(both)} == {"a trial with this trial_id is stored already, with other 'object' "
                                              "and 'action' parts; kept the stored one"}


def test_a_part_that_differs_from_the_trial_being_stored_is_a_duplicate_not_a_re_send(store, intake_for):
    intake = intake_for(store)
    raw = intake.intake  # without waiting for the commits: the trial stays being stored until they are taken
    for kind, fields in (("action", "tap"), ("object", OBJECT), ("effect", EFFECT)):
        raw.take(kind, "s", 1000.0, fields, 1000.0)
    assert raw.storing == 1
    same = raw.take("effect", "s", 1000.0, EFFECT, 1000.0)  # a re-send: the commit answers it
    assert [e.counter for e in same] == ["received_effect", "resent_parts"] and statuses(same) == []
    other = raw.take("action", "s", 1000.0, "grasp", 1000.0)
    assert [e.counter for e in other] == ["received_action", "duplicate_parts"]
    conflict = "a trial with this trial_id is stored already, with another 'action' part; kept the stored one"
    assert statuses(other) == [("s", DUPLICATE, conflict)]
    assert other[1].level == "warning" and other[1].message.startswith("ignored the 'action' part of trial 's': ")
    assert "being stored, with another 'action' part" in other[1].message
    then = raw.take("object", "s", 1000.0, OBJECT, 1000.0)  # once a conflict is seen, every part is a duplicate
    assert statuses(then) == [("s", DUPLICATE, conflict)]
    assert statuses(committed_events(raw)) == [("s", STORED, "")]  # the first content is stored
    assert store.count() == 1 and store.record_of("s").action == "tap"
    assert statuses(raw.take("action", "s", 1000.0, "tap", 1000.0)) == [("s", DUPLICATE, conflict)]


class FailingOnce(CaseStore):
    """A case store whose first commit fails with ``error``."""

    def __init__(self, path, error):
        super().__init__(path)
        self.error = error

    def insert_many(self, records):
        error, self.error = self.error, None
        if error is not None:
            raise error
        return super().insert_many(records)


def test_a_trial_that_could_not_be_stored_can_be_sent_again(tmp_path, intake_for):
    store = FailingOnce(tmp_path / "cases.db", sqlite3.IntegrityError("a bug"))
    intake = intake_for(store)
    first = send(intake, "x")
    assert [e.counter for e in first][-1] == "store_errors" and statuses(first) == []  # no answer: sent again
    assert statuses(send(intake, "x")) == [("x", STORED, "")] and store.count() == 1
    intake.writer.close()
    store.close()


def test_a_commit_that_fails_for_a_while_is_tried_again_and_answered_only_once_stored(tmp_path, intake_for):
    store = FailingOnce(tmp_path / "cases.db", sqlite3.OperationalError("database is locked"))
    intake = intake_for(store)
    assert statuses(send(intake, "y")) == [("y", STORED, "")] and store.count() == 1
    assert intake.writer.groups == 1
    intake.writer.close()
    store.close()


def record(trial_id, effects=EFFECT):
    return Trial(trial_id, "tap", dict(zip(*OBJECT)), dict(zip(*effects)), stamp=1.0, received=1.0).to_record("Action")


def test_trials_stored_by_another_program_are_answered_from_the_database(store, intake_for):
    intake = intake_for(store)
    store.insert(record("old"))  # stored long ago (or imported): not among the trials the intake remembers
    assert statuses(send(intake, "old")) == [("old", STORED, "already stored")]
    # stored by another program (`affordance-ros import`) while its parts were being paired: the writer finds it
    intake.take("action", "imp", 1000.0, "tap", 1000.0)
    intake.take("object", "imp", 1000.0, OBJECT, 1000.0)
    store.insert(record("imp"))
    assert statuses(intake.take("effect", "imp", 1000.0, EFFECT, 1000.0)) == [("imp", STORED, "already stored")]
    intake.take("action", "other", 1000.0, "tap", 1000.0)
    store.insert(record("other", effects=(EFFECT[0], [1.0, 5.0, 0.0, 5.0])))
    intake.take("object", "other", 1000.0, OBJECT, 1000.0)
    conflict = "a trial with this trial_id is stored already, with another 'effect' part; kept the stored one"
    assert statuses(intake.take("effect", "other", 1000.0, EFFECT, 1000.0)) == [("other", DUPLICATE, conflict)]
    assert store.count() == 3 and store.record_of("other").effects["obj_vel"] == 1.0


def test_size_limits_and_valid_ranges_at_the_door(store, intake_for):
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


def test_a_part_that_cannot_be_read_is_answered_rejected_unless_its_trial_is_stored(store, intake_for):
    """The learner answers a trial whose part it cannot read (its trial_id read from the bytes), so that the
    robot stops sending it; a damaged copy of a stored trial changes nothing, and a part without a readable id is
    only counted."""
    intake = intake_for(store)
    send(intake, "kept")
    events = intake.intake.unreadable("effect", "broken", "a sequence of 4294967280 elements in 60 bytes")
    assert [e.counter for e in events] == ["received_effect", "rejected_parts"]
    assert events[1].message == ("rejected the 'effect' part of trial 'broken': it cannot be read: a sequence of "
                                 "4294967280 elements in 60 bytes")
    assert statuses(events) == [("broken", REJECTED, "its 'effect' part cannot be read: a sequence of 4294967280 "
                                                     "elements in 60 bytes")]
    assert statuses(intake.intake.unreadable("object", "kept", "damaged")) == []
    assert statuses(intake.intake.unreadable("action", "", "damaged")) == []
    assert store.count() == 1
