"""Learning options: one frozen dataclass that holds the defaults and checks every value.

The learner, the command line and the node all take their options from here. Precedence,
highest first: options given explicitly, then the configuration's ``learning`` block, then
the defaults below (``LearningOptions.resolve``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import ModelFormatError
from .network import GROUPS
from .numbers import is_finite_number

STRUCTURES = ("k2", "mcmc", "fixed")
SCORES = ("k2", "bdeu", "bic", "cv")
METHODS = ("em", "discrete")
EM_INITS = ("uniform", "discrete", "random")
EM_ACCELERATIONS = ("squarem", "none")


@dataclass(frozen=True)
class LearningOptions:
    """How ``AffordanceLearner`` learns; every field is checked on construction."""

    structure: str = "k2"
    score: str = "k2"
    max_parents: int = 4
    prior: float = 1.0
    tol: float = 1e-3
    max_iter: int = 100
    method: str = "em"
    mcmc_samples: int = 5000
    mcmc_burn_in: int = 1000
    seed: int = 0
    forbidden_arcs: tuple = ()
    # the action is the experiment's input: nothing points into it; effects do not cause object features
    forbidden_group_arcs: tuple = (("effect", "action"), ("object", "action"), ("effect", "object"))
    order: tuple | None = None
    ess: float = 1.0
    em_init: str = "uniform"
    fit_sensors: bool = False
    prior_strength: float = 0.0
    structural_em: int = 0
    n_init: int = 1
    em_acceleration: str = "squarem"

    def __post_init__(self):
        _choice("structure", self.structure, STRUCTURES)
        _choice("score", self.score, SCORES)
        _choice("method", self.method, METHODS)
        _choice("em_init", self.em_init, EM_INITS)
        _choice("em_acceleration", self.em_acceleration, EM_ACCELERATIONS)
        for name in ("max_parents", "max_iter", "mcmc_samples", "mcmc_burn_in", "seed", "structural_em"):
            _integer(name, getattr(self, name))
        _integer("n_init", self.n_init, minimum=1)
        for name in ("prior", "prior_strength"):
            _number(name, getattr(self, name), minimum=0.0)
        for name in ("tol", "ess"):
            _number(name, getattr(self, name), minimum=0.0, strict=True)
        if self.score == "cv" and self.structure != "fixed" and self.prior <= 0:
            raise ModelFormatError("learning option 'score' 'cv' needs 'prior' > 0: without pseudo-counts a held-out "
                                   "case in a configuration no training case has gets probability 0; give e.g. "
                                   "prior 0.01, or another score")
        if not isinstance(self.fit_sensors, bool):
            raise ModelFormatError(f"learning option 'fit_sensors' must be true or false, got {self.fit_sensors!r}")
        object.__setattr__(self, "forbidden_arcs", _pairs("forbidden_arcs", self.forbidden_arcs))
        object.__setattr__(self, "forbidden_group_arcs", _pairs("forbidden_group_arcs", self.forbidden_group_arcs))
        for pair in self.forbidden_group_arcs:
            if any(group not in GROUPS for group in pair):
                raise ModelFormatError(f"learning option 'forbidden_group_arcs': {list(pair)} must name two of "
                                       f"the groups {list(GROUPS)}")
        if self.order is not None:
            if isinstance(self.order, str) or not all(isinstance(n, str) for n in self.order):
                raise ModelFormatError("learning option 'order' must be a list of variable names")
            object.__setattr__(self, "order", tuple(self.order))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> "LearningOptions":
        """From a configuration's ``learning`` block (or any mapping); unknown keys are an error."""
        unknown = set(options) - set(cls.names())
        if unknown:
            raise ModelFormatError(f"unknown 'learning' options {sorted(unknown)}; known: {list(cls.names())}")
        return cls(**dict(options))

    @classmethod
    def resolve(cls, learning: Mapping[str, Any], **explicit) -> "LearningOptions":
        """The options in force: ``explicit`` ones that are not None, then ``learning``, then the defaults."""
        return cls.from_mapping(learning).replace(**explicit)

    def replace(self, **changes) -> "LearningOptions":
        """A copy with the ``changes`` that are not None (an unknown name is an error)."""
        unknown = set(changes) - set(self.names())
        if unknown:
            raise TypeError(f"unknown learning options {sorted(unknown)}; known: {list(self.names())}")
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict:
        """JSON-ready: tuples as lists."""
        return {name: _as_json(getattr(self, name)) for name in self.names()}


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ModelFormatError(f"learning option '{name}' is {value!r}; expected one of {list(choices)}")


def _integer(name: str, value, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ModelFormatError(f"learning option '{name}' must be an integer >= {minimum}, got {value!r}")


def _number(name: str, value, minimum: float, strict: bool = False) -> None:
    ok = is_finite_number(value) and (value > minimum if strict else value >= minimum)
    if not ok:
        raise ModelFormatError(f"learning option '{name}' must be a finite number {'>' if strict else '>='} "
                               f"{minimum:g}, got {value!r}")


def _pairs(name: str, value) -> tuple:
    if isinstance(value, str) or not all(
            not isinstance(pair, str) and len(pair) == 2 and all(isinstance(x, str) for x in pair) for pair in value):
        raise ModelFormatError(f"learning option '{name}' must be a list of [from, to] pairs of names, got {value!r}")
    return tuple(tuple(pair) for pair in value)


def _as_json(value):
    if isinstance(value, tuple):
        return [_as_json(x) for x in value]
    return value
