"""Bags and the live graph: a replayed bag gives the node the cases offline import gives;
the simulated robot recorded into a bag gives the cases the node stored live."""

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import CLI, MONTESANO_CONFIG, NodeProcess, exit_status, wait_for

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.bag import BagWriter, action_message, features_message, to_nanoseconds
from affordance_ros.data.offline import PairingOptions, read_bag

BIN = Path(sys.executable).parent
REPLAY = BIN.parent / "lib" / "affordance_ros" / "replay"

T0 = 1_700_000_000.0
OBJECT = {"color": 5.1, "shape": 0.2, "size": 9.7}
EFFECT = {"obj_vel": 10.3, "obj_hand_vel": 4.9, "hand_vel": 0.1, "contact": 5.2}


def without_received(records):
    return sorted((replace(r, received=None) for r in records), key=lambda r: r.trial_id)


def write_parts(path, parts):
    parts = sorted(parts, key=lambda p: p[0])
    with BagWriter(path, "sqlite3") as writer:
        for log_time, kind, trial_id, stamp, payload in parts:
            msg = (action_message(trial_id, stamp, payload) if kind == "action"
                   else features_message(trial_id, stamp, payload))
            writer.write(kind, to_nanoseconds(log_time), msg)
    return path, len(parts)


def trial(t, trial_id, action, obj=OBJECT, eff=EFFECT, stamps=(0.0, 0.0, 0.0), order=(0, 1, 2)):
    """The parts of one trial: (log time, kind, trial_id, stamp, payload), a few ms apart in ``order``."""
    return [(t + 0.004 * order[j], kind, trial_id, t + stamps[j], payload)
            for j, (kind, payload) in enumerate((("action", action), ("object", obj), ("effect", eff)))]


def robot_bag(path):
    """11 s of trials, a few a second as a robot does them: by trial_id (parts in varying order),
    by stamp (empty id, stamps 10 ms apart), one with an unknown action, one cut off by the end."""
    parts = []
    for k in range(24):
        parts += trial(T0 + 0.4 * k, f"id{k}", ("grasp", "tap", "touch")[k % 3],
                       obj={s: x + 0.1 * k for s, x in OBJECT.items()}, order=((0, 1, 2), (2, 0, 1), (1, 2, 0))[k % 3])
    for k in range(8):
        parts += trial(T0 + 10 + 0.5 * k, "", "tap", eff={s: x - 0.1 * k for s, x in EFFECT.items()},
                       stamps=(0.0, -0.01, 0.01), order=(1, 2, 0))
    parts += trial(T0 + 14.5, "kick", "kick") + [(T0 + 15, "action", "cut", T0 + 15, "grasp")]
    return write_parts(path, parts)


def test_a_replayed_bag_gives_the_node_the_cases_of_offline_import(ros, tmp_path):
    bag, messages = robot_bag(tmp_path / "bag")
    offline = read_bag(bag, AffordanceNetwork.load(MONTESANO_CONFIG))
    assert len(offline.records) == 24 + 8
    learner = ros.learner()
    # the ROS executable, 10x faster than recorded
    player = subprocess.run([str(REPLAY), str(bag), "--rate", "10", "--ros-args", "--log-level", "warn"],
                            capture_output=True, text=True, timeout=60)
    assert player.returncode == 0, player.stderr + player.stdout
    played = re.search(rf"published {messages} messages in ([0-9.]+) s", player.stdout)
    assert played and float(played.group(1)) < 7.5, player.stdout  # 15 s of bag at 10x: 1.5 s (at 1x: 15 s)
    wait_for(lambda: learner.configured.manager.store.count() >= len(offline.records), what="the replayed cases")
    time.sleep(0.3)
    assert without_received(learner.configured.manager.store.records()) == without_received(offline.records)
    assert learner.counts["rejected_parts"] == 1


class NodeMade(Exception):
    """Raised in place of making the command's node, once what DDS would read then is noted."""


@pytest.mark.ros  # (it patches rclpy: the pip install without ROS 2 has none)
@pytest.mark.parametrize("argv, heartbeat", [(["replay", "BAG"], True), (["record", "BAG", "--trials", "1"], False),
                                             (["call", "predict", "--query", "action"], False)])
def test_the_ros_commands_make_their_node_under_the_packages_dds_profiles(argv, heartbeat, tmp_path, monkeypatch):
    """Fast DDS reads its profiles when a process makes its first node (its participant), not at rclpy.init.
    replay made its node after leaving ``dds_profiles``, so its writers kept Fast DDS's 3 s heartbeat: what a
    learner's full queue refused waited 3 s for its re-send, and ``--rate 10`` of a 3 s bag took 3 s, not 0.3."""
    import rclpy

    from affordance_ros.nodes.qos import MAX_MESSAGE_SIZE, PROFILES_VARIABLES
    from affordance_ros.tools import commands
    for variable in PROFILES_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    seen = []

    def note_profiles(*args, **kwargs):
        path = os.environ.get(PROFILES_VARIABLES[0])
        seen.append(Path(path).read_text() if path else "")
        raise NodeMade

    monkeypatch.setattr(rclpy, "create_node", note_profiles)
    bag, _ = robot_bag(tmp_path / "bag")
    with pytest.raises(NodeMade):
        commands.run([str(bag) if word == "BAG" else word for word in argv])
    assert len(seen) == 1 and f"<value>{MAX_MESSAGE_SIZE}</value>" in seen[0], seen
    assert ("<heartbeat_period>" in seen[0]) == heartbeat, seen[0]


def late_trial_bag(path):
    """'late' gets its effect 8 s after its other parts (stamped as they are): past the 5 s
    trial_timeout, as trials t0..t9 one second apart show meanwhile."""
    parts = [(T0 + 1, "action", "late", T0 + 1, "tap"), (T0 + 1, "object", "late", T0 + 1, OBJECT),
             (T0 + 9, "effect", "late", T0 + 1, EFFECT)]
    for k in range(10):
        parts += trial(T0 + k, f"t{k}", "touch")
    return write_parts(path, parts)


def test_replayed_ten_times_faster_without_clock_trials_time_out_as_offline_import(ros, tmp_path):
    # at rate 10 'late' gets its effect 0.8 s (wall and node clock) after its other parts; the node
    # judges the timeout on the header stamps, which have moved on by 8 s: it drops 'late' as import does
    bag, messages = late_trial_bag(tmp_path / "bag")
    offline = read_bag(bag, AffordanceNetwork.load(MONTESANO_CONFIG))
    assert sorted(r.trial_id for r in offline.records) == [f"t{k}" for k in range(10)]
    assert "1 with no 'effect' part while the header stamps moved on" in "\n".join(offline.report)

    learner = ros.learner()
    assert not learner.get_parameter("use_sim_time").value
    player = subprocess.run([CLI, "replay", str(bag), "--rate", "10"], capture_output=True, text=True, timeout=60)
    assert player.returncode == 0, player.stderr + player.stdout
    assert f"published {messages} messages" in player.stdout and "with /clock" not in player.stdout
    wait_for(lambda: learner.configured.manager.store.count() >= len(offline.records), what="the replayed cases")
    time.sleep(0.3)
    stored = learner.configured.manager.store.records()
    assert without_received(stored) == without_received(offline.records)
    # on the node clock the whole bag took less than trial_timeout: judged on it, 'late' would have been kept
    received = [r.received for r in stored]
    assert max(received) - min(received) < 0.5 * learner.configured.trials.intake.assembler.trial_timeout
    intake = learner.configured.trials.intake
    assert learner.counts["dropped_incomplete"] == 1 and intake.pending == 1  # the lone late effect
    wait_for(lambda: learner.configured.trials.intake.pending == 0, timeout=10, what="the fallback on the node clock")
    assert learner.counts["dropped_incomplete"] == 2


def test_with_the_bags_clock_a_sim_time_node_times_trials_out_as_offline_import(ros, tmp_path):
    # at rate 2.5 with /clock: the node's clock is the bag's
    bag, messages = late_trial_bag(tmp_path / "bag")
    offline = read_bag(bag, AffordanceNetwork.load(MONTESANO_CONFIG))
    assert sorted(r.trial_id for r in offline.records) == [f"t{k}" for k in range(10)]

    learner = ros.learner(use_sim_time=True)
    player = subprocess.run([CLI, "replay", str(bag), "--rate", "2.5", "--clock"],
                            capture_output=True, text=True, timeout=60)
    assert player.returncode == 0, player.stderr + player.stdout
    assert "with /clock" in player.stdout
    wait_for(lambda: learner.configured.manager.store.count() >= len(offline.records), what="the replayed cases")
    time.sleep(0.3)
    assert without_received(learner.configured.manager.store.records()) == without_received(offline.records)
    assert learner.counts["dropped_incomplete"] >= 1
    # the node's clock is the bag's
    assert abs(learner.get_clock().now().nanoseconds * 1e-9 - (T0 + 9.008)) < 0.01  # the last log time


def recorded_while(args, run):
    """``affordance-ros record ARGS`` running while ``run()`` runs; run's result and the recorder's output,
    once the recorder ended by itself (exit 0) within 20 s of it."""
    recorder = subprocess.Popen([CLI, "record", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        result = run()
        out, _ = recorder.communicate(timeout=20)
    finally:
        if recorder.poll() is None:
            recorder.kill()
    assert recorder.returncode == 0, out
    return result, out


def learner_and_robot(ros, trials, learner=None, **robot):
    """A learner in the test's process and a simulated robot that sends it ``trials`` trials, the two
    subscribers of its topics being the learner and a recorder; the learner once it stored them all."""
    learner = ros.learner(**(learner or {}))
    ros.wait_for_robot(ros.robot(count=trials, rate=20.0, min_subscribers=2, **robot))
    wait_for(lambda: learner.configured.manager.store.count() >= trials, what=f"{trials} stored cases")
    return learner


def test_the_simulated_robot_recorded_into_a_bag_gives_the_cases_the_node_stored(ros, tmp_path):
    bag = tmp_path / "robot"
    learner, out = recorded_while([str(bag), "--storage", "mcap", "--trials", "30"],
                                  lambda: learner_and_robot(ros, 30, seed=2))
    assert "wrote 90 messages" in out
    assert (bag / "metadata.yaml").is_file()
    recorded = read_bag(bag, AffordanceNetwork.load(MONTESANO_CONFIG))
    assert recorded.warnings == []
    assert len(recorded.records) == 30
    assert without_received(recorded.records) == without_received(learner.configured.manager.store.records())


def test_a_robot_on_its_own_topics_is_recorded_by_a_recorder_in_its_namespace(ros, tmp_path):
    # docs/node.md, several robots: the learner takes arm1/action, ...; record them from /arm1
    bag = tmp_path / "arm1"
    learner, _ = recorded_while([str(bag), "--trials", "10", "--ros-args", "-r", "__ns:=/arm1"],
                                lambda: learner_and_robot(ros, 10, {"robots": "arm1"}, seed=3, robot_name="arm1"))
    recorded = read_bag(bag, AffordanceNetwork.load(MONTESANO_CONFIG), PairingOptions(namespace="/arm1"))
    assert without_received(recorded.records) == without_received(learner.configured.manager.store.records())


def test_replay_with_confirm_waits_until_the_learner_confirmed_every_whole_trial(ros, tmp_path):
    bag, messages = robot_bag(tmp_path / "bag")
    learner = ros.learner()
    player = subprocess.run([CLI, "replay", str(bag), "--rate", "20", "--confirm", "--resend-timeout", "1"],
                            capture_output=True, text=True, timeout=60)
    assert player.returncode == 0, player.stderr + player.stdout
    # the 24 trials with ids stored, 'kick' rejected (unknown action); 'cut' is not whole in the bag
    assert "24 trials confirmed stored, 1 rejected, 0 duplicate, 0 unconfirmed" in player.stdout, player.stdout
    assert "rejected trial 'kick': unknown action 'kick'" in player.stderr
    assert {f"id{k}" for k in range(24)} <= {r.trial_id for r in learner.configured.manager.store.records()}


@pytest.mark.ros  # (no ros fixture: two executables, a robot and a recorder, over DDS)
def test_a_recorder_stopped_as_the_robot_ends_keeps_every_message_dds_acknowledged(tmp_path):
    """A robot without a learner ends once DDS acknowledged its trials, which are then in the recorder's reader
    queue, not yet in the bag; the recorder SIGTERMed then (docs/bags.md: `kill %1` after the robot) takes
    them first (a recorder that stopped spinning at the signal would lose them)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    bag = tmp_path / "bag"
    recorder = NodeProcess([CLI, "record", str(bag), "--storage", "mcap"], tmp_path / "record.log", env=env)
    robot = NodeProcess([str(REPLAY.parent / "simulated_robot"), "--ros-args", "-p", "count:=3000", "-p",
                         "rate:=10000.0", "-p", "wait_for:=affordance_recorder", "-p", "confirm:=false"],
                        tmp_path / "robot.log", env=env)
    try:
        assert exit_status(robot, 120) == 0, (tmp_path / "robot.log").read_text()
        recorder.send_signal(signal.SIGTERM)  # at once: what the robot sent was acknowledged, so it is "there"
        assert exit_status(recorder, 30) == 0, (tmp_path / "record.log").read_text()
    finally:
        for process in (robot, recorder):
            if process.poll() is None:
                process.kill()
    out = (tmp_path / "record.log").read_text()
    assert "wrote 9000 messages" in out, out
    assert len(read_bag(bag, AffordanceNetwork.load(MONTESANO_CONFIG)).records) == 3000


def test_replay_with_confirm_fails_naming_the_trials_it_gave_up(ros, tmp_path):
    """A learner that answers retry to every trial (its clock far behind the bag's, say): each is sent again until
    it is given up (retries count), and the replay says so and exits 1 as for trials still unconfirmed (not 0,
    with the summary's 'N given up' the only trace)."""
    from affordance_ros.msg import Action, Features, TrialStatus
    from affordance_ros.nodes.qos import trial_qos

    bag, _ = robot_bag(tmp_path / "bag")
    answers = ros.client_node.create_publisher(TrialStatus, "affordance_learner/stored", trial_qos())
    ros.client_node.create_subscription(Action, "action", lambda msg: answers.publish(TrialStatus(
        trial_id=msg.trial_id, status=TrialStatus.RETRY, reason="its clock")), trial_qos())
    for topic in ("object_features", "effects"):
        ros.client_node.create_subscription(Features, topic, lambda msg: None, trial_qos())
    player = subprocess.run([CLI, "replay", str(bag), "--rate", "20", "--confirm", "--resend-timeout", "0.1"],
                            capture_output=True, text=True, timeout=90)
    assert player.returncode == 1, player.stderr + player.stdout
    assert "0 trials confirmed stored, 0 rejected, 0 duplicate, 0 unconfirmed, 25 given up" in player.stdout
    assert re.search(r"error: 25 trials were given up after 10 re-sends the learner did not take: id0, id1, .*, "
                     r"\.\.\.$", player.stderr, re.M), player.stderr


def test_replay_with_a_spool_keeps_what_the_learner_did_not_confirm_for_the_next_replay(ros, tmp_path):
    """No learner within reach (subscribers, no answers) until the deadline: the trials stay in the spool, and the
    next replay with that spool sends them (a learner is there then) with its own bag's."""
    from affordance_ros.msg import Action, Features

    bag, _ = robot_bag(tmp_path / "bag")
    other, _ = write_parts(tmp_path / "other", trial(T0, "other", "tap"))
    spool = tmp_path / "replay.spool"
    for topic, kind in (("action", Action), ("object_features", Features), ("effects", Features)):
        ros.client_node.create_subscription(kind, topic, lambda msg: None, 100)
    first = subprocess.run([CLI, "replay", str(bag), "--rate", "20", "--spool", str(spool), "--confirm-timeout", "2"],
                           capture_output=True, text=True, timeout=90)
    assert first.returncode == 1, first.stderr + first.stdout
    assert (f"error: 25 trials were not confirmed within 2 s: id0, id1, id2, id3, id4, id5, id6, id7, id8, id9, ... "
            f"(kept in the spool {spool}: a replay with --spool {spool} sends them again)") in first.stderr
    learner = ros.learner()
    second = subprocess.run([CLI, "replay", str(other), "--spool", str(spool), "--resend-timeout", "1"],
                            capture_output=True, text=True, timeout=90)
    assert second.returncode == 0, second.stderr + second.stdout
    assert "25 trials confirmed stored, 1 rejected, 0 duplicate, 0 unconfirmed" in second.stdout, second.stdout
    assert {"other", *(f"id{k}" for k in range(24))} <= {r.trial_id for r in learner.configured.manager.store.records()}
