"""Real nodes over DDS, in this process: the ``ros`` fixture of conftest.py.

Each test gets an rclpy context of its own, with the learner and a client node on one
SingleThreadedExecutor (as learner_node runs it) spinning in a thread.
"""

import os
import signal
import sys
import threading
import time
import traceback

import rclpy
from conftest import NodeProcess, exit_status, wait_for
from lifecycle_msgs.srv import GetState
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from affordance_ros.nodes.learner.learner_node import LearnerNode
from affordance_ros.nodes.qos import reply_qos
from affordance_ros.nodes.simulation.simulated_robot import SimulatedRobot
from affordance_ros.share import share_directory
from affordance_ros.srv import Learn, Predict, SelectAction, SuggestTrial

LIB = share_directory().parents[1] / "lib" / "affordance_ros"  # the installed executables
# Fast DDS drops the answer to a client whose reader the server has not matched yet ("failed to send response
# (timeout): client will not receive response", seen from a learner just started in another process, though
# wait_for_service had seen it): ``Ros.call`` sends a request again when no answer came, as planners are told to
# (docs/node.md), first after these seconds, then twice as long each time. Requests that change nothing: 2 s;
# ~/learn 15 s (longer than the tests' learns: a re-send while the first runs is refused, and counted).
ASKED_AGAIN_AFTER = {Predict: 2.0, SelectAction: 2.0, SuggestTrial: 2.0, GetState: 2.0, Learn: 15.0}


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
        self.clients = {}  # (service type, name) -> its client, made once: a new client's first request can be lost
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
            joined(thread)
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

    @staticmethod
    def wait_for_robot(robot: SimulatedRobot, timeout: float = 60.0) -> None:
        """Wait for the robot's last trial to be answered; if it is not within ``timeout`` seconds, fail saying how
        far it got and what it still waits for (a learner's topics not discovered yet, or confirmations)."""
        try:
            wait_for(lambda: robot.done.done(), timeout=timeout, what="the simulated robot to finish")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}: {robot.published} of {robot.count or 'endless'} trials published; "
                                 f"waiting for: {robot.missing_subscribers() or 'confirmations'}") from None

    def publisher(self, msg_type, topic):
        pub = self.client_node.create_publisher(msg_type, topic, QoSProfile(
            depth=100, reliability=ReliabilityPolicy.RELIABLE))
        wait_for(lambda: pub.get_subscription_count() > 0, what=f"a subscriber on {topic}")
        return pub

    def client(self, srv_type, name):
        """The client of service ``name``, made at its first use (a request sent before the service's server has
        matched a new client's request topic is lost, though wait_for_service saw the server)."""
        client = self.clients.get((srv_type, name))
        if client is None:
            client = self.client_node.create_client(srv_type, name, qos_profile=reply_qos())
            self.clients[(srv_type, name)] = client
        assert client.wait_for_service(timeout_sec=20.0), f"service {name} did not appear"
        return client

    def action_client(self, action_type, name: str) -> ActionClient:
        """An ActionClient on a node of its own, given to the spinning executor only once made: rclpy's
        ActionClient adds itself to its node before it makes its lock, and an executor that looks at it
        in between dies (AttributeError '_lock') and answers nothing more."""
        node = rclpy.create_node(f"test_action_client_{len(self.nodes)}", context=self.context)
        client = ActionClient(node, action_type, name)
        self.add(node)
        return client

    def call(self, srv_type, name, timeout=60.0, **fields):
        """The answer to a request, sent again when none came (``ASKED_AGAIN_AFTER``): the first answer, but for a
        re-sent learn's 'already running' (the first send's learn runs; its answer is awaited, or a later send's)."""
        client, request = self.client(srv_type, name), srv_type.Request(**fields)
        wait = ASKED_AGAIN_AFTER.get(srv_type)
        if wait is None:
            return Waiter(client.call_async(request)).result(timeout)
        answered, sent = threading.Event(), []

        def send():
            future = client.call_async(request)
            future.add_done_callback(lambda _: answered.set())
            sent.append(future)
        deadline, next_send = time.monotonic() + timeout, time.monotonic() + wait
        send()
        try:
            while True:
                answered.clear()
                for k, future in enumerate(sent):
                    if future.done() and not (k and srv_type is Learn and "already running" in future.result().message):
                        return future.result()
                now = time.monotonic()
                if now >= deadline:
                    raise AssertionError(f"no service response within {timeout} s ({len(sent)} requests sent)")
                if now >= next_send:
                    send()
                    wait *= 2
                    next_send = now + wait
                answered.wait(min(next_send, deadline) - now)
        finally:
            for future in sent:
                if not future.done():
                    client.remove_pending_request(future)

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
        joined(self._thread)
        self.context.destroy()  # (its DDS participant goes once nothing holds it: conftest.py's collect_rclpy)


def joined(thread: threading.Thread, timeout: float = 10.0) -> None:
    """Join an executor's spin thread; one still running after ``timeout`` seconds fails the test with the stack
    it is in (a teardown that hangs says where)."""
    thread.join(timeout=timeout)
    frame = sys._current_frames().get(thread.ident) if thread.is_alive() else None
    if frame is not None:
        stack = "".join(traceback.format_stack(frame))
        raise AssertionError(f"an executor's spin thread still runs {timeout} s after its shutdown:\n{stack}")


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
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    args = [str(LIB / executable), "--ros-args"]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    return NodeProcess(args, tmp_path / f"{name}.log", "a", env=env)


def stop(process, sig=signal.SIGINT, timeout=30.0):
    """Stop a process as Ctrl-C does; its exit status (SIGABRT, SIGKILL, and an error, if it does not end in
    time: ``exit_status``)."""
    if process.poll() is None:
        process.send_signal(sig)
    return exit_status(process, timeout)


def lose_the_first_answer(monkeypatch, cls, method: str) -> list:
    """``cls.method`` (a request's send) whose first request is sent and served, but whose answer never comes back,
    as Fast DDS loses the answer to a caller the server has not matched yet; the futures of the requests sent."""
    original, sent = getattr(cls, method), []

    def send(self, *args, **kwargs):
        sent.append(original(self, *args, **kwargs))
        return Future() if len(sent) == 1 else sent[-1]

    monkeypatch.setattr(cls, method, send)
    return sent
