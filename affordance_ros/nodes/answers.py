"""Answering the planners' services: request messages in, the core's answers out as response messages."""

from __future__ import annotations

from typing import Callable

from ..core import AffordanceError, AffordanceNetwork, EvidenceError, predict, rank_actions
from ..data.pairing import PairingError, SizeLimits, named_values
from ..data.text import printable
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
    return fill


def select_action_into(request) -> Callable:
    """How to fill a SelectAction response for ``request``: the desired effects must be effect variables,
    and not also given as evidence (by label or by their sensor's reading)."""
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
        ranking = rank_actions(model, effects, sensors=sensors, values=values)
        response.action_variable = ranking.action_variable
        response.actions = list(ranking.actions)
        response.probabilities = list(ranking.probabilities)
        response.tied = ranking.tied
        if ranking.tied:
            response.message = tie_message(model, ranking, effects)
    return fill


def tie_message(model: AffordanceNetwork, ranking, effects: dict) -> str:
    """What a ranking of equally likely actions means, and why when the model's arcs say it."""
    action, wanted = ranking.action_variable, ", ".join(f"{name}={label}" for name, label in effects.items())
    message = (f"every action gives {wanted} with the same probability ({ranking.probabilities[0]:.4g}): "
               "the model cannot tell the actions apart here")
    if not any(action in model.ancestors(name) for name in effects):
        message += (f" ({' and '.join(effects)} {'does' if len(effects) == 1 else 'do'} not depend on {action} in "
                    "the model: no arcs lead from it; learn from more trials, or see the learning options' "
                    "forbidden arcs)")
    return message
