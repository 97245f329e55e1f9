"""The robot's side of end-to-end delivery: publish a trial, keep it until the learner confirms it.

DDS acknowledges a message once it sits in the learner's reader queue, not once it is stored:
a learner killed at that moment loses it. The learner answers every trial on ``~/stored``
(msg/TrialStatus) after committing it, and a trial sent again is confirmed again (the store
is idempotent by trial_id). So a robot that keeps each trial until it is confirmed, and sends
it again when no answer came, loses none across crashes and restarts of the learner::

    trials = TrialPublisher(node, resend_timeout=5.0)
    trials.publish("run7-000042", "tap", {"color": 5.1, "shape": 0.2}, {"obj_vel": 9.7}, stamp=node.get_clock().now())
    ...                                   # spin the node; statuses arrive, due trials are re-sent on a timer
    trials.unconfirmed                    # ids still waiting: exit only once it is empty

A trial is sent again when it has waited ``resend_timeout`` seconds and either a trial sent after
it was confirmed already (the learner is running, so this one was lost), or no answer at all came
for ``resend_timeout`` seconds (the learner is down or restarting), or the learner answered
``retry`` (it could not take it now: its clock). A learner that is merely behind keeps confirming,
in order, and gets nothing twice. Each further re-send of a trial waits twice as long as the one
before (up to ``BACKOFF_LIMIT`` times ``resend_timeout``), and after ``max_resends`` re-sends
without an answer the trial is given up: logged (one line for the trials given up at once), and kept in
``given_up`` with why.

A trial_id the learner would answer under another name is refused before anything is sent
(``trial_id_problem``): one with a NUL character (the middleware cuts the string there), one that
is not valid Unicode text (its UTF-8 bytes cannot be made), an empty one, or one longer than the
learner's ``max_trial_id_length`` (the learner does not answer it).

A robot given a ``robot_name`` publishes on topics of its own, ``<robot_name>/action``,
``<robot_name>/object_features`` and ``<robot_name>/effects``, which the learner takes when its
``robots`` parameter names the robot: another robot's backlog on the shared topics cannot delay its
trials then (docs/node.md, access control).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Mapping, Sequence

from rclpy.exceptions import InvalidTopicNameException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.validate_full_topic_name import validate_full_topic_name

from ..data.pairing import DEFAULT_MAX_TRIAL_ID_LENGTH
from ..data.text import RepeatedMessages
from ..data.trial import trial_topics
from ..msg import Action, Features, TrialStatus
from .qos import KEEP_ALL, publish_waiting, take_queued, trial_qos

STATUS_TOPIC = "affordance_learner/stored"  # the learner's ~/stored, relative: the robot's namespace applies
DEFAULT_RESEND_TIMEOUT = 5.0
DEFAULT_MAX_RESENDS = 10
BACKOFF_LIMIT = 8       # a re-send waits at most this many times resend_timeout
MAX_RESEND_BATCH = 200  # trials sent again per timer tick at most
DRAIN_SECONDS = 0.002   # longest the status callback goes on taking the answers queued behind its own


def robot_name_problem(name: str, node_name: str = "robot", namespace: str = "/") -> str:
    """'' if ``<name>/action`` is a topic name a node ``node_name`` in ``namespace`` can use, else why not."""
    try:
        validate_full_topic_name(expand_topic_name(f"{name}/action", node_name, namespace))
    except (ValueError, InvalidTopicNameException) as exc:
        return f"robot name '{name}' does not make a topic name: {str(exc).split(', at /')[0]}"
    return ""


def trial_id_problem(trial_id, max_length: int = DEFAULT_MAX_TRIAL_ID_LENGTH) -> str:
    """'' if the learner answers ``trial_id`` under that same id, else why it would not."""
    if not isinstance(trial_id, str) or not trial_id:
        return f"a trial sent with confirmation needs a non-empty trial_id, got {trial_id!r}"
    if "\x00" in trial_id:
        return (f"trial_id {trial_id[:80]!r} holds a NUL character: the middleware cuts the string there, so the "
                "learner would answer another id")
    try:
        trial_id.encode("utf-8")
    except UnicodeEncodeError:
        return (f"trial_id {trial_id[:80]!r} is not valid Unicode text (a lone surrogate): its UTF-8 bytes cannot "
                "be made, so the learner would answer another id")
    if len(trial_id) > max_length:
        return (f"trial_id is {len(trial_id)} characters long, more than the learner's max_trial_id_length "
                f"{max_length}: it would not answer it")
    return ""


@dataclass
class _Sent:
    messages: Sequence  # (publisher, message or serialized bytes)
    sequence: int       # order of the first send
    sent: float         # monotonic time of the latest send
    resends: int = 0    # how many times it was sent again
    retry: bool = False  # the learner answered 'retry' (since the latest send)
    reason: str = ""     # why, the latest time


class TrialPublisher:
    """Publishes trials on ``node`` (on the topics of ``robot_name``: ``trial_topics``) and keeps each until
    the learner answers on ``status_topic``.

    ``publish`` builds and sends the three messages of a trial; ``send`` sends messages made elsewhere
    (e.g. a bag's serialized messages) on given publishers. Trials need a trial_id the learner answers as
    it is (``trial_id_problem``; ValueError otherwise). ``confirmed``, ``rejected``, ``duplicates`` and
    ``given_up`` (trial_id -> reason) and ``resent`` say what happened.
    """

    def __init__(self, node, resend_timeout: float = DEFAULT_RESEND_TIMEOUT, qos_depth: int = KEEP_ALL,
                 status_topic: str = STATUS_TOPIC, callback_group=None, max_resends: int = DEFAULT_MAX_RESENDS,
                 max_trial_id_length: int = DEFAULT_MAX_TRIAL_ID_LENGTH, robot_name: str = ""):
        if not resend_timeout > 0:
            raise ValueError(f"resend_timeout must be > 0 seconds, got {resend_timeout}")
        if max_resends < 0:
            raise ValueError(f"max_resends must be >= 0, got {max_resends}")
        problem = robot_name and robot_name_problem(robot_name, node.get_name(), node.get_namespace())
        if problem:
            raise ValueError(problem)
        self.node = node
        self.topics = trial_topics(robot_name)
        self.resend_timeout = float(resend_timeout)
        self.max_resends = max_resends
        self.max_trial_id_length = max_trial_id_length
        self._qos = trial_qos(qos_depth)
        self._publishers = None
        self._lock = threading.Lock()
        self._waiting: OrderedDict[str, _Sent] = OrderedDict()
        self._sequence = 0
        self._newest_confirmed = -1
        self._last_answer = time.monotonic()
        self.confirmed = 0
        self.resent = 0
        self.publish_waits = 0
        self.rejected: dict[str, str] = {}
        self.duplicates: dict[str, str] = {}
        self.given_up: dict[str, str] = {}
        self.answers = Counter()
        self._warnings = RepeatedMessages(lambda level, text: self.node.get_logger().warning(text))
        self._status = node.create_subscription(TrialStatus, status_topic, self._on_status, trial_qos(KEEP_ALL),
                                                callback_group=callback_group)
        self._timer = node.create_timer(self.resend_timeout / 4, self.resend_due, callback_group=callback_group)

    # ----------------------------------------------------------------- sending
    @property
    def publishers(self) -> dict:
        """kind -> publisher of the three trial topics (created on first use)."""
        if self._publishers is None:
            self._publishers = {
                "action": self.node.create_publisher(Action, self.topics["action"], self._qos),
                "object": self.node.create_publisher(Features, self.topics["object"], self._qos),
                "effect": self.node.create_publisher(Features, self.topics["effect"], self._qos)}
        return self._publishers

    def publish(self, trial_id: str, action: str, object_features: Mapping[str, float],
                effects: Mapping[str, float], stamp=None) -> None:
        """Publish one trial (``stamp``: a builtin_interfaces/Time, or an rclpy Time; None: unstamped)."""
        if stamp is not None and hasattr(stamp, "to_msg"):
            stamp = stamp.to_msg()
        action_msg = Action(trial_id=trial_id, action=action)
        parts = [(self.publishers["action"], action_msg)]
        for kind, readings in (("object", object_features), ("effect", effects)):
            msg = Features(trial_id=trial_id, names=list(readings), values=[float(x) for x in readings.values()])
            parts.append((self.publishers[kind], msg))
        if stamp is not None:
            for _, msg in parts:
                msg.header.stamp = stamp
        self.send(trial_id, parts)

    def send(self, trial_id: str, messages: Sequence) -> None:
        """Publish ``messages`` ((publisher, message or serialized bytes), the whole trial) and keep them
        until ``trial_id`` is confirmed. Publishing waits while a reader is behind (keep-all history full)."""
        self._check(trial_id)
        with self._lock:
            if trial_id not in self._waiting:
                self._waiting[trial_id] = _Sent(list(messages), self._sequence, time.monotonic())
                self._sequence += 1
        self._publish(messages)

    def keep(self, trial_id: str, publisher, msg) -> None:
        """Keep one message of ``trial_id`` that was published already (e.g. a bag's, at its recorded
        time) until the trial is confirmed; it is sent again with the trial's other kept messages."""
        self._check(trial_id)
        with self._lock:
            sent = self._waiting.get(trial_id)
            if sent is None:
                sent = self._waiting[trial_id] = _Sent([], self._sequence, time.monotonic())
                self._sequence += 1
            sent.messages.append((publisher, msg))
            sent.sent = time.monotonic()

    def _check(self, trial_id: str) -> None:
        problem = trial_id_problem(trial_id, self.max_trial_id_length)
        if problem:
            raise ValueError(problem)

    def _publish(self, messages: Sequence) -> None:
        for publisher, msg in messages:
            self.publish_waits += publish_waiting(publisher, msg, self.node.context.ok, on_wait=self._log_wait)

    def _log_wait(self) -> None:
        self.node.get_logger().warning("a subscriber is behind: waiting to publish (the history is full)",
                                       throttle_duration_sec=5.0)

    def resend_due(self, now: float | None = None) -> int:
        """Send again the trials that are due (see the module's description) and give up those sent again
        ``max_resends`` times; returns how many were sent."""
        now = time.monotonic() if now is None else now
        with self._lock:
            silent = now - self._last_answer > self.resend_timeout
            due = [(trial_id, sent) for trial_id, sent in self._waiting.items()
                   if now - sent.sent > self.resend_timeout * min(2 ** sent.resends, BACKOFF_LIMIT)
                   and (silent or sent.retry or sent.sequence < self._newest_confirmed)][:MAX_RESEND_BATCH]
            given_up = [(trial_id, sent) for trial_id, sent in due if sent.resends >= self.max_resends]
            for trial_id, sent in given_up:
                del self._waiting[trial_id]
                self.given_up[trial_id] = (f"not confirmed after {sent.resends} re-sends"
                                           + (f"; the learner answered retry: {sent.reason}" if sent.reason else ""))
            due = [(trial_id, sent) for trial_id, sent in due if trial_id not in self.given_up]
            for _, sent in due:
                sent.sent, sent.resends, sent.retry = now, sent.resends + 1, False
        if given_up:  # one line for all of them: a learner gone for long gives up a whole stream's trials at once
            self.node.get_logger().warning(_given_up_line([trial_id for trial_id, _ in given_up], self.given_up))
        self._warnings.flush()
        for trial_id, sent in due:
            if not self.node.context.ok():
                break
            self._publish(sent.messages)
        self.resent += len(due)
        if due:
            self.node.get_logger().info(f"sent {len(due)} unconfirmed trials again ({self.pending} waiting for "
                                        "the learner)", throttle_duration_sec=5.0)
        return len(due)

    # --------------------------------------------------------------- answers
    def _on_status(self, msg: TrialStatus) -> None:
        """An answer, then the answers queued behind it (for up to ``DRAIN_SECONDS``: one executor callback
        for many answers while a learner confirms a fast stream)."""
        deadline = time.monotonic() + DRAIN_SECONDS
        while msg is not None:
            self._answer(msg)
            if time.monotonic() > deadline:
                return
            msg = take_queued(self._status)

    def _answer(self, msg: TrialStatus) -> None:
        with self._lock:
            self._last_answer = time.monotonic()
            sent = self._waiting.get(msg.trial_id)
            if sent is None:  # another robot's trial, or an answer to a trial sent twice
                return
            self.answers[msg.status] += 1
            if msg.status == TrialStatus.RETRY:  # kept, and sent again after resend_timeout
                sent.retry, sent.reason = True, msg.reason
            else:
                del self._waiting[msg.trial_id]
                self._newest_confirmed = max(self._newest_confirmed, sent.sequence)
                if msg.status == TrialStatus.STORED:
                    self.confirmed += 1
                elif msg.status == TrialStatus.DUPLICATE:
                    self.duplicates[msg.trial_id] = msg.reason
                else:
                    self.rejected[msg.trial_id] = msg.reason
        if msg.status == TrialStatus.REJECTED:  # one line per kind of reason and 5 s: each is in ``rejected``
            self._warnings.grouped("warning", f"the learner rejected trial '{msg.trial_id[:80]}': {msg.reason[:300]}")
        elif msg.status == TrialStatus.RETRY:
            self.node.get_logger().warning(f"the learner asks to send trial '{msg.trial_id[:80]}' again later: "
                                           f"{msg.reason[:300]}", throttle_duration_sec=10.0)

    def learner_present(self) -> bool:
        """Whether a node publishes on the status topic (a learner that confirms trials is up)."""
        return self.node.count_publishers(self._status.topic_name) > 0

    @property
    def unconfirmed(self) -> list[str]:
        """The trial ids sent and not answered yet, oldest first."""
        with self._lock:
            return list(self._waiting)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._waiting)

    def summary(self) -> str:
        return (f"{self.confirmed} trials confirmed stored, {len(self.rejected)} rejected, {len(self.duplicates)} "
                f"duplicate, {self.pending} unconfirmed, {len(self.given_up)} given up; sent again {self.resent} "
                "times")

    def destroy(self) -> None:
        """Stop the resend timer and the status subscription (the node stays)."""
        self._timer.cancel()
        self.node.destroy_timer(self._timer)
        self.node.destroy_subscription(self._status)
        self._warnings.flush(force=True)


def _given_up_line(ids: list[str], reasons: Mapping[str, str]) -> str:
    """The log line of the trials ``ids`` given up at once."""
    return (f"gave up on {len(ids)} trial{'s' * (len(ids) > 1)} (" + ", ".join(f"'{t[:80]}'" for t in ids[:5])
            + (", ..." if len(ids) > 5 else "") + f"): {reasons[ids[0]]}"
            + (" (the first; given_up has each one's reason)" if len(ids) > 1 else ""))
