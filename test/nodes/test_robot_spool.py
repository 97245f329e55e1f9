"""The robot's spool at its edges, with the robot's executable over DDS and the faults made for real: a
spool removed while the robot runs is written again at its path, and a robot killed then loses nothing; a full disk
(a small tmpfs) refuses new trials as a full spool does and the robot lives on; a spooled trial that cannot be sent
is set aside in one line; a part whose bytes the learner cannot read is answered rejected."""

import os
import re
import signal
import sqlite3
import subprocess
import time

import pytest
from conftest import exit_status, sampled_records, stored_ids, wait_for
from rclpy.serialization import serialize_message
from ros_harness import start, stop

from affordance_ros.data.spool import SpooledPart, TrialSpool
from affordance_ros.data.storage import CaseStoreError
from affordance_ros.msg import Action, Features
from affordance_ros.nodes.robot.trial_publisher import TrialPublisher, trial_messages

pytestmark = pytest.mark.ros


def spooled(path) -> set:
    """The trial ids a spool holds, read beside the robot that has it open."""
    if not path.exists():
        return set()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {row[0] for row in conn.execute("SELECT trial_id FROM trials")}


def stored(db) -> set:
    """The trial ids stored in ``db`` so far (none while the learner is still making it)."""
    try:
        return stored_ids(db)
    except CaseStoreError:
        return set()


def numbered(ids, prefix: str) -> list[int]:
    return sorted(int(t.removeprefix(f"{prefix}-")) for t in ids if t.startswith(f"{prefix}-"))


def learner_process(tmp_path, name="learner"):
    return start("learner_node", tmp_path, name, database_path=tmp_path / "cases.db",
                 model_path=tmp_path / "model.json", status_period=0.0)


def log_lines(process, text: str) -> list[str]:
    return [line for line in process.log.read_text().splitlines() if text in line]


def test_a_spool_removed_while_the_robot_runs_is_written_again_and_a_robot_killed_then_loses_nothing(tmp_path):
    """A robot that wrote on into the removed file, said nothing, and once killed left nothing at the path would lose
    every trial of the outage."""
    db, spool = tmp_path / "cases.db", tmp_path / "robot.spool"
    learner = learner_process(tmp_path)
    robot = start("simulated_robot", tmp_path, "robot", count=0, rate=20.0, seed=1, spool_path=spool,
                  resend_timeout=1.0, trial_id_prefix="rm")
    try:
        wait_for(lambda: len(stored(db)) >= 20, timeout=120, what="20 trials stored")
        assert stop(learner) == 0  # an outage: what the robot takes now waits in its spool
        wait_for(lambda: len(spooled(spool)) >= 10, what="trials waiting in the spool")
        for name in ("robot.spool", "robot.spool-wal", "robot.spool-shm"):
            (tmp_path / name).unlink()
        wait_for(lambda: log_lines(robot, "while the robot ran"), timeout=30, what="the robot to see its spool went")
        told = log_lines(robot, "while the robot ran")
        held = int(re.search(r"holding the (\d+) trials waiting", told[0]).group(1))
        assert "[WARN]" in told[0] and f"the spool '{spool}' was removed or moved away while the robot ran: wrote a " \
            "new one there" in told[0]
        wait_for(lambda: len(spooled(spool)) >= held + 40, timeout=30, what="40 more trials in the new spool")
    finally:
        robot.kill()  # (SIGKILL: no close, no last sync)
        robot.wait()
    assert len(told) == 1 and "Traceback" not in robot.log.read_text()
    kept, confirmed = spooled(spool), stored_ids(db)
    numbers = numbered(kept | confirmed, "rm")
    assert numbers == list(range(numbers[-1] + 1)) and len(kept) >= held + 40  # none lost, before or after the rm

    learner = learner_process(tmp_path, "learner_again")
    again = start("simulated_robot", tmp_path, "robot_again", count=1, rate=20.0, spool_path=spool,
                  resend_timeout=1.0, trial_id_prefix="again")
    try:
        assert exit_status(again, 120) == 0  # (it ends once the learner confirmed every trial it has)
    finally:
        assert stop(learner) == 0
    assert kept <= stored_ids(db) and "trials of an earlier run in the spool" in again.log.read_text()
    assert spooled(spool) == set()


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 512 kB mounted at tmp_path / "disk" (root only); unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip(f"filling a disk needs a small tmpfs, and mounting one needs root (uid {os.geteuid()} here)")
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_a_full_disk_refuses_new_trials_as_a_full_spool_does_and_the_robot_lives_on(tmp_path, small_disk):
    """A full disk must not end the robot with an uncaught SpoolError ("database or disk is full") in its timer."""
    db, spool = tmp_path / "cases.db", small_disk / "robot.spool"
    learner = learner_process(tmp_path)
    robot = start("simulated_robot", tmp_path, "robot", count=400, rate=50.0, seed=2, spool_path=spool,
                  resend_timeout=1.0, trial_id_prefix="full")
    try:
        wait_for(lambda: stored(db), timeout=120, what="a trial stored")
        assert stop(learner) == 0
        wait_for(lambda: log_lines(robot, "until it has room"), timeout=60, what="the disk to fill")
        refused = log_lines(robot, "until it has room")
        assert len(refused) == 1 and "[WARN]" in refused[0] and "database or disk is full: not taking new trials " \
            "until it has room (the trials waiting are kept)" in refused[0]
        before = spooled(spool)
        time.sleep(3.0)  # (a few syncs of the spool on the full disk)
        assert spooled(spool) <= before  # no new trial taken (none is lost: below)
        assert robot.poll() is None and "Traceback" not in robot.log.read_text()
        subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)  # room again
        wait_for(lambda: log_lines(robot, "has room again: taking new trials"), timeout=30, what="room seen")
        wait_for(lambda: len(spooled(spool) - before) >= 20, timeout=30, what="new trials taken")
        learner = learner_process(tmp_path, "learner_again")
        assert exit_status(robot, 180) == 0  # (it ends once its 400 trials are confirmed)
    finally:
        stop(robot, sig=signal.SIGKILL)
        stop(learner)
    assert "Traceback" not in robot.log.read_text()
    summary = log_lines(robot, "published 400 trials")
    assert summary and re.search(r"400 trials confirmed stored, .*, \d+ spool writes failed", summary[0]), summary
    assert numbered(stored_ids(db), "full") == list(range(400))


def spooled_trial(trial_id: str, action_topic="/action", effect_type="Features", effect_data=None, named=None):
    """The parts of a trial of the montesano world as a robot's spool keeps them (its messages serialized), damaged
    as asked: its action on ``action_topic``, its effects of ``effect_type`` or with ``effect_data``, every message
    naming the trial ``named``."""
    record = sampled_records(1, prefix=trial_id)[0]
    named = named or trial_id
    parts = [SpooledPart(action_topic, "Action", serialize_message(Action(trial_id=named, action=record.action)))]
    for topic, readings in (("/object_features", record.object_features), ("/effects", record.effects)):
        msg = Features(trial_id=named, names=list(readings), values=list(readings.values()))
        parts.append(SpooledPart(topic, "Features", serialize_message(msg)))
    parts[2] = SpooledPart("/effects", effect_type, parts[2].data if effect_data is None else effect_data)
    return parts


def test_spooled_trials_that_cannot_be_sent_are_set_aside_in_one_line_and_the_others_delivered(ros, tmp_path):
    """A spooled trial on an invalid topic name must not stop the robot at start (InvalidTopicNameException), one of
    an unknown type not be skipped without a word, and damaged bytes not be sent for ever: each is set aside, said."""
    spool = tmp_path / "robot.spool"
    kept = TrialSpool(spool)
    for trial_id, parts in [("good-0", spooled_trial("good-0")), ("bad-topic", spooled_trial("bad-topic", "/bad name")),
                            ("good-1", spooled_trial("good-1")), ("bad-type", spooled_trial("bad-type",
                                                                                             effect_type="Pose")),
                            ("damaged", spooled_trial("damaged", effect_data=os.urandom(90))),
                            ("other-id", spooled_trial("other-id", named="someone-else")),
                            ("good-2", spooled_trial("good-2"))]:
        kept.add(trial_id, parts)
    kept.close()
    ros.learner()
    robot = start("simulated_robot", tmp_path, "robot", count=1, spool_path=spool, resend_timeout=1.0,
                  trial_id_prefix="new")
    assert exit_status(robot, 120) == 0
    log = robot.log.read_text()
    set_aside = log_lines(robot, "that cannot be sent")
    assert len(set_aside) == 1 and "[WARN]" in set_aside[0] and "Traceback" not in log
    assert (f"set aside 4 trials of the spool {spool} that cannot be sent (kept in its table set_aside): trial "
            "'bad-topic': its part 0's topic '/bad name' is not a topic name: topic name must not contain characters "
            "other than alphanumerics, '_', or '/' (and 3 more)") in set_aside[0]
    assert "3 trials of an earlier run in the spool" in log and "4 set aside in the spool" in log
    assert {"good-0", "good-1", "good-2", "new-000000"} <= stored_ids(tmp_path / "cases.db")
    with sqlite3.connect(spool) as conn:
        assert conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 0
        reasons = dict(conn.execute("SELECT DISTINCT trial_id, reason FROM set_aside").fetchall())
    assert reasons["bad-type"] == "its part 2 has type 'Pose', not one of ['Action', 'Features']"
    assert reasons["damaged"].startswith("its part 2 (Features on /effects) cannot be read: ")
    assert reasons["other-id"] == "its part 0 (Action on /action) names trial 'someone-else'"
    assert set(reasons) == {"bad-topic", "bad-type", "damaged", "other-id"}


def test_a_part_the_learner_cannot_read_is_answered_rejected_and_the_robot_stops_sending_it(ros):
    """A trial the learner cannot read is answered rejected: the robot must not send it again for ever."""
    learner = ros.learner()
    trials = TrialPublisher(ros.client_node, resend_timeout=0.5)
    wait_for(lambda: trials.learner_present() and all(p.get_subscription_count() for p in trials.publishers.values()),
             what="the learner")
    good, damaged = sampled_records(2, prefix="wire")
    messages = trial_messages(trials.publishers, damaged.trial_id, damaged.action, damaged.object_features,
                              damaged.effects)
    publisher, effect = messages[2]
    data = bytearray(serialize_message(effect))
    names_at = data.index(damaged.trial_id.encode() + b"\x00") + len(damaged.trial_id) + 1
    names_at += -names_at % 4
    data[names_at:names_at + 4] = (0xFFFFFFF0).to_bytes(4, "little")  # a names list longer than the message
    trials.send(damaged.trial_id, [*messages[:2], (publisher, bytes(data))])
    trials.publish(good.trial_id, good.action, good.object_features, good.effects)
    wait_for(lambda: trials.pending == 0, timeout=30, what="both trials answered")
    assert trials.confirmed == 1 and list(trials.rejected) == [damaged.trial_id]
    assert trials.rejected[damaged.trial_id].startswith("its 'effect' part cannot be read: ")
    assert learner.counts["rejected_parts"] == 1 and learner.counts["stored"] == 1
    assert not trials.given_up
    trials.destroy()
