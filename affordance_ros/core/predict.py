"""Queries planners ask: posterior marginals and the jointly most probable labels.

Evidence is any mix of labels (hard), raw sensor readings (soft, through the sensor
model) and nothing (marginalised).
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .cases import CaseSet
from .errors import EvidenceError
from .gaussian import log_density, log_sum_exp_rows
from .network import AffordanceNetwork, SensorModel, out_of_range, unknown_sensor
from .number_checks import is_finite_number
from .query import posterior, posterior_in_chunks

# actions whose probabilities differ by at most this fraction of the largest are tied (rounding, not the model)
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ReadingPrediction:
    """The predictive distribution of the readings of one variable's sensor, for K cases.

    A mixture over the variable's values: ``weights`` (K, card) are its posterior marginal,
    ``means`` (card, d) and ``covariances`` (card, d, d) its sensor model. ``mean`` (K, d) is
    the reading to expect, per reading name: the mixture's mean, or for a sensor fitted by
    conditions (``cluster_by``) the posterior mean of the case's condition centre
    (``expected_readings``); ``stddev`` (K, d) the root mean square deviation of the mixture
    about it (the square root of the mixture's variance where ``mean`` is the mixture's mean).
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
        with np.errstate(divide="ignore"):  # (a weight of 0 is a component of log-weight -inf)
            log_joint = log_density(x, self.means, self.covariances) + np.log(self.weights)
        return log_sum_exp_rows(log_joint)[:, 0]


def predict_readings(model: AffordanceNetwork, marginals: Mapping[str, np.ndarray]) -> dict:
    """{variable: ReadingPrediction} for every variable of ``marginals`` (K, card) that has a sensor."""
    out = {}
    for name, weights in marginals.items():
        sensor = model[name].sensor
        if sensor is None:
            continue
        means, covs, moments = _mixture(sensor)
        both = weights @ moments
        d = means.shape[1]
        mixture_mean, second = both[:, :d], both[:, d:]                          # (K, d) each
        mean = expected_readings(sensor, weights, means, mixture_mean)
        stddev = np.sqrt(np.maximum(second - 2.0 * mean * mixture_mean + mean * mean, 0.0))
        out[name] = ReadingPrediction(name, sensor.names, weights, means, covs, mean, stddev)
    return out


def expected_readings(sensor: SensorModel, weights: np.ndarray, means: np.ndarray,
                      mixture_mean: np.ndarray) -> np.ndarray:
    """The readings to expect (K, d) under the posterior ``weights`` (K, card) of a variable's values.

    For a sensor fitted by conditions (``cluster_by``: its first half of values the conditions' core Gaussians,
    the second half their wide ones, about the same centres) the posterior mean of the case's condition centre,
    read from the core values alone: the centres are what the fit chose to predict held-out readings (in squared
    error, ``core/conditions.py``), and the mass a CPT row gives to *other* conditions' wide values is the
    background for outliers, whose place the model does not know, so it does not pull the reading to expect
    towards those conditions (it did by 0.1-0.9 % of the RMSE on the scenarios of docs/benchmarks.md §7). Cases
    with no mass on any core, and every other sensor: the mixture's mean ``mixture_mean``.
    """
    card = means.shape[0]
    if not sensor.cluster_by or card % 2:
        return mixture_mean
    cores = weights[:, :card // 2]
    on_cores = cores.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = (cores @ means[:card // 2]) / on_cores
    return np.where(on_cores > 1e-12, centre, mixture_mean)


_MIXTURES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
EVIDENCE_CASES = 8192    # predict_batch makes the likelihoods of this many cases at a time (bounded memory)


def _mixture(sensor: SensorModel) -> tuple:
    """A sensor model's component means (card, d), covariances (card, d, d), and its means next to the second
    moments of each reading (card, 2d), computed once per sensor model (they are immutable).
    """
    found = _MIXTURES.get(sensor)
    if found is None:
        means, covs = sensor.component_means(), sensor.component_covariances()
        found = _MIXTURES[sensor] = (means, covs, np.hstack([means, np.diagonal(covs, axis1=1, axis2=2) + means ** 2]))
    return found


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
    """Posterior of the query (names or groups) for K cases of evidence given column-wise.

    A reading or label that is None is not observed in that case: each case has its own evidence pattern.
    """
    check_model(model)
    names = model.resolve_query(query)
    _check_names(model, sensors or {}, values or {})
    # (CaseSet.from_columns takes None as not observed and refuses NaN, infinities and unknown labels)
    columns = {name: np.atleast_1d(column) for name, column in {**(sensors or {}), **(values or {})}.items()}
    query_idx = [model.index(n) for n in names]
    if not columns:
        return _answer(model, names, posterior(model, query_idx, {}))
    try:
        cases = CaseSet.from_columns(model, columns)
    except ValueError as exc:
        raise EvidenceError(str(exc)) from None
    if cases.n_cases == 0:  # no cases, no rows (as numpy answers an empty array)
        return _answer(model, names, np.empty((0, *[model.variables[i].card for i in query_idx])))
    return _answer(model, names, posterior_in_chunks(model, query_idx, cases.n_cases, _evidence_chunks(model, cases)))


def check_model(model) -> None:
    """TypeError unless ``model`` is an AffordanceNetwork (a path or a dict of one says how to get it)."""
    if not isinstance(model, AffordanceNetwork):
        raise TypeError(f"the model is a {type(model).__name__}, expected an AffordanceNetwork: "
                        "AffordanceNetwork.load(path), or a learner's model_")


def _evidence_chunks(model: AffordanceNetwork, cases: CaseSet):
    """(rows, likelihoods, the variables one-hot in every case) of ``EVIDENCE_CASES`` cases at a time."""
    for start in range(0, cases.n_cases, EVIDENCE_CASES):
        rows = slice(start, min(start + EVIDENCE_CASES, cases.n_cases))
        try:
            evidence = cases.take(rows).evidence(model)
        except ValueError as exc:
            raise EvidenceError(str(exc)) from None
        likelihoods = {i: lik for i, lik in enumerate(evidence.likelihoods) if lik is not None}
        yield rows, likelihoods, [i for i, lik in likelihoods.items() if np.all(np.count_nonzero(lik, axis=1) == 1)]


def predict(model: AffordanceNetwork, query: Sequence[str], sensors: Mapping[str, float] | None = None,
            values: Mapping[str, str] | None = None) -> Prediction:
    """The posterior of one query.

    E.g. ``predict(model, ["action"], sensors={"obj_vel": 7.2}, values={"Shape": "box"})``.
    """
    check_model(model)
    names = model.resolve_query(query)
    likelihoods, hard = _one_case(model, sensors or {}, values or {})
    batch = _answer(model, names, posterior(model, [model.index(n) for n in names], likelihoods, hard))
    marginals = {name: dict(zip(model[name].values, batch.marginals[name][0].tolist())) for name in names}
    best = {name: model[name].values[code] for name, code in zip(names, batch.most_probable[0].tolist())}
    readings, mixtures = {}, {}
    for name, r in batch.readings.items():
        for reading, mean, stddev in zip(r.names, r.mean[0].tolist(), r.stddev[0].tolist()):
            readings[reading] = {"mean": mean, "stddev": stddev}
        mixtures[name] = {"names": list(r.names), "weights": r.weights[0].tolist(), "means": r.means.tolist(),
                          "covariances": r.covariances.tolist()}
    return Prediction(marginals, best, float(batch.joint_probability[0]), readings, mixtures)


def _check_names(model: AffordanceNetwork, sensors: Mapping, values: Mapping) -> None:
    """EvidenceError naming the first reading or variable that ``model`` does not have."""
    for sensor in sensors:
        if sensor not in model.sensor_variable:
            raise unknown_sensor(model, sensor)
    for name in values:
        model.index(name)


def _check_reading(model: AffordanceNetwork, sensor: str, x) -> None:
    """EvidenceError for a reading that is not a finite number or lies outside its sensor's valid_range."""
    if not is_finite_number(x):
        raise EvidenceError(f"reading of sensor '{sensor}' must be a finite number, got {x!r}")
    bounds = model.sensor(sensor)[1].bounds
    if not bounds[0] <= x <= bounds[1]:
        raise EvidenceError(out_of_range(sensor, x, bounds))


def _one_case(model: AffordanceNetwork, sensors: Mapping[str, float], values: Mapping[str, str]) -> tuple:
    """The likelihoods {variable index: (1, card), maximum 1} of one case and the variables given by label,
    built without a CaseSet (the per-call cost of a planner).
    """
    _check_names(model, sensors, values)
    log_lik, vectors = {}, {}
    for sensor, x in sensors.items():
        _check_reading(model, sensor, x)
        i = model.index(model.sensor_variable[sensor])
        sensor_model = model.variables[i].sensor
        if sensor_model.vector:  # the readings of one vector sensor go in together, the missing ones NaN
            vectors.setdefault(i, np.full((1, sensor_model.dim), np.nan))[0, sensor_model.names.index(sensor)] = x
        else:
            log_lik[i] = sensor_model.log_likelihood(np.array([x], dtype=float))
    for i, vector in vectors.items():
        log_lik[i] = model.variables[i].sensor.log_likelihood(vector)
    likelihoods, labelled = {}, []
    for name, label in values.items():
        i = model.index(name)
        var = model.variables[i]
        code = var.code(str(label))
        if i in log_lik and not math.isfinite(log_lik.pop(i)[0, code]):
            raise EvidenceError(_impossible(name))
        likelihoods[i] = _identity(var.card)[code:code + 1]
        labelled.append(i)
    for i, ll in log_lik.items():
        top = np.maximum.reduce(ll, axis=None)
        if not math.isfinite(top):
            raise EvidenceError(_impossible(model.names[i]))
        likelihoods[i] = np.exp(ll - top)
    return likelihoods, labelled


@functools.lru_cache(maxsize=None)
def _identity(card: int) -> np.ndarray:
    """The identity matrix of size ``card``, read-only: its rows are the likelihoods of labels."""
    identity = np.eye(card)
    identity.setflags(write=False)
    return identity


def _impossible(name: str) -> str:
    return f"the evidence has zero likelihood for every value of '{name}' (a reading far outside its sensor model?)"


def _answer(model: AffordanceNetwork, names: list, joint: np.ndarray) -> BatchPrediction:
    """The ``BatchPrediction`` of the joint posterior (K, *cards) of the variables ``names``."""
    flat = joint.reshape(joint.shape[0], math.prod(joint.shape[1:]))  # (no -1: a batch may have no cases)
    best = flat.argmax(axis=1)
    if len(names) == 1:
        most_probable, marginals = best[:, None], {names[0]: joint}
    else:
        most_probable = np.stack(np.unravel_index(best, joint.shape[1:]), axis=1)
        marginals = {name: joint.sum(axis=tuple(1 + a for a in range(len(names)) if a != j))
                     for j, name in enumerate(names)}
    return BatchPrediction(names, marginals, most_probable, np.maximum.reduce(flat, axis=1), joint,
                           predict_readings(model, marginals))


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
    check_model(model)
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
    _check_names(model, sensors or {}, {})
    for sensor, x in (sensors or {}).items():
        _check_reading(model, sensor, x)
    batch = predict_batch(model, list(wanted), batch_sensors, batch_values)
    probability = batch.joint[(slice(None), *[wanted[n] for n in batch.variables])]
    ranked = np.argsort(-probability, kind="stable")
    return ActionRanking(var.name, [var.values[j] for j in ranked], [float(probability[j]) for j in ranked],
                         bool(np.ptp(probability) <= TIE_TOLERANCE * probability.max()))
