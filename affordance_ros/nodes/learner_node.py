"""The affordance learner node: stores the robot's trials, learns the network, answers predictions.

Topics (relative names, remappable): ``action`` (Action), ``object_features`` and ``effects``
(Features). Services: ``~/learn`` (Learn), ``~/predict`` (Predict), ``~/select_action``
(SelectAction: the actions ranked by how likely they produce a desired effect). The work below
ROS is done by ``data.intake.TrialIntake`` (check, pair, store every trial) and
``data.model_manager.ModelManager`` (configuration, case store, model file, learning, online
updates); this class wires them to topics, services, timers and the log.

Threads: the executor thread takes the messages, pairs and stores trials and answers
predict and select_action; learning runs in a worker process (``data.learn_worker``: a
learn in a thread of this interpreter delayed every ~/predict by tens of milliseconds),
waited for by a thread of its own while the ~/learn callback (a coroutine in a reentrant
callback group) awaits it, so the executor goes on with everything else and a second learn
request is answered "busy" at once. rclpy 9's
MultiThreadedExecutor was tried and dropped: at 100 trials/s it delayed some
subscription callbacks by seconds (trials then time out); the single-threaded executor
delivers the same stream in milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future

from ..core import STRUCTURES, AffordanceError
from ..data.intake import Event, TrialIntake
from ..data.learn_worker import LearnWorker
from ..data.model_manager import ModelManager, StartupError
from ..data.pairing import TrialAssembler
from ..data.trial import stamp_seconds
from ..msg import Action, Features
from ..srv import Learn, Predict, SelectAction
from .answers import answer, predict_into, select_action_into
from .learner_parameters import declare_learner_parameters
from .qos import describe_qos, trial_qos

NODE_NAME = "affordance_learner"


class LearnerNode(Node):

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.manager = None
        try:
            self._setup()
        except BaseException:
            self.destroy_node()
            raise

    def _setup(self) -> None:
        settings = self.settings = declare_learner_parameters(self)
        if settings.structure not in STRUCTURES:
            raise StartupError(f"structure '{settings.structure}' is not one of {list(STRUCTURES)}")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.manager = ModelManager(settings.config_path, settings.database_path, settings.model_path,
                                    settings.online_learning)
        self.counts = Counter()
        self._counts_lock = threading.Lock()
        self._logged_counts = None
        self._learning = threading.Lock()
        self._learn_started = 0.0
        self.learn_worker = LearnWorker()
        self.intake = TrialIntake(self.manager.parts, TrialAssembler(settings.slop, settings.trial_timeout),
                                  self.manager.store_record, self.manager.store.contains,
                                  expire_period=min(1.0, settings.trial_timeout / 4))
        problem = self.manager.load()
        if problem:
            self.get_logger().error(problem)
        elif self.manager.model is not None:
            self._installed(self.manager.model)

        ingest = MutuallyExclusiveCallbackGroup()
        qos = trial_qos(settings.qos_depth)
        self.create_subscription(Action, "action", self._on_action, qos, callback_group=ingest)
        self.create_subscription(Features, "object_features", self._on_object_features, qos, callback_group=ingest)
        self.create_subscription(Features, "effects", self._on_effects, qos, callback_group=ingest)
        self.create_timer(self.intake.expire_period, self._expire_trials, callback_group=ingest)
        if settings.status_period > 0:
            self.create_timer(settings.status_period, self._log_status, callback_group=ingest)
        if settings.online_learning and settings.online_save_period > 0:
            self.create_timer(settings.online_save_period, self._save_online, callback_group=ingest)
        # reentrant: a second request is taken (and refused) while the first one awaits its worker
        self.create_service(Learn, "~/learn", self._on_learn, callback_group=ReentrantCallbackGroup())
        queries = MutuallyExclusiveCallbackGroup()
        self.create_service(Predict, "~/predict", self._on_predict, callback_group=queries)
        self.create_service(SelectAction, "~/select_action", self._on_select_action, callback_group=queries)

        manager = self.manager
        self.get_logger().info(
            f"config {manager.config_path} ({len(manager.config)} variables, action variable "
            f"'{manager.parts.action_variable}'); {manager.store.count()} cases in {manager.database_path}; "
            f"trial topics {describe_qos(settings.qos_depth)}; "
            + (f"model loaded from {manager.model_path}" if manager.model else "no model yet: call ~/learn")
            + ("; online learning on" if settings.online_learning else ""))

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:  # (prior_strength: its descriptor's range is checked by rclpy)
            if p.name == "structure" and p.value not in STRUCTURES:
                return SetParametersResult(successful=False,
                                           reason=f"structure '{p.value}' is not one of {list(STRUCTURES)}")
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------- trials
    def _on_action(self, msg: Action) -> None:
        self._take("action", msg, msg.action)

    def _on_object_features(self, msg: Features) -> None:
        self._take("object", msg, (msg.names, msg.values))

    def _on_effects(self, msg: Features) -> None:
        self._take("effect", msg, (msg.names, msg.values))

    def _take(self, kind: str, msg, fields) -> None:
        self._handle(self.intake.take(kind, msg.trial_id, stamp_seconds(msg.header.stamp), fields, self._now()))

    def _expire_trials(self) -> None:
        self._handle(self.intake.expire(self._now()))

    def _handle(self, events: list[Event]) -> None:
        for event in events:
            self._count(event.counter)
            if event.message:
                self._log(event.level, event.message)
            if event.case is not None and self.manager.online is not None:
                self._report_online([self.manager.update_online(*event.case)])
                if self.settings.online_save_period == 0:
                    self._save_online()

    # -------------------------------------------------------------- learn
    @property
    def learning(self) -> bool:
        """True while a learn request is being worked on."""
        return self._learning.locked()

    async def _on_learn(self, request: Learn.Request, response: Learn.Response) -> Learn.Response:
        response.success = False
        if not self._learning.acquire(blocking=False):
            self._count("learn_refused")
            response.message = (f"a learn is already running (for {time.monotonic() - self._learn_started:.1f} s); "
                                "call ~/learn again when it has finished")
            return response
        self._learn_started = time.monotonic()
        work = (request.structure or self.get_parameter("structure").value,
                self.get_parameter("prior_strength").value, self.manager.current_model())
        try:
            outcome = await self._in_worker(lambda: self.learn_worker.learn(self.manager, *work))
            self._installed(outcome.model)
            result = outcome.result
            response.success, response.message = True, outcome.message
            response.num_cases, response.arcs = result.num_cases, [f"{a}->{b}" for a, b in result.arcs]
            response.log_likelihood, response.iterations = float(result.log_likelihood), int(result.iterations)
            response.duration = float(result.duration)
        except AffordanceError as exc:
            response.message = str(exc)
        except Exception as exc:  # a bug: answer and keep running rather than take the node down
            self.get_logger().error(f"learn failed unexpectedly: {exc!r}")
            response.message = f"internal error while learning: {exc!r}"
        finally:
            self._learning.release()  # only now: until the new model is in use, online saves wait
        self._count("learn_ok" if response.success else "learn_failed")
        self._log("info" if response.success else "warning", f"learn: {response.message}")
        return response

    def _in_worker(self, job) -> Future:
        """Run ``job`` in a thread of its own; the future is done (and the executor woken) when it ends."""
        finished, executor = Future(), self.executor

        def work():
            try:
                finished.set_result(job())
            except BaseException as exc:  # raised in the awaiting callback
                finished.set_exception(exc)
            finally:
                try:
                    executor.wake()  # the awaiting callback is polled on the executor's next wake-up
                except InvalidHandle:  # the executor was shut down meanwhile
                    pass

        threading.Thread(target=work, name="affordance_learn", daemon=True).start()
        return finished

    # ------------------------------------------------------------- online
    def _installed(self, model) -> None:
        updates, message = self.manager.install(model)
        self._report_online(updates)
        if message:
            self.get_logger().info(message)

    def _report_online(self, updates) -> None:
        for update in updates:
            self._count("online_updates" if update.ok else "online_skipped")
            if update.message:
                self._log("info" if update.ok else "warning", update.message)

    def _save_online(self, stopping: bool = False) -> None:
        """Write the online-updated model; not while a learn runs (it writes its own), unless stopping."""
        if self.learning and not stopping:
            return
        try:
            self.manager.save_online()
        except OSError as exc:
            self._count("online_save_errors")
            self.get_logger().error(f"could not write the online-updated model to {self.manager.model_path}: {exc}")

    # ----------------------------------------------------- predict, select
    def _on_predict(self, request: Predict.Request, response: Predict.Response) -> Predict.Response:
        return self._answer("predict", "predict", predict_into(request), response)

    def _on_select_action(self, request: SelectAction.Request,
                          response: SelectAction.Response) -> SelectAction.Response:
        return self._answer("select_action", "select", select_action_into(request), response)

    def _answer(self, service: str, counter: str, fill, response):
        # a learn running meanwhile swaps in its model only when done
        problem = answer(self.manager.current_model(), response, fill,
                         f"no model yet: call ~/learn first ({self.manager.store.count()} cases stored)")
        if problem:
            self._log("error" if problem.startswith("internal error") else "warning", f"{service}: {problem}")
        self._count(f"{counter}_{'failed' if problem else 'ok'}")
        return response

    # ----------------------------------------------------------- counters
    def _count(self, name: str) -> None:
        with self._counts_lock:
            self.counts[name] += 1

    def _log(self, level: str, message: str) -> None:
        # (one call site per severity: rclpy refuses different severities from one line of code)
        if level == "info":
            self.get_logger().info(message)
        elif level == "error":
            self.get_logger().error(message)
        else:
            self.get_logger().warning(message)

    def _log_status(self) -> None:
        with self._counts_lock:
            counts = dict(self.counts)
        if counts != self._logged_counts:
            self._logged_counts = counts
            self.get_logger().info(self.status_line(counts))

    def status_line(self, counts=None) -> str:
        c = Counter(dict(self.counts) if counts is None else counts)
        return (f"cases: {c['stored']} stored this run; trials pending: {self.intake.pending}; "
                f"parts received: {c['received_action']} action, {c['received_object']} object, "
                f"{c['received_effect']} effect; rejected parts: {c['rejected_parts']}; duplicate parts: "
                f"{c['duplicate_parts']}; duplicate trials: {c['duplicate_trials']}; incomplete trials dropped: "
                f"{c['dropped_incomplete']}; learn ok/failed/refused: {c['learn_ok']}/{c['learn_failed']}/"
                f"{c['learn_refused']}; predict ok/failed: {c['predict_ok']}/{c['predict_failed']}; "
                f"select_action ok/failed: {c['select_ok']}/{c['select_failed']}"
                + (f"; online updates/skipped: {c['online_updates']}/{c['online_skipped']}"
                   if self.settings.online_learning else ""))

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def destroy_node(self) -> None:
        if getattr(self, "learn_worker", None) is not None:
            self.learn_worker.close()
            self.learn_worker = None
        if self.manager is not None:
            if self.manager.online is not None:
                self._save_online(stopping=True)
            self.get_logger().info(f"stopping; {self.status_line()}")
            self.manager.close()
            self.manager = None
        super().destroy_node()


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        node = LearnerNode()
    except StartupError as exc:
        rclpy.logging.get_logger(NODE_NAME).fatal(str(exc))
        rclpy.try_shutdown()
        return 1
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
