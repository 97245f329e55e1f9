"""The learner's ``~/suggest_trial`` (SuggestTrial): which trial would teach the model the most.

Created when the node activates and removed when it deactivates. Answered from the model in use by
``core.suggest.suggest_trials``; before the first learn, by a round robin over (action, candidate) with
the configuration's actions, one step further at every call, with that reason in the message. Every
mistake in a request (unknown names or labels, lists of different lengths, a candidate number out of
range, a reading that is not finite) is ``success: false`` with a message, counted and logged.
"""

from __future__ import annotations

import functools
import math

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from ...core import AffordanceNetwork, EvidenceError
from ...core.suggest import Candidate, check_criterion, check_trials, suggest_trials
from ...data.model_manager import ModelManager
from ...data.pairing import SizeLimits
from ...srv import SuggestTrial
from ..contract import ranked_by
from .reporter import Reporter
from .service_answer import answer, log_level

ROUND_ROBIN = "round_robin"
NO_MODEL = "no model yet: a round robin over (action, candidate); call ~/learn to rank by what the model would learn"


class SuggestService:
    """``~/suggest_trial`` on ``node``, in a callback group of its own: answered from the current model of
    ``manager``, or before the first learn by a round robin over the actions of its configuration; requests within
    ``limits``; ``reporter`` hears what was answered (``suggest_ok``, ``suggest_failed``)."""

    def __init__(self, node, manager: ModelManager, limits: SizeLimits, reporter: Reporter):
        self.node = node
        self.current = manager.current
        self.config = manager.config
        self.limits = limits
        self.reporter = reporter
        self.turn = 0  # where the round robin goes on
        self.suggest = functools.partial(suggest_response, limits=limits)
        self.service = node.create_service(SuggestTrial, "~/suggest_trial", self._on_suggest,
                                           callback_group=MutuallyExclusiveCallbackGroup())

    def close(self) -> None:
        """Remove the service."""
        self.node.destroy_service(self.service)

    def _on_suggest(self, request: SuggestTrial.Request, response: SuggestTrial.Response) -> SuggestTrial.Response:
        model = self.current.model
        if model is None:  # the configuration knows the actions and the names of the candidates' evidence
            problem = answer(self.config, request, response, self._round_robin, self.limits, "")
        else:
            problem = answer(model, request, response, self.suggest, self.limits, "")
        if problem:
            self.reporter.grouped(log_level(problem), f"suggest_trial: {problem}")
        self.reporter.count(f"suggest_{'failed' if problem else 'ok'}")
        return response

    def _round_robin(self, config: AffordanceNetwork, request: SuggestTrial.Request,
                     response: SuggestTrial.Response) -> None:
        candidates = candidates_of(request, self.limits)
        if request.criterion:
            check_criterion(request.criterion)
        actions = check_trials(config, candidates, list(request.actions) or None)
        pairs = len(actions) * len(candidates)
        trials = [(self.turn + k) % pairs for k in range(min(request.max_suggestions or pairs, pairs))]
        self.turn = (self.turn + 1) % pairs
        response.criterion = ROUND_ROBIN
        response.message = NO_MODEL
        response.action_variable = config.group("action")[0]
        response.actions = [actions[k % len(actions)] for k in trials]
        response.candidates = [k // len(actions) for k in trials]
        response.scores = [0.0] * len(trials)
        response.information_gains = [math.nan] * len(trials)
        response.predictive_entropies = [math.nan] * len(trials)


def candidates_of(request: SuggestTrial.Request, limits: SizeLimits) -> list[Candidate]:
    """The request's candidates, each with its readings and labels; ValueError naming what does not fit
    together (the names themselves are checked against the model by ``check_trials``)."""
    n = request.num_candidates
    if n == 0:
        raise EvidenceError("num_candidates is 0: describe at least one object the robot could act on")
    limits.check_list(n, "candidates")
    sensors = _per_candidate(request.sensor_candidates, request.sensor_names, request.sensor_values, n, "sensor")
    labels = _per_candidate(request.variable_candidates, request.variable_names, request.variable_values, n,
                            "variable")
    return [Candidate(sensors[c], labels[c]) for c in range(n)]


def _per_candidate(owners, names, values, n: int, what: str) -> list[dict]:
    """{name: value} of every candidate from the three parallel lists ``<what>_candidates``, ``_names``,
    ``_values``."""
    owners, names, values = list(owners), list(names), list(values)
    if not len(owners) == len(names) == len(values):
        raise ValueError(f"{len(owners)} {what}_candidates, {len(names)} {what}_names and {len(values)} "
                         f"{what}_values: give every name its candidate and its value")
    per = [{} for _ in range(n)]
    for c, name, value in zip(owners, names, values):
        if c >= n:
            raise ValueError(f"{what}_candidates names candidate {c}, but num_candidates is {n} (numbered from 0)")
        if name in per[c]:
            raise ValueError(f"{what} '{name}' is given twice for candidate {c}")
        per[c][name] = value
    return per


def suggest_response(model: AffordanceNetwork, request: SuggestTrial.Request, response: SuggestTrial.Response,
                     limits: SizeLimits) -> None:
    """The SuggestTrial response to ``request`` from ``model``."""
    result = suggest_trials(model, candidates_of(request, limits), list(request.actions) or None,
                            request.criterion or "information_gain", request.max_suggestions or None)
    suggestions = result.suggestions
    effects = model.group("effect")
    response.criterion = result.criterion
    response.action_variable = result.action_variable
    response.message = result.note or ranked_by(result.criterion)
    response.actions = [s.action for s in suggestions]
    response.candidates = [s.candidate for s in suggestions]
    response.scores = [s.score for s in suggestions]
    response.information_gains = [s.information_gain for s in suggestions]
    response.predictive_entropies = [s.predictive_entropy for s in suggestions]
    response.effect_variables = effects
    expected = [(s, name, s.expected[name]) for s in suggestions for name in effects]
    response.expected_labels = [label for _, _, label in expected]
    response.expected_probabilities = [s.effects[name][label] for s, name, label in expected]
    response.probability_stddevs = [s.effect_stddevs[name][label] if s.effect_stddevs else math.nan
                                    for s, name, label in expected]
    response.reading_names = list(suggestions[0].readings)
    response.reading_means = [r["mean"] for s in suggestions for r in s.readings.values()]
    response.reading_stddevs = [r["stddev"] for s in suggestions for r in s.readings.values()]
