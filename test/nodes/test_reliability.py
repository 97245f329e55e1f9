"""Reliability at the edges, on real nodes over DDS with faults injected for real: the database
file removed while trials stream, lifecycle transitions during a learn, the node killed while its worker
learns, a remote clock change, floods, a held database lock, ids the middleware mangles, a second learner
on one database. In every case: nothing confirmed is lost, no crash, no hang, the truth on /diagnostics."""

import json
import os
import queue
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
import rclpy
from conftest import exit_status, sampled_records, stored_count, stored_ids, wait_for, write_config
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from ros_harness import LIB, Listener, Waiter, start, stop
from rosgraph_msgs.msg import Clock

from affordance_ros.action import Learn as LearnAction
from affordance_ros.data.pairing import INTERFACE_MAX_LIST_LENGTH
from affordance_ros.data.storage import CaseStore
from affordance_ros.msg import Action, TrialStatus
from affordance_ros.nodes.learner.learn_endpoints import STOP_GRACE
from affordance_ros.nodes.qos import reply_qos, trial_qos
from affordance_ros.nodes.robot.trial_publisher import TrialPublisher
from affordance_ros.srv import Learn, Predict
from affordance_ros_bench.edges import descendants, running

LEARNER = "/affordance_learner"
NAME = "affordance_learner: learner"
SLOW_MCMC = dict(mcmc_samples=2_000_000, mcmc_burn_in=1000)  # a learn of several seconds on 200 cases


class Robot:
    """A robot in the test's process: a TrialPublisher on the client node, and every answer of the learner."""

    def __init__(self, ros, resend_timeout=1.0, **kw):
        self.node = ros.client_node
        self.trials = TrialPublisher(ros.client_node, resend_timeout=resend_timeout, **kw)
        self.answers = Listener(ros, TrialStatus, f"{LEARNER}/stored", trial_qos())
        wait_for(lambda: all(p.get_subscription_count() for p in self.trials.publishers.values()), timeout=60,
                 what="the learner's subscriptions")

    def send(self, records, pause=0.002):
        for record in records:
            self.trials.publish(record.trial_id, record.action, record.object_features, record.effects,
                                stamp=self.node.get_clock().now())
            time.sleep(pause)

    def confirmed(self) -> set:
        return {a.trial_id for a in self.answers.all() if a.status == TrialStatus.STORED}


def status_of(listener):
    """The newest status of the learner on /diagnostics, or None."""
    msg = listener.last()
    found = [s for s in msg.status if s.name == NAME] if msg else []
    return found[0] if found else None


def values_of(status):
    return {kv.key: kv.value for kv in status.values}


def seeded(tmp_path, n=200, name="cases.db"):
    with CaseStore(tmp_path / name) as store:
        store.insert_many(sampled_records(n))
    return tmp_path / name


# ---------------------------------------------------------------- 1. the database file removed


def test_a_confirmed_trial_is_in_the_file_read_at_the_next_start_though_the_file_was_removed(ros, tmp_path):
    db = tmp_path / "db" / "cases.db"
    params = dict(database_path=db, model_path=tmp_path / "model.json", status_period=0.0, diagnostics_period=0.2)
    learner = start("learner_node", tmp_path, "learner", **params)
    diagnostics = Listener(ros, DiagnosticArray, "/diagnostics")
    robot = Robot(ros)
    records = sampled_records(600)
    try:
        robot.send(records[:200])
        wait_for(lambda: len(robot.confirmed()) >= 100, what="a hundred confirmations")
        db.unlink()  # `rm cases.db` while the robot streams: the node writes what it holds back at once
        robot.send(records[200:400])
        wait_for(lambda: len(robot.confirmed()) >= 400, timeout=60, what="the trials sent after the rm")
        shutil.rmtree(db.parent)  # and the folder: nowhere to write it back now
        robot.send(records[400:])
        wait_for(lambda: status_of(diagnostics) is not None and status_of(diagnostics).level == DiagnosticStatus.ERROR
                 and "not confirming" in status_of(diagnostics).message, what="ERROR: not confirming")
        assert "was removed" in status_of(diagnostics).message
        time.sleep(0.5)
        before = robot.confirmed()
        time.sleep(2.0)
        assert robot.confirmed() == before  # nothing is confirmed while it is not in a file a restart reads
        assert learner.poll() is None
        db.parent.mkdir()  # the folder is back: everything held is written there, then confirmed
        wait_for(lambda: robot.trials.pending == 0, timeout=60, what="every trial confirmed")
    finally:
        status = stop(learner)
    assert status == 0
    assert robot.confirmed() == {r.trial_id for r in records}
    assert stored_ids(db) == robot.confirmed()  # what the next start reads


# ---------------------------------------------------------------- 2. lifecycle transitions during a learn


def change(ros, transition: int) -> bool:
    return ros.call(ChangeState, f"{LEARNER}/change_state", transition=Transition(id=transition)).success


def test_deactivate_or_shutdown_during_a_learn_answers_the_caller_and_the_node_lives(ros, tmp_path):
    seeded(tmp_path)
    learner = ros.learner(config_path=str(write_config(tmp_path / "slow.json", **SLOW_MCMC)))
    service = ros.call_async(Learn, f"{LEARNER}/learn", structure="mcmc")
    wait_for(lambda: learner.learn.busy, what="the learn to start")
    assert change(ros, Transition.TRANSITION_DEACTIVATE)
    answer = service.result(30.0)
    assert not answer.success and "the node was deactivated" in answer.message
    assert learner.counts["learn_cancelled"] == 1

    assert change(ros, Transition.TRANSITION_ACTIVATE)
    actions = ros.action_client(LearnAction, f"{LEARNER}/learn")
    assert actions.wait_for_server(timeout_sec=20.0)
    goal = Waiter(actions.send_goal_async(LearnAction.Goal(structure="mcmc"))).result(20.0)
    assert goal.accepted
    wait_for(lambda: learner.learn.busy, what="the action's learn to start")
    assert change(ros, Transition.TRANSITION_DEACTIVATE)
    result = Waiter(goal.get_result_async()).result(30.0)
    assert result.status == 6 and not result.result.success  # GoalStatus.STATUS_ABORTED, with its result
    assert "the node was deactivated" in result.result.message
    refused = ros.learn()  # inactive: refused, saying why
    assert not refused.success and "the node is inactive" in refused.message

    assert change(ros, Transition.TRANSITION_ACTIVATE)
    service = ros.call_async(Learn, f"{LEARNER}/learn", structure="mcmc")
    wait_for(lambda: learner.learn.busy, what="a third learn to start")
    assert change(ros, Transition.TRANSITION_ACTIVE_SHUTDOWN)
    answer = service.result(30.0)
    assert not answer.success and "shutting down" in answer.message
    assert learner.lifecycle.label == "finalized" and learner.counts["learn_cancelled"] == 3


def test_random_transitions_while_trials_stream_and_learns_run_never_end_the_node(ros, tmp_path):
    db = seeded(tmp_path)
    config = write_config(tmp_path / "slow.json", mcmc_samples=200_000, mcmc_burn_in=1000)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    config_path=config, status_period=0.0)
    robot = start("simulated_robot", tmp_path, "robot", count=0, rate=200.0, trial_id_prefix="z", resend_timeout=0.5)
    rng, calls = random.Random(7), []
    activate, cleanup = Transition.TRANSITION_ACTIVATE, Transition.TRANSITION_CLEANUP
    moves = {"unconfigured": [Transition.TRANSITION_CONFIGURE], "inactive": [activate, activate, cleanup],
             "active": [Transition.TRANSITION_DEACTIVATE]}
    actions = ros.action_client(LearnAction, f"{LEARNER}/learn")
    try:
        wait_for(lambda: stored_count(db) > 220, timeout=60, what="the robot's trials")
        answered_at_last(lambda: ros.call(GetState, f"{LEARNER}/get_state", timeout=20.0))
        deadline = time.monotonic() + 25.0
        while time.monotonic() < deadline:
            label = ros.call(GetState, f"{LEARNER}/get_state").current_state.label
            if label == "active" and rng.random() < 0.5:
                calls.append(ros.call_async(Learn, f"{LEARNER}/learn", structure=rng.choice(["mcmc", "k2"])))
                if actions.server_is_ready():
                    calls.append(Waiter(actions.send_goal_async(LearnAction.Goal(structure="mcmc"))))
            time.sleep(rng.uniform(0.0, 1.0))
            assert change(ros, rng.choice(moves[label])), label
            assert learner.poll() is None, "the learner ended"
        while ros.call(GetState, f"{LEARNER}/get_state").current_state.label != "active":
            label = ros.call(GetState, f"{LEARNER}/get_state").current_state.label
            assert change(ros, moves[label][0])
        for call in calls:
            call.result(60.0)  # every learn call was answered (and every goal responded to)
        answer = ros.learn(structure="k2")
        assert answer.success, answer.message
        assert ros.predict(query=["action"], sensor_names=["obj_vel"], sensor_values=[9.0]).success
    finally:
        robot_status = stop(robot)
        status = stop(learner)
    assert status == 0 and robot_status == 0
    assert "Traceback" not in (tmp_path / "learner.log").read_text()


# ---------------------------------------------------------------- 3. the worker dies with its node

def answered_at_last(call, tries=3):
    """``call()``'s answer, asking again when none came: a request sent before the server matched the client is
    lost (wait_for_service may see the server of a node killed before, still in the graph, or one whose
    endpoints have not matched the client's yet)."""
    for _ in range(tries - 1):
        try:
            return call()
        except AssertionError:
            pass
    return call()


def learned_at_last(ros, tries=3):
    """~/learn of a learner that has just started, asked again when no answer came (``answered_at_last``)."""
    return answered_at_last(lambda: ros.learn(structure="k2", timeout=30.0), tries)


def test_the_learning_process_dies_with_its_node_and_never_writes_after_it(ros, tmp_path):
    db = seeded(tmp_path, 300)
    model = tmp_path / "model.json"
    config = write_config(tmp_path / "slow.json", mcmc_samples=5_000_000, mcmc_burn_in=1000)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=model, config_path=config,
                    status_period=0.0)
    try:
        slow = ros.call_async(Learn, f"{LEARNER}/learn", structure="mcmc")
        time.sleep(3.0)  # learning
        assert not slow.done()
        children = descendants(learner.pid)
        assert children, "no learning process"
        learner.kill()
        learner.wait()
        deadline = time.monotonic() + 5.0
        while any(running(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in children if running(pid)], "a process of the node outlived it"
        assert not model.exists()
        # a restarted node learns a model; nothing from before ever replaces it
        learner = start("learner_node", tmp_path, "again", database_path=db, model_path=model, status_period=0.0)
        wait_for(lambda: "active: taking trials" in (tmp_path / "again.log").read_text(), timeout=60,
                 what="the restarted learner")
        answer = learned_at_last(ros)
        assert answer.success, answer.message
        written = model.read_bytes()
        time.sleep(2.0)
        assert model.read_bytes() == written
    finally:
        stop(learner)


@pytest.mark.parametrize("sig, by", [(signal.SIGINT, "service"), (signal.SIGTERM, "action")])
def test_a_signal_during_a_learn_answers_its_caller_and_the_node_exits_0(ros, tmp_path, sig, by):
    db = seeded(tmp_path, 300)
    config = write_config(tmp_path / "slow.json", mcmc_samples=5_000_000, mcmc_burn_in=1000)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    config_path=config, status_period=0.0)
    try:
        if by == "service":
            answer = ros.call_async(Learn, f"{LEARNER}/learn", structure="mcmc")
        else:
            actions = ros.action_client(LearnAction, f"{LEARNER}/learn")
            assert actions.wait_for_server(timeout_sec=30.0)
            goal = Waiter(actions.send_goal_async(LearnAction.Goal(structure="mcmc"))).result(30.0)
            assert goal.accepted
            answer = Waiter(goal.get_result_async())
        time.sleep(3.0)  # learning (a learn of this config takes minutes)
        assert not answer.done()
        children = descendants(learner.pid)
        assert stop(learner, sig) == 0, (tmp_path / "learner.log").read_text()[-2000:]
        result = answer.result(10.0)
        if by == "action":
            assert result.status == 6  # GoalStatus.STATUS_ABORTED, with its result
            result = result.result
        assert not result.success and result.message.startswith("cancelled: the node is shutting down"), result
        assert "Traceback" not in (tmp_path / "learner.log").read_text()
        assert not [pid for pid in children if running(pid)], "a process of the node outlived it"
        assert not (tmp_path / "model.json").exists()
    finally:
        stop(learner)


@pytest.mark.parametrize("by", ["deactivate", "SIGTERM", "cancel"])
def test_a_learning_process_that_does_not_stop_when_cancelled_is_killed_and_its_caller_answered(ros, tmp_path, by):
    """A learn cancelled (the node deactivated or stopped, or the Learn action's goal cancelled) whose process does
    not stop at its next step (SIGSTOPped here; or in one long step): the node kills it STOP_GRACE seconds after
    the cancel and answers the caller: the deactivation or a SIGTERM must not hold the node's executor, the
    learn's caller and a cancelled goal are answered, and the next learn is not refused ("already running")."""
    db = seeded(tmp_path, 300)
    config = write_config(tmp_path / "slow.json", mcmc_samples=5_000_000, mcmc_burn_in=1000)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    config_path=config, status_period=0.0)
    workers = set()
    try:
        if by == "cancel":
            actions = ros.action_client(LearnAction, f"{LEARNER}/learn")
            assert actions.wait_for_server(timeout_sec=30.0)
            goal = Waiter(actions.send_goal_async(LearnAction.Goal(structure="mcmc"))).result(30.0)
            assert goal.accepted
            answer = Waiter(goal.get_result_async())
        else:
            answer = ros.call_async(Learn, f"{LEARNER}/learn", structure="mcmc")
        time.sleep(3.0)  # learning (a learn of this config takes minutes)
        assert not answer.done()
        workers = descendants(learner.pid)
        assert workers, "no learning process"
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        if by == "deactivate":
            assert change(ros, Transition.TRANSITION_DEACTIVATE)
        elif by == "SIGTERM":
            assert stop(learner, signal.SIGTERM) == 0
        else:
            assert Waiter(goal.cancel_goal_async()).result(10.0).return_code == 0  # accepted
        result = answer.result(STOP_GRACE + 15.0)
        took = time.monotonic() - t0
        if by == "cancel":
            assert result.status == 5  # GoalStatus.STATUS_CANCELED, with its result
            result = result.result
        reason = {"deactivate": "the node was deactivated; ", "SIGTERM": "the node is shutting down; "}.get(by, "")
        assert not result.success and result.message.startswith(f"cancelled: {reason}nothing was learned"), result
        assert took < STOP_GRACE + 10.0, took
        assert not [pid for pid in workers if running(pid)], "the stopped learning process lives on"
        log = (tmp_path / "learner.log").read_text()
        assert f"the learning process did not stop within {STOP_GRACE:g} s of the cancel" in log
        assert "Traceback" not in log
        if by != "SIGTERM":  # the node lives on, and its next learn has a learning process
            if by == "deactivate":
                assert change(ros, Transition.TRANSITION_ACTIVATE)
            answer = ros.learn(structure="k2")
            assert answer.success, answer.message
    finally:
        for pid in workers:
            if running(pid):
                os.kill(pid, signal.SIGCONT)
        assert stop(learner) == 0


# ---------------------------------------------------------------- 4. the clock


def set_parameter(ros, name, value: ParameterValue):
    return ros.call(SetParameters, f"{LEARNER}/set_parameters",
                    parameters=[ParameterMsg(name=name, value=value)]).results[0]


def test_use_sim_time_cannot_change_while_active(ros, tmp_path):
    learner = ros.learner()
    on = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=True)
    refused = set_parameter(ros, "use_sim_time", on)
    assert not refused.successful and "deactivate it first" in refused.reason
    assert learner.get_parameter("use_sim_time").value is False
    assert change(ros, Transition.TRANSITION_DEACTIVATE)
    assert set_parameter(ros, "use_sim_time", on).successful  # inactive: a deliberate change
    assert change(ros, Transition.TRANSITION_ACTIVATE)


def test_a_part_ahead_of_a_wrong_clock_is_answered_retry_and_stored_once_the_clock_is_right(ros, tmp_path):
    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db",
                    model_path=tmp_path / "model.json", use_sim_time="true", status_period=0.0)
    clock = ros.client_node.create_publisher(Clock, "/clock", 10)
    stop_clock, sim_time = threading.Event(), {"seconds": 1}

    def tick():  # /clock at 1 s, as a simulator that just started (or a stranger) would publish it
        while not stop_clock.is_set():
            msg = Clock()
            msg.clock.sec = sim_time["seconds"] or int(time.time())
            clock.publish(msg)
            time.sleep(0.05)
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        # a node that has no /clock yet takes every part (it cannot tell a stamp ahead of a time it does not
        # have): first the learner's /clock subscription matched, then ticks that it has taken
        wait_for(lambda: clock.get_subscription_count() >= 1, timeout=30, what="the learner's /clock subscription")
        time.sleep(0.5)
        robot = Robot(ros)
        records = sampled_records(5)
        robot.send(records)
        wait_for(lambda: len(robot.answers.all()) >= 5, what="the answers")
        assert {a.status for a in robot.answers.all()} == {TrialStatus.RETRY}  # not rejected: kept, sent again
        assert "ahead of the node's clock" in robot.answers.all()[0].reason
        assert robot.trials.pending == 5 and not robot.trials.rejected
        sim_time["seconds"] = 0  # the clock is right again
        wait_for(lambda: robot.trials.pending == 0, timeout=30, what="the trials stored once the clock is right")
        assert robot.trials.confirmed == 5
    finally:
        stop_clock.set()
        ticker.join()
        assert stop(learner) == 0
    assert stored_ids(tmp_path / "cases.db") == {r.trial_id for r in records}


# ---------------------------------------------------------------- 5. floods


def test_a_flood_of_parts_that_never_complete_is_bounded_and_a_good_trial_still_goes_in(ros, tmp_path):
    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db",
                    model_path=tmp_path / "model.json", status_period=0.0, diagnostics_period=0.2,
                    max_pending_trials=500)
    diagnostics = Listener(ros, DiagnosticArray, "/diagnostics")
    flood = ros.publisher(Action, "action")
    robot = Robot(ros)
    pending = []
    try:
        for ids in ("fresh", "stamped"):  # fresh trial ids, one constant stamp; then no ids, stamps 1 us apart
            stamp, started = time.time(), time.monotonic()
            for k in range(6000):  # 1000 parts a second for 6 s (bench faults floods at 2000/s for 60 s)
                msg = Action(trial_id=f"{ids}{k}" if ids == "fresh" else "", action="tap")
                part_stamp = stamp if ids == "fresh" else stamp + k * 1e-6
                msg.header.stamp.sec, msg.header.stamp.nanosec = int(part_stamp), int(part_stamp % 1 * 1e9)
                flood.publish(msg)
                if k % 200 == 0 and status_of(diagnostics) is not None:
                    pending.append(int(values_of(status_of(diagnostics))["trials pending"]))
                time.sleep(max(0.0, started + (k + 1) / 1000 - time.monotonic()))
            good = sampled_records(1, prefix=f"good-{ids}-")
            robot.send(good)
            wait_for(lambda: good[0].trial_id in robot.confirmed(), timeout=10.0, what="the good trial's answer")
    finally:
        assert stop(learner) == 0
    assert max(pending) <= 500, max(pending)
    log = (tmp_path / "learner.log").read_text().splitlines()
    assert len(log) < 60, len(log)  # one line per kind of warning and period, not one per dropped trial
    assert any("more like that" in line and "max_pending_trials 500" in line for line in log)
    assert any("DDS readers hold at most 100 samples each" in line for line in log)  # item 5: a short queue


def test_a_robot_on_its_own_topics_is_confirmed_at_once_while_a_keep_all_writer_floods_the_shared_ones(ros, tmp_path):
    # A reliable keep-all writer (TrialPublisher's QoS) floods the shared 'action' topic faster than the learner
    # takes it: the learner's reader there stays full, and the flooding writer holds what it refused. A good trial
    # on the shared topics would wait for its writer's heartbeat and re-send (seconds: docs/benchmarks/faults.md,
    # item 5); on its robot's own topics it has a reader of its own.
    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db",
                    model_path=tmp_path / "model.json", status_period=0.0, diagnostics_period=0.0, robots="good")
    robot = Robot(ros, resend_timeout=5.0, robot_name="good")  # TrialPublisher's default resend_timeout
    # Two flooding processes: one alone may keep the learner busy but not full, and the test is about a full
    # shared reader.
    code = "from affordance_ros_bench.edges import keep_all_flooder; keep_all_flooder(15.0)"
    flooders = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    lines = queue.Queue()
    for flooder in flooders:
        threading.Thread(target=_lines_into, args=(flooder.stdout, lines), daemon=True).start()
    try:
        first = lines.get(timeout=60.0)
        assert first == "held back", first  # the shared reader is full, a flooding writer holds more
        good = sampled_records(1, prefix="good-")
        sent = time.monotonic()
        robot.send(good)
        wait_for(lambda: good[0].trial_id in robot.confirmed(), timeout=15.0, what="the good trial's answer")
        waited = time.monotonic() - sent
        for flooder in flooders:
            flooder.wait(timeout=60)
        floods = []
        while len(floods) < len(flooders):
            line = lines.get(timeout=5.0)
            if line.startswith("{"):
                floods.append(json.loads(line))
    finally:
        for flooder in flooders:
            if flooder.poll() is None:
                flooder.kill()
                flooder.wait()
        assert stop(learner) == 0
    assert sum(flood["held_back"] for flood in floods) > 0
    print(f"good trial confirmed {waited:.2f} s after it was sent; floods {floods}")
    assert waited < 1.0, waited  # a second: the bound a good trial is promised under a flood


def _lines_into(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.strip())



# ---------------------------------------------------------------- 6. a held database lock


def test_a_held_database_lock_delays_storing_but_not_predictions_and_loses_nothing(ros, tmp_path):
    db = seeded(tmp_path, 100)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    status_period=0.0, diagnostics_period=0.2)
    diagnostics = Listener(ros, DiagnosticArray, "/diagnostics")
    try:
        assert ros.learn(timeout=120.0).success
        robot = Robot(ros)
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another program holds the database (a backup, a sqlite3 shell)
        held = time.monotonic()
        records = sampled_records(100, prefix="l")
        robot.send(records[:50])
        slowest = 0.0
        while time.monotonic() - held < 8.0:
            t0 = time.monotonic()
            answer = ros.predict(query=["action"], sensor_names=["obj_vel"], sensor_values=[9.0])
            slowest = max(slowest, time.monotonic() - t0)
            assert answer.success, answer.message
            time.sleep(0.05)
        assert slowest < 1.0, slowest  # answered while storing waits for the lock
        status = status_of(diagnostics)
        assert status.level == DiagnosticStatus.WARN and "locked by another program" in status.message
        assert not robot.confirmed()  # nothing is confirmed before it is committed
        other.execute("COMMIT")
        other.close()
        robot.send(records[50:])
        wait_for(lambda: robot.trials.pending == 0, timeout=30, what="every trial confirmed after the lock")
    finally:
        assert stop(learner) == 0
    assert {r.trial_id for r in records} <= stored_ids(db)


def test_a_second_signal_ends_the_wait_for_a_locked_database_the_trials_stay_unconfirmed(ros, tmp_path):
    db = seeded(tmp_path, 10)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    status_period=0.0, diagnostics_period=0.2)
    diagnostics = Listener(ros, DiagnosticArray, "/diagnostics")
    robot = Robot(ros)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another program holds the database: the trials wait to be stored
    try:
        records = sampled_records(5, prefix="w")
        robot.send(records)

        def waiting():
            status = status_of(diagnostics)
            return (status is not None and values_of(status)["trials waiting to be stored"] == "5"
                    and "locked by another program" in status.message)
        wait_for(waiting, what="five trials waiting for the lock")
        learner.send_signal(signal.SIGINT)  # the first waits for the trials to be stored (30 s at most) ...
        time.sleep(2.0)
        assert learner.poll() is None
        t0 = time.monotonic()
        status = stop(learner, timeout=60)  # ... a second ends the wait
        waited = time.monotonic() - t0
    finally:
        if learner.poll() is None:
            stop(learner, signal.SIGKILL)
        other.execute("ROLLBACK")
        other.close()
    assert status == 0 and waited < 5.0, (status, waited)
    log = (tmp_path / "learner.log").read_text()
    assert "5 trials could not be stored as the node stopped: not confirmed either" in log, log[-2000:]
    assert "Traceback" not in log
    assert not robot.confirmed() and not {r.trial_id for r in records} & stored_ids(db)  # the robot sends them again


# ---------------------------------------------------------------- 8. every ~/predict answered


def test_a_planner_gets_its_answer_though_others_were_answered_before_it_took_it(ros, tmp_path):
    """Fast DDS sends every reply of a service to every client of it, and each client keeps the last few until
    it takes them: a planner not scheduled for a moment while others call loses its answer once more replies
    to them than it keeps came first (rclpy's default keeps 10). A client made with ``reply_qos()``, as
    docs/interfaces.md tells planners, keeps its answer behind 50 replies to another planner."""
    db = seeded(tmp_path, 100)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    status_period=0.0)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        assert ros.learn(timeout=120.0).success
        node = rclpy.create_node("late_planner", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        planner = node.create_client(Predict, f"{LEARNER}/predict", qos_profile=reply_qos())
        assert planner.wait_for_service(timeout_sec=20.0)
        fields = dict(query=["action"], sensor_names=["obj_vel"], sensor_values=[9.0])
        warm_up = planner.call_async(Predict.Request(**fields))
        executor.spin_until_future_complete(warm_up, timeout_sec=20.0)
        assert warm_up.done()  # matched both ways
        late = planner.call_async(Predict.Request(**fields))  # sent, then not taken while another planner calls
        for _ in range(50):
            assert ros.predict(**fields).success
        executor.spin_until_future_complete(late, timeout_sec=5.0)
        assert late.done() and late.result().success
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
        assert stop(learner) == 0


def test_the_learner_waits_for_a_callers_reply_reader_longer_than_fast_dds_does(ros, tmp_path, monkeypatch):
    """An answer to a caller whose reply reader the learner has not matched yet is held up to SERVICE_ANSWER_WAIT
    (1 s) for the match, not Fast DDS's 100 ms, and only then dropped ("failed to send response (timeout):
    client will not receive response"): a planner that has just started is matched within that time on a
    loaded machine. Shown with a caller whose reader can never match (it asks for transient-local replies, which
    no service offers), three requests of it queued: once the first answer is dropped (the learner's warning), a
    good planner's request waits for the next two waits (with Fast DDS's default: about 0.2 s), then is answered."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from affordance_ros.nodes.qos import SERVICE_ANSWER_WAIT
    monkeypatch.setenv("PYTHONWARNINGS", "always::RuntimeWarning")  # every dropped answer is said, not the first
    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db",
                    model_path=tmp_path / "model.json", status_period=0.0)
    log, dropped = tmp_path / "learner.log", "client will not receive response"
    try:
        fields = dict(query=["action"], sensor_names=["obj_vel"], sensor_values=[9.0])
        ros.predict(**fields)  # the learner is up; the good planner (the test's client) is matched both ways
        before = log.read_text().count(dropped)
        unmatched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.TRANSIENT_LOCAL)
        caller = ros.client_node.create_client(Predict, f"{LEARNER}/predict", qos_profile=unmatched)
        # Three requests at once, again every 3 s until the learner has dropped an answer (its requests reach the
        # learner once its request writer is matched; its service_is_ready() never is: its reader does not match).
        deadline = time.monotonic() + 60
        while log.read_text().count(dropped) == before:
            assert time.monotonic() < deadline, "the learner never answered the caller it cannot match"
            for _ in range(3):
                caller.call_async(Predict.Request(**fields))
            sent = time.monotonic()
            while log.read_text().count(dropped) == before and time.monotonic() < sent + 3.0:
                time.sleep(0.01)
        sent = time.monotonic()
        answer = ros.client(Predict, f"{LEARNER}/predict").call_async(Predict.Request(**fields))
        wait_for(answer.done, timeout=60, what="the good planner's answer")
        assert time.monotonic() - sent > SERVICE_ANSWER_WAIT + 0.2
        assert log.read_text().count(dropped) >= before + 3
        assert f"services wait up to {SERVICE_ANSWER_WAIT:g} s" in log.read_text()
        ros.client_node.destroy_client(caller)
    finally:
        assert stop(learner) == 0


# ---------------------------------------------------------------- 9. ids the middleware mangles


def test_the_robot_refuses_ids_the_learner_would_answer_under_another_name(ros):
    trials = TrialPublisher(ros.client_node)
    for trial_id, why in (("nul\x00A", "NUL"), ("\udcff", "not valid Unicode"), ("x" * 257, "max_trial_id_length"),
                          ("", "non-empty")):
        with pytest.raises(ValueError, match=why):
            trials.publish(trial_id, "tap", {"color": 1.0}, {"obj_vel": 1.0})
    assert trials.pending == 0


def test_a_trial_nobody_answers_is_sent_again_less_and_less_often_and_never_given_up(ros):
    trials = TrialPublisher(ros.client_node, resend_timeout=1.0, max_resends=3)  # no learner answers: silent
    trials.publish("lost", "tap", {"color": 1.0}, {"obj_vel": 1.0})
    now, sent = time.monotonic(), []
    for step in range(200):  # 100 s of timer ticks
        sent.append(trials.resend_due(now + 0.5 * step))
    trials.destroy()  # its keep-all writers and its subscription leave the client node before the harness closes
    # each re-send waits twice as long as the one before, up to 8 s: more than 1, 2, 4, 8, 8 s (ticks every 0.5 s)
    assert [k for k, n in enumerate(sent) if n][:5] == [2, 7, 16, 33, 50] and trials.resent == sum(sent) == 13
    # an outage of any length gives up nothing: re-sends while the learner is silent do not count
    assert trials.pending == 1 and not trials.given_up and "0 given up" in trials.summary()


def test_trials_given_up_together_are_logged_in_one_line(ros, monkeypatch):
    """A learner that confirms a later trial and none of 300 before it (max_resends 0): they are given up at one
    tick, in one line, not a line per trial (a fast robot whose learner was killed would write thousands)."""
    warnings = []
    logger = type("Logger", (), {"warning": lambda self, text, **kw: warnings.append(text),
                                 "info": lambda self, text, **kw: None})()
    trials = TrialPublisher(ros.client_node, resend_timeout=1.0, max_resends=0)
    monkeypatch.setattr(ros.client_node, "get_logger", lambda: logger)
    for k in range(300):
        trials.publish(f"t{k:03d}", "tap", {"color": 1.0}, {"obj_vel": 1.0})
    trials.publish("later", "tap", {"color": 1.0}, {"obj_vel": 1.0})
    learner = ros.client_node.create_publisher(TrialStatus, f"{LEARNER}/stored", trial_qos())  # took 'later' only
    wait_for(lambda: learner.get_subscription_count(), what="the robot's answers subscription")
    learner.publish(TrialStatus(trial_id="later", status=TrialStatus.STORED))
    wait_for(lambda: trials.confirmed == 1, what="the answer")
    now = time.monotonic()
    for step in range(20):
        trials.resend_due(now + 0.5 * step)
    trials.destroy()
    assert len(trials.given_up) == 300 and trials.pending == 0
    gave_up = [w for w in warnings if w.startswith("gave up")]
    assert gave_up == ["gave up on 300 trials ('t000', 't001', 't002', 't003', 't004', ...): not confirmed after 0 "
                       "re-sends while the learner confirmed trials sent after it (the first; given_up has each "
                       "one's reason)"], warnings


def test_a_robot_whose_trials_are_all_rejected_logs_a_line_per_kind_and_period(ros, monkeypatch):
    """A robot with a sensor the learner does not know: the learner rejects every trial, and the robot's log says
    so once, then how many more, as the learner's own log does, not a line per trial."""
    warnings = []
    logger = type("Logger", (), {"warning": lambda self, text, **kw: warnings.append(text),
                                 "info": lambda self, text, **kw: None})()
    learner = ros.learner()
    trials = TrialPublisher(ros.client_node, resend_timeout=5.0)
    monkeypatch.setattr(ros.client_node, "get_logger", lambda: logger)
    wait_for(lambda: trials.learner_present() and all(p.get_subscription_count() for p in trials.publishers.values()),
             what="the learner")
    for k in range(300):
        trials.publish(f"t{k:03d}", "tap", {"colour": 1.0}, {"obj_vel": 1.0})
    wait_for(lambda: len(trials.rejected) == 300, what="300 answers")
    trials.destroy()  # tells what it held back
    assert learner.counts["rejected_parts"] == 300
    assert warnings[0] == ("the learner rejected trial 't000': unknown sensor 'colour' (did you mean 'color'?); the "
                           "object sensors are ['color', 'shape', 'size']")
    # the others counted, told once their 5 s are over (or at destroy): every one of the 299, in a few lines
    assert all(re.match(r"\d+ more like that in the last \d+ s; the latest: the learner rejected trial 't\d+'", w)
               for w in warnings[1:]), warnings
    assert sum(int(w.split()[0]) for w in warnings[1:]) == 299 and len(warnings) <= 6, warnings

def test_a_robot_recorded_without_a_learner_ends_as_the_recipe_says(tmp_path):
    # docs/bags.md: `affordance-ros record robot_bag` while `simulated_robot -p wait_for:=affordance_recorder` runs
    with open(tmp_path / "record.log", "w") as log:
        recorder = subprocess.Popen([str(LIB / "record"), str(tmp_path / "bag")], stdout=log, stderr=subprocess.STDOUT,
                                    env=dict(os.environ, ROS_HOME=str(tmp_path / "ros_home")))
    robot = start("simulated_robot", tmp_path, "robot", count=30, rate=100.0, wait_for="affordance_recorder")
    try:
        assert exit_status(robot, 60) == 0  # no learner: it does not wait for confirmations nobody sends
    finally:
        if robot.poll() is None:
            robot.kill()
        stop(recorder)
    robot_log = (tmp_path / "robot.log").read_text()
    assert "without confirmations" in robot_log and "sent again" not in robot_log
    assert "wrote 90 messages" in (tmp_path / "record.log").read_text()


# ---------------------------------------------------------------- 10. and the smaller ones


def test_a_second_learner_on_one_database_is_refused_with_who_holds_it(ros, tmp_path):
    db = tmp_path / "cases.db"
    first = start("learner_node", tmp_path, "first", database_path=db, model_path=tmp_path / "model.json")
    second = None
    try:
        ros.client(Learn, f"{LEARNER}/learn")  # the first is up
        second = start("learner_node", tmp_path, "second", database_path=db, model_path=tmp_path / "other.json")
        assert exit_status(second, 60) == 1
    finally:
        if second is not None and second.poll() is None:
            stop(second)
        assert stop(first) == 0
    refusal = [line for line in (tmp_path / "second.log").read_text().splitlines() if "in use by" in line]
    assert len(refusal) == 1
    assert f"in use by /affordance_learner (pid {first.pid}, host {os.uname().nodename}" in refusal[0]
    assert f"kill -INT {first.pid}" in refusal[0] and "another database_path" in refusal[0]


def test_a_second_learner_on_a_hard_link_of_the_database_is_refused_and_the_database_stays_whole(ros, tmp_path):
    """A hard link (``ln``, a ``cp -al`` snapshot of the folder) is the same database by another path, with a lock
    file of its own: two learners on it would each store trials in a write-ahead log of its own (SQLite keeps it
    beside the path), and the database would be "malformed"."""
    db, link = tmp_path / "cases.db", tmp_path / "snapshot" / "cases.db"
    seeded(tmp_path, 20)
    first = start("learner_node", tmp_path, "first", database_path=db, model_path=tmp_path / "model.json")
    second = None
    try:
        ros.client(Learn, f"{LEARNER}/learn")  # the first is up
        link.parent.mkdir()
        os.link(db, link)
        second = start("learner_node", tmp_path, "second", database_path=link, model_path=tmp_path / "other.json")
        assert exit_status(second, 30) == 1
        robot = Robot(ros)
        records = sampled_records(50, prefix="h")
        robot.send(records)
        wait_for(lambda: robot.confirmed() == {r.trial_id for r in records}, timeout=60, what="the trials confirmed")
    finally:
        if second is not None and second.poll() is None:
            stop(second)
        assert stop(first) == 0
    refusal = [line for line in (tmp_path / "second.log").read_text().splitlines() if "in use by" in line]
    assert len(refusal) == 1, (tmp_path / "second.log").read_text()[-2000:]
    assert f"in use by /affordance_learner (pid {first.pid}, host {os.uname().nodename}" in refusal[0]
    with sqlite3.connect(db) as check:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert len(stored_ids(db)) == 70


@pytest.mark.parametrize("removed", ["files", "folder", "folder, a learner started before it is made again"])
def test_a_second_learner_is_refused_though_the_database_and_its_lock_file_were_removed(ros, tmp_path, removed):
    """`rm -f cases.db*` (or the folder removed and made again) takes the lock file too: the node writes the
    database back to its path and locks the file there again, so a second learner started then is refused;
    one started before that (the folder gone: the node waits for it) is refused too, by the node's socket
    named after the path, and makes nothing."""
    db = tmp_path / "db" / "cases.db"
    first = start("learner_node", tmp_path, "first", database_path=db, model_path=tmp_path / "model.json",
                  status_period=0.0)
    second = None
    records = sampled_records(60, prefix="g")
    try:
        robot = Robot(ros)
        robot.send(records[:20])
        wait_for(lambda: len(robot.confirmed()) == 20, timeout=60, what="the first trials confirmed")
        if removed == "files":
            for path in db.parent.iterdir():  # a clean-up's `rm -f cases.db*`
                path.unlink()
        elif removed == "folder":
            shutil.rmtree(db.parent)
            db.parent.mkdir()
        else:
            shutil.rmtree(db.parent)
            second = start("learner_node", tmp_path, "second", database_path=db, model_path=tmp_path / "other.json")
            assert exit_status(second, 60) == 1
            assert not db.parent.exists()
            db.parent.mkdir()
        wait_for(db.exists, what="the database written back to its path")
        if second is None:
            second = start("learner_node", tmp_path, "second", database_path=db, model_path=tmp_path / "other.json")
            assert exit_status(second, 60) == 1
        robot.send(records[20:])  # the first goes on storing and confirming, alone
        wait_for(lambda: robot.trials.pending == 0, timeout=60, what="every trial confirmed")
        time.sleep(0.5)
        assert first.poll() is None
    finally:
        if second is not None and second.poll() is None:
            stop(second)
        assert stop(first) == 0
    refusal = [line for line in (tmp_path / "second.log").read_text().splitlines() if "in use by" in line]
    assert len(refusal) == 1 and refusal[0].startswith("[FATAL]")
    assert f"in use by /affordance_learner (pid {first.pid}" in refusal[0]
    answers = robot.answers.all()
    assert {a.status for a in answers} == {TrialStatus.STORED}
    # stored once: no second learner stored them too ('already stored' answers only to the robot's re-sends)
    assert sorted(a.trial_id for a in answers if not a.reason) == sorted(r.trial_id for r in records)
    assert stored_ids(db) == {r.trial_id for r in records}


def test_online_learning_does_not_write_over_a_model_file_another_program_replaced(ros, tmp_path):
    seeded(tmp_path, 100)
    learner = ros.learner(online_learning=True, online_save_period=0.2)
    assert ros.learn().success
    model = tmp_path / "model.json"
    replacement = model.read_text().replace('"format"', '"replaced_by": "another tool", "format"', 1)
    model.write_text(replacement)
    ros.robot(count=10)
    wait_for(lambda: learner.counts["online_updates"] >= 10, what="online updates")
    wait_for(lambda: learner.counts["online_save_errors"] >= 1, what="a refused save")
    time.sleep(0.5)
    assert model.read_text() == replacement
    assert learner.counts["online_save_errors"] >= 1
    answer = ros.learn()  # asked for: a learn replaces it, and says so
    assert answer.success and model.read_text() != replacement


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_huge_predict_request_is_not_sent_and_the_largest_that_can_be_is_refused_cheaply(ros, tmp_path):
    db = seeded(tmp_path, 100)
    learner = start("learner_node", tmp_path, "learner", database_path=db, model_path=tmp_path / "model.json",
                    status_period=0.0)
    try:
        assert ros.learn(timeout=120.0).success
        before = rss_mb(learner.pid)
        # 3 million names: the interfaces bound every list, so the client's middleware refuses to send them
        names = [f"s{k}" for k in range(3_000_000)]
        with pytest.raises(Exception, match="failed to send request"):  # rclpy's RCLError; stderr says why
            ros.predict(query=["action"], sensor_names=names, sensor_values=[1.0] * len(names))
        # the most a client can send is refused by the node's max_list_length, before anything of ours is built
        names = names[:INTERFACE_MAX_LIST_LENGTH]
        answer = ros.predict(query=["action"], sensor_names=names, sensor_values=[1.0] * len(names))
        assert not answer.success and f"request too large: {len(names)} entries in 'sensor_names'" in answer.message
        quick = ros.predict(query=["action"], sensor_names=["obj_vel"], sensor_values=[9.0])
        assert quick.success
        assert rss_mb(learner.pid) - before < 40, (before, rss_mb(learner.pid))
    finally:
        assert stop(learner) == 0
