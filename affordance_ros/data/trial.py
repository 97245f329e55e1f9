"""One trial as the robot reports it, and the record the case database stores of it.

``Trial`` is what the node pairs from its three topics: the action done, the object features
before, the effects after. ``TrialRecord`` is a stored case: the trial with the variable its
action label is a value of; ``CaseSet`` (what the core learns from) is made of records by
``case_set``.

A record is checked once, where its data enters: each part by ``PartValidator`` as it arrives
(the node's intake, a bag's import), a record from anywhere else by ``TrialRecord.checked``
(a CSV file). Storage and learning trust a ``TrialRecord``: the case database stores what it is
given and gives back what it stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..core import SENSOR_GROUPS, AffordanceNetwork, CaseSet
from ..core.number_checks import is_finite_number

# The topic of each part of a trial, relative to the namespace (the learner subscribes to these names; a robot
# named in its ``robots`` parameter to these under its name: ``robot/action``).
TOPICS = {"action": "action", "object": "object_features", "effect": "effects"}


def trial_topics(robot_name: str = "") -> dict:
    """kind -> the trial topic of a robot named ``robot_name`` (relative names; '': the shared topics)."""
    return {kind: f"{robot_name}/{topic}" if robot_name else topic for kind, topic in TOPICS.items()}


@dataclass(frozen=True)
class Trial:
    """The three parts of one trial, paired (each part checked by ``PartValidator`` as it arrived).

    ``stamp``: the action's header stamp in seconds (None if unknown);
    ``object_features``/``effects``: sensor name -> reading;
    ``received``: when the trial was completed (seconds of the clock it was assembled on).
    """

    trial_id: str
    action: str
    object_features: Mapping[str, float] = field(default_factory=dict)
    effects: Mapping[str, float] = field(default_factory=dict)
    stamp: float | None = None
    received: float | None = None

    def to_record(self, action_variable: str) -> TrialRecord:
        """The record the case database stores: the action as the label of ``action_variable``."""
        return TrialRecord(self.trial_id, self.action, dict(self.object_features), dict(self.effects), self.stamp,
                           self.received, action_variable=action_variable)


@dataclass(frozen=True)
class TrialRecord(Trial):
    """One stored case: a trial, with the variable its action label is a value of (``action_variable``)."""

    action_variable: str = field(kw_only=True)

    @classmethod
    def checked(cls, trial_id, action_variable, action, object_features: Mapping, effects: Mapping,
                stamp: float | None = None, received: float | None = None) -> TrialRecord:
        """A record of data no ``PartValidator`` has seen; ValueError saying what is wrong with it."""
        if not isinstance(trial_id, str) or not trial_id:
            raise ValueError(f"a trial needs a non-empty string trial_id, got {trial_id!r}")
        for name, value in (("action variable", action_variable), ("action label", action)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"trial '{trial_id}': the {name} must be a non-empty string, got {value!r}")
        overlap = set(object_features) & set(effects)
        if overlap:
            raise ValueError(f"trial '{trial_id}': sensors {sorted(overlap)} are both object features and effects")
        for name, x in {**object_features, **effects}.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"trial '{trial_id}': sensor names must be non-empty strings")
            if not is_finite_number(x):
                raise ValueError(f"trial '{trial_id}': reading of sensor '{name}' is {x!r}, expected a finite number")
        return cls(trial_id, action, {s: float(x) for s, x in object_features.items()},
                   {s: float(x) for s, x in effects.items()}, stamp, received, action_variable=action_variable)

    @property
    def labels(self) -> dict[str, str]:
        """{action variable: action label}."""
        return {self.action_variable: self.action}

    def differing_parts(self, other: Trial) -> tuple[str, ...]:
        """The kinds of part ('action', 'object', 'effect') in which ``other`` holds other data (stamps aside)."""
        return tuple(kind for kind, same in (("action", self.action == other.action),
                                             ("object", dict(self.object_features) == dict(other.object_features)),
                                             ("effect", dict(self.effects) == dict(other.effects))) if not same)

    @property
    def readings(self) -> dict[str, float]:
        """Every reading, object features first."""
        return {**self.object_features, **self.effects}

    @property
    def sources(self) -> dict[str, str]:
        """Sensor name -> 'object' or 'effect'."""
        return {**dict.fromkeys(self.object_features, "object"), **dict.fromkeys(self.effects, "effect")}

    def part(self, kind: str) -> Mapping[str, float]:
        """The readings of the 'object' or the 'effect' part."""
        if kind not in SENSOR_GROUPS:
            raise ValueError(f"unknown part '{kind}'; expected one of {list(SENSOR_GROUPS)}")
        return self.object_features if kind == "object" else self.effects

    def to_dict(self) -> dict:
        """The record as JSON-like data, the form ``CaseSet.from_records`` reads::

            {"trial_id": "t42", "labels": {"Action": "tap"}, "readings": {"color": 5.1, "obj_vel": 9.7},
             "sources": {"color": "object", "obj_vel": "effect"}, "stamp": 1700000000.25, "received": 1700000001.0}
        """
        return {"trial_id": self.trial_id, "labels": self.labels, "readings": self.readings, "sources": self.sources,
                "stamp": self.stamp, "received": self.received}


def case_set(network: AffordanceNetwork, records: Iterable[TrialRecord]) -> CaseSet:
    """The records as the cases the core learns from (labels and readings of ``network``'s variables)."""
    return CaseSet.from_records(network, [record.to_dict() for record in records])


def stamp_seconds(stamp) -> float:
    """A builtin_interfaces/Time (ROS or rosbags message) in seconds, as the node and offline import compute it."""
    return stamp.sec + stamp.nanosec * 1e-9
