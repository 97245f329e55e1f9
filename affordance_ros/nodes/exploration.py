"""Active exploration for a robot: ask the learner's ``~/suggest_trial`` which of the objects in view to act on,
and how, then do that trial.

``ActiveExplorer.step`` (called at the robot's pace) sees a few candidate objects, asks the service about them
and, when the answer comes, has the trial done and sent (``send(action, readings)``). One question at a time;
while the service is not there it waits. An answer with ``success`` false is logged and the trial chosen at
random among the candidates, so that a learner that cannot rank (e.g. a configuration it refuses) never
stops the robot.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..core.suggest import Candidate
from ..srv import SuggestTrial


def suggest_request(candidates: Sequence[Candidate], actions: Sequence[str] = (), criterion: str = "",
                    max_suggestions: int = 0) -> SuggestTrial.Request:
    """The SuggestTrial request about ``candidates`` (their readings and labels, each entry with its candidate)."""
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


class ActiveExplorer:
    """Trials chosen by ``~/suggest_trial`` (``service``) among ``candidates`` objects of ``sampler`` at a time
    (``TrialSampler``: ``candidates(n)``, ``act(objects, index, action)``); each trial goes to
    ``send(action label, {kind: {reading name: value}})``; ``log(level, message)``."""

    def __init__(self, node, sampler, candidates: int, service: str, send: Callable[[str, dict], None],
                 log: Callable[[str, str], None]):
        self.sampler, self.candidates, self.send, self.log = sampler, candidates, send, log
        self.client = node.create_client(SuggestTrial, service)
        self.asking = False  # a question is out
        self.asked = self.refused = 0
        self._waiting_logged = False

    def step(self) -> None:
        """Ask about the next candidates, unless a question is out or the service is not there yet."""
        if self.asking:
            return
        if not self.client.service_is_ready():
            if not self._waiting_logged:
                self.log("info", f"waiting for {self.client.srv_name} to choose the trials")
                self._waiting_logged = True
            return
        objects = self.sampler.candidates(self.candidates)
        request = suggest_request([Candidate(objects.sensors(j)) for j in range(len(objects))], max_suggestions=1)
        self.asking = True
        self.asked += 1
        self.client.call_async(request).add_done_callback(lambda future: self._answered(objects, future))

    def _answered(self, objects, future) -> None:
        self.asking = False
        answer = future.result()
        if answer is not None and answer.success and answer.actions:
            action, index = answer.actions[0], int(answer.candidates[0])
        else:
            self.refused += 1
            why = answer.message if answer is not None else "no answer"
            index = int(self.sampler.rng.integers(len(objects)))
            action = str(self.sampler.rng.choice(self.sampler.actions))
            self.log("warning", f"{self.client.srv_name} did not choose ({why}): a random trial instead")
        self.send(*self.sampler.act(objects, index, action))


__all__ = ["ActiveExplorer", "suggest_request"]
