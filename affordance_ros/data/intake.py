"""From the parts of trials to stored cases: check each part, pair the parts, store the trial.

``TrialIntake`` is the learner node's path for every message, below ROS: the node hands it
each part (kind, trial_id, header stamp, fields) with the receive clock, and on a timer the
receive clock alone; it gets back ``Event``s to count, log and confirm, in order. A completed
trial is committed to the case store before ``take`` returns.

End-to-end delivery: an event with a ``status`` is the learner's answer to the robot about one
trial (published on ``~/stored``): ``stored`` once it is committed, and again for every part of it
sent again (the store is idempotent by trial_id: a re-sent trial is confirmed, not an error);
``duplicate`` when a part of a stored trial differs from what is stored (the stored case is kept);
``rejected`` when a part of it cannot be used (the reason says why). An incomplete trial that is
dropped gets no answer: the robot sends it again.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from .pairing import (
    DroppedTrial,
    DuplicatePartError,
    OutOfRangeError,
    OversizedError,
    PairingError,
    PartValidator,
    TrialAssembler,
)
from .storage import CaseStoreError
from .text import quoted
from .trial import TrialRecord

# The statuses of msg/TrialStatus (its constants), as the learner reports them.
STORED, DUPLICATE, REJECTED = "stored", "duplicate", "rejected"
# How many stored trial ids found re-sent with other content are remembered (their other parts count as
# duplicates too, not as re-sent).
_REMEMBERED_CONFLICTS = 1000


@dataclass(frozen=True)
class Event:
    """Something to count (``counter``, and ``also`` more counters) and, with a ``message``, to log at
    ``level``. A stored trial carries its case id and record (``case``) for online learning; ``status``
    (trial_id, status, reason) is the answer to publish for a trial."""

    counter: str
    message: str = ""
    level: str = "warning"
    case: tuple[int, TrialRecord] | None = None
    status: tuple[str, str, str] | None = None
    also: tuple[str, ...] = ()


class TrialIntake:
    """Checks parts against the configuration, pairs them into trials and commits every trial.

    ``store(record)`` commits a ``TrialRecord`` and returns its case id, or None if its trial_id is stored
    already; ``stored(trial_id)`` returns the stored record of a trial (a ``TrialRecord``, or only something
    true when the store cannot say more), or something false if there is none. ``expire_period``: how often the
    node calls ``expire`` (a call late by more than two periods is skipped: see ``expire``).
    ``max_stamp_skew``: a part stamped more than this many seconds after ``now`` is rejected (0: no limit;
    not judged while ``now`` is 0, a simulated clock that has not started).
    """

    def __init__(self, parts: PartValidator, assembler: TrialAssembler, store: Callable[[TrialRecord], int | None],
                 stored: Callable[[str], object], expire_period: float, max_stamp_skew: float = 0.0):
        self.parts = parts
        self.assembler = assembler
        self._store = store
        self._stored = stored
        self.expire_period = expire_period
        self.max_stamp_skew = max_stamp_skew
        self._last_expire = None
        self._conflicts: OrderedDict[str, None] = OrderedDict()

    def take(self, kind: str, trial_id: str, stamp: float, fields, now: float) -> list[Event]:
        """One part: ``fields`` is the action label for 'action', (names, values) for 'object' and
        'effect'; ``now`` the receive clock. Data time moves on with every accepted part only."""
        events = [Event(f"received_{kind}")]
        try:
            self.parts.limits.check_trial_id(trial_id)
        except OversizedError as exc:  # no answer: the robot could not match such an id anyway
            return events + [Event("rejected_parts", f"rejected a '{kind}' part: {exc}", also=("oversized_parts",))]
        what = f"'{kind}' part of trial '{quoted(trial_id)}'" if trial_id else f"'{kind}' part without trial_id"
        if trial_id:
            record = self._stored(trial_id)
            if record:
                return events + [self._again(kind, trial_id, fields, record, what)]
        try:
            if self.max_stamp_skew > 0 and now > 0 and stamp - now > self.max_stamp_skew:
                raise OutOfRangeError(f"its header stamp is {stamp - now:.0f} s ahead of the node's clock, more "
                                      f"than max_stamp_skew {self.max_stamp_skew:g} s")
            payload = self.parts.action(fields) if kind == "action" else self.parts.readings(kind, *fields)
        except PairingError as exc:
            return events + [self._rejected(what, trial_id, exc)]
        events += self._dropped(self.assembler.observe(stamp, now))
        try:
            trial = self.assembler.add(kind, trial_id, stamp, payload, now)
        except DuplicatePartError as exc:
            return events + [Event("duplicate_parts", f"ignored the {what}: {exc}")]
        except PairingError as exc:
            return events + [self._rejected(what, trial_id, exc)]
        if trial is not None:
            events.append(self._commit(trial.to_record(self.parts.action_variable)))
        return events

    def expire(self, now: float) -> list[Event]:
        """The fallback once messages stop (``TrialAssembler.expire``) on the receive clock. Not right
        after the caller was held up (a call late by more than two periods): messages that arrived
        meanwhile are still queued and go first."""
        previous, self._last_expire = self._last_expire, now
        if previous is not None and now - previous > 2 * self.expire_period:
            return []
        return self._dropped(self.assembler.expire(now))

    @property
    def pending(self) -> int:
        """Trials waiting for a part."""
        return self.assembler.pending

    def _again(self, kind: str, trial_id: str, fields, record, what: str) -> Event:
        """A part of a stored trial: sent again (the same as stored: confirmed), or a conflict."""
        if trial_id not in self._conflicts and _same_part(kind, fields, record):
            return Event("resent_parts", status=(trial_id, STORED, "already stored"))
        self._conflicts[trial_id] = None
        if len(self._conflicts) > _REMEMBERED_CONFLICTS:
            self._conflicts.popitem(last=False)
        return Event("duplicate_trials", f"ignored the {what}: a case with this trial_id is already stored, "
                                         "with other content; kept the stored one",
                     status=(trial_id, DUPLICATE, "a trial with this trial_id is stored already, with other "
                                                  "content; kept the stored one"))

    @staticmethod
    def _rejected(what: str, trial_id: str, exc: PairingError) -> Event:
        also = (("oversized_parts",) if isinstance(exc, OversizedError)
                else ("out_of_range_parts",) if isinstance(exc, OutOfRangeError) else ())
        return Event("rejected_parts", f"rejected the {what}: {exc}", also=also,
                     status=(trial_id, REJECTED, str(exc)) if trial_id else None)

    def _commit(self, record: TrialRecord) -> Event:
        trial_id = record.trial_id
        try:
            case_id = self._store(record)
        except (CaseStoreError, sqlite3.Error) as exc:
            self.assembler.forget(trial_id)  # no answer: the robot sends it again, and it can then be stored
            return Event("store_errors", f"could not store trial '{quoted(trial_id)}': {exc}", "error")
        if case_id is None:
            return Event("duplicate_trials", f"trial '{quoted(trial_id)}' is already stored; kept the stored one",
                         status=(trial_id, STORED, "already stored"))
        return Event("stored", case=(case_id, record), status=(trial_id, STORED, ""))

    @staticmethod
    def _dropped(trials: list[DroppedTrial]) -> list[Event]:
        events = []
        for dropped in trials:
            name = (f"trial '{quoted(dropped.trial_id)}'" if dropped.trial_id
                    else f"trial stamped {dropped.stamp:.3f} s")
            events.append(Event("dropped_incomplete", f"dropped the incomplete {name} (has "
                                                      f"{', '.join(dropped.parts)}): {dropped.reason}"))
        return events


def _same_part(kind: str, fields, record) -> bool:
    """Whether a part (the action label, or (names, values)) is what the stored ``record`` holds."""
    if not isinstance(record, TrialRecord):  # only told that it is stored: idempotent by trial_id
        return True
    if kind == "action":
        return record.action == fields
    names, values = fields
    stored = record.part(kind)
    if len(names) != len(values) or len(names) != len(stored):
        return False
    return all(stored.get(name) == float(value) for name, value in zip(names, values))
