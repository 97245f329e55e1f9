"""The learner's trial topics: ``action``, ``object_features``, ``effects`` in, every part to the ``TrialPipeline``.

Those three are shared by every robot without a name; a robot named in the ``robots`` parameter also has
its own three, ``<robot>/action``, ``<robot>/object_features``, ``<robot>/effects`` (relative names: the
node's namespace and remappings apply). A DDS reader's history is shared by all the writers of its topic,
first come first served: a robot whose reliable keep-all writer floods a topic keeps its reader full, and
the part of another robot that finds it full waits for its writer's next heartbeat and re-send. On topics of
its own a robot's parts have a reader of their own.

Created when the node activates and closed when it deactivates. Each part goes to the
``TrialPipeline`` (check, pair, store, answer) with the node clock; a timer expires trials
whose parts stopped coming.

The subscriptions and the timer share an ``IngestGroup``: a mutually exclusive callback
group that can be paused. While the case writer's queue is full (another program
holds the database's lock, or the disk is slow) the executor takes no more parts, so the DDS
readers' history fills and the robot's reliable writers wait, as they would for a slow node;
and the executor goes on answering ~/predict, /diagnostics and everything else meanwhile.

rclpy's executors build their wait set anew for every message they take, most of the cost of a part
with the ~40 entities of a lifecycle node. So a part's callback also takes the parts already queued on its
subscription, the way the executor takes one (``qos.take_queued``), and those queued on the other trial
topics, in turn (one part of each reader per round, starting after its own: a flooded reader cannot keep the
others waiting), for up to ``DRAIN_SECONDS`` (other callbacks, ~/predict among them, wait at most that long)
and while storing is not paused.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from ...data.trial import trial_topics
from ...msg import Action, Features
from ..contract import action_fields, features_fields, trial_id_of, trial_qos
from ..qos import take_queued
from .trial_pipeline import TrialPipeline

DRAIN_SECONDS = 0.002  # longest a part's callback goes on taking the parts queued behind it
PARTS = {"action": (Action, action_fields), "object": (Features, features_fields),
         "effect": (Features, features_fields)}  # kind -> its message type, how its parts are read


class IngestGroup(MutuallyExclusiveCallbackGroup):
    """A mutually exclusive callback group whose callbacks wait while ``pipeline`` is ``paused`` (rclpy's executors
    leave an entity out of their wait set while its group cannot execute it)."""

    def __init__(self, pipeline: TrialPipeline):
        super().__init__()
        self.pipeline = pipeline

    def can_execute(self, entity) -> bool:
        return not self.pipeline.paused and super().can_execute(entity)


class TrialTopics:
    """The reliable subscriptions (the shared three, and three for each of ``robots``) and the expiry timer on
    ``node``, in one ``IngestGroup``, feeding ``pipeline``."""

    def __init__(self, node, pipeline: TrialPipeline, qos_depth: int, robots: Sequence[str] = ()):
        self.node = node
        self.pipeline = pipeline
        self.group = IngestGroup(pipeline)
        qos = trial_qos(qos_depth)
        self.subscriptions = []
        self.kinds = []  # per subscription: the kind of its parts
        self.fields = []  # per subscription: how its parts are read
        for robot in ["", *robots]:
            for kind, topic in trial_topics(robot).items():
                msg_type, fields = PARTS[kind]
                self.subscriptions.append(node.create_subscription(
                    msg_type, topic, self._taker(len(self.kinds)), qos, callback_group=self.group, raw=True))
                self.kinds.append(kind)
                self.fields.append(fields)
        self.timer = node.create_timer(pipeline.expire_period, self._expire, callback_group=self.group)

    def close(self) -> None:
        """Stop taking trials (parts of trials still pending stay pending)."""
        for subscription in self.subscriptions:
            self.node.destroy_subscription(subscription)
        self.node.destroy_timer(self.timer)

    def _taker(self, index: int) -> Callable:
        def take(data: bytes) -> None:
            self._take(index, data)
        return take

    def _take(self, first: int, data: bytes) -> None:
        """``data`` (from subscription ``first``), then the parts queued on all the subscriptions, in turn
        from the one after ``first`` (see the module's description)."""
        now = self._now()
        self._handle(first, data, now)
        deadline = time.monotonic() + DRAIN_SECONDS
        count = len(self.subscriptions)
        queued = [(first + k) % count for k in range(1, count + 1)]  # the subscriptions not found empty yet
        while queued and not self.pipeline.paused and time.monotonic() <= deadline:
            for index in list(queued):
                data = take_queued(self.subscriptions[index])
                if data is None:
                    queued.remove(index)  # (a take finding nothing costs about as much as one finding a part)
                else:
                    self._handle(index, data, now)

    def _handle(self, index: int, data: bytes, now: float) -> None:
        kind = self.kinds[index]
        try:
            trial_id, stamp, fields = self.fields[index](data)
        except Exception as exc:  # noqa: BLE001 (bytes no deserialiser can read: bad input, counted and answered)
            self.pipeline.unreadable(kind, trial_id_of(data), exc)
            return
        self.pipeline.take(kind, trial_id, stamp, fields, now)

    def _expire(self) -> None:
        self.pipeline.expire(self._now())

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9
