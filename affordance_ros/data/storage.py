"""The case database: every completed trial, committed to SQLite as soon as it arrives.

One file, WAL journal, one connection shared by the threads of a process behind a
lock. Other processes (the command line, a bag import) may open the same file:
SQLite's locking and the busy timeout serialise their writes.

An existing file is checked on a read-only connection before it is opened for writing: an SQLite
file of another program is refused untouched (not even switched to WAL), and one with damaged
pages (``PRAGMA quick_check``) is refused with what to do, rather than failing at every read later.

The learner's ``DatabaseLock`` (``database_lock``) is part of the file: removed with it by ``rm cases.db*``
or with its folder, ``CaseStore.file_problem`` says when the path no longer names the file locked, and
``recover`` locks the file at the path again before it writes the database back, so that a second learner
started on the path is refused as long as the store runs.

A case is a ``TrialRecord`` (``data.trial``), checked where its data entered: the store keeps
what it is given and gives back what it kept.

Schema (PRAGMA user_version = 1)::

    cases(id, trial_id UNIQUE, stamp, action_variable, action, received)
    readings(case_id -> cases.id, source 'object'|'effect', sensor, value)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..core import SENSOR_GROUPS
from .database_lock import DatabaseInUse, DatabaseLock
from .trial import TrialRecord

SCHEMA_VERSION = 1

_SCHEMA = ("""
CREATE TABLE cases (
    id              INTEGER PRIMARY KEY,
    trial_id        TEXT NOT NULL UNIQUE,
    stamp           REAL,           -- the action's header stamp, seconds
    action_variable TEXT NOT NULL,  -- the variable the action label is a value of
    action          TEXT NOT NULL,  -- the action label
    received        REAL            -- when the trial was completed, seconds
)""", """
CREATE TABLE readings (
    case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    source  TEXT NOT NULL CHECK (source IN ('object', 'effect')),
    sensor  TEXT NOT NULL,
    value   REAL NOT NULL,
    PRIMARY KEY (case_id, sensor)
)""")


@dataclass(frozen=True)
class CaseColumns:
    """A chunk of stored cases column-wise: case ids, trial ids, the action variable and label of each,
    and {sensor: readings} (NaN where a case has no reading of that sensor)."""

    ids: np.ndarray
    trial_ids: list
    action_variables: np.ndarray
    actions: np.ndarray
    readings: dict


class CaseStoreError(RuntimeError):
    """The database file cannot be used (not ours, newer schema, unreadable)."""


class CaseStore:
    """Records of trials in an SQLite file; ``insert`` and ``insert_many`` commit before they return.

    ``read_only``: open an existing database for reading only (it is never created or changed).
    ``busy_timeout``: seconds a statement waits for another program's lock before it fails ("database is locked").

    A writable store reads on a connection of its own (a read never waits for a commit, nor for another
    program's lock: WAL readers do not wait for writers) and keeps its file open (``OpenedFile``):
    ``file_problem`` says when the path no longer names it (removed, replaced), and ``recover`` writes what
    the open database holds to a new file at the path and goes on in it; the same for the lock file of
    ``database_lock`` (the learner's; see the module's docstring).
    """

    def __init__(self, path: str | os.PathLike, read_only: bool = False, busy_timeout: float = 10.0,
                 database_lock: DatabaseLock | None = None):
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.Lock()
        self._read_lock = threading.Lock() if not read_only else self._lock
        self._db = OpenDatabase(self.path, read_only, busy_timeout, database_lock)

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a statement waits for another program's lock from now on."""
        with self._lock:
            self._db.set_busy_timeout(seconds)

    # ------------------------------------------------------------------ write
    def add(self, record: TrialRecord) -> bool:
        """Store one record and commit. False (and nothing changed) if its trial_id is already stored."""
        return self.insert(record) is not None

    def insert(self, record: TrialRecord) -> int | None:
        """Store one record and commit; its case id (growing), or None (nothing changed) if its trial_id is stored."""
        return self.insert_many([record])[0]

    def insert_many(self, records: Sequence[TrialRecord]) -> list[int | None]:
        """Store the records in one transaction (one commit, one sync to disk); the case id of each, or None
        for a record whose trial_id is stored already (or earlier in ``records``: the first one is kept)."""
        for record in records:
            if not isinstance(record, TrialRecord):
                raise TypeError(f"the case store takes a TrialRecord (data.trial), not {type(record).__name__}")
        case_ids, readings = [], []
        with self._lock:
            conn = self._db.writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                for record in records:
                    cursor = conn.execute(
                        "INSERT INTO cases (trial_id, stamp, action_variable, action, received) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (trial_id) DO NOTHING",
                        (record.trial_id, record.stamp, record.action_variable, record.action, record.received))
                    case_id = cursor.lastrowid if cursor.rowcount else None
                    case_ids.append(case_id)
                    if case_id is not None:
                        readings += [(case_id, kind, sensor, value) for kind in SENSOR_GROUPS
                                     for sensor, value in record.part(kind).items()]
                conn.executemany("INSERT INTO readings (case_id, source, sensor, value) VALUES (?, ?, ?, ?)", readings)
                conn.execute("COMMIT")
            except BaseException:
                # (a KeyboardInterrupt may land after COMMIT: then nothing is to be rolled back, the cases are stored)
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return case_ids

    # ------------------------------------------------------------ the file
    def file_problem(self) -> str:
        """'' while the path names the database file this store opened; else what happened to it."""
        with self._lock:
            return self._db.file_problem()

    def recover(self) -> str:
        """When the file was removed while open: write what the open database holds to a new file at the
        path (a backup through the open connection) and go on in that file; when the lock file was removed or
        replaced, lock the file at its path again first. '' once the path names this store's database (and its
        lock file) again, else why that cannot be done now (nothing more is then changed)."""
        with self._lock, self._read_lock:
            return self._db.recover()

    # ------------------------------------------------------------------- read
    def count(self) -> int:
        with self._read_lock:
            return self._db.reader.execute("SELECT COUNT(*) FROM cases").fetchone()[0]

    def contains(self, trial_id: str) -> bool:
        with self._read_lock:
            return self._db.reader.execute("SELECT 1 FROM cases WHERE trial_id = ?", (trial_id,)).fetchone() is not None

    def record_of(self, trial_id: str) -> TrialRecord | None:
        """The stored record of a trial, None if it is not stored."""
        if not self.contains(trial_id):  # (most trials asked about are new: one statement, no transaction)
            return None
        with self._read_lock:
            reader = self._db.reader
            reader.execute("BEGIN")
            try:
                case = reader.execute("SELECT id, trial_id, stamp, action_variable, action, received FROM cases "
                                      "WHERE trial_id = ?", (trial_id,)).fetchone()
                readings = [] if case is None else reader.execute(
                    "SELECT case_id, source, sensor, value FROM readings WHERE case_id = ? ORDER BY rowid",
                    (case[0],)).fetchall()
            finally:
                reader.execute("COMMIT")
        return None if case is None else _records([case], readings)[0][1]

    def trial_id_of(self, case_id: int) -> str | None:
        """The trial_id of the case with this id, None if there is none."""
        with self._read_lock:
            row = self._db.reader.execute("SELECT trial_id FROM cases WHERE id = ?", (case_id,)).fetchone()
        return row[0] if row else None

    def records(self) -> list[TrialRecord]:
        """Every stored record, oldest first."""
        return [record for _, record in self.numbered_records()]

    def numbered_records(self, after: int = 0) -> list[tuple[int, TrialRecord]]:
        """(case id, record) of the stored cases with an id above ``after``, oldest first."""
        with self._read_lock:
            # One read transaction: a case added meanwhile is seen whole or not at all.
            self._db.reader.execute("BEGIN")
            try:
                cases = self._db.reader.execute(
                    "SELECT id, trial_id, stamp, action_variable, action, received FROM cases WHERE id > ? "
                    "ORDER BY id", (after,)).fetchall()
                readings = self._db.reader.execute(
                    "SELECT case_id, source, sensor, value FROM readings WHERE case_id > ? ORDER BY case_id, rowid",
                    (after,)).fetchall()
            finally:
                self._db.reader.execute("COMMIT")
        return _records(cases, readings)

    def column_chunks(self, after: int = 0, chunk_size: int = 100_000) -> Iterator[CaseColumns]:
        """The stored cases with an id above ``after``, oldest first, as columns in chunks of at most
        ``chunk_size`` cases: memory bounded by the chunk, not by the database (``numbered_records``
        builds a dict per case). Each chunk is read in one read transaction."""
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError("chunk_size must be an integer >= 1")
        last = after
        while True:
            with self._read_lock:
                self._db.reader.execute("BEGIN")
                try:
                    cases = self._db.reader.execute(
                        "SELECT id, trial_id, action_variable, action FROM cases WHERE id > ? ORDER BY id LIMIT ?",
                        (last, chunk_size)).fetchall()
                    if not cases:
                        return
                    readings = self._db.reader.execute(
                        "SELECT case_id, sensor, value FROM readings WHERE case_id > ? AND case_id <= ?",
                        (last, cases[-1][0])).fetchall()
                finally:
                    self._db.reader.execute("COMMIT")
            yield _columns(cases, readings)
            last = cases[-1][0]

    # -------------------------------------------------------------- lifetime
    def close(self) -> None:
        with self._lock, self._read_lock if not self.read_only else contextlib.nullcontext():
            self._db.close()

    def __enter__(self) -> "CaseStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class OpenDatabase:
    """The connections of an open case database at ``path``: ``writer`` (also the reader of a read-only one),
    ``reader`` (a writable database is read on a connection of its own: a read never waits for a commit, nor for
    another program's lock) and, writable, its ``file`` held open (``OpenedFile``) and locked by
    ``database_lock``. Used under the locks of its ``CaseStore``."""

    def __init__(self, path: Path, read_only: bool, busy_timeout: float, database_lock: DatabaseLock | None):
        self.path = path
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        self.database_lock = database_lock
        self.writer: sqlite3.Connection | None = None
        self.reader: sqlite3.Connection | None = None
        self.file: OpenedFile | None = None
        self.open()

    def open(self, create: bool = True) -> None:
        """Connect (``create``: a new database if there is none; CaseStoreError saying what is wrong)."""
        if self.database_lock is not None and os.path.exists(self.path):  # before SQLite opens it by this path
            _hold(self.database_lock, os.stat(self.path))
        self.writer = _connect(self.path, self.read_only, self.busy_timeout, create)
        self.reader = self.writer
        if not self.read_only:
            self.file, self.reader = _open_writable(self.writer, self.path, self.busy_timeout, self.database_lock)

    def set_busy_timeout(self, seconds: float) -> None:
        self.busy_timeout = seconds
        self.writer.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def file_problem(self) -> str:
        """'' while the path names the database file opened (and its lock file); else what happened to it."""
        if self.file is None:
            return ""
        return self.file.problem() or (self.database_lock.problem() if self.database_lock is not None else "")

    def recover(self) -> str:
        """``CaseStore.recover``."""
        problem = "" if self.read_only else self.file.problem()
        lock_problem = self.database_lock.problem() if self.database_lock is not None else ""
        if not problem and not lock_problem:
            return ""
        if not self.path.parent.is_dir():
            return f"{problem or lock_problem}; waiting for the folder to exist again"
        if lock_problem:
            in_use = self.database_lock.retake()
            if in_use:
                return f"{problem or lock_problem}; {in_use}"
        return self._write_back(problem) if problem else ""

    def _write_back(self, problem: str) -> str:
        """What the open database holds written to a new file at the path of the removed one, and connections to
        that file; '' once done, else why not."""
        if os.path.lexists(self.path):
            return f"{problem}; move that file away and the node writes its database there again"
        _recover(self.writer, self.path)
        self.close()
        for leftover in (f"{self.path}-wal", f"{self.path}-shm"):  # the removed database's, if it left them
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        try:
            self.open(create=False)  # (never an empty database, if the file went again meanwhile)
        except CaseStoreError as exc:
            self.file = OpenedFile(self.path, gone=f"{exc}: restart the node")
            raise
        return ""

    def close(self) -> None:
        self.writer.close()
        if not self.read_only:
            self.reader.close()
            self.file.close()


def _open_writable(conn: sqlite3.Connection, path: Path, busy_timeout: float,
                   database_lock: DatabaseLock | None) -> tuple[OpenedFile, sqlite3.Connection]:
    """For a writable store whose writing connection is ``conn``: its file, opened (and held by ``database_lock``:
    a file made now, or by another program meanwhile), and its read-only connection; ``conn`` closed and
    CaseStoreError when they cannot be had."""
    opened = None
    try:
        opened = OpenedFile(path)
        if database_lock is not None:
            _hold(database_lock, os.fstat(opened.fd))
        reader = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False, isolation_level=None)
        reader.execute("PRAGMA query_only = ON")
    except (OSError, sqlite3.Error, CaseStoreError) as exc:
        conn.close()
        if opened is not None:
            opened.close()
        if isinstance(exc, CaseStoreError):
            raise
        raise CaseStoreError(f"cannot open the case database '{path}': {exc}") from None
    return opened, reader


def _hold(database_lock: DatabaseLock, status: os.stat_result) -> None:
    """``database_lock`` holds the database file of ``status`` (CaseStoreError when another learner holds it: a
    hard link of it at another path)."""
    try:
        database_lock.hold_file(status)
    except DatabaseInUse as exc:
        raise CaseStoreError(str(exc)) from None


class OpenedFile:
    """A database file as it was opened: its identity (device, inode) and a descriptor of it held open, so
    that ``problem`` can tell whether its path still names it (a removed file lives on while it is open)."""

    def __init__(self, path: Path, gone: str = ""):
        self.path = path
        self.gone = gone  # why the store lost it for good (then nothing is opened)
        self.fd = None if gone else os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        status = None if gone else os.fstat(self.fd)
        self.identity = None if gone else (status.st_dev, status.st_ino)

    def problem(self) -> str:
        """'' while the path names this file; else what happened (removed, its folder removed, replaced)."""
        if self.gone:
            return self.gone
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            if not self.path.parent.is_dir():
                return f"the folder {self.path.parent} of the case database was removed"
            return f"the case database {self.path} was removed"
        if (status.st_dev, status.st_ino) != self.identity or os.fstat(self.fd).st_nlink == 0:
            return f"{self.path} now names another file than the case database that was opened"
        return ""

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def _recover(conn: sqlite3.Connection, path: Path) -> None:
    """Copy the database open on ``conn`` to a new file at ``path`` (which must not exist): written beside it,
    synced, then linked to ``path`` (atomic; fails rather than replace a file that appeared meanwhile)."""
    temporary = path.with_name(f".{path.name}.recovering-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    copy = sqlite3.connect(temporary, isolation_level=None)
    try:
        copy.execute("PRAGMA synchronous = FULL")
        conn.backup(copy)
    finally:
        copy.close()
    try:
        os.link(temporary, path)
    finally:
        os.unlink(temporary)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _connect(path: Path, read_only: bool, busy_timeout: float, create: bool = True) -> sqlite3.Connection:
    """A connection to the case database at ``path`` (created if missing when ``create`` and not ``read_only``),
    checked and prepared (WAL, synchronous FULL, the schema); CaseStoreError saying what is wrong."""
    try:
        if read_only or not create:
            if not path.is_file():
                raise CaseStoreError(f"case database '{path}' does not exist")
        if read_only:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout,
                                   check_same_thread=False, isolation_level=None)
        else:
            if path.is_file() and path.stat().st_size > 0:
                _inspect(path, busy_timeout)  # before any write: refuse what is not ours or is damaged
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise CaseStoreError(f"cannot open the case database '{path}': {exc}") from None
    try:
        _prepare(conn, path, read_only)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise CaseStoreError(f"'{path}' is not a usable case database: {exc}") from None
    except CaseStoreError:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, path: Path, read_only: bool) -> None:
    conn.execute("PRAGMA foreign_keys = ON")
    if not read_only:
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a committed case survives a power cut too, not only a crash of the process.
        conn.execute("PRAGMA synchronous = FULL")
    conn.execute("BEGIN" if read_only else "BEGIN IMMEDIATE")
    try:
        if _check_schema(conn, path, read_only) == 0:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _inspect(path: Path, busy_timeout: float) -> None:
    """Check an existing file on a read-only connection: ours (or empty), not newer, not damaged."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise CaseStoreError(f"cannot open the case database '{path}': {exc}") from None
    try:
        try:
            _check_schema(conn, path, read_only=False)
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_CORRUPT:  # (not an SQLite file at all)
                raise CaseStoreError(f"'{path}' is not a usable case database: {exc}") from None
            problems = [str(exc)]  # damaged so that not even its schema can be read (a truncated copy)
    finally:
        conn.close()
    if problems != ["ok"]:
        raise CaseStoreError(
            f"the case database '{path}' is damaged (PRAGMA quick_check: {'; '.join(problems)[:300]}). "
            f"Stop every program using it and keep a copy; recover what can be read with "
            f"`sqlite3 '{path}' .recover | sqlite3 recovered.db` and start with database_path "
            f"recovered.db (or move the damaged file away to start an empty database)")



def _check_schema(conn: sqlite3.Connection, path: Path, read_only: bool) -> int:
    """The schema version of the database on ``conn``; CaseStoreError if it is not a case database
    (tables of something else, empty when read only) or newer than this code."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if tables:
            raise CaseStoreError(
                f"'{path}' is an SQLite database of something else (tables "
                f"{sorted(t[0] for t in tables)}); choose another database_path (the file was not changed)")
        if read_only:
            raise CaseStoreError(f"'{path}' is empty: it holds no case database")
    elif version > SCHEMA_VERSION:
        raise CaseStoreError(
            f"'{path}' has schema version {version}, written by a newer affordance_ros "
            f"(this one reads up to {SCHEMA_VERSION}); update affordance_ros")
    return version


def _records(cases: list[tuple], readings: list[tuple]) -> list[tuple[int, TrialRecord]]:
    """(case id, record) from rows of ``cases`` (id, trial_id, stamp, action_variable, action, received) and
    of ``readings`` (case_id, source, sensor, value), in the order of the rows."""
    parts = {case_id: {kind: {} for kind in SENSOR_GROUPS} for case_id, *_ in cases}
    for case_id, source, sensor, value in readings:
        parts[case_id][source][sensor] = value
    return [(case_id, TrialRecord(trial_id, action, parts[case_id]["object"], parts[case_id]["effect"], stamp,
                                  received, action_variable=action_variable))
            for case_id, trial_id, stamp, action_variable, action, received in cases]


def _columns(cases: list[tuple], readings: list[tuple]) -> CaseColumns:
    """A chunk as columns, from rows of ``cases`` (id, trial_id, action_variable, action) and of ``readings``
    (case_id, sensor, value)."""
    ids, trial_ids, action_variables, actions = zip(*cases)
    ids = np.fromiter(ids, dtype=np.int64, count=len(cases))
    columns = {}
    if readings:
        case_ids, sensors, values = zip(*readings)
        rows = np.searchsorted(ids, np.fromiter(case_ids, dtype=np.int64, count=len(readings)))
        sensors = np.array(sensors, dtype=object)
        values = np.fromiter(values, dtype=float, count=len(readings))
        for sensor in set(sensors.tolist()):
            column = np.full(len(cases), np.nan)
            mask = sensors == sensor
            column[rows[mask]] = values[mask]
            columns[sensor] = column
    return CaseColumns(ids, list(trial_ids), np.array(action_variables, dtype=object), np.array(actions, dtype=object),
                       columns)
