"""The stored cases a learn uses: those that fit the configuration, and why the others are left out.

The configuration may have changed since a case was stored: a case labelled for another action
variable or with an action the configuration does not have, with a sensor it does not configure,
a reading outside a sensor's valid_range, or evidence of zero likelihood under the sensor models
is left out of a learn, and named with its reason (``SkippedCases``).

Which stored cases a model has seen is kept in its metadata ("cases", ``cases_marker``):
a learn with a prior uses only the cases stored since (``new_cases``), and online learning
catches up on them (``seen_until``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..core import AffordanceError, AffordanceNetwork, CaseSet
from .log_text import quoted
from .pairing import PartValidator
from .storage import CaseColumns, CaseStore

EXAMPLES = 3  # trial ids named per reason a case was skipped
LEARN_CHUNK = 100_000   # stored cases read at a time when learning (as columns)


@dataclass
class SkippedCases:
    """Stored cases left out of a learn, with why: reason -> how many, and the first few trial ids."""

    reasons: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)

    def add(self, trial_id: str, reason: str) -> None:
        self.reasons[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < EXAMPLES:
            shown.append(trial_id)

    def __len__(self) -> int:
        return sum(self.reasons.values())

    def __str__(self) -> str:
        return str(len(self))

    def describe(self) -> str:
        """'1200 with sensor 'x' not in the configuration (e.g. 't1', 't2', 't3', ...); ...'."""
        parts = []
        for reason, count in self.reasons.most_common():
            names = ", ".join(f"'{quoted(t)}'" for t in self.examples[reason])
            parts.append(f"{count} {reason} (e.g. {names}{', ...' if count > len(self.examples[reason]) else ''})")
        return "; ".join(parts)


class TrainingCases(NamedTuple):
    """The cases a learn uses, those it leaves out and why, and the model metadata "cases" naming them."""

    cases: CaseSet
    skipped: SkippedCases
    marker: dict


def stored_cases(store: CaseStore, config: AffordanceNetwork, after: int = 0,
                 judge: AffordanceNetwork | None = None) -> TrainingCases:
    """The stored cases (with ids above ``after``) that fit ``config``, those that do not and why, and the
    model metadata naming the cases used. Evidence of zero likelihood is judged under ``judge``'s fitted
    sensor models (default: the configuration's). The store is read as columns in chunks of
    ``LEARN_CHUNK`` cases, so memory is bounded by what is kept, not by the database."""
    parts = PartValidator(config)
    actions = list(parts.actions)
    skipped = SkippedCases()
    codes, ids, readings = [], [], {}
    last_id, last_trial = after, None
    for chunk in store.column_chunks(after, LEARN_CHUNK):
        reasons = _unfit(chunk, parts)
        keep = np.flatnonzero(reasons == "")
        for k in np.flatnonzero(reasons != ""):
            skipped.add(chunk.trial_ids[k], str(reasons[k]))
        distinct, inverse = np.unique(chunk.actions[keep], return_inverse=True)
        codes.append(np.array([actions.index(a) for a in distinct], dtype=np.int64)[inverse.reshape(-1)])
        ids.extend(chunk.trial_ids[k] for k in keep)
        for sensor in set(parts.ranges) & set(chunk.readings):
            readings.setdefault(sensor, [np.full(len(c), np.nan) for c in codes[:-1]])
        for sensor, columns in readings.items():
            column = chunk.readings.get(sensor)
            columns.append(column[keep] if column is not None else np.full(len(keep), np.nan))
        last_id, last_trial = int(chunk.ids[-1]), chunk.trial_ids[-1]
    labels = {parts.action_variable: np.concatenate(codes) if codes else np.zeros(0, np.int64)}
    cases = CaseSet(config, labels, {sensor: np.concatenate(columns) for sensor, columns in readings.items()}, ids)
    impossible = cases.impossible(judge or config)
    if impossible.any():
        for k in np.flatnonzero(impossible):
            skipped.add(str(cases.trial_ids[k]), "whose readings have zero likelihood under the sensor models")
        cases = cases.take(~impossible)
    return TrainingCases(cases, skipped, cases_marker(store.path, cases.n_cases, last_id, last_trial))


def new_cases(store: CaseStore, config: AffordanceNetwork, prior: AffordanceNetwork,
              judge: AffordanceNetwork | None = None) -> TrainingCases:
    """``stored_cases`` after those ``prior`` has seen; AffordanceError if there are none or the model
    does not say which it has seen."""
    seen = seen_until(store, prior)
    if seen is None:
        raise AffordanceError(
            "the current model does not record which stored cases it has seen (written by an older "
            "version, or learned from another database): learn once with prior_strength 0")
    cases, skipped, marker = stored_cases(store, config, after=seen, judge=judge)
    known = prior.metadata["cases"]
    if cases.n_cases == 0:
        raise AffordanceError(
            f"no new cases since the current model was learned (it has seen {known.get('count', 0)} "
            f"stored cases, up to trial '{known.get('last_trial_id')}'"
            + (f"; {len(skipped)} newer ones do not fit the configuration: {skipped.describe()}" if skipped else "")
            + "): record more trials first, or set prior_strength to 0 to learn from all stored cases")
    marker["count"] += int(known.get("count", 0))
    return TrainingCases(cases, skipped, marker)


def seen_until(store: CaseStore, model: AffordanceNetwork) -> int | None:
    """The id of the last stored case ``model`` has seen (its metadata "cases"); None if it does not
    say, or names a case ``store`` does not hold (a model from elsewhere)."""
    marker = model.metadata.get("cases") or {}
    if not isinstance(marker, dict):
        return None
    last_id = marker.get("last_id")
    if not isinstance(last_id, int) or isinstance(last_id, bool) or last_id < 0:
        return None
    if last_id and store.trial_id_of(last_id) != marker.get("last_trial_id"):
        return None
    return last_id


def cases_marker(database, count: int, last_id: int, last_trial_id: str | None) -> dict:
    """The metadata entry "cases": which stored cases a model has seen (up to and including ``last_id``)."""
    return {"database": str(database), "count": int(count), "last_id": int(last_id), "last_trial_id": last_trial_id}


def _unfit(chunk: CaseColumns, parts: PartValidator) -> np.ndarray:
    """Why each stored case of a chunk does not fit the configuration ('' where it does), as an array of strings."""
    action_variable, ranges = parts.action_variable, parts.ranges
    reasons = np.full(len(chunk.ids), "", dtype=object)
    other = chunk.action_variables != action_variable
    reasons[other] = [f"labelled ['{quoted(v)}'], not the action variable '{action_variable}'"
                      for v in chunk.action_variables[other]]
    unknown_label = (reasons == "") & ~np.isin(chunk.actions, list(parts.actions))
    reasons[unknown_label] = [f"with action '{quoted(a)}', not one of {list(parts.actions)}"
                              for a in chunk.actions[unknown_label]]
    unknown = {sensor: ~np.isnan(column) for sensor, column in chunk.readings.items() if sensor not in ranges}
    if unknown:
        flagged = (reasons == "") & np.logical_or.reduce(list(unknown.values()))
        for k in np.flatnonzero(flagged):
            names = sorted(quoted(sensor) for sensor, present in unknown.items() if present[k])
            reasons[k] = f"with sensor{'s' if len(names) > 1 else ''} {names} not in the configuration"
    for sensor, column in sorted(chunk.readings.items()):
        if sensor not in ranges:
            continue
        low, high = ranges[sensor]
        with np.errstate(invalid="ignore"):
            outside = (reasons == "") & ~np.isnan(column) & ((column < low) | (column > high))
        reasons[outside] = f"with a reading of sensor '{sensor}' outside its valid_range [{low:g}, {high:g}]"
    return reasons


__all__ = ["LEARN_CHUNK", "SkippedCases", "TrainingCases", "cases_marker", "new_cases", "seen_until", "stored_cases"]
