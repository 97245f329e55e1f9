"""The affordance learner node: stores the robot's trials, learns the network, answers predictions.

Topics (relative names, remappable): ``action`` (Action), ``object_features`` and ``effects``
(Features). Services: ``~/learn`` (Learn), ``~/predict`` (Predict), ``~/select_action``
(SelectAction: the actions ranked by how likely they produce a desired effect). Every completed trial
is committed to the case database at once; the learned model is written atomically to
``model_path`` and loaded again at start-up.

Threads: the executor thread takes the messages, pairs and stores trials and answers
predict and select_action; learning runs in a worker thread of its own while the ~/learn callback (a
coroutine in a reentrant callback group) awaits it, so the executor goes on with
everything else and a second learn request is answered "busy" at once. rclpy 9's
MultiThreadedExecutor was tried and dropped: at 100 trials/s it delayed some
subscription callbacks by seconds (trials then time out); the single-threaded executor
delivers the same stream in milliseconds.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future

from .core import (AffordanceError, AffordanceLearner, AffordanceNetwork, CaseSet, EvidenceError, format_arcs, predict,
                   rank_actions)
from .core.learner import STRUCTURES
from .msg import Action, Distribution, Features
from .online_model import OnlineModel, cases_marker
from .pairing import DuplicatePartError, PairingError, PartValidator, TrialAssembler
from .qos import KEEP_ALL, describe_qos, trial_qos
from .srv import Learn, Predict, SelectAction
from .storage import CaseStore, CaseStoreError

NODE_NAME = "affordance_learner"


class StartupError(RuntimeError):
    """The node cannot start (bad configuration, unusable database); the message says what to fix."""


def ros_home() -> Path:
    """$ROS_HOME, else ~/.ros (where ROS 2 keeps logs and other per-user state)."""
    return Path(os.path.expanduser(os.environ.get("ROS_HOME") or "~/.ros"))


def share_directory() -> Path:
    """share/affordance_ros of the installed package (ament index, else next to the Python package)."""
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory("affordance_ros"))
    except (ImportError, LookupError, OSError):
        # <prefix>/lib/pythonX.Y/site-packages/affordance_ros/learner_node.py -> <prefix>/share/affordance_ros
        return Path(__file__).resolve().parents[4] / "share" / "affordance_ros"


def stamp_seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class LearnerNode(Node):

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        try:
            self._declare_parameters()
            self._setup()
        except BaseException:
            self.destroy_node()
            raise

    # ------------------------------------------------------------- set-up
    def _declare_parameters(self) -> None:
        def describe(text, read_only=True, **ranges):
            return ParameterDescriptor(description=text, read_only=read_only, **ranges)

        self.declare_parameter("config_path", str(share_directory() / "config" / "montesano.json"), describe(
            "Configuration in the model schema (JSON): variables, their groups and values, sensors, "
            "optionally arcs and 'learning' options. Default: the montesano config the simulated robot matches."))
        self.declare_parameter("database_path", str(ros_home() / "affordance_ros" / "cases.db"), describe(
            "SQLite case database; every completed trial is committed here at once. "
            "Default: $ROS_HOME/affordance_ros/cases.db ($ROS_HOME defaults to ~/.ros)."))
        self.declare_parameter("model_path", str(ros_home() / "affordance_ros" / "model.json"), describe(
            "Where ~/learn writes the learned model (atomically) and where it is loaded from at start-up. "
            "Default: $ROS_HOME/affordance_ros/model.json."))
        self.declare_parameter("structure", "k2", describe(
            "How ~/learn finds the arcs when the request leaves 'structure' empty: k2 (greedy search), "
            "mcmc (sampling), fixed (keep the current model's arcs, else the configured ones).",
            read_only=False, additional_constraints=f"one of {list(STRUCTURES)}"))
        self.declare_parameter("prior_strength", 0.0, describe(
            "0: ~/learn learns from all stored cases. > 0 (with a current model): ~/learn learns from the cases "
            "stored since the current model was learned, with that model as a Dirichlet prior worth this many "
            "cases, so knowledge accumulates across sessions. Can be changed while the node runs.",
            read_only=False, floating_point_range=[FloatingPointRange(from_value=0.0, to_value=1e9)]))
        self.declare_parameter("slop", 0.1, describe(
            "Seconds the header stamps of the three parts of a trial may differ by when they are paired "
            "by stamp (empty trial_id). Keep it below half the time between trials.",
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=3600.0)]))
        self.declare_parameter("trial_timeout", 5.0, describe(
            "An incomplete trial is dropped with a warning once the header stamps of the messages received "
            "after its first part are this many seconds later (data time: replay speed does not matter), or "
            "when no message at all has arrived for this many seconds of the node clock (use_sim_time applies).",
            floating_point_range=[FloatingPointRange(from_value=0.001, to_value=86400.0)]))
        self.declare_parameter("qos_depth", KEEP_ALL, describe(
            "History of the three reliable subscriptions. 0 (default): keep all, so a robot publishing "
            "faster than the node stores is slowed down instead of losing trials. N > 0: keep the last N "
            "messages per topic (bounded memory; the oldest messages of a longer burst are lost).",
            integer_range=[IntegerRange(from_value=0, to_value=100000)]))
        self.declare_parameter("online_learning", False, describe(
            "Update the model with every newly stored case at once (stepwise EM; structure and sensor models "
            "stay as learned), once a model exists. Predictions use the updated model; ~/learn replaces it and "
            "the updates restart from the new one."))
        self.declare_parameter("online_save_period", 10.0, describe(
            "With online_learning: seconds between writes of the updated model to model_path (atomically; "
            "also when the node stops); 0 writes it after every update.",
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=86400.0)]))
        self.declare_parameter("status_period", 10.0, describe(
            "Seconds between log lines with the counters (stored cases, rejected messages, ...), "
            "written only when they changed; 0 turns them off.",
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=86400.0)]))
        self.add_on_set_parameters_callback(self._on_set_parameters)

    def _setup(self) -> None:
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        self.config_path = Path(param("config_path") or share_directory() / "config" / "montesano.json")
        self.database_path = Path(param("database_path") or ros_home() / "affordance_ros" / "cases.db")
        self.model_path = Path(param("model_path") or ros_home() / "affordance_ros" / "model.json")
        self._check_structure(param("structure"))
        try:
            self.config = AffordanceNetwork.load(self.config_path)
            self.parts = PartValidator(self.config)
        except (AffordanceError, ValueError) as exc:
            raise StartupError(f"config_path '{self.config_path}': {exc}") from None
        try:
            self.store = CaseStore(self.database_path)
        except CaseStoreError as exc:
            raise StartupError(str(exc)) from None
        self.assembler = TrialAssembler(slop=param("slop"), trial_timeout=param("trial_timeout"))
        self.counts = Counter()
        self._counts_lock = threading.Lock()
        self._logged_counts = None
        self._learning = threading.Lock()
        self._learn_started = 0.0
        self.online_learning = param("online_learning")
        self._online_save_period = param("online_save_period")
        self._online: OnlineModel | None = None
        self.model = self._load_model()
        if self.model is not None:
            self._start_online(self.model)

        ingest = MutuallyExclusiveCallbackGroup()
        qos = trial_qos(param("qos_depth"))
        self.create_subscription(Action, "action", self._on_action, qos, callback_group=ingest)
        self.create_subscription(Features, "object_features", self._on_object_features, qos, callback_group=ingest)
        self.create_subscription(Features, "effects", self._on_effects, qos, callback_group=ingest)
        self._expire_period = min(1.0, self.assembler.trial_timeout / 4)
        self._last_expire_check = None
        self.create_timer(self._expire_period, self._expire_trials, callback_group=ingest)
        if param("status_period") > 0:
            self.create_timer(param("status_period"), self._log_status, callback_group=ingest)
        if self.online_learning and self._online_save_period > 0:
            self.create_timer(self._online_save_period, self._save_online, callback_group=ingest)
        # reentrant: a second request is taken (and refused) while the first one awaits its worker
        self.create_service(Learn, "~/learn", self._on_learn, callback_group=ReentrantCallbackGroup())
        queries = MutuallyExclusiveCallbackGroup()
        self.create_service(Predict, "~/predict", self._on_predict, callback_group=queries)
        self.create_service(SelectAction, "~/select_action", self._on_select_action, callback_group=queries)

        self.get_logger().info(
            f"config {self.config_path} ({len(self.config)} variables, action variable "
            f"'{self.parts.action_variable}'); {self.store.count()} cases in {self.database_path}; "
            f"trial topics {describe_qos(param('qos_depth'))}; "
            + (f"model loaded from {self.model_path}" if self.model else "no model yet: call ~/learn")
            + ("; online learning on" if self.online_learning else ""))

    def _load_model(self) -> AffordanceNetwork | None:
        if not self.model_path.exists():
            return None
        try:
            model = AffordanceNetwork.load(self.model_path)
            if not model.parameterised:
                raise AffordanceError("it has no learned parameters")
            mismatch = _mismatch(model, self.config)
            if mismatch:
                raise AffordanceError(f"it does not fit the configuration: {mismatch}")
        except AffordanceError as exc:
            self.get_logger().error(
                f"not using the model in {self.model_path}: {exc}. Predictions wait for the next ~/learn, "
                "which replaces that file.")
            return None
        return model

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:  # (prior_strength: its descriptor's range is checked by rclpy)
            if p.name == "structure":
                try:
                    self._check_structure(p.value)
                except StartupError as exc:
                    return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    @staticmethod
    def _check_structure(value) -> None:
        if value not in STRUCTURES:
            raise StartupError(f"structure '{value}' is not one of {list(STRUCTURES)}")

    # ------------------------------------------------------------- trials
    def _on_action(self, msg: Action) -> None:
        self._take_part("action", msg, lambda: self.parts.action(msg.action))

    def _on_object_features(self, msg: Features) -> None:
        self._take_part("object", msg, lambda: self.parts.readings("object", msg.names, msg.values))

    def _on_effects(self, msg: Features) -> None:
        self._take_part("effect", msg, lambda: self.parts.readings("effect", msg.names, msg.values))

    def _take_part(self, kind: str, msg, payload) -> None:
        self._count(f"received_{kind}")
        stamp, now = stamp_seconds(msg.header.stamp), self._now()
        self._report_dropped(self.assembler.observe(stamp, now))  # data time moves on with every message
        what = f"'{kind}' part of trial '{msg.trial_id}'" if msg.trial_id else f"'{kind}' part without trial_id"
        try:
            if msg.trial_id and self.store.contains(msg.trial_id):
                self._count("duplicate_trials")
                self.get_logger().warning(f"ignored the {what}: a case with this trial_id is already stored")
                return
            trial = self.assembler.add(kind, msg.trial_id, stamp, payload(), now)
        except DuplicatePartError as exc:
            self._count("duplicate_parts")
            self.get_logger().warning(f"ignored the {what}: {exc}")
            return
        except PairingError as exc:
            self._count("rejected_parts")
            self.get_logger().warning(f"rejected the {what}: {exc}")
            return
        if trial is not None:
            self._store(trial)

    def _store(self, trial) -> None:
        record = trial.to_record(self.parts.action_variable)
        try:
            case_id = self.store.insert(record)
        except (CaseStoreError, sqlite3.Error) as exc:
            self._count("store_errors")
            self.get_logger().error(f"could not store trial '{trial.trial_id}': {exc}")
            return
        if case_id is None:
            self._count("duplicate_trials")
            self.get_logger().warning(f"trial '{trial.trial_id}' is already stored; kept the stored one")
            return
        self._count("stored")
        if self._online is not None:
            self._update_online(case_id, record)

    def _expire_trials(self) -> None:
        """The fallback once messages stop (pairing.TrialAssembler.expire), on the node clock. Not
        right after the executor was held up (a run late by more than a period): messages that
        arrived meanwhile are still queued and go first."""
        now, previous = self._now(), self._last_expire_check
        self._last_expire_check = now
        if previous is not None and now - previous > 2 * self._expire_period:
            return
        self._report_dropped(self.assembler.expire(now))

    def _report_dropped(self, trials) -> None:
        for dropped in trials:
            self._count("dropped_incomplete")
            name = f"trial '{dropped.trial_id}'" if dropped.trial_id else f"trial stamped {dropped.stamp:.3f} s"
            self.get_logger().warning(f"dropped the incomplete {name} (has {', '.join(dropped.parts)}): "
                                      f"{dropped.reason}")

    # -------------------------------------------------------------- learn
    @property
    def learning(self) -> bool:
        """True while a learn request is being worked on."""
        return self._learning.locked()

    async def _on_learn(self, request: Learn.Request, response: Learn.Response) -> Learn.Response:
        if not self._learning.acquire(blocking=False):
            self._count("learn_refused")
            response.success = False
            response.message = (f"a learn is already running (for {time.monotonic() - self._learn_started:.1f} s); "
                                "call ~/learn again when it has finished")
            return response
        self._learn_started = time.monotonic()
        structure = request.structure or self.get_parameter("structure").value
        prior_strength = self.get_parameter("prior_strength").value
        current = self.current_model()
        finished = Future()
        executor = self.executor

        def work():
            try:
                finished.set_result(self._learn(structure, current, prior_strength, response))
            except BaseException as exc:  # reported by the awaiting callback
                finished.set_exception(exc)
            finally:
                try:
                    executor.wake()  # the awaiting callback is polled on the executor's next wake-up
                except InvalidHandle:  # the executor was shut down meanwhile
                    pass

        threading.Thread(target=work, name="affordance_learn", daemon=True).start()
        try:
            model = await finished
            if model is not None:
                self._install_model(model)
        except Exception as exc:  # a bug: answer and keep running rather than take the node down
            self.get_logger().error(f"learn failed unexpectedly: {exc!r}")
            response.success = False
            response.message = f"internal error while learning: {exc!r}"
        finally:
            self._learning.release()  # only now: until the new model is in use, online saves wait
        self._count("learn_ok" if response.success else "learn_failed")
        # (rclpy refuses different severities from one line of code)
        if response.success:
            self.get_logger().info(f"learn: {response.message}")
        else:
            self.get_logger().warning(f"learn: {response.message}")
        return response

    def _learn(self, structure: str, current: AffordanceNetwork | None, prior_strength: float,
               response: Learn.Response) -> AffordanceNetwork | None:
        """In the worker thread: the learned model (written to model_path), or None; fills ``response``."""
        response.success = False
        prior = current if prior_strength > 0 else None
        try:
            config = self.config
            if structure == "fixed" and current is not None:
                config = config.with_structure({v.name: v.parents for v in current.variables})
            if prior is None:
                cases, skipped, marker = self._stored_cases()
            else:
                cases, skipped, marker = self._new_cases(prior)
                # the prior's sensor models (and labels): the new readings mean what its CPTs are about
                config = config.replace_variables({v.name: {"values": v.values, "sensor": v.sensor}
                                                   for v in prior.variables if v.sensor is not None})
            learner = AffordanceLearner(structure=structure, prior_strength=prior_strength).fit(
                config, cases, prior_model=prior)
        except AffordanceError as exc:
            response.message = str(exc)
            return None
        model = learner.model_
        model.metadata["cases"] = marker
        try:
            model.save(self.model_path)
        except OSError as exc:
            response.message = f"could not write the model to {self.model_path} ({exc}); the previous model stays"
            return None
        result = learner.result_
        response.success = True
        response.num_cases = result.num_cases
        response.arcs = format_arcs(result.arcs)
        response.log_likelihood = float(result.log_likelihood)
        response.iterations = int(result.iterations)
        response.duration = float(result.duration)
        response.message = (
            f"learned from {result.num_cases} cases"
            + (f" stored since the current model, with it as a prior worth {prior_strength:g} cases"
               if prior is not None else "")
            + f" ({structure}, {len(result.arcs)} arcs, "
            f"{result.iterations} EM iterations{'' if result.converged else ', NOT converged'}) "
            f"in {result.duration:.2f} s; model written to {self.model_path}"
            + (f"; skipped {skipped} stored cases that do not fit the configuration" if skipped else "")
            + ("; no model yet, so no prior (prior_strength applies from the next learn on)"
               if prior_strength > 0 and current is None else ""))
        return model

    def _stored_cases(self, after: int = 0) -> tuple[CaseSet, int, dict]:
        """The stored cases (with ids above ``after``) that fit the current configuration (it may have
        changed since they were stored), how many did not, and the model metadata naming them."""
        known_sensors = set(self.config.sensor_variable)
        numbered = self.store.numbered_records(after)
        usable = [r for _, r in numbered
                  if set(r["labels"]) == {self.parts.action_variable}
                  and r["labels"][self.parts.action_variable] in self.parts.actions
                  and set(r["readings"]) <= known_sensors]
        last_id, last = numbered[-1] if numbered else (after, None)
        marker = cases_marker(self.database_path, len(usable), last_id, last and last["trial_id"])
        return CaseSet.from_records(self.config, usable), len(numbered) - len(usable), marker

    def _new_cases(self, prior: AffordanceNetwork) -> tuple[CaseSet, int, dict]:
        """_stored_cases of the cases stored after those ``prior`` has seen; AffordanceError if there are
        none or the model does not say which it has seen."""
        seen = self._seen_until(prior)
        if seen is None:
            raise AffordanceError(
                "the current model does not record which stored cases it has seen (written by an older "
                "version, or learned from another database): learn once with prior_strength 0")
        cases, skipped, marker = self._stored_cases(after=seen)
        known = prior.metadata["cases"]
        if cases.n_cases == 0:
            raise AffordanceError(
                f"no new cases since the current model was learned (it has seen {known.get('count', 0)} "
                f"stored cases, up to trial '{known.get('last_trial_id')}'"
                + (f"; {skipped} newer ones do not fit the configuration" if skipped else "")
                + "): record more trials first, or set prior_strength to 0 to learn from all stored cases")
        marker["count"] += int(known.get("count", 0))
        return cases, skipped, marker

    def _install_model(self, model: AffordanceNetwork) -> None:
        """In the executor thread: a newly learned model takes over; online updates restart from it."""
        self.model = model
        self._online = None
        self._start_online(model)

    # ------------------------------------------------------------- online
    def _start_online(self, model: AffordanceNetwork) -> None:
        """With online_learning: updates (re)start from ``model``, first with the stored cases it has not
        seen (stored while a learn ran, or after the model file was last written)."""
        if not self.online_learning:
            return
        self._online = OnlineModel(model)
        missed = self._cases_after(model)
        if missed is None:
            self.get_logger().info("online learning starts from the current model; it does not say which "
                                   "stored cases it has seen, so none are caught up on")
            return
        for case_id, record in missed:
            self._update_online(case_id, record)
        if missed:
            self.get_logger().info(f"online learning caught up on {len(missed)} stored cases the model had not seen")

    def _cases_after(self, model: AffordanceNetwork) -> list | None:
        """The stored (case id, record)s after those ``model`` has seen; None if that is not known."""
        seen = self._seen_until(model)
        return None if seen is None else self.store.numbered_records(after=seen)

    def _seen_until(self, model: AffordanceNetwork) -> int | None:
        """The id of the last stored case ``model`` has seen (its metadata "cases"); None if it does not
        say, or names a case this database does not hold (a model from elsewhere)."""
        marker = model.metadata.get("cases") or {}
        last_id = marker.get("last_id")
        if not isinstance(last_id, int) or isinstance(last_id, bool) or last_id < 0:
            return None
        if last_id and self.store.trial_id_of(last_id) != marker.get("last_trial_id"):
            return None
        return last_id

    def _update_online(self, case_id: int, record: dict) -> None:
        try:
            self._online.update(case_id, record)
        except AffordanceError as exc:
            self._count("online_skipped")
            self.get_logger().warning(f"online learning skipped trial '{record['trial_id']}': {exc}")
            return
        self._count("online_updates")
        if self._online_save_period == 0:
            self._save_online()

    def current_model(self) -> AffordanceNetwork | None:
        """The model in use, with every online update so far (executor thread)."""
        if self._online is not None:
            self.model = self._online.model
        return self.model

    def _save_online(self, stopping: bool = False) -> None:
        """Write the online-updated model to model_path if it changed; not while a learn runs (that one
        writes its own model), except when the node stops."""
        online = self._online
        if online is None or not online.unsaved or (self.learning and not stopping):
            return
        try:
            self.current_model().save(self.model_path)
        except OSError as exc:
            self._count("online_save_errors")
            self.get_logger().error(f"could not write the online-updated model to {self.model_path}: {exc}")
            return
        online.unsaved = False

    # ------------------------------------------------------------ predict
    def _on_predict(self, request: Predict.Request, response: Predict.Response) -> Predict.Response:
        model = self.current_model()  # a learn running meanwhile swaps in its model only when done
        response.success = False
        if model is None:
            response.message = f"no model yet: call ~/learn first ({self.store.count()} cases stored)"
        else:
            try:
                sensors = _pairs(request.sensor_names, request.sensor_values, "sensor")
                values = _pairs(request.variable_names, request.variable_values, "variable")
                answer = predict(model, list(request.query), sensors=sensors, values=values)
            except AffordanceError as exc:
                response.message = str(exc)
            except Exception as exc:  # a bug: answer and keep running
                self.get_logger().error(f"predict failed unexpectedly: {exc!r}")
                response.message = f"internal error while predicting: {exc!r}"
            else:
                response.success = True
                response.marginals = [
                    Distribution(variable=name, values=list(dist), probabilities=list(dist.values()))
                    for name, dist in answer.marginals.items()]
                response.most_probable = [answer.most_probable[name] for name in answer.marginals]
                response.joint_probability = answer.joint_probability
        if not response.success:
            self.get_logger().warning(f"predict: {response.message}")
        self._count("predict_ok" if response.success else "predict_failed")
        return response

    # ------------------------------------------------------ select_action
    def _on_select_action(self, request: SelectAction.Request,
                          response: SelectAction.Response) -> SelectAction.Response:
        model = self.current_model()
        response.success = False
        if model is None:
            response.message = f"no model yet: call ~/learn first ({self.store.count()} cases stored)"
        else:
            try:
                ranking = _rank_actions(model, request)
            except AffordanceError as exc:
                response.message = str(exc)
            except Exception as exc:  # a bug: answer and keep running
                self.get_logger().error(f"select_action failed unexpectedly: {exc!r}")
                response.message = f"internal error while ranking actions: {exc!r}"
            else:
                response.success = True
                response.action_variable = ranking.action_variable
                response.actions = list(ranking.actions)
                response.probabilities = list(ranking.probabilities)
        if not response.success:
            self.get_logger().warning(f"select_action: {response.message}")
        self._count("select_ok" if response.success else "select_failed")
        return response

    # --------------------------------------------------------- counters
    def _count(self, name: str) -> None:
        with self._counts_lock:
            self.counts[name] += 1

    def _log_status(self) -> None:
        with self._counts_lock:
            counts = dict(self.counts)
        if counts == self._logged_counts:
            return
        self._logged_counts = counts
        self.get_logger().info(self.status_line(counts))

    def status_line(self, counts=None) -> str:
        counts = dict(self.counts) if counts is None else counts
        return (f"cases: {counts.get('stored', 0)} stored this run; trials pending: {self.assembler.pending}; "
                f"parts received: {counts.get('received_action', 0)} action, {counts.get('received_object', 0)} "
                f"object, {counts.get('received_effect', 0)} effect; rejected parts: {counts.get('rejected_parts', 0)}; "
                f"duplicate parts: {counts.get('duplicate_parts', 0)}; duplicate trials: "
                f"{counts.get('duplicate_trials', 0)}; incomplete trials dropped: {counts.get('dropped_incomplete', 0)}; "
                f"learn ok/failed/refused: {counts.get('learn_ok', 0)}/{counts.get('learn_failed', 0)}/"
                f"{counts.get('learn_refused', 0)}; predict ok/failed: {counts.get('predict_ok', 0)}/"
                f"{counts.get('predict_failed', 0)}; select_action ok/failed: {counts.get('select_ok', 0)}/"
                f"{counts.get('select_failed', 0)}"
                + (f"; online updates/skipped: {counts.get('online_updates', 0)}/{counts.get('online_skipped', 0)}"
                   if self.online_learning else ""))

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def destroy_node(self) -> None:
        store = getattr(self, "store", None)
        if store is not None:
            if getattr(self, "_online", None) is not None:
                self._save_online(stopping=True)
            self.get_logger().info(f"stopping; {self.status_line()}")
            store.close()
            self.store = None
        super().destroy_node()


def _pairs(names, values, what: str) -> dict:
    names, values = list(names), list(values)
    if len(names) != len(values):
        raise AffordanceError(f"{len(names)} {what}_names but {len(values)} {what}_values; give one value per name")
    out = {}
    for name, value in zip(names, values):
        if name in out:
            raise AffordanceError(f"{what} '{name}' is given twice")
        out[name] = value
    return out


def _rank_actions(model: AffordanceNetwork, request: SelectAction.Request):
    """rank_actions for a SelectAction request; the desired effects must be effect variables, and
    not also given as evidence (by label or by their sensor's reading)."""
    sensors = _pairs(request.sensor_names, request.sensor_values, "sensor")
    values = _pairs(request.variable_names, request.variable_values, "variable")
    effects = _pairs(request.effect_names, request.effect_values, "effect")
    for name in effects:
        variable = model[name]
        if variable.group != "effect":
            raise EvidenceError(f"'{name}' is not an effect variable (it is in the group '{variable.group}'); "
                                f"the effects are {model.group('effect')}")
        if name in values or (variable.sensor and variable.sensor.name in sensors):
            raise EvidenceError(f"'{name}' is a desired effect: do not also give it as evidence")
    return rank_actions(model, effects, sensors=sensors, values=values)


def _mismatch(model: AffordanceNetwork, config: AffordanceNetwork) -> str:
    """'' if the model has the configuration's variables, groups, values and sensors, else what differs."""
    if model.names != config.names:
        return f"variables {list(model.names)}, configured {list(config.names)}"
    for m, c in zip(model.variables, config.variables):
        if m.group != c.group or (c.values is not None and m.values != c.values):
            return f"variable '{c.name}' differs (group, values)"
        if (m.sensor and m.sensor.name) != (c.sensor and c.sensor.name):
            return f"the sensor of '{c.name}' differs"
    return ""


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
