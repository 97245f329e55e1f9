"""A simulated robot: publishes trials sampled from a ground-truth affordance network, or from a scenario.

Each trial is an Action (the label), the object features and the effects (noisy sensor
readings ~ Normal(5 * value index, sigma)), the three stamped with the time the trial
starts. ``design`` says how the robot picks its objects and actions in a ground truth: ``balanced`` (the
default) as an experimenter does, every action on every kind of object equally often (in rounds of each pair
once, shuffled), or ``truth``, as the ground truth's own CPTs draw them (Dirichlet(1) rows: some kinds and
actions almost never; the paper's procedure). With ``scenario`` tools or hands the trials come from the
realistic scenarios of ``core.scenarios`` instead (tool and shape descriptors, 2-D displacements; config/tools.json,
config/hands.json). It waits until the nodes named in ``wait_for`` (by default the learner) subscribe to
every topic and every topic has ``min_subscribers`` subscribers, so that no trial is lost (a
recorder that is up first is not enough), and exits after ``count`` trials once the learner has
confirmed them all (``confirm``, with trial ids: ``TrialPublisher`` sends a trial again while it is
unconfirmed, so a learner that crashed and restarted still gets every one; when ``wait_for`` names
the learner, publishing also waits for its answers' topic), or else once they are all acknowledged
by DDS (count 0: runs until stopped). With no learner publishing the answers when publishing starts
(a robot recorded into a bag, ``wait_for:=affordance_recorder``), nothing would confirm: the robot
then says so and goes without confirmations. ``seed`` -1 (the default) draws a random seed for
the trials, logged, so that two runs publish different readings; the ground truth's CPTs come
from ``truth_seed`` (default: ``seed`` if given, else 0: the same world every run).
The publishers are reliable and keep all by default: while a subscriber is behind,
publishing waits (the robot slows down to the subscriber's pace) instead of dropping trials.

``exploration`` says how the robot picks its trials: ``random`` (the default) draws the action and the
object as the world makes them; ``active`` sees ``candidates`` objects at a time, asks the learner's
``~/suggest_trial`` (``suggest_service``) which to act on and how, and does that trial
(``exploration``; before the learner has a model it answers with a round robin); ``task`` has a job: the
effect ``wanted_effect`` on objects as they come, each action the one the learner's ``~/select_action`` ranks
first by ``strategy``, and it logs its successes and its regret against the ground truth's best action
(``robot_task``).
"""

from __future__ import annotations

import os
import time

import numpy as np
from rcl_interfaces.msg import IntegerRange, ParameterDescriptor
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.task import Future

from ...core import SENSOR_GROUPS, AffordanceNetwork
from ...core.ground_truth import NETWORKS, benchmark_network
from ...core.predict import STRATEGIES
from ...core.scenarios import FEATURES, SCENARIOS, simulate
from ...core.worlds import DESIGNS, NetworkWorld, Objects, ScenarioWorld, designed
from ...data.spool import SpoolError
from ...data.trial import trial_topics
from ...msg import Action, Features
from .. import shutdown
from ..command_line import check_command_line, values_checked
from ..contract import KEEP_ALL, STATUS_TOPIC, robot_name_problem, trial_qos
from ..number_parameters import accept_integers, number_descriptor, number_value
from ..qos import TRIAL_HEARTBEAT_PERIOD, dds_profiles, publish_waiting
from ..robot.gates import SpoolGate, StartGate
from ..robot.trial_publisher import (
    DEFAULT_MAX_RESENDS,
    DEFAULT_RESEND_TIMEOUT,
    DEFAULT_SPOOL_LIMIT,
    SpoolFull,
    TrialPublisher,
)
from .robot_task import EXPLORATION, check_exploration, trial_chooser, wanted_effect

NODE_NAME = "simulated_robot"
_BATCH = 256  # trials sampled at a time
MAX_TRIALS_PER_TICK = 20  # trials sent in one timer callback at most (those due by now, when the timer is late)
# double parameters (integers accepted) and their ranges
_NUMBERS = {"sigma": (1e-6, 1e6), "rate": (0.001, 10000.0), "resend_timeout": (0.01, 3600.0),
            "suggest_timeout": (0.01, 3600.0)}
SUGGEST_SERVICE = "/affordance_learner/suggest_trial"


def trial_networks() -> list[str]:
    """The benchmark networks a robot can act in: those with an action variable."""
    return sorted(name for name, spec in NETWORKS.items() if any(g == "action" for _, g, _ in spec["variables"]))


class TrialSampler:
    """The robot's trials, without ROS: sampled from the ground truth ``truth`` (readings ~ Normal(sensor
    mean of the value, its stddev)), its objects and actions by ``design`` (``core.worlds.DESIGNS``), or from a
    ``scenario`` of ``core.scenarios``; ``seed`` picks them. ``next_trial`` draws a whole trial; ``candidates``
    and ``act`` let the robot choose the object and the action (``actions``) itself, drawn from ``rng``."""

    def __init__(self, truth: AffordanceNetwork, scenario: str, seed: int, design: str = "balanced"):
        self.truth = truth
        self.scenario = scenario
        # The trials come from another random stream than the ground truth's CPTs.
        self.rng = np.random.default_rng([seed, 1])
        self.world = NetworkWorld(truth, design) if scenario == "network" else ScenarioWorld(scenario)
        self.actions = self.world.actions
        self._action = truth.index(truth.group("action")[0])
        self._sensors = {kind: [truth.index(name) for name in truth.group(kind)] for kind in SENSOR_GROUPS}
        self._batch = np.empty((0, len(truth)), dtype=np.int64)
        self._scenario_trials = []

    def next_trial(self) -> tuple[str, dict]:
        """(action label, {kind: {reading name: value}}) of the next trial."""
        if self.scenario != "network":
            if not self._scenario_trials:
                columns = simulate(self.scenario, 1, int(self.rng.integers(2**31)))
                self._scenario_trials = [
                    (str(columns["Action"][k]), {kind: {n: float(columns[n][k]) for n in FEATURES[self.scenario][kind]}
                                                 for kind in SENSOR_GROUPS})
                    for k in range(len(columns["trial_id"]))]
            return self._scenario_trials.pop(0)
        if not len(self._batch):
            self._batch = self.world.trials(_BATCH, self.rng)
        codes, self._batch = self._batch[0], self._batch[1:]
        readings = {}
        for kind in SENSOR_GROUPS:
            readings[kind] = {}
            for i in self._sensors[kind]:
                sensor = self.truth.variables[i].sensor
                readings[kind][sensor.name] = float(sensor.means[codes[i]]
                                                    + sensor.stddevs[codes[i]] * self.rng.standard_normal())
        return self.truth.variables[self._action].values[codes[self._action]], readings

    def candidates(self, n: int) -> Objects:
        """``n`` objects in view, as the world brings them."""
        return self.world.objects(n, self.rng)

    def act(self, objects: Objects, index: int, action: str) -> tuple[str, dict]:
        """(action, {kind: {reading name: value}}) of the trial ``action`` on object ``index`` of ``objects``."""
        chosen = objects.take([index])
        effects = self.world.act(chosen, [action], self.rng)
        return action, {"object": chosen.sensors(0), "effect": {name: float(x[0]) for name, x in effects.items()}}


class TrialRate:
    """Trials at ``rate`` per second: how many are due by now, from the first one sent (``sent`` since)."""

    def __init__(self, rate: float):
        self.rate = rate
        self.first: float | None = None  # when the first trial was sent (monotonic)
        self.sent = 0

    def due(self, now: float) -> int:
        if self.first is None:
            self.first = now
            self.sent = 0
        return int((now - self.first) * self.rate) + 1 - self.sent


class SimulatedRobot(Node):
    """The simulated robot: see the module's docstring. ``truth`` is its world, the ground truth as its trials
    follow it (``core.worlds.designed``: design 'balanced' makes its action and object CPTs uniform),
    ``published`` the trials sent, ``trials`` the ``TrialPublisher`` keeping them until confirmed (None without
    confirmations), ``done`` a future completed with the number published once the last is confirmed or
    acknowledged."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        try:
            param = declare_robot_parameters(self)
            network = param["network"]
            if network not in trial_networks():
                raise ValueError(f"network '{network}' is not one of {trial_networks()}")
            if param["scenario"] not in ("network", *SCENARIOS):
                raise ValueError(f"scenario '{param['scenario']}' is not one of {['network', *SCENARIOS]}")
            check_exploration(param)
            truth_seed = param["truth_seed"] if param["truth_seed"] >= 0 else max(param["seed"], 0)
            self.truth: AffordanceNetwork = designed(benchmark_network(network, param["sigma"], truth_seed),
                                                     param["design"])
            if param["exploration"] == "task":
                wanted_effect(param["wanted_effect"], self.truth)
        except BaseException:  # (a value rclpy refuses too: values_checked)
            self.destroy_node()
            raise
        self.seed = param["seed"] if param["seed"] >= 0 else int.from_bytes(os.urandom(4), "little") >> 1
        self.count = param["count"]
        self.min_subscribers = param["min_subscribers"]
        self.wait_for = [name.strip() for name in param["wait_for"].split(",") if name.strip()]
        self.use_trial_ids = param["use_trial_ids"]
        self.trial_id_prefix = param["trial_id_prefix"] or f"sim-{time.strftime('%Y%m%dT%H%M%S')}-{os.urandom(3).hex()}"
        self.scenario = param["scenario"]
        self.sampler = TrialSampler(self.truth, self.scenario, self.seed, param["design"])
        # what chooses the trials: an ActiveExplorer (exploration 'active'), a TaskRunner ('task'); None: random
        self.explorer = trial_chooser(self, param, self.sampler, ChoosersOutlet(self))
        self.published = 0
        self.publish_waits = 0  # publish attempts that found the history full (qos_depth 0)
        self.done = Future()  # completed once the last trial is acknowledged
        self._finish_started = None  # when the last trial was sent (waiting for confirmations from then)
        self._confirmations = None  # the timer checking them

        self.trials = None  # the TrialPublisher when trials are confirmed
        # the learner that answers on status_topic ('<learner>/stored'), when wait_for names it
        self._learner = next((name for name in self.wait_for if name.strip("/").split("/")[-1]
                              == param["status_topic"].strip("/").split("/")[-2:][0]), None)
        self.spool_gate = SpoolGate(self.get_logger())
        if param["confirm"] and self.use_trial_ids:
            self.trials = TrialPublisher(self, param["resend_timeout"], param["qos_depth"], param["status_topic"],
                                         max_resends=param["max_resends"], robot_name=param["robot_name"],
                                         spool_path=param["spool_path"] or None, spool_limit=param["spool_limit"])
            self.trials.link.listeners.append(lambda: self.gate.poke())
            self._outputs = self.trials.publishers
        else:
            qos, topics = trial_qos(param["qos_depth"]), trial_topics(param["robot_name"])
            events = PublisherEventCallbacks(matched=lambda info: self.gate.poke())
            self._outputs = {kind: self.create_publisher(Action if kind == "action" else Features, topic, qos,
                                                         event_callbacks=events) for kind, topic in topics.items()}
        self.rate = TrialRate(param["rate"])
        self._timer = self.create_timer(1.0 / self.rate.rate, self._publish_trial)
        self._timer.cancel()  # runs once what publishing waits for is there
        self.gate = StartGate(self, self.missing_subscribers, self._start, f"{', '.join(self.wait_for)} subscribed "
                              "to every topic" if self.wait_for else "subscribers are there")
        self.get_logger().info(
            (f"ground truth '{network}' (sigma {param['sigma']:g}, truth_seed {truth_seed}), "
             + ("every action on every kind of object equally often (design balanced); " if param["design"] ==
                "balanced" else "actions and objects as its CPTs draw them (design truth); ")
             if self.scenario == "network" else f"scenario '{self.scenario}'; ")
            + f"trials seeded with {self.seed}"
            + (" (random; seed:=%d repeats them)" % self.seed if param["seed"] < 0 else "")
            + f"; {self.count or 'endless'} trials at {param['rate']:g} Hz, "
            + (f"trial ids '{self.trial_id_prefix}-NNNNNN'" if self.use_trial_ids else "paired by stamp")
            + (f", each kept until the learner confirms it on {param['status_topic']}" if self.trials else "")
            + (f" (and in the spool {param['spool_path']})" if self.trials and self.trials.spool else "")
            + (f"; {self.explorer.describe()}" if self.explorer else ""))

    def _subscribers_ready(self) -> bool:
        return all(p.get_subscription_count() >= self.min_subscribers for p in self._outputs.values())

    def missing_subscribers(self) -> list[str]:
        """What publishing still waits for: the ``wait_for`` nodes not subscribed to a topic, or too few
        subscribers on a topic (empty when ready)."""
        missing = []
        for publisher in self._outputs.values():
            topic = publisher.topic_name
            subscribed = {(info.node_name, f"{info.node_namespace.rstrip('/')}/{info.node_name}")
                          for info in self.get_subscriptions_info_by_topic(topic)}
            missing += [f"{name} on {topic}" for name in self.wait_for
                        if not any(name in pair for pair in subscribed)]
            if publisher.get_subscription_count() < self.min_subscribers:
                missing.append(f"{self.min_subscribers} subscriber(s) on {topic}")
        if self.trials is not None and self._learner and not self.trials.learner_present():
            missing.append(f"{self._learner}'s answers (status_topic)")
        return missing

    def _start(self) -> None:
        if self.trials is not None and not self.trials.learner_present():
            self.get_logger().info("no learner answers on status_topic: publishing without confirmations "
                                   "(done once every subscriber acknowledged every trial)")
            self.trials.destroy()
            self.trials = None
        self._timer.reset()
        self._publish_trial()

    def _publish_trial(self) -> None:
        if self.count and self.published >= self.count or not self.spool_gate.room(self.trials):
            return
        if self.trials is None and not self._subscribers_ready():  # a subscriber left: pause (trials are not kept)
            return
        if self.explorer is not None:
            self.explorer.step()  # the trial is sent when the learner has chosen it
            return
        # every trial due by now (a timer faster than the executor fires late): the rate holds at high rates
        for _ in range(max(1, min(self.rate.due(time.monotonic()), MAX_TRIALS_PER_TICK))):
            self.send_trial(*self.sampler.next_trial())
            self.rate.sent += 1
            if (self.count and self.published >= self.count or self.trials is None and not self._subscribers_ready()
                    or not self.spool_gate.room(self.trials)):
                break

    def send_trial(self, label: str, readings: dict) -> None:
        """Publish one trial: the action ``label`` and the ``readings`` {kind: {reading name: value}}."""
        if self.count and self.published >= self.count:
            return
        stamp = self.get_clock().now().to_msg()
        trial_id = f"{self.trial_id_prefix}-{self.published:06d}" if self.use_trial_ids else ""

        action = Action(trial_id=trial_id, action=label)
        action.header.stamp = stamp
        parts = [("action", action)]
        for kind in SENSOR_GROUPS:
            msg = Features(trial_id=trial_id, names=list(readings[kind]), values=list(readings[kind].values()))
            msg.header.stamp = stamp
            parts.append((kind, msg))
        if self.trials is not None:
            try:
                self.trials.send(trial_id, [(self._outputs[kind], msg) for kind, msg in parts])
            except SpoolFull as exc:  # (an explorer's trial chosen while the spool filled: not done)
                self.get_logger().warning(str(exc), throttle_duration_sec=5.0)
                return
        else:
            for kind, msg in parts:
                self._publish(kind, msg)
        self.published += 1
        if self.count and self.published == self.count:
            self._timer.cancel()
            self._finish()

    def _publish(self, kind: str, msg) -> None:
        """Publish; while a subscriber is behind (keep-all history full) wait: trials are delayed, never lost."""
        self.publish_waits += publish_waiting(self._outputs[kind], msg, self.context.ok, on_wait=self._log_wait)

    def _log_wait(self) -> None:
        self.get_logger().warning("a subscriber is behind: waiting to publish (the history is full)",
                                  throttle_duration_sec=5.0)

    def _finish(self) -> None:
        """Wait until the learner confirmed every trial (or, without confirmations, every subscriber
        acknowledged every trial: exiting earlier would lose the trials still queued for a subscriber
        that is behind); stopping the node ends the wait."""
        if self.trials is not None:
            self._finish_started = time.monotonic()
            self._confirmations = self.create_timer(0.05, self._check_confirmed)
            return
        started = time.monotonic()
        while not self._all_acked():
            if not self.context.ok():
                return
            self.get_logger().info(f"waiting for subscribers to acknowledge the last trials "
                                   f"({time.monotonic() - started:.0f} s)", throttle_duration_sec=10.0)
        self.get_logger().info(f"published {self.published} trials" + (
            f" (waited {self.publish_waits} times for a subscriber to catch up)" if self.publish_waits else "")
            + (f"; {self.explorer.summary()}" if self.explorer else ""))
        self.done.set_result(self.published)

    def _check_confirmed(self) -> None:
        waiting = self.trials.pending
        if waiting:
            self.get_logger().info(f"waiting for the learner to confirm {waiting} trials "
                                   f"({time.monotonic() - self._finish_started:.0f} s)", throttle_duration_sec=10.0)
            return
        self._confirmations.cancel()
        self.publish_waits += self.trials.publish_waits
        self.get_logger().info(f"published {self.published} trials; {self.trials.summary()}"
                               + (f"; {self.explorer.summary()}" if self.explorer else ""))
        self.trials.destroy()  # (its spool synced and closed)
        self.done.set_result(self.published)

    def _all_acked(self) -> bool:
        try:
            return all(p.wait_for_all_acked(Duration(seconds=1.0)) for p in self._outputs.values())
        except _rclpy.RCLError:  # the context was shut down meanwhile
            return not self.context.ok()


class ChoosersOutlet:
    """What a trial chooser (``exploration``, ``robot_task``) has of the ``robot``: a trial it chose is done and
    sent, its log lines are the robot's (warnings at most every 5 s), and it sees how many trials wait for their
    confirmation."""

    def __init__(self, robot: SimulatedRobot):
        self.robot = robot

    @property
    def pending(self) -> int:
        return self.robot.trials.pending if self.robot.trials else 0

    def send(self, action: str, readings: dict) -> None:
        self.robot.send_trial(action, readings)

    def log(self, level: str, message: str) -> None:
        if level == "warning":
            self.robot.get_logger().warning(message, throttle_duration_sec=5.0)
        else:
            self.robot.get_logger().info(message)


def declare_robot_parameters(node: Node) -> dict:
    """Declare the robot's parameters on ``node``; their values (the double ones checked: ValueError)."""
    def describe(text, **ranges):
        return ParameterDescriptor(description=text, read_only=True, **ranges)

    node.declare_parameter("network", "montesano", describe(
        f"Ground-truth network, one of {trial_networks()}.", additional_constraints=f"one of {trial_networks()}"))
    node.declare_parameter("scenario", "network", describe(
        f"Where trials come from: 'network' (the ground-truth 'network') or a realistic scenario, one of "
        f"{list(SCENARIOS)} (learn it with config/<scenario>.json).",
        additional_constraints=f"one of {['network', *SCENARIOS]}"))
    node.declare_parameter("design", "balanced", describe(
        "How the robot picks its objects and actions in the ground truth (scenario 'network'; with exploration "
        "'active' or 'task', the objects in view): 'balanced', every action on every kind of object equally often "
        "(in rounds of each pair once, shuffled), or 'truth', as the ground truth's CPTs draw them (some kinds and "
        "actions almost never).", additional_constraints=f"one of {list(DESIGNS)}"))
    node.declare_parameter("sigma", 1.0, number_descriptor(
        "Standard deviation of the sensor noise; readings ~ Normal(5 * value index, sigma).", *_NUMBERS["sigma"]))
    node.declare_parameter("seed", -1, describe(
        "Seed of the trials (and of the ground truth when truth_seed is -1); -1: a random seed, logged.",
        integer_range=[IntegerRange(from_value=-1, to_value=2**31 - 1)]))
    node.declare_parameter("truth_seed", -1, describe(
        "Seed of the ground truth's CPTs (Dirichlet(1)); -1: seed if it is given, else 0 (the same world "
        "every run).", integer_range=[IntegerRange(from_value=-1, to_value=2**31 - 1)]))
    node.declare_parameter("rate", 20.0, number_descriptor("Trials per second.", *_NUMBERS["rate"]))
    node.declare_parameter("count", 300, describe(
        "Trials to publish before exiting; 0: publish until stopped.",
        integer_range=[IntegerRange(from_value=0, to_value=2**31 - 1)]))
    node.declare_parameter("use_trial_ids", True, describe(
        "Give the three messages of a trial the same trial_id; false: leave it empty (pairing by stamp)."))
    node.declare_parameter("trial_id_prefix", "", describe(
        "Trial ids are '<prefix>-<number>'; empty: 'sim-', the start time and a random tag, so that runs "
        "do not collide."))
    node.declare_parameter("min_subscribers", 1, describe(
        "Publish only once each topic has this many subscribers (so that no trial is lost).",
        integer_range=[IntegerRange(from_value=0, to_value=1000)]))
    node.declare_parameter("wait_for", "affordance_learner", describe(
        "Publish only once these nodes (comma-separated names, or /namespace/name) subscribe to every "
        "topic; empty: wait for min_subscribers only."))
    node.declare_parameter("confirm", True, describe(
        "With trial ids and a learner answering on status_topic when publishing starts: keep every trial until "
        "the learner confirms it, send it again after resend_timeout, and exit only once all are answered. "
        "false (or no learner, e.g. only a recorder): exit once DDS acknowledged them (a learner that crashes "
        "meanwhile loses those it had not stored)."))
    node.declare_parameter("resend_timeout", DEFAULT_RESEND_TIMEOUT, number_descriptor(
        "Seconds a trial waits for its confirmation before it is sent again (see TrialPublisher); each further "
        "re-send waits twice as long, up to 8 times this.", *_NUMBERS["resend_timeout"]))
    node.declare_parameter("max_resends", DEFAULT_MAX_RESENDS, describe(
        "Re-sends of one trial without an answer before it is given up (logged, and counted in the summary).",
        integer_range=[IntegerRange(from_value=0, to_value=1000000)]))
    node.declare_parameter("spool_path", "", describe(
        "With confirmations: a file (made if missing) where the trials not yet confirmed are kept too, so that a "
        "robot restarted before the learner confirmed them (an outage, a crash) sends them again once it is there; "
        "empty: kept in memory only. One robot process per spool."))
    node.declare_parameter("spool_limit", DEFAULT_SPOOL_LIMIT, describe(
        "With confirmations: trials waiting for the learner's confirmation at most; then the robot says so and "
        "takes no new trial until the learner confirms some (none is dropped).",
        integer_range=[IntegerRange(from_value=1, to_value=100_000_000)]))
    node.declare_parameter("status_topic", STATUS_TOPIC, describe(
        "Where the learner confirms trials (its ~/stored)."))
    node.declare_parameter("exploration", "random", describe(
        "How trials are chosen: 'random' (the action and the object as they come), 'active' (the learner's "
        "suggest_service chooses among 'candidates' objects in view) or 'task' (objects as they come, each action "
        "the one learner's ~/select_action ranks first for wanted_effect by strategy; the robot logs its successes "
        "and its regret against the ground truth's best action).", additional_constraints="one of "
        f"{list(EXPLORATION)}"))
    node.declare_parameter("candidates", 4, describe(
        "With exploration 'active': the objects in view at each trial, among which the learner chooses.",
        integer_range=[IntegerRange(from_value=1, to_value=1000)]))
    node.declare_parameter("suggest_service", SUGGEST_SERVICE, describe(
        "With exploration 'active': the learner's SuggestTrial service."))
    node.declare_parameter("suggest_timeout", 5.0, number_descriptor(
        "With exploration 'active': seconds without an answer from suggest_service before the question is asked "
        "again (an answer can be lost: Fast DDS drops one sent before the learner discovered the robot).",
        *_NUMBERS["suggest_timeout"]))
    node.declare_parameter("wanted_effect", "ObjVel=fast", describe(
        "With exploration 'task': the effect wanted of every trial, VARIABLE=LABEL of the ground truth's effects "
        "(several: comma-separated, all wanted at once)."))
    node.declare_parameter("strategy", "expected", describe(
        "With exploration 'task': how ~/select_action ranks the actions (expected, optimistic, thompson, "
        "cautious; see docs/planner.md).", additional_constraints=f"one of {list(STRATEGIES)}"))
    node.declare_parameter("learner", "/affordance_learner", describe(
        "With exploration 'task': the learner node asked (its ~/select_action and Learn action)."))
    node.declare_parameter("learn_every", 0, describe(
        "With exploration 'task': ask the learner for a new model (its Learn action) after every this many "
        "trials, once they are stored, and wait for it; 0: never (run the learner with online_learning to have "
        "every trial refine its model).", integer_range=[IntegerRange(from_value=0, to_value=2**31 - 1)]))
    node.declare_parameter("qos_depth", KEEP_ALL, describe(
        "History of the reliable publishers. 0 (default): keep all, so publishing waits while a "
        "subscriber is behind instead of dropping trials. N > 0: keep the last N messages per topic.",
        integer_range=[IntegerRange(from_value=0, to_value=100000)]))
    node.declare_parameter("robot_name", "", describe(
        "Publish on topics of this robot's own, <robot_name>/action, <robot_name>/object_features and "
        "<robot_name>/effects (the learner takes them when its 'robots' parameter names it); empty: the shared "
        "action, object_features and effects."))
    accept_integers(node, _NUMBERS)
    values = {name: node.get_parameter(name).value for name in node.list_parameters([], 0).names}
    for name in _NUMBERS:
        values[name] = number_value(name, values[name], node.describe_parameter(name))
    problem = values["robot_name"] and robot_name_problem(values["robot_name"], node.get_name(), node.get_namespace())
    if problem:
        raise ValueError(problem)
    if values["design"] not in DESIGNS:
        raise ValueError(f"design '{values['design']}' is not one of {list(DESIGNS)}")
    return values


def main(args=None) -> int:
    # a part refused by the learner's full queue (a flood) is sent again within a heartbeat (qos.py); entered
    # first: Fast DDS reads its profiles once, at the process's first node
    with dds_profiles(heartbeat_period=TRIAL_HEARTBEAT_PERIOD):
        check_command_line("simulated_robot", NODE_NAME, declare_robot_parameters, __doc__, args)
        return shutdown.run(lambda: values_checked("simulated_robot", SimulatedRobot), (ValueError, SpoolError),
                            NODE_NAME, args,
                            done=lambda node: node.done.done(), stopped=_report_unconfirmed)


def _report_unconfirmed(node: SimulatedRobot, signal_name: str) -> None:
    if node.trials is not None and node.trials.pending:
        node.get_logger().warning(f"{signal_name}: stopped with trials unconfirmed: {node.trials.summary()}")
    if node.trials is not None and not node.done.done():  # its spool synced and closed: what waits stays there
        node.trials.destroy()


if __name__ == "__main__":
    raise SystemExit(main())
