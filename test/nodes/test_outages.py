"""A robot through outages, on real nodes over DDS: the trials waiting are sent again as soon as the
learner is back, nothing is given up while it is silent, a trial is given up only when the learner took later
ones and not it, the robot's spool keeps what was not confirmed across a restart, a full spool stops the robot
(which says so) and loses nothing, and waiting for the learner does not poll the graph at the trial rate.
(The same over a lossy link between two network namespaces: test_lossy_link.py.)"""

import sqlite3
import time

import pytest
from conftest import sampled_records, stored_ids, wait_for

from affordance_ros.data.intake import RETRY
from affordance_ros.data.spool import TrialSpool
from affordance_ros.nodes.robot.trial_publisher import SpoolFull, TrialPublisher, trial_messages
from affordance_ros.nodes.robot.waiting_trials import WaitingTrials
from affordance_ros.nodes.simulation.simulated_robot import SimulatedRobot


def send(trials, records):
    for record in records:
        trials.publish(record.trial_id, record.action, record.object_features, record.effects)


def test_the_trials_waiting_are_sent_again_as_soon_as_a_learner_is_there_not_when_their_back_off_ends(ros):
    trials = TrialPublisher(ros.client_node, resend_timeout=5.0, max_resends=1)
    records = sampled_records(50, prefix="o")
    first_sent = time.monotonic()
    send(trials, records)  # nobody subscribes: every part is lost
    # sent again once after 5 s (the learner silent: not counted); the next time 10 s after that
    wait_for(lambda: trials.resent >= 50, timeout=10.0, what="the first re-send of every trial")
    assert trials.resent == 50 and trials.pending == 50 and not trials.given_up
    ros.learner()
    # confirmed before their back-off ended (15 s after the first send): sent again when the learner came
    wait_for(lambda: trials.pending == 0, timeout=first_sent + 14.0 - time.monotonic(),
             what="every trial confirmed before its back-off ended")
    assert trials.confirmed == 50 and not trials.given_up and trials.resent == 100
    trials.destroy()


def test_trials_given_up_are_listed_in_the_order_they_were_first_sent_whichever_was_given_up_first():
    """Re-sends reorder the book (latest send last), so trials are given up out of the order they were sent; the
    report (replay's error line, the log line) lists them as the robot or the bag sent them, not in the order
    they were given up (a replay's error would name id3 before id0)."""
    waiting = WaitingTrials(resend_timeout=1.0, max_resends=1, limit=100)
    never_queued = lambda trial_id: False  # noqa: E731
    for k in range(4):
        waiting.add(f"id{k}", [], now=0.0)
        waiting.answered(f"id{k}", RETRY, "its clock")
    due, given_up = waiting.due(1.5, silent=False, queued=never_queued)
    assert len(due) == 4 and given_up == []  # each sent again once (counted: it answered retry)
    waiting.sent_again("id2", 1.6, attempts=1)  # the book: id0, id1, id3, id2
    for k in (3, 2):
        waiting.answered(f"id{k}", RETRY, "its clock")
    assert waiting.due(4.0, silent=False, queued=never_queued) == ([], ["id2", "id3"])
    for k in (1, 0):
        waiting.answered(f"id{k}", RETRY, "its clock")
    assert waiting.due(6.0, silent=False, queued=never_queued) == ([], ["id0", "id1"])
    assert list(waiting.given_up) == ["id0", "id1", "id2", "id3"] and not waiting.trials


def test_a_trial_the_learner_never_takes_while_it_takes_later_ones_is_given_up(ros):
    ros.learner(trial_timeout=0.5)
    trials = TrialPublisher(ros.client_node, resend_timeout=0.3, max_resends=2)
    wait_for(lambda: trials.learner_present() and all(p.get_subscription_count() for p in trials.publishers.values()),
             what="the learner")
    half = trial_messages(trials.publishers, "half", "tap", {"color": 1.0}, {"obj_vel": 1.0})[:2]  # no effects
    trials.send("half", half)  # the learner drops it incomplete, every time: it never answers it
    good = iter(sampled_records(1000, prefix="g"))
    deadline = time.monotonic() + 30
    while "half" not in trials.given_up and time.monotonic() < deadline:
        send(trials, [next(good)])
        time.sleep(0.05)
    assert trials.given_up == {"half": "not confirmed after 2 re-sends while the learner confirmed trials sent "
                                       "after it"}
    wait_for(lambda: trials.pending == 0, what="the good trials confirmed")
    assert trials.confirmed > 10 and len(trials.given_up) == 1
    trials.destroy()


def test_a_robot_restarted_before_the_learner_confirmed_sends_what_its_spool_kept(ros, tmp_path):
    spool = tmp_path / "robot.spool"
    records = sampled_records(30, prefix="s")
    first = TrialPublisher(ros.client_node, resend_timeout=1.0, spool_path=spool)
    send(first, records)  # no learner (an outage)
    assert "30 unconfirmed (kept in the spool" in first.summary()
    first.destroy()  # the robot stops
    second = TrialPublisher(ros.client_node, resend_timeout=1.0, spool_path=spool)
    assert second.unconfirmed == [r.trial_id for r in records]
    ros.learner()
    wait_for(lambda: second.pending == 0, timeout=30, what="the spooled trials confirmed")
    assert second.confirmed == 30 and {r.trial_id for r in records} <= stored_ids(ros.tmp_path / "cases.db")
    second.destroy()
    kept = TrialSpool(spool)
    assert kept.load() == []  # each removed once confirmed
    kept.close()


def test_a_publisher_whose_spool_is_full_refuses_a_new_trial_and_keeps_those_it_has(ros, tmp_path):
    trials = TrialPublisher(ros.client_node, spool_path=tmp_path / "robot.spool", spool_limit=3)
    records = sampled_records(4, prefix="f")
    send(trials, records[:3])
    assert trials.full
    with pytest.raises(SpoolFull, match=r"3 trials wait for the learner's answer \(spool_limit 3\): not taking "
                                        "trial 'f00003'"):
        send(trials, records[3:])
    assert trials.unconfirmed == ["f00000", "f00001", "f00002"]
    trials.destroy()


def test_a_simulated_robot_whose_spool_is_full_says_so_waits_and_loses_nothing(ros, tmp_path, capfd):
    ros.learner()
    db = tmp_path / "cases.db"
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another program holds the database: nothing is confirmed meanwhile
    try:
        robot = ros.robot(count=40, rate=200.0, seed=1, resend_timeout=1.0, spool_limit=10,
                          spool_path=str(tmp_path / "robot.spool"), trial_id_prefix="full")
        wait_for(lambda: robot.published == 10, what="the spool filled")
        time.sleep(1.5)
        assert robot.published == 10 and robot.trials.pending == 10
    finally:
        other.execute("ROLLBACK")
        other.close()
    ros.wait_for_robot(robot)
    assert robot.published == 40 and robot.trials.confirmed == 40 and not robot.trials.given_up
    assert {f"full-{k:06d}" for k in range(40)} <= stored_ids(db)
    log = capfd.readouterr().err
    assert "10 trials wait for the learner's confirmation (spool_limit): not taking new trials" in log
    assert "taking new trials again" in log


def test_a_robot_waiting_for_the_learner_looks_at_the_graph_on_matches_and_once_a_second(ros, monkeypatch):
    looks = []
    original = SimulatedRobot.missing_subscribers
    monkeypatch.setattr(SimulatedRobot, "missing_subscribers", lambda self: looks.append(1) or original(self))
    robot = ros.robot(count=10, rate=1000.0, wait_for="nobody_here")  # (looked at the graph 1000 times a second)
    time.sleep(3.0)
    assert robot.published == 0 and len(looks) <= 6, len(looks)
