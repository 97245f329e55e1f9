"""A ``TrialPublisher``'s spool: each trial's messages serialized into ``data.spool.TrialSpool`` as it is kept, the
trials an earlier run left loaded back with a publisher for each message's topic, and what the disk does to the
spool kept out of the robot's callbacks.

- A trial the spool cannot take (the disk full, an I/O error) is refused as a full spool refuses one
  (``SpoolFull``, the trial not sent) and ``refusing`` says why: the robot takes no new trial until a sync
  succeeds with ``SPOOL_ROOM`` free on the spool's file system. A removal or a sync that fails is tried again at
  the next sync. Every failure is counted (``errors``) and logged, grouped; none is raised.
- At every sync the spool is restored if its file was removed, moved or replaced (``TrialSpool.restore``),
  in one warning line.
- A spooled trial that cannot be sent (a topic that is not a topic name, a type that is not a trial message's,
  bytes the learner could not read, or that name another trial) is set aside at load (``set_aside``), in one
  warning line.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Sequence

from rclpy.exceptions import InvalidTopicNameException
from rclpy.serialization import serialize_message
from rclpy.validate_full_topic_name import validate_full_topic_name

from ...data.log_text import RepeatedMessages
from ...data.spool import SpooledPart, SpoolError, TrialSpool
from ...msg import Action, Features
from ..contract import action_fields, features_fields
from .waiting_trials import SpoolFull

SYNC_PERIOD = 1.0  # seconds between syncs of the spool to disk at most (a power cut loses at most the last ones)
SPOOL_ROOM = 1 << 20  # bytes free before a spool the disk refused takes trials again (~1 s of trials at 50 Hz)
MESSAGE_TYPES = {"Action": Action, "Features": Features}
READERS = {"Action": action_fields, "Features": features_fields}  # how the learner reads each type's bytes


class SpooledTrials:
    """The spool at ``path`` of a robot's ``node``; ``publisher_of(topic, message type)`` gives the publisher a
    loaded message is sent on."""

    def __init__(self, path: str | os.PathLike, node, publisher_of: Callable):
        self.spool = TrialSpool(path)
        self.path = self.spool.path
        self.node = node
        self._publisher_of = publisher_of
        self._synced = time.monotonic()
        self._lock = threading.Lock()  # (the answers' callback and the timer may run in two threads)
        self._warnings = RepeatedMessages(self._log)
        self.errors = 0  # writes to the spool that failed
        self.refusing = ""  # why the spool takes no new trial now ('': it takes them)
        self.set_aside: dict[str, str] = {}  # trial_id -> why, of the trials set aside at load

    def load(self) -> list[tuple[str, list]]:
        """The trials an earlier run left that can be sent, oldest first: (trial_id, [(publisher, serialized
        message), ...]); the others set aside, in one warning line."""
        with self._lock:
            trials, self.set_aside = self.spool.load_sendable(unsendable)
        if self.set_aside:
            (first, why), more = next(iter(self.set_aside.items())), len(self.set_aside) - 1
            self.node.get_logger().warning(
                f"set aside {len(self.set_aside)} trial{'s' * bool(more)} of the spool {self.path} that cannot be "
                f"sent (kept in its table set_aside): trial '{str(first)[:80]}': {why}"
                + (f" (and {more} more)" if more else ""))
        return [(trial_id, [(self._publisher_of(p.topic, MESSAGE_TYPES[p.type]), p.data) for p in parts])
                for trial_id, parts in trials]

    def add(self, trial_id: str, messages: Sequence, sent: bool) -> list:
        """Keep ``messages`` ((publisher, message or serialized bytes)) of ``trial_id``; the same, serialized.
        When the spool cannot take them: SpoolFull, unless they were ``sent`` already (then kept in memory only)."""
        serialized = [(publisher, msg if isinstance(msg, bytes) else serialize_message(msg))
                      for publisher, msg in messages]
        parts = [SpooledPart(publisher.topic_name, publisher.msg_type.__name__, data) for publisher, data in serialized]
        with self._lock:
            if self.refusing and not sent:  # (until a sync finds room)
                raise SpoolFull(f"{self.refusing}: not taking new trials until it has room (the trials waiting are "
                                "kept)")
            try:
                self.spool.add(trial_id, parts)
                return serialized
            except SpoolError as exc:
                self.errors += 1
                self.refusing = self.refusing or str(exc)
                failure = str(exc)
        if not sent:
            raise SpoolFull(f"{failure}: not taking new trials until it has room (the trials waiting are kept)")
        self._warnings.grouped("warning", f"{failure}: the trial was sent already, and is kept in memory only")
        return serialized

    def remove(self, trial_ids) -> None:
        with self._lock:
            self._try(self.spool.remove, trial_ids)

    def sync(self, now: float) -> None:
        """If ``SYNC_PERIOD`` has passed since the last time: restore the spool if its file went, put what was kept
        on disk, and take trials again if the disk refused some and has room now."""
        if now - self._synced < SYNC_PERIOD:
            return
        self._synced = now
        with self._lock:
            restored = self._try(self.spool.restore)
            synced = restored is not None and self._try(self.spool.sync) is not None
            room = synced and self.refusing and free_space(self.path) >= SPOOL_ROOM
            if room:
                self.refusing = ""
        if restored:
            self.node.get_logger().warning(restored)
        if room:
            self.node.get_logger().info(f"the spool {self.path} has room again: taking new trials")
        self._warnings.flush()

    def note(self, pending: int) -> str:
        """What the robot's summary says of the spool."""
        return ((f" (kept in the spool {self.path})" if pending else "")
                + (f", {len(self.set_aside)} set aside in the spool" if self.set_aside else "")
                + (f", {self.errors} spool writes failed" if self.errors else ""))

    def close(self) -> None:
        with self._lock:
            self._try(self.spool.close)
        self._warnings.flush(force=True)

    def _try(self, operation: Callable, *args):
        """``operation(*args)``; on SpoolError (or an OSError of the file system): counted, logged (grouped), and
        None."""
        try:
            result = operation(*args)
        except (SpoolError, OSError) as exc:
            self.errors += 1
            self._warnings.grouped("warning", str(exc))
            return None
        return True if result is None else result

    def _log(self, level: str, text: str) -> None:
        self.node.get_logger().warning(text)


def unsendable(trial_id: str, parts: Sequence[SpooledPart]) -> str:
    """'' if the learner can take every part of the spooled trial ``trial_id``; else why not."""
    for k, part in enumerate(parts):
        if part.type not in MESSAGE_TYPES:
            return f"its part {k} has type '{part.type[:80]}', not one of {list(MESSAGE_TYPES)}"
        try:
            validate_full_topic_name(part.topic)
        except InvalidTopicNameException as exc:
            why = str(exc).split("\n")[0].removeprefix("Invalid topic name: ").rstrip(":")
            return f"its part {k}'s topic '{part.topic[:80]}' is not a topic name: {why}"
        try:
            named = READERS[part.type](part.data)[0]
        except Exception as exc:  # noqa: BLE001 (damaged bytes: whatever the deserialiser says)
            return f"its part {k} ({part.type} on {part.topic}) cannot be read: {str(exc)[:200] or type(exc).__name__}"
        if named != trial_id:
            return f"its part {k} ({part.type} on {part.topic}) names trial '{named[:80]}'"
    return ""


def free_space(path) -> int:
    """Bytes an unprivileged process may still write on the file system of ``path`` (0 if it cannot be told)."""
    try:
        status = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return 0
    return status.f_bavail * status.f_frsize
