"""The simulated robot with a task (``exploration:=task``): a wanted effect on objects as they come, each action
chosen by the learner's ``~/select_action`` with a strategy, and the robot's successes and regret against the
ground truth's best action.

Each trial the world brings one object; the robot asks ``select_action(wanted, sensors=its readings,
strategy=...)`` (``AffordanceClient``) and does the action ranked first. The world knows the truth: the effects'
hidden values say whether the trial made the wanted effect, and the ground truth's p(wanted | action, object) of
every action gives the regret of the choice, p(wanted | the best action) - p(wanted | the action chosen) (the
expected regret: the outcome's own chance left out). Before the learner has a model, or while it cannot rank
(a strategy that needs the posterior of a model without one), the action is drawn at random, counted and logged.
Every ``learn_every`` trials, once they are stored, the robot asks the learner for a new model and waits for it;
with the learner's ``online_learning`` every stored trial also refines the model in between.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ...core import AffordanceNetwork, LearningCancelled, rank_actions
from ...core.ground_truth import sample_values
from ...core.predict import STRATEGIES
from ..planner.affordance_client import AffordanceClient
from ..planner.calls import LearnerRefused, LearnerUnavailable
from .exploration import ActiveExplorer, TrialOutlet

EXPLORATION = ("random", "active", "task")
REPORT_EVERY = 50  # trials between the task's log lines


def wanted_effect(text: str, truth: AffordanceNetwork) -> dict:
    """'ObjVel=fast,Contact=long' as {effect variable: label}; ValueError naming what the ground truth lacks."""
    wanted = {}
    for item in (part.strip() for part in text.split(",")):
        name, sep, label = (s.strip() for s in item.partition("="))
        if not sep or not name or not label:
            raise ValueError(f"wanted_effect '{text}': '{item}' must look like VARIABLE=LABEL (e.g. ObjVel=fast)")
        effects = truth.group("effect")
        if name not in effects:
            raise ValueError(f"wanted_effect '{text}': '{name}' is not an effect variable of the world; its effects "
                             f"are {effects}")
        if label not in truth[name].values:
            raise ValueError(f"wanted_effect '{text}': '{name}' has no label '{label}'; its labels are "
                             f"{list(truth[name].values)}")
        wanted[name] = label
    return wanted


def truth_table(truth: AffordanceNetwork, wanted: dict) -> np.ndarray:
    """p(wanted | action, object) of the ground truth, (kinds of object, actions): the kinds numbered as the world
    numbers them (the object variables' codes in their order, last fastest), the actions in their order."""
    objects = truth.group("object")
    cards = [truth[name].card for name in objects]
    actions = list(truth[truth.group("action")[0]].values)
    table = np.empty((math.prod(cards), len(actions)))
    for kind in range(len(table)):
        values = {name: truth[name].values[c] for name, c in zip(objects, np.unravel_index(kind, cards))}
        ranking = rank_actions(truth, wanted, values=values)
        table[kind] = [ranking.probabilities[ranking.actions.index(a)] for a in actions]
    return table


def check_exploration(param: dict) -> None:
    """ValueError for an exploration the robot cannot do with its other parameters."""
    if param["exploration"] not in EXPLORATION:
        raise ValueError(f"exploration '{param['exploration']}' is not one of {list(EXPLORATION)}")
    if param["exploration"] == "task":
        if param["scenario"] != "network":
            raise ValueError("exploration 'task' needs scenario 'network': the ground truth's network knows the "
                             "best action for the wanted effect")
        if param["strategy"] not in STRATEGIES:
            raise ValueError(f"strategy '{param['strategy']}' is not one of {list(STRATEGIES)}")


def trial_chooser(node, param: dict, sampler, robot: TrialOutlet):
    """What chooses the trials of ``robot``: an ActiveExplorer ('active'), a TaskRunner ('task'), or None
    ('random')."""
    if param["exploration"] == "active":
        return ActiveExplorer(node, sampler, param["candidates"], param["suggest_service"], robot,
                              param["suggest_timeout"])
    if param["exploration"] == "task":
        client = AffordanceClient(node, param["learner"])
        return TaskRunner(client, sampler, robot, wanted_effect(param["wanted_effect"], sampler.truth),
                          param["strategy"], param["learn_every"])
    return None


class TaskRunner:
    """The task: ``wanted`` {effect variable: label} on the objects of ``sampler`` (``TrialSampler``: its
    ``truth``, ``candidates(n)``, ``rng``), each action asked of ``client`` (an AffordanceClient) by ``strategy``;
    a new model asked for every ``learn_every`` trials (0: never) once no trial of ``robot`` (a TrialOutlet: it
    does each trial, and logs) waits for its confirmation. ``successes``,
    ``regrets``, ``kinds`` and ``actions_done`` (per trial), ``unranked`` (random actions) and ``summary()`` say
    how it went."""

    def __init__(self, client: AffordanceClient, sampler, robot: TrialOutlet, wanted: dict, strategy: str,
                 learn_every: int = 0):
        self.client = client
        self.sampler = sampler
        self.robot = robot
        self.wanted = wanted
        self.strategy = strategy
        self.learn_every = learn_every
        self.truth: AffordanceNetwork = sampler.truth
        self.actions = list(self.truth[self.truth.group("action")[0]].values)
        self.table = truth_table(self.truth, wanted)
        self.asking = None  # the Future of the question (or the learn) out
        self.learn_due = False
        self.successes = 0
        self.unranked = 0
        self.unanswered = 0
        self.learns = 0
        self.regrets: list[float] = []
        self.best_chances: list[float] = []  # p(wanted | the best action) of each trial's object
        self.kinds: list[int] = []  # each trial's kind of object (the world's number)
        self.actions_done: list[str] = []  # each trial's action
        self.chosen = Counter()

    def describe(self) -> str:
        return (f"task {self.wanted_text()} on objects as they come, each action chosen by "
                f"{self.client.learner}/select_action ({self.strategy})"
                + (f", a new model asked for every {self.learn_every} trials" if self.learn_every else ""))

    def wanted_text(self) -> str:
        return ", ".join(f"{name}={label}" for name, label in self.wanted.items())

    def step(self) -> None:
        """Ask for the next object's action (or for a learn that is due), unless a question is out."""
        if self.asking is not None:
            return
        if self.learn_due:
            if self.robot.pending:  # (the learn must see the trials so far)
                return
            self.learn_due = False
            self.asking = self.client.learn_async()
            self.asking.add_done_callback(self._learned)
            return
        objects = self.sampler.candidates(1)
        self.asking = self.client.select_action_async(self.wanted, sensors=objects.sensors(0), strategy=self.strategy)
        self.asking.add_done_callback(lambda answer: self._answered(objects, answer))

    def _answered(self, objects, answer) -> None:
        self.asking = None
        try:
            action = answer.result().actions[0]
        except LearnerUnavailable as exc:  # asked again at the next step
            self.unanswered += 1
            self.robot.log("warning", f"{exc}: asking again")
            return
        except LearnerRefused as exc:
            self.unranked += 1
            action = str(self.sampler.rng.choice(self.actions))
            self.robot.log("warning", f"{exc.name} did not rank the actions ({exc}): a random action instead")
        self._do(objects, action)

    def _do(self, objects, action: str) -> None:
        kind, a, truth, rng = int(objects.kinds[0]), self.actions.index(action), self.truth, self.sampler.rng
        codes = np.unravel_index(kind, [truth[name].card for name in truth.group("object")])
        given = {truth.index(name): np.array([c]) for name, c in zip(truth.group("object"), codes)}
        given[truth.index(truth.group("action")[0])] = np.array([a])
        values = sample_values(truth, 1, rng, given)[0]
        effects = {}
        for name in truth.group("effect"):
            sensor, code = truth[name].sensor, values[truth.index(name)]
            if sensor is not None:
                effects[sensor.name] = float(sensor.means[code] + sensor.stddevs[code] * rng.standard_normal())
        self.successes += all(values[truth.index(n)] == truth[n].code(label) for n, label in self.wanted.items())
        self.regrets.append(float(self.table[kind].max() - self.table[kind, a]))
        self.best_chances.append(float(self.table[kind].max()))
        self.kinds.append(kind)
        self.actions_done.append(action)
        self.chosen[action] += 1
        self.robot.send(action, {"object": objects.sensors(0), "effect": effects})
        trials = len(self.regrets)
        self.learn_due = bool(self.learn_every) and trials % self.learn_every == 0
        if trials % REPORT_EVERY == 0:
            self.robot.log("info", self.summary())

    def _learned(self, learned) -> None:
        self.asking = None
        try:
            report = learned.result()
        except (LearnerUnavailable, LearnerRefused, LearningCancelled) as exc:
            self.robot.log("warning", f"the learn asked for after {len(self.regrets)} trials failed: {exc}")
            return
        self.learns += 1
        self.robot.log("info", f"learned from {report.num_cases} cases after {len(self.regrets)} trials")

    def summary(self) -> str:
        """The task so far in a line: successes, and regret against the ground truth's best action."""
        n = len(self.regrets)
        if not n:
            return f"task {self.wanted_text()}: no trial yet"
        last = self.regrets[-REPORT_EVERY:]
        return (f"task {self.wanted_text()} ({self.strategy}): {self.successes} of {n} trials succeeded "
                f"({100 * self.successes / n:.0f} %; the ground truth's best actions: "
                f"{100 * sum(self.best_chances) / n:.0f} % expected); regret against the best action "
                f"{sum(self.regrets):.2f} in all, {sum(self.regrets) / n:.3f} a trial ({sum(last) / len(last):.3f} "
                f"over the last {len(last)}); actions " + ", ".join(f"{a} {self.chosen[a]}" for a in self.actions)
                + (f"; {self.unranked} drawn at random (the learner could not rank)" if self.unranked else ""))


__all__ = ["EXPLORATION", "TaskRunner", "check_exploration", "trial_chooser", "truth_table", "wanted_effect"]
