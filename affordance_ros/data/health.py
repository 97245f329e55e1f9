"""The learner's counters, its status line and its health (OK / WARN / ERROR), below ROS.

``Counters`` is what the node counts (thread-safe: learning runs in a worker thread).
``status_line`` is the line the node logs every ``status_period`` and when it stops.
``HealthMonitor.assess`` turns the counters, the model and the case writer's state into one status
for /diagnostics, saying what is true: ERROR while the database file is not the one the node opened
(removed: trials are stored and held, not confirmed, until it is written back), while storing fails
(other than a lock for a moment) or failed lately; WARN while another program holds the database's
lock, when its file or folder became read-only on disk (storing goes on in the open file, but the
next start cannot open it for writing), when rejected parts, dropped trials or parts stamped ahead
of the node's clock are rising, or when there is no model yet; else OK; with the key values a
dashboard shows.
"""

from __future__ import annotations

import calendar
import os
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .case_writer import WriterState
from .database_lock import SHARED

OK, WARN, ERROR = "OK", "WARN", "ERROR"
RISING_WINDOW = 10.0  # seconds: counters rising within this long make a WARN (ERROR for store errors)


class Counters:
    """Named counts, safe to add to from any thread."""

    def __init__(self):
        self._counts = Counter()
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        """Count ``n`` more of ``name``."""
        with self._lock:
            self._counts[name] += n

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._counts[name]

    def snapshot(self) -> Counter:
        """A copy of the counts now."""
        with self._lock:
            return Counter(self._counts)


def status_line(counts: Mapping[str, int], pending: int, online_learning: bool) -> str:
    """The learner's counters in one log line."""
    c = Counter(counts)
    return (f"cases: {c['stored']} stored this run; trials pending: {pending}; "
            f"parts received: {c['received_action']} action, {c['received_object']} object, "
            f"{c['received_effect']} effect; rejected parts: {c['rejected_parts']} (out of range "
            f"{c['out_of_range_parts']}, oversized {c['oversized_parts']}); parts stamped ahead of the clock "
            f"(answered retry): {c['clock_ahead_parts']}; re-sent parts of stored trials: {c['resent_parts']} "
            f"(and {c['resent_trials']} whole trials; {c['unconfirmed_parts']} not answered while the database "
            f"file was not the one opened); duplicate parts: {c['duplicate_parts']}; duplicate trials: "
            f"{c['duplicate_trials']}; incomplete trials dropped: {c['dropped_incomplete']}; store errors: "
            f"{c['store_errors']}; learn ok/failed/refused: {c['learn_ok']}/{c['learn_failed']}/"
            f"{c['learn_refused']}; predict ok/failed: {c['predict_ok']}/{c['predict_failed']}; "
            f"select_action ok/failed: {c['select_ok']}/{c['select_failed']}; "
            f"suggest_trial ok/failed: {c['suggest_ok']}/{c['suggest_failed']}"
            + (f"; online updates/skipped: {c['online_updates']}/{c['online_skipped']}" if online_learning else ""))


@dataclass(frozen=True)
class Health:
    """One assessment: ``level`` OK, WARN or ERROR, a one-line ``message`` and the key ``values``."""

    level: str
    message: str
    values: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LastLearn:
    """What the last learn of this run did (for the key values)."""

    duration: float
    log_likelihood: float


def model_age(metadata: dict, now: float) -> float | None:
    """Seconds since the model was learned (its metadata ``learned.time``), None if it does not say."""
    stamp = (metadata.get("learned") or {}).get("time")
    try:
        return max(0.0, now - calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def read_only_on_disk(path: Path) -> str:
    """'' if the database file and its folder may be written by this process, else what is true about them."""
    for what, where in (("file", path), ("folder", path.parent)):
        if where.exists() and not os.access(where, os.W_OK):
            return (f"the case database's {what} {where} became read-only on disk: storing goes on in the open "
                    "file, but the node cannot open it for writing at its next start")
    return ""


class HealthMonitor:
    """Assesses the learner once per call (the node calls it every second); remembers the counters of
    the last ``window`` seconds to tell whether rejections, drops or store errors are rising."""

    def __init__(self, window: float = RISING_WINDOW):
        self.window = window
        self._history = deque()  # (time, counters)

    def _rise(self, counts: Counter, name: str) -> int:
        oldest = self._history[0][1] if self._history else Counter()
        return counts[name] - oldest[name]

    def assess(self, counts: Counter, now: float, *, state: str, writer: WriterState | None, database: Path,
               pending: int, model_metadata: dict | None, last_learn: LastLearn | None, online: bool) -> Health:
        """The health now; ``now`` is wall-clock time (for the model's age), ``state`` the lifecycle state,
        ``writer`` the case writer's (None when not configured), ``pending`` the trials waiting for parts."""
        while self._history and self._history[0][0] < now - self.window:
            self._history.popleft()
        rising = {name: self._rise(counts, name) for name in
                  ("rejected_parts", "dropped_incomplete", "store_errors", "clock_ahead_parts")}
        self._history.append((now, counts))
        learned = (model_metadata or {}).get("learned") or {}
        age = model_age(model_metadata or {}, now) if model_metadata is not None else None
        if last_learn is None and learned:
            last_learn = LastLearn(float(learned.get("duration", float("nan"))),
                                   float(learned.get("log_likelihood", float("nan"))))
        values = {
            "state": state,
            "cases stored": "-" if writer is None else str(writer.cases),
            "cases stored this run": str(counts["stored"]),
            "trials pending": str(pending),
            "trials waiting to be stored": "-" if writer is None else str(writer.queued),
            "trials held, not confirmed": "-" if writer is None else str(writer.held),
            "rejected parts": str(counts["rejected_parts"]),
            "dropped trials": str(counts["dropped_incomplete"]),
            "store errors": str(counts["store_errors"]),
            "model age [s]": "no model" if model_metadata is None else ("unknown" if age is None else f"{age:.0f}"),
            "last learn duration [s]": "-" if last_learn is None else f"{last_learn.duration:.3f}",
            "last learn log-likelihood": "-" if last_learn is None else f"{last_learn.log_likelihood:.3f}",
            "online updates": str(counts["online_updates"]) if online else "off",
            # requests whose answer the node handed to the middleware: a planner that sent more lost answers
            "predict answered": str(counts["predict_ok"] + counts["predict_failed"]),
            "select_action answered": str(counts["select_ok"] + counts["select_failed"]),
        }
        problem = self._storing_problem(writer, rising["store_errors"])
        if problem:
            return Health(*problem, values)
        warnings = [read_only_on_disk(database)] if writer is not None else []
        if rising["rejected_parts"] or rising["dropped_incomplete"]:
            warnings.append(f"{rising['rejected_parts']} parts rejected and {rising['dropped_incomplete']} incomplete "
                            f"trials dropped in the last {self.window:g} s")
        if rising["clock_ahead_parts"]:
            warnings.append(f"{rising['clock_ahead_parts']} parts stamped ahead of the node's clock by more than "
                            f"max_stamp_skew in the last {self.window:g} s (answered retry): is its clock right?")
        if model_metadata is None:
            warnings.append("no model yet: call ~/learn")
        warnings = [w for w in warnings if w]
        if warnings:
            return Health(WARN, "; ".join(warnings), values)
        return Health(OK, f"{values['cases stored']} cases stored; model "
                          + ("in use" if age is None else f"{age:.0f} s old"), values)

    def _storing_problem(self, writer: WriterState | None, store_errors: int) -> tuple[str, str] | None:
        """(level, message) when storing is not as it should be."""
        if writer is not None and not writer.confirming:
            until = ("that node stops" if writer.problem.endswith(SHARED)
                     else "the database is written to its path again")
            return ERROR, (f"{writer.problem}: not confirming trials ({writer.held} stored since are held, "
                           f"{writer.queued} wait) until {until}")
        if writer is not None and writer.problem:
            level = WARN if "locked" in writer.problem and writer.seconds < self.window else ERROR
            return level, (f"{writer.problem} for {writer.seconds:.0f} s: {writer.queued} trials wait to be "
                           "stored (not confirmed yet; the node takes no more parts while its queue is full)")
        if store_errors:
            return ERROR, f"{store_errors} trials could not be stored in the last {self.window:g} s (see the log)"
        return None


__all__ = ["Counters", "ERROR", "Health", "HealthMonitor", "LastLearn", "OK", "WARN", "model_age",
           "read_only_on_disk", "status_line"]
