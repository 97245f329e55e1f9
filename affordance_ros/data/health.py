"""The learner's counters, its status line and its health (OK / WARN / ERROR), below ROS.

``Counters`` is what the node counts (thread-safe: learning runs in a worker thread).
``status_line`` is the line the node logs every ``status_period`` and when it stops.
``HealthMonitor.assess`` turns the counters, the model and the case store into one status for
/diagnostics: ERROR when the case database cannot be written (it is gone, read-only, or storing
failed lately), WARN when rejected parts or dropped trials are rising or there is no model
yet, else OK; with the key values a dashboard shows.
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
            f"{c['out_of_range_parts']}, oversized {c['oversized_parts']}); re-sent parts of stored trials: "
            f"{c['resent_parts']}; duplicate parts: {c['duplicate_parts']}; duplicate trials: "
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


def database_problem(path: Path) -> str:
    """'' if the case database at ``path`` can be written, else why not."""
    if not path.exists():
        return f"the case database {path} is gone (removed while the node runs): new cases are lost at restart"
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        return f"the case database {path} (or its folder) is not writable"
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

    def assess(self, counts: Counter, now: float, *, state: str, database: Path, stored_total: int,
               model_metadata: dict | None, last_learn: LastLearn | None, online: bool) -> Health:
        """The health now; ``now`` is wall-clock time (for the model's age), ``state`` the lifecycle state."""
        while self._history and self._history[0][0] < now - self.window:
            self._history.popleft()
        rejected, dropped = self._rise(counts, "rejected_parts"), self._rise(counts, "dropped_incomplete")
        store_errors = self._rise(counts, "store_errors")
        self._history.append((now, counts))
        learned = (model_metadata or {}).get("learned") or {}
        age = model_age(model_metadata or {}, now) if model_metadata is not None else None
        if last_learn is None and learned:
            last_learn = LastLearn(float(learned.get("duration", float("nan"))),
                                   float(learned.get("log_likelihood", float("nan"))))
        values = {
            "state": state,
            "cases stored": str(stored_total),
            "cases stored this run": str(counts["stored"]),
            "rejected parts": str(counts["rejected_parts"]),
            "dropped trials": str(counts["dropped_incomplete"]),
            "store errors": str(counts["store_errors"]),
            "model age [s]": "no model" if model_metadata is None else ("unknown" if age is None else f"{age:.0f}"),
            "last learn duration [s]": "-" if last_learn is None else f"{last_learn.duration:.3f}",
            "last learn log-likelihood": "-" if last_learn is None else f"{last_learn.log_likelihood:.3f}",
            "online updates": str(counts["online_updates"]) if online else "off",
        }
        problem = database_problem(database)
        if problem or store_errors:
            return Health(ERROR, problem or f"{store_errors} trials could not be stored in the last "
                                            f"{self.window:g} s (see the log)", values)
        warnings = []
        if rejected or dropped:
            warnings.append(f"{rejected} parts rejected and {dropped} incomplete trials dropped in the last "
                            f"{self.window:g} s")
        if model_metadata is None:
            warnings.append("no model yet: call ~/learn")
        if warnings:
            return Health(WARN, "; ".join(warnings), values)
        return Health(OK, f"{stored_total} cases stored; model " + ("in use" if age is None else f"{age:.0f} s old"),
                      values)


__all__ = ["Counters", "ERROR", "Health", "HealthMonitor", "LastLearn", "OK", "WARN", "database_problem",
           "model_age", "status_line"]
