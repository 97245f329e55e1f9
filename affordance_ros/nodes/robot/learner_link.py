"""What a robot knows of its link to the learner, and the trials it sends again once the learner is back.

A robot on a wireless link loses the learner for seconds or minutes. DDS keeps delivering what it can while the
learner stays matched; once the learner's participant has been silent for its lease (Fast DDS: 20 s) it is
unmatched, and what the robot publishes meanwhile reaches nobody. When it comes back, the trials waiting for
their answers are to be sent again at once, not when each one's back-off timer ends (up to 8 times
``resend_timeout``).

``LearnerLink`` says when the learner is back: its answers' topic was matched again (a learner appeared,
or one restarted: ``current_count_change`` > 0), or a trial topic was subscribed to again (a learner activated,
or rediscovered); ``back`` stays set until the robot has seen every
endpoint it needs matched and takes it (``take_return``), ``SETTLE`` seconds after the latest of those signs at
the earliest: a learner's endpoints are matched one by one, and the trials are sent again once, after the last.
``ResendPacer`` then sends the waiting trials again in order, at most ``window`` of them unanswered at a time
(a trial re-sent counts as unanswered for ``release`` seconds at most): as fast as the learner confirms them,
never a burst that floods a slow link.

An answer after a silence is not such a sign: a learner that stayed matched (an outage shorter than the lease, a
database locked for a while) gets from DDS what the robot's writers kept for it, and a re-send of every waiting
trial then doubles the traffic on a link that has just come back (and under a learner answering 'retry' it
came at every burst of answers). While the learner is silent, ``silent(now)`` makes the trials due on their
back-off all the same.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Iterable

from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks

PACE_PERIOD = 0.01   # seconds between the pacer's looks at its window while it has trials to send
SETTLE = 0.2         # seconds after the latest sign that the learner is back before the trials are sent again


class LearnerLink:
    """The learner's answers and matches as the robot sees them; ``silent(now)`` when nothing was answered for
    ``silence`` seconds, ``back`` once the learner came back (see the module's description): ``changed()`` is
    called ``SETTLE`` seconds after the latest sign. The signs are matched events (``answers_events``,
    ``trial_topic_events``: the QoS events of the robot's answers subscription and trial publishers); after every
    matched event each of ``listeners`` is called (others who wait for the learner)."""

    def __init__(self, node, silence: float, changed: Callable[[], None], callback_group=None):
        self.node = node
        self.silence = silence
        self.changed = changed
        self.listeners: list[Callable[[], None]] = []
        self.last_answer = time.monotonic()
        self.answers_matched = 0  # publishers matched on the answers' topic (a learner's ~/stored)
        self.back = False
        self.back_at = 0.0  # when the latest sign came
        self.settling = False  # the latest sign came less than SETTLE ago
        self._settle = node.create_timer(SETTLE, self._settled, callback_group=callback_group)
        self._settle.cancel()

    def answers_events(self) -> SubscriptionEventCallbacks:
        return SubscriptionEventCallbacks(matched=self._answers_topic_matched)

    def trial_topic_events(self) -> PublisherEventCallbacks:
        return PublisherEventCallbacks(matched=self._trial_topic_matched)

    def _answers_topic_matched(self, info) -> None:
        self.answers_matched = info.current_count
        self._tell(info.current_count_change > 0)

    def _trial_topic_matched(self, info) -> None:
        self._tell(info.current_count_change > 0)

    def _tell(self, back: bool) -> None:
        if back:
            self.came_back()
        for listener in self.listeners:
            listener()

    def came_back(self) -> None:
        """A sign that the learner is back (also for a robot's trials of an earlier run): ``changed()`` in
        ``SETTLE`` seconds, unless another sign comes first."""
        self.back = True
        self.back_at = time.monotonic()
        if self._settle is not None:  # (the publishers outlive their TrialPublisher, and their events come here)
            self.settling = True
            self._settle.reset()

    def _settled(self) -> None:
        self._settle.cancel()
        self.settling = False
        self.changed()

    def answered(self, now: float) -> None:
        self.last_answer = now

    def silent(self, now: float) -> bool:
        return now - self.last_answer > self.silence

    def take_return(self, reachable: Callable[[], bool]) -> float | None:
        """Once the learner came back (``SETTLE`` seconds ago at least) and ``reachable()`` says every endpoint is
        matched now: when the latest sign came (the trials sent before it are to be sent again); else None."""
        if self.back and not self.settling and self.answers_matched > 0 and reachable():
            self.back = False
            return self.back_at
        return None

    def destroy(self) -> None:
        self._settle.cancel()
        self.node.destroy_timer(self._settle)
        self._settle = None


class ResendPacer:
    """Sends trials again through ``send(trial_id)`` (False: that trial needs it no more), ``window`` unanswered at
    a time, on a timer of ``node`` that runs only while it has trials to send."""

    def __init__(self, node, send: Callable[[str], bool], window: int, release: float, callback_group=None):
        self.node = node
        self._send = send
        self.window = window
        self.release = release
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._in_flight: dict[str, float] = {}  # trial_id -> when it was sent again
        self._timer = node.create_timer(PACE_PERIOD, self.step, callback_group=callback_group)
        self._timer.cancel()

    def start(self, trial_ids: Iterable[str]) -> int:
        """Queue these trials (those not queued already), in this order; how many were added."""
        added = [t for t in trial_ids if t not in self._queued]
        self._queue.extend(added)
        self._queued.update(added)
        if added:
            self._timer.reset()
            self.step()
        return len(added)

    def queued(self, trial_id: str) -> bool:
        return trial_id in self._queued

    def answered(self, trial_id: str) -> None:
        self._in_flight.pop(trial_id, None)

    @property
    def waiting(self) -> int:
        """Trials queued, not sent again yet."""
        return len(self._queue)

    def step(self) -> int:
        """Send as many queued trials as the window has room for; how many were sent."""
        now = time.monotonic()
        for trial_id in [t for t, at in self._in_flight.items() if now - at > self.release]:
            del self._in_flight[trial_id]
        sent = 0
        while self._queue and len(self._in_flight) < self.window and self.node.context.ok():
            trial_id = self._queue.popleft()
            self._queued.discard(trial_id)
            if self._send(trial_id):
                self._in_flight[trial_id] = now
                sent += 1
        if not self._queue:
            self._timer.cancel()
        return sent

    def destroy(self) -> None:
        self._timer.cancel()
        self.node.destroy_timer(self._timer)
