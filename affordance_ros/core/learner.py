"""The estimator that ties learning together: sensors, structure, then parameters.

    learner = AffordanceLearner(structure="k2")
    learner.fit(config, cases)          # config: AffordanceNetwork without CPTs
    learner.model_                      # AffordanceNetwork with CPTs and sensors
    learner.result_                     # LearnResult: arcs, log-likelihood, iterations, ...
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .cases import CaseSet
from .errors import DataError, ModelFormatError
from .learning import EMResult, fit_discrete, fit_em, log_likelihood
from .network import AffordanceNetwork
from .sensors import fit_sensors
from .structure import StructureResult, learn_structure

STRUCTURES = ("k2", "mcmc", "fixed")
METHODS = ("em", "discrete")
_OPTIONS = ("structure", "score", "max_parents", "prior", "tol", "max_iter", "method", "mcmc_samples",
            "mcmc_burn_in", "seed", "forbidden_arcs", "forbidden_group_arcs", "order", "ess", "em_init",
            "fit_sensors", "prior_strength")


@dataclass
class LearnResult:
    """What one learning run did, for logs, the Learn service and the model's metadata."""

    num_cases: int
    arcs: list
    log_likelihood: float
    iterations: int
    converged: bool
    duration: float
    structure: str
    em: EMResult | None = None
    structure_result: StructureResult | None = None
    arc_probabilities: dict = field(default_factory=dict)


class AffordanceLearner:
    """Learn an affordance model from cases, as the paper does.

    1. fit the sensor models that the configuration leaves open (Gaussian mixtures, BIC);
    2. learn the structure on MAP-assigned values (K2 or MCMC), or keep the configured arcs;
    3. learn the CPTs by EM with the readings as soft evidence (or the Discrete baseline).

    Options not given here are taken from the configuration's "learning" block, then the defaults.
    """

    def __init__(self, structure: str | None = None, score: str | None = None, max_parents: int | None = None,
                 prior: float | None = None, tol: float | None = None, max_iter: int | None = None,
                 method: str | None = None, mcmc_samples: int | None = None, mcmc_burn_in: int | None = None,
                 seed: int | None = None, forbidden_arcs=None, forbidden_group_arcs=None, order=None,
                 ess: float | None = None, em_init: str | None = None, fit_sensors: bool | None = None,
                 prior_strength: float | None = None):
        self.structure = structure
        self.score = score
        self.max_parents = max_parents
        self.prior = prior
        self.tol = tol
        self.max_iter = max_iter
        self.method = method
        self.mcmc_samples = mcmc_samples
        self.mcmc_burn_in = mcmc_burn_in
        self.seed = seed
        self.forbidden_arcs = forbidden_arcs
        self.forbidden_group_arcs = forbidden_group_arcs
        self.order = order
        self.ess = ess
        self.em_init = em_init
        self.fit_sensors = fit_sensors
        self.prior_strength = prior_strength

    def options(self, config: AffordanceNetwork) -> dict:
        """The options in force: explicit arguments, then the config's "learning" block, then defaults."""
        unknown = set(config.learning) - set(_OPTIONS)
        if unknown:
            raise ModelFormatError(f"unknown 'learning' options {sorted(unknown)}; known: {list(_OPTIONS)}")
        defaults = {"structure": "k2", "score": "k2", "max_parents": 4, "prior": 1.0, "tol": 1e-3,
                    "max_iter": 100, "method": "em", "mcmc_samples": 5000, "mcmc_burn_in": 1000, "seed": 0,
                    "forbidden_arcs": [], "forbidden_group_arcs": [["effect", "action"], ["effect", "object"]],
                    "order": None, "ess": 1.0, "em_init": "uniform", "fit_sensors": False,
                    "prior_strength": 0.0}
        opts = {k: getattr(self, k) if getattr(self, k) is not None else config.learning.get(k, defaults[k])
                for k in _OPTIONS}
        if opts["structure"] not in STRUCTURES:
            raise ModelFormatError(f"structure '{opts['structure']}' is not one of {list(STRUCTURES)}")
        if opts["method"] not in METHODS:
            raise ModelFormatError(f"method '{opts['method']}' is not one of {list(METHODS)}")
        return opts

    def fit(self, config: AffordanceNetwork, cases: CaseSet,
            prior_model: AffordanceNetwork | None = None) -> "AffordanceLearner":
        """Learn from ``cases``; with ``prior_model`` (and ``prior_strength`` > 0) the CPTs
        start from what that earlier model knew, worth ``prior_strength`` cases."""
        start = time.perf_counter()
        opts = self.options(config)
        if cases.n_cases == 0:
            raise DataError("no cases to learn from: record some trials first")
        if opts["structure"] == "fixed" and not config.structure_known:
            raise ModelFormatError("structure 'fixed' needs 'parents' for every variable in the configuration")
        network = fit_sensors(config, cases.readings, seed=opts["seed"])
        cases = cases.with_network(network)
        structure_result = None
        if opts["structure"] != "fixed":
            network, structure_result = learn_structure(
                network, cases, method=opts["structure"], score=opts["score"], max_parents=opts["max_parents"],
                order=opts["order"], forbidden_arcs=opts["forbidden_arcs"],
                forbidden_group_arcs=opts["forbidden_group_arcs"], n_samples=opts["mcmc_samples"],
                burn_in=opts["mcmc_burn_in"], seed=opts["seed"], ess=opts["ess"])
            cases = cases.with_network(network)
        em_result = None
        if opts["method"] == "em":
            model, em_result = fit_em(network, cases, prior=opts["prior"], tol=opts["tol"],
                                      max_iter=opts["max_iter"], init=opts["em_init"], prior_model=prior_model,
                                      prior_strength=opts["prior_strength"], fit_sensors=opts["fit_sensors"])
            ll, iterations, converged = em_result.log_likelihood, em_result.iterations, em_result.converged
        else:
            model = fit_discrete(network, cases, prior=opts["prior"])
            ll, iterations, converged = log_likelihood(model, cases), 0, True
        duration = time.perf_counter() - start
        arc_probabilities = structure_result.arc_probabilities if structure_result else {}
        self.result_ = LearnResult(
            num_cases=cases.n_cases, arcs=model.arcs, log_likelihood=ll, iterations=iterations,
            converged=converged, duration=duration, structure=opts["structure"], em=em_result,
            structure_result=structure_result, arc_probabilities=arc_probabilities)
        metadata = dict(config.metadata)
        metadata["learned"] = {
            "num_cases": cases.n_cases, "structure": opts["structure"], "score": opts["score"],
            "method": opts["method"], "prior": opts["prior"], "log_likelihood": ll, "iterations": iterations,
            "prior_strength": opts["prior_strength"] if prior_model is not None else 0.0,
            "fit_sensors": opts["fit_sensors"],
            "converged": converged, "duration": round(duration, 4),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if arc_probabilities:
            metadata["learned"]["arc_probabilities"] = {f"{a}->{b}": round(float(p), 4)
                                                        for (a, b), p in arc_probabilities.items()}
        self.model_ = AffordanceNetwork(model.variables, metadata, config.learning)
        return self


def format_arcs(arcs) -> list[str]:
    return [f"{a}->{b}" for a, b in arcs]


__all__ = ["AffordanceLearner", "LearnResult", "STRUCTURES", "format_arcs"]
