"""The planners' services of the learner: ``~/predict`` and ``~/select_action``.

Created when the node activates and removed when it deactivates. Both answer from the current model (a learn
running meanwhile swaps in its model only when done) through ``service_answer.answer``, count what they answered
and log what they could not. A request reaches the core in three calls: the service's callback, ``answer`` (the
checks every service shares) and ``predict_response`` or ``select_action_response``, which read the request's
parallel lists, call ``core.predict`` or ``core.rank_actions`` and write the response's fields from its result.
"""

from __future__ import annotations

import functools
import os

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ...core import AffordanceNetwork, EvidenceError, predict, rank_actions
from ...core.predict import TIE_TOLERANCE
from ...data.case_writer import CaseWriter
from ...data.model_manager import ModelManager
from ...data.pairing import named_values
from ...msg import Distribution
from ...srv import Predict, SelectAction
from .parameters import LearnerSettings
from .reporter import Reporter
from .service_answer import answer, log_level

# Reliable, as rclpy's default, but 100 replies kept instead of 10: a reply sent to a client again stays in the
# reply writer's history while 100 more are written to the others.
SERVICE_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class QueryServices:
    """``~/predict`` and ``~/select_action`` on ``node``, in a callback group of their own: answered from the
    current model of ``manager`` (before the first learn, the answer says how many cases ``writer`` has stored),
    requests within the settings' ``limits``; ``reporter`` hears what was answered. The settings' ``select_seed``
    (-1: one drawn at random, logged) seeds the generator of select_action's ties and thompson draws."""

    def __init__(self, node, manager: ModelManager, writer: CaseWriter, settings: LearnerSettings,
                 reporter: Reporter):
        self.node = node
        self.current = manager.current
        self.writer = writer
        self.limits = settings.limits
        self.reporter = reporter
        # one generator for the node's select_action draws (ties, thompson): a given seed repeats a run's answers
        seed = settings.select_seed
        self.seed = seed if seed >= 0 else int.from_bytes(os.urandom(4), "little") >> 1
        self.rank = functools.partial(select_action_response, rng=np.random.default_rng(self.seed))
        node.get_logger().info(f"~/select_action draws (ties, thompson) seeded with {self.seed}"
                               + (" (select_seed -1: drawn at random)" if seed < 0 else ""))
        group = MutuallyExclusiveCallbackGroup()
        self.services = [
            node.create_service(Predict, "~/predict", self._on_predict, qos_profile=SERVICE_QOS, callback_group=group),
            node.create_service(SelectAction, "~/select_action", self._on_select_action, qos_profile=SERVICE_QOS,
                                callback_group=group)]

    def close(self) -> None:
        """Remove the services."""
        for service in self.services:
            self.node.destroy_service(service)

    def _on_predict(self, request: Predict.Request, response: Predict.Response) -> Predict.Response:
        problem = answer(self.current.model, request, response, predict_response, self.limits, self._no_model())
        self._report("predict", "predict", problem)
        return response

    def _on_select_action(self, request: SelectAction.Request,
                          response: SelectAction.Response) -> SelectAction.Response:
        problem = answer(self.current.model, request, response, self.rank, self.limits, self._no_model())
        self._report("select_action", "select", problem)
        return response

    def _no_model(self) -> str:
        return f"no model yet: call ~/learn first ({self.writer.state().cases} cases stored)"

    def _report(self, service: str, counter: str, problem: str) -> None:
        if problem:
            self.reporter.grouped(log_level(problem), f"{service}: {problem}")
        self.reporter.count(f"{counter}_{'failed' if problem else 'ok'}")


def evidence(request) -> tuple[dict, dict]:
    """(sensor readings, labels) of a Predict or SelectAction request."""
    return (named_values(request.sensor_names, request.sensor_values, "sensor"),
            named_values(request.variable_names, request.variable_values, "variable"))


def predict_response(model: AffordanceNetwork, request: Predict.Request, response: Predict.Response) -> None:
    """The Predict response to ``request`` from ``model``."""
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


def select_action_response(model: AffordanceNetwork, request: SelectAction.Request, response: SelectAction.Response,
                           rng: np.random.Generator) -> None:
    """The SelectAction response to ``request`` from ``model``: the desired effects must be effect variables, and
    not also given as evidence (by label or by their sensor's reading); ``rng`` breaks ties and draws thompson's
    CPTs."""
    sensors, values = evidence(request)
    effects = named_values(request.effect_names, request.effect_values, "effect")
    for name in effects:
        variable = model[name]
        if variable.group != "effect":
            raise EvidenceError(f"'{name}' is not an effect variable (it is in the group '{variable.group}'); "
                                f"the effects are {model.group('effect')}")
        if name in values or (variable.sensor and any(r in sensors for r in variable.sensor.names)):
            raise EvidenceError(f"'{name}' is a desired effect: do not also give it as evidence")
    ranking = rank_actions(model, effects, sensors=sensors, values=values, strategy=request.strategy or "expected",
                           rng=rng)
    response.action_variable = ranking.action_variable
    response.actions = list(ranking.actions)
    response.probabilities = list(ranking.probabilities)
    response.tied = ranking.tied
    response.strategy = ranking.strategy
    response.scores = list(ranking.scores)
    response.stddevs = list(ranking.stddevs)
    response.support = list(ranking.support)
    response.interval_lows = [low for low, _ in ranking.intervals]
    response.interval_highs = [high for _, high in ranking.intervals]
    if ranking.tied:
        response.message = tie_message(model, ranking, effects)


def tie_message(model: AffordanceNetwork, ranking, effects: dict) -> str:
    """What a ranking whose top actions tie means: every action equally likely (and why, when the model's arcs say
    it), or the first few with the same score, in an order drawn at random."""
    action = ranking.action_variable
    wanted = ", ".join(f"{name}={label}" for name, label in effects.items())
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


__all__ = ["SERVICE_QOS", "QueryServices", "evidence", "predict_response", "select_action_response", "tie_message"]
