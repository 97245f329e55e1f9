"""The affordance learner node: stores the robot's trials, learns the network, answers predictions.

A managed (lifecycle) node. configure: read the configuration, open the case database (refused,
naming the holder, when another learner holds it), load the model (``data.model_manager.ModelManager``),
start storing (``data.case_writer.CaseWriter``), ``~/stored`` (TrialStatus, reliable, keep all: the
answer for every trial, stored once committed and again when it is re-sent, duplicate, rejected,
retry) and /diagnostics; activate: the subscriptions ``action`` (Action), ``object_features`` and
``effects`` (Features), the services ``~/predict`` (Predict), ``~/select_action`` (SelectAction)
and ``~/suggest_trial`` (SuggestTrial: which trial would teach the model the most),
the timers and ``~/model`` (the model JSON, transient local: published at activation, after every
learn and every online save); deactivate, cleanup and shutdown undo them. The Learn service and
action (``~/learn``) exist as long as the node and refuse while it is not active; deactivate,
cleanup and shutdown cancel a learn that runs and its caller is answered. ``use_sim_time`` cannot
be changed while the node is active (a clock that jumps would make every trial's stamp look far
ahead or behind). With ``autostart`` (default) the node configures and activates itself at start.
The work below ROS is done by ``data.intake.TrialIntake`` (check and pair every part),
``CaseWriter`` (store), ``ModelManager`` (the state) and ``data.learn_job`` (a learn); this class
declares the parameters, holds that state and hands each endpoint what it uses.

Threads: the executor thread takes the messages, pairs them, answers the trials and predict
and select_action; storing runs in the writer's thread (commits in groups; the executor never
waits for SQLite, and stops taking parts while the writer's queue is full: ``IngestGroup``);
learning runs in a worker process (``data.learn_worker``: a learn in a thread of this
interpreter delayed every ~/predict by tens of milliseconds), waited for by a thread of
``learn_endpoints.LearnEndpoints`` while the ~/learn callback (a coroutine in a reentrant callback
group) awaits it, so the executor goes on with everything else and a second learn request is
refused at once. rclpy 9's MultiThreadedExecutor was tried and dropped: at 100 trials/s it
delayed some subscription callbacks by seconds (trials then time out); the single-threaded
executor delivers the same stream in milliseconds.
"""

from __future__ import annotations

import functools
import time
import traceback
from typing import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ..data.case_writer import CaseWriter
from ..data.health import Counters, Health, HealthMonitor, status_line
from ..data.intake import Event, TrialIntake
from ..data.learn_job import LearnJob
from ..data.learn_worker import LearnWorker
from ..data.log_text import RepeatedMessages, printable
from ..data.model_manager import ModelManager, StartupError
from ..data.pairing import TrialAssembler
from . import shutdown
from .command_line import check_command_line
from .diagnostics import DiagnosticsPublisher
from .learn_endpoints import LearnEndpoints
from .learner_parameters import LearnerSettings, ParameterError, declare_learner_parameters, refuse_clock_changes
from .model_topic import ModelTopic
from .qos import LEARNER_READER_SAMPLES, SERVICE_ANSWER_WAIT, TRIAL_HEARTBEAT_PERIOD, dds_profiles, describe_qos
from .query_services import QueryServices
from .suggest_service import SuggestService
from .trial_events import REPEAT_PERIOD, TrialEvents
from .trial_topics import IngestGroup, TrialTopics

NODE_NAME = "affordance_learner"
SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE
STORE_CLOSE_TIMEOUT = 30.0  # seconds the node waits at cleanup for the trials still queued to be stored


def reported(transition):
    """A transition callback whose unexpected exception is logged (rclpy's lifecycle turns it into ERROR
    without a word)."""
    @functools.wraps(transition)
    def callback(node, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            return transition(node, state)
        except Exception as exc:
            log_printable(node.get_logger(), "error", f"{transition.__name__} failed: {exc!r}\n"
                                                      + "".join(traceback.format_exc(limit=-8)))
            return TransitionCallbackReturn.ERROR
    return callback


class LearnerNode(LifecycleNode):
    """The affordance learner, a lifecycle node: see the module's docstring.

    ``settings`` are its parameters; configured, it owns the ``manager`` (configuration, case store,
    current model), the ``intake`` (every trial part), the ``writer`` (storing), ``events`` (what becomes of
    each part, ~/stored), the ``learn_worker`` (the learning process), the ``model`` (``ModelTopic``:
    online updates, saves, ~/model) and ``diagnostics``; active, its endpoints (``TrialTopics``,
    ``QueryServices``) and timers; always, ``learn`` (``LearnEndpoints``). ``count`` and ``log`` are what
    every part reports to.
    """

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.settings: LearnerSettings | None = None
        self.manager: ModelManager | None = None
        self.intake: TrialIntake | None = None
        self.writer: CaseWriter | None = None
        self.events: TrialEvents | None = None
        self.learn_worker: LearnWorker | None = None
        self.model: ModelTopic | None = None
        self.diagnostics: DiagnosticsPublisher | None = None
        self.counts = Counters()
        self.health_monitor = HealthMonitor()
        self.lifecycle_state = "unconfigured"
        self._active, self._periodic = [], []  # the endpoints and timers while active
        self._logged_counts = None  # the counts of the last status line logged
        self._problem = ""  # why configure failed
        self._autostarting = False  # while __init__ configures: a failure is main()'s to log (FATAL), once
        self._give_up = lambda: False  # stop waiting for trials that cannot be stored now (a second signal)
        # what became of service requests: a planner repeating a mistake in a loop gets a line per kind and period
        self.requests_log = RepeatedMessages(self.log, REPEAT_PERIOD)
        self.create_timer(REPEAT_PERIOD, self.requests_log.flush)
        self.learn = LearnEndpoints(self, lambda: inactive(self.lifecycle_state), lambda: self.learn_worker,
                                    self._learn_job, lambda outcome: self.model.learned(outcome), ModelTopic.discard,
                                    self.count, self.requests_log.grouped)
        try:
            self.settings = declare_learner_parameters(self)
            refuse_clock_changes(self, lambda: self.lifecycle_state == "active")
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
            self.manager = ModelManager(settings.config_path, settings.database_path, settings.model_path,
                                        settings.online_learning, settings.limits, self.get_fully_qualified_name())
            self._configure(self.manager, settings)
        except Exception as exc:  # StartupError says what to fix; anything else (the learning process cannot start)
            self._problem = str(exc) if isinstance(exc, StartupError) else f"configure failed: {exc!r}"
            if not self._autostarting:
                self.get_logger().error(f"configure failed: {exc}" if isinstance(exc, StartupError) else self._problem)
            self._cleanup("configure failed")
            return FAILURE
        self.lifecycle_state = "inactive"
        return SUCCESS

    def _configure(self, manager: ModelManager, settings: LearnerSettings) -> None:
        """Storing, the learning process, the current model and /diagnostics, from ``manager``."""
        self.events = TrialEvents(self, self._committed, self.count, self.log, lambda *case: self.model.stored(*case))
        self.writer = CaseWriter(manager.store, self.events.notify)
        self.intake = TrialIntake(manager.parts, TrialAssembler(settings.slop, settings.trial_timeout,
                                                                settings.max_pending_trials, remember_completed=0),
                                  self.writer.submit, manager.store.record_of, lambda: self.writer.confirming,
                                  expire_period=min(1.0, settings.trial_timeout / 4),
                                  max_stamp_skew=settings.max_stamp_skew)
        self._logged_counts, self.health_monitor = None, HealthMonitor()
        self.learn_worker = LearnWorker()
        self.learn_worker.start()
        self.model = ModelTopic(self, manager, settings.online_save_period, lambda: self.learn.busy, self.count,
                                  self.log)
        problem = manager.load()
        if problem:
            self.log("error", problem)
        elif manager.model is not None:
            self.model.install(manager.model)
        if settings.diagnostics_period > 0:
            self.diagnostics = DiagnosticsPublisher(self, self.health, settings.diagnostics_period)
        self.get_logger().info(configured(manager, settings, self.writer.cases_at_start))

    @reported
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        settings, manager, ingest = self.settings, self.manager, IngestGroup(lambda: self.writer.full)
        self._active = [TrialTopics(self, self.intake, settings.qos_depth, ingest, self.events.handle,
                                    settings.robot_names),
                        QueryServices(self, MutuallyExclusiveCallbackGroup(), manager.current_model,
                                      lambda: self.writer.state().cases, settings.limits, self.count,
                                      self.requests_log.grouped, settings.select_seed),
                        SuggestService(self, MutuallyExclusiveCallbackGroup(), manager.current_model, manager.config,
                                       settings.limits, self.count, self.requests_log.grouped)]
        timers = [(settings.status_period, self._log_status)] if settings.status_period > 0 else []
        if settings.online_learning and settings.online_save_period > 0:
            timers.append((settings.online_save_period, self.model.save))
        self._periodic = [self.create_timer(period, callback) for period, callback in timers]
        result = super().on_activate(state)  # activates ~/model
        self.lifecycle_state = "active"
        self.model.publish()
        self.get_logger().info("active: taking trials and answering ~/learn, ~/predict, ~/select_action, "
                               "~/suggest_trial")
        return result

    @reported
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate("the node was deactivated")
        self.get_logger().info("inactive: not taking trials nor answering")
        self.lifecycle_state = "inactive"
        return super().on_deactivate(state)

    @reported
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup("the node was cleaned up")
        self.lifecycle_state = "unconfigured"
        return SUCCESS

    @reported
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate("the node is shutting down")
        self._cleanup("the node is shutting down")
        self.lifecycle_state = "finalized"
        return SUCCESS

    def _deactivate(self, why: str) -> None:
        self.learn.stop(why, self._give_up)  # cancels a learn that is running; its caller is answered
        for endpoints in self._active:
            endpoints.close()
        for timer in self._periodic:
            self.destroy_timer(timer)
        self._active, self._periodic = [], []

    def _cleanup(self, why: str) -> None:
        """Undo configure (also when it stopped half-way)."""
        if self.manager is None:
            return
        self.learn.stop(why, self._give_up)
        if self.model is not None and self.manager.online is not None:
            self.model.save(stopping=True)
        unstored = self.writer.close(STORE_CLOSE_TIMEOUT, self._give_up) if self.writer is not None else 0
        if unstored:
            self.log("error", f"{unstored} trials could not be stored as the node stopped: not confirmed either")
        if self.intake is not None:
            self.events.handle(self._committed())
            line = status_line(self.counts.snapshot(), self.intake.pending, self.settings.online_learning)
            self.get_logger().info(f"stopping; {line}")
        for part in (self.diagnostics, self.events, self.model, self.learn_worker, self.manager):
            if part is not None:
                part.close()
        self.diagnostics = self.events = self.model = self.learn_worker = self.manager = None
        self.intake = self.writer = None

    # --------------------------------------------------------------- storing and learning
    def _committed(self) -> list[Event]:
        """The events of the trials the writer stored since it was last asked."""
        return self.intake.committed(self.writer.take()) if self.writer is not None else []

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
            self.get_logger().info(status_line(counts, self.intake.pending, self.settings.online_learning))

    def health(self) -> Health:
        """The node's health now, as /diagnostics reports it."""
        model = self.manager.current_model()
        return self.health_monitor.assess(
            self.counts.snapshot(), time.time(), state=self.lifecycle_state, writer=self.writer.state(),
            database=self.manager.database_path, pending=self.intake.pending,
            model_metadata=None if model is None else model.metadata, last_learn=self.model.last_learn,
            online=self.settings.online_learning)

    def destroy_node(self) -> None:
        self._deactivate("the node is being destroyed")
        self._cleanup("the node is being destroyed")
        self.learn.destroy()
        self.requests_log.flush(force=True)
        super().destroy_node()


def inactive(state: str) -> str:
    """Why a node in lifecycle ``state`` does not learn ('' when active)."""
    return "" if state == "active" else f"the node is {state}: activate it (~/change_state) to learn"


def configured(manager: ModelManager, settings: LearnerSettings, cases: int) -> str:
    """The line the node logs once configured."""
    return (f"config {manager.config_path} ({len(manager.config)} variables, action variable "
            f"'{manager.parts.action_variable}'); {cases} cases in {manager.database_path}; "
            f"trial topics {describe_qos(settings.qos_depth)}"
            + (f", shared and of robots {', '.join(settings.robot_names)}; " if settings.robot_names else "; ")
            + (f"model loaded from {manager.model_path}" if manager.model else "no model yet: call ~/learn")
            + ("; online learning on" if settings.online_learning else ""))


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


def finalize(node: LearnerNode, give_up: Callable[[], bool]) -> None:
    """The node's shutdown transition (saves, last log lines), unless it happened already. ``give_up()`` (a second
    stop signal) ends its wait for the trials queued while they cannot be stored (the database locked, failing or
    removed): they stay unconfirmed, and the robot sends them again."""
    node._give_up = give_up
    if node.lifecycle_state != "finalized":
        node.trigger_shutdown()


def parts_received(node: LearnerNode) -> int:
    """Trial parts the node took so far (how ``shutdown.drain`` sees that queued messages are still coming)."""
    return sum(node.counts[f"received_{kind}"] for kind in ("action", "object", "effect"))


def main(args=None) -> int:
    # Short DDS reader queues: under a flood a good trial's part waits behind fewer parts; answers wait for a new
    # caller (qos.py). Entered first: Fast DDS reads its profiles once, at the process's first context (the
    # command line check's too).
    with dds_profiles(LEARNER_READER_SAMPLES, TRIAL_HEARTBEAT_PERIOD, SERVICE_ANSWER_WAIT) as readers:
        check_command_line("learner_node", NODE_NAME, declare_learner_parameters, __doc__, args)
        # SIGINT/SIGTERM only ask the spin loop to stop: what DDS delivered already is stored, the node goes
        # through its shutdown transition and is destroyed, and only then the context (shutdown.py).

        def make_node() -> LearnerNode:
            node = LearnerNode()
            node.get_logger().info(readers)
            return node
        return shutdown.run(make_node, (StartupError,), NODE_NAME, args,
                            done=lambda node: node.lifecycle_state == "finalized" and not node.learn.busy,
                            taken=parts_received, finish=finalize)


if __name__ == "__main__":
    raise SystemExit(main())
