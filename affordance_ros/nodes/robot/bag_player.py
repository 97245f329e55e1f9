"""Publishing a bag's messages into the ROS graph at their recorded pace (``affordance-ros replay``).

The Action and Features messages are published as recorded (their serialized bytes), on the
topics they were recorded on, at their recorded pace divided by the rate. With /clock, the
bag's log time is published too, so that a learner with ``use_sim_time:=true`` sees the clock
of the recording.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from rclpy.duration import Duration
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from ...data.bag import BagMessage, split_nanoseconds
from ...msg import Action, Features
from ..contract import trial_id_problem, trial_qos
from ..qos import publish_waiting

CLOCK_TOPIC = "/clock"
CLOCK_PREROLL = 0.3  # seconds of /clock at the first log time before the first message


def playback_offsets(log_times: Sequence[int], rate: float) -> list[float]:
    """Wall-clock seconds after the start at which each message is due."""
    if not log_times:
        return []
    first = log_times[0]
    return [(t - first) * 1e-9 / rate for t in log_times]


class BagPlayer:
    """Publishes bag messages on their recorded topics with a node of its own (created on ``node``)."""

    def __init__(self, node, messages: Sequence[BagMessage], publish_clock: bool = False, qos_depth: int = 0,
                 trials=None):
        self.node = node
        self.messages = sorted(messages, key=lambda m: m.log_time)
        qos = trial_qos(qos_depth)
        types = {"action": Action, "object": Features, "effect": Features}
        topics = {m.topic: m.kind for m in self.messages}
        self.publishers = {topic: node.create_publisher(types[kind], topic, qos) for topic, kind in topics.items()}
        self.clock = (node.create_publisher(Clock, CLOCK_TOPIC, QoSProfile(
            depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)) if publish_clock else None)
        self.published = 0
        # with a TrialPublisher: the trials whose three parts the bag holds are kept until confirmed (those with
        # an id the learner would answer under another name are published as recorded, not kept)
        self.trials = trials
        kinds = {}
        for m in self.messages:
            if m.trial_id:
                kinds.setdefault(m.trial_id, set()).add(m.kind)
        self.complete_ids = {t for t, k in kinds.items() if len(k) == 3 and not trial_id_problem(t)}

    def subscribers_ready(self, minimum: int) -> bool:
        return all(p.get_subscription_count() >= minimum for p in self.publishers.values())

    def play(self, rate: float = 1.0, clock_frequency: float = 40.0,
             progress: Callable[[int, int], None] | None = None) -> int:
        """Publish every message at its time (blocking); returns how many were published.

        With /clock: ticks ``clock_frequency`` times per wall second, never ahead of the
        message due next, so a subscriber's clock does not run ahead of the data it was sent.
        """
        messages = self.messages
        offsets = playback_offsets([m.log_time for m in messages], rate)
        clock_period = 1.0 / clock_frequency
        first = messages[0].log_time if messages else 0
        if self.clock is not None:  # subscribers' clocks start at the bag's first log time before any data
            until = time.monotonic() + CLOCK_PREROLL
            while time.monotonic() < until:
                self._publish_clock(first)
                time.sleep(clock_period)
        start = next_tick = time.monotonic()
        for k, (message, due) in enumerate(zip(messages, offsets)):
            while True:
                now = time.monotonic()
                if self.clock is not None and now >= next_tick:
                    self._publish_clock(min(message.log_time, first + int((now - start) * rate * 1e9)))
                    next_tick += clock_period * (1 + int((now - next_tick) / clock_period))
                if now - start >= due:
                    break
                time.sleep(min(start + due, next_tick if self.clock is not None else float("inf")) - now)
            kept = self.trials is not None and message.trial_id in self.complete_ids
            if kept:  # the pace goes on from where it was once the learner confirmed some
                start += self._wait_for_room(message.trial_id)
            publish_waiting(self.publishers[message.topic], message.raw, self.node.context.ok)
            if kept:
                self.trials.keep(message.trial_id, self.publishers[message.topic], message.raw)
            self.published += 1
            if progress is not None:
                progress(k + 1, len(messages))
        if self.clock is not None and messages:
            self._publish_clock(messages[-1].log_time)
        return self.published

    def _wait_for_room(self, trial_id: str) -> float:
        """While the trials waiting for their confirmation fill the spool and ``trial_id`` is a new one: wait (the
        node spins elsewhere, taking the answers); the seconds waited."""
        started = time.monotonic()
        if self.trials.full and trial_id not in self.trials.waiting.trials:
            refusing = self.trials.spool.refusing if self.trials.spool is not None else ""
            self.node.get_logger().warning(f"{refusing}: playing waits until it has room" if refusing else
                                           f"{self.trials.pending} trials wait for the learner's confirmation "
                                           "(the spool limit): playing waits until it confirms some")
            while self.trials.full and self.node.context.ok():
                time.sleep(0.01)
        return time.monotonic() - started

    def wait_for_acknowledgements(self, timeout: float = 10.0) -> bool:
        return all(p.wait_for_all_acked(Duration(seconds=timeout)) for p in self.publishers.values())

    def _publish_clock(self, nanoseconds: int) -> None:
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = split_nanoseconds(nanoseconds)
        self.clock.publish(msg)
