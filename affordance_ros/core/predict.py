"""Queries planners ask: posterior marginals and the jointly most probable labels.

Evidence is any mix of labels (hard), raw sensor readings (soft, through the sensor
model) and nothing (marginalised).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .cases import CaseSet
from .errors import EvidenceError
from .evidence import Evidence, evidence_from_log_likelihoods
from .gaussian import log_density
from .network import AffordanceNetwork, out_of_range
from .query import posterior

# actions whose probabilities differ by at most this fraction of the largest are tied (rounding, not the model)
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ReadingPrediction:
    """The predictive distribution of the readings of one variable's sensor, for K cases.

    A mixture over the variable's values: ``weights`` (K, card) are its posterior marginal,
    ``means`` (card, d) and ``covariances`` (card, d, d) its sensor model. ``mean`` and
    ``stddev`` (K, d) summarise it per reading name (the mixture's mean and the square root
    of its variance).
    """

    variable: str
    names: tuple
    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    mean: np.ndarray
    stddev: np.ndarray

    def log_density(self, readings: np.ndarray) -> np.ndarray:
        """Log p(readings) under each case's predictive mixture, (K,); readings (K, d), NaN marginalised."""
        x = np.asarray(readings, dtype=float).reshape(len(self.weights), -1)
        log_comp = log_density(x, self.means, self.covariances)
        with np.errstate(divide="ignore"):
            joint = log_comp + np.log(self.weights)
        top = joint.max(axis=1, keepdims=True)
        return (top + np.log(np.exp(joint - top).sum(axis=1, keepdims=True)))[:, 0]


def predict_readings(model: AffordanceNetwork, marginals: Mapping[str, np.ndarray]) -> dict:
    """{variable: ReadingPrediction} for every variable of ``marginals`` (K, card) that has a sensor."""
    out = {}
    for name, weights in marginals.items():
        sensor = model[name].sensor
        if sensor is None:
            continue
        means, covs = sensor.component_means(), sensor.component_covariances()
        mean = weights @ means                                                   # (K, d)
        second = np.einsum("kj,jd->kd", weights, np.diagonal(covs, axis1=1, axis2=2) + means ** 2)
        stddev = np.sqrt(np.maximum(second - mean ** 2, 0.0))
        out[name] = ReadingPrediction(name, sensor.names, weights, means, covs, mean, stddev)
    return out


@dataclass(frozen=True)
class BatchPrediction:
    """Answers for K evidence cases: marginals[var] (K, card), most_probable (K, q) codes,
    and the joint posterior of the query variables (K, *cards in ``variables`` order);
    ``readings[var]``: the predicted readings of each queried variable that has a sensor.
    """

    variables: list
    marginals: dict
    most_probable: np.ndarray
    joint_probability: np.ndarray
    joint: np.ndarray
    readings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """One answer: {var: {label: p}}, {var: label}, p(most probable assignment | evidence).

    For queried variables with a sensor, ``readings`` {reading name: {"mean", "stddev"}} (what
    the sensor should read) and ``mixtures`` {var: {"names", "weights", "means", "covariances"}}.
    """

    marginals: dict
    most_probable: dict
    joint_probability: float
    readings: dict = field(default_factory=dict)
    mixtures: dict = field(default_factory=dict)

    def to_dict(self, readings: bool = True) -> dict:
        """JSON-ready; ``readings`` False leaves the predicted readings out."""
        out = {"marginals": self.marginals, "most_probable": self.most_probable,
               "joint_probability": self.joint_probability}
        if readings and self.readings:
            out["readings"] = self.readings
            out["mixtures"] = self.mixtures
        return out


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
        evidence = Evidence.empty(len(model))
    query_idx = [model.index(n) for n in names]
    joint = _posterior(model, query_idx, evidence)
    flat = joint.reshape(joint.shape[0], -1)
    best = flat.argmax(axis=1)
    most_probable = np.stack(np.unravel_index(best, joint.shape[1:]), axis=1)
    marginals = {}
    for j, name in enumerate(names):
        axes = tuple(1 + a for a in range(len(names)) if a != j)
        marginals[name] = joint.sum(axis=axes) if axes else joint
    return BatchPrediction(names, marginals, most_probable, flat[np.arange(flat.shape[0]), best], joint,
                           predict_readings(model, marginals))


def predict(model: AffordanceNetwork, query: Sequence[str], sensors: Mapping[str, float] | None = None,
            values: Mapping[str, str] | None = None) -> Prediction:
    """The posterior of one query.

    E.g. ``predict(model, ["action"], sensors={"obj_vel": 7.2}, values={"Shape": "box"})``.
    """
    _check_readings(model, sensors or {})
    batch = _predict_one(model, query, sensors or {}, values or {})
    marginals = {name: dict(zip(model[name].values, map(float, batch.marginals[name][0])))
                 for name in batch.variables}
    best = {name: model[name].values[int(code)] for name, code in zip(batch.variables, batch.most_probable[0])}
    readings, mixtures = {}, {}
    for name, r in batch.readings.items():
        for j, reading in enumerate(r.names):
            readings[reading] = {"mean": float(r.mean[0, j]), "stddev": float(r.stddev[0, j])}
        mixtures[name] = {"names": list(r.names), "weights": r.weights[0].tolist(), "means": r.means.tolist(),
                          "covariances": r.covariances.tolist()}
    return Prediction(marginals, best, float(batch.joint_probability[0]), readings, mixtures)


def _check_readings(model: AffordanceNetwork, sensors: Mapping[str, float]) -> None:
    """EvidenceError for a reading that is not a finite number or lies outside its sensor's valid_range."""
    for sensor, x in sensors.items():
        if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
            raise EvidenceError(f"reading of sensor '{sensor}' must be a finite number, got {x!r}")
        bounds = model.sensor(sensor)[1].bounds
        if not bounds[0] <= x <= bounds[1]:
            raise EvidenceError(out_of_range(sensor, x, bounds))


def _posterior(model: AffordanceNetwork, query: list, evidence: Evidence) -> np.ndarray:
    """p(query | evidence) (K, *cards) by the cached plan of this evidence pattern (core.query)."""
    model.engine  # noqa: B018  (raises ModelFormatError when the model has no parameters)
    likelihoods = {i: lik for i, lik in enumerate(evidence.likelihoods) if lik is not None}
    hard = [i for i, lik in likelihoods.items() if np.all(np.count_nonzero(lik, axis=1) == 1)]
    return posterior(model, query, likelihoods, hard)


def _predict_one(model: AffordanceNetwork, query: Sequence[str], sensors: Mapping[str, float],
                 values: Mapping[str, str]) -> BatchPrediction:
    """``predict_batch`` for one case, its evidence built without a CaseSet (the per-call cost of a planner)."""
    names = model.resolve_query(query)
    log_lik, vectors = {}, {}
    for sensor, x in sensors.items():
        var, sensor_model = model.sensor(sensor)
        if sensor_model.vector:  # the readings of one vector sensor go in together, the missing ones NaN
            vector = vectors.setdefault(var.name, np.full((1, sensor_model.dim), np.nan))
            vector[0, sensor_model.names.index(sensor)] = x
            continue
        i = model.index(var.name)
        log_lik[i] = log_lik.get(i, 0.0) + sensor_model.log_likelihood(np.array([x], dtype=float))
    for name, vector in vectors.items():
        i = model.index(name)
        log_lik[i] = log_lik.get(i, 0.0) + model[name].sensor.log_likelihood(vector)
    for name, label in values.items():
        var = model[name]
        i = model.index(var.name)
        hard = np.full((1, var.card), -np.inf)
        hard[0, var.code(str(label))] = 0.0
        log_lik[i] = log_lik.get(i, 0.0) + hard
    evidence = evidence_from_log_likelihoods([log_lik.get(i) for i in range(len(model))], 1)
    joint = _posterior(model, [model.index(n) for n in names], evidence)
    flat = joint.reshape(1, -1)
    best = int(flat[0].argmax())
    most_probable = np.array([np.unravel_index(best, joint.shape[1:])])
    marginals = {}
    for j, name in enumerate(names):
        axes = tuple(1 + a for a in range(len(names)) if a != j)
        marginals[name] = joint.sum(axis=axes) if axes else joint
    return BatchPrediction(names, marginals, most_probable, flat[:, best], joint, predict_readings(model, marginals))


@dataclass(frozen=True)
class ActionRanking:
    """Actions ordered by p(desired effects | action, evidence), most likely first; ``tied``: every action has
    the same probability (within ``TIE_TOLERANCE`` of the largest), so the model cannot tell them apart.
    """

    action_variable: str
    actions: list
    probabilities: list
    tied: bool = False


def rank_actions(model: AffordanceNetwork, effects: Mapping[str, str], sensors: Mapping[str, float] | None = None,
                 values: Mapping[str, str] | None = None, action: str | None = None) -> ActionRanking:
    """Rank every action by the probability that it produces the desired effect labels.

    ``effects`` maps effect variables to wanted labels; ``sensors``/``values`` describe the
    object (any evidence except the action itself). One batched pass over all actions.
    """
    if not effects:
        raise EvidenceError("name at least one desired effect (variable=label)")
    actions = model.group("action") if action is None else [model[action].name]
    if len(actions) != 1:
        raise EvidenceError(f"the model has action variables {actions}: say which one to rank")
    var = model[actions[0]]
    if var.name in (values or {}) or var.name in effects:
        raise EvidenceError(f"'{var.name}' is what is being chosen: do not give it as evidence or effect")
    wanted = {model[name].name: model[name].code(label) for name, label in effects.items()}
    k = var.card
    batch_values = {name: [label] * k for name, label in (values or {}).items()}
    batch_values[var.name] = list(var.values)
    batch_sensors = {name: [x] * k for name, x in (sensors or {}).items()}
    _check_readings(model, sensors or {})
    batch = predict_batch(model, list(wanted), batch_sensors, batch_values)
    probability = batch.joint[(slice(None), *[wanted[n] for n in batch.variables])]
    ranked = np.argsort(-probability, kind="stable")
    return ActionRanking(var.name, [var.values[j] for j in ranked], [float(probability[j]) for j in ranked],
                         bool(np.ptp(probability) <= TIE_TOLERANCE * probability.max()))
