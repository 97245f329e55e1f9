"""Active exploration for a robot: ask the learner's ``~/suggest_trial`` which of the objects in view to act on,
and how, then do that trial.

``ActiveExplorer.step`` (called at the robot's pace) sees a few candidate objects, asks the service about them
and, when the answer comes, has the trial done and sent (``send(action, readings)``). One question at a time;
while the service is not there it waits; a question without an answer for ``answer_timeout`` seconds is asked
again (an answer can be lost on the way back). An answer with ``success`` false is logged and the trial chosen at
random among the candidates, so that a learner that cannot rank (e.g. a configuration it refuses) never
stops the robot.
"""

from __future__ import annotations

import time
from typing import Protocol

from ...core.suggest import Candidate
from ...srv import SuggestTrial
from ..contract import reply_qos
from ..planner.replies import suggest_request


class TrialOutlet(Protocol):
    """What a robot that lets another choose its trials offers the chooser."""

    @property
    def pending(self) -> int:
        """Trials sent and not yet confirmed by the learner."""

    def send(self, action: str, readings: dict) -> None:
        """Do and send the trial ``action`` with the ``readings`` {kind: {reading name: value}}."""

    def log(self, level: str, message: str) -> None:
        """Log ``message`` at ``level`` (info, warning)."""


class ActiveExplorer:
    """Trials chosen by ``~/suggest_trial`` (``service``) among ``candidates`` objects of ``sampler`` at a time
    (``TrialSampler``: ``candidates(n)``, ``act(objects, index, action)``); each trial goes to ``robot`` (a
    TrialOutlet), which also logs; a question unanswered for ``answer_timeout`` seconds is given up and asked
    again."""

    def __init__(self, node, sampler, candidates: int, service: str, robot: TrialOutlet, answer_timeout: float = 5.0):
        self.sampler = sampler
        self.candidates = candidates
        self.robot = robot
        self.answer_timeout = answer_timeout
        self.client = node.create_client(SuggestTrial, service, qos_profile=reply_qos())
        self.asking = None  # (the answer's future, when it was asked) while a question is out
        self.asked = 0
        self.refused = 0
        self.unanswered = 0
        self._waiting_logged = False

    def describe(self) -> str:
        return (f"active exploration: {self.candidates} candidate objects a trial, the trial chosen by "
                f"{self.client.srv_name}")

    def summary(self) -> str:
        return (f"{self.asked} trials asked of {self.client.srv_name} ({self.refused} not chosen: random, "
                f"{self.unanswered} asked again)")

    def step(self) -> None:
        """Ask about the next candidates, unless a question is out or the service is not there yet."""
        if self.asking is not None:
            future, asked_at = self.asking
            if time.monotonic() - asked_at < self.answer_timeout:
                return
            self.client.remove_pending_request(future)
            self.asking = None
            self.unanswered += 1
            self.robot.log("warning", f"no answer from {self.client.srv_name} within {self.answer_timeout:g} s "
                                f"({self.unanswered} so far): asking again")
        if not self.client.service_is_ready():
            if not self._waiting_logged:
                self.robot.log("info", f"waiting for {self.client.srv_name} to choose the trials")
                self._waiting_logged = True
            return
        objects = self.sampler.candidates(self.candidates)
        request = suggest_request([Candidate(objects.sensors(j)) for j in range(len(objects))], max_suggestions=1)
        self.asked += 1
        future = self.client.call_async(request)
        self.asking = (future, time.monotonic())
        future.add_done_callback(lambda done: self._answered(objects, done))

    def _answered(self, objects, future) -> None:
        if self.asking is None or self.asking[0] is not future:  # given up on: asked again since
            return
        self.asking = None
        answer = future.result()
        if answer is not None and answer.success and answer.actions:
            action, index = answer.actions[0], int(answer.candidates[0])
        else:
            self.refused += 1
            why = answer.message if answer is not None else "no answer"
            index = int(self.sampler.rng.integers(len(objects)))
            action = str(self.sampler.rng.choice(self.sampler.actions))
            self.robot.log("warning", f"{self.client.srv_name} did not choose ({why}): a random trial instead")
        self.robot.send(*self.sampler.act(objects, index, action))


__all__ = ["ActiveExplorer", "TrialOutlet"]
