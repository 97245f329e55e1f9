"""Queries planners ask: posterior marginals and the jointly most probable labels.

Evidence is any mix of labels (hard), raw sensor readings (soft, through the sensor
model) and nothing (marginalised).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .cases import CaseSet, Evidence
from .errors import EvidenceError
from .network import AffordanceNetwork


@dataclass(frozen=True)
class BatchPrediction:
    """Answers for K evidence cases: marginals[var] (K, card), most_probable (K, q) codes."""

    variables: list
    marginals: dict
    most_probable: np.ndarray
    joint_probability: np.ndarray


@dataclass(frozen=True)
class Prediction:
    """One answer: {var: {label: p}}, {var: label}, p(most probable assignment | evidence)."""

    marginals: dict
    most_probable: dict
    joint_probability: float

    def to_dict(self) -> dict:
        return {"marginals": self.marginals, "most_probable": self.most_probable,
                "joint_probability": self.joint_probability}


def predict_batch(model: AffordanceNetwork, query: Sequence[str],
                  sensors: Mapping[str, Sequence[float]] | None = None,
                  values: Mapping[str, Sequence[str]] | None = None) -> BatchPrediction:
    """Posterior of the query (names or groups) for K cases of evidence given column-wise."""
    names = model.resolve_query(query)
    columns = {}
    for sensor, readings in (sensors or {}).items():
        model.sensor(sensor)
        arr = np.asarray(readings, dtype=float).reshape(-1)
        if not np.all(np.isfinite(arr)):
            raise EvidenceError(f"reading of sensor '{sensor}' is not a finite number")
        columns[sensor] = arr
    for name, labels in (values or {}).items():
        model[name]
        columns[name] = [str(x) for x in np.atleast_1d(np.asarray(labels, dtype=object))]
    if columns:
        try:
            evidence = CaseSet.from_columns(model, columns).evidence(model)
        except ValueError as exc:
            raise EvidenceError(str(exc)) from None
    else:
        evidence = Evidence((None,) * len(model), np.zeros(1))
    engine = model.engine
    calibration = engine.calibrate([v.cpt for v in model.variables], evidence)
    query_idx = [model.index(n) for n in names]
    joint = engine.joint(calibration, query_idx)
    flat = joint.reshape(joint.shape[0], -1)
    best = flat.argmax(axis=1)
    most_probable = np.stack(np.unravel_index(best, joint.shape[1:]), axis=1)
    marginals = {}
    for j, name in enumerate(names):
        axes = tuple(1 + a for a in range(len(names)) if a != j)
        marginals[name] = joint.sum(axis=axes) if axes else joint
    return BatchPrediction(names, marginals, most_probable, flat[np.arange(flat.shape[0]), best])


def predict(model: AffordanceNetwork, query: Sequence[str], sensors: Mapping[str, float] | None = None,
            values: Mapping[str, str] | None = None) -> Prediction:
    """One query: e.g. predict(model, ["action"], sensors={"obj_vel": 7.2}, values={"Shape": "box"})."""
    for sensor, x in (sensors or {}).items():
        if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
            raise EvidenceError(f"reading of sensor '{sensor}' must be a finite number, got {x!r}")
    batch = predict_batch(model, query, {s: [x] for s, x in (sensors or {}).items()},
                          {n: [label] for n, label in (values or {}).items()})
    marginals = {name: dict(zip(model[name].values, map(float, batch.marginals[name][0])))
                 for name in batch.variables}
    best = {name: model[name].values[int(code)] for name, code in zip(batch.variables, batch.most_probable[0])}
    return Prediction(marginals, best, float(batch.joint_probability[0]))
