"""What the learner node has while configured and while active, each one object made and closed whole.

``ConfiguredLearner`` is made in ``on_configure`` and closed in ``on_cleanup`` (as ros2/demos' lifecycle talker
makes its publisher and timer): the ``manager`` (configuration, case store, current model), the learning
process (``worker``), the current model on ``~/model`` (``model``), the path of every trial part (``trials``:
intake, case writer, ``~/stored``) and /diagnostics. ``ActiveEndpoints`` is made in ``on_activate`` and closed in
``on_deactivate``: the trial topics, ``~/predict`` and ``~/select_action``, ``~/suggest_trial`` and the timers.
Each holds an ``ExitStack``: a part made is closed with the whole, in the reverse order, and one that cannot be
made closes those made before it.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Callable

from ...data.health import Health, HealthMonitor, status_line
from ...data.learn_worker import LearnWorker
from ...data.model_manager import ModelManager
from ..qos import describe_qos
from .diagnostics import DiagnosticsPublisher
from .learn_endpoints import LearnEndpoints, never
from .model_topic import ModelTopic
from .node_state import NodeState
from .parameters import LearnerSettings
from .query_services import QueryServices
from .reporter import Reporter
from .suggest_service import SuggestService
from .trial_pipeline import TrialPipeline
from .trial_topics import TrialTopics

STORE_CLOSE_TIMEOUT = 30.0  # seconds the node waits at cleanup for the trials still queued to be stored


class ConfiguredLearner:
    """The learner's parts from configure to cleanup, on ``node`` with ``settings``; ``reporter`` hears what they
    do, ``learn`` (the ~/learn endpoints, which outlive them) learns with them, ``lifecycle`` is the node's. Raises
    StartupError (from ``ModelManager``) saying what to fix, having closed what it made."""

    def __init__(self, node, settings: LearnerSettings, reporter: Reporter, learn: LearnEndpoints,
                 lifecycle: NodeState):
        self.settings = settings
        self.reporter = reporter
        self.lifecycle = lifecycle
        self.health_monitor = HealthMonitor()
        self.logged_counts = None  # the counts of the last status line logged
        self.give_up: Callable[[], bool] = never  # at close: stop waiting for trials that cannot be stored now
        with ExitStack() as stack:
            self.manager = stack.enter_context(ModelManager(
                settings.config_path, settings.database_path, settings.model_path, settings.online_learning,
                settings.limits, node.get_fully_qualified_name()))
            self.worker = LearnWorker()
            stack.callback(self.worker.close)
            self.worker.start()
            self.model = ModelTopic(node, self.manager.current, settings.online_save_period, learn.slot, reporter)
            stack.callback(self.model.close)
            learn.attach(self.worker, self.model)
            stack.callback(learn.detach)
            self._load_model()
            self.trials = TrialPipeline(node, self.manager, settings, reporter, self.model)
            stack.callback(self.trials.close)
            # closed in the reverse order: the online-updated model saved, the queued trials stored and answered
            stack.callback(reporter.flush, force=True)
            stack.callback(self._stop_storing)
            stack.callback(self.model.save, stopping=True)
            self.diagnostics = None
            if settings.diagnostics_period > 0:
                self.diagnostics = DiagnosticsPublisher(node, self.health, settings.diagnostics_period)
                stack.callback(self.diagnostics.close)
            self.stack = stack.pop_all()

    def close(self, give_up: Callable[[], bool] = never) -> None:
        """Undo configure: save the online-updated model, store what is queued (``give_up()``, a second stop
        signal, ends the wait while storing is held up), log the last status line, close every part."""
        self.give_up = give_up
        self.stack.close()

    def summary(self) -> str:
        """The line the node logs once configured."""
        manager, settings = self.manager, self.settings
        return (f"config {manager.config_path} ({len(manager.config)} variables, action variable "
                f"'{manager.parts.action_variable}'); {self.trials.writer.cases_at_start} cases in "
                f"{manager.database_path}; trial topics {describe_qos(settings.qos_depth)}"
                + (f", shared and of robots {', '.join(settings.robot_names)}; " if settings.robot_names else "; ")
                + (f"model loaded from {manager.model_path}" if manager.current.model else "no model yet: call ~/learn")
                + ("; online learning on" if settings.online_learning else ""))

    def log_status(self) -> None:
        """Log the counters, when they changed since the last time."""
        counts = self.reporter.counts.snapshot()
        if counts != self.logged_counts:
            self.logged_counts = counts
            self.reporter.log("info", status_line(counts, self.trials.intake.pending, self.settings.online_learning))

    def health(self) -> Health:
        """The node's health now, as /diagnostics reports it."""
        model = self.manager.current.model
        return self.health_monitor.assess(
            self.reporter.counts.snapshot(), time.time(), state=self.lifecycle.label, writer=self.trials.writer.state(),
            database=self.manager.database_path, pending=self.trials.intake.pending,
            model_metadata=None if model is None else model.metadata, last_learn=self.model.last_learn,
            online=self.settings.online_learning)

    def _load_model(self) -> None:
        """The model file, if there is one that fits, becomes the current model."""
        problem = self.manager.current.load()
        if problem:
            self.reporter.log("error", problem)
        elif self.manager.current.model is not None:
            self.model.install(self.manager.current.model)

    def _stop_storing(self) -> None:
        """Store what is queued, answer it, and log the last status line."""
        unstored = self.trials.writer.close(STORE_CLOSE_TIMEOUT, self.give_up)
        if unstored:
            self.reporter.log("error", f"{unstored} trials could not be stored as the node stopped: not confirmed "
                                       "either")
        self.trials.handle_committed()
        line = status_line(self.reporter.counts.snapshot(), self.trials.intake.pending, self.settings.online_learning)
        self.reporter.log("info", f"stopping; {line}")


class ActiveEndpoints:
    """The learner's endpoints from activate to deactivate, on ``node`` for ``learner`` with ``settings``: the
    trial topics, the planners' services and the timers (the status line; with online learning, the saves)."""

    def __init__(self, node, learner: ConfiguredLearner, settings: LearnerSettings, reporter: Reporter):
        with ExitStack() as stack:
            self.trial_topics = TrialTopics(node, learner.trials, settings.qos_depth, settings.robot_names)
            stack.callback(self.trial_topics.close)
            self.queries = QueryServices(node, learner.manager, learner.trials.writer, settings, reporter)
            stack.callback(self.queries.close)
            self.suggest = SuggestService(node, learner.manager, settings.limits, reporter)
            stack.callback(self.suggest.close)
            periodic = [(settings.status_period, learner.log_status)] if settings.status_period > 0 else []
            if settings.online_learning and settings.online_save_period > 0:
                periodic.append((settings.online_save_period, learner.model.save))
            self.timers = []
            for period, callback in periodic:
                self.timers.append(node.create_timer(period, callback))
                stack.callback(node.destroy_timer, self.timers[-1])
            self.stack = stack.pop_all()

    def close(self) -> None:
        """Stop taking trials and answering (trials still pending stay pending)."""
        self.stack.close()


__all__ = ["STORE_CLOSE_TIMEOUT", "ActiveEndpoints", "ConfiguredLearner"]
