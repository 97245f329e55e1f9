"""Storing trials in a thread of its own: a bounded queue, commits in groups, results only once committed.

The learner's executor hands every completed trial to ``CaseWriter.submit`` and goes on (taking
parts, answering predictions); the writer's thread commits what is queued in one transaction
(``CaseStore.insert_many``: one commit, one sync to disk, however many trials arrived meanwhile)
and hands the results back (``take``), calling ``notify`` so that the executor picks them up.
A trial is answered ``stored`` from these results only, so a confirmation always follows its commit.

What can go wrong, and what the writer does:

- another program holds the database's lock: the group waits and is tried again every
  ``retry_period`` (the queue fills, ``full`` says so, and the node stops taking parts: the robot's
  DDS writer waits); ``state`` says for how long;
- storing fails otherwise (disk full, I/O error): the same, the error in ``state``;
- the database file is removed (or replaced) while open: what was committed since is *held*, not
  handed back, since it is not in the file the node would read at its next start; ``CaseStore.recover``
  writes the open database to a new file at the path as soon as its folder exists and the path is free,
  and then the held results are handed back. Until then nothing more is committed, and ``confirming``
  is false (the node also stops confirming trials stored earlier).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from .storage import CaseStore, CaseStoreError
from .trial import TrialRecord

CAPACITY = 1000        # trials queued for storing at most (then the node stops taking parts until there is room)
RETRY_PERIOD = 0.05    # seconds between tries while the database is locked or failing
CHECK_PERIOD = 1.0     # seconds between looks at the database file while nothing is stored
LOCK_WAIT = 0.1        # seconds one try waits for another program's lock
CLOSE_POLL = 0.1       # seconds between looks at ``give_up`` while closing


@dataclass(frozen=True)
class Committed:
    """The result for one record: its ``case_id``, or None when its trial_id was stored already (``stored``:
    the stored record), or ``failed`` (why it could not be stored; it was not)."""

    record: TrialRecord
    case_id: int | None = None
    stored: TrialRecord | None = None
    failed: str = ""


@dataclass(frozen=True)
class WriterState:
    """What the writer is doing: trials ``queued`` and ``held`` (committed to a removed file), cases
    ``committed`` in ``groups`` transactions (``cases``: in the database, those it held when the writer
    started and those committed since), and the current ``problem`` ('' for none) for ``seconds``;
    ``confirming`` is false while the database file is not the one the node opened."""

    cases: int
    queued: int
    held: int
    committed: int
    groups: int
    problem: str
    seconds: float
    confirming: bool


class CaseWriter:
    """Commits ``store``'s records in a thread of its own; ``notify()`` (called in that thread) says that
    results are ready to ``take``. ``capacity``: how many records may wait (``full``)."""

    def __init__(self, store: CaseStore, notify: Callable[[], None], capacity: int = CAPACITY,
                 retry_period: float = RETRY_PERIOD, check_period: float = CHECK_PERIOD):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.store = store
        self.notify = notify
        self.capacity = capacity
        self.retry_period = retry_period
        self.check_period = check_period
        self.committed = 0
        self.groups = 0
        self.cases_at_start = store.count()
        self._queue: deque[TrialRecord] = deque()
        self._in_flight = 0               # records being committed (out of the queue)
        self._results: list[Committed] = []
        self._held: list[Committed] = []
        self._file_problem = ""           # the database file is not the one opened (confirmations stop)
        self._problem = ""                # storing fails (locked, disk full, ...): retried
        self._problem_since = 0.0       # when the current problems began
        self._closing = False
        self._abandoned = False
        self._cond = threading.Condition()
        store.set_busy_timeout(LOCK_WAIT)
        self._thread = threading.Thread(target=self._run, name="affordance_store", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ the caller's side
    def submit(self, record: TrialRecord) -> None:
        """Queue a record for storing (the caller keeps to ``capacity`` by watching ``full``)."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the case writer is closed")
            self._queue.append(record)
            self._cond.notify()

    @property
    def full(self) -> bool:
        """True while ``capacity`` records wait to be stored: queued, or in the group being committed (which
        comes back to the queue when its commit fails)."""
        with self._cond:
            return len(self._queue) + self._in_flight >= self.capacity

    @property
    def confirming(self) -> bool:
        """False while the database file is not the one opened: then nothing stored may be confirmed."""
        return not self._file_problem

    def take(self) -> list[Committed]:
        """The results since the last call, in the order the records were submitted."""
        with self._cond:
            results, self._results = self._results, []
        return results

    def state(self) -> WriterState:
        with self._cond:
            problem = self._file_problem or self._problem
            return WriterState(self.cases_at_start + self.committed, len(self._queue) + self._in_flight,
                               len(self._held),
                               self.committed, self.groups, problem,
                               time.monotonic() - self._problem_since if problem else 0.0, not self._file_problem)

    def close(self, timeout: float = 30.0, give_up: Callable[[], bool] | None = None) -> int:
        """Store what is queued (waiting up to ``timeout`` seconds, or until ``give_up()`` says so while storing
        is held up: the database locked, failing or removed; storing that works is never cut short), then stop;
        how many records were left unstored (or held: committed to a removed file)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        deadline = time.monotonic() + timeout
        while True:
            self._thread.join(max(0.0, min(CLOSE_POLL, deadline - time.monotonic())))
            if not self._thread.is_alive() or time.monotonic() >= deadline:
                break
            if give_up is not None and give_up():
                with self._cond:
                    if self._problem or self._file_problem:
                        break
        with self._cond:
            self._abandoned = self._thread.is_alive()
            self._cond.notify()
            return len(self._queue) + self._in_flight + len(self._held)

    # ------------------------------------------------------------ the writer's thread
    def _run(self) -> None:
        while True:
            self._check_file()
            with self._cond:
                if self._abandoned or (self._closing and not self._queue and not self._held):
                    return
                if self._file_problem or not self._queue:
                    # nothing to commit now: wait for records, a close, or the next look at the file
                    self._cond.wait(self.check_period)
                    continue
                group = list(self._queue)
                self._queue.clear()
                self._in_flight = len(group)
            self._commit(group)

    def _commit(self, group: list[TrialRecord]) -> None:
        try:
            case_ids = self.store.insert_many(group)
            results = [Committed(record, case_id, None if case_id else self.store.record_of(record.trial_id))
                       for record, case_id in zip(group, case_ids)]
        except (sqlite3.OperationalError, CaseStoreError) as exc:  # locked, disk full, I/O error: try again
            with self._cond:
                self._queue.extendleft(reversed(group))
                self._in_flight = 0
                self._report(problem="the case database is locked by another program" if "locked" in str(exc)
                             else f"storing fails: {exc}")
                self._cond.wait(self.retry_period)
            return
        except Exception as exc:  # noqa: BLE001 (a record that cannot be stored: not answered, so sent again)
            results = [Committed(record, failed=repr(exc)) for record in group]
        with self._cond:
            self._report(problem="")
            self._in_flight = 0
            self.groups += 1
            self.committed += sum(1 for r in results if r.case_id)
            self._held += results
        self._check_file()

    def _check_file(self) -> None:
        """Hand back what is held while the path names the opened file; else try to recover it."""
        try:
            problem = self.store.file_problem()
            if problem:
                problem = self.store.recover()
        except (OSError, sqlite3.Error, CaseStoreError) as exc:
            problem = f"the case database {self.store.path} cannot be written where it was: {exc}"
        with self._cond:
            self._report(file_problem=problem)
            released = [] if problem else self._held
            self._held = self._held if problem else []
            self._results += released
        if released:
            self.notify()

    def _report(self, problem: str | None = None, file_problem: str | None = None) -> None:
        """Set the current problems (None: unchanged), timing from when the first of them began."""
        before = self._problem or self._file_problem
        self._problem = self._problem if problem is None else problem
        self._file_problem = self._file_problem if file_problem is None else file_problem
        if not before and (self._problem or self._file_problem):
            self._problem_since = time.monotonic()


__all__ = ["CAPACITY", "CaseWriter", "Committed", "WriterState"]
