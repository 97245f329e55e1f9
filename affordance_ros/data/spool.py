"""The robot's spool: the trials it sent that the learner has not confirmed yet, in an SQLite file of its own.

A robot on a wireless link must work through an outage of any length and lose nothing when it is restarted
meanwhile (a battery swap, a crash). ``nodes.robot.trial_publisher.TrialPublisher`` given a spool path writes each
trial's messages here (serialized, with the topic and type of each) when it sends it, and removes the trial
once the learner has answered it; a robot started on the same spool loads what an earlier run left and
sends it again once the learner is there.

Each trial is committed as it is added (WAL, ``synchronous = NORMAL``: a sync to disk per commit would bound how
many trials a second a robot sends), and ``sync`` (the publisher calls it about once a second) puts what was
committed on disk: a robot process that is killed loses no trial it sent; a power cut at most those of the last
second. Removals are committed at ``sync`` too: a trial removed
but not yet synced is sent again after a restart, and the learner answers it "stored already".

One process at a time: the spool holds an exclusive lock on ``<spool>.lock`` (released by the kernel however
the process ends); a second robot on the same spool is refused, naming the holder.

Schema (``PRAGMA application_id`` ``SPOOL_APPLICATION_ID``, ``user_version`` 1)::

    trials(sequence INTEGER PRIMARY KEY, trial_id UNIQUE, added)       -- added: wall-clock seconds
    parts(sequence -> trials.sequence, position, topic, type, data)    -- data: the serialized message
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

SPOOL_APPLICATION_ID = 0x41465350  # 'AFSP': a file with another id is not a spool, and is not touched
SPOOL_VERSION = 1
_SCHEMA = ("""
CREATE TABLE trials (
    sequence INTEGER PRIMARY KEY,
    trial_id TEXT NOT NULL UNIQUE,
    added    REAL NOT NULL
)""", """
CREATE TABLE parts (
    sequence INTEGER NOT NULL REFERENCES trials(sequence) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    topic    TEXT NOT NULL,
    type     TEXT NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (sequence, position)
)""")
REMOVALS_BATCH = 1000  # removals waiting for ``sync`` at most: then they are committed at once


class SpoolError(RuntimeError):
    """The spool cannot be used (not a spool, another process holds it, the disk fails); says what to do."""


@dataclass(frozen=True)
class SpooledPart:
    """One message of a trial: the fully qualified ``topic``, the message ``type`` ('Action', 'Features') and
    its serialized bytes."""

    topic: str
    type: str
    data: bytes


class TrialSpool:
    """The trials not yet confirmed, in the file ``path`` (made if missing, its folder too)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock_fd = _take_lock(self.path)
        self._removals: set[str] = set()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            _prepare(self._conn, self.path)
        except sqlite3.Error as exc:
            os.close(self._lock_fd)
            raise SpoolError(f"cannot use '{self.path}' as the robot's spool: {exc}") from None
        except BaseException:
            os.close(self._lock_fd)
            raise

    def load(self) -> list[tuple[str, list[SpooledPart]]]:
        """The trials kept, oldest first: (trial_id, its parts in the order they were added)."""
        rows = self._conn.execute("SELECT t.trial_id, p.topic, p.type, p.data FROM trials t JOIN parts p "
                                  "ON p.sequence = t.sequence ORDER BY t.sequence, p.position").fetchall()
        trials: dict[str, list[SpooledPart]] = {}
        for trial_id, topic, type_name, data in rows:
            trials.setdefault(trial_id, []).append(SpooledPart(topic, type_name, bytes(data)))
        return list(trials.items())

    def add(self, trial_id: str, parts: Sequence[SpooledPart]) -> None:
        """Keep ``parts`` of ``trial_id`` (a new trial, or more parts of one kept already), committed at once."""
        if trial_id in self._removals:  # sent again after it was answered: keep the new one
            self._commit_removals()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            row = self._conn.execute("SELECT sequence FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
            if row is None:
                sequence = self._conn.execute("INSERT INTO trials (trial_id, added) VALUES (?, ?)",
                                              (trial_id, time.time())).lastrowid
                first = 0
            else:
                sequence = row[0]
                first = self._conn.execute("SELECT COUNT(*) FROM parts WHERE sequence = ?", (sequence,)).fetchone()[0]
            self._conn.executemany("INSERT INTO parts VALUES (?, ?, ?, ?, ?)",
                                   [(sequence, first + k, p.topic, p.type, p.data) for k, p in enumerate(parts)])
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise SpoolError(f"cannot write trial '{trial_id[:80]}' to the spool '{self.path}': {exc}") from None

    def remove(self, trial_ids: Iterable[str]) -> None:
        """Forget these trials (answered); committed at the next ``sync`` (or once ``REMOVALS_BATCH`` wait)."""
        self._removals.update(trial_ids)
        if len(self._removals) >= REMOVALS_BATCH:
            self._commit_removals()

    def sync(self) -> None:
        """Commit the removals, and put every commit so far on disk (a checkpoint of the write-ahead log)."""
        self._commit_removals()
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            raise SpoolError(f"cannot sync the spool '{self.path}': {exc}") from None

    def count(self) -> int:
        """Trials kept (those removed and not yet committed included)."""
        return self._conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]

    def close(self) -> None:
        """Sync, close the file and release the lock (what is still kept stays for the next run)."""
        if self._conn is None:
            return
        try:
            self.sync()
        finally:
            self._conn.close()
            self._conn = None
            os.close(self._lock_fd)

    def _commit_removals(self) -> None:
        if not self._removals:
            return
        removals, self._removals = sorted(self._removals), set()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("DELETE FROM trials WHERE trial_id = ?", [(t,) for t in removals])
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise SpoolError(f"cannot remove answered trials from the spool '{self.path}': {exc}") from None


def _take_lock(path: Path) -> int:
    """An exclusive lock on ``<path>.lock`` (its file descriptor), naming this process in it; SpoolError naming the
    holder when another process has it."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise SpoolError(f"cannot use '{path}' as the robot's spool: {exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise SpoolError(f"the spool '{path}' is in use by {holder}: one robot process per spool (give each "
                         "robot a spool of its own, or stop the other one)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()} on {os.uname().nodename}".encode(), 0)
    return fd


def _prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Check that ``conn``'s file is a spool (or empty: make it one), in WAL mode, foreign keys on."""
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    tables = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
    if tables and application_id != SPOOL_APPLICATION_ID:
        conn.close()
        raise SpoolError(f"'{path}' is an SQLite file of another kind, not a robot's spool (a case database?): "
                         "give the spool a path of its own")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if tables and version != SPOOL_VERSION:
        conn.close()
        raise SpoolError(f"the spool '{path}' has version {version}; this version of affordance_ros reads "
                         f"version {SPOOL_VERSION}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if not tables:
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {SPOOL_APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SPOOL_VERSION}")
        conn.execute("COMMIT")
