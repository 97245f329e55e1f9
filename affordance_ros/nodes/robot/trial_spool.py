"""A ``TrialPublisher``'s spool: each trial's messages serialized into ``data.spool.TrialSpool`` as it is kept, and
the trials an earlier run left loaded back with a publisher for each message's topic."""

from __future__ import annotations

import os
import time
from typing import Callable, Sequence

from rclpy.serialization import serialize_message

from ...data.spool import SpooledPart, TrialSpool
from ...msg import Action, Features

SYNC_PERIOD = 1.0  # seconds between syncs of the spool to disk at most (a power cut loses at most the last ones)
MESSAGE_TYPES = {"Action": Action, "Features": Features}


class SpooledTrials:
    """The spool at ``path``; ``publisher_of(topic, message type)`` gives the publisher a loaded message is sent on."""

    def __init__(self, path: str | os.PathLike, publisher_of: Callable):
        self.spool = TrialSpool(path)
        self.path = self.spool.path
        self._publisher_of = publisher_of
        self._synced = time.monotonic()

    def load(self) -> list[tuple[str, list]]:
        """The trials an earlier run left, oldest first: (trial_id, [(publisher, serialized message), ...])."""
        return [(trial_id, [(self._publisher_of(p.topic, MESSAGE_TYPES[p.type]), p.data) for p in parts])
                for trial_id, parts in self.spool.load() if all(p.type in MESSAGE_TYPES for p in parts)]

    def add(self, trial_id: str, messages: Sequence) -> list:
        """Keep ``messages`` ((publisher, message or serialized bytes)) of ``trial_id``; the same, serialized."""
        serialized = [(publisher, msg if isinstance(msg, bytes) else serialize_message(msg))
                      for publisher, msg in messages]
        self.spool.add(trial_id, [SpooledPart(publisher.topic_name, publisher.msg_type.__name__, data)
                                  for publisher, data in serialized])
        return serialized

    def remove(self, trial_ids) -> None:
        self.spool.remove(trial_ids)

    def sync(self, now: float) -> None:
        """Put what was kept on disk, if ``SYNC_PERIOD`` has passed since the last time."""
        if now - self._synced >= SYNC_PERIOD:
            self._synced = now
            self.spool.sync()

    def count(self) -> int:
        return self.spool.count()

    def close(self) -> None:
        self.spool.close()
