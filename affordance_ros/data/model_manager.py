"""The learner's models: the configuration, the case store, the current model, learning and online updates.

``ModelManager`` is what the learner node owns below ROS: it loads the configuration and the
model file, opens the case database, learns a model from the stored cases (the node runs
``learn`` in a worker thread), installs it, refines it with every newly stored case when
online learning is on, and writes it atomically to the model file.

Which stored cases a model has seen is kept in its metadata ("cases", see ``online_refiner``),
so that a learn with ``prior_strength`` > 0 uses only the cases stored since, and online
updates catch up on the cases stored while a learn ran or after a restart.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..core import STRUCTURES, AffordanceError, AffordanceLearner, AffordanceNetwork, CaseSet, LearnResult
from .online_refiner import OnlineRefiner, cases_marker
from .pairing import PartValidator, SizeLimits
from .storage import CaseStore, CaseStoreError
from .text import quoted

_EXAMPLES = 3  # trial ids named per reason a case was skipped

LEARN_CHUNK = 100_000   # stored cases read at a time when learning (as columns)


class StartupError(RuntimeError):
    """The learner cannot start (bad configuration, unusable database); the message says what to fix."""


@dataclass(frozen=True)
class LearnOutcome:
    """A learned model (written to the model file already), what learning did, and the message for the user."""

    model: AffordanceNetwork
    result: LearnResult
    message: str


@dataclass
class SkippedCases:
    """Stored cases left out of a learn, with why: reason -> how many, and the first few trial ids."""

    reasons: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)

    def add(self, trial_id: str, reason: str) -> None:
        self.reasons[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < _EXAMPLES:
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


@dataclass(frozen=True)
class LearnProgress:
    """Where a learn is: ``phase`` (sensors, structure, parameters), its ``iteration``, the score or
    log-likelihood so far, the number of ``cases`` learned from and the seconds ``elapsed``."""

    phase: str
    iteration: int
    log_likelihood: float
    cases: int
    elapsed: float


@dataclass(frozen=True)
class OnlineUpdate:
    """What one online update did: ``ok`` False with the reason when the model could not use the case."""

    ok: bool
    message: str = ""


class ModelManager:
    """Configuration, case store, current model; ``learn`` in any thread, everything else in one."""

    def __init__(self, config_path: str | Path, database_path: str | Path, model_path: str | Path,
                 online_learning: bool = False, limits: SizeLimits = SizeLimits(),
                 config: AffordanceNetwork | None = None, read_only: bool = False):
        """``config``: the configuration already read from ``config_path`` (the learn worker gets it from the
        node); ``read_only``: open the case store read-only (the learn worker only reads cases)."""
        self.config_path, self.database_path, self.model_path = Path(config_path), Path(database_path), Path(model_path)
        try:
            self.config = config if config is not None else AffordanceNetwork.load(self.config_path,
                                                                                   what="configuration")
            self.parts = PartValidator(self.config, limits)
        except (AffordanceError, ValueError) as exc:
            raise StartupError(f"config_path '{self.config_path}': {exc}") from None
        try:
            self.store = CaseStore(self.database_path, read_only=read_only)
        except CaseStoreError as exc:
            raise StartupError(str(exc)) from None
        self.online_learning = online_learning
        self.model: AffordanceNetwork | None = None
        self.online: OnlineRefiner | None = None

    # ------------------------------------------------------------ the model file
    def load(self) -> str | None:
        """Load the model file if there is one; returns why it is not used, or None."""
        if not self.model_path.exists():
            return None
        try:
            model = AffordanceNetwork.load(self.model_path)
            if not model.parameterised:
                raise AffordanceError("it has no learned parameters")
            mismatch = config_mismatch(model, self.config)
            if mismatch:
                raise AffordanceError(f"it does not fit the configuration: {mismatch}")
        except AffordanceError as exc:
            return (f"not using the model in {self.model_path}: {exc}. Predictions wait for the next ~/learn, "
                    "which replaces that file.")
        self.model = model
        return None

    def current_model(self) -> AffordanceNetwork | None:
        """The model in use, with every online update so far."""
        if self.online is not None:
            self.model = self.online.model
        return self.model

    # -------------------------------------------------------------- learning
    def learn(self, structure: str, prior_strength: float, current: AffordanceNetwork | None,
              progress: Callable[[LearnProgress], None] | None = None) -> LearnOutcome:
        """Learn from the stored cases (with ``prior_strength`` > 0 and a ``current`` model: from the cases
        stored since it, with it as the prior) and write the model file. Safe in a worker thread: it reads
        the store and the configuration only. Raises AffordanceError with the message for the user.

        ``progress`` hears of every step; it may raise ``core.LearningCancelled`` to stop learning, which
        then raises it here with nothing written (the current model stays)."""
        started = time.monotonic()
        if structure not in STRUCTURES:
            raise AffordanceError(f"structure '{structure}' is not one of {list(STRUCTURES)}")
        prior = current if prior_strength > 0 else None
        config = self.config
        if structure == "fixed" and current is not None:
            config = config.with_structure({v.name: v.parents for v in current.variables})
        if prior is None:
            cases, skipped, marker = self.stored_cases(judge=config)
        else:
            # the prior's sensor models (and labels): the new readings mean what its CPTs are about
            config = config.replace_variables({v.name: {"values": v.values, "sensor": v.sensor}
                                               for v in prior.variables if v.sensor is not None})
            cases, skipped, marker = self.new_cases(prior, judge=config)
        if cases.n_cases == 0 and skipped:
            raise AffordanceError(f"no cases to learn from: all {len(skipped)} stored cases were skipped, as they "
                                  f"do not fit the configuration {self.config_path}: {skipped.describe()}")
        def step(phase: str, iteration: int, log_likelihood: float) -> None:
            progress(LearnProgress(phase, iteration, log_likelihood, cases.n_cases, time.monotonic() - started))

        learner = AffordanceLearner(structure=structure, prior_strength=prior_strength).fit(
            config, cases, prior_model=prior, progress=step if progress is not None else None)
        model = learner.model_
        model.metadata["cases"] = marker
        try:
            model.save(self.model_path)
        except OSError as exc:
            raise AffordanceError(
                f"could not write the model to {self.model_path} ({exc}); the previous model stays") from None
        result = learner.result_
        message = (
            f"learned from {result.num_cases} cases"
            + (f" stored since the current model, with it as a prior worth {prior_strength:g} cases"
               if prior is not None else "")
            + f" ({structure}, {len(result.arcs)} arcs, "
            f"{result.iterations} EM iterations{'' if result.converged else ', NOT converged'}) "
            f"in {result.duration:.2f} s; model written to {self.model_path}"
            + (f"; skipped {len(skipped)} stored cases that do not fit the configuration: {skipped.describe()}"
               if skipped else "")
            + ("; no model yet, so no prior (prior_strength applies from the next learn on)"
               if prior_strength > 0 and current is None else ""))
        return LearnOutcome(model, result, message)

    def stored_cases(self, after: int = 0, judge: AffordanceNetwork | None = None
                     ) -> tuple[CaseSet, SkippedCases, dict]:
        """The stored cases (with ids above ``after``) that fit the current configuration (it may have
        changed since they were stored), those that did not and why, and the model metadata naming the
        cases used. Left out: other action variables or labels, sensors not configured, readings outside
        a sensor's valid_range, and evidence of zero likelihood under ``judge``'s fitted sensor models
        (default: the configuration's). The store is read as columns in chunks of ``LEARN_CHUNK`` cases,
        so memory is bounded by what is kept, not by the database."""
        actions = list(self.parts.actions)
        ranges = self.parts.ranges
        skipped = SkippedCases()
        codes, ids, readings = [], [], {}
        last_id, last_trial = after, None
        for chunk in self.store.column_chunks(after, LEARN_CHUNK):
            reasons = self._unfit_columns(chunk)
            keep = np.flatnonzero(reasons == "")
            for k in np.flatnonzero(reasons != ""):
                skipped.add(chunk.trial_ids[k], str(reasons[k]))
            distinct, inverse = np.unique(chunk.actions[keep], return_inverse=True)
            codes.append(np.array([actions.index(a) for a in distinct], dtype=np.int64)[inverse.reshape(-1)])
            ids.extend(chunk.trial_ids[k] for k in keep)
            for sensor in set(ranges) & set(chunk.readings):
                readings.setdefault(sensor, [np.full(m, np.nan) for m in _sizes(codes[:-1])])
            for sensor, parts in readings.items():
                column = chunk.readings.get(sensor)
                parts.append(column[keep] if column is not None else np.full(len(keep), np.nan))
            last_id, last_trial = int(chunk.ids[-1]), chunk.trial_ids[-1]
        labels = {self.parts.action_variable: np.concatenate(codes) if codes else np.zeros(0, np.int64)}
        cases = CaseSet(self.config, labels, {sensor: np.concatenate(parts) for sensor, parts in readings.items()},
                        ids)
        impossible = cases.impossible(judge or self.config)
        if impossible.any():
            for k in np.flatnonzero(impossible):
                skipped.add(str(cases.trial_ids[k]), "whose readings have zero likelihood under the sensor models")
            cases = cases.take(~impossible)
        marker = cases_marker(self.database_path, cases.n_cases, last_id, last_trial)
        return cases, skipped, marker

    def _unfit_columns(self, chunk) -> np.ndarray:
        """Why each stored case of a chunk (``CaseStore.column_chunks``) does not fit the configuration
        ('' where it does), as an array of strings."""
        action_variable, ranges = self.parts.action_variable, self.parts.ranges
        reasons = np.full(len(chunk.ids), "", dtype=object)
        other = chunk.action_variables != action_variable
        reasons[other] = [f"labelled ['{quoted(v)}'], not the action variable '{action_variable}'"
                          for v in chunk.action_variables[other]]
        unknown_label = (reasons == "") & ~np.isin(chunk.actions, list(self.parts.actions))
        reasons[unknown_label] = [f"with action '{quoted(a)}', not one of {list(self.parts.actions)}"
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

    def new_cases(self, prior: AffordanceNetwork, judge: AffordanceNetwork | None = None
                  ) -> tuple[CaseSet, SkippedCases, dict]:
        """``stored_cases`` after those ``prior`` has seen; AffordanceError if there are none or the model
        does not say which it has seen."""
        seen = self.seen_until(prior)
        if seen is None:
            raise AffordanceError(
                "the current model does not record which stored cases it has seen (written by an older "
                "version, or learned from another database): learn once with prior_strength 0")
        cases, skipped, marker = self.stored_cases(after=seen, judge=judge)
        known = prior.metadata["cases"]
        if cases.n_cases == 0:
            raise AffordanceError(
                f"no new cases since the current model was learned (it has seen {known.get('count', 0)} "
                f"stored cases, up to trial '{known.get('last_trial_id')}'"
                + (f"; {len(skipped)} newer ones do not fit the configuration: {skipped.describe()}" if skipped else "")
                + "): record more trials first, or set prior_strength to 0 to learn from all stored cases")
        marker["count"] += int(known.get("count", 0))
        return cases, skipped, marker

    def seen_until(self, model: AffordanceNetwork) -> int | None:
        """The id of the last stored case ``model`` has seen (its metadata "cases"); None if it does not
        say, or names a case this database does not hold (a model from elsewhere)."""
        marker = model.metadata.get("cases") or {}
        if not isinstance(marker, dict):
            return None
        last_id = marker.get("last_id")
        if not isinstance(last_id, int) or isinstance(last_id, bool) or last_id < 0:
            return None
        if last_id and self.store.trial_id_of(last_id) != marker.get("last_trial_id"):
            return None
        return last_id

    # ---------------------------------------------------- installing, online
    def install(self, model: AffordanceNetwork) -> tuple[list[OnlineUpdate], str]:
        """``model`` takes over; with online learning, updates (re)start from it, first with the stored
        cases it has not seen (stored while a learn ran, or after the model file was last written).
        Returns those updates and what to tell the user ('' for nothing)."""
        self.model = model
        self.online = None
        if not self.online_learning:
            return [], ""
        self.online = OnlineRefiner(model)
        seen = self.seen_until(model)
        if seen is None:
            return [], ("online learning starts from the current model; it does not say which stored cases it "
                        "has seen, so none are caught up on")
        updates = [self.update_online(case_id, record) for case_id, record in self.store.numbered_records(after=seen)]
        caught_up = sum(u.ok for u in updates)
        return updates, (f"online learning caught up on {caught_up} stored cases the model had not seen"
                         if caught_up else "")

    def update_online(self, case_id: int, record: dict) -> OnlineUpdate:
        """One newly stored case refines the model (when online learning runs)."""
        try:
            self.online.update(case_id, record)
        except AffordanceError as exc:
            return OnlineUpdate(False, f"online learning skipped trial '{record['trial_id']}': {exc}")
        return OnlineUpdate(True)

    @property
    def unsaved(self) -> bool:
        """Online updates not yet written to the model file."""
        return self.online is not None and self.online.unsaved

    def save_online(self) -> None:
        """Write the online-updated model to the model file (atomically). Raises OSError."""
        if not self.unsaved:
            return
        self.current_model().save(self.model_path)
        self.online.unsaved = False

    # --------------------------------------------------------------- storing
    def store_record(self, record: dict) -> int | None:
        """Commit one case; its case id, or None if its trial_id is stored already. Raises CaseStoreError
        or sqlite3.Error."""
        return self.store.insert(record)

    def close(self) -> None:
        self.store.close()


def _sizes(arrays) -> list:
    return [len(a) for a in arrays]


def config_mismatch(model: AffordanceNetwork, config: AffordanceNetwork) -> str:
    """'' if the model has the configuration's variables, groups, values and sensors, else what differs."""
    if model.names != config.names:
        return f"variables {list(model.names)}, configured {list(config.names)}"
    for m, c in zip(model.variables, config.variables):
        if m.group != c.group or (c.values is not None and m.values != c.values):
            return f"variable '{c.name}' differs (group, values)"
        if (m.sensor and m.sensor.names) != (c.sensor and c.sensor.names):
            return f"the sensor of '{c.name}' differs"
    return ""


__all__ = ["LearnOutcome", "LearnProgress", "ModelManager", "OnlineUpdate", "SkippedCases", "StartupError",
           "config_mismatch"]
