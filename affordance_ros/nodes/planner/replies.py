"""What a planner sends the learner and what it gets back: the requests of ``~/predict``, ``~/select_action`` and
``~/suggest_trial`` built from Python values, and their responses read back into the core's own result types
(``Prediction``, ``ActionRanking``, ``TrialSuggestions``; a learn's feedback as ``LearnProgress``), so that a
planner handles the node's answers as it would a model's in its own process. What the wire does not carry is
left empty: a Prediction's ``mixtures`` (only the predicted readings' means and spreads travel), and of a
suggestion's ``effects`` only each effect's most probable label (SuggestTrial carries no whole distributions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from ...core import ActionRanking, EvidenceError, Prediction
from ...core.errors import did_you_mean
from ...core.predict import STRATEGIES
from ...core.progress import LearnProgress
from ...core.suggest import Candidate, Suggestion, TrialSuggestions
from ...srv import Predict, SelectAction, SuggestTrial
from ..contract import ranked_by


@dataclass(frozen=True)
class LearnerRanking(ActionRanking):
    """An ActionRanking as the learner answered it, with its ``message``: why the actions tie, when they do."""

    message: str = ""


def readings_of(sensors: Mapping[str, float] | None) -> dict:
    """{sensor: float}; EvidenceError naming a reading that is not a number."""
    out = {}
    for name, value in (sensors or {}).items():
        try:
            out[str(name)] = float(value)
        except (TypeError, ValueError):
            raise EvidenceError(f"sensor '{name}': the reading must be a number, got {value!r}") from None
    return out


def labels_of(values: Mapping[str, str] | None, what: str = "variable") -> dict:
    """{name: label}; EvidenceError for a label that is not a string."""
    out = {}
    for name, label in (values or {}).items():
        if not isinstance(label, str):
            raise EvidenceError(f"{what} '{name}': the label must be a string, got {label!r}")
        out[str(name)] = label
    return out


def evidence_fields(values, sensors) -> dict:
    """The evidence fields of a Predict or SelectAction request."""
    sensors, values = readings_of(sensors), labels_of(values)
    return {"sensor_names": list(sensors), "sensor_values": list(sensors.values()),
            "variable_names": list(values), "variable_values": list(values.values())}


def predict_request(query: str | Sequence[str], values=None, sensors=None) -> Predict.Request:
    """The Predict request: ``query`` a variable name or group ("action", "object", "effect"), or several."""
    query = [query] if isinstance(query, str) else [str(q) for q in query]
    if not query:
        raise EvidenceError("name at least one variable (or group) to predict")
    return Predict.Request(query=query, **evidence_fields(values, sensors))


def select_action_request(effects: Mapping[str, str], values=None, sensors=None,
                          strategy: str = "expected") -> SelectAction.Request:
    """The SelectAction request: the desired ``effects`` {effect variable: label} on the object described, the
    actions ranked by ``strategy``."""
    effects = labels_of(effects, "effect")
    if not effects:
        raise EvidenceError("name at least one desired effect ({effect variable: label})")
    if not isinstance(strategy, str):
        raise EvidenceError(f"strategy must be a string (one of {list(STRATEGIES)}), got {strategy!r}")
    if strategy not in STRATEGIES:  # (the learner would refuse it: said here, before anything is sent)
        raise EvidenceError(f"unknown strategy {strategy!r}{did_you_mean(strategy, STRATEGIES)}; expected one of "
                            f"{list(STRATEGIES)}")
    return SelectAction.Request(effect_names=list(effects), effect_values=list(effects.values()),
                                strategy=strategy, **evidence_fields(values, sensors))


def candidate_of(item) -> Candidate:
    """A Candidate, or a mapping {name: reading or label}: a number is a sensor reading, a string a label."""
    if isinstance(item, Candidate):
        return Candidate(readings_of(item.sensors), labels_of(item.values))
    if not isinstance(item, Mapping):
        raise EvidenceError(f"a candidate is a Candidate or a mapping {{name: reading or label}}, got {item!r}")
    return Candidate(readings_of({k: v for k, v in item.items() if not isinstance(v, str)}),
                     {str(k): v for k, v in item.items() if isinstance(v, str)})


def suggest_request(candidates: Sequence, actions: Sequence[str] = (), criterion: str = "",
                    max_suggestions: int = 0) -> SuggestTrial.Request:
    """The SuggestTrial request about ``candidates`` (Candidates or mappings, ``candidate_of``): their readings
    and labels in the request's parallel lists, each entry with its candidate's number."""
    candidates = [candidate_of(c) for c in candidates]
    request = SuggestTrial.Request(num_candidates=len(candidates), actions=list(actions), criterion=criterion,
                                   max_suggestions=max_suggestions)
    for c, candidate in enumerate(candidates):
        request.sensor_candidates.extend([c] * len(candidate.sensors))
        request.sensor_names.extend(candidate.sensors)
        request.sensor_values.extend(float(x) for x in candidate.sensors.values())
        request.variable_candidates.extend([c] * len(candidate.values))
        request.variable_names.extend(candidate.values)
        request.variable_values.extend(str(x) for x in candidate.values.values())
    return request


def prediction_of(response: Predict.Response) -> Prediction:
    """A Predict response as the core's Prediction (``mixtures`` empty: the response does not carry them)."""
    marginals = {d.variable: dict(zip(d.values, map(float, d.probabilities), strict=True))
                 for d in response.marginals}
    if len(response.most_probable) != len(marginals):
        raise ValueError(f"{len(response.most_probable)} most probable labels for {len(marginals)} marginals")
    readings = {name: {"mean": float(mean), "stddev": float(sd)} for name, mean, sd in
                zip(response.reading_names, response.reading_means, response.reading_stddevs, strict=True)}
    labels = [(name, label) for name, dist in marginals.items() for label in dist]
    stddevs, lows, highs = (spread(response, field, len(labels)) for field in ("stddevs", "interval_lows",
                                                                              "interval_highs"))
    stddev, interval = {name: {} for name in marginals}, {name: {} for name in marginals}
    for (name, label), sd, low, high in zip(labels, stddevs, lows, highs):
        stddev[name][label], interval[name][label] = sd, (low, high)
    return Prediction(marginals, dict(zip(marginals, response.most_probable)), float(response.joint_probability),
                      readings, {}, stddev, interval, dict(zip(marginals, spread(response, "support", len(marginals)))))


def ranking_of(response: SelectAction.Response) -> LearnerRanking:
    """A SelectAction response as an ActionRanking (with the learner's ``message``)."""
    k = len(response.actions)
    if len(response.probabilities) != k:
        raise ValueError(f"{k} actions and {len(response.probabilities)} probabilities")
    lows, highs = spread(response, "interval_lows", k), spread(response, "interval_highs", k)
    return LearnerRanking(response.action_variable, list(response.actions), [float(p) for p in response.probabilities],
                          bool(response.tied), spread(response, "stddevs", k), list(zip(lows, highs)),
                          spread(response, "support", k), response.strategy or "expected",
                          spread(response, "scores", k), message=response.message)


def spread(response, field: str, n: int) -> list:
    """The ``n`` numbers of ``response.<field>`` (NaN as math.nan itself: answers that do not know compare
    equal, as the core's do); ValueError when there are not ``n``."""
    values = list(getattr(response, field))
    if len(values) != n:
        raise ValueError(f"{len(values)} {field} for {n} entries")
    return [math.nan if math.isnan(x) else float(x) for x in values]


def suggestions_of(response: SuggestTrial.Response, requested: str) -> TrialSuggestions:
    """A SuggestTrial response as TrialSuggestions (``requested``: the criterion asked for). Of each suggestion's
    ``effects`` only the expected label of each effect (its probability); ``predictive_information`` and
    ``tried`` are NaN unless they are the criterion used, whose ``score`` they are."""
    return TrialSuggestions(response.criterion, requested,
                            "" if response.message == ranked_by(response.criterion) else response.message,
                            response.action_variable, [_suggestion(response, s) for s in range(len(response.actions))])


def _suggestion(response: SuggestTrial.Response, s: int) -> Suggestion:
    effects, names = list(response.effect_variables), list(response.reading_names)
    expected = range(s * len(effects), (s + 1) * len(effects))
    readings = range(s * len(names), (s + 1) * len(names))
    labels = {name: response.expected_labels[j] for name, j in zip(effects, expected)}
    stddevs = {name: {labels[name]: float(response.probability_stddevs[j])} for name, j in zip(effects, expected)}
    score, criterion = float(response.scores[s]), response.criterion
    return Suggestion(
        response.actions[s], int(response.candidates[s]), score, float(response.information_gains[s]),
        score if criterion == "predictive_information" else math.nan, float(response.predictive_entropies[s]),
        0.0 - score if criterion == "least_tried" else math.nan,  # (0.0 - score: never -0.0)
        {name: {labels[name]: float(response.expected_probabilities[j])} for name, j in zip(effects, expected)},
        {} if all(math.isnan(sd) for d in stddevs.values() for sd in d.values()) else stddevs,
        {name: {"mean": float(response.reading_means[j]), "stddev": float(response.reading_stddevs[j])}
         for name, j in zip(names, readings)})


def learn_progress_of(feedback) -> LearnProgress:
    """A Learn action's feedback as the core's LearnProgress (what the node's own learn reports)."""
    return LearnProgress(feedback.phase, int(feedback.iteration), float(feedback.log_likelihood), int(feedback.cases),
                         float(feedback.elapsed))


__all__ = ["LearnerRanking", "candidate_of", "learn_progress_of", "predict_request", "prediction_of", "ranking_of",
           "select_action_request", "suggest_request", "suggestions_of"]
