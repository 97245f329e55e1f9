"""The case database: every completed trial, committed to SQLite as soon as it arrives.

One file, WAL journal, one connection shared by the threads of a process behind a
lock. Other processes (e.g. a bag import) may open the same file: SQLite's locking
and the busy timeout serialise their writes. Pure Python, no ROS.

Schema (PRAGMA user_version = 1)::

    cases(id, trial_id UNIQUE, stamp, action, received)
    readings(case_id -> cases.id, source 'object'|'effect', sensor, value)
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from .trial import SOURCES, Trial

SCHEMA_VERSION = 1

_SCHEMA = ("""
CREATE TABLE cases (
    id       INTEGER PRIMARY KEY,
    trial_id TEXT NOT NULL UNIQUE,
    stamp    REAL,            -- the action's header stamp, seconds
    action   TEXT NOT NULL,   -- the action label
    received REAL             -- when the trial was completed, seconds
)""", """
CREATE TABLE readings (
    case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    source  TEXT NOT NULL CHECK (source IN ('object', 'effect')),
    sensor  TEXT NOT NULL,
    value   REAL NOT NULL,
    PRIMARY KEY (case_id, sensor)
)""")


class CaseStoreError(RuntimeError):
    """The database file cannot be used (not ours, newer schema, unreadable)."""


class CaseStore:
    """Trials in an SQLite file; ``add`` commits before it returns."""

    def __init__(self, path: str | os.PathLike, busy_timeout: float = 10.0):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, check_same_thread=False,
                                         isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise CaseStoreError(f"cannot open the case database '{self.path}': {exc}") from None
        self._lock = threading.Lock()
        try:
            self._prepare()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise CaseStoreError(f"'{self.path}' is not a usable case database: {exc}") from None
        except CaseStoreError:
            self._conn.close()
            raise

    def _prepare(self) -> None:
        conn = self._conn
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a committed case survives a power cut too, not only a crash of the process.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
                if tables:
                    raise CaseStoreError(
                        f"'{self.path}' is an SQLite database of something else (tables "
                        f"{sorted(t[0] for t in tables)}); choose another database_path")
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version > SCHEMA_VERSION:
                raise CaseStoreError(
                    f"'{self.path}' has schema version {version}, written by a newer affordance_ros "
                    f"(this one reads up to {SCHEMA_VERSION}); update affordance_ros")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ write
    def add(self, trial: Trial) -> bool:
        """Store one trial and commit. False (and nothing changed) if its trial_id is already stored."""
        rows = [(source, sensor, float(value))
                for source in SOURCES for sensor, value in trial.readings(source).items()]
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                cursor = conn.execute(
                    "INSERT INTO cases (trial_id, stamp, action, received) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (trial_id) DO NOTHING",
                    (trial.trial_id, trial.stamp, trial.action, trial.received))
                if cursor.rowcount == 0:
                    conn.execute("ROLLBACK")
                    return False
                case_id = cursor.lastrowid
                conn.executemany("INSERT INTO readings (case_id, source, sensor, value) VALUES (?, ?, ?, ?)",
                                 [(case_id, *row) for row in rows])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return True

    # ------------------------------------------------------------------- read
    def count(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0]

    def contains(self, trial_id: str) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM cases WHERE trial_id = ?", (trial_id,)).fetchone() is not None

    def records(self) -> list[Trial]:
        """Every stored trial, oldest first."""
        with self._lock:
            # One read transaction: a case added meanwhile is seen whole or not at all.
            self._conn.execute("BEGIN")
            try:
                cases = self._conn.execute(
                    "SELECT id, trial_id, stamp, action, received FROM cases ORDER BY id").fetchall()
                readings = self._conn.execute(
                    "SELECT case_id, source, sensor, value FROM readings ORDER BY case_id, rowid").fetchall()
            finally:
                self._conn.execute("COMMIT")
        by_case = {case_id: ({}, {}) for case_id, *_ in cases}
        for case_id, source, sensor, value in readings:
            by_case[case_id][0 if source == "object" else 1][sensor] = value
        return [Trial(trial_id=trial_id, action=action, object_features=by_case[case_id][0],
                      effects=by_case[case_id][1], stamp=stamp, received=received)
                for case_id, trial_id, stamp, action, received in cases]

    # -------------------------------------------------------------- lifetime
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "CaseStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
