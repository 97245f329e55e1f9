"""Queries planners ask: posterior marginals and the jointly most probable labels, and how sure the model is.

Evidence is any mix of labels (hard), raw sensor readings (soft, through the sensor
model) and nothing (marginalised).

Beside each probability, an answer says how sure the model is of it: its standard deviation and 90 % credible
interval under the posterior of the CPTs given the cases the model learned from, and the trials behind it
(``support``). They come from the posterior draws a learn keeps with the model (``core.posterior_sampling``), the
query answered under each draw's CPTs at once (``core.posterior_answers``), never sampled per query; a model averaged
over a sample of structures answers with every structure's draws pooled. A model without draws answers NaN for them.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .cases import CaseSet
from .errors import EvidenceError, did_you_mean
from .gaussian import LOG_2PI, log_density, log_sum_exp_rows
from .network import AffordanceNetwork, SensorModel, out_of_range, unknown_sensor
from .number_checks import is_finite_number
from .posterior_answers import (
    ENSEMBLE,
    averaged,
    averaged_draws,
    averaged_posterior,
    draw_imputations,
    has_draws,
    missing_posterior,
    spread,
    support,
)
from .query import posterior_in_chunks

# actions whose scores differ by at most this fraction of the largest are tied (rounding, not the model)
TIE_TOLERANCE = 1e-9
# a score from the posterior draws is tied with the best when within this many standard errors of it
TIE_NOISE = 3.0
TIE_BATCHES = 10      # runs of consecutive imputations whose scores give that standard error (batch means)
# how rank_actions chooses: by the probability (expected), its Gittins index (optimistic), its credible interval's
# lower bound (cautious), or the probability under one posterior draw of the CPTs (thompson)
STRATEGIES = ("expected", "optimistic", "thompson", "cautious")
# optimistic's Gittins index counts what a trial teaches for this many trials to come (discount 1 - 1/horizon)
OPTIMISTIC_HORIZON = 200
SPREAD_ENTRIES = 1 << 18    # entries (cases x query states x draws) of one part of a batch's posterior draws


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
    towards those conditions (that cost RMSE on the scenarios: docs/benchmarks/design-choices.md). Cases
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

    How sure the model is of each marginal (NaN when the model has no posterior draws, or when not asked):
    ``stddevs[var]`` (K, card) the posterior standard deviation of each probability, ``intervals[var]``
    (K, card, 2) its 90 % credible interval (low, high), ``support[var]`` (K,) the trials behind the variable's
    answer (``Prediction``).
    """

    variables: list
    marginals: dict
    most_probable: np.ndarray
    joint_probability: np.ndarray
    joint: np.ndarray
    readings: dict = field(default_factory=dict)
    stddevs: dict = field(default_factory=dict)
    intervals: dict = field(default_factory=dict)
    support: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """One answer: {var: {label: p}}, {var: label}, p(most probable assignment | evidence).

    For queried variables with a sensor, ``readings`` {reading name: {"mean", "stddev"}} (what
    the sensor should read) and ``mixtures`` {var: {"names", "weights", "means", "covariances"}}.

    How sure the model is, under the posterior of its CPTs given the cases it learned from (NaN throughout when
    the model has no posterior draws: ``core.posterior_sampling``): ``stddevs`` {var: {label: the standard deviation of
    p}}, ``intervals`` {var: {label: (low, high)}}, the equal-tailed 90 % credible interval of p, and ``support``
    {var: n}, the trials behind the variable's answer: the n for which a Dirichlet of precision n with the
    answer's posterior means (what n trials seen outright give) has the same total variance,
    n = sum_k m_k (1 - m_k) / sum_k sd_k^2 - 1; infinite when the answer is certain (e.g. the variable was given).
    Readings seen through noisy sensors count for less than labels: at sigma 3 a few hundred trials are worth
    far fewer seen ones.
    """

    marginals: dict
    most_probable: dict
    joint_probability: float
    readings: dict = field(default_factory=dict)
    mixtures: dict = field(default_factory=dict)
    stddevs: dict = field(default_factory=dict)
    intervals: dict = field(default_factory=dict)
    support: dict = field(default_factory=dict)

    def to_dict(self, readings: bool = True) -> dict:
        """JSON-ready (NaN and infinity as None); ``readings`` False leaves the predicted readings out."""
        out = {"marginals": self.marginals, "most_probable": self.most_probable,
               "joint_probability": self.joint_probability,
               "stddevs": {n: {k: json_number(x) for k, x in d.items()} for n, d in self.stddevs.items()},
               "intervals": {n: {k: [json_number(lo), json_number(hi)] for k, (lo, hi) in d.items()}
                             for n, d in self.intervals.items()},
               "support": {n: json_number(x) for n, x in self.support.items()}}
        if readings and self.readings:
            out["readings"] = self.readings
            out["mixtures"] = self.mixtures
        return out


def _number(x: float) -> float:
    """``x``, or ``math.nan`` itself for a NaN: answers that do not know compare equal (containers compare their
    items by identity first, and a NaN is not equal to itself).
    """
    return math.nan if math.isnan(x) else x


def json_number(x: float) -> float | None:
    """``x``, or None when it is NaN or infinite (JSON has neither)."""
    return x if math.isfinite(x) else None


def predict_batch(model: AffordanceNetwork, query: Sequence[str],
                  sensors: Mapping[str, Sequence[float]] | None = None,
                  values: Mapping[str, Sequence[str]] | None = None, uncertainty: bool = True) -> BatchPrediction:
    """Posterior of the query (names or groups) for K cases of evidence given column-wise.

    A reading or label that is None is not observed in that case: each case has its own evidence pattern.
    ``uncertainty`` False leaves the standard deviations, intervals and support NaN (the answers under every
    posterior draw cost a few times the answer itself; ``core.posterior_sampling``).
    """
    check_model(model)
    names = model.resolve_query(query)
    _check_names(model, sensors or {}, values or {})
    # (CaseSet.from_columns takes None as not observed and refuses NaN, infinities and unknown labels)
    columns = {name: np.atleast_1d(column) for name, column in {**(sensors or {}), **(values or {})}.items()}
    query_idx = [model.index(n) for n in names]
    if not columns:
        spreads = posterior_spreads(model, names, 1, [(slice(0, 1), {}, [])], uncertainty)
        return _answer(model, names, averaged_posterior(model, query_idx, {}), spreads)
    try:
        cases = CaseSet.from_columns(model, columns)
    except ValueError as exc:
        raise EvidenceError(str(exc)) from None
    if cases.n_cases == 0:  # no cases, no rows (as numpy answers an empty array)
        return _answer(model, names, np.empty((0, *[model.variables[i].card for i in query_idx])),
                       posterior_spreads(model, names, 0, [], False))
    joint = _posterior_in_chunks(model, query_idx, cases.n_cases, _evidence_chunks(model, cases))
    spreads = posterior_spreads(model, names, cases.n_cases, _evidence_chunks(model, cases), uncertainty)
    return _answer(model, names, joint, spreads)


def _posterior_in_chunks(model: AffordanceNetwork, query: list, n_cases: int, chunks) -> np.ndarray:
    """``query.posterior_in_chunks``, averaged over the model's structures when it has several."""
    if not averaged(model):
        return posterior_in_chunks(model, query, n_cases, chunks)
    out = np.empty((n_cases, *[model.variables[q].card for q in query]))
    for rows, likelihoods, hard in chunks:
        out[rows] = averaged_posterior(model, query, likelihoods, hard)
    return out


def posterior_spreads(model: AffordanceNetwork, names: list, n_cases: int, chunks, uncertainty: bool = True) -> tuple:
    """({var: stddevs (K, card)}, {var: intervals (K, card, 2)}, {var: support (K,)}) of the marginals of ``names``
    for ``n_cases`` cases whose evidence comes in ``chunks`` (as ``posterior_in_chunks`` takes them): from the
    answers under every posterior draw, a part of the cases at a time; NaN without draws or ``uncertainty``.
    """
    cards = [model[name].card for name in names]
    stddevs = {name: np.full((n_cases, card), np.nan) for name, card in zip(names, cards)}
    intervals = {name: np.full((n_cases, card, 2), np.nan) for name, card in zip(names, cards)}
    supports = {name: np.full(n_cases, np.nan) for name in names}
    if not uncertainty or not has_draws(model):
        return stddevs, intervals, supports
    query = [model.index(name) for name in names]
    step = max(1, SPREAD_ENTRIES // (math.prod(cards) * max(ENSEMBLE, _imputations(model))))
    for rows, likelihoods, hard in chunks:
        for start in range(0, rows.stop - rows.start, step):
            part = slice(start, min(start + step, rows.stop - rows.start))
            answers = averaged_draws(model, query, {v: lik[part] for v, lik in likelihoods.items()},
                                     [v for v in hard if v in likelihoods])          # (k, *cards, S)
            at = slice(rows.start + part.start, rows.start + part.stop)
            for j, name in enumerate(names):
                others = tuple(1 + a for a in range(len(names)) if a != j)
                mean, stddev, interval = spread(answers.sum(axis=others) if others else answers)
                stddevs[name][at], intervals[name][at], supports[name][at] = stddev, interval, support(mean, stddev)
    return stddevs, intervals, supports


def _imputations(model: AffordanceNetwork) -> int:
    """How many imputations the model's posterior draws hold, over all its structures."""
    return sum(m.network.variables[0].draws.shape[0] for m in model.members)


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
            values: Mapping[str, str] | None = None, uncertainty: bool = True) -> Prediction:
    """The posterior of one query, and how sure the model is of it (``Prediction``; ``uncertainty`` False: NaN).

    E.g. ``predict(model, ["action"], sensors={"obj_vel": 7.2}, values={"Shape": "box"})``.
    """
    check_model(model)
    names = model.resolve_query(query)
    likelihoods, hard = _one_case(model, sensors or {}, values or {})
    query_idx = [model.index(n) for n in names]
    labels = [model.variables[i].values for i in query_idx]
    if uncertainty and has_draws(model):
        stddevs, intervals, supports = _one_case_spreads(model, names, labels, likelihoods, hard)
    else:   # nothing to compute: NaN throughout
        stddevs = {name: dict.fromkeys(values, math.nan) for name, values in zip(names, labels)}
        intervals = {name: dict.fromkeys(values, _UNKNOWN_INTERVAL) for name, values in zip(names, labels)}
        supports = dict.fromkeys(names, math.nan)
    joint = averaged_posterior(model, query_idx, likelihoods, hard)                # (1, *cards)
    flat = joint.reshape(-1)
    code = int(flat.argmax())
    per_name = _marginals(names, joint)
    codes = (code,) if len(names) == 1 else np.unravel_index(code, joint.shape[1:])
    marginals = {name: dict(zip(values, per_name[name][0].tolist())) for name, values in zip(names, labels)}
    best = {name: values[int(c)] for name, values, c in zip(names, labels, codes)}
    readings, mixtures = {}, {}
    for name, r in predict_readings(model, per_name).items():
        for reading, mean, stddev in zip(r.names, r.mean[0].tolist(), r.stddev[0].tolist()):
            readings[reading] = {"mean": mean, "stddev": stddev}
        mixtures[name] = {"names": list(r.names), "weights": r.weights[0].tolist(), "means": r.means.tolist(),
                          "covariances": r.covariances.tolist()}
    return Prediction(marginals, best, float(flat[code]), readings, mixtures, stddevs, intervals, supports)


_UNKNOWN_INTERVAL = (math.nan, math.nan)


def _one_case_spreads(model: AffordanceNetwork, names: list, labels: list, likelihoods: dict, hard: list) -> tuple:
    """``Prediction``'s stddevs, intervals and support of one case, from the model's posterior draws."""
    stddevs, intervals, supports = posterior_spreads(model, names, 1, [(slice(0, 1), likelihoods, hard)])
    named = list(zip(names, labels))
    return ({name: dict(zip(values, map(_number, stddevs[name][0].tolist()))) for name, values in named},
            {name: {label: (_number(low), _number(high))
                    for label, (low, high) in zip(values, intervals[name][0].tolist())} for name, values in named},
            {name: _number(float(supports[name][0])) for name in names})


def _check_names(model: AffordanceNetwork, sensors: Mapping, values: Mapping) -> None:
    """EvidenceError naming the first reading or variable that ``model`` does not have."""
    for sensor in sensors:
        if sensor not in model.sensor_variable:
            raise unknown_sensor(model, sensor)
    for name in values:
        model.index(name)


def _check_reading(sensor: str, x, bounds: tuple[float, float]) -> None:
    """EvidenceError for a reading that is not a finite number or lies outside its sensor's valid_range ``bounds``."""
    if not is_finite_number(x):
        raise EvidenceError(f"reading of sensor '{sensor}' must be a finite number, got {x!r}")
    if not bounds[0] <= x <= bounds[1]:
        raise EvidenceError(out_of_range(sensor, x, bounds))


def _one_case(model: AffordanceNetwork, sensors: Mapping[str, float], values: Mapping[str, str]) -> tuple:
    """The likelihoods {variable index: (1, card), maximum 1} of one case and the variables given by label,
    built without a CaseSet (the per-call cost of a planner).
    """
    _check_names(model, sensors, values)
    readers = _readers(model)
    log_lik, vectors = {}, {}
    for sensor, x in sensors.items():
        i, sensor_model, column, bounds, gaussian = readers[sensor]
        _check_reading(sensor, x, bounds)
        if gaussian is None:  # a vector sensor's readings go in together, the missing ones NaN (or: not fitted)
            vectors.setdefault(i, np.full((1, sensor_model.dim), np.nan))[0, column] = x
        else:
            log_lik[i] = _reading_log_likelihood(float(x), *gaussian)
    for i, vector in vectors.items():
        log_lik[i] = model.variables[i].sensor.log_likelihood(vector)[0].tolist()
    likelihoods, labelled = {}, []
    for name, label in values.items():
        i = model.index(name)
        var = model.variables[i]
        code = var.code(str(label))
        if i in log_lik and not math.isfinite(log_lik.pop(i)[code]):
            raise EvidenceError(_impossible(name))
        likelihoods[i] = _identity(var.card)[code:code + 1]
        labelled.append(i)
    for i, ll in log_lik.items():
        top = max(ll)
        if not math.isfinite(top):
            raise EvidenceError(_impossible(model.names[i]))
        likelihoods[i] = np.exp(np.array([[value - top for value in ll]]))
    return likelihoods, labelled


def _reading_log_likelihood(x: float, means: list, stddevs: list, log_stddevs: list) -> list:
    """The log p(x | value) of a 1-D sensor's reading, per value: ``log_density``'s formula, in Python floats (a
    case's few values cost less so than as arrays; the same IEEE operations, so the same numbers).
    """
    return [-0.5 * (z * z) - log_sd - _HALF_LOG_2PI
            for z, log_sd in zip([(x - m) / sd for m, sd in zip(means, stddevs)], log_stddevs)]


_READERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_HALF_LOG_2PI = 0.5 * 1 * LOG_2PI      # (``gaussian._log_normal``'s constant for one reading)


def _readers(model: AffordanceNetwork) -> dict:
    """{reading name: (its variable's index, its sensor model, its column in a vector sensor's readings, the bounds
    it must lie in, and for a 1-D sensor its Gaussians as ``_reading_log_likelihood`` takes them (None for a vector
    sensor))}, made once per model (it is immutable).
    """
    found = _READERS.get(model)
    if found is None:
        found = {}
        for i, var in enumerate(model.variables):
            sensor = var.sensor
            if sensor is None:
                continue
            gaussian = None
            if not sensor.vector and sensor.fitted:
                stddevs = np.sqrt(sensor.component_covariances()[:, 0, 0])   # (as ``log_density`` finds them)
                if np.all(stddevs > 0):   # (a variance that underflows to 0: left to log_likelihood's arrays)
                    gaussian = (sensor.component_means()[:, 0].tolist(), stddevs.tolist(),
                                np.log(stddevs).tolist())
            for column, reading in enumerate(sensor.names):
                found[reading] = (i, sensor, column, sensor.bounds, gaussian)
        _READERS[model] = found
    return found


@functools.lru_cache(maxsize=None)
def _identity(card: int) -> np.ndarray:
    """The identity matrix of size ``card``, read-only: its rows are the likelihoods of labels."""
    identity = np.eye(card)
    identity.setflags(write=False)
    return identity


def _impossible(name: str) -> str:
    return f"the evidence has zero likelihood for every value of '{name}' (a reading far outside its sensor model?)"


def _answer(model: AffordanceNetwork, names: list, joint: np.ndarray, spreads: tuple) -> BatchPrediction:
    """The ``BatchPrediction`` of the joint posterior (K, *cards) of the variables ``names`` and the ``_spreads``
    of their marginals.
    """
    flat = joint.reshape(joint.shape[0], math.prod(joint.shape[1:]))  # (no -1: a batch may have no cases)
    best = flat.argmax(axis=1)
    marginals = _marginals(names, joint)
    most_probable = best[:, None] if len(names) == 1 else np.stack(np.unravel_index(best, joint.shape[1:]), axis=1)
    return BatchPrediction(names, marginals, most_probable, np.maximum.reduce(flat, axis=1), joint,
                           predict_readings(model, marginals), *spreads)


def _marginals(names: list, joint: np.ndarray) -> dict:
    """{name: its marginal (K, card)} of the joint posterior (K, *cards) of the variables ``names``."""
    if len(names) == 1:
        return {names[0]: joint}
    return {name: joint.sum(axis=tuple(1 + a for a in range(len(names)) if a != j)) for j, name in enumerate(names)}


@dataclass(frozen=True)
class ActionRanking:
    """Actions ranked by ``strategy`` (one of ``STRATEGIES``), best first; every list in that order.

    ``probabilities``: p(desired effects | action, evidence); ``stddevs``, ``intervals`` (low, high) and ``support``:
    how sure the model is of each (as in ``Prediction``; NaN without posterior draws); ``scores``: what the strategy
    ranked by (expected: the probability; optimistic: the Gittins index of the probability, ``gittins_index`` of its
    posterior mean and standard deviation, above 1 for an action barely tried; cautious: the interval's lower
    bound; thompson: the probability under one posterior draw of the CPTs). ``tied``: the top actions have the same
    score (within ``TIE_TOLERANCE`` of the largest, or for optimistic and cautious within the draws' Monte Carlo
    noise, ``_tied``), so the model cannot tell them apart; their order is drawn at random.
    """

    action_variable: str
    actions: list
    probabilities: list
    tied: bool = False
    stddevs: list = field(default_factory=list)
    intervals: list = field(default_factory=list)
    support: list = field(default_factory=list)
    strategy: str = "expected"
    scores: list = field(default_factory=list)


def rank_actions(model: AffordanceNetwork, effects: Mapping[str, str], sensors: Mapping[str, float] | None = None,
                 values: Mapping[str, str] | None = None, action: str | None = None, strategy: str = "expected",
                 rng=None, uncertainty: bool = True) -> ActionRanking:
    """Rank every action for producing the desired effect labels, by ``strategy``.

    ``effects`` maps effect variables to wanted labels; ``sensors``/``values`` describe the object (any evidence
    except the action itself). One batched pass over all actions, and one under every posterior draw. Strategies:
    ``expected`` (the most probable first: exploits what the model knows), ``optimistic`` (the highest Gittins index
    first, ``gittins_index``: an action that might be best is tried early, until the model is sure enough it is not,
    to learn while doing), ``thompson`` (the best under one draw of the CPTs from their posterior: explores in
    proportion to the chance of being best), ``cautious`` (the highest lower credible bound first: when a failure is
    costly). All but ``expected`` need the model's posterior draws. ``rng``
    (None, an int seed or a numpy Generator) breaks ties and draws thompson's CPTs. ``uncertainty`` False (with
    ``expected`` only) leaves the standard deviations, intervals and support NaN, at the cost of the ranking alone.
    """
    check_model(model)
    if strategy not in STRATEGIES:
        raise EvidenceError(f"unknown strategy {strategy!r}{did_you_mean(str(strategy), STRATEGIES)}; expected one "
                            f"of {list(STRATEGIES)}")
    if strategy != "expected" and not has_draws(model):
        raise missing_posterior(f"strategy '{strategy}'")
    if strategy != "expected" and not uncertainty:
        raise EvidenceError(f"strategy '{strategy}' ranks by the posterior: it needs uncertainty=True")
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
        _check_reading(sensor, x, model.sensor(sensor)[1].bounds)
    batch = predict_batch(model, list(wanted), batch_sensors, batch_values, uncertainty=False)
    at = (slice(None), *[wanted[n] for n in batch.variables])
    probability = batch.joint[at]
    draws, imputations = _wanted_draws(model if uncertainty else None, batch_sensors, batch_values, batch.variables,
                                       at)
    mean, stddev, interval = spread(draws)
    rng = np.random.default_rng(rng)
    scores = _scores(strategy, probability, (mean, stddev, interval), draws, rng)
    top = np.max(scores)
    tied_top = _tied(strategy, scores, draws, imputations)
    ranked = np.lexsort((rng.random(k), -np.where(tied_top, top, scores)))
    n = support(np.stack([mean, 1.0 - mean], axis=-1), np.stack([stddev, stddev], axis=-1))
    return ActionRanking(var.name, [var.values[j] for j in ranked], [float(probability[j]) for j in ranked],
                         bool(np.count_nonzero(tied_top) > 1), [_number(float(stddev[j])) for j in ranked],
                         [(_number(float(interval[j, 0])), _number(float(interval[j, 1]))) for j in ranked],
                         [_number(float(n[j])) for j in ranked], strategy, [float(scores[j]) for j in ranked])


def _wanted_draws(model: AffordanceNetwork, sensors: dict, values: dict, variables: list, at: tuple) -> tuple:
    """(p(wanted effects | action, evidence) under every posterior draw (actions, S), the imputation each draw comes
    from (S,)); (actions, 1) NaN without draws (or without a model: not asked).
    """
    if model is None or not has_draws(model):
        return np.full((len(next(iter(values.values()))), 1), np.nan), np.zeros(1, dtype=int)
    cases = CaseSet.from_columns(model, {**sensors, **values})
    ((rows, likelihoods, hard),) = _evidence_chunks(model, cases)
    query = [model.index(n) for n in variables]
    return averaged_draws(model, query, likelihoods, hard)[at], draw_imputations(model, query, likelihoods, hard)


def _scores(strategy: str, probability: np.ndarray, spreads: tuple, draws: np.ndarray, rng) -> np.ndarray:
    """What ``strategy`` ranks the actions by (``ActionRanking.scores``); ``spreads``: the draws' (mean, standard
    deviation, interval).
    """
    mean, stddev, interval = spreads
    if strategy == "expected":
        return probability
    if strategy == "optimistic":
        return gittins_index(mean, stddev)
    if strategy == "cautious":
        return interval[:, 0]
    usable = np.flatnonzero(~np.any(np.isnan(draws), axis=0))   # (a draw under which the evidence is impossible: not)
    return draws[:, usable[rng.integers(len(usable))]]


def _tied(strategy: str, scores: np.ndarray, draws: np.ndarray, imputations: np.ndarray) -> np.ndarray:
    """Which actions tie with the best: within ``TIE_TOLERANCE`` of its score, or, for a score computed from the
    posterior draws (optimistic, cautious), within ``TIE_NOISE`` standard errors of it, the draws' Monte Carlo noise
    (the same data for two actions gives scores that differ by that much). The standard error is that of batch
    means: the score on each of ``TIE_BATCHES`` runs of consecutive imputations of the learn's sampler (successive
    imputations are alike, so the draws hold fewer independent ones than they number).
    """
    top = int(np.argmax(scores))
    tied = scores >= scores[top] - TIE_TOLERANCE * abs(scores[top])
    usable = ~np.any(np.isnan(draws), axis=0)
    ids = np.unique(imputations[usable])
    if strategy not in ("optimistic", "cautious") or len(ids) < TIE_BATCHES:
        return tied
    batch_of = np.searchsorted(ids, imputations) * TIE_BATCHES // len(ids)
    batch_scores = []
    for b in range(TIE_BATCHES):
        mean, stddev, interval = spread(draws[:, usable & (batch_of == b)])
        batch_scores.append(gittins_index(mean, stddev) if strategy == "optimistic" else interval[:, 0])
    differences = np.array(batch_scores)[:, top, None] - np.array(batch_scores)       # (batches, actions)
    noise = np.std(differences, axis=0, ddof=1) / np.sqrt(TIE_BATCHES)
    return tied | (scores[top] - scores <= TIE_NOISE * noise)


def gittins_index(mean, stddev, horizon: float = OPTIMISTIC_HORIZON) -> np.ndarray:
    """The Gittins index of a success probability whose posterior has this ``mean`` and ``stddev`` (arrays alike), for
    trials discounted over ``horizon`` (discount factor 1 - 1/horizon), in Brezzi & Lai's closed form (2002):
    mean + stddev psi(s), s = horizon stddev^2 / (mean (1 - mean)) = horizon / (n + 1), n the trials behind the
    probability (``core.posterior_answers.support``). ``rank_actions``' optimistic strategy ranks by it.

    The index is what the action is worth now, counting what trying it teaches for the trials to come (how near the
    closed form is to the exact index: test/core/test_gittins.py). Where few trials are behind the
    probability its bonus is about sqrt(2 log s) standard deviations (an action barely tried is worth trying); with
    many, about sqrt(s / 2): the bonus shrinks as 1 / n, not as the 1 / sqrt(n) of a credible bound at a fixed
    level, so the trying is done early and then stops (docs/benchmarks/decisions.md). An index, not a probability:
    above 1 for an action tried once or twice with success. A probability known exactly (stddev 0) scores its mean.
    """
    mean, stddev = np.asarray(mean, dtype=float), np.asarray(stddev, dtype=float)
    binomial = mean * (1.0 - mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(binomial > 0, horizon * stddev ** 2 / binomial, 0.0)
    return mean + stddev * _brezzi_lai(s)


def _brezzi_lai(s: np.ndarray) -> np.ndarray:
    """Brezzi & Lai's psi(s), the Gittins index's bonus in posterior standard deviations (piecewise, as published)."""
    s = np.asarray(s, dtype=float)
    root = np.sqrt(np.maximum(s, 1e-300))
    large = np.maximum(s, 15.0)
    tail = np.sqrt(np.maximum(2.0 * np.log(large) - np.log(np.log(large)) - math.log(16.0 * math.pi), 0.0))
    return np.select([s <= 0.2, s <= 1.0, s <= 5.0, s <= 15.0],
                     [np.sqrt(s / 2.0), 0.49 - 0.11 / root, 0.63 - 0.26 / root, 0.77 - 0.58 / root], tail)
