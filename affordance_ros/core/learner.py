"""The estimator that ties learning together: sensors, structure, then parameters.

learner = AffordanceLearner(structure="k2")
learner.fit(config, cases)          # config: AffordanceNetwork without CPTs
learner.model_                      # AffordanceNetwork with CPTs and sensors
learner.result_                     # LearnResult: arcs, log-likelihood, iterations, ...
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .cases import CaseEvidence, CaseSet, missing_data
from .conditions import own_condition_prior, own_condition_support
from .em import EMResult
from .errors import DataError, ModelFormatError
from .network import AffordanceNetwork, SensorModel, WeightedNetwork
from .options import STRUCTURES, LearningOptions
from .parameters import family_priors, fit_discrete, fit_em, log_likelihood
from .posterior_sampling import EXACT_CASES, PosteriorSample, dirichlet_prior, draw_posterior, scaled_to, with_draws
from .progress import Progress, report
from .sensors import fit_sensors
from .structure import StructureResult, learn_structure, structural_em
from .structure_sampling import StructureSample, dense_structure, network_of, sample_structures

# Trials' worth of prior a condition variable's CPT row gives its own condition
# (``own_condition_prior``): enough that a parent configuration no case has predicts its condition's
# centre, little next to trials.
OWN_CONDITION_TRIALS = 10.0


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
    structures: StructureSample | None = None


class AffordanceLearner:
    """Learn an affordance model from cases, as the paper does.

    1. fit the sensor models that the configuration leaves open (Gaussian mixtures, BIC);
    2. with structure 'average' (the default), draw a weighted sample of structures with their CPTs' posterior
       (``core.structure_sampling``: the hidden values integrated over by a Gibbs sampler, never MAP-assigned);
       every answer then averages over it (``core.posterior_answers``). Otherwise one structure:
    3. learn the structure on MAP-assigned values (K2 or MCMC), or keep the configured arcs;
    4. learn the CPTs by EM with the readings as soft evidence (or the Discrete baseline);
    5. with ``structural_em`` > 0, up to that many rounds of structural EM: search the structure
       again on the expected counts under the model of step 3, re-learn the CPTs, repeat.
    A single structure's answers say how sure the model is of its CPTs given that structure (their intervals assume
    it, and its metadata "learned" says so: ``intervals_assume_structure``).

    A variable whose values are the conditions of some variables (a sensor's ``cluster_by``, fitted by
    ``core.conditions``: every combination of the values of the variables that matter) has those variables
    as its parents, not searched (its values are defined by them: the cross-validation of its sensor chose
    them, holding out entities where the cases name them); with a fixed structure, its conditions are
    those of its parents (``conditions_within_parents``). Its CPT's rows point at their own conditions
    (``condition_priors``) and have structural zeros on the other conditions' cores (``condition_supports``).

    Takes the fields of ``LearningOptions`` as keyword arguments (None: not given); options not
    given here come from the configuration's "learning" block, then the defaults.
    """

    def __init__(self, **options):
        LearningOptions.check_names(options)
        self.params = dict(options)

    def __getattr__(self, name: str):
        # (only for attributes not found: model_ and result_ before fit)
        if name in ("model_", "result_"):
            raise AttributeError(f"this AffordanceLearner has no {name} yet: call fit(config, cases) first")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

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
        _check_types(config, cases, prior_model)
        opts = self.options(config)
        if cases.n_cases == 0:
            raise DataError("no cases to learn from: " + (f"'{cases.source}' has a header but no rows" if cases.source
                                                          else "record some trials first"))
        if opts.structure == "fixed" and not config.structure_known:
            raise ModelFormatError("structure 'fixed' needs 'parents' for every variable in the configuration")
        if prior_model is not None:
            _check_prior_model(prior_model, opts)
        warnings = missing_data_warnings(config, cases, opts)
        report(progress, "sensors", 0)
        if opts.structure == "fixed":
            config = conditions_within_parents(config)
        entities = cases.extra.get(opts.entity_column) if opts.entity_column else None
        if opts.entity_column and entities is None:
            warnings.append(f"learning option 'entity_column' names '{opts.entity_column}', a column these cases do "
                            "not have: the sensors cluster distinct readings, and learning holds out cases, not "
                            "entities")
        sensors = fit_sensors(config, cases.readings, cases.labels, opts.seed, entities)
        network, warnings = sensors.network, warnings + sensors.warnings
        observed = CaseEvidence(cases, network)
        structure_result = None
        fixed = {v.name: v.sensor.cluster_by for v in _condition_variables(network)}
        if opts.structure == "average":
            return self._fit_average(config, network, observed, opts, prior_model, fixed, warnings, start, progress)
        if opts.structure != "fixed":
            network, structure_result = learn_structure(network, observed.map_values(), opts, progress, fixed)
        fitted = {}

        def fit_parameters(net: AffordanceNetwork) -> AffordanceNetwork:
            if opts.method == "em":
                fitted["model"], fitted["em"] = fit_em(net, observed, opts, prior_model=prior_model, progress=progress,
                                                       pseudo_counts=condition_priors(net),
                                                       support=condition_supports(net))
            else:
                report(progress, "parameters", 0)
                fitted["model"], fitted["em"] = fit_discrete(net, observed, opts.prior), None
            return fitted["model"]

        model = fit_parameters(network)
        structural_rounds = 0
        if opts.structural_em and opts.structure != "fixed":
            model, structure_result, structural_rounds = structural_em(model, observed, fit_parameters, opts,
                                                                       progress, fixed)
        if opts.posterior_draws:
            model = with_draws(model, _posterior(model, observed, posterior_prior(model, opts, prior_model), opts,
                                                 progress), cases.n_cases)
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
        if "posterior" in model.metadata:
            metadata["posterior"] = model.metadata["posterior"]
        metadata["learned"] = {
            "num_cases": cases.n_cases, "structure": opts.structure, "score": opts.score,
            "method": opts.method, "prior": opts.prior, "log_likelihood": ll, "iterations": iterations,
            "prior_strength": opts.prior_strength if prior_model is not None else 0.0,
            "fit_sensors": opts.fit_sensors, "n_init": opts.n_init, "em_acceleration": opts.em_acceleration,
            **({"structural_em_rounds": structural_rounds} if opts.structural_em else {}),
            "converged": converged, "duration": round(duration, 4),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "intervals_assume_structure": True,
        }
        if warnings:
            metadata["learned"]["warnings"] = list(warnings)
        if arc_probabilities:
            metadata["learned"]["arc_probabilities"] = {f"{a}->{b}": round(float(p), 4)
                                                        for (a, b), p in arc_probabilities.items()}
        self.model_ = AffordanceNetwork(model.variables, metadata, config.learning)
        return self

    def _fit_average(self, config: AffordanceNetwork, network: AffordanceNetwork, observed: CaseEvidence,
                     opts: LearningOptions, prior_model: AffordanceNetwork | None, fixed: dict, warnings: list,
                     start: float, progress: Progress) -> "AffordanceLearner":
        """``fit`` with structure 'average': the sample of structures and their CPTs' posterior (``core.
        structure_sampling``) on every case, or on a random subset of ``EXACT_CASES`` of them whose draws are then
        scaled to all (``scaled_to``).
        """
        n_cases = observed.n_cases
        fixed_at = {network.index(child): tuple(network.index(p) for p in parents) for child, parents in fixed.items()}
        chained = observed
        if n_cases > EXACT_CASES:
            rows = np.sort(np.random.default_rng([opts.seed, 33]).choice(n_cases, EXACT_CASES, replace=False))
            chained = CaseEvidence(observed.cases.take(rows), network)
        codes = chained.map_values()
        k2_network, _ = learn_structure(network, codes, opts.replace(structure="k2"), progress, fixed)
        starts = {"k2": tuple(k2_network.parent_indices(i) for i in range(len(network))),
                  "empty": tuple(fixed_at.get(i, ()) for i in range(len(network))),
                  "dense": dense_structure(network, codes, opts, fixed_at)}
        priors = FamilyPriors(network, opts, prior_model)

        def fit(net: AffordanceNetwork) -> AffordanceNetwork:
            return fit_em(net, chained, opts, prior_model=prior_model, pseudo_counts=condition_priors(net),
                          support=condition_supports(net))[0]

        sample = sample_structures(network, chained, opts, starts, fit, priors, fixed_at, progress)
        members = [_member_network(network, m) for m in sample.members]
        if chained is not observed:
            members = [_scaled_member(net, observed, EXACT_CASES) for net in members]
        model = members[0].with_structures([WeightedNetwork(float(w), net) for w, net in zip(sample.weights, members)])
        ll = log_likelihood(model, observed.evidence()) if observed.held else float("nan")
        duration = time.perf_counter() - start
        arc_probabilities = model.arc_probabilities()
        self.result_ = LearnResult(
            num_cases=n_cases, arcs=model.arcs, log_likelihood=ll, iterations=sample.sweeps,
            converged=sample.disagreement <= MIXED, duration=duration, structure="average",
            arc_probabilities=arc_probabilities, warnings=warnings, structures=sample)
        metadata = dict(config.metadata)
        metadata["posterior"] = {"method": "gibbs", "draws": sample.n_draws, "burn_in": sample.burn_in,
                                 "thin": sample.thin, "sweeps": sample.sweeps, "seed": sample.seed,
                                 "num_cases": n_cases, **({"sampled_cases": EXACT_CASES} if chained is not observed
                                                          else {}),
                                 "online_updates": 0, "seconds": round(sample.seconds, 4)}
        metadata["structures"] = sample.metadata(n_cases)
        metadata["learned"] = {
            "num_cases": n_cases, "structure": "average", "prior": opts.prior, "arc_prior": opts.arc_prior,
            "max_parents": opts.max_parents, "log_likelihood": ll, "iterations": sample.sweeps,
            "prior_strength": opts.prior_strength if prior_model is not None else 0.0, "fit_sensors": opts.fit_sensors,
            "converged": sample.disagreement <= MIXED, "duration": round(duration, 4),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "intervals_assume_structure": False,
            "arc_probabilities": {f"{a}->{b}": round(float(p), 4) for (a, b), p in
                                  sorted(arc_probabilities.items(), key=lambda item: -item[1])}}
        if warnings:
            metadata["learned"]["warnings"] = list(warnings)
        self.model_ = AffordanceNetwork(model.variables, metadata, config.learning, model.structures)
        return self


# A sample whose chains differ by at most this in every edge's probability counts as mixed ("converged").
MIXED = 0.2


class FamilyPriors:
    """The Dirichlet pseudo-counts of any family's CPT (``alpha_of(child, parents)``, cached): ``prior`` per entry,
    ``prior_strength`` times a prior model's family probabilities, and a condition variable's own-condition counts
    and structural zeros (``posterior_prior`` of a network with that family).
    """

    def __init__(self, network: AffordanceNetwork, opts: LearningOptions, prior_model: AffordanceNetwork | None):
        self.network = network
        self.opts = opts
        self.prior_model = prior_model
        self._cache: dict = {}

    def __call__(self, child: int, parents: tuple) -> np.ndarray:
        key = (child, parents)
        if key not in self._cache:
            names = self.network.names
            family = self.network.with_structure({names[child]: tuple(names[p] for p in parents)})
            self._cache[key] = posterior_prior(family, self.opts, self.prior_model)[child]
        return self._cache[key]


def _member_network(network: AffordanceNetwork, member) -> AffordanceNetwork:
    """The network of one member of a sample: its structure, CPTs the posterior mean given it (the mean of its draws
    plus the prior, normalised), those counts, and its draws.
    """
    draws = dict(zip(network.names, zip(member.draws, member.prior)))
    return network_of(network, member.parents).with_posterior(draws)


def _scaled_member(member: AffordanceNetwork, observed: CaseEvidence, subset: int) -> AffordanceNetwork:
    """A member drawn from ``subset`` cases as the posterior of all of ``observed``'s (``posterior.scaled_to``): its
    draws centred on all the cases' expected counts under its CPTs.
    """
    tree = member.engine
    cpts = [v.cpt for v in member.variables]
    expected = None
    for chunk in observed.chunks():
        counts, _ = tree.expected_counts(cpts, chunk)
        expected = counts if expected is None else [a + b for a, b in zip(expected, counts)]
    sample = PosteriorSample({v.name: (v.draws, v.prior) for v in member.variables}, 0, 0, 0, 0, 0.0)
    scaled = scaled_to(sample, dict(zip(member.names, expected)), observed.n_cases, subset)
    return member.with_posterior(scaled.draws)


def posterior_prior(model: AffordanceNetwork, opts: LearningOptions, prior_model: AffordanceNetwork | None) -> list:
    """The pseudo-counts of every CPT of ``model`` that learning adds (``prior``; ``prior_strength`` times a prior
    model's family probabilities; a condition variable's own-condition counts, and its structural zeros): the
    prior of the posterior ``core.posterior_sampling`` draws, the one EM's M-step uses.
    """
    extra = [np.zeros(())] * len(model)
    if prior_model is not None and opts.prior_strength > 0 and opts.method == "em":
        extra = [opts.prior_strength * t for t in family_priors(prior_model, model)]
    for name, counts in condition_priors(model).items():
        extra[model.index(name)] = extra[model.index(name)] + counts
    return dirichlet_prior(model, opts.prior, extra, condition_supports(model))


def _posterior(model: AffordanceNetwork, observed: CaseEvidence, prior: list, opts: LearningOptions,
               progress: Progress):
    """The posterior draws of ``model``'s CPTs given the cases of ``observed`` (``core.posterior_sampling``): the chain
    on every case, or on a random subset of ``EXACT_CASES`` of them scaled to all (``scaled_to``).
    """
    n = observed.n_cases
    if n <= EXACT_CASES:
        return draw_posterior(model, observed.chunks, prior, opts.posterior_draws, opts.seed, progress=progress)
    rows = np.sort(np.random.default_rng([opts.seed, 33]).choice(n, EXACT_CASES, replace=False))
    subset = CaseEvidence(observed.cases.take(rows), observed.network)
    sample = draw_posterior(model, subset.chunks, prior, opts.posterior_draws, opts.seed, progress=progress)
    expected = {v.name: np.maximum(v.counts - a, 0.0) for v, a in zip(model.variables, prior)}
    return scaled_to(sample, expected, n, EXACT_CASES)


def _check_types(config, cases, prior_model) -> None:
    """TypeError for arguments of ``fit`` that are not what it takes, saying how to get what it takes."""
    if not isinstance(config, AffordanceNetwork):
        raise TypeError(f"fit(config, cases): the config is a {type(config).__name__}, expected an "
                        "AffordanceNetwork: AffordanceNetwork.load(path)")
    if not isinstance(cases, CaseSet):
        raise TypeError(f"fit(config, cases): the cases are a {type(cases).__name__}, expected a CaseSet: "
                        "CaseSet.from_csv(config, path) or CaseSet.from_columns(config, {column: values})")
    if prior_model is not None and not isinstance(prior_model, AffordanceNetwork):
        raise TypeError(f"fit(..., prior_model): the prior model is a {type(prior_model).__name__}, expected an "
                        "AffordanceNetwork: AffordanceNetwork.load(path)")


def _check_prior_model(prior_model: AffordanceNetwork, opts: LearningOptions) -> None:
    """ModelFormatError for a prior model that learning would not use: without CPTs (a configuration), with
    ``prior_strength`` 0 (it counts as that many cases: none), or with method 'discrete' (only EM takes a prior).
    """
    if not prior_model.parameterised:
        raise ModelFormatError("the prior model has no learned CPTs (a configuration?): give a model learning wrote")
    if not opts.prior_strength > 0:
        raise ModelFormatError("a prior model counts as prior_strength cases, and prior_strength is 0: it would not "
                               "be used; give prior_strength > 0, how many cases its knowledge is worth (learn "
                               "--prior-strength N, or the configuration's learning block)")
    if opts.method != "em":
        raise ModelFormatError(f"a prior model is used by EM only, and the method is '{opts.method}': it would not be "
                               "used; learn with method 'em' (--method em), or without the prior model")


def missing_data_warnings(config: AffordanceNetwork, cases: CaseSet, options: LearningOptions) -> list[str]:
    """What the configuration expects and no case has (``cases.missing_data``), but the variables
    ``options.latent`` names: DataError saying so, or with ``options.allow_missing`` the warning to give.
    """
    unknown = [name for name in options.latent if name not in config.names]
    if unknown:
        raise ModelFormatError(f"learning option 'latent' names {unknown}, not variables of the configuration "
                               f"{list(config.names)}")
    missing = missing_data(cases.with_network(config), options.latent)
    if not missing:
        return []
    text = "no case has data for the " + (missing[0] if len(missing) == 1 else
                                          f"{', '.join(missing[:-1])} and {missing[-1]}")
    if options.allow_missing:
        return [f"{text}: learned all the same (allow_missing), as if every case had left that data out"]
    raise DataError(f"{text}. Give the cases that data; name a variable no case can observe in the learning "
                    "option 'latent'; or learn without it with the learning option allow_missing (--allow-missing)")


def _condition_variables(network: AffordanceNetwork):
    """The variables whose values are conditions: a fitted sensor with ``cluster_by`` and two values (a core
    and a wide one) for every combination of those variables' values.
    """
    for v in network.variables:
        s = v.sensor
        if s is not None and s.fitted and s.cluster_by and \
                v.card == 2 * math.prod(network[n].card for n in s.cluster_by):
            yield v


def condition_priors(network: AffordanceNetwork) -> dict:
    """Pseudo-counts (``fit_em``'s ``pseudo_counts``) for every variable whose values are conditions: each row
    gives ``OWN_CONDITION_TRIALS`` to its own condition's values (``conditions.own_condition_prior``).
    """
    out = {}
    for v in _condition_variables(network):
        if v.parents is not None:
            parent_of = [v.parents.index(n) if n in v.parents else None for n in v.sensor.cluster_by]
            out[v.name] = own_condition_prior([network[p].card for p in v.parents], parent_of,
                                              [network[n].card for n in v.sensor.cluster_by], OWN_CONDITION_TRIALS)
    return out


def condition_supports(network: AffordanceNetwork) -> dict:
    """Structural zeros (``fit_em``'s ``support``) for every variable whose values are conditions: each row of its
    CPT on its own condition's values only (``conditions.own_condition_support``).
    """
    out = {}
    for v in _condition_variables(network):
        if v.parents is not None:
            parent_of = [v.parents.index(n) if n in v.parents else None for n in v.sensor.cluster_by]
            out[v.name] = own_condition_support([network[p].card for p in v.parents], parent_of,
                                                [network[n].card for n in v.sensor.cluster_by])
    return out


def conditions_within_parents(config: AffordanceNetwork) -> AffordanceNetwork:
    """``config`` with every sensor still to be fitted by conditions (``cluster_by``) restricted to the variables
    among its variable's configured parents (when some are): no values the parents cannot tell apart.
    """
    changes = {}
    for v in config.variables:
        s = v.sensor
        if s is not None and not s.fitted and s.cluster_by and v.parents is not None:
            kept = tuple(n for n in s.cluster_by if n in v.parents)
            if kept and kept != s.cluster_by:
                changes[v.name] = {"sensor": SensorModel(
                    name=s.name, names=s.names, max_components=s.max_components, valid_range=s.valid_range,
                    covariance_type=s.covariance_type, cluster_by=kept)}
    return config.replace_variables(changes) if changes else config


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


__all__ = ["AffordanceLearner", "LearnResult", "STRUCTURES", "condition_priors", "condition_supports",
           "conditions_within_parents",
           "format_arcs", "learning_config", "missing_data_warnings"]
