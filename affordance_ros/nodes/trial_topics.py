"""The learner's trial topics: ``action``, ``object_features``, ``effects`` in, every part to ``TrialIntake``;
``~/stored`` out, the answer for every trial.

Created when the node activates and closed when it deactivates. Each part goes to the
``TrialIntake`` (check, pair, commit) with the node clock; a timer expires trials whose parts
stopped coming. The events that come back are counted and logged, the answers go out on
``~/stored`` (TrialStatus, reliable, keep all: a robot's ``TrialPublisher`` keeps each trial
until it is confirmed there), and every stored case goes to ``stored`` (the node refines its
model with it when online learning is on).
"""

from __future__ import annotations

from typing import Callable

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from ..data.intake import Event, TrialIntake
from ..data.text import printable
from ..data.trial import TrialRecord, stamp_seconds
from ..msg import Action, Features, TrialStatus
from .qos import KEEP_ALL, trial_qos


class TrialTopics:
    """The three reliable subscriptions and the expiry timer on ``node``, in one callback group, feeding
    ``intake``; ``count(name)`` and ``log(level, message)`` report its events, ``stored(case_id, record)``
    hears of every case stored."""

    def __init__(self, node, intake: TrialIntake, qos_depth: int, callback_group, count: Callable[[str], None],
                 log: Callable[[str, str], None], stored: Callable[[int, TrialRecord], None]):
        self.node, self.intake, self.count, self.log, self.stored = node, intake, count, log, stored
        qos = trial_qos(qos_depth)
        self.subscriptions = [
            node.create_subscription(Action, "action", self._on_action, qos, callback_group=callback_group),
            node.create_subscription(Features, "object_features", self._on_object_features, qos,
                                     callback_group=callback_group),
            node.create_subscription(Features, "effects", self._on_effects, qos, callback_group=callback_group)]
        self.timer = node.create_timer(intake.expire_period, self._expire, callback_group=callback_group)
        self.status = node.create_publisher(TrialStatus, "~/stored", trial_qos(KEEP_ALL))

    def close(self) -> None:
        """Stop taking trials (parts of trials still pending stay pending)."""
        for subscription in self.subscriptions:
            self.node.destroy_subscription(subscription)
        self.node.destroy_timer(self.timer)
        self.node.destroy_publisher(self.status)

    def _on_action(self, msg: Action) -> None:
        self._take("action", msg, msg.action)

    def _on_object_features(self, msg: Features) -> None:
        self._take("object", msg, (msg.names, msg.values))

    def _on_effects(self, msg: Features) -> None:
        self._take("effect", msg, (msg.names, msg.values))

    def _take(self, kind: str, msg, fields) -> None:
        self._handle(self.intake.take(kind, msg.trial_id, stamp_seconds(msg.header.stamp), fields, self._now()))

    def _expire(self) -> None:
        self._handle(self.intake.expire(self._now()))

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _handle(self, events: list[Event]) -> None:
        for event in events:
            for counter in (event.counter, *event.also):
                self.count(counter)
            if event.message:
                self.log(event.level, event.message)
            if event.status is not None:
                self._confirm(*event.status)
            if event.case is not None:
                self.stored(*event.case)

    def _confirm(self, trial_id: str, status: str, reason: str) -> None:
        """The answer for one trial on ~/stored (if a reader is so far behind that it is lost: counted,
        and the robot sends the trial again)."""
        try:
            self.status.publish(TrialStatus(trial_id=trial_id, status=status, reason=printable(reason)))
        except _rclpy.RCLError as exc:
            self.count("status_not_published")
            self.node.get_logger().warning(f"could not publish on ~/stored: {exc}", throttle_duration_sec=10.0)
