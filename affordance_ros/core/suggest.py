"""Which trial would teach the model the most: (action, object) pairs ranked for exploration.

A trial is an action done on a candidate object (an object the robot could act on, described as in
``predict``: labels and/or sensor readings); the robot observes its effects. Three criteria, in nats
(higher: more to learn):

- ``information_gain`` (default): the expected information the trial's effects give about the CPT
  parameters, I(effects; theta | action, object), the mutual information of Bayesian experimental design.
  With Dirichlet CPTs it has a closed form per CPT row: for Dirichlet(alpha), alpha0 = sum(alpha),
  p = alpha / alpha0, ``G(alpha) = H(p) + sum_k p_k digamma(alpha_k + 1) - digamma(alpha0 + 1)``: the
  entropy of the outcome less its expected entropy under the parameters. With the action and the object
  known, observing the effects updates one row of every effect's CPT (its parents' values; an effect's
  parent that is itself an effect is predicted), and the gain is the sum over the effects of the
  ``G`` of that row, expected over the parents' values. With the object known only through readings, the
  expectation runs over its posterior given them (the gain if the trial also revealed the object's values).
  It needs the Dirichlet posterior counts (``Variable.counts``); a model without them (an imported one)
  is ranked by predictive entropy instead, and the answer says so.
- ``predictive_entropy``: the entropy of the effects jointly, H(effects | action, object): the trials
  whose outcome the model is least sure of. Needs no counts, but does not tell ignorance from noise: an
  effect that is random by nature keeps its entropy however often it is tried.
- ``least_tried``: minus the number of earlier trials behind the CPT rows the trial would update (the
  rows' Dirichlet totals, the prior's pseudo-counts included; expected over what is not known, the
  fewest among the effects): count-based exploration, blind to how noisy each effect is.

For a planner each suggestion also carries the effects the model expects (their marginals and
predicted readings) and how sure it is of them: the standard deviation of each predicted probability
under the model's posterior draws (``core.posterior_answers``: what ``predict`` says), or, for a model without
them, under the Dirichlet of the effect's CPT counts with the parents' distribution held fixed (too
narrow where an effect's parent is an effect: the parent's uncertainty is left out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from scipy.special import digamma, entr, xlogy

from .errors import EvidenceError
from .evidence import evidence_from_log_likelihoods
from .network import AffordanceNetwork, Variable
from .number_checks import is_finite_number
from .options import SUGGEST_CRITERIA
from .posterior_answers import averaged_posterior, has_draws
from .predict import check_model, posterior_spreads, predict_readings
from .query import posterior

NEEDS_COUNTS = ("information_gain", "predictive_information", "least_tried")


@dataclass(frozen=True)
class Candidate:
    """An object the robot could act on: ``sensors`` {reading name: reading} and/or ``values``
    {variable: label} of its object variables (none: an object the model knows nothing of).
    """

    sensors: Mapping[str, float] = field(default_factory=dict)
    values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Suggestion:
    """One trial: ``action`` on candidate number ``candidate``, its ``score`` under the criterion used.

    ``information_gain`` and ``predictive_entropy`` in nats, ``tried`` in cases (both NaN when the model
    has no counts); ``effects`` {effect variable: {label: p}}; ``effect_stddevs`` {effect variable:
    {label: standard deviation of p under the Dirichlet posterior}} (empty without counts);
    ``readings`` {effect reading name: {"mean", "stddev"}} of the predictive mixture.
    """

    action: str
    candidate: int
    score: float
    information_gain: float
    predictive_information: float
    predictive_entropy: float
    tried: float
    effects: dict
    effect_stddevs: dict
    readings: dict

    @property
    def expected(self) -> dict:
        """{effect variable: its most probable label}."""
        return {name: max(dist, key=dist.get) for name, dist in self.effects.items()}

    def to_dict(self, effects: bool = True) -> dict:
        """JSON-ready (NaN as None): ``expected`` {effect variable: {"label", "probability", "stddev"}}, and with
        ``effects`` the whole ``effects`` and ``effect_stddevs``.
        """
        expected = {name: {"label": label, "probability": self.effects[name][label],
                           "stddev": self.effect_stddevs[name][label] if self.effect_stddevs else None}
                    for name, label in self.expected.items()}
        out = {"action": self.action, "candidate": self.candidate, "score": _number(self.score),
               "information_gain": _number(self.information_gain),
               "predictive_information": _number(self.predictive_information),
               "predictive_entropy": self.predictive_entropy, "tried": _number(self.tried), "expected": expected,
               "readings": self.readings}
        if effects:
            out.update(effects=self.effects, effect_stddevs=self.effect_stddevs)
        return out


@dataclass(frozen=True)
class TrialSuggestions:
    """Trials ranked best first by ``criterion`` (the one used: ``requested`` unless the model has no counts,
    which ``note`` then explains); ``action_variable`` is the variable the actions are values of.
    """

    criterion: str
    requested: str
    note: str
    action_variable: str
    suggestions: list

    def to_dict(self, effects: bool = True) -> dict:
        """JSON-ready (``effects``: as ``Suggestion.to_dict``)."""
        return {"criterion": self.criterion, "requested": self.requested, "note": self.note,
                "action_variable": self.action_variable,
                "suggestions": [s.to_dict(effects) for s in self.suggestions]}


@dataclass(frozen=True)
class TrialScores:
    """Every criterion for K = candidates x actions trials, case k = candidate * n_actions + action: arrays
    (K,) (``information_gain``, ``tried`` NaN without counts); ``effects`` {variable: (K, card)};
    ``effect_stddevs`` {variable: (K, card)} (empty without counts); ``readings`` as ``predict_readings``.
    """

    actions: list
    n_candidates: int
    information_gain: np.ndarray
    predictive_information: np.ndarray
    predictive_entropy: np.ndarray
    tried: np.ndarray
    effects: dict
    effect_stddevs: dict
    readings: dict

    def criterion(self, name: str) -> np.ndarray:
        """The scores (K,) of criterion ``name``, higher: more to learn."""
        return {"information_gain": self.information_gain, "predictive_information": self.predictive_information,
                "predictive_entropy": self.predictive_entropy,
                "least_tried": -self.tried}[name]


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x


def dirichlet_information_gain(alpha: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
    """I(outcome; theta) of one categorical outcome under theta ~ Dirichlet(alpha), per row of ``alpha``
    (..., r): ``H(p) + sum_k p_k digamma(alpha_k + 1) - digamma(alpha0 + 1)``, p = alpha / alpha0. A row of
    zeros (no case and no prior) gives the limit alpha0 -> 0 with p = its ``mean`` row (default uniform):
    H(p), the whole entropy of the outcome.
    """
    alpha = np.asarray(alpha, dtype=float)
    total = alpha.sum(axis=-1)
    mean = np.full(alpha.shape, 1.0 / alpha.shape[-1]) if mean is None else np.asarray(mean, dtype=float)
    seen = total > 0
    p = np.where(seen[..., None], alpha / np.where(seen, total, 1.0)[..., None], mean)
    gain = entr(p).sum(axis=-1) + np.where(seen, (p * digamma(alpha + 1.0)).sum(axis=-1) - digamma(total + 1.0), 0.0)
    return np.maximum(gain, 0.0)


def dirichlet_predictive_information(alpha: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
    """I(y; y*) of two outcomes of one categorical row under theta ~ Dirichlet(alpha), per row of ``alpha``
    (..., r): what observing one outcome tells about another of the same row, ``H(p) - sum_k p_k H(p | k)``
    with p = alpha / alpha0 and p | k = (alpha + e_k) / (alpha0 + 1), the predictive after seeing k. It falls
    as (r - 1) / (2 alpha0^2) where ``dirichlet_information_gain`` falls as (r - 1) / (2 alpha0). A row of
    zeros (no case and no prior) gives the limit alpha0 -> 0 with p = its ``mean`` row (default uniform): H(p).
    """
    alpha = np.asarray(alpha, dtype=float)
    total = alpha.sum(axis=-1)
    mean = np.full(alpha.shape, 1.0 / alpha.shape[-1]) if mean is None else np.asarray(mean, dtype=float)
    seen = total > 0
    p = np.where(seen[..., None], alpha / np.where(seen, total, 1.0)[..., None], mean)
    after = total + 1.0
    # sum_j (p | k)_j log (p | k)_j, from sum_j alpha_j log alpha_j with alpha_k's term replaced
    plogp = ((xlogy(alpha, alpha).sum(axis=-1)[..., None] - xlogy(alpha, alpha) + xlogy(alpha + 1.0, alpha + 1.0))
             / after[..., None] - np.log(after)[..., None])
    information = entr(p).sum(axis=-1) + np.where(seen, (p * plogp).sum(axis=-1), 0.0)
    return np.maximum(information, 0.0)


def score_trials(model: AffordanceNetwork, candidates: Sequence[Candidate],
                 actions: Sequence[str] | None = None, targets: Sequence[Candidate] | None = None) -> TrialScores:
    """Every criterion for every (candidate, action) pair (``actions``: labels of the model's action
    variable; None: all). ``targets``: the objects whose effects the model is to predict, each with every
    action alike, for ``predictive_information`` (None: the candidates). EvidenceError for a request that
    does not fit the model.
    """
    candidates = list(candidates)
    actions = check_trials(model, candidates, actions)
    action_var = _action_variable(model)
    model.engine  # noqa: B018  (raises ModelFormatError when the model has no parameters)
    likelihoods, hard = _trial_evidence(model, action_var, actions, candidates)
    if targets is None and len(actions) == action_var.card:
        target_likelihoods, target_hard = likelihoods, hard
    else:
        targets = candidates if targets is None else list(targets)
        check_trials(model, targets, None)
        target_likelihoods, target_hard = _trial_evidence(model, action_var, list(action_var.values), targets)
    effects = [model.index(name) for name in model.group("effect")]
    if not effects:
        raise EvidenceError("the model has no effect variables: there is nothing a trial would show")
    n_trials = len(candidates) * len(actions)
    joint = averaged_posterior(model, effects, likelihoods, hard)
    flat = joint.reshape(n_trials, -1)
    entropy = entr(flat).sum(axis=1)
    marginals = {}
    for j, i in enumerate(effects):
        axes = tuple(1 + a for a in range(len(effects)) if a != j)
        marginals[model.names[i]] = joint.sum(axis=axes) if axes else joint
    gain = np.full(n_trials, np.nan)
    predictive = np.full(n_trials, np.nan)
    tried = np.full(n_trials, np.nan)
    stddevs = {}
    if has_draws(model):   # the parents' uncertainty and the readings' noise included (held fixed below)
        stddevs = posterior_spreads(model, list(marginals), n_trials, [(slice(0, n_trials), likelihoods, hard)])[0]
    if all(member.network.has_counts for member in model.members):
        gain[:], predictive[:], tried[:] = 0.0, 0.0, 0.0
        spreads = {name: 0.0 for name in marginals}
        targets_given = (target_likelihoods, target_hard) if target_likelihoods is not likelihoods else None
        for member in model.members:   # a sample of structures: each criterion averaged over them
            parts = _family_criteria(member.network, effects, likelihoods, hard, targets_given, n_trials)
            gain += member.weight * parts[0]
            predictive += member.weight * parts[1]
            tried += member.weight * parts[2]
            for name, variance in parts[3].items():
                spreads[name] = spreads[name] + member.weight * variance
        for name, variance in spreads.items():
            stddevs.setdefault(name, np.sqrt(variance))
    return TrialScores(list(actions), len(candidates), gain, predictive, entropy, tried, marginals, stddevs,
                       predict_readings(model, marginals))


def _family_criteria(network: AffordanceNetwork, effects: list, likelihoods: dict, hard: list,
                     targets: tuple | None, n_trials: int) -> tuple:
    """(information gain, predictive information, trials behind, {effect: variance of its probabilities from its
    counts}) of every trial under one network: what each effect's CPT row, weighted by p(its parents | the trial),
    would learn from the trial.
    """
    gain, predictive, tried, variances = np.zeros(n_trials), np.zeros(n_trials), np.full(n_trials, np.inf), {}
    for i in effects:
        v = network.variables[i]
        parents = network.parent_indices(i)
        q = posterior(network, list(parents), likelihoods, hard).reshape(n_trials, -1) if parents else \
            np.ones((n_trials, 1))
        if not parents or targets is None:
            target = q.mean(axis=0)
        else:
            target = posterior(network, list(parents), *targets).reshape(-1, len(q.T)).mean(0)
        alpha = v.counts.reshape(-1, v.card)
        cpt = v.cpt.reshape(-1, v.card)
        total = alpha.sum(axis=1)
        gain += q @ dirichlet_information_gain(alpha, cpt)
        predictive += q @ (target * dirichlet_predictive_information(alpha, cpt))
        tried = np.minimum(tried, q @ total)
        variances[v.name] = (q * q) @ (cpt * (1.0 - cpt) / (total + 1.0)[:, None])
    return gain, predictive, tried, variances


def suggest_trials(model: AffordanceNetwork, candidates: Sequence[Candidate], actions: Sequence[str] | None = None,
                   criterion: str = "information_gain", top: int | None = None,
                   targets: Sequence[Candidate] | None = None) -> TrialSuggestions:
    """Rank every (action, candidate) trial by ``criterion`` (``SUGGEST_CRITERIA``), best first; ``top``: keep
    that many; ``targets``: the objects ``predictive_information`` is about (None: the candidates).

    E.g. ``suggest_trials(model, [Candidate(sensors={"size": 9.8}), Candidate(values={"Shape": "box"})])``.
    Ties keep the order candidate by candidate, action by action. A model without Dirichlet counts is
    ranked by predictive entropy when a criterion that needs them is asked for (``note`` says so).
    """
    check_model(model)
    check_criterion(criterion)
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise EvidenceError(f"top must be a whole number >= 1 (or None for all), got {top!r}")
    scores = score_trials(model, candidates, actions, targets)
    used, note = criterion, ""
    if criterion in NEEDS_COUNTS and not model.has_counts:
        used = "predictive_entropy"
        note = (f"the model carries no Dirichlet counts (imported, or learned before they were kept), so "
                f"'{criterion}' cannot be computed: ranked by predictive entropy; learn the model again to get them")
    values = scores.criterion(used)
    order = np.argsort(-values, kind="stable")[:top].tolist()
    n_actions = len(scores.actions)
    labels = {name: model[name].values for name in scores.effects}
    # (arrays to lists once: a suggestion is then read from lists, not numpy scalars)
    effects, stddevs = ({name: p[order].tolist() for name, p in part.items()}
                        for part in (scores.effects, scores.effect_stddevs))
    readings = [(prediction.names, prediction.mean[order].tolist(), prediction.stddev[order].tolist())
                for prediction in scores.readings.values()]
    gain, information, entropy, tried, score = (
        x[order].tolist() for x in (scores.information_gain, scores.predictive_information, scores.predictive_entropy,
                                    scores.tried, values))
    suggestions = [
        Suggestion(scores.actions[k % n_actions], k // n_actions, score[r], gain[r], information[r], entropy[r],
                   tried[r],
                   {name: dict(zip(labels[name], p[r])) for name, p in effects.items()},
                   {name: dict(zip(labels[name], s[r])) for name, s in stddevs.items()},
                   {reading: {"mean": mean[r][j], "stddev": stddev[r][j]}
                    for names, mean, stddev in readings for j, reading in enumerate(names)})
        for r, k in enumerate(order)]
    return TrialSuggestions(used, criterion, note, _action_variable(model).name, suggestions)


def _action_variable(model: AffordanceNetwork) -> Variable:
    actions = model.group("action")
    if len(actions) != 1:
        raise EvidenceError(f"the model has action variables {actions}: trials need exactly one")
    return model[actions[0]]


def check_criterion(criterion: str) -> None:
    """EvidenceError unless ``criterion`` is one of ``SUGGEST_CRITERIA``."""
    if criterion not in SUGGEST_CRITERIA:
        raise EvidenceError(f"unknown criterion '{criterion}'; expected one of {list(SUGGEST_CRITERIA)}")


def check_trials(model: AffordanceNetwork, candidates: Sequence[Candidate], actions: Sequence[str] | None) -> list:
    """The actions to try (``actions``, None: all of the model's action variable), once they and the
    ``candidates`` are checked against ``model`` (a configuration will do: labels of variables whose values are
    still to be found are not checked); EvidenceError naming the first mistake.
    """
    action_var = _action_variable(model)
    if not candidates:
        raise EvidenceError("no candidate objects: give at least one (its readings and/or labels, or nothing)")
    for c, candidate in enumerate(candidates):
        if not isinstance(candidate, Candidate):
            raise EvidenceError(f"candidate {c} is a {type(candidate).__name__}, not a Candidate")
        for name, x in candidate.sensors.items():
            _check_object_evidence(action_var, model.sensor(name)[0], c, f"sensor '{name}'")
            if not is_finite_number(x):
                raise EvidenceError(f"candidate {c}: reading of sensor '{name}' must be a finite number, got {x!r}")
        for name, label in candidate.values.items():
            if name not in model.names and name in model.sensor_variable:  # a label given to a sensor
                raise EvidenceError(f"candidate {c}: reading {label!r} of sensor '{name}' is not a number")
            var = model[name]
            _check_object_evidence(action_var, var, c, f"variable '{name}'")
            if var.values is not None:
                var.code(str(label))
    if actions is None:
        return list(action_var.values)
    actions = [str(a) for a in actions]
    if not actions:
        raise EvidenceError(f"no actions to consider: name some of {list(action_var.values)}, or none for all")
    for a in actions:
        action_var.code(a)
    if len(set(actions)) != len(actions):
        raise EvidenceError(f"repeated actions in {actions}")
    return actions


def _trial_evidence(model: AffordanceNetwork, action_var: Variable, actions: list,
                    candidates: list) -> tuple[dict, list]:
    """The evidence of the trials, candidate by candidate and within each action by action: (likelihoods
    {variable index: (K, card)}, the variables with hard evidence).
    """
    n_candidates, n_actions = len(candidates), len(actions)
    log_lik = {}
    readings = {}  # variable index -> (C, d) readings, NaN where a candidate has none
    for c, candidate in enumerate(candidates):
        for name, x in candidate.sensors.items():
            var, sensor = model.sensor(name)
            i = model.index(var.name)
            table = readings.setdefault(i, np.full((n_candidates, sensor.dim), np.nan))
            table[c, sensor.names.index(name)] = float(x)
        for name, label in candidate.values.items():
            var = model[name]
            i = model.index(var.name)
            hard = log_lik.setdefault(i, np.zeros((n_candidates, var.card)))
            row = np.full(var.card, -np.inf)
            row[var.code(str(label))] = 0.0
            hard[c] += row
    for i, x in readings.items():
        log_lik[i] = log_lik.get(i, 0.0) + model.variables[i].sensor.log_likelihood(x)
    trials = n_candidates * n_actions
    columns = [None if i not in log_lik else np.repeat(log_lik[i], n_actions, axis=0) for i in range(len(model))]
    a = model.index(action_var.name)
    chosen = np.full((n_actions, action_var.card), -np.inf)
    chosen[np.arange(n_actions), [action_var.code(x) for x in actions]] = 0.0
    columns[a] = np.tile(chosen, (n_candidates, 1))
    evidence = evidence_from_log_likelihoods(columns, trials)
    likelihoods = {i: lik for i, lik in enumerate(evidence.likelihoods) if lik is not None}
    hard = [i for i, lik in likelihoods.items() if np.all(np.count_nonzero(lik, axis=1) == 1)]
    return likelihoods, hard


def _check_object_evidence(action_var: Variable, var: Variable, c: int, what: str) -> None:
    if var.name == action_var.name:
        raise EvidenceError(f"candidate {c}: {what} is the action, which is what is being chosen: leave it out")
    if var.group == "effect":
        raise EvidenceError(f"candidate {c}: {what} is an effect, which the trial is to show: leave it out")


__all__ = ["Candidate", "Suggestion", "TrialScores", "TrialSuggestions", "check_criterion", "check_trials",
           "dirichlet_information_gain", "dirichlet_predictive_information", "score_trials", "suggest_trials"]
