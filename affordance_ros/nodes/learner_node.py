"""The affordance learner node: stores the robot's trials, learns the network, answers predictions.

A managed (lifecycle) node. configure: read the configuration, open the case database, load
the model (``data.model_manager.ModelManager``), start /diagnostics; activate: the
subscriptions ``action`` (Action), ``object_features`` and ``effects`` (Features), the services
``~/learn`` (Learn), ``~/predict`` (Predict), ``~/select_action`` (SelectAction),
``~/suggest_trial`` (SuggestTrial: which trial would teach the model the most), the action
``~/learn`` (Learn, with feedback and cancel), the timers, ``~/stored`` (TrialStatus, reliable,
keep all: the answer for every trial, stored once committed and again when it is re-sent,
duplicate, rejected) and ``~/model`` (the model JSON, transient local: published at
activation, after every learn and every online save);
deactivate, cleanup and shutdown undo them. With ``autostart`` (default) the node configures
and activates itself at start. The work below ROS is done by ``data.intake.TrialIntake``
(check, pair, store every trial), ``ModelManager`` (the state) and ``data.learn`` (a learn);
this class declares the parameters, holds that state and hands each endpoint what it uses.

Threads: the executor thread takes the messages, pairs and stores trials and answers
predict and select_action; learning runs in a worker process (``data.learn_worker``: a
learn in a thread of this interpreter delayed every ~/predict by tens of milliseconds),
waited for by a thread of ``learning.LearnEndpoints`` while the ~/learn callback (a coroutine
in a reentrant callback group) awaits it, so the executor goes on with everything else and a
second learn request is refused at once. rclpy 9's
MultiThreadedExecutor was tried and dropped: at 100 trials/s it delayed some
subscription callbacks by seconds (trials then time out); the single-threaded executor
delivers the same stream in milliseconds.
"""

from __future__ import annotations

import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ..core import STRUCTURES
from ..data.health import Counters, Health, HealthMonitor, status_line
from ..data.intake import TrialIntake
from ..data.learn import LearnJob
from ..data.learn_worker import LearnWorker
from ..data.model_manager import ModelManager, StartupError
from ..data.pairing import TrialAssembler
from ..data.text import printable
from . import shutdown
from .command_line import check_command_line
from .current_model import CurrentModel
from .diagnostics import DiagnosticsPublisher
from .learner_parameters import LearnerSettings, ParameterError, declare_learner_parameters
from .learning import LearnEndpoints
from .qos import describe_qos
from .query_services import QueryServices
from .suggest_service import SuggestService
from .trial_topics import TrialTopics

NODE_NAME = "affordance_learner"
SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE


class LearnerNode(LifecycleNode):
    """The affordance learner, a lifecycle node: see the module's docstring.

    ``settings`` are its parameters; configured, it owns the ``manager`` (configuration, case store,
    current model), the ``intake`` (every trial part), the ``learn_worker`` (the learning process), the
    ``model`` (``CurrentModel``: online updates, saves, ~/model) and ``diagnostics``; active, its endpoints
    (``TrialTopics``, ``QueryServices``, ``learn``: ``LearnEndpoints``) and timers. ``count`` and ``log``
    are what every part reports to.
    """

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.settings: LearnerSettings | None = None
        self.manager: ModelManager | None = None
        self.intake: TrialIntake | None = None
        self.learn_worker: LearnWorker | None = None
        self.model: CurrentModel | None = None
        self.diagnostics: DiagnosticsPublisher | None = None
        self.learn: LearnEndpoints | None = None
        self.counts = Counters()
        self.health_monitor = HealthMonitor()
        self.lifecycle_state = "unconfigured"
        self._active, self._periodic = [], []  # the endpoints (but learn) and timers while active
        self._logged_counts = None  # the counts of the last status line logged
        self._problem = ""  # why configure failed
        self._autostarting = False  # while __init__ configures: a failure is main()'s to log (FATAL), once
        try:
            self.settings = declare_learner_parameters(self)
            if not self.settings.autostart:
                self.get_logger().info("unconfigured (autostart false): waiting for ~/change_state configure")
            else:
                self._autostarting = True
                if self.trigger_configure() != SUCCESS or self.trigger_activate() != SUCCESS:
                    raise StartupError(self._problem or "could not start (see the log)")
                self._autostarting = False
        except ParameterError as exc:
            self.destroy_node()
            raise StartupError(str(exc)) from None
        except BaseException:
            self.destroy_node()
            raise

    # ---------------------------------------------------------- lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        settings = self.settings
        try:
            if self.get_parameter("structure").value not in STRUCTURES:
                raise StartupError(f"structure '{self.get_parameter('structure').value}' is not one of "
                                   f"{list(STRUCTURES)}")
            self.manager = manager = ModelManager(settings.config_path, settings.database_path, settings.model_path,
                                                  settings.online_learning, settings.limits)
        except StartupError as exc:
            self._problem = str(exc)
            if not self._autostarting:
                self.get_logger().error(f"configure failed: {exc}")
            return FAILURE
        self.intake = TrialIntake(manager.parts, TrialAssembler(settings.slop, settings.trial_timeout),
                                  manager.store.insert, manager.store.record_of,
                                  expire_period=min(1.0, settings.trial_timeout / 4),
                                  max_stamp_skew=settings.max_stamp_skew)
        self._logged_counts, self.health_monitor = None, HealthMonitor()
        self.learn_worker = LearnWorker()
        self.model = CurrentModel(self, manager, settings.online_save_period, lambda: self.learning, self.count,
                                  self.log)
        problem = manager.load()
        if problem:
            self.log("error", problem)
        elif manager.model is not None:
            self.model.install(manager.model)
        if settings.diagnostics_period > 0:
            self.diagnostics = DiagnosticsPublisher(self, self.health, settings.diagnostics_period)
        self.get_logger().info(
            f"config {manager.config_path} ({len(manager.config)} variables, action variable "
            f"'{manager.parts.action_variable}'); {manager.store.count()} cases in {manager.database_path}; "
            f"trial topics {describe_qos(settings.qos_depth)}; "
            + (f"model loaded from {manager.model_path}" if manager.model else "no model yet: call ~/learn")
            + ("; online learning on" if settings.online_learning else ""))
        self.lifecycle_state = "inactive"
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        settings, manager, ingest = self.settings, self.manager, MutuallyExclusiveCallbackGroup()
        self._active = [
            TrialTopics(self, self.intake, settings.qos_depth, ingest, self.count, self.log, self.model.stored),
            QueryServices(self, MutuallyExclusiveCallbackGroup(), manager.current_model, manager.store.count,
                          settings.limits, self.count, self.log),
            SuggestService(self, MutuallyExclusiveCallbackGroup(), manager.current_model, manager.config,
                           settings.limits, self.count, self.log)]
        timers = [(settings.status_period, self._log_status)] if settings.status_period > 0 else []
        if settings.online_learning and settings.online_save_period > 0:
            timers.append((settings.online_save_period, self.model.save))
        self._periodic = [self.create_timer(period, callback, callback_group=ingest) for period, callback in timers]
        self.learn = LearnEndpoints(self, self.learn_worker, self._learn_job, self.model.learned, self.count,
                                    self.log)
        result = super().on_activate(state)  # activates ~/model
        self.lifecycle_state = "active"
        self.model.publish()
        self.get_logger().info("active: taking trials and answering ~/learn, ~/predict, ~/select_action, "
                               "~/suggest_trial")
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()
        self.get_logger().info("inactive: not taking trials nor answering")
        self.lifecycle_state = "inactive"
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup()
        self.lifecycle_state = "unconfigured"
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()
        self._cleanup()
        self.lifecycle_state = "finalized"
        return SUCCESS

    def _deactivate(self) -> None:
        if self.learn is not None:
            self.learn.close()  # cancels a learn that is running
            self.learn = None
        for endpoints in self._active:
            endpoints.close()
        for timer in self._periodic:
            self.destroy_timer(timer)
        self._active, self._periodic = [], []

    def _cleanup(self) -> None:
        if self.manager is None:
            return
        if self.manager.online is not None:
            self.model.save(stopping=True)
        self.get_logger().info(f"stopping; {self.status_line()}")
        if self.diagnostics is not None:
            self.diagnostics.close()
            self.diagnostics = None
        self.model.close()
        self.model = None
        if self.learn_worker is not None:
            self.learn_worker.close()
            self.learn_worker = None
        self.manager.close()
        self.manager = self.intake = None

    # --------------------------------------------------------------- learning
    @property
    def learning(self) -> bool:
        """True while a learn request (service or action) is being worked on."""
        return self.learn is not None and self.learn.busy

    def _learn_job(self, structure: str) -> LearnJob:
        """A learn of ``structure`` ('' for the 'structure' parameter), with the 'prior_strength' parameter."""
        return self.manager.learn_job(structure or self.get_parameter("structure").value,
                                      float(self.get_parameter("prior_strength").value))

    # ------------------------------------------------ counters, log, health
    def count(self, name: str) -> None:
        """Count one more ``name`` (any thread)."""
        self.counts.add(name)

    def log(self, level: str, message: str) -> None:
        """Log at ``level`` (info, warning, error), escaped and bounded (``log_printable``)."""
        log_printable(self.get_logger(), level, message)

    def _log_status(self) -> None:
        counts = self.counts.snapshot()
        if counts != self._logged_counts:
            self._logged_counts = counts
            self.get_logger().info(self.status_line(counts))

    def status_line(self, counts=None) -> str:
        """The counters in one line (as logged every status_period and at stop)."""
        return status_line(self.counts.snapshot() if counts is None else counts, self.intake.pending,
                           self.settings.online_learning)

    def health(self) -> Health:
        """The node's health now, as /diagnostics reports it."""
        model = self.manager.current_model()
        return self.health_monitor.assess(
            self.counts.snapshot(), time.time(), state=self.lifecycle_state,
            database=self.manager.database_path, stored_total=self.manager.store.count(),
            model_metadata=None if model is None else model.metadata, last_learn=self.model.last_learn,
            online=self.settings.online_learning)

    @property
    def parts_received(self) -> int:
        """Trial parts taken so far (how ``shutdown.drain`` sees that queued messages are still coming)."""
        counts = self.counts.snapshot()
        return sum(counts[f"received_{kind}"] for kind in ("action", "object", "effect"))

    def finalize(self) -> None:
        """The shutdown transition (saves, last log lines), unless it happened already."""
        if self.lifecycle_state != "finalized":
            self.trigger_shutdown()

    def destroy_node(self) -> None:
        self._deactivate()
        self._cleanup()
        super().destroy_node()


def log_printable(logger, level: str, message: str) -> None:
    """Log at ``level`` (info, warning, error), control characters escaped and the length bounded: text
    from messages cannot forge or flood the log."""
    message = printable(message)
    # (one call site per severity: rclpy refuses different severities from one line of code)
    if level == "info":
        logger.info(message)
    elif level == "error":
        logger.error(message)
    else:
        logger.warning(message)


def main(args=None) -> int:
    check_command_line("learner_node", NODE_NAME, declare_learner_parameters, __doc__, args)
    # SIGINT/SIGTERM only ask the spin loop to stop: what DDS delivered already is stored, the node goes
    # through its shutdown transition and is destroyed, and only then the context (shutdown.py).
    return shutdown.run(LearnerNode, (StartupError,), NODE_NAME, args,
                        done=lambda node: node.lifecycle_state == "finalized",
                        taken=lambda node: node.parts_received, finish=LearnerNode.finalize)


if __name__ == "__main__":
    raise SystemExit(main())
