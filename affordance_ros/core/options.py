"""Learning options: one frozen dataclass that holds the defaults and checks every value.

The learner, the command line and the node all take their options from here. Precedence,
highest first: options given explicitly, then the configuration's ``learning`` block, then
the defaults below (``LearningOptions.resolve``).
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import ModelFormatError
from .network import GROUPS
from .number_checks import is_finite_number

STRUCTURES = ("average", "k2", "mcmc", "fixed")
SCORES = ("k2", "bdeu", "bic", "cv")
METHODS = ("em", "discrete")
EM_INITS = ("uniform", "discrete", "random")
EM_ACCELERATIONS = ("squarem", "none")
# how core.suggest ranks trials (here, not there: the command line lists them without loading scipy)
SUGGEST_CRITERIA = ("information_gain", "predictive_information", "predictive_entropy", "least_tried")


# the values a choice option takes
CHOICES = {"structure": STRUCTURES, "score": SCORES, "method": METHODS, "em_init": EM_INITS,
           "em_acceleration": EM_ACCELERATIONS}


def _option(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class OptionHelp:
    """What a user is told of one learning option (the command line's help comes from here)."""

    name: str
    type: type
    default: Any
    choices: tuple | None
    help: str


@dataclass(frozen=True)
class LearningOptions:
    """How ``AffordanceLearner`` learns; every field is checked on construction."""

    structure: str | None = _option(None, "average (a weighted sample of the structures the cases support; every "
                                          "answer averages over it), k2 or mcmc (one structure, searched on "
                                          "MAP-assigned values; its intervals assume it), or fixed (keep the "
                                          "configured parents). Default: average, or k2 where another option asks "
                                          "for one structure (method discrete, structural_em, prior 0, "
                                          "posterior_draws 0, fit_sensors)")
    score: str = _option("k2", "structure score: k2, bdeu (with ess), bic, or cv (the family's cross-validated "
                               "log-likelihood)")
    max_parents: int = _option(4, "at most this many parents per variable")
    arc_prior: float = _option(0.95, "structure 'average': the prior probability of each arc the groups allow (0.5: "
                                    "every structure as likely; higher favours arcs, lower favours sparse networks)")
    prior: float = _option(1.0, "Dirichlet pseudo-count per CPT entry (0: maximum likelihood)")
    tol: float = _option(1e-3, "EM stops when the RMS parameter change is below this")
    max_iter: int = _option(100, "EM stops after this many iterations")
    method: str = _option("em", "em, or discrete: the paper's baseline (MAP-assign, then count)")
    mcmc_samples: int = _option(5000, "structures MCMC samples after burn-in")
    mcmc_burn_in: int = _option(1000, "MCMC steps before the samples")
    seed: int = _option(0, "seed of MCMC, of EM's random starts and of the sensor fits (reproducible)")
    forbidden_arcs: tuple = _option((), "[parent, child] pairs never learned")
    # the action is the experiment's input: nothing points into it; effects do not cause object features
    forbidden_group_arcs: tuple = _option((("effect", "action"), ("object", "action"), ("effect", "object")),
                                          "no arc from the first group of a pair into the second")
    order: tuple | None = _option(None, "K2's node order (variable names); default: actions, objects, effects")
    ess: float = _option(1.0, "equivalent sample size of the bdeu score")
    em_init: str = _option("uniform", "EM's start: uniform, discrete or random (Dirichlet(1) rows, seeded by seed)")
    fit_sensors: bool = _option(False, "re-estimate the sensor means/stddevs inside EM (when only roughly known)")
    prior_strength: float = _option(0.0, "how many cases the prior model is worth (equivalent sample size)")
    structural_em: int = _option(0, "rounds of structural EM after the first EM (0: none)")
    n_init: int = _option(1, "EM starts (the first from em_init, the others random, seeded by seed); the best "
                             "is kept")
    em_acceleration: str = _option("squarem", "squarem (the same optimum in fewer iterations) or none (plain EM)")
    latent: tuple = _option((), "variables no case observes by design (latent causes, learned from what they cause); "
                                "any other variable, or sensor column, without data is an error")
    allow_missing: bool = _option(False, "learn even when a configured variable or sensor column has no data at all "
                                         "(a warning instead of the error; such a variable is learned as latent)")
    posterior_draws: int = _option(50, "draws of the exact posterior of the CPTs a learn keeps with the model "
                                       "(imputations of the hidden values by a Gibbs sampler, each a Dirichlet of "
                                       "CPTs): what answers' standard deviations, credible intervals and the "
                                       "strategies but 'expected' come from; 0: none")
    entity_column: str | None = _option(None, "a column of the cases that is not a variable (e.g. object_id) "
                                              "naming the entity (object, tool, hand) each trial is about: "
                                              "sensors cluster entities, not their repeated readings, and the "
                                              "cross-validation inside learning holds out whole entities")

    def __post_init__(self):
        # (not a field: whether the structure was chosen from the other options, so that ``replace`` chooses again)
        object.__setattr__(self, "_structure_chosen", self.structure is None)
        if self.structure is None:
            single = (self.method == "discrete" or self.structural_em or not self.prior > 0
                      or self.posterior_draws == 0 or self.fit_sensors)
            object.__setattr__(self, "structure", "k2" if single else "average")
        for name, choices in CHOICES.items():
            _choice(name, getattr(self, name), choices)
        for name in ("max_parents", "mcmc_samples", "mcmc_burn_in", "seed", "structural_em", "posterior_draws"):
            object.__setattr__(self, name, _integer(name, getattr(self, name)))
        for name in ("max_iter", "n_init"):
            object.__setattr__(self, name, _integer(name, getattr(self, name), minimum=1))
        for name in ("prior", "prior_strength"):
            object.__setattr__(self, name, _number(name, getattr(self, name), minimum=0.0))
        for name in ("tol", "ess"):
            object.__setattr__(self, name, _number(name, getattr(self, name), minimum=0.0, strict=True))
        object.__setattr__(self, "arc_prior", _number("arc_prior", self.arc_prior, minimum=0.0, strict=True))
        if not self.arc_prior < 1.0:
            raise ModelFormatError(f"learning option 'arc_prior' must be a probability below 1, got {self.arc_prior!r}")
        if self.structure == "average":
            self._check_average()
        if self.score == "cv" and self.structure != "fixed" and self.prior <= 0:
            raise ModelFormatError("learning option 'score' 'cv' needs 'prior' > 0: without pseudo-counts a held-out "
                                   "case in a configuration no training case has gets probability 0; give e.g. "
                                   "prior 0.01, or another score")
        for name in ("fit_sensors", "allow_missing"):
            if not isinstance(getattr(self, name), bool):
                raise ModelFormatError(f"learning option '{name}' must be true or false, got {getattr(self, name)!r}")
        if self.entity_column is not None and (not isinstance(self.entity_column, str) or not self.entity_column):
            raise ModelFormatError(f"learning option 'entity_column' must be a column name, got {self.entity_column!r}")
        object.__setattr__(self, "forbidden_arcs", _pairs("forbidden_arcs", self.forbidden_arcs))
        object.__setattr__(self, "forbidden_group_arcs", _pairs("forbidden_group_arcs", self.forbidden_group_arcs))
        for pair in self.forbidden_group_arcs:
            if any(group not in GROUPS for group in pair):
                raise ModelFormatError(f"learning option 'forbidden_group_arcs': {list(pair)} must name two of "
                                       f"the groups {list(GROUPS)}")
        if self.order is not None:
            object.__setattr__(self, "order", _names("order", self.order))
        object.__setattr__(self, "latent", _names("latent", self.latent))

    def _check_average(self) -> None:
        """ModelFormatError for options that structure 'average' cannot honour, saying what to give instead."""
        if self.prior <= 0:
            raise ModelFormatError("structure 'average' weighs a structure by the marginal likelihood of its CPTs' "
                                   "Dirichlet prior, which needs 'prior' > 0; give e.g. prior 1, or structure k2")
        if self.method != "em":
            raise ModelFormatError("structure 'average' draws the CPTs from their posterior (method 'em'); method "
                                   f"'{self.method}' goes with structure k2, mcmc or fixed")
        if self.structural_em:
            raise ModelFormatError("structural_em re-searches one structure; structure 'average' samples them: give "
                                   "structural_em 0, or structure k2 or mcmc")
        if self.posterior_draws < 1:
            raise ModelFormatError("structure 'average' answers from posterior draws: give posterior_draws >= 1, or "
                                   "structure k2, mcmc or fixed")
        if self.fit_sensors:
            raise ModelFormatError("structure 'average' keeps the sensor models fitted before it samples; fit_sensors "
                                   "(re-estimated inside EM) goes with structure k2, mcmc or fixed")

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
        """The options in force: ``explicit`` ones that are not None, then ``learning``, then the defaults (a default
        structure chosen from all of them).
        """
        cls.from_mapping(learning)
        cls.check_names(explicit)
        return cls(**{**dict(learning), **{k: v for k, v in explicit.items() if v is not None}})

    @classmethod
    def check_names(cls, names) -> None:
        """TypeError naming the option names that are not options (as scikit-learn's estimators refuse them)."""
        unknown = set(names) - set(cls.names())
        if unknown:
            raise TypeError(f"unknown learning options {sorted(unknown)}; known: {list(cls.names())}")

    @classmethod
    def describe(cls, name: str) -> OptionHelp:
        """The type, default, choices and help text of option ``name``."""
        option = {f.name: f for f in dataclasses.fields(cls)}[name]
        default = STRUCTURES[0] if name == "structure" else option.default   # (None: chosen from the other options)
        return OptionHelp(name, type(default), default, CHOICES.get(name), option.metadata["help"])

    def replace(self, **changes) -> "LearningOptions":
        """A copy with the ``changes`` that are not None (an unknown name is an error); a structure that was chosen
        from the other options is chosen again from the new ones.
        """
        self.check_names(changes)
        changes = {k: v for k, v in changes.items() if v is not None}
        if "structure" not in changes and self._structure_chosen:
            changes["structure"] = None
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """JSON-ready: tuples as lists."""
        return {name: _as_json(getattr(self, name)) for name in self.names()}


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ModelFormatError(f"learning option '{name}' is {value!r}; expected one of {list(choices)}")


def _integer(name: str, value, minimum: int = 0) -> int:
    """``value`` as an int (numpy's integers too: a grid of options is often an array), checked."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ModelFormatError(f"learning option '{name}' must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _number(name: str, value, minimum: float, strict: bool = False) -> float:
    """``value`` as a Python number (an int stays one; numpy's become floats), checked."""
    ok = is_finite_number(value) and (value > minimum if strict else value >= minimum)
    if not ok:
        raise ModelFormatError(f"learning option '{name}' must be a finite number {'>' if strict else '>='} "
                               f"{minimum:g}, got {value!r}")
    return value if isinstance(value, (int, float)) else float(value)


def _names(name: str, value) -> tuple:
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) for n in value):
        raise ModelFormatError(f"learning option '{name}' must be a list of variable names, got {value!r}")
    return tuple(value)


def _pairs(name: str, value) -> tuple:
    if isinstance(value, str) or not all(
            not isinstance(pair, str) and len(pair) == 2 and all(isinstance(x, str) for x in pair) for pair in value):
        raise ModelFormatError(f"learning option '{name}' must be a list of [from, to] pairs of names, got {value!r}")
    return tuple(tuple(pair) for pair in value)


def _as_json(value):
    if isinstance(value, tuple):
        return [_as_json(x) for x in value]
    return value
