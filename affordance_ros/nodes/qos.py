"""The QoS of the trial topics (action, object_features, effects), one rule for every node.

Reliable, and by default KEEP_ALL on both ends: a publisher faster than the learner is
slowed down (a reliable KEEP_ALL writer blocks in ``publish`` while the reader's history
is full) instead of losing trials. Memory stays bounded even so: Fast DDS caps a KEEP_ALL
history by its resource limits (5000 samples by default), and once they are reached the
reader stops acknowledging and the writer waits. A depth > 0 asks for KEEP_LAST(depth)
instead, for users who prefer a fixed bound and accept losing the oldest messages of a
burst longer than that.
"""

from __future__ import annotations

import time
from typing import Callable

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

KEEP_ALL = 0  # the value of a 'qos_depth' parameter or option that asks for KEEP_ALL


def trial_qos(depth: int = KEEP_ALL) -> QoSProfile:
    """Reliable; ``depth`` 0: KEEP_ALL, else KEEP_LAST with that depth."""
    if depth < 0:
        raise ValueError(f"qos depth must be >= 0 (0: keep all), got {depth}")
    if depth == KEEP_ALL:
        return QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def describe_qos(depth: int) -> str:
    return "reliable, keep all" if depth == KEEP_ALL else f"reliable, keep last {depth}"


def publish_waiting(publisher, msg, ok: Callable[[], bool], pause: float = 0.01,
                    on_wait: Callable[[], None] | None = None) -> int:
    """Publish ``msg``, waiting while the writer's history is full, so that it is delayed, never dropped.

    A reliable KEEP_ALL writer whose reader is behind blocks in ``publish`` for Fast DDS's
    max_blocking_time (100 ms), then fails ("cannot publish data") without having queued the
    message; then this sleeps ``pause`` (letting other threads of the process take the GIL,
    e.g. an in-process subscriber that has to catch up) and tries again, calling ``on_wait``
    once per failed attempt. Returns the number of failed attempts. Raises the last error
    once ``ok()`` is false (the context is shutting down).
    """
    failed = 0
    while True:
        try:
            publisher.publish(msg)
            return failed
        except _rclpy.RCLError:
            if not ok():
                raise
            failed += 1
            if on_wait is not None:
                on_wait()
            time.sleep(pause)


def take_queued(subscription):
    """The next message queued on ``subscription`` (taken the way rclpy's executor takes one), or None.

    rclpy's executors build their wait set anew for every message they take, which costs more than
    handling a small message; a callback that goes on with the messages queued behind its own saves that.
    """
    with subscription.handle:
        taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
    return taken[0] if taken is not None else None
