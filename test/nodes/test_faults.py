"""Fault injection, the fast parts (the full runs: `affordance-ros-bench faults`): the learner killed
with SIGKILL mid-stream and restarted, stopped by signals, fed malformed messages; damaged files."""

import json
import signal
import sqlite3
import time
from dataclasses import replace

import pytest
from conftest import MONTESANO_CONFIG, exit_status, sampled_records, stored_count, stored_ids, wait_for
from ros_harness import start, stop

from affordance_ros.data.storage import CaseStore
from affordance_ros.msg import Action, Features, TrialStatus


def test_every_trial_is_stored_after_a_sigkill_of_the_learner_mid_stream_and_a_restart(tmp_path):
    db = tmp_path / "cases.db"
    n = 600
    learner_params = dict(database_path=db, model_path=tmp_path / "model.json", status_period=0.0)
    learner = start("learner_node", tmp_path, "learner", **learner_params)
    robot = start("simulated_robot", tmp_path, "robot", count=n, rate=2000.0, seed=3, trial_id_prefix="k",
                  resend_timeout=1.0)
    try:
        wait_for(lambda: stored_count(db) >= n // 4, timeout=60, what="a quarter of the trials stored")
        learner.kill()  # SIGKILL, mid-stream: trials in its reader queue are lost to it
        exit_status(learner, 10)
        at_kill = stored_count(db)
        assert at_kill < n, "the stream was over before the kill: nothing tested"
        assert robot.poll() is None, "the robot must not exit while trials are unconfirmed"
        time.sleep(0.5)
        learner = start("learner_node", tmp_path, "learner", **learner_params)
        assert exit_status(robot, 120) == 0
    finally:
        if robot.poll() is None:
            robot.kill()
        status = stop(learner)
    robot_log = (tmp_path / "robot.log").read_text()
    assert f"{n} trials confirmed stored, 0 rejected, 0 duplicate, 0 unconfirmed" in robot_log, robot_log[-2000:]
    assert stored_ids(db) == {f"k-{k:06d}" for k in range(n)}
    assert status == 0


def test_sigint_and_sigterm_stops_exit_0_and_store_what_was_delivered(tmp_path):
    db = tmp_path / "cases.db"
    for k, sig in enumerate([signal.SIGINT, signal.SIGTERM, signal.SIGINT]):
        learner = start("learner_node", tmp_path, f"learner{k}", database_path=db, model_path=tmp_path / "m.json",
                        status_period=0.0)
        robot = start("simulated_robot", tmp_path, f"robot{k}", count=300, rate=5000.0, seed=k,
                      trial_id_prefix=f"s{k}", confirm="false")
        before = stored_count(db)
        try:
            wait_for(lambda: stored_count(db) > before + 20, timeout=60, what="some trials stored")
            assert stop(learner, sig) == 0
        finally:
            robot.kill()
            robot.wait()
        log = (tmp_path / f"learner{k}.log").read_text()
        assert "Traceback" not in log and "cannot rollback" not in log, log[-3000:]
        assert "context is invalid" not in log, log[-3000:]
        stopping = next(line for line in log.splitlines() if "stopping; cases:" in line)
        stored_this_run = int(stopping.split("stopping; cases: ")[1].split(" ")[0])
        assert stored_count(db) - before == stored_this_run  # the counter is what the database holds



def test_a_robot_restarted_with_the_same_trial_ids_is_told_its_trials_are_duplicates_never_stored(tmp_path):
    """A robot that starts over with the ids of trials stored before (a fixed trial_id_prefix) and other readings:
    none of its trials is stored, and the learner must not tell it otherwise: a part that happens to be as stored
    (the same action label) is not answered 'stored' before the other parts are compared, or the robot would take
    trials never stored for stored ones."""
    db = tmp_path / "cases.db"
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    status_period=0.0)
    try:
        for run, seed in enumerate((1, 2)):
            robot = start("simulated_robot", tmp_path, f"robot{run}", count=100, rate=500.0, seed=seed,
                          trial_id_prefix="same")
            assert exit_status(robot, 120) == 0
        stored = CaseStore(db, read_only=True).records()
    finally:
        assert stop(learner) == 0
    first, second = ((tmp_path / f"robot{run}.log").read_text() for run in (0, 1))
    assert "trials; 100 trials confirmed stored, 0 rejected, 0 duplicate, 0 unconfirmed" in first, first[-2000:]
    assert "trials; 0 trials confirmed stored, 0 rejected, 100 duplicate, 0 unconfirmed" in second, second[-2000:]
    assert len(stored) == 100

@pytest.fixture
def statuses(ros):
    received = []
    ros.client_node.create_subscription(TrialStatus, "/affordance_learner/stored", received.append, 100)
    return received


def test_statuses_on_stored_and_idempotent_resends(ros, statuses):
    learner = ros.learner(trial_timeout=5.0)
    action, obj, eff = (ros.publisher(Action, "action"), ros.publisher(Features, "object_features"),
                        ros.publisher(Features, "effects"))
    wait_for(lambda: ros.client_node.count_publishers("/affordance_learner/stored") == 1, what="~/stored")

    def send(trial_id, label="tap", color=5.0):
        action.publish(Action(trial_id=trial_id, action=label))
        obj.publish(Features(trial_id=trial_id, names=["color", "shape"], values=[color, 0.0]))
        eff.publish(Features(trial_id=trial_id, names=["obj_vel"], values=[10.0]))

    send("a")
    wait_for(lambda: len(statuses) == 1, what="the status of 'a'")
    assert (statuses[0].trial_id, statuses[0].status) == ("a", TrialStatus.STORED)
    send("a")  # sent again, the same: confirmed once its three parts came, not an error
    wait_for(lambda: len(statuses) == 2, what="the confirmation of the re-sent trial")
    assert (statuses[1].trial_id, statuses[1].status) == ("a", TrialStatus.STORED)
    assert learner.counts["resent_parts"] == 3 and learner.counts["duplicate_trials"] == 0
    send("a", color=6.0)  # the same id, other readings: duplicate (its action part alone is not answered)
    wait_for(lambda: len(statuses) == 4, what="answers to the conflicting trial")
    assert [s.status for s in statuses[2:]] == [TrialStatus.DUPLICATE] * 2
    send("b", label="push")  # unknown action: rejected, with the reason
    wait_for(lambda: any(s.status == TrialStatus.REJECTED for s in statuses), what="a rejection")
    rejected = next(s for s in statuses if s.status == TrialStatus.REJECTED)
    assert rejected.trial_id == "b" and "unknown action 'push'" in rejected.reason
    assert learner.configured.manager.store.count() == 1 and learner.counts["store_errors"] == 0


def test_a_part_that_differs_while_its_trial_is_being_stored_is_answered_duplicate(ros, statuses, tmp_path):
    learner = ros.learner(trial_timeout=5.0)
    action, obj, eff = (ros.publisher(Action, "action"), ros.publisher(Features, "object_features"),
                        ros.publisher(Features, "effects"))
    wait_for(lambda: ros.client_node.count_publishers("/affordance_learner/stored") == 1, what="~/stored")
    other = sqlite3.connect(tmp_path / "cases.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another program holds the database: the trial stays being stored
    try:
        action.publish(Action(trial_id="c", action="tap"))
        obj.publish(Features(trial_id="c", names=["color", "shape"], values=[5.0, 0.0]))
        eff.publish(Features(trial_id="c", names=["obj_vel"], values=[10.0]))
        wait_for(lambda: learner.configured.trials.intake.storing == 1, what="the trial being stored")
        action.publish(Action(trial_id="c", action="grasp"))  # the same id, another action, at once
        wait_for(lambda: statuses, what="the answer to the other action part")
    finally:
        other.execute("COMMIT")
        other.close()
    wait_for(lambda: len(statuses) == 2, what="the trial's confirmation")
    conflict = "a trial with this trial_id is stored already, with another 'action' part; kept the stored one"
    assert [(s.trial_id, s.status, s.reason) for s in statuses] == [("c", TrialStatus.DUPLICATE, conflict),
                                                                    ("c", TrialStatus.STORED, "")]
    assert learner.counts["duplicate_parts"] == 1 and learner.counts["resent_parts"] == 0
    assert learner.configured.manager.store.record_of("c").action == "tap"


def _rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


ROUNDS = 8


def test_malformed_messages_are_refused_with_bounded_memory_and_log(ros, tmp_path):
    db = tmp_path / "cases.db"
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    status_period=0.0)
    try:
        action, obj = ros.publisher(Action, "action"), ros.publisher(Features, "object_features")
        effects = ros.publisher(Features, "effects")
        huge = "x" * 1_000_000
        good = sampled_records(1)[0]

        def flood(round_):
            for k in range(30):
                action.publish(Action(trial_id=f"{huge}{round_}-{k}", action="tap"))         # 1 MB trial_id
                obj.publish(Features(trial_id=f"n{k}", names=[huge], values=[1.0]))           # 1 MB sensor name
                effects.publish(Features(trial_id=f"l{k}", names=["obj_vel"] * 5000, values=[1.0] * 5000))
                action.publish(Action(trial_id=f"ctl{k}\n[INFO] forged \x1b[31mred", action="tap"))
                obj.publish(Features(trial_id=f"r{k}", names=["color"], values=[2e154]))     # implausible
                future = Action(trial_id=f"f{k}", action="tap")
                future.header.stamp.sec = int(time.time()) + 1_000_000                         # far future
                action.publish(future)
            trial_id = f"good{round_}"  # and a good trial still goes in
            action.publish(Action(trial_id=trial_id, action=good.action))
            for kind, pub in (("object", obj), ("effect", effects)):
                names = list(good.part(kind))
                pub.publish(Features(trial_id=trial_id, names=names, values=[good.part(kind)[s] for s in names]))
            wait_for(lambda: trial_id in stored_ids(db), timeout=60, what=f"the good trial of round {round_}")
            return _rss_kb(learner.pid) / 1024

        time.sleep(1.0)
        rss = [_rss_kb(learner.pid) / 1024] + [flood(r) for r in range(ROUNDS)]
        # 30 MB of long strings per round: nothing of them is kept, so memory levels off (DDS's payload
        # buffers and the allocator keep what the largest bursts needed) instead of growing with every round
        assert rss[-1] - rss[-3] < 0.5 * (rss[2] - rss[0]), rss
        assert rss[-1] - rss[0] < 250, rss
    finally:
        assert stop(learner) == 0
    log = (tmp_path / "learner.log").read_text()
    assert stored_ids(db) == {f"good{r}" for r in range(ROUNDS)}
    assert db.stat().st_size < 1_000_000
    assert len(log) < 1_000_000  # the long strings did not go into the log
    assert "\x1b" not in log and "\n[INFO] forged" not in log and "ctl0\\n[INFO] forged \\x1b[31mred" in log
    assert "outside its valid_range" in log and "ahead of the node's clock" in log
    assert "more than max_trial_id_length 256" in log and "more than max_list_length 1000" in log


def test_damaged_model_files_take_the_documented_path(ros, tmp_path):
    damaged = {
        "not_utf8": b"\xff\xfe{\"format\": 1}",
        "list_name": json.dumps({"format": "affordance_ros/model/1",
                                 "variables": [{"name": ["a"], "group": "action", "values": ["x"]}]}).encode(),
        "deep": b"[" * 200000 + b"]" * 200000,
    }
    for name, data in damaged.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        learner = ros.learner(model_path=str(path), database_path=str(tmp_path / f"{name}.db"))
        assert learner.configured.manager.current.model is None
        assert not ros.predict(query=["action"]).success
        ros.remove(learner)


def test_a_foreign_database_is_refused_untouched_by_the_node(tmp_path):
    foreign = tmp_path / "foreign.db"
    import sqlite3
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (text)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    learner = start("learner_node", tmp_path, "learner", database_path=foreign)
    assert exit_status(learner, 60) == 1
    assert foreign.read_bytes() == before
    assert "something else" in (tmp_path / "learner.log").read_text()


def test_learning_with_a_renamed_sensor_says_the_cases_were_skipped_and_why(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(30):
            store.add(record)
    doc = json.loads(MONTESANO_CONFIG.read_text())
    for v in doc["variables"]:
        if v.get("sensor") and v["sensor"]["name"] == "obj_vel":
            v["sensor"]["name"] = "object_velocity"
    config = tmp_path / "renamed.json"
    config.write_text(json.dumps(doc))
    ros.learner(config_path=str(config))
    answer = ros.learn()
    assert not answer.success
    assert "all 30 stored cases were skipped" in answer.message
    assert "30 with sensor ['obj_vel'] not in the configuration" in answer.message


def test_an_absurd_stored_reading_is_skipped_by_learning_and_named(ros, tmp_path):
    records = sampled_records(40)
    records[7] = replace(records[7], object_features={**records[7].object_features, "color": 2e154})
    with CaseStore(tmp_path / "cases.db") as store:
        for record in records:
            store.add(record)
    ros.learner()
    answer = ros.learn()
    assert answer.success, answer.message
    assert answer.num_cases == 39
    assert "skipped 1 stored cases" in answer.message and "'r00007'" in answer.message
