"""What becomes of every trial part, reported; and the case writer's results, taken in the executor thread.

Created when the node is configured, closed at cleanup. ``handle`` counts each ``Event`` of the
intake, logs its message (through ``RepeatedMessages``: under a flood of bad parts, one line per
kind and period with how many more came), publishes each trial's answer on ``~/stored``
(TrialStatus, reliable, keep all: a robot's ``TrialPublisher`` keeps each trial until it is
answered there) and hands every stored case to ``stored`` (the node refines its model with it
when online learning is on). The case writer commits in a thread of its own and calls
``notify`` when it has results: a guard condition, whose callback (in the executor) takes them
(``committed()``) and handles their events like any other, so that every answer and every model
update happens in the executor thread. ``~/stored`` lives as long as the writer, so that trials
committed after a deactivation are still answered.
"""

from __future__ import annotations

from typing import Callable

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from ..data.intake import Event
from ..data.log_text import RepeatedMessages, printable, shape
from ..data.trial import TrialRecord
from ..msg import TrialStatus
from .qos import KEEP_ALL, trial_qos

REPEAT_PERIOD = 5.0  # seconds: repeated warnings of one kind are told once per period


class TrialEvents:
    """Reports the events of trials on ``node``: ``count(name)``, ``log(level, message)``, the answers on
    ``~/stored``, ``stored(case_id, record)`` for every case stored. ``committed()`` gives the events of the
    writer's latest results; ``notify`` (any thread) has them handled in the executor."""

    def __init__(self, node, committed: Callable[[], list[Event]], count: Callable[[str], None],
                 log: Callable[[str, str], None], stored: Callable[[int, TrialRecord], None], callback_group=None):
        self.node, self.committed, self.count, self.stored = node, committed, count, stored
        self.repeated = RepeatedMessages(log, REPEAT_PERIOD)
        self.status = node.create_publisher(TrialStatus, "~/stored", trial_qos(KEEP_ALL))
        self.results = node.create_guard_condition(self._on_results, callback_group=callback_group)
        self.timer = node.create_timer(REPEAT_PERIOD, self.repeated.flush, callback_group=callback_group)

    def notify(self) -> None:
        """The writer has results (called in its thread)."""
        self.results.trigger()

    def handle(self, events: list[Event]) -> None:
        for event in events:
            for counter in (event.counter, *event.also):
                self.count(counter)
            if event.message:
                self.repeated(event.kind or shape(event.message), event.level, event.message)
            if event.status is not None:
                self._answer(*event.status)
            if event.case is not None:
                self.stored(*event.case)

    def close(self) -> None:
        """Tell what repeated warnings were held back; remove the guard condition, the timer and ~/stored."""
        self.repeated.flush(force=True)
        self.node.destroy_guard_condition(self.results)
        self.node.destroy_timer(self.timer)
        self.node.destroy_publisher(self.status)

    def _on_results(self) -> None:
        self.handle(self.committed())

    def _answer(self, trial_id: str, status: str, reason: str) -> None:
        """The answer for one trial on ~/stored (if a reader is so far behind that it is lost: counted,
        and the robot sends the trial again)."""
        try:
            self.status.publish(TrialStatus(trial_id=trial_id, status=status, reason=printable(reason)))
        except _rclpy.RCLError as exc:
            self.count("status_not_published")
            self.node.get_logger().warning(f"could not publish on ~/stored: {exc}", throttle_duration_sec=10.0)
