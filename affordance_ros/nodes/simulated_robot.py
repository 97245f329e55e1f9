"""A simulated robot: publishes trials sampled from a ground-truth affordance network, or from a scenario.

Each trial is an Action (the label), the object features and the effects (noisy sensor
readings ~ Normal(5 * value index, sigma)), the three stamped with the time the trial
starts. With ``scenario`` tools or hands the trials come from the realistic scenarios of
``core.scenarios`` instead (tool and shape descriptors, 2-D displacements; config/tools.json,
config/hands.json). It waits until every topic has a subscriber, so that no trial is lost, and
exits after ``count`` trials once they are all acknowledged (count 0: runs until stopped).
The publishers are reliable and keep all by default: while a subscriber is behind,
publishing waits (the robot slows down to the subscriber's pace) instead of dropping trials.
"""

from __future__ import annotations

import os
import time

import numpy as np
import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.task import Future

from ..core import SENSOR_GROUPS, AffordanceNetwork
from ..core.ground_truth import NETWORKS, benchmark_network, sample_values
from ..core.scenarios import FEATURES, SCENARIOS, simulate
from ..msg import Action, Features
from .qos import KEEP_ALL, publish_waiting, trial_qos

NODE_NAME = "simulated_robot"
_BATCH = 256  # trials sampled at a time


def trial_networks() -> list[str]:
    """The benchmark networks a robot can act in: those with an action variable."""
    return sorted(name for name, spec in NETWORKS.items() if any(g == "action" for _, g, _ in spec["variables"]))


class SimulatedRobot(Node):

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self._declare_parameters()
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        network = param("network")
        if network not in trial_networks():
            self.destroy_node()
            raise ValueError(f"network '{network}' is not one of {trial_networks()}")
        self.truth: AffordanceNetwork = benchmark_network(network, param("sigma"), param("seed"))
        self.count = param("count")
        self.min_subscribers = param("min_subscribers")
        self.use_trial_ids = param("use_trial_ids")
        self.trial_id_prefix = param("trial_id_prefix") or f"sim-{time.strftime('%Y%m%dT%H%M%S')}-{os.urandom(3).hex()}"
        # The trials come from another random stream than the ground truth's CPTs.
        self._rng = np.random.default_rng([param("seed"), 1])
        self._action = self.truth.index(self.truth.group("action")[0])
        self._sensors = {kind: [self.truth.index(name) for name in self.truth.group(kind)]
                         for kind in SENSOR_GROUPS}
        self._batch = np.empty((0, len(self.truth)), dtype=np.int64)
        self.scenario = param("scenario")
        if self.scenario not in ("network", *SCENARIOS):
            self.destroy_node()
            raise ValueError(f"scenario '{self.scenario}' is not one of {['network', *SCENARIOS]}")
        self._scenario_trials = []
        self.published = 0
        self.publish_waits = 0  # publish attempts that found the history full (qos_depth 0)
        self.done = Future()  # completed once the last trial is acknowledged
        self._waiting_logged = False

        qos = trial_qos(param("qos_depth"))
        self._outputs = {
            "action": self.create_publisher(Action, "action", qos),
            "object": self.create_publisher(Features, "object_features", qos),
            "effect": self.create_publisher(Features, "effects", qos),
        }
        self._timer = self.create_timer(1.0 / param("rate"), self._publish_trial)
        self.get_logger().info(
            (f"ground truth '{network}' (sigma {param('sigma'):g}, seed {param('seed')}); " if self.scenario == "network"
             else f"scenario '{self.scenario}' (seed {param('seed')}); ")
            + f"{self.count or 'endless'} trials at {param('rate'):g} Hz, "
            + (f"trial ids '{self.trial_id_prefix}-NNNNNN'" if self.use_trial_ids else "paired by stamp"))

    def _declare_parameters(self) -> None:
        def describe(text, **ranges):
            return ParameterDescriptor(description=text, read_only=True, **ranges)

        self.declare_parameter("network", "montesano", describe(
            f"Ground-truth network, one of {trial_networks()}.", additional_constraints=f"one of {trial_networks()}"))
        self.declare_parameter("scenario", "network", describe(
            f"Where trials come from: 'network' (the ground-truth 'network') or a realistic scenario, one of "
            f"{list(SCENARIOS)} (learn it with config/<scenario>.json).",
            additional_constraints=f"one of {['network', *SCENARIOS]}"))
        self.declare_parameter("sigma", 1.0, describe(
            "Standard deviation of the sensor noise; readings ~ Normal(5 * value index, sigma).",
            floating_point_range=[FloatingPointRange(from_value=1e-6, to_value=1e6)]))
        self.declare_parameter("seed", 0, describe(
            "Seed of the ground truth's CPTs (Dirichlet(1)) and of the trials."))
        self.declare_parameter("rate", 20.0, describe(
            "Trials per second.", floating_point_range=[FloatingPointRange(from_value=0.001, to_value=10000.0)]))
        self.declare_parameter("count", 300, describe(
            "Trials to publish before exiting; 0: publish until stopped.",
            integer_range=[IntegerRange(from_value=0, to_value=2**31 - 1)]))
        self.declare_parameter("use_trial_ids", True, describe(
            "Give the three messages of a trial the same trial_id; false: leave it empty (pairing by stamp)."))
        self.declare_parameter("trial_id_prefix", "", describe(
            "Trial ids are '<prefix>-<number>'; empty: 'sim-', the start time and a random tag, so that runs "
            "do not collide."))
        self.declare_parameter("min_subscribers", 1, describe(
            "Publish only once each topic has this many subscribers (so that no trial is lost).",
            integer_range=[IntegerRange(from_value=0, to_value=1000)]))
        self.declare_parameter("qos_depth", KEEP_ALL, describe(
            "History of the reliable publishers. 0 (default): keep all, so publishing waits while a "
            "subscriber is behind instead of dropping trials. N > 0: keep the last N messages per topic.",
            integer_range=[IntegerRange(from_value=0, to_value=100000)]))

    def _subscribers_ready(self) -> bool:
        return all(p.get_subscription_count() >= self.min_subscribers for p in self._outputs.values())

    def _publish_trial(self) -> None:
        if self.count and self.published >= self.count:
            return
        if not self._subscribers_ready():
            if not self._waiting_logged:
                self.get_logger().info("waiting for subscribers on action, object_features and effects")
                self._waiting_logged = True
            return
        label, readings = self._next_trial()
        stamp = self.get_clock().now().to_msg()
        trial_id = f"{self.trial_id_prefix}-{self.published:06d}" if self.use_trial_ids else ""

        action = Action(trial_id=trial_id, action=label)
        action.header.stamp = stamp
        self._publish("action", action)
        for kind in SENSOR_GROUPS:
            msg = Features(trial_id=trial_id, names=list(readings[kind]), values=list(readings[kind].values()))
            msg.header.stamp = stamp
            self._publish(kind, msg)
        self.published += 1
        if self.count and self.published == self.count:
            self._timer.cancel()
            self._finish()

    def _next_trial(self) -> tuple[str, dict]:
        """(action label, {kind: {reading name: value}}) of the next trial."""
        if self.scenario != "network":
            if not self._scenario_trials:
                columns = simulate(self.scenario, 1, int(self._rng.integers(2**31)))
                self._scenario_trials = [
                    (str(columns["Action"][k]), {kind: {n: float(columns[n][k]) for n in FEATURES[self.scenario][kind]}
                                                 for kind in SENSOR_GROUPS})
                    for k in range(len(columns["trial_id"]))]
            return self._scenario_trials.pop(0)
        if not len(self._batch):
            self._batch = sample_values(self.truth, _BATCH, self._rng)
        codes, self._batch = self._batch[0], self._batch[1:]
        readings = {}
        for kind in SENSOR_GROUPS:
            readings[kind] = {}
            for i in self._sensors[kind]:
                sensor = self.truth.variables[i].sensor
                readings[kind][sensor.name] = float(sensor.means[codes[i]]
                                                    + sensor.stddevs[codes[i]] * self._rng.standard_normal())
        return self.truth.variables[self._action].values[codes[self._action]], readings

    def _publish(self, kind: str, msg) -> None:
        """Publish; while a subscriber is behind (keep-all history full) wait: trials are delayed, never lost."""
        self.publish_waits += publish_waiting(self._outputs[kind], msg, self.context.ok, on_wait=self._log_wait)

    def _log_wait(self) -> None:
        self.get_logger().warning("a subscriber is behind: waiting to publish (the history is full)",
                                  throttle_duration_sec=5.0)

    def _finish(self) -> None:
        """Wait until every subscriber has acknowledged every trial (exiting earlier would lose the
        trials still queued for a subscriber that is behind); stopping the node ends the wait."""
        started = time.monotonic()
        while not self._all_acked():
            if not self.context.ok():
                return
            self.get_logger().info(f"waiting for subscribers to acknowledge the last trials "
                                   f"({time.monotonic() - started:.0f} s)", throttle_duration_sec=10.0)
        self.get_logger().info(f"published {self.published} trials"
                               + (f" (waited {self.publish_waits} times for a subscriber to catch up)"
                                  if self.publish_waits else ""))
        self.done.set_result(self.published)

    def _all_acked(self) -> bool:
        try:
            return all(p.wait_for_all_acked(Duration(seconds=1.0)) for p in self._outputs.values())
        except _rclpy.RCLError:  # the context was shut down meanwhile
            return not self.context.ok()


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        node = SimulatedRobot()
    except ValueError as exc:
        rclpy.logging.get_logger(NODE_NAME).fatal(str(exc))
        rclpy.try_shutdown()
        return 1
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin_until_future_complete(node.done)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
