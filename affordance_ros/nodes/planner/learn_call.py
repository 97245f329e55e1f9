"""A learn on the learner node through its Learn action, as ``AffordanceClient.learn`` makes it: the goal sent
(again, with the same goal id, when its answer is lost: the node takes a goal id once), its feedback, its
result (asked for again when lost), a refusal with the reason the node gives on ``~/learn_refused`` (a goal
response carries none), and a cancel that waits for the node to stop the learn.

Like every call of ``learner_calls``, a state machine run by the caller's node; ``answer`` is done with a
``LearnReport``, or with ``LearnerUnavailable`` (no action server within the timeout, or it left the ROS graph
before the result), ``LearnerRefused`` (the goal was refused, e.g. a learn is already running; or the learn
failed: no cases stored, ...) or ``LearningCancelled`` (cancelled: ``learn_timeout`` passed, or ``stop``; the
node keeps its current model).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from action_msgs.msg import GoalStatus
from rcl_interfaces.msg import Log
from rclpy.action.client import ClientGoalHandle
from unique_identifier_msgs.msg import UUID

from ...action import Learn
from ...core import LearningCancelled
from ..contract import REFUSED_QOS, REFUSED_TOPIC
from .calls import FIRST_RESEND, GONE_AFTER, Caller, LearnerRefused, LearnerUnavailable, Ticking
from .replies import learn_progress_of

REASON_WAIT = 5.0  # seconds to wait for the node to say why it refused a goal
CANCEL_WAIT = 40.0  # seconds to wait for the node to stop a cancelled learn
KEPT_REASONS = 20  # refusal reasons a RefusalListener keeps


@dataclass(frozen=True)
class LearnReport:
    """What a learn on the learner node did: the node's ``message``, the cases learned from, the ``arcs``
    ("Parent->Child") of the new model (its most probable structure), its log-likelihood, the EM iterations (or the
    sampler's sweeps) and the learn's duration (s); ``arc_probabilities`` {"Parent->Child": the posterior probability
    of that arc} for every arc of the learned structures (1.0 each with one structure)."""

    message: str
    num_cases: int
    arcs: list
    log_likelihood: float
    iterations: int
    duration: float
    arc_probabilities: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready, as `affordance-ros call learn` prints it."""
        return {"success": True, "message": self.message, "num_cases": self.num_cases, "arcs": list(self.arcs),
                "arc_probabilities": dict(self.arc_probabilities), "log_likelihood": self.log_likelihood,
                "iterations": self.iterations, "duration": self.duration}


class RefusalListener:
    """The reasons the learner ``learner`` gives on its ``~/learn_refused`` when it refuses a learn; subscribed
    when the client is made, so that a refusal is heard however soon after the goal it comes (the node keeps
    its last ones for late subscribers: transient local; older ones are told apart by their stamp)."""

    def __init__(self, node, learner: str, callback_group):
        self.heard: deque = deque(maxlen=KEPT_REASONS)  # (stamp in seconds, reason)
        self.lock = threading.Lock()
        self.subscription = node.create_subscription(Log, f"{learner}/{REFUSED_TOPIC}", self._on_refusal,
                                                     REFUSED_QOS, callback_group=callback_group)

    def _on_refusal(self, said: Log) -> None:
        with self.lock:
            self.heard.append((said.stamp.sec + said.stamp.nanosec * 1e-9, said.msg))

    def since(self, stamp: float) -> str | None:
        """The first reason given at or after ``stamp`` (seconds since the epoch), None if none yet."""
        with self.lock:
            return next((reason for when, reason in self.heard if when >= stamp), None)


@dataclass(frozen=True)
class LearnServer:
    """The learner's Learn action as a client reaches it: the action ``client``, its ``name``, and the
    ``refusals`` (RefusalListener) heard from the learner."""

    client: object
    name: str
    refusals: RefusalListener


class LearnCall(Ticking):
    """A learn by ``server`` (a LearnServer) of ``structure`` ('' : the node's parameter): ``timeout`` seconds for
    the server to appear and take the goal, ``learn_timeout`` for the result once it runs (then the learn is
    cancelled); ``progress(step)`` gets each feedback as a core ``LearnProgress``."""

    def __init__(self, caller: Caller, server: LearnServer, structure: str, timeout: float, learn_timeout: float,
                 progress: Callable | None = None):
        super().__init__(caller, timeout)
        self.client = server.client
        self.name = server.name
        self.refusals = server.refusals
        self.learn_timeout = learn_timeout
        self.progress = progress
        self.goal = Learn.Goal(structure=structure)
        self.goal_id = UUID(uuid=list(uuid.uuid4().bytes))  # one id however often the goal is sent
        self.asked_at = time.time() - 1.0  # refusal reasons stamped before are older ones
        self.phase = "goal"  # goal -> result (-> cancel), or goal -> reason
        self.phase_started = self.started
        self.goal_sends: list = []
        self.handle = None  # the ClientGoalHandle once the goal is taken
        self.sent_at = -math.inf
        self.resend = FIRST_RESEND
        self.seen = self.started
        self.cancel_reason = ""

    def tick(self, now: float) -> None:
        ready = self.client.server_is_ready()
        if ready:
            self.seen = now
        gone = now - self.seen >= GONE_AFTER
        left = f"{self.name} left the ROS graph before it answered: did the learner node stop? (its log says why)"
        if self.phase == "goal" and not self.goal_sends:
            if ready:
                self._send_goal(now)
            elif self.expired(now):
                self.fail(LearnerUnavailable(f"no action {self.name} within {self.timeout:g} s: is the learner node "
                                             "running (and active)?", self.name))
        elif self.phase == "reason":
            reason = self.refusals.since(self.asked_at)
            if reason is not None or now - self.phase_started >= REASON_WAIT:
                reason = reason or f"the node did not say why within {REASON_WAIT:g} s (see its log)"
                self.fail(LearnerRefused(f"{self.name} refused the goal: {reason}", self.name))
        elif gone:
            self.fail(LearnerUnavailable(left, self.name))
        elif self.phase == "goal" and self.expired(now):
            self.fail(LearnerUnavailable(f"no answer from {self.name} within {self.timeout:g} s", self.name))
        elif self.phase == "result" and now - self.phase_started >= self.learn_timeout:
            self.stop(f"no result within {self.learn_timeout:g} s (learn_timeout): the learn was cancelled; the node "
                      "keeps its current model")
        elif self.phase == "cancel" and now - self.phase_started >= CANCEL_WAIT:
            self.fail(LearnerUnavailable(f"{self.name} did not stop the cancelled learn within {CANCEL_WAIT:g} s",
                                         self.name))
        elif now - self.sent_at >= self.resend:
            self.resend *= 2
            if self.phase == "goal":
                self._send_goal(now)
            else:
                self._ask(now)

    def stop(self, reason: str) -> None:
        """Cancel the learn; ``answer`` is then done with LearningCancelled(``reason``) once the node has stopped
        it (or with the result, if the learn ended before the cancel came)."""
        with self.lock:
            if self.finished or self.phase in ("cancel", "reason"):
                return
            self.cancel_reason = reason
            if not self.goal_sends:
                self.fail(LearningCancelled(reason))
                return
            if self.handle is None:  # sent, no answer yet: it may run; cancel it by its id
                self.handle = ClientGoalHandle(self.client, self.goal_id,
                                               Learn.Impl.SendGoalService.Response(accepted=True))
            self._enter("cancel")
            self._ask(time.monotonic())

    def cancelled(self) -> None:
        if self.handle is not None or self.goal_sends:  # (the caller will not wait for the node to stop it)
            ClientGoalHandle(self.client, self.goal_id,
                             Learn.Impl.SendGoalService.Response(accepted=True)).cancel_goal_async()

    def _enter(self, phase: str) -> None:
        self.phase = phase
        self.phase_started = time.monotonic()
        self.sent_at = -math.inf
        self.resend = FIRST_RESEND

    def _send_goal(self, now: float) -> None:
        self.sent_at = now
        feedback = None if self.progress is None else lambda msg: self.progress(learn_progress_of(msg.feedback))
        future = self.client.send_goal_async(self.goal, feedback_callback=feedback, goal_uuid=self.goal_id)
        self.goal_sends.append(future)
        future.add_done_callback(self._on_goal_response)

    def _ask(self, now: float) -> None:
        """Ask for the result (and in the cancel phase, for the cancel) again."""
        self.sent_at = now
        if self.phase == "cancel":
            self.handle.cancel_goal_async()
        future = self.handle.get_result_async()
        future.add_done_callback(self._on_result)

    def _on_goal_response(self, future) -> None:
        handle = future.result()
        with self.lock:
            if self.finished or self.phase != "goal" or handle is None:
                return
            if not handle.accepted and len(self.goal_sends) == 1:
                self._enter("reason")
                return
            if not handle.accepted:  # the answer to an earlier send may have been lost: its result says whether it runs
                handle = ClientGoalHandle(self.client, self.goal_id, Learn.Impl.SendGoalService.Response(accepted=True))
            self.handle = handle
            self._enter("result")
            self._ask(time.monotonic())

    def _on_result(self, future) -> None:
        answer = future.result()
        with self.lock:
            if self.finished or answer is None or self.phase not in ("result", "cancel"):
                return
            if answer.status == GoalStatus.STATUS_UNKNOWN:  # the node knows no such goal: every send was refused
                self._enter("reason")
                return
        result = answer.result
        if result.success:
            self.succeed(LearnReport(result.message, int(result.num_cases), list(result.arcs),
                                     float(result.log_likelihood), int(result.iterations), float(result.duration),
                                     dict(zip(result.sampled_arcs, map(float, result.arc_probabilities)))))
        elif self.cancel_reason:
            self.fail(LearningCancelled(self.cancel_reason))
        else:
            self.fail(LearnerRefused(result.message, self.name))


__all__ = ["LearnCall", "LearnReport", "LearnServer", "RefusalListener"]
