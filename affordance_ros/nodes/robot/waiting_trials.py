"""The robot's book of the trials it sent and the learner has not answered yet: when each is due again, when one
is given up, what the answers were (``TrialPublisher`` holds one, and its lock around every call).

A trial is sent again when it has waited ``resend_timeout`` seconds and either a trial sent after its latest send
was confirmed already (the learner took that one, so it took this one too, and did not store it), or no answer
at all came for ``resend_timeout`` seconds (``silent``: the learner is down, restarting or out of reach), or the
learner answered ``retry``. A learner that is merely behind keeps confirming, in order, and gets nothing twice.
Each further re-send of a trial waits twice as long as the one before (up to ``BACKOFF_LIMIT`` times
``resend_timeout``; started anew when the learner comes back). Only the re-sends of the first and third kind
count toward giving up, which happens after ``max_resends`` of them: the learner refused the trial, whatever
the link did. While it is silent nothing is given up, so an outage of any length gives up nothing, and a trial
whose answer was lost is asked about again once the learner is reachable (it answers "stored already").
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

from ...data.intake import DUPLICATE, RETRY, STORED

BACKOFF_LIMIT = 8       # a re-send waits at most this many times resend_timeout
MAX_RESEND_BATCH = 200  # trials sent again per timer tick at most


class SpoolFull(RuntimeError):
    """``spool_limit`` trials wait for the learner's answer: no new trial is taken until it confirms some."""


@dataclass
class Sent:
    """One trial waiting for its answer."""

    messages: list      # (publisher, message or serialized bytes)
    sequence: int       # order of the first send
    sent: float         # monotonic time of the latest send
    resends: int = 0    # re-sends that count toward giving up (see the module's description)
    attempts: int = 0   # re-sends since the learner last came back: the back-off
    retry: bool = False  # the learner answered 'retry' (since the latest send)
    reason: str = ""     # why, the latest time


class WaitingTrials:
    """The trials waiting (trial_id -> ``Sent``, in the order of their latest send), at most ``limit`` of them, and
    what became of those answered: ``confirmed``, ``rejected``, ``duplicates``, ``given_up`` (trial_id -> reason,
    in the order of their first send), ``answers`` (a Counter of the statuses)."""

    def __init__(self, resend_timeout: float, max_resends: int, limit: int):
        self.resend_timeout = resend_timeout
        self.max_resends = max_resends
        self.limit = limit
        self.trials: OrderedDict[str, Sent] = OrderedDict()
        self.confirmed_after = float("-inf")  # the latest send of a trial the learner confirmed
        self._sequence = 0
        self.confirmed = 0
        self.rejected: dict[str, str] = {}
        self.duplicates: dict[str, str] = {}
        self.given_up: dict[str, str] = {}
        self._given_up_sequence: dict[str, int] = {}
        self.answers = Counter()

    def add(self, trial_id: str, messages: Sequence, now: float, sent: bool = True) -> None:
        """Keep ``messages`` of ``trial_id`` (a new trial, or more messages of one waiting, published now if
        ``sent``). SpoolFull when ``limit`` trials wait and this one is new."""
        self.check_room(trial_id)
        kept = self.trials.get(trial_id)
        if kept is None:
            self._sequence += 1
            self.trials[trial_id] = Sent(list(messages), self._sequence, now)
            return
        kept.messages.extend(messages)
        if sent:
            kept.sent = now
            self.trials.move_to_end(trial_id)

    @property
    def full(self) -> bool:
        return len(self.trials) >= self.limit

    def check_room(self, trial_id: str) -> None:
        """SpoolFull if ``trial_id`` is a new trial and ``limit`` trials wait."""
        if trial_id not in self.trials and len(self.trials) >= self.limit:
            raise SpoolFull(f"{len(self.trials)} trials wait for the learner's answer (spool_limit {self.limit}): "
                            f"not taking trial '{trial_id[:80]}' until it confirms some")

    def due(self, now: float, silent: bool, queued: Callable[[str], bool]) -> tuple[list, list]:
        """(the ``Sent`` to send again now, marked sent; the ids given up now), at most ``MAX_RESEND_BATCH`` trials;
        ``queued(trial_id)``: that trial is about to be sent again anyway."""
        due, given_up = [], []
        for trial_id, sent in self.trials.items():
            if now - sent.sent <= self.resend_timeout or len(due) >= MAX_RESEND_BATCH:
                break  # (in the order of their latest send: none after this one is due)
            if queued(trial_id) or now - sent.sent <= self.resend_timeout * min(2 ** sent.attempts, BACKOFF_LIMIT):
                continue
            counted = sent.retry or self.confirmed_after > sent.sent
            if counted and sent.resends >= self.max_resends:
                given_up.append(trial_id)
            elif counted or silent:
                due.append((trial_id, sent))
                sent.resends += counted
        given_up.sort(key=lambda trial_id: self.trials[trial_id].sequence)
        for trial_id in given_up:
            sent = self.trials.pop(trial_id)
            self._given_up_sequence[trial_id] = sent.sequence
            self.given_up[trial_id] = (f"not confirmed after {sent.resends} re-sends while the learner confirmed "
                                       "trials sent after it" + (f"; it answered retry: {sent.reason}"
                                                                 if sent.reason else ""))
        if given_up:  # in the order they were first sent (a bag's order), whichever was given up first
            self.given_up = dict(sorted(self.given_up.items(), key=lambda item: self._given_up_sequence[item[0]]))
        for trial_id, sent in due:
            self.sent_again(trial_id, now, sent.attempts + 1)
        return [sent for _, sent in due], given_up

    def sent_again(self, trial_id: str, now: float, attempts: int = 0) -> Sent | None:
        """Mark ``trial_id`` sent again now (``attempts``: its back-off; 0 starts it anew); None if not waiting."""
        sent = self.trials.get(trial_id)
        if sent is not None:
            sent.sent = now
            sent.attempts = attempts
            sent.retry = False
            self.trials.move_to_end(trial_id)
        return sent

    def sent_before(self, now: float) -> list[str]:
        """The trials whose latest send was at ``now`` or before, oldest first."""
        return [t for t, sent in sorted(self.trials.items(), key=lambda item: item[1].sequence) if sent.sent <= now]

    def answered(self, trial_id: str, status: str, reason: str) -> bool:
        """Take the learner's answer; False if ``trial_id`` does not wait (another robot's, or answered already)."""
        sent = self.trials.get(trial_id)
        if sent is None:
            return False
        self.answers[status] += 1
        if status == RETRY:  # kept, and sent again after resend_timeout
            sent.retry = True
            sent.reason = reason
            return True
        del self.trials[trial_id]
        self.confirmed_after = max(self.confirmed_after, sent.sent)
        if status == STORED:
            self.confirmed += 1
        elif status == DUPLICATE:
            self.duplicates[trial_id] = reason
        else:
            self.rejected[trial_id] = reason
        return True
