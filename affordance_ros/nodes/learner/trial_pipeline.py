"""The path of every trial part below the trial topics: checked and paired, stored, answered on ``~/stored``.

Created when the node is configured, closed at cleanup. ``take`` hands a part to the ``data.intake.TrialIntake``
(check, pair, queue a completed trial to the ``data.case_writer.CaseWriter``), which commits in a thread of its
own and, once it has results, triggers a guard condition: its callback, in the executor, takes the events of
the committed trials from the intake (``TrialIntake.committed``). Every ``Event`` is handled alike: counted,
its message logged (grouped by kind: under a flood of bad parts, one line per kind and period with how many
more came), each trial's answer published on ``~/stored`` (TrialStatus, reliable, keep all: a robot's
``TrialPublisher`` keeps each trial until it is answered there) and each stored case handed to the current
model (``ModelTopic.stored``: online learning). So every answer and every model update happens in the executor
thread, and a trial is answered ``stored`` only once committed. ``~/stored`` lives as long as the writer, so
that trials committed after a deactivation are still answered.
"""

from __future__ import annotations

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from ...data.case_writer import CaseWriter
from ...data.intake import Event, TrialIntake
from ...data.log_text import printable, shape
from ...data.model_manager import ModelManager
from ...data.pairing import TrialAssembler
from ...msg import TrialStatus
from ..contract import KEEP_ALL, STORED_TOPIC, trial_qos
from .model_topic import ModelTopic
from .parameters import LearnerSettings
from .reporter import Reporter


class TrialPipeline:
    """The ``intake`` and the ``writer`` of trials for ``manager``'s configuration and store (pairing as the
    ``settings`` say), the answers on ``~/stored`` of ``node``; ``reporter`` hears every event and ``model``
    every stored case."""

    def __init__(self, node, manager: ModelManager, settings: LearnerSettings, reporter: Reporter, model: ModelTopic):
        self.node = node
        self.reporter = reporter
        self.model = model
        self.status = node.create_publisher(TrialStatus, f"~/{STORED_TOPIC}", trial_qos(KEEP_ALL))
        self.results = node.create_guard_condition(self.handle_committed)
        try:
            self.writer = CaseWriter(manager.store, self.results.trigger)
        except BaseException:
            self.close()
            raise
        assembler = TrialAssembler(settings.slop, settings.trial_timeout, settings.max_pending_trials,
                                   remember_completed=0)
        self.intake = TrialIntake(manager.parts, assembler, self.writer,
                                  expire_period=min(1.0, settings.trial_timeout / 4),
                                  max_stamp_skew=settings.max_stamp_skew)

    @property
    def expire_period(self) -> float:
        """Seconds between calls of ``expire``."""
        return self.intake.expire_period

    @property
    def paused(self) -> bool:
        """True while the writer's queue is full: take no more parts until it has room."""
        return self.writer.full

    def take(self, kind: str, trial_id: str, stamp: float, fields, now: float) -> None:
        """One part (``TrialIntake.take``) and what became of it."""
        self.handle(self.intake.take(kind, trial_id, stamp, fields, now))

    def unreadable(self, kind: str, trial_id: str, exc: Exception) -> None:
        """A part whose bytes no deserialiser can read, of ``trial_id`` as far as they tell: counted, logged, and
        answered rejected when the trial_id could be read (``TrialIntake.unreadable``)."""
        self.handle(self.intake.unreadable(kind, trial_id, str(exc)[:200] or type(exc).__name__))

    def expire(self, now: float) -> None:
        """Trials whose parts stopped coming are dropped (``TrialIntake.expire``)."""
        self.handle(self.intake.expire(now))

    def handle_committed(self) -> None:
        """The events of the trials the writer stored since it was last asked."""
        self.handle(self.intake.committed())

    def handle(self, events: list[Event]) -> None:
        for event in events:
            for counter in (event.counter, *event.also):
                self.reporter.count(counter)
            if event.message:
                self.reporter.repeated(event.kind or shape(event.message), event.level, event.message)
            if event.status is not None:
                self._answer(*event.status)
            if event.case is not None:
                self.model.stored(*event.case)

    def close(self) -> None:
        """Remove the guard condition and ~/stored (the writer is closed before: ``CaseWriter.close``)."""
        self.node.destroy_guard_condition(self.results)
        self.node.destroy_publisher(self.status)

    def _answer(self, trial_id: str, status: str, reason: str) -> None:
        """The answer for one trial on ~/stored (if a reader is so far behind that it is lost: counted,
        and the robot sends the trial again)."""
        try:
            self.status.publish(TrialStatus(trial_id=trial_id, status=status, reason=printable(reason)))
        except _rclpy.RCLError as exc:
            self.reporter.count("status_not_published")
            self.node.get_logger().warning(f"could not publish on ~/stored: {exc}", throttle_duration_sec=10.0)


__all__ = ["TrialPipeline"]
