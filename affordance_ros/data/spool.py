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
the process ends); a second robot on the same spool is refused, naming the holder. A file that is not a spool
(a learner's case database, any other file) is refused before anything is written, its lock file included.

A spool removed, moved away or replaced while the robot runs (``rm``, a clean-up script): ``restore`` (the
publisher calls it at every sync) sees that the path no longer names the file it has open, copies that file
(still readable through the open connection) to a new file at the path, and goes on there: every trial waiting
is in it. A file that took the path is moved aside first (``<spool>.other-<time>``), not written over.

A trial whose parts cannot be sent (its topic is not a topic name, its type unknown, its bytes damaged: the
caller's ``problem`` says) is moved at ``load`` to the table ``set_aside``, with why: kept, never sent again.

Schema (``PRAGMA application_id`` ``SPOOL_APPLICATION_ID``, ``user_version`` 1)::

    trials(sequence INTEGER PRIMARY KEY, trial_id UNIQUE, added)       -- added: wall-clock seconds
    parts(sequence -> trials.sequence, position, topic, type, data)    -- data: the serialized message
    set_aside(trial_id, reason, moved, position, topic, type, data)    -- a trial that cannot be sent, part by part
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

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
_SET_ASIDE = """
CREATE TABLE IF NOT EXISTS set_aside (
    trial_id NOT NULL,
    reason   TEXT NOT NULL,
    moved    REAL NOT NULL,
    position INTEGER NOT NULL,
    topic, type, data
)"""  # (no types on the fields set aside: they are kept as they were, whatever they were)
REMOVALS_BATCH = 1000  # removals waiting for ``sync`` at most: then they are committed at once
_SQLITE_HEADER = b"SQLite format 3\x00"
_HEADER = struct.Struct(">40xI16xI4xI")  # an SQLite file's schema cookie, user_version and application_id


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
        self._removals: set[str] = set()
        self._lock = SpoolLock(self.path)
        self._conn = None
        self._identity = None  # (device, inode) of the file open, as ``_reopen`` finds it
        self._logs: dict[str, tuple[int, int]] = {}  # the same of its -wal and -shm files
        try:
            _check_kind(self.path)
            self._reopen()
            self._lock.name_holder()
        except BaseException as exc:
            if self._conn is not None:
                self._conn.close()
            self._lock.release(remove_made=True)  # (a file refused keeps no lock file beside it)
            if isinstance(exc, OSError):  # (a disk full, a file removed meanwhile)
                raise SpoolError(f"cannot use '{self.path}' as the robot's spool: {exc}") from None
            raise

    def load(self) -> list[tuple[str, list[SpooledPart]]]:
        """The trials kept, oldest first: (trial_id, its parts in the order they were added), as stored."""
        rows = self._db.execute("SELECT t.trial_id, p.topic, p.type, p.data FROM trials t JOIN parts p "
                                "ON p.sequence = t.sequence ORDER BY t.sequence, p.position").fetchall()
        trials: dict[str, list[SpooledPart]] = {}
        for trial_id, topic, type_name, data in rows:
            trials.setdefault(trial_id, []).append(SpooledPart(topic, type_name, data))
        return list(trials.items())

    def load_sendable(self, problem: Callable[[str, list[SpooledPart]], str]) -> tuple[list, dict[str, str]]:
        """(the trials of ``load`` that can be sent, {trial_id: why} of those moved to ``set_aside`` instead:
        fields not of their types (``record_problem``), or a reason ``problem(trial_id, parts)`` gives)."""
        trials, reasons = self.load(), {}
        for trial_id, parts in trials:
            reasons[trial_id] = record_problem(trial_id, parts) or problem(trial_id, parts)
        reasons = {trial_id: reason for trial_id, reason in reasons.items() if reason}
        if reasons:
            self.set_aside(reasons)
        return [(trial_id, parts) for trial_id, parts in trials if trial_id not in reasons], reasons

    def set_aside(self, reasons: Mapping[str, str]) -> None:
        """Move the trials ``reasons`` names (trial_id -> why it cannot be sent) to the table ``set_aside``."""
        moved = time.time()
        self._transaction("set aside trials in", lambda: [statement for trial_id, reason in reasons.items()
                                                         for statement in _set_aside_statements(trial_id, reason,
                                                                                                moved)])

    def add(self, trial_id: str, parts: Sequence[SpooledPart]) -> None:
        """Keep ``parts`` of ``trial_id`` (a new trial, or more parts of one kept already), committed at once."""
        if trial_id in self._removals:  # sent again after it was answered: keep the new one
            self._commit_removals()
        try:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute("SELECT sequence FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
            if row is None:
                sequence = self._db.execute("INSERT INTO trials (trial_id, added) VALUES (?, ?)",
                                              (trial_id, time.time())).lastrowid
                first = 0
            else:
                sequence = row[0]
                first = self._db.execute("SELECT COUNT(*) FROM parts WHERE sequence = ?", (sequence,)).fetchone()[0]
            self._db.executemany("INSERT INTO parts VALUES (?, ?, ?, ?, ?)",
                                   [(sequence, first + k, p.topic, p.type, p.data) for k, p in enumerate(parts)])
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
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
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            raise SpoolError(f"cannot sync the spool '{self.path}': {exc}") from None

    def restore(self) -> str:
        """If the path no longer names the file this spool has open (removed, moved away, replaced): a copy of that
        file (every trial it holds) written to the path, and the spool goes on there. What happened, for a warning
        ('' when nothing did); SpoolError when it cannot be done now (the open file keeps taking the trials)."""
        if self._conn is None:  # (the copy is at the path, but could not be opened: again)
            self._reopen()
            return ""
        gone = self._gone()
        if not gone:
            return ""
        self._commit_removals()
        self._lock.retake()
        copy = self.path.with_name(f".{self.path.name}.restore-{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _copy_database(self._conn, copy)
            other = _clear_path(self.path, self._logs)
            os.replace(copy, self.path)
            _sync_folder(self.path.parent)
        except (sqlite3.Error, OSError) as exc:
            copy.unlink(missing_ok=True)
            raise SpoolError(f"the spool '{self.path}' {gone}, and no new one can be written there: {exc}") from None
        self._conn.close()  # (its last commits went to the file it had open, copied with them)
        self._conn = None
        self._reopen()
        return (f"the spool '{self.path}' {gone} while the robot ran: wrote a new one there, holding the "
                f"{self.count()} trials waiting" + (f" (the file that took its place is now '{other}')" if other
                                                    else ""))

    def _reopen(self) -> None:
        self._conn = _open(self.path)
        self._identity = _identity(self.path)
        self._logs = _log_files(self.path)

    def count(self) -> int:
        """Trials kept (those removed and not yet committed included)."""
        return self._db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]

    def close(self) -> None:
        """Sync, close the file and release the lock (what is still kept stays for the next run)."""
        if self._lock is None:
            return
        try:
            if self._conn is not None:
                self.sync()
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._lock.release()
            self._lock = None

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SpoolError(f"the spool '{self.path}' is not open (closed, or a new file at its path could not be "
                             "opened yet)")
        return self._conn

    def _gone(self) -> str:
        """'' while the path names the file open; else what became of it."""
        try:
            identity = _identity(self.path)
        except FileNotFoundError:
            return "was removed or moved away"
        except OSError:  # (a folder on the way made unreadable: not a sign that the file went)
            return ""
        return "" if identity == self._identity else "was replaced by another file"

    def _commit_removals(self) -> None:
        if not self._removals:
            return
        removals = sorted(self._removals)
        self._transaction("remove answered trials from", lambda: [("DELETE FROM trials WHERE trial_id = ?", (t,))
                                                                 for t in removals])
        self._removals.difference_update(removals)  # (kept when the commit failed: tried again at the next sync)

    def _transaction(self, what: str, statements: Callable[[], list]) -> None:
        """Run ``statements()`` ((sql, parameters) each) in one transaction; SpoolError saying ``what`` failed."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for sql, parameters in statements():
                self._db.execute(sql, parameters)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise SpoolError(f"cannot {what} the spool '{self.path}': {exc}") from None

    def _rollback(self) -> None:
        if self._conn is not None and self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:  # (SQLite rolled it back itself)
                pass


class SpoolLock:
    """The exclusive lock on ``<spool>.lock``, taken (the file made if missing) without writing to it: SpoolError
    naming the holder when another process has it. ``name_holder`` writes who holds it, once the spool is known to
    be one; ``retake`` locks the file at the path again when it was removed or replaced."""

    def __init__(self, spool_path: Path):
        self.spool_path = spool_path
        self.path = spool_path.with_name(spool_path.name + ".lock")
        self.made = False  # whether this lock made its file (a spool refused removes it)
        self.fd, self.made = self._take()
        self.identity = _identity(self.path)

    def name_holder(self) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"process {os.getpid()} on {os.uname().nodename}".encode(), 0)

    def retake(self) -> None:
        """The lock on the file at the path, if it is not the one held (removed, replaced); SpoolError when another
        process holds that one."""
        try:
            if _identity(self.path) == self.identity:
                return
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SpoolError(f"cannot lock the spool '{self.spool_path}' again: {exc}") from None
        fd, _ = self._take()
        os.close(self.fd)
        self.fd = fd
        self.identity = _identity(self.path)
        self.name_holder()

    def release(self, remove_made: bool = False) -> None:
        if remove_made and self.made:
            self.path.unlink(missing_ok=True)
        os.close(self.fd)

    def _take(self) -> tuple[int, bool]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd, made = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644), True
            except FileExistsError:
                fd, made = os.open(self.path, os.O_RDWR | os.O_CLOEXEC), False
        except OSError as exc:
            raise SpoolError(f"cannot use '{self.spool_path}' as the robot's spool: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 1000).decode(errors="replace").strip()
            os.close(fd)
            raise SpoolError(_in_use(self.spool_path, holder)) from None
        return fd, made


def record_problem(trial_id, parts: Sequence[SpooledPart]) -> str:
    """'' if a spooled trial's fields have their types (a text trial_id and topics and types, bytes); else why not."""
    if not isinstance(trial_id, str):
        return f"its trial_id is {type(trial_id).__name__} {str(trial_id)[:80]!r}, not text"
    for k, part in enumerate(parts):
        if not (isinstance(part.topic, str) and isinstance(part.type, str) and isinstance(part.data, bytes)):
            return (f"its part {k} holds topic {str(part.topic)[:80]!r}, type {str(part.type)[:80]!r} and data of "
                    f"type {type(part.data).__name__}: expected text, text and bytes")
    return ""


def _in_use(path: Path, holder: str) -> str:
    """Why the spool ``path`` is refused when ``holder`` (the text of its lock file) holds the lock."""
    try:
        learner = json.loads(holder)  # (a learner node's lock: the path names a case database)
    except ValueError:
        learner = None
    if isinstance(learner, dict) and "node" in learner:
        return (f"'{path}' is a learner's case database, in use by {learner['node']} (pid {learner.get('pid')}): "
                "give the spool a path of its own")
    return (f"the spool '{path}' is in use by {holder or 'another process'}: one robot process per spool (give "
            "each robot a spool of its own, or stop the other one)")


def _check_kind(path: Path) -> None:
    """SpoolError, before anything is written, when ``path`` names something that is not a spool: a folder, a file
    that is not SQLite, an SQLite file of another kind (an application id of its own, or tables without ours). A
    file that does not tell (empty, or a spool whose first commit is only in its log) passes: ``_prepare`` looks
    at its tables."""
    try:
        with open(path, "rb") as f:  # (the spool's lock is held: no other spool has this file open)
            header = f.read(100)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SpoolError(f"cannot use '{path}' as the robot's spool: {exc.strerror}") from None
    if not header:
        return
    if len(header) < 100 or not header.startswith(_SQLITE_HEADER):
        raise SpoolError(f"cannot use '{path}' as the robot's spool: it is not an SQLite file (a spool is one); "
                         "give the spool a path of its own")
    schema_cookie, _, application_id = _HEADER.unpack_from(header)
    if application_id != SPOOL_APPLICATION_ID and (application_id or schema_cookie):
        raise SpoolError(f"'{path}' is an SQLite file of another kind, not a robot's spool (a case database?): "
                         "give the spool a path of its own")


def _open(path: Path) -> sqlite3.Connection:
    """A connection to the spool ``path`` (made a spool if empty); SpoolError if it cannot be one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (sqlite3.Error, OSError) as exc:
        raise SpoolError(f"cannot use '{path}' as the robot's spool: {exc}") from None
    try:
        _prepare(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise SpoolError(f"cannot use '{path}' as the robot's spool: {exc}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Check that ``conn``'s file is a spool (or empty: make it one), in WAL mode, foreign keys on."""
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    tables = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
    if tables and application_id != SPOOL_APPLICATION_ID:
        raise SpoolError(f"'{path}' is an SQLite file of another kind, not a robot's spool (a case database?): "
                         "give the spool a path of its own")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if tables and version != SPOOL_VERSION:
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
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'set_aside'").fetchone():  # (a spool made before)
        conn.execute(_SET_ASIDE)


def _set_aside_statements(trial_id: str, reason: str, moved: float) -> list:
    return [("INSERT INTO set_aside SELECT t.trial_id, ?, ?, p.position, p.topic, p.type, p.data FROM trials t "
             "JOIN parts p ON p.sequence = t.sequence WHERE t.trial_id = ?", (reason, moved, trial_id)),
            ("DELETE FROM trials WHERE trial_id = ?", (trial_id,))]


def _identity(path: Path) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_dev, status.st_ino


def _copy_database(conn: sqlite3.Connection, copy: Path) -> None:
    """What ``conn`` holds, written to the new file ``copy`` and synced."""
    copy.unlink(missing_ok=True)
    target = sqlite3.connect(copy)
    try:
        conn.backup(target)
    finally:
        target.close()
    fd = os.open(copy, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _log_files(path: Path) -> dict[str, tuple[int, int]]:
    """The identities of the files SQLite keeps beside the database ``path`` (its -wal and -shm) that exist."""
    found = {}
    for suffix in ("-wal", "-shm"):
        try:
            found[suffix] = _identity(Path(f"{path}{suffix}"))
        except FileNotFoundError:
            pass
    return found


def _clear_path(path: Path, own_logs: Mapping[str, tuple[int, int]]) -> Path | None:
    """Room at ``path`` for a spool's new file: a file that took its place moved aside with its -wal and -shm (to
    ``<spool>.other-<time>...``: SQLite finds them by its name), the spool's own old -wal and -shm removed (SQLite
    would apply them to the new file). The new name of what was moved aside, if anything was."""
    other = path.with_name(f"{path.name}.other-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    moved = None
    for suffix in ("", "-wal", "-shm"):
        name = Path(f"{path}{suffix}")
        try:
            identity = _identity(name)
        except FileNotFoundError:
            continue
        if suffix and identity == own_logs.get(suffix):
            name.unlink()
        else:
            os.rename(name, f"{other}{suffix}")
            moved = moved or Path(f"{other}{suffix}")
    return moved


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
