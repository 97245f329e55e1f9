"""The planner's side of the learner node: ``AffordanceClient`` asks its ``~/predict``, ``~/select_action``,
``~/suggest_trial`` and its Learn action, and answers with the core's own result types (the robot's side is
``TrialPublisher``)::

    planner = AffordanceClient(node)                       # the learner /affordance_learner, 10 s per call
    ranking = planner.select_action({"ObjVel": "fast"}, sensors={"size": 0.1, "shape": 5.0})
    ranking.actions[0], ranking.probabilities[0]           # core.ActionRanking
    planner.predict("effect", values={"Action": "tap"})     # core.Prediction

Every call has a blocking form, for scripts, and an ``*_async`` form returning an rclpy ``Future`` for planners
inside their own executor (``await`` it in a coroutine callback, or add a done callback). Inside, each call
finds the service (``timeout`` seconds at most), keeps the last 1000 replies (``qos.reply_qos``), sends a
request again when its answer is lost (``learner_calls``), and ends with ``LearnerUnavailable``, naming the
service, when the learner is not there within the timeout, does not answer within it, or leaves the ROS graph
before it answers: never a hang. A learner's ``success: false`` is ``LearnerRefused`` (an ``EvidenceError``)
with its message.

A blocking call spins the node itself while nothing else does (a private executor, the node added for the
call); when the node is in an executor already, that executor must spin it in another thread (a blocking call
inside a callback of a single-threaded executor cannot get its answer: it says so after ``STALLED_AFTER``
seconds; use the ``*_async`` form there). A blocking call whose node is destroyed, whose context is shut down or
whose executor stops spinning the node while it waits ends at once, with a RuntimeError saying which.
"""

from __future__ import annotations

import math
import threading
from typing import Callable, Mapping, Sequence

from rclpy.action import ActionClient
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.task import Future

from ...action import Learn
from ...core import EvidenceError, LearningCancelled
from ...core.options import SUGGEST_CRITERIA
from ...srv import Predict, SelectAction, SuggestTrial
from ..contract import reply_qos
from .calls import STALLED_AFTER, TICK, Caller, ServiceCall, check_timeout
from .learn_call import LearnCall, LearnServer, RefusalListener
from .replies import predict_request, prediction_of, ranking_of, select_action_request, suggest_request, suggestions_of

DEFAULT_LEARNER = "/affordance_learner"
DEFAULT_TIMEOUT = 10.0


class AffordanceClient:
    """Calls the learner node ``learner`` (its full name, or relative to ``node``'s namespace) from ``node``;
    ``timeout`` seconds per call by default (math.inf: no limit). Its clients, made now so that discovery
    starts at once, are in ``callback_group`` (default: a mutually exclusive group of their own, so that
    the answers are taken while a callback of the node's awaits them). ``destroy()`` removes them."""

    def __init__(self, node, learner: str = DEFAULT_LEARNER, timeout: float = DEFAULT_TIMEOUT, callback_group=None):
        self.node = node
        self.learner = learner.rstrip("/") or learner
        self.timeout = check_timeout(timeout)
        self.callback_group = callback_group or MutuallyExclusiveCallbackGroup()
        self.caller = Caller(node, self.callback_group)
        self.clients = {name: node.create_client(srv, f"{self.learner}/{name}", qos_profile=reply_qos(),
                                                 callback_group=self.callback_group)
                        for name, srv in (("predict", Predict), ("select_action", SelectAction),
                                          ("suggest_trial", SuggestTrial))}
        self.refusals = RefusalListener(node, self.learner, self.callback_group)
        self.learn_client = ActionClient(node, Learn, f"{self.learner}/learn", callback_group=self.callback_group)
        self.executor = None  # spins the node for a blocking call when nothing else does (made at the first)
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ the calls
    def predict(self, query: str | Sequence[str], values: Mapping[str, str] | None = None,
                sensors: Mapping[str, float] | None = None, timeout: float | None = None):
        """The posterior of ``query`` (variable names or the groups "action", "object", "effect") given the
        labels ``values`` and the sensor readings ``sensors``: a core ``Prediction``."""
        return self._wait(self._predict(query, values, sensors, timeout))

    def predict_async(self, query, values=None, sensors=None, timeout=None) -> Future:
        """``predict``, without waiting: a Future of the Prediction."""
        return self._predict(query, values, sensors, timeout).start()

    def select_action(self, effects: Mapping[str, str], values: Mapping[str, str] | None = None,
                      sensors: Mapping[str, float] | None = None, strategy: str = "expected",
                      timeout: float | None = None):
        """Every action ranked for the desired ``effects`` {effect variable: label} on the object described
        by ``values`` and ``sensors``: a core ``ActionRanking`` (its ``message`` says why the actions tie)."""
        return self._wait(self._select_action(effects, values, sensors, strategy, timeout))

    def select_action_async(self, effects, values=None, sensors=None, strategy="expected", timeout=None) -> Future:
        """``select_action``, without waiting: a Future of the ActionRanking."""
        return self._select_action(effects, values, sensors, strategy, timeout).start()

    def suggest_trial(self, candidates: Sequence, actions: Sequence[str] | None = None,
                      criterion: str = "information_gain", top: int | None = None, timeout: float | None = None):
        """Which trial would teach the model the most: every action (or ``actions``) on every candidate object
        (a ``core.suggest.Candidate``, or a mapping {name: reading or label}), best first (the ``top`` best):
        core ``TrialSuggestions``."""
        return self._wait(self._suggest_trial(candidates, actions, criterion, top, timeout))

    def suggest_trial_async(self, candidates, actions=None, criterion="information_gain", top=None,
                            timeout=None) -> Future:
        """``suggest_trial``, without waiting: a Future of the TrialSuggestions."""
        return self._suggest_trial(candidates, actions, criterion, top, timeout).start()

    def learn(self, structure: str = "", progress: Callable | None = None, timeout: float | None = None,
              learn_timeout: float = math.inf):
        """Learn a new model from the stored cases (``structure`` "k2", "mcmc", "fixed"; '': the node's
        parameter), with the Learn action: a ``LearnReport`` once the new model is in use. ``progress(step)``
        gets the action's feedback as a core ``LearnProgress`` (phase, iteration, log_likelihood, cases,
        elapsed); after ``learn_timeout`` seconds the learn is cancelled (``LearningCancelled``), as it is on
        Ctrl-C (then KeyboardInterrupt, once the node has stopped it: it keeps its current model)."""
        call = self._learn_call(structure, progress, timeout, learn_timeout)
        try:
            return self._wait(call, cancel_on_interrupt=False)
        except KeyboardInterrupt:
            call.stop("the learn was cancelled; the node keeps its current model")
            try:
                return self._wait(call)  # (the learn ended before the cancel came) a second Ctrl-C: at once
            except LearningCancelled as stopped:
                raise KeyboardInterrupt(str(stopped)) from None

    def learn_async(self, structure: str = "", progress: Callable | None = None, timeout: float | None = None,
                    learn_timeout: float = math.inf) -> Future:
        """``learn``, without waiting: a Future of the LearnReport; cancelling the Future cancels the learn."""
        return self._learn_call(structure, progress, timeout, learn_timeout).start()

    def destroy(self) -> None:
        """Remove the clients from the node (the node stays)."""
        for client in self.clients.values():
            self.node.destroy_client(client)
        self.node.destroy_subscription(self.refusals.subscription)
        self.learn_client.destroy()
        if self.executor is not None:
            self.executor.shutdown()

    # ------------------------------------------------------------------ how
    def _timeout(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else check_timeout(timeout)

    def _call(self, service: str, request, convert: Callable, timeout: float | None) -> ServiceCall:
        return ServiceCall(self.caller, self.clients[service], request, convert, self._timeout(timeout))

    def _predict(self, query, values, sensors, timeout) -> ServiceCall:
        return self._call("predict", predict_request(query, values, sensors), prediction_of, timeout)

    def _select_action(self, effects, values, sensors, strategy, timeout) -> ServiceCall:
        return self._call("select_action", select_action_request(effects, values, sensors, strategy), ranking_of,
                          timeout)

    def _suggest_trial(self, candidates, actions, criterion, top, timeout) -> ServiceCall:
        if criterion not in SUGGEST_CRITERIA:
            raise EvidenceError(f"criterion '{criterion}' is not one of {list(SUGGEST_CRITERIA)}")
        if top is not None and top < 1:
            raise EvidenceError(f"top must be >= 1 (None: every trial), got {top}")
        request = suggest_request(list(candidates), list(actions or ()), criterion, top or 0)
        return self._call("suggest_trial", request, lambda response: suggestions_of(response, criterion), timeout)

    def _learn_call(self, structure, progress, timeout, learn_timeout) -> LearnCall:
        server = LearnServer(self.learn_client, f"{self.learner}/learn", self.refusals)
        return LearnCall(self.caller, server, structure, self._timeout(timeout),
                         check_timeout(learn_timeout, "learn_timeout"), progress)

    def _wait(self, call, cancel_on_interrupt: bool = True):
        """Start ``call`` (a ServiceCall or LearnCall; again: no matter) and return its result, spinning the node
        meanwhile when nothing else does; raises what the call ended with, and RuntimeError at once when the node is
        destroyed, its context shut down or its executor stops spinning it meanwhile. Interrupted (Ctrl-C), the call
        is cancelled unless ``cancel_on_interrupt`` is False."""
        answer, node = call.start(), self.node
        try:
            if not (node.executor is not None and node in node.executor.get_nodes()):
                with self.lock:
                    if self.executor is None:
                        self.executor = SingleThreadedExecutor(context=node.context)
                self.executor.add_node(node)
                try:
                    while not (answer.done() or answer.cancelled() or self._ended(call, "")):
                        self.executor.spin_once_until_future_complete(answer, timeout_sec=TICK)
                finally:
                    self.executor.remove_node(node)
            else:  # another thread spins the node
                done = threading.Event()
                answer.add_done_callback(lambda _: done.set())
                while not (done.wait(TICK) or self._ended(call, self._not_spun(call))):
                    pass
        except BaseException:
            if cancel_on_interrupt:
                answer.cancel()
            raise
        return answer.result()

    def _ended(self, call, stalled: str) -> bool:
        """Whether ``call`` was ended because nothing can answer it any more (its node destroyed, its context shut
        down: its answer then holds a RuntimeError saying so); RuntimeError, the call cancelled, when ``stalled``
        says that nothing runs it."""
        why = call.abandoned()
        if why:  # (no cancel: nothing is left to send one)
            call.fail(RuntimeError(f"the call to {call.name} ended before its answer: {why}"))
            return True
        if stalled:
            call.answer.cancel()
            raise RuntimeError(f"the call to {call.name} ended before its answer: {stalled}")
        return False

    def _not_spun(self, call) -> str:
        """Why the executor that spins the node does not run ``call`` ('' while it may)."""
        executor = self.node.executor
        if executor is None or self.node not in executor.get_nodes():
            return "the node's executor stopped spinning it (shut down, or the node removed from it)"
        if call.stalled():
            return (f"the node's executor has not run it for {STALLED_AFTER:g} s: it does not spin the node, or this "
                    "blocking call was made inside one of its callbacks (use the *_async form there and await it)")
        return ""


__all__ = ["AffordanceClient", "DEFAULT_LEARNER"]
