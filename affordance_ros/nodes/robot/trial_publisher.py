"""The robot's side of end-to-end delivery: publish a trial, keep it until the learner confirms it.

DDS acknowledges a message once it sits in the learner's reader queue, not once it is stored:
a learner killed at that moment loses it. The learner answers every trial on ``~/stored``
(msg/TrialStatus) after committing it, and a trial sent again is confirmed again (the store
is idempotent by trial_id). So a robot that keeps each trial until it is confirmed, and sends
it again when no answer came, loses none across crashes and restarts of the learner::

    trials = TrialPublisher(node, resend_timeout=5.0, spool_path="/var/lib/robot/trials.spool")
    trials.publish("run7-000042", "tap", {"color": 5.1, "shape": 0.2}, {"obj_vel": 9.7}, stamp=node.get_clock().now())
    ...                                   # spin the node; statuses arrive, due trials are re-sent on a timer
    trials.unconfirmed                    # ids still waiting: exit only once it is empty

When each trial is sent again, and when one is given up: ``waiting_trials`` (after ``max_resends`` re-sends
the learner did not take while it took later trials, or answered retry: logged, one line for the trials
given up at once, and kept in ``given_up`` with why; never while the learner is silent, so an outage of any
length gives up nothing). When the learner comes back after an outage (matched again, or answering after a
silence), every trial waiting is sent again at once, ``RESEND_WINDOW`` unanswered at a time
(``learner_link``). With ``spool_path`` the trials waiting are also kept on disk (``data.spool``): a robot
restarted meanwhile sends them once the learner is there. At most ``spool_limit`` trials wait at a time;
then ``full`` is true and a new trial is refused (SpoolFull), never dropped; so it is while the disk refuses the
spool (``trial_spool``, which also keeps the spool's other failures out of the robot's callbacks).

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

import os
import threading
import time
from typing import Mapping, Sequence

from ...data.log_text import RepeatedMessages
from ...data.pairing import DEFAULT_MAX_TRIAL_ID_LENGTH
from ...msg import Action, Features, TrialStatus
from ..contract import KEEP_ALL, STATUS_TOPIC, robot_name_problem, trial_id_problem, trial_qos, trial_topics
from ..qos import publish_waiting, take_queued
from .learner_link import LearnerLink, ResendPacer
from .trial_spool import SpooledTrials
from .waiting_trials import BACKOFF_LIMIT, MAX_RESEND_BATCH, SpoolFull, WaitingTrials  # noqa: F401 (theirs)

DEFAULT_RESEND_TIMEOUT = 5.0
DEFAULT_MAX_RESENDS = 10
DEFAULT_SPOOL_LIMIT = 100_000  # trials waiting for their answers at most (~1 kB of memory each)
RESEND_WINDOW = 50      # trials sent again after an outage and not answered yet, at most
DRAIN_SECONDS = 0.002   # longest the status callback goes on taking the answers queued behind its own


class FromWaiting:
    """A read-only attribute of a ``TrialPublisher`` that is its ``waiting`` book's of the same name."""

    def __init__(self):
        self.name = ""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, publisher, owner=None):
        return self if publisher is None else getattr(publisher.waiting, self.name)


class TrialPublisher:
    """Publishes trials on ``node`` (on the topics of ``robot_name``: ``trial_topics``) and keeps each until the
    learner answers on ``status_topic``. ``publish`` builds and sends the three messages of a trial; ``send`` sends
    messages made elsewhere (e.g. a bag's serialized messages) on given publishers. Trials need a trial_id the
    learner answers as it is (``trial_id_problem``; ValueError otherwise). ``confirmed``, ``rejected``,
    ``duplicates``, ``given_up`` (trial_id -> reason) and ``resent`` say what happened. With ``spool_path`` the
    trials waiting are kept in that file too (``spool``, a ``SpooledTrials``; SpoolError if it cannot be used at
    start); ``spool_limit`` wait."""

    confirmed = FromWaiting()
    rejected = FromWaiting()
    duplicates = FromWaiting()
    given_up = FromWaiting()
    answers = FromWaiting()

    def __init__(self, node, resend_timeout: float = DEFAULT_RESEND_TIMEOUT, qos_depth: int = KEEP_ALL,
                 status_topic: str = STATUS_TOPIC, callback_group=None, max_resends: int = DEFAULT_MAX_RESENDS,
                 max_trial_id_length: int = DEFAULT_MAX_TRIAL_ID_LENGTH, robot_name: str = "",
                 spool_path: str | os.PathLike | None = None, spool_limit: int = DEFAULT_SPOOL_LIMIT):
        problem = settings_problem(resend_timeout, max_resends, spool_limit) or (
            robot_name and robot_name_problem(robot_name, node.get_name(), node.get_namespace()))
        if problem:
            raise ValueError(problem)
        self.node = node
        self.topics = trial_topics(robot_name)
        self.resend_timeout = float(resend_timeout)
        self.max_resends = max_resends
        self.max_trial_id_length = max_trial_id_length
        self._lock = threading.Lock()
        self.waiting = WaitingTrials(self.resend_timeout, max_resends, spool_limit)
        self.link = LearnerLink(node, self.resend_timeout, self._check_return, callback_group)
        self.outputs = TrialOutputs(node, self.topics, trial_qos(qos_depth), self.link)
        self.resent = 0
        self._warnings = RepeatedMessages(self._warn)
        self._status = node.create_subscription(
            TrialStatus, status_topic, self._on_status, trial_qos(KEEP_ALL), callback_group=callback_group,
            event_callbacks=self.link.answers_events())
        self._timer = node.create_timer(self.resend_timeout / 4, self.resend_due, callback_group=callback_group)
        self._pacer = ResendPacer(node, self._send_again, RESEND_WINDOW, self.resend_timeout, callback_group)
        self.spool = SpooledTrials(spool_path, node, self.outputs.on) if spool_path else None
        for trial_id, messages in self.spool.load() if self.spool else ():
            self.waiting.add(trial_id, messages, time.monotonic())
        if self.waiting.trials:  # an earlier run's trials: sent once the learner is there
            self.link.came_back()
            node.get_logger().info(f"{len(self.waiting.trials)} trials of an earlier run in the spool "
                                   f"{self.spool.path}: sent again once the learner is there")

    # ----------------------------------------------------------------- sending
    @property
    def publishers(self) -> dict:
        """kind -> publisher of the three trial topics (created on first use)."""
        return self.outputs.by_kind()

    def publish(self, trial_id: str, action: str, object_features: Mapping[str, float],
                effects: Mapping[str, float], stamp=None) -> None:
        """Publish one trial (``stamp``: a builtin_interfaces/Time, or an rclpy Time; None: unstamped)."""
        self.send(trial_id, trial_messages(self.publishers, trial_id, action, object_features, effects, stamp))

    def send(self, trial_id: str, messages: Sequence) -> None:
        """Publish ``messages`` ((publisher, message or serialized bytes), the whole trial) and keep them
        until ``trial_id`` is confirmed. Publishing waits while a reader is behind (keep-all history full).
        SpoolFull while ``full``, and when the spool cannot take the trial (the trial is not taken)."""
        self._keep(trial_id, messages, sent=False)
        self.outputs.send(messages)

    def keep(self, trial_id: str, publisher, msg) -> None:
        """Keep one message of ``trial_id`` that was published already (e.g. a bag's, at its recorded
        time) until the trial is confirmed; it is sent again with the trial's other kept messages."""
        self._keep(trial_id, [(publisher, msg)], sent=True)

    def _keep(self, trial_id: str, messages: Sequence, sent: bool) -> None:
        problem = trial_id_problem(trial_id, self.max_trial_id_length)
        if problem:
            raise ValueError(problem)
        with self._lock:
            if not sent and trial_id in self.waiting.trials:
                return  # (sent again by its robot: the messages of its first send are kept)
            self.waiting.check_room(trial_id)  # (before the spool is written)
            for publisher, _ in messages:
                self.outputs.keep(publisher)
            self.waiting.add(trial_id, self.spool.add(trial_id, messages, sent) if self.spool else messages,
                             time.monotonic(), sent)

    def _warn(self, level: str, text: str) -> None:
        """A line of the grouped warnings (the node's logger as it is now)."""
        self.node.get_logger().warning(text)

    @property
    def publish_waits(self) -> int:
        """Publish attempts that found a reader's history full (and waited)."""
        return self.outputs.waits

    @property
    def full(self) -> bool:
        """Whether ``spool_limit`` trials wait for their answers, or the spool cannot take a trial now (the disk is
        full: ``spool.refusing`` says why); ``send`` of a new trial raises SpoolFull."""
        return self.waiting.full or bool(self.spool and self.spool.refusing)

    def resend_due(self, now: float | None = None) -> int:
        """The timer's tick: every waiting trial again, paced, if the learner came back; else those due
        (``waiting_trials``), and the given up logged; returns how many were sent now."""
        now = time.monotonic() if now is None else now
        self._check_return()
        with self._lock:
            due, given_up = self.waiting.due(now, self.link.silent(now), self._pacer.queued)
            if given_up and self.spool:
                self.spool.remove(given_up)
        if given_up:  # one line for all of them
            self.node.get_logger().warning(_given_up_line(given_up, self.given_up))
        self._warnings.flush()
        if self.spool:
            self.spool.sync(now)
        for sent in due:
            if not self.node.context.ok():
                break
            self.outputs.send(sent.messages)
        self.resent += len(due)
        if due:
            self.node.get_logger().info(f"sent {len(due)} unconfirmed trials again ({self.pending} waiting for "
                                        "the learner)", throttle_duration_sec=5.0)
        return len(due)

    def _check_return(self) -> None:
        """Once the learner is back and matched on every topic: every trial sent before it came, again, paced."""
        back_at = self.link.take_return(self.outputs.all_matched)
        if back_at is None:
            return
        with self._lock:
            again = self.waiting.sent_before(back_at)
        if self._pacer.start(again):
            self.node.get_logger().info(f"the learner is back: sending the {len(again)} trials waiting for its "
                                        f"answer again, {RESEND_WINDOW} unanswered at a time")

    def _send_again(self, trial_id: str) -> bool:
        """The pacer's send: ``trial_id`` again, its back-off started anew (False: answered meanwhile)."""
        with self._lock:
            sent = self.waiting.sent_again(trial_id, time.monotonic())
        if sent is not None:
            self.outputs.send(sent.messages)
            self.resent += 1
        return sent is not None

    # --------------------------------------------------------------- answers
    def _on_status(self, msg: TrialStatus) -> None:
        """An answer, then the answers queued behind it (for up to ``DRAIN_SECONDS``: one executor callback
        for many answers while a learner confirms a fast stream)."""
        deadline = time.monotonic() + DRAIN_SECONDS
        while msg is not None:
            self._answer(msg)
            if time.monotonic() > deadline:
                break
            msg = take_queued(self._status)

    def _answer(self, msg: TrialStatus) -> None:
        with self._lock:
            self.link.answered(time.monotonic())
            if not self.waiting.answered(msg.trial_id, msg.status, msg.reason):
                return  # another robot's trial, or an answer to a trial sent twice
            if self.spool and msg.status != TrialStatus.RETRY:
                self.spool.remove([msg.trial_id])
        self._pacer.answered(msg.trial_id)
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
        return self.waiting.sent_before(float("inf"))

    @property
    def pending(self) -> int:
        """Trials waiting for their answer."""
        return len(self.waiting.trials)

    def summary(self) -> str:
        kept = self.spool.note(self.pending) if self.spool else ""
        return (f"{self.confirmed} trials confirmed stored, {len(self.rejected)} rejected, {len(self.duplicates)} "
                f"duplicate, {self.pending} unconfirmed{kept}, {len(self.given_up)} given up; sent again "
                f"{self.resent} times")

    def destroy(self) -> None:
        """Stop the timers and the status subscription, sync and close the spool (the node stays)."""
        self._timer.cancel()
        self.node.destroy_timer(self._timer)
        self._pacer.destroy()
        self.link.destroy()
        self.node.destroy_subscription(self._status)
        self._warnings.flush(force=True)
        if self.spool:
            self.spool.close()


class TrialOutputs:
    """The publishers of a robot's trials on ``node``: the three of ``topics`` (made on first use) and every one a
    kept trial was sent on (a spooled trial is sent again on them), each with ``qos`` and a matched event for
    ``link``; ``send`` publishes on them."""

    def __init__(self, node, topics: Mapping[str, str], qos, link: LearnerLink):
        self.node = node
        self.topics = topics
        self.qos = qos
        self.link = link
        self.kinds: dict | None = None
        self.by_topic = {}  # topic -> publisher
        self.waits = 0  # publish attempts that found a reader's history full

    def by_kind(self) -> dict:
        """kind -> publisher of the three trial topics."""
        if self.kinds is None:
            self.kinds = {kind: self.on(self.node.resolve_topic_name(topic), Action if kind == "action" else Features)
                          for kind, topic in self.topics.items()}
        return self.kinds

    def on(self, topic: str, msg_type):
        """The publisher of trials on ``topic`` (fully qualified), made if there is none."""
        if topic not in self.by_topic:
            self.by_topic[topic] = self.node.create_publisher(msg_type, topic, self.qos,
                                                              event_callbacks=self.link.trial_topic_events())
        return self.by_topic[topic]

    def send(self, messages: Sequence) -> None:
        """Publish ``messages`` ((publisher, message or serialized bytes)), waiting while a reader is behind (keep-all
        history full)."""
        for publisher, msg in messages:
            self.waits += publish_waiting(publisher, msg, self.node.context.ok, on_wait=self._log_wait)

    def _log_wait(self) -> None:
        self.node.get_logger().warning("a subscriber is behind: waiting to publish (the history is full)",
                                       throttle_duration_sec=5.0)

    def keep(self, publisher) -> None:
        """``publisher`` (made elsewhere) sent a kept trial."""
        self.by_topic.setdefault(publisher.topic_name, publisher)

    def all_matched(self) -> bool:
        """Whether every publisher has a subscriber."""
        return all(p.get_subscription_count() for p in self.by_topic.values())


def settings_problem(resend_timeout: float, max_resends: int, spool_limit: int) -> str:
    """'' if a TrialPublisher can work with these, else what is wrong."""
    if not resend_timeout > 0:
        return f"resend_timeout must be > 0 seconds, got {resend_timeout}"
    if max_resends < 0:
        return f"max_resends must be >= 0, got {max_resends}"
    return f"spool_limit must be >= 1 trial, got {spool_limit}" if spool_limit < 1 else ""


def trial_messages(publishers: Mapping, trial_id: str, action: str, object_features: Mapping[str, float],
                   effects: Mapping[str, float], stamp=None) -> list:
    """The three messages of a trial, each with its publisher (of ``publishers``, by kind)."""
    if stamp is not None and hasattr(stamp, "to_msg"):
        stamp = stamp.to_msg()
    parts = [(publishers["action"], Action(trial_id=trial_id, action=action))]
    for kind, readings in (("object", object_features), ("effect", effects)):
        msg = Features(trial_id=trial_id, names=list(readings), values=[float(x) for x in readings.values()])
        parts.append((publishers[kind], msg))
    if stamp is not None:
        for _, msg in parts:
            msg.header.stamp = stamp
    return parts


def _given_up_line(ids: list[str], reasons: Mapping[str, str]) -> str:
    """The log line of the trials ``ids`` given up at once."""
    return (f"gave up on {len(ids)} trial{'s' * (len(ids) > 1)} (" + ", ".join(f"'{t[:80]}'" for t in ids[:5])
            + (", ..." if len(ids) > 5 else "") + f"): {reasons[ids[0]]}"
            + (" (the first; given_up has each one's reason)" if len(ids) > 1 else ""))
