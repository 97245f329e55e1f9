"""Answering the planners' services: request messages in, the core's answers out as response messages."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core import AffordanceError, AffordanceNetwork, EvidenceError, predict, rank_actions
from ..core.predict import TIE_TOLERANCE
from ..data.log_text import printable
from ..data.pairing import PairingError, SizeLimits, named_values
from ..msg import Distribution


def answer(model: AffordanceNetwork | None, response, fill: Callable, no_model: str) -> str:
    """Fill ``response`` by ``fill(model, response)``; ``success`` False with the message for no model, a
    mistake in the request, or an unexpected error (returned, to be logged). '' when it succeeded."""
    response.success = False
    if model is None:
        response.message = no_model
        return response.message
    try:
        fill(model, response)
    except (AffordanceError, ValueError) as exc:
        response.message = printable(exc)
        return response.message
    except Exception as exc:  # a bug: answer and keep running
        response.message = printable(f"internal error: {exc!r}")
        return response.message
    response.success = True
    return ""


def check_size(request, limits: SizeLimits) -> None:
    """PairingError (a ValueError) if a string or a list of ``request`` is longer than ``limits`` allow."""
    for name in request.get_fields_and_field_types():
        value = getattr(request, name)
        if isinstance(value, str):
            limits.check_name(value, f"'{name}' field")
        elif not isinstance(value, (int, float, bool)):
            limits.check_list(len(value), f"entries in '{name}'")
            for item in value:
                if isinstance(item, str):
                    limits.check_name(item, f"entry of '{name}'")


TOO_LARGE = "request too large: "  # how the answer to a request beyond the size limits starts


def checked(limits: SizeLimits, request, fill: Callable) -> Callable:
    """``fill``, after the request's sizes are checked (a request too large is answered in a few words)."""
    def fill_checked(model: AffordanceNetwork, response) -> None:
        try:
            check_size(request, limits)
        except PairingError as exc:
            raise ValueError(f"{TOO_LARGE}{exc}") from None
        fill(model, response)
    return fill_checked


def evidence(request) -> tuple[dict, dict]:
    """(sensor readings, labels) of a Predict or SelectAction request."""
    return (named_values(request.sensor_names, request.sensor_values, "sensor"),
            named_values(request.variable_names, request.variable_values, "variable"))


def predict_into(request) -> Callable:
    """How to fill a Predict response for ``request``."""
    def fill(model: AffordanceNetwork, response) -> None:
        sensors, values = evidence(request)
        result = predict(model, list(request.query), sensors=sensors, values=values)
        response.marginals = [Distribution(variable=name, values=list(dist), probabilities=list(dist.values()))
                              for name, dist in result.marginals.items()]
        response.most_probable = [result.most_probable[name] for name in result.marginals]
        response.joint_probability = result.joint_probability
        response.reading_names = list(result.readings)
        response.reading_means = [r["mean"] for r in result.readings.values()]
        response.reading_stddevs = [r["stddev"] for r in result.readings.values()]
        labels = [(name, label) for name, dist in result.marginals.items() for label in dist]
        response.stddevs = [result.stddevs[name][label] for name, label in labels]
        response.interval_lows = [result.intervals[name][label][0] for name, label in labels]
        response.interval_highs = [result.intervals[name][label][1] for name, label in labels]
        response.support = [result.support[name] for name in result.marginals]
    return fill


def select_action_into(request, rng: np.random.Generator) -> Callable:
    """How to fill a SelectAction response for ``request``: the desired effects must be effect variables,
    and not also given as evidence (by label or by their sensor's reading); ``rng`` breaks ties and draws
    thompson's CPTs."""
    def fill(model: AffordanceNetwork, response) -> None:
        sensors, values = evidence(request)
        effects = named_values(request.effect_names, request.effect_values, "effect")
        for name in effects:
            variable = model[name]
            if variable.group != "effect":
                raise EvidenceError(f"'{name}' is not an effect variable (it is in the group '{variable.group}'); "
                                    f"the effects are {model.group('effect')}")
            if name in values or (variable.sensor and any(r in sensors for r in variable.sensor.names)):
                raise EvidenceError(f"'{name}' is a desired effect: do not also give it as evidence")
        ranking = rank_actions(model, effects, sensors=sensors, values=values,
                               strategy=request.strategy or "expected", rng=rng)
        response.action_variable = ranking.action_variable
        response.actions = list(ranking.actions)
        response.probabilities = list(ranking.probabilities)
        response.tied = ranking.tied
        response.strategy, response.scores = ranking.strategy, list(ranking.scores)
        response.stddevs, response.support = list(ranking.stddevs), list(ranking.support)
        response.interval_lows = [low for low, _ in ranking.intervals]
        response.interval_highs = [high for _, high in ranking.intervals]
        if ranking.tied:
            response.message = tie_message(model, ranking, effects)
    return fill


def tie_message(model: AffordanceNetwork, ranking, effects: dict) -> str:
    """What a ranking whose top actions tie means: every action equally likely (and why, when the model's arcs say
    it), or the first few with the same score, in an order drawn at random."""
    action, wanted = ranking.action_variable, ", ".join(f"{name}={label}" for name, label in effects.items())
    probabilities = np.asarray(ranking.probabilities)
    if np.ptp(probabilities) > TIE_TOLERANCE * probabilities.max():
        scores = np.asarray(ranking.scores)
        first = int(np.count_nonzero(scores >= scores[0] - TIE_TOLERANCE * abs(scores[0])))
        return (f"the first {first} actions have the same score under strategy '{ranking.strategy}' "
                f"({scores[0]:.4g}): their order is drawn at random")
    message = (f"every action gives {wanted} with the same probability ({ranking.probabilities[0]:.4g}): "
               "the model cannot tell the actions apart here")
    if not any(action in model.ancestors(name) for name in effects):
        message += (f" ({' and '.join(effects)} {'does' if len(effects) == 1 else 'do'} not depend on {action} in "
                    "the model: no arcs lead from it; learn from more trials, or see the learning options' "
                    "forbidden arcs)")
    return message
