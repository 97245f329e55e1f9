"""From the parts of trials to stored cases: check each part, pair the parts, queue the trial for storing.

``TrialIntake`` is the learner node's path for every message, below ROS: the node hands it
each part (kind, trial_id, header stamp, fields) with the receive clock, and on a timer the
receive clock alone; it gets back ``Event``s to count, log and answer, in order. A completed
trial is queued to its ``CaseWriter`` (which commits in a thread of its own); ``committed`` takes the
writer's results and gives the events of the stored trials.

End-to-end delivery: an event with a ``status`` is the learner's answer to the robot about one
trial (published on ``~/stored``): ``stored`` once it is committed (never before), and again when it
is sent again (the store is idempotent by trial_id: a re-sent trial is confirmed, not an error) once
all three of its parts came again as stored: a part alone does not tell a re-send from another trial
with that id (a robot restarted with the same ids), whose robot would take ``stored`` for its own
trial; ``duplicate`` when a part of a stored trial, or of one being stored, differs from what is
stored (the stored case is kept; the answer and the log name the part that differs), and for every
part of that trial_id after it; ``rejected`` when a part of it cannot be used (the reason says why);
``retry`` when a part cannot be taken now for a reason of the learner's (its clock is far behind the
part's stamp): the robot keeps the trial and sends it again later; ``rejected`` too when a part's bytes cannot be
read but its trial_id can (``unreadable``). An incomplete trial that is
dropped gets no answer: the robot sends it again. While the writer is not ``confirming`` (the database
file is not the one the node opened) no stored trial is confirmed.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..core import GROUPS
from .case_writer import CaseWriter
from .log_text import quoted
from .pairing import (
    DroppedTrial,
    DuplicatePartError,
    OutOfRangeError,
    OversizedError,
    PairingError,
    PartValidator,
    TrialAssembler,
)
from .trial import TrialRecord

# The statuses of msg/TrialStatus (its constants), as the learner reports them.
STORED, DUPLICATE, REJECTED, RETRY = "stored", "duplicate", "rejected", "retry"
# How many stored trial ids found re-sent with other content are remembered, with the parts that differed (their
# other parts count as duplicates too, not as re-sent).
_REMEMBERED_CONFLICTS = 1000
# How many trials stored lately are remembered, to answer their parts sent again at once (an older one
# sent again is paired again and answered once the writer finds it stored).
REMEMBERED_RECORDS = 10000


@dataclass(frozen=True)
class Event:
    """Something to count (``counter``, and ``also`` more counters) and, with a ``message``, to log at
    ``level``. A stored trial carries its case id and record (``case``) for online learning; ``status``
    (trial_id, status, reason) is the answer to publish for a trial. ``kind``: what messages of one kind share,
    under which repeated ones are counted (empty: the message without its names and numbers, ``log_text.shape``)."""

    counter: str
    message: str = ""
    level: str = "warning"
    case: tuple[int, TrialRecord] | None = None
    status: tuple[str, str, str] | None = None
    also: tuple[str, ...] = ()
    kind: str = ""


class TrialIntake:
    """Checks parts against the configuration, pairs them into trials and queues every trial for storing.

    A completed trial is queued to ``writer`` (``CaseWriter.submit``); its result comes back through
    ``committed``. The first part of a trial that is neither being paired, nor being stored, nor among those
    stored lately is looked up in the writer's store; while the writer is not ``confirming`` no stored trial is
    confirmed. ``expire_period``: how often the node calls ``expire`` (a call late by more than two periods is
    skipped: see ``expire``). ``max_stamp_skew``: a part stamped more than this many seconds after ``now`` is
    answered ``retry`` (0: no limit; not judged while ``now`` is 0, a simulated clock that has not started).
    """

    def __init__(self, parts: PartValidator, assembler: TrialAssembler, writer: CaseWriter, expire_period: float,
                 max_stamp_skew: float = 0.0):
        self.parts = parts
        self.assembler = assembler
        self.writer = writer
        self.expire_period = expire_period
        self.max_stamp_skew = max_stamp_skew
        self._last_expire = None
        self._recent: OrderedDict[str, TrialRecord] = OrderedDict()  # stored lately
        self._storing: dict[str, TrialRecord] = {}  # submitted, not committed yet
        self._conflicts: OrderedDict[str, tuple[str, ...]] = OrderedDict()  # trial_id -> the kinds of part differing
        self._resent: OrderedDict[str, set[str]] = OrderedDict()  # stored trial_id -> the kinds sent again as stored

    def take(self, kind: str, trial_id: str, stamp: float, fields, now: float) -> list[Event]:
        """One part: ``fields`` is the action label for 'action', (names, values) for 'object' and
        'effect'; ``now`` the receive clock. Data time moves on with every accepted part only."""
        events = [Event(f"received_{kind}")]
        try:
            self.parts.limits.check_trial_id(trial_id)
        except OversizedError as exc:  # no answer: the robot could not match such an id anyway
            return events + [Event("rejected_parts", f"rejected a '{kind}' part: {exc}", also=("oversized_parts",))]
        storing = self._storing.get(trial_id)
        if storing is not None:  # sent again while it is being stored: the commit answers a re-send
            return events + [self._again(kind, trial_id, fields, storing, being_stored=True)]
        record = self._stored_record(trial_id)
        if record is not None:
            if not self.writer.confirming:  # not in the file the node would read at its next start: no answer
                return events + [Event("unconfirmed_parts")]
            return events + [self._again(kind, trial_id, fields, record)]
        if self.max_stamp_skew > 0 and now > 0 and stamp - now > self.max_stamp_skew:
            reason = (f"its header stamp is {stamp - now:.0f} s ahead of the node's clock, more than "
                      f"max_stamp_skew {self.max_stamp_skew:g} s (is the learner's clock right? use_sim_time "
                      "with a /clock of another time?); send it again later")
            return events + [Event("clock_ahead_parts", f"not taking the {_part(kind, trial_id)} now: {reason}",
                                   status=(trial_id, RETRY, reason) if trial_id else None)]
        try:
            payload = self.parts.action(fields) if kind == "action" else self.parts.readings(kind, *fields)
        except PairingError as exc:
            return events + [self._rejected(_part(kind, trial_id), trial_id, exc)]
        events += self._dropped(self.assembler.observe(stamp, now))
        try:
            trial = self.assembler.add(kind, trial_id, stamp, payload, now)
        except DuplicatePartError as exc:
            return events + [Event("duplicate_parts", f"ignored the {_part(kind, trial_id)}: {exc}")]
        except PairingError as exc:
            return events + [self._rejected(_part(kind, trial_id), trial_id, exc)]
        if trial is not None:
            record = trial.to_record(self.parts.action_variable)
            self._storing[trial.trial_id] = record
            self.writer.submit(record)
        return events

    def unreadable(self, kind: str, trial_id: str, error: str) -> list[Event]:
        """A part whose bytes cannot be read (``error`` says why), of ``trial_id`` as far as its bytes tell ('': not
        at all): answered rejected, so that its robot stops sending it, unless that trial is stored or being stored
        (a damaged copy of it changes nothing)."""
        try:
            self.parts.limits.check_trial_id(trial_id)
        except OversizedError:
            trial_id = ""
        answer = bool(trial_id) and trial_id not in self._storing and self._stored_record(trial_id) is None
        return [Event(f"received_{kind}"),
                Event("rejected_parts", f"rejected the {_part(kind, trial_id)}: it cannot be read: {error}",
                      status=(trial_id, REJECTED, f"its '{kind}' part cannot be read: {error}") if answer else None)]

    def committed(self) -> list[Event]:
        """The events of the writer's results since it was last asked: stored (with the case for online
        learning), stored already (the same trial sent again: confirmed; another one: duplicate), or not stored
        (no answer: the robot sends it again)."""
        events = []
        for result in self.writer.take():
            record = result.record
            trial_id = record.trial_id
            self._storing.pop(trial_id, None)
            if result.failed:
                events.append(Event("store_errors", f"could not store trial '{quoted(trial_id)}': {result.failed}",
                                    "error"))
            elif result.case_id is not None:
                self._remember(record)
                events.append(Event("stored", case=(result.case_id, record), status=(trial_id, STORED, "")))
            elif result.stored is not None and not record.differing_parts(result.stored):
                self._remember(result.stored)
                events.append(Event("resent_trials", status=(trial_id, STORED, "already stored")))
            else:
                self._remember(result.stored or record)
                events.append(self._conflict(trial_id, f"trial '{quoted(trial_id)}'",
                                             record.differing_parts(result.stored) if result.stored else ()))
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

    @property
    def storing(self) -> int:
        """Trials complete and waiting to be committed."""
        return len(self._storing)

    def _stored_record(self, trial_id: str) -> TrialRecord | None:
        """The stored record of ``trial_id``: one stored lately, else (unless its trial is being paired)
        from the store."""
        if not trial_id or self.assembler.waiting_for(trial_id):
            return None
        record = self._recent.get(trial_id)
        if record is None:
            record = self.writer.store.record_of(trial_id)
            if record is not None:
                self._remember(record)
        return record

    def _remember(self, record: TrialRecord) -> None:
        self._recent[record.trial_id] = record
        self._recent.move_to_end(record.trial_id)
        if len(self._recent) > REMEMBERED_RECORDS:
            self._recent.popitem(last=False)

    def _again(self, kind: str, trial_id: str, fields, record: TrialRecord, being_stored: bool = False) -> Event:
        """A part of a stored trial (``being_stored``: of one being stored, whose commit answers it): sent again
        (the same as stored: confirmed), or a conflict naming the part that differs (this one, or one of that
        trial_id before it: then this one is named as the same as stored)."""
        same = _same_part(kind, fields, record)
        if same and trial_id not in self._conflicts:
            return Event("resent_parts", status=None if being_stored else self._resent_part(trial_id, kind))
        self._resent.pop(trial_id, None)
        what = f"the {_part(kind, trial_id)}" + (", the same as stored" if same else "")
        return self._conflict(trial_id, what, () if same else (kind,),
                              "duplicate_parts" if being_stored else "duplicate_trials",
                              "being stored" if being_stored else "already stored")

    def _resent_part(self, trial_id: str, kind: str) -> tuple[str, str, str] | None:
        """The answer to a part of a stored trial sent again as stored: ``stored`` once every part came so."""
        kinds = self._resent.pop(trial_id, set()) | {kind}
        if len(kinds) == len(GROUPS):
            return trial_id, STORED, "already stored"
        self._resent[trial_id] = kinds
        if len(self._resent) > REMEMBERED_RECORDS:
            self._resent.popitem(last=False)
        return None

    def _conflict(self, trial_id: str, what: str, differing: tuple[str, ...], counter: str = "duplicate_trials",
                  state: str = "already stored") -> Event:
        """``what`` of ``trial_id`` is not stored: the case stored (or being stored) with this trial_id holds
        other content; ``differing``: the kinds of part found to differ now (added to those found before)."""
        known = self._conflicts.pop(trial_id, ())
        self._conflicts[trial_id] = known + tuple(k for k in differing if k not in known)
        if len(self._conflicts) > _REMEMBERED_CONFLICTS:
            self._conflicts.popitem(last=False)
        other = _other_parts(self._conflicts[trial_id])
        return Event(counter, f"ignored {what}: a case with this trial_id is {state}, with {other}; "
                              "kept the stored one",
                     status=(trial_id, DUPLICATE, f"a trial with this trial_id is stored already, with {other}; "
                                                  "kept the stored one"))

    @staticmethod
    def _rejected(what: str, trial_id: str, exc: PairingError) -> Event:
        also = (("oversized_parts",) if isinstance(exc, OversizedError)
                else ("out_of_range_parts",) if isinstance(exc, OutOfRangeError) else ())
        return Event("rejected_parts", f"rejected the {what}: {exc}", also=also,
                     status=(trial_id, REJECTED, str(exc)) if trial_id else None)

    @staticmethod
    def _dropped(trials: list[DroppedTrial]) -> list[Event]:
        events = []
        for dropped in trials:
            name = (f"trial '{quoted(dropped.trial_id)}'" if dropped.trial_id
                    else f"trial stamped {dropped.stamp:.3f} s")
            events.append(Event("dropped_incomplete", f"dropped the incomplete {name} (has "
                                                      f"{', '.join(dropped.parts)}): {dropped.reason}",
                                kind=f"dropped {bool(dropped.trial_id)} {dropped.parts} {dropped.reason}"))
        return events


def _part(kind: str, trial_id: str) -> str:
    """How a message names a part (made only for a message: a flood's parts mostly need none)."""
    return f"'{kind}' part of trial '{quoted(trial_id)}'" if trial_id else f"'{kind}' part without trial_id"


def _other_parts(kinds: tuple[str, ...]) -> str:
    """How a conflict names the parts that differ: "another 'object' part", "other 'action' and 'effect' parts"."""
    if not kinds:
        return "other content"
    names = [f"'{kind}'" for kind in kinds]
    if len(names) == 1:
        return f"another {names[0]} part"
    return f"other {', '.join(names[:-1])} and {names[-1]} parts"


def _same_part(kind: str, fields, record: TrialRecord) -> bool:
    """Whether a part (the action label, or (names, values)) is what the stored ``record`` holds."""
    if kind == "action":
        return record.action == fields
    names, values = fields
    stored = record.part(kind)
    if len(names) != len(values) or len(names) != len(stored):
        return False
    return all(stored.get(name) == float(value) for name, value in zip(names, values))
