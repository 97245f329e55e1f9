"""Calls to the learner node as a planner makes them: a request to one of its services, asynchronous, with
discovery, re-sends, the server's presence and a deadline inside (``AffordanceClient`` builds on it; the Learn
action's call is ``learn_call``).

A call is a small state machine run by the caller's node: a steady-clock timer (every ``TICK`` seconds) and the
answer's callback, both in the client's callback group, so that it runs in whatever executor spins the node (the
caller's own, or the one a blocking call spins) and never holds a thread of its own. Its ``answer`` is an rclpy
``Future``: done with the answer, or with ``LearnerUnavailable`` (the service did not appear within the timeout,
did not answer within it, or left the ROS graph before it answered: never a hang) or ``LearnerRefused`` (the
learner answered ``success: false``; its message says why). A request without an answer is sent again after 2,
4, 8, ... s: Fast DDS drops the answer to a caller the server has not matched yet ("failed to send response
(timeout): client will not receive response"), which happens under load to a caller that has just started; only
requests a server answers alike however often they come are sent so (``~/predict``, ``~/select_action``,
``~/suggest_trial``: they change nothing).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from rclpy.clock import Clock, ClockType
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.task import Future

from ...core import EvidenceError

TICK = 0.1  # seconds between a call's looks at its deadline, the server's presence and its re-sends
FIRST_RESEND = 2.0  # seconds without an answer before a request is sent again (then 4, 8, ...)
GONE_AFTER = 2.0  # seconds the server must be missing from the graph before the call gives up on it
STALLED_AFTER = 10.0  # seconds without a tick after which a blocking call says that nothing spins the node


class LearnerUnavailable(RuntimeError):
    """The learner could not be reached: its service or action (``name``) did not appear within the timeout,
    did not answer within it, or left the ROS graph before it answered."""

    def __init__(self, message: str, name: str = ""):
        super().__init__(message)
        self.name = name


class LearnerRefused(EvidenceError):
    """The learner answered ``success: false`` (an unknown name or label, no model yet, a request too large, a
    learn already running): the message is its reason; ``name`` the service or action that refused."""

    def __init__(self, message: str, name: str = ""):
        super().__init__(message)
        self.name = name


def check_timeout(timeout: float, what: str = "timeout") -> float:
    """``timeout`` as a float > 0 (math.inf: no limit); ValueError otherwise."""
    timeout = float(timeout)
    if not timeout > 0:  # (also NaN)
        raise ValueError(f"{what} must be > 0 seconds (math.inf: no limit), got {timeout}")
    return timeout


@dataclass(frozen=True)
class Caller:
    """Where a call runs: the caller's ``node``, and the ``callback_group`` of the call's timer and answers."""

    node: object
    callback_group: object


class Ticking:
    """What every call has: its ``answer`` (an rclpy Future), a deadline ``timeout`` seconds from now, and a
    steady-clock timer on the ``caller``'s node (in its callback group) calling ``tick(now)`` every ``TICK``
    seconds until the answer is done (or cancelled by its caller: then ``cancelled()`` runs). ``last_tick``: when
    it last ran (a blocking caller tells from it that nothing spins the node)."""

    def __init__(self, caller: Caller, timeout: float):
        node, callback_group = caller.node, caller.callback_group
        self.node = node
        self.node_name = node.get_fully_qualified_name()  # (a destroyed node has none)
        self.answer = Future()
        self.timeout = timeout
        self.started = time.monotonic()
        self.last_tick = self.started
        self.lock = threading.RLock()
        self.finished = False
        self.timer = node.create_timer(TICK, self._on_timer, callback_group=callback_group,
                                       clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.answer.add_done_callback(self._on_done)

    def start(self) -> Future:
        """The first tick, now (a call whose server is there goes out at once); returns ``answer``."""
        self._on_timer()
        return self.answer

    def _on_timer(self) -> None:
        with self.lock:
            self.last_tick = time.monotonic()
            if self.finished or self.answer.done() or self.answer.cancelled():
                self.finish()
                return
            self.tick(self.last_tick)

    def tick(self, now: float) -> None:
        raise NotImplementedError

    def expired(self, now: float) -> bool:
        return now - self.started >= self.timeout

    def stalled(self) -> bool:
        """Whether the node's executor has not run this call's timer for a long while (nothing spins it)."""
        return time.monotonic() - self.last_tick > STALLED_AFTER

    def abandoned(self) -> str:
        """Why nothing can end this call any more, its node or context gone ('' while they are there)."""
        if not self.node.context.ok():
            return "the ROS context was shut down"
        try:
            with self.node.handle:
                return ""
        except _rclpy.InvalidHandle:
            return f"the node {self.node_name} was destroyed"

    def succeed(self, result) -> None:
        self._end(lambda: self.answer.set_result(result))

    def fail(self, error: Exception) -> None:
        self._end(lambda: self.answer.set_exception(error))

    def _end(self, complete: Callable[[], None]) -> None:
        with self.lock:
            if self.finished or self.answer.done() or self.answer.cancelled():
                return
            self.finish()
        complete()  # (outside the lock: the answer's done callbacks run here, and may call the learner again)

    def finish(self) -> None:
        """Stop the timer and let go of what the call holds (once)."""
        with self.lock:
            if self.finished:
                return
            self.finished = True
            try:
                self.timer.cancel()
                self.node.destroy_timer(self.timer)
            except _rclpy.InvalidHandle:  # (the node was destroyed, its timer with it)
                pass
            self.release()

    def release(self) -> None:
        """What a call gives back when it ends (its pending requests)."""

    def _on_done(self, answer: Future) -> None:
        if answer.cancelled():
            self.cancelled()
        self.finish()

    def cancelled(self) -> None:
        """The caller cancelled ``answer``."""


class ServiceCall(Ticking):
    """``request`` to the service of ``client`` (an rclpy Client made with ``qos.reply_qos``); ``answer`` is done
    with ``convert(response)`` of the first answer, whichever send it answers."""

    def __init__(self, caller: Caller, client, request, convert: Callable, timeout: float):
        super().__init__(caller, timeout)
        self.client = client
        self.request = request
        self.convert = convert
        self.name = client.srv_name
        self.sent: list[Future] = []  # the requests sent, oldest first
        self.sent_at = -math.inf  # when the request was last sent
        self.resend = FIRST_RESEND
        self.seen = self.started  # when the server was last in the graph

    def tick(self, now: float) -> None:
        ready = self.client.service_is_ready()
        if ready:
            self.seen = now
        if not self.sent:
            if ready:
                self._send(now)
            elif self.expired(now):
                self.fail(LearnerUnavailable(f"no service {self.name} within {self.timeout:g} s: is the learner "
                                             "node running (and active)?", self.name))
        elif self.expired(now):
            self.fail(LearnerUnavailable(f"no answer from {self.name} within {self.timeout:g} s", self.name))
        elif now - self.seen >= GONE_AFTER:
            self.fail(LearnerUnavailable(f"{self.name} left the ROS graph before it answered: did the learner node "
                                         "stop? (its log says why)", self.name))
        elif now - self.sent_at >= self.resend:
            self.resend *= 2
            self._send(now)

    def _send(self, now: float) -> None:
        self.sent_at = now
        future = self.client.call_async(self.request)
        self.sent.append(future)
        future.add_done_callback(self._on_response)

    def _on_response(self, future: Future) -> None:
        response = future.result()
        if response is None or self.finished:
            return
        if not response.success:
            self.fail(LearnerRefused(response.message, self.name))
            return
        try:
            result = self.convert(response)
        except (ValueError, IndexError, KeyError) as exc:  # a learner of another version: say so
            self.fail(LearnerUnavailable(f"the answer of {self.name} does not fit this client ({exc!r}): is the "
                                         "learner node of another version of affordance_ros?", self.name))
            return
        self.succeed(result)

    def release(self) -> None:
        for future in self.sent:
            if not future.done():
                self.client.remove_pending_request(future)


__all__ = ["GONE_AFTER", "FIRST_RESEND", "Caller", "LearnerRefused", "LearnerUnavailable", "ServiceCall", "TICK",
           "Ticking", "check_timeout"]
