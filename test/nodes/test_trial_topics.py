"""The learner's trial topics take what is queued in few executor callbacks: a part's
callback goes on with the parts queued on all three trial topics, and the robot's status callback with the
answers queued behind its own. Real subscriptions over DDS, in the test's process."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from conftest import wait_for
from rclpy.executors import SingleThreadedExecutor

from affordance_ros.data.intake import Event
from affordance_ros.msg import Action, Features, TrialStatus
from affordance_ros.nodes.learner import trial_topics
from affordance_ros.nodes.learner.trial_topics import TrialTopics
from affordance_ros.nodes.qos import trial_qos
from affordance_ros.nodes.robot import trial_publisher
from affordance_ros.nodes.robot.trial_publisher import TrialPublisher

TRIALS = 20


class RecordingPipeline:
    """Stands in for TrialPipeline: records (kind, trial_id) of every part it is given, and what became of it."""

    expire_period = 60.0
    paused = False

    def __init__(self):
        self.parts, self.fields, self.handled = [], [], []

    def take(self, kind, trial_id, stamp, fields, now):
        self.parts.append((kind, trial_id))
        self.fields.append((kind, trial_id, stamp, fields))
        self.handled.append(Event(f"received_{kind}"))

    def unreadable(self, kind, trial_id, exc):
        self.handled.append(Event(f"received_{kind}"))

    def expire(self, now):
        pass


@pytest.fixture
def spun_by_hand(ros):
    """A node of the ros context on an executor of its own that the test spins by hand (spin_once)."""
    node = rclpy.create_node("spun_by_hand", context=ros.context)
    executor = SingleThreadedExecutor(context=ros.context)
    executor.add_node(node)
    yield node, executor
    executor.remove_node(node)
    executor.shutdown()
    node.destroy_node()


def publish_trials(node, n):
    """n trials' three parts, every one acknowledged (queued in the subscriber's history) on return."""
    qos = trial_qos()
    publishers = [node.create_publisher(Action, "action", qos), node.create_publisher(Features, "object_features", qos),
                  node.create_publisher(Features, "effects", qos)]
    wait_for(lambda: all(p.get_subscription_count() for p in publishers), timeout=30, what="the subscriptions")
    for k in range(n):
        publishers[0].publish(Action(trial_id=f"t{k}", action="tap"))
        publishers[1].publish(Features(trial_id=f"t{k}", names=["color"], values=[1.0]))
        publishers[2].publish(Features(trial_id=f"t{k}", names=["obj_vel"], values=[2.0]))
    for publisher in publishers:
        assert publisher.wait_for_all_acked(rclpy.duration.Duration(seconds=30))


def test_one_part_callback_takes_the_parts_queued_on_all_three_topics(ros, spun_by_hand, monkeypatch):
    monkeypatch.setattr(trial_topics, "DRAIN_SECONDS", 10.0)  # what is taken, not how fast (however loaded the machine)
    learner, executor = spun_by_hand
    intake = RecordingPipeline()
    handled = intake.handled
    TrialTopics(learner, intake, 0)
    publish_trials(ros.client_node, TRIALS)
    executor.spin_once(timeout_sec=10)
    kinds = {kind for kind, _ in intake.parts}
    # one callback of the executor: parts of every kind, all 3 * TRIALS of them
    assert kinds == {"action", "object", "effect"}, intake.parts
    assert len(intake.parts) == 3 * TRIALS
    assert len(handled) == 3 * TRIALS


def test_a_part_is_read_from_its_bytes_without_building_a_message(ros, spun_by_hand, monkeypatch):
    """rclpy's conversion into message objects cost more than the rest of a part's path (item 7): the learner
    takes its parts serialized and reads their fields (trial_wire); counted, not timed."""
    monkeypatch.setattr(trial_topics, "DRAIN_SECONDS", 10.0)
    learner, executor = spun_by_hand
    intake, messages_built = RecordingPipeline(), []

    def count_messages_built(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "__init__" and "/msg/_" in frame.f_code.co_filename:
            messages_built.append(frame.f_code.co_filename)

    TrialTopics(learner, intake, 0)
    publish_trials(ros.client_node, TRIALS)
    sys.setprofile(count_messages_built)
    try:
        executor.spin_once(timeout_sec=10)
    finally:
        sys.setprofile(None)
    assert len(intake.fields) == 3 * TRIALS
    assert messages_built == []
    by_part = {(kind, trial_id): (stamp, fields) for kind, trial_id, stamp, fields in intake.fields}
    assert by_part["action", "t3"] == (0.0, "tap")
    assert by_part["object", "t3"] == (0.0, (["color"], (1.0,)))
    assert by_part["effect", "t3"] == (0.0, (["obj_vel"], (2.0,)))


def test_a_robots_own_topics_are_taken_in_turn_with_flooded_shared_ones(ros, spun_by_hand, monkeypatch):
    monkeypatch.setattr(trial_topics, "DRAIN_SECONDS", 10.0)
    learner, executor = spun_by_hand
    intake = RecordingPipeline()
    topics = TrialTopics(learner, intake, 0, robots=["arm1"])
    assert sorted(s.topic_name for s in topics.subscriptions) == sorted(
        ["/action", "/object_features", "/effects", "/arm1/action", "/arm1/object_features", "/arm1/effects"])
    floods = [ros.client_node.create_publisher(Action, "action", trial_qos()),
              ros.client_node.create_publisher(Features, "effects", trial_qos())]
    robot = TrialPublisher(ros.client_node, robot_name="arm1")
    wait_for(lambda: all(p.get_subscription_count() for p in [*floods, *robot.publishers.values()]),
             timeout=30, what="the subscriptions")
    for k in range(200):
        floods[0].publish(Action(trial_id=f"flood{k}", action="tap"))
        floods[1].publish(Features(trial_id=f"flood{k}", names=["obj_vel"], values=[2.0]))
    robot.publish("arm1-t0", "tap", {"color": 1.0}, {"obj_vel": 2.0})
    for publisher in [*floods, *robot.publishers.values()]:
        assert publisher.wait_for_all_acked(rclpy.duration.Duration(seconds=30))
    executor.spin_once(timeout_sec=10)
    assert len(intake.parts) == 403
    # one part of each reader per round: the robot's three parts come in the first round, not after the flood
    taken = [k for k, (_, trial_id) in enumerate(intake.parts) if trial_id == "arm1-t0"]
    assert len(taken) == 3 and max(taken) <= len(topics.subscriptions), intake.parts[:10]
    robot.destroy()


def test_a_robot_name_that_makes_no_topic_name_is_refused(ros):
    with pytest.raises(ValueError, match="does not make a topic name"):
        TrialPublisher(ros.client_node, robot_name="2arm")
    robot = TrialPublisher(ros.client_node, robot_name="arm_2")
    assert robot.topics == {"action": "arm_2/action", "object": "arm_2/object_features", "effect": "arm_2/effects"}
    robot.destroy()


def test_the_status_callback_takes_the_answers_queued_behind_it(ros, spun_by_hand, monkeypatch):
    monkeypatch.setattr(trial_publisher, "DRAIN_SECONDS", 10.0)
    robot, executor = spun_by_hand
    trials = TrialPublisher(robot, resend_timeout=60.0)
    status = ros.client_node.create_publisher(TrialStatus, "affordance_learner/stored", trial_qos())
    wait_for(lambda: status.get_subscription_count(), timeout=30, what="the robot's status subscription")
    for _ in range(3):  # the matched events of the subscription first
        executor.spin_once(timeout_sec=0.2)
    for k in range(TRIALS):
        trials.send(f"t{k}", [])
    for k in range(TRIALS):
        status.publish(TrialStatus(trial_id=f"t{k}", status=TrialStatus.STORED))
    assert status.wait_for_all_acked(rclpy.duration.Duration(seconds=30))
    executor.spin_once(timeout_sec=10)
    assert trials.confirmed == TRIALS and trials.pending == 0


def test_a_node_process_freezes_what_it_holds_at_start_and_collects_young_objects_less_often():
    import gc

    from affordance_ros.nodes.shutdown import GC_THRESHOLD, settle_collector

    threshold = gc.get_threshold()
    try:
        settle_collector()
        assert gc.get_threshold()[0] == GC_THRESHOLD > threshold[0]
        assert gc.get_freeze_count() > 0  # what existed is out of the collector's scans
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_node_run_with_affordance_ros_profile_writes_its_profile(tmp_path):
    import os
    import pstats
    import signal
    import subprocess
    import time

    from ros_harness import LIB

    profile = tmp_path / "profile"
    env = dict(os.environ, AFFORDANCE_ROS_PROFILE=str(profile))
    robot = subprocess.Popen([str(LIB / "simulated_robot"), "--ros-args", "-p", "count:=0", "-p", "rate:=100",
                              "-p", "min_subscribers:=0", "-p", "wait_for:=''", "-p", "confirm:=false"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_line = robot.stderr.readline()  # the node is made (its stop signals handled): it logged
    time.sleep(1.0)  # publishing to nobody, endless: stopped by SIGINT, as an operator would
    robot.send_signal(signal.SIGINT)
    _, stderr = robot.communicate(timeout=60)
    stderr = first_line + stderr
    assert robot.returncode == 0, stderr[-2000:]
    stats = pstats.Stats(str(profile) + ".simulated_robot")
    assert any(name == "_publish_trial" for _, _, name in stats.stats)


def test_dds_profiles_bound_the_readers_and_shorten_the_heartbeat_unless_the_user_gave_profiles(monkeypatch):
    """The Fast DDS default profiles a learner (readers) and a robot process (writers) start with (item 5)."""
    import xml.etree.ElementTree as ET

    from affordance_ros.nodes.qos import PROFILES_VARIABLES, dds_profiles
    for variable in (*PROFILES_VARIABLES, "RMW_IMPLEMENTATION"):
        monkeypatch.delenv(variable, raising=False)
    with dds_profiles(reader_samples=100, heartbeat_period=0.1, service_answer_wait=1.5) as said:
        path = os.environ["FASTDDS_DEFAULT_PROFILES_FILE"]
        root = ET.parse(path).getroot()
    assert "FASTDDS_DEFAULT_PROFILES_FILE" not in os.environ and not os.path.exists(path)
    assert said == ("DDS messages sent of at most 1400 bytes, announced every 1 s; DDS readers hold at most 100 "
                    "samples each; "
                    "DDS writers send a heartbeat every 0.1 s while unacknowledged; "
                    "services wait up to 1.5 s for a new caller's reply reader")

    def named(tag):
        return {p.get("profile_name"): {e.tag.split("}")[-1]: e for e in p.iter()}
                for p in root.iter() if p.tag.endswith(tag)}

    def duration(element):
        return element.find("{*}sec").text, element.find("{*}nanosec").text
    reader, writers = named("data_reader")["affordance_ros_reader"], named("data_writer")
    assert reader["max_samples"].text == reader["max_samples_per_instance"].text == "100"
    assert duration(writers["affordance_ros_writer"]["heartbeat_period"]) == ("0", "100000000")
    # rmw_fastrtps makes a service's response writer from the profile named "service": the heartbeat is repeated there
    assert duration(writers["service"]["heartbeat_period"]) == ("0", "100000000")
    assert duration(writers["service"]["max_blocking_time"]) == ("1", "500000000")
    defaults = [p for p in root.iter() if p.get("is_default_profile") == "true"]
    assert sorted(p.tag.split("}")[-1] for p in defaults) == ["data_reader", "data_writer", "participant"]
    # every message sent fits one frame (discovery's too: a lost IP fragment loses the whole datagram); what others
    # send larger is still taken (the property caps sending only, not the transports' receive buffers)
    properties = {p.find("{*}name").text: p.find("{*}value").text for p in root.iter() if p.tag.endswith("property")}
    assert properties == {"fastdds.max_message_size": "1400"}
    assert not [e for e in root.iter() if e.tag.endswith(("builtinTransports", "userTransports"))]
    assert duration(next(e for e in root.iter() if e.tag.endswith("leaseAnnouncement"))) == ("1", "0")

    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "/etc/my_profiles.xml")  # the user's own: left alone
    with dds_profiles(reader_samples=100) as said:
        assert os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] == "/etc/my_profiles.xml"
    assert "/etc/my_profiles.xml" in said


def test_the_profiles_file_of_a_killed_process_is_removed_by_the_next_one(tmp_path):
    """A node killed (SIGKILL) cannot remove its profiles file: the next process removes the files of processes
    that have ended, once a minute old (a process reads its file as it starts)."""
    from affordance_ros.nodes.qos import PROFILES_PREFIX, remove_stale_profiles
    ended = subprocess.Popen(["true"])
    ended.wait()
    old = time.time() - 120
    files = {"ended": tmp_path / f"{PROFILES_PREFIX}{ended.pid}_x1y2.xml",
             "running": tmp_path / f"{PROFILES_PREFIX}{os.getpid()}_x1y2.xml",
             "ended, new": tmp_path / f"{PROFILES_PREFIX}{ended.pid}_z3.xml",
             "another program's": tmp_path / f"{PROFILES_PREFIX}cache_x1.xml"}
    for name, path in files.items():
        path.write_text("<dds/>")
        if name != "ended, new":
            os.utime(path, (old, old))
    remove_stale_profiles(tmp_path)
    assert {name for name, path in files.items() if path.exists()} == {"running", "ended, new", "another program's"}


PROBE = """
import sys, time, rclpy
from affordance_ros.msg import Action
from affordance_ros.nodes.qos import LEARNER_READER_SAMPLES as SAMPLES, TRIAL_HEARTBEAT_PERIOD as PERIOD
from affordance_ros.nodes.qos import dds_profiles, take_queued, trial_qos
with dds_profiles(SAMPLES, PERIOD):  # as learner_node main
    rclpy.init()
    node = rclpy.create_node('queue_probe')
    reader = node.create_subscription(Action, 'probe_action', lambda msg: None, trial_qos())
print('ready', flush=True)
sys.stdin.readline()
taken, deadline = 0, time.monotonic() + 60
while taken < int(sys.argv[1]) and time.monotonic() < deadline:
    if take_queued(reader) is None:
        time.sleep(0.001)
    else:
        taken += 1
print(taken, flush=True)
"""


def start_probe(sent: int, stderr_path: Path, attempts: int = 2) -> subprocess.Popen:
    """The probe process, once it said 'ready'. Its start is not what the test is about: a probe that ends before
    it is ready (the process may be killed before it prints a word) is started again, and what it printed and
    its exit status are shown."""
    failures = []
    for attempt in range(attempts):
        with open(stderr_path, "w") as stderr:
            probe = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", PROBE, str(sent)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                     env={k: v for k, v in os.environ.items() if "PROFILES_FILE" not in k})
        first = probe.stdout.readline().strip()
        if first == "ready":
            return probe
        probe.kill()
        failures.append(f"exit status {probe.wait()}, stdout {first!r}, stderr {stderr_path.read_text()[-2000:]!r}")
        print(f"the probe ended before it was ready (attempt {attempt + 1}): {failures[-1]}")
    raise AssertionError("; ".join(failures))


def test_a_learners_reader_holds_a_short_queue_and_what_it_refused_comes_later(ros, tmp_path):
    """Item 5 (docs/benchmarks/faults.md): a good trial's part waits behind the parts in the learner's DDS reader,
    so its readers hold at most LEARNER_READER_SAMPLES (Fast DDS's default: 5000). Counted, not timed: a
    reader in a process of its own with the learner's profiles takes nothing while a reliable keep-all writer
    sends 4 times that many; the writer cannot have them all acknowledged, and once the reader takes, every
    one arrives (refused, not lost)."""
    from affordance_ros.nodes.qos import LEARNER_READER_SAMPLES
    sent = 4 * LEARNER_READER_SAMPLES
    probe = start_probe(sent, tmp_path / "probe.err")
    try:
        writer = ros.client_node.create_publisher(Action, "probe_action", trial_qos())
        wait_for(lambda: writer.get_subscription_count() > 0, timeout=60, what="the probe's reader")
        for k in range(sent):
            writer.publish(Action(trial_id=f"p{k}", action="tap"))
        assert not writer.wait_for_all_acked(rclpy.duration.Duration(seconds=3.0))  # the reader is full
        taken = probe.communicate("take\n", timeout=120)[0].split()[-1]
        assert int(taken) == sent
        assert writer.wait_for_all_acked(rclpy.duration.Duration(seconds=10.0))
    finally:
        if probe.poll() is None:
            probe.kill()
