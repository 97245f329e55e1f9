"""The estimator that ties learning together: sensors, structure, then parameters.

learner = AffordanceLearner(structure="k2")
learner.fit(config, cases)          # config: AffordanceNetwork without CPTs
learner.model_                      # AffordanceNetwork with CPTs and sensors
learner.result_                     # LearnResult: arcs, log-likelihood, iterations, ...
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .cases import CaseEvidence, CaseSet
from .errors import DataError, ModelFormatError
from .network import AffordanceNetwork
from .options import STRUCTURES, LearningOptions
from .parameters import EMResult, fit_discrete, fit_em, log_likelihood
from .progress import Progress, report
from .sensors import fit_sensors
from .structure import StructureResult, learn_structure, structural_em


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
    warnings: list = field(default_factory=list)


class AffordanceLearner:
    """Learn an affordance model from cases, as the paper does.

    1. fit the sensor models that the configuration leaves open (Gaussian mixtures, BIC);
    2. learn the structure on MAP-assigned values (K2 or MCMC), or keep the configured arcs;
    3. learn the CPTs by EM with the readings as soft evidence (or the Discrete baseline);
    4. with ``structural_em`` > 0, up to that many rounds of structural EM: search the structure
       again on the expected counts under the model of step 3, re-learn the CPTs, repeat.

    Takes the fields of ``LearningOptions`` as keyword arguments (None: not given); options not
    given here come from the configuration's "learning" block, then the defaults.
    """

    def __init__(self, **options):
        LearningOptions.check_names(options)
        self.params = dict(options)

    def get_params(self) -> dict:
        """The options given to this learner (scikit-learn's get_params)."""
        return dict(self.params)

    def options(self, config: AffordanceNetwork) -> LearningOptions:
        """The options in force: those given here, then the config's "learning" block, then the defaults."""
        return LearningOptions.resolve(config.learning, **self.params)

    def fit(self, config: AffordanceNetwork, cases: CaseSet,
            prior_model: AffordanceNetwork | None = None, progress: Progress = None) -> "AffordanceLearner":
        """Learn from ``cases``; with ``prior_model`` (and ``prior_strength`` > 0) the CPTs
        start from what that earlier model knew, worth ``prior_strength`` cases.

        The stages run in this order, each given what the one before made: sensor models (``core.sensors``),
        the cases' evidence under them (``CaseEvidence``, built once), the structure on the MAP values of
        that evidence (``core.structure``), the CPTs by EM on it (``core.parameters``), then the rounds of
        structural EM, which alternate the last two.

        ``progress(phase, iteration, log_likelihood)`` hears of every step (``core.progress``); it may
        stop learning by raising ``LearningCancelled`` or returning False (then nothing is learned).
        """
        start = time.perf_counter()
        opts = self.options(config)
        if cases.n_cases == 0:
            raise DataError("no cases to learn from: record some trials first")
        if opts.structure == "fixed" and not config.structure_known:
            raise ModelFormatError("structure 'fixed' needs 'parents' for every variable in the configuration")
        warnings = missing_data_warnings(config, cases, opts)
        report(progress, "sensors", 0)
        network = fit_sensors(config, cases.readings, cases.labels, opts.seed)
        observed = CaseEvidence(cases, network)
        structure_result = None
        if opts.structure != "fixed":
            network, structure_result = learn_structure(network, observed.map_values(), opts, progress)
        fitted = {}

        def fit_parameters(net: AffordanceNetwork) -> AffordanceNetwork:
            if opts.method == "em":
                fitted["model"], fitted["em"] = fit_em(net, observed, opts, prior_model=prior_model, progress=progress)
            else:
                report(progress, "parameters", 0)
                fitted["model"], fitted["em"] = fit_discrete(net, observed, opts.prior), None
            return fitted["model"]

        model = fit_parameters(network)
        structural_rounds = 0
        if opts.structural_em and opts.structure != "fixed":
            model, structure_result, structural_rounds = structural_em(model, observed, fit_parameters, opts,
                                                                       progress)
        em_result = fitted["em"]
        if em_result is not None:
            ll, iterations, converged = em_result.log_likelihood, em_result.iterations, em_result.converged
        else:
            ll, iterations, converged = log_likelihood(model, observed.evidence()), 0, True
        duration = time.perf_counter() - start
        arc_probabilities = structure_result.arc_probabilities if structure_result else {}
        self.result_ = LearnResult(
            num_cases=cases.n_cases, arcs=model.arcs, log_likelihood=ll, iterations=iterations,
            converged=converged, duration=duration, structure=opts.structure, em=em_result,
            structure_result=structure_result, arc_probabilities=arc_probabilities, warnings=warnings)
        metadata = dict(config.metadata)
        metadata["learned"] = {
            "num_cases": cases.n_cases, "structure": opts.structure, "score": opts.score,
            "method": opts.method, "prior": opts.prior, "log_likelihood": ll, "iterations": iterations,
            "prior_strength": opts.prior_strength if prior_model is not None else 0.0,
            "fit_sensors": opts.fit_sensors, "n_init": opts.n_init, "em_acceleration": opts.em_acceleration,
            **({"structural_em_rounds": structural_rounds} if opts.structural_em else {}),
            "converged": converged, "duration": round(duration, 4),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if warnings:
            metadata["learned"]["warnings"] = warnings
        if arc_probabilities:
            metadata["learned"]["arc_probabilities"] = {f"{a}->{b}": round(float(p), 4)
                                                        for (a, b), p in arc_probabilities.items()}
        self.model_ = AffordanceNetwork(model.variables, metadata, config.learning)
        return self


def missing_data_warnings(config: AffordanceNetwork, cases: CaseSet, options: LearningOptions) -> list[str]:
    """What the configuration expects and no case has (``CaseSet.missing_data``), but the variables
    ``options.latent`` names: DataError saying so, or with ``options.allow_missing`` the warning to give.
    """
    unknown = [name for name in options.latent if name not in config.names]
    if unknown:
        raise ModelFormatError(f"learning option 'latent' names {unknown}, not variables of the configuration "
                               f"{list(config.names)}")
    missing = cases.with_network(config).missing_data(options.latent)
    if not missing:
        return []
    text = "no case has data for the " + (missing[0] if len(missing) == 1 else
                                          f"{', '.join(missing[:-1])} and {missing[-1]}")
    if options.allow_missing:
        return [f"{text}: learned all the same (allow_missing), as if every case had left that data out"]
    raise DataError(f"{text}. Give the cases that data; name a variable no case can observe in the learning "
                    "option 'latent'; or learn without it with the learning option allow_missing (--allow-missing)")


def learning_config(config: AffordanceNetwork, structure: str, current: AffordanceNetwork | None = None,
                    prior: AffordanceNetwork | None = None) -> AffordanceNetwork:
    """The configuration a learn that follows an earlier model starts from.

    With ``structure`` 'fixed' and a ``current`` model, its arcs are kept; with a ``prior`` (the model
    whose CPTs the learn starts from), its sensor models and value labels are taken, so that the new
    readings mean what its CPTs are about.
    """
    if structure == "fixed" and current is not None:
        config = config.with_structure({v.name: v.parents for v in current.variables})
    if prior is not None:
        config = config.replace_variables({v.name: {"values": v.values, "sensor": v.sensor}
                                           for v in prior.variables if v.sensor is not None})
    return config


def format_arcs(arcs) -> list[str]:
    """Arcs as 'Parent->Child' strings."""
    return [f"{a}->{b}" for a, b in arcs]


__all__ = ["AffordanceLearner", "LearnResult", "STRUCTURES", "format_arcs", "learning_config", "missing_data_warnings"]
