"""Fixtures for the end-to-end tests: real nodes over DDS, in this process or as subprocesses.

Each test gets an rclpy context of its own, with the learner and a client node on one
SingleThreadedExecutor (as learner_node runs it) spinning in a thread. Discovery stays on
this host, in a domain of this run (./test.sh sets one; a bare `pytest` run gets one from
its process id).
"""

import json
import os
import signal
import subprocess
import threading
import time

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 101 + 1))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402

from affordance_ros.core.ground_truth import benchmark_network, sample_values  # noqa: E402
from affordance_ros.data.storage import CaseStore, CaseStoreError  # noqa: E402
from affordance_ros.data.trial import Trial  # noqa: E402
from affordance_ros.nodes.learner_node import LearnerNode
from affordance_ros.nodes.simulated_robot import SimulatedRobot  # noqa: E402
from affordance_ros.share import default_config_path, share_directory  # noqa: E402
from affordance_ros.srv import Learn, Predict  # noqa: E402

MONTESANO_CONFIG = default_config_path()
LIB = share_directory().parents[1] / "lib" / "affordance_ros"  # the installed executables


def committed_events(intake, writer, timeout=20.0):
    """The events of the trials ``writer`` (a CaseWriter) stored for ``intake`` (a TrialIntake), once every trial
    the intake gave it is stored, as the node takes them."""
    events = intake.committed(writer.take())
    deadline = time.monotonic() + timeout
    while intake.storing:
        assert time.monotonic() < deadline, f"the writer did not store {intake.storing} trials in {timeout} s"
        time.sleep(0.001)
        events += intake.committed(writer.take())
    return events


def wait_for(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Ros:
    """One context; the learner and a client node on one SingleThreadedExecutor (as learner_node
    runs it), a simulated robot on another (as simulated_robot runs it), each spinning in a thread.
    Nodes added are destroyed at the end."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes = {}  # node -> (executor, thread)
        self.client_node = self.add(rclpy.create_node("test_client", context=self.context))
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def add(self, node, own_executor=False):
        executor, thread = self.executor, None
        if own_executor:
            executor = SingleThreadedExecutor(context=self.context)
            thread = threading.Thread(target=executor.spin, daemon=True)
        executor.add_node(node)
        if thread:
            thread.start()
        self.nodes[node] = (executor, thread)
        return node

    def remove(self, node):
        executor, thread = self.nodes.pop(node)
        if thread is None:
            executor.remove_node(node)
        else:
            executor.shutdown(timeout_sec=10.0)
            thread.join(timeout=10.0)
        node.destroy_node()

    def learner(self, **params) -> LearnerNode:
        params.setdefault("database_path", str(self.tmp_path / "cases.db"))
        params.setdefault("model_path", str(self.tmp_path / "model.json"))
        params.setdefault("status_period", 0.0)
        return self.add(LearnerNode(context=self.context, parameter_overrides=[
            Parameter(name, value=value) for name, value in params.items() if value is not None]))

    def robot(self, **params) -> SimulatedRobot:
        params.setdefault("rate", 200.0)
        return self.add(SimulatedRobot(context=self.context, parameter_overrides=[
            Parameter(name, value=value) for name, value in params.items()]), own_executor=True)

    def publisher(self, msg_type, topic):
        pub = self.client_node.create_publisher(msg_type, topic, QoSProfile(
            depth=100, reliability=ReliabilityPolicy.RELIABLE))
        wait_for(lambda: pub.get_subscription_count() > 0, what=f"a subscriber on {topic}")
        return pub

    def client(self, srv_type, name):
        client = self.client_node.create_client(srv_type, name)
        assert client.wait_for_service(timeout_sec=20.0), f"service {name} did not appear"
        return client

    def call(self, srv_type, name, timeout=60.0, **fields):
        return self.call_async(srv_type, name, **fields).result(timeout)

    def call_async(self, srv_type, name, **fields):
        """Send a request; returns a concurrent.futures-like waiter with .done() and .result(timeout)."""
        return Waiter(self.client(srv_type, name).call_async(srv_type.Request(**fields)))

    def learn(self, timeout=60.0, **fields) -> Learn.Response:
        return self.call(Learn, "/affordance_learner/learn", timeout, **fields)

    def predict(self, **fields) -> Predict.Response:
        return self.call(Predict, "/affordance_learner/predict", **fields)

    def close(self):
        for node, (executor, thread) in list(self.nodes.items()):
            if thread is not None:
                self.remove(node)
        self.executor.shutdown(timeout_sec=10.0)
        for node in reversed(list(self.nodes)):
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=10.0)


class Listener:
    """Keeps what arrives on a topic."""

    def __init__(self, ros, msg_type, topic, qos=10):
        self.messages, self.lock = [], threading.Lock()
        ros.client_node.create_subscription(msg_type, topic, self._take, qos)

    def _take(self, msg):
        with self.lock:
            self.messages.append(msg)

    def last(self):
        with self.lock:
            return self.messages[-1] if self.messages else None

    def all(self):
        with self.lock:
            return list(self.messages)


def start(executable, tmp_path, name, **params):
    """An installed executable as a process of its own (its output in ``tmp_path / f"{name}.log"``)."""
    log = open(tmp_path / f"{name}.log", "a")
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    args = [str(LIB / executable), "--ros-args"]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)


def stop(process, sig=signal.SIGINT, timeout=30.0):
    """Stop a process as Ctrl-C does; its exit status (SIGKILL, and an error, if it does not end in time)."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def stored_ids(db) -> set:
    """The trial ids in the case database ``db`` (none if it does not exist)."""
    if not db.exists():
        return set()
    with CaseStore(db, read_only=True) as store:
        return {r.trial_id for r in store.records()}


def stored_count(db) -> int:
    try:
        with CaseStore(db, read_only=True) as store:
            return store.count()
    except CaseStoreError:  # not created yet
        return 0


class Waiter:
    def __init__(self, future):
        self.future = future
        self._event = threading.Event()
        future.add_done_callback(lambda _: self._event.set())

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout):
        if not self._event.wait(timeout):
            raise AssertionError(f"no service response within {timeout} s")
        return self.future.result()


@pytest.fixture
def ros(tmp_path):
    harness = Ros(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


def sampled_records(n, seed=0, sigma=1.0, prefix="r", start=0.0, spacing=1.0, delay=0.0):
    """n trials from the montesano ground truth as the node stores them (for seeding a database): stamped
    ``start + spacing * k``, received ``delay`` after their stamp."""
    truth = benchmark_network("montesano", sigma, seed)
    rng = np.random.default_rng([seed, 7])
    codes = sample_values(truth, n, rng)
    records = []
    for k in range(n):
        parts = {"object": {}, "effect": {}}
        for i, v in enumerate(truth.variables):
            if v.group in parts:
                parts[v.group][v.sensor.name] = float(v.sensor.means[codes[k, i]] + sigma * rng.standard_normal())
        action = truth["Action"].values[codes[k, truth.index("Action")]]
        stamp = start + spacing * k
        records.append(Trial(f"{prefix}{k:05d}", action, parts["object"], parts["effect"],
                             stamp=stamp, received=stamp + delay).to_record("Action"))
    return records


def write_config(path, **learning):
    """The montesano configuration with a 'learning' block."""
    doc = json.loads(MONTESANO_CONFIG.read_text())
    doc["learning"] = learning
    path.write_text(json.dumps(doc))
    return path


def assert_distributions(response, expected_variables, config):
    """Marginals in the order asked, over the configured values, each normalised."""
    assert response.success, response.message
    assert [d.variable for d in response.marginals] == expected_variables
    for dist, best in zip(response.marginals, response.most_probable):
        assert list(dist.values) == list(config[dist.variable].values)
        probabilities = np.asarray(dist.probabilities)
        assert probabilities.shape == (len(dist.values),)
        assert np.all(probabilities >= 0) and abs(probabilities.sum() - 1.0) < 1e-9
        assert best in dist.values
    assert len(response.most_probable) == len(expected_variables)
    assert 0.0 < response.joint_probability <= 1.0
