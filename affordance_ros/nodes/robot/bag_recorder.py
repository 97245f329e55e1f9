"""Recording the affordance topics into a new bag as they arrive (``affordance-ros record``).

Nothing is checked or paired: every message is written as received, serialized, with the node
clock's time (sim time with ``use_sim_time``) as its log time.
"""

from __future__ import annotations

from rclpy.clock import Clock, ClockType
from rclpy.task import Future

from ...core import GROUPS
from ...data.bag import TOPICS, BagWriter
from ...msg import Action, Features
from ..contract import trial_qos


class BagRecorder:
    """Subscriptions on ``node`` that write the three topics into ``bag`` (a ``BagWriter`` is opened here)."""

    def __init__(self, node, bag, storage: str = "sqlite3", qos_depth: int = 0, flush_period: float = 1.0,
                 trials: int = 0):
        self.node = node
        self.trials = trials
        self.done = Future()
        topics = {kind: node.resolve_topic_name(TOPICS[kind]) for kind in GROUPS}
        self.writer = BagWriter(bag, storage, topics)
        qos = trial_qos(qos_depth)
        types = {"action": Action, "object": Features, "effect": Features}
        for kind in GROUPS:
            node.create_subscription(types[kind], TOPICS[kind], self._writer_of(kind), qos, raw=True)
        if flush_period > 0:
            node.create_timer(flush_period, self.writer.flush, clock=Clock(clock_type=ClockType.STEADY_TIME))

    @property
    def counts(self):
        return self.writer.counts

    def _writer_of(self, kind: str):
        def write(data: bytes) -> None:
            self.writer.write_raw(kind, self.node.get_clock().now().nanoseconds, data)
            if self.trials and not self.done.done() and all(self.counts[k] >= self.trials for k in GROUPS):
                self.done.set_result(True)
        return write

    def close(self) -> None:
        self.writer.close()
