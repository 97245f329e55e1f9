"""Worlds a simulated robot explores, one trial at a time: the objects it sees, then what an action does to one.

``NetworkWorld``: a ground-truth network (``core.ground_truth``), seen through its sensors; an action's effects
follow the action and the object's values. Its ``design`` says how the robot's objects and actions come:
``balanced`` (the default), as an experimenter puts them in front of the robot, every kind of object and every
action equally often (``Rounds``); ``truth``, as the ground truth's own CPTs draw them (Dirichlet(1) rows: some
kinds and actions almost never). ``ScenarioWorld``: a realistic scenario of ``core.scenarios``: the objects are
(tool or hand posture, object) pairs, every kind as likely, seen through their descriptors; the effects are
displacements. Both number their kinds of object, so that a systematic design can take each in turn
(``of_kind``), and their actions are the labels of the action variable ``action_variable``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ground_truth import sample_values
from .network import AffordanceNetwork
from .scenarios import (
    ACTIONS,
    HAND_OBJECTS,
    HANDS,
    OBJECTS,
    SCENARIOS,
    TOOLS,
    hands_effects,
    hands_views,
    tools_effects,
    tools_views,
)


@dataclass(frozen=True)
class Objects:
    """Objects a robot sees: ``kinds`` (n,) what each is (the world's number for it, hidden from the robot) and
    ``readings`` {reading name: (n,)} what the robot's sensors read of them.
    """

    kinds: np.ndarray
    readings: dict

    def __len__(self) -> int:
        return len(self.kinds)

    def take(self, rows) -> "Objects":
        """The objects at ``rows`` (indices)."""
        rows = np.atleast_1d(rows)
        return Objects(self.kinds[rows], {name: x[rows] for name, x in self.readings.items()})

    def sensors(self, j: int) -> dict:
        """{reading name: reading} of object ``j``, as a robot publishes them."""
        return {name: float(x[j]) for name, x in self.readings.items()}


DESIGNS = ("balanced", "truth")  # how a NetworkWorld's objects and actions come (the module's docstring)


class Rounds:
    """Choices among ``size`` made in rounds, each round every choice once in a random order: after any number of
    draws, every choice was drawn as often as any other, to one.
    """

    def __init__(self, size: int):
        self.size = int(size)
        self._left = np.zeros(0, dtype=np.int64)  # what is left of the round under way

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The next ``n`` choices (n,), numbers below ``size``."""
        rounds = max(0, -(-(n - len(self._left)) // self.size))
        fresh = rng.permuted(np.tile(np.arange(self.size, dtype=np.int64), (rounds, 1)), axis=1).ravel()
        drawn = np.concatenate([self._left, fresh])
        self._left = drawn[n:]
        return drawn[:n]


def designed(truth: AffordanceNetwork, design: str = "balanced") -> AffordanceNetwork:
    """The network a ``design`` of ``DESIGNS`` makes the trials follow: for ``truth``, the ground truth itself; for
    ``balanced``, the ground truth with its action and object variables' CPTs uniform (every action on every kind
    of object equally likely; what an action does to an object stays the truth's).
    """
    if design not in DESIGNS:
        raise ValueError(f"design '{design}' is not one of {list(DESIGNS)}")
    if design == "truth" or not truth.parameterised:
        return truth
    chosen = [*truth.group("action"), *truth.group("object")]
    wrong = [(name, p) for name in chosen for p in truth[name].parents or () if p not in chosen]
    if wrong:
        raise ValueError(f"the design '{design}' chooses actions and objects, but {wrong[0][0]} depends on "
                         f"{wrong[0][1]}: give design 'truth'")
    return truth.with_cpts({name: np.full_like(truth[name].cpt, 1.0 / truth[name].card) for name in chosen})


class NetworkWorld:
    """The world of a ground-truth network with one action variable; objects are its object variables' values,
    chosen by ``design`` (``DESIGNS``; the module's docstring).
    """

    def __init__(self, truth: AffordanceNetwork, design: str = "balanced"):
        actions = truth.group("action")
        if len(actions) != 1:
            raise ValueError(f"a world needs one action variable; the network has {actions}")
        self.truth = truth
        if design not in DESIGNS:
            raise ValueError(f"design '{design}' is not one of {list(DESIGNS)}")
        self.design = design
        self.action_variable = actions[0]
        self.actions = truth[self.action_variable].values
        self._action = truth.index(self.action_variable)
        self._objects = [truth.index(name) for name in truth.group("object")]
        self._cards = tuple(truth.variables[i].card for i in self._objects)
        self.n_kinds = int(np.prod(self._cards))
        self._kinds = Rounds(self.n_kinds)  # the balanced design's objects in view, and its (kind, action) pairs
        self._pairs = Rounds(self.n_kinds * len(self.actions))

    def objects(self, n: int, rng: np.random.Generator) -> Objects:
        """``n`` objects as they come: by the design."""
        if self.design == "balanced":
            return self.of_kind(self._kinds.draw(n, rng), rng)
        codes = sample_values(self.truth, n, rng)[:, self._objects]
        return self._seen(codes, rng)

    def trials(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The hidden values (n, variables) of ``n`` whole trials, the objects and the actions by the design (the
        rest follows them): design ``truth`` draws them all from the ground truth at once.
        """
        if self.design != "balanced":
            return sample_values(self.truth, n, rng)
        pairs = self._pairs.draw(n, rng)
        codes = np.unravel_index(pairs // len(self.actions), self._cards)
        given = {i: c for i, c in zip(self._objects, codes)}
        given[self._action] = pairs % len(self.actions)
        return sample_values(self.truth, n, rng, given)

    def of_kind(self, kinds, rng: np.random.Generator) -> Objects:
        """An object of each of ``kinds`` (numbers below ``n_kinds``)."""
        codes = np.stack(np.unravel_index(np.asarray(kinds), self._cards), axis=1)
        return self._seen(codes, rng)

    def act(self, objects: Objects, actions, rng: np.random.Generator) -> dict:
        """The effect readings {reading name: (n,)} of doing ``actions`` (labels) on ``objects``."""
        codes = np.stack(np.unravel_index(objects.kinds, self._cards), axis=1)
        given = {i: codes[:, j] for j, i in enumerate(self._objects)}
        given[self._action] = np.array([self.actions.index(a) for a in actions])
        values = sample_values(self.truth, len(objects), rng, given)
        return self._readings(values, self.truth.group("effect"), rng)

    def _seen(self, codes: np.ndarray, rng) -> Objects:
        values = np.zeros((len(codes), len(self.truth)), dtype=np.int64)
        values[:, self._objects] = codes
        kinds = np.ravel_multi_index(tuple(codes.T), self._cards) if len(codes) else np.zeros(0, dtype=np.int64)
        return Objects(kinds, self._readings(values, self.truth.group("object"), rng))

    def _readings(self, values: np.ndarray, names, rng) -> dict:
        out = {}
        for name in names:
            sensor = self.truth[name].sensor
            if sensor is not None:
                codes = values[:, self.truth.index(name)]
                out[sensor.name] = sensor.means[codes] + sensor.stddevs[codes] * rng.standard_normal(len(codes))
        return out


class ScenarioWorld:
    """The world of scenario ``tools`` (tool, object) or ``hands`` (hand posture, object); every kind as likely."""

    def __init__(self, scenario: str):
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario '{scenario}'; expected one of {list(SCENARIOS)}")
        self.scenario = scenario
        self.action_variable = "Action"
        self.actions = ACTIONS
        held, objects = (TOOLS, OBJECTS) if scenario == "tools" else (HANDS, HAND_OBJECTS)
        self.kinds = [(h, o) for h in held for o in objects]
        self.n_kinds = len(self.kinds)
        self._views = tools_views if scenario == "tools" else hands_views
        self._effects = tools_effects if scenario == "tools" else hands_effects

    def objects(self, n: int, rng: np.random.Generator) -> Objects:
        """``n`` objects as they come."""
        return self.of_kind(rng.integers(self.n_kinds, size=n), rng)

    def of_kind(self, kinds, rng: np.random.Generator) -> Objects:
        """An object of each of ``kinds`` (numbers below ``n_kinds``)."""
        kinds = np.asarray(kinds, dtype=np.int64)
        held, objects = self._pairs(kinds)
        return Objects(kinds, self._views(held, objects, rng))

    def act(self, objects: Objects, actions, rng: np.random.Generator) -> dict:
        """The displacements {"dx", "dy"} (n,) of doing ``actions`` on ``objects``."""
        held, kinds = self._pairs(objects.kinds)
        return self._effects(held, kinds, np.array(actions, dtype=object), rng)

    def _pairs(self, kinds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = [self.kinds[k] for k in kinds]
        return (np.array([h for h, _ in pairs], dtype=object), np.array([o for _, o in pairs], dtype=object))


__all__ = ["DESIGNS", "NetworkWorld", "Objects", "Rounds", "ScenarioWorld", "designed"]
