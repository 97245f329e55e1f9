"""One trial as the robot reports it: the action done, object features before, effects after.

This is what the node pairs from its three topics. ``to_record`` turns it into the
record the case database stores and ``CaseSet.from_records`` learns from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from ..core import SENSOR_GROUPS


@dataclass(frozen=True)
class Trial:
    """The three parts of one trial.

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

    def __post_init__(self):
        if not isinstance(self.trial_id, str) or not self.trial_id:
            raise ValueError("a trial needs a non-empty trial_id")
        if not isinstance(self.action, str) or not self.action:
            raise ValueError(f"trial '{self.trial_id}': the action label is empty")
        overlap = set(self.object_features) & set(self.effects)
        if overlap:
            raise ValueError(f"trial '{self.trial_id}': sensors {sorted(overlap)} are both object features and effects")
        for name, x in {**self.object_features, **self.effects}.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"trial '{self.trial_id}': sensor names must be non-empty strings")
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ValueError(f"trial '{self.trial_id}': reading of sensor '{name}' is {x!r}, "
                                 "expected a finite number")

    def readings(self, source: str) -> Mapping[str, float]:
        if source == "object":
            return self.object_features
        if source == "effect":
            return self.effects
        raise ValueError(f"unknown source '{source}'; expected one of {list(SENSOR_GROUPS)}")

    def to_record(self, action_variable: str) -> dict:
        """The record the case database stores and the core learns from (``CaseSet.from_records``):
        the action as the label of ``action_variable``, every reading with its source."""
        return {"trial_id": self.trial_id, "labels": {action_variable: self.action},
                "readings": {**self.object_features, **self.effects},
                "sources": {**{s: "object" for s in self.object_features}, **{s: "effect" for s in self.effects}},
                "stamp": self.stamp, "received": self.received}


def stamp_seconds(stamp) -> float:
    """A builtin_interfaces/Time (ROS or rosbags message) in seconds, as the node and offline import compute it."""
    return stamp.sec + stamp.nanosec * 1e-9
