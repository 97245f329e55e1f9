"""From the parts of trials to stored cases: check each part, pair the parts, store the trial.

``TrialIntake`` is the learner node's path for every message, below ROS: the node hands it
each part (kind, trial_id, header stamp, fields) with the receive clock, and on a timer the
receive clock alone; it gets back ``Event``s to count and log, in order. A completed trial is
committed to the case store before ``take`` returns.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Callable

from .pairing import DroppedTrial, DuplicatePartError, PairingError, PartValidator, TrialAssembler
from .storage import CaseStoreError


@dataclass(frozen=True)
class Event:
    """Something to count (``counter``) and, with a ``message``, to log at ``level``.

    A stored trial carries its case id and record (``case``) for online learning.
    """

    counter: str
    message: str = ""
    level: str = "warning"
    case: tuple[int, dict] | None = None


class TrialIntake:
    """Checks parts against the configuration, pairs them into trials and commits every trial.

    ``store(record)`` commits a record and returns its case id, or None if its trial_id is stored
    already; ``stored(trial_id)`` says whether a trial is stored. ``expire_period``: how often the
    node calls ``expire`` (a call late by more than two periods is skipped: see ``expire``).
    """

    def __init__(self, parts: PartValidator, assembler: TrialAssembler, store: Callable[[dict], int | None],
                 stored: Callable[[str], bool], expire_period: float):
        self.parts = parts
        self.assembler = assembler
        self._store = store
        self._stored = stored
        self.expire_period = expire_period
        self._last_expire = None

    def take(self, kind: str, trial_id: str, stamp: float, fields, now: float) -> list[Event]:
        """One part: ``fields`` is the action label for 'action', (names, values) for 'object' and
        'effect'; ``now`` the receive clock. Data time moves on with every part, also a rejected one."""
        events = [Event(f"received_{kind}")]
        events += self._dropped(self.assembler.observe(stamp, now))
        what = f"'{kind}' part of trial '{trial_id}'" if trial_id else f"'{kind}' part without trial_id"
        try:
            if trial_id and self._stored(trial_id):
                return events + [Event("duplicate_trials", f"ignored the {what}: a case with this trial_id is "
                                                           "already stored")]
            payload = self.parts.action(fields) if kind == "action" else self.parts.readings(kind, *fields)
            trial = self.assembler.add(kind, trial_id, stamp, payload, now)
        except DuplicatePartError as exc:
            return events + [Event("duplicate_parts", f"ignored the {what}: {exc}")]
        except PairingError as exc:
            return events + [Event("rejected_parts", f"rejected the {what}: {exc}")]
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

    def _commit(self, record: dict) -> Event:
        try:
            case_id = self._store(record)
        except (CaseStoreError, sqlite3.Error) as exc:
            return Event("store_errors", f"could not store trial '{record['trial_id']}': {exc}", "error")
        if case_id is None:
            return Event("duplicate_trials", f"trial '{record['trial_id']}' is already stored; kept the stored one")
        return Event("stored", case=(case_id, record))

    @staticmethod
    def _dropped(trials: list[DroppedTrial]) -> list[Event]:
        events = []
        for dropped in trials:
            name = f"trial '{dropped.trial_id}'" if dropped.trial_id else f"trial stamped {dropped.stamp:.3f} s"
            events.append(Event("dropped_incomplete", f"dropped the incomplete {name} (has "
                                                      f"{', '.join(dropped.parts)}): {dropped.reason}"))
        return events
