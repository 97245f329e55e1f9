"""Parameter learning: EM with sensor readings as soft evidence, and the paper's Discrete baseline.

``fit_em`` puts EM together from its parts: the E-step backend (``core.estep.choose_estep``), the
acceleration (``core.em_acceleration``) and the sensor fit as an M-step hook (``core.em_sensors``),
and runs the one loop (``core.em.ExpectationMaximisation``) from each start.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .cases import CaseEvidence, CaseSet
from .em import (
    EMResult,
    ExpectationMaximisation,
    SaddleEscape,
    break_symmetry,
    normalise_counts,
    random_rows,
    restricted,
)
from .em_acceleration import acceleration_for
from .em_sensors import SensorFit
from .errors import DataError, ModelFormatError
from .estep import choose_estep
from .evidence import CompleteCases, Evidence
from .inference import JunctionTree, joint_posterior
from .network import AffordanceNetwork
from .options import LearningOptions
from .progress import Progress


def family_counts(codes: np.ndarray, cards: Sequence[int], child: int, parents: Sequence[int],
                  weights: np.ndarray | None = None) -> np.ndarray:
    """Counts of (parents..., child) configurations over complete cases (K, n) of value codes."""
    axes = [*parents, child]
    shape = tuple(int(cards[a]) for a in axes)
    flat = np.ravel_multi_index(tuple(codes[:, a] for a in axes), shape)
    counts = np.bincount(flat, weights=weights, minlength=int(np.prod(shape)))
    return counts.reshape(shape).astype(float)


def fit_discrete(network: AffordanceNetwork, cases: CaseSet | CaseEvidence, prior: float,
                 priors: Sequence[np.ndarray] | None = None) -> AffordanceNetwork:
    """The paper's Discrete baseline: MAP-assign every hidden value (``CaseEvidence.map_values``,
    with ``priors`` p(value) if given), then count, with ``prior`` pseudo-counts per CPT entry.
    """
    observed = CaseEvidence.of(cases, network)
    _check_learnable(network, observed.cases)
    codes = observed.map_values(priors)
    cards = network.cards
    counts = {v.name: family_counts(codes, cards, i, network.parent_indices(i))
              for i, v in enumerate(network.variables)}
    return network.with_cpts({name: normalise_counts(c, prior) for name, c in counts.items()},
                             {name: c + prior for name, c in counts.items()})


def fit_em(network: AffordanceNetwork, cases: CaseSet | CaseEvidence, options: LearningOptions,
           initial_cpts: Sequence[np.ndarray] | None = None,
           prior_model: AffordanceNetwork | None = None, chunk_size: int = 512,
           progress: Progress = None, pseudo_counts: Mapping[str, np.ndarray] | None = None,
           support: Mapping[str, np.ndarray] | None = None) -> tuple[AffordanceNetwork, EMResult]:
    """EM for the CPTs with sensor readings (and labels) as evidence, as derived in the paper.

    E-step: p(family | case) for every family and case by one pass over all cases (``cases``'
    evidence under the network, a ``CaseEvidence``, built once); M-step: the paper's theta equation
    with ``options.prior`` pseudo-counts per CPT entry (0 gives maximum likelihood). Stops when the
    RMS change of all CPT entries is below ``options.tol`` or after ``options.max_iter`` E-steps.
    The first start is ``initial_cpts`` if given, else ``options.em_init``: "uniform", "discrete" or
    "random" (every row from a Dirichlet(1), seeded). Returns (network with the learned CPTs,
    EMResult).

    Latent variables (no evidence in any case, e.g. a hidden cause without a sensor): a uniform
    start is a symmetric fixed point there (EM would stop at once), so their CPTs and their
    children's start from random rows (seeded by ``options.seed``); a run that ends on such a point
    (a latent whose children do not depend on it) is restarted from random rows there, and reported
    as not converged if it still ends on one. ``options.n_init`` > 1 runs EM from that many starts
    (the first as above, the others "random" with seeds ``seed + 1``, ...) and keeps the one with
    the highest objective, as scikit-learn's ``n_init`` does. ``options.em_acceleration``
    "squarem": SQUAREM extrapolation (``core.em_acceleration.Squarem``): the same fixed point in
    fewer E-steps, the objective never decreasing between the accepted points; ``iterations``
    counts E-steps (plain EM is used with ``fit_sensors``).

    Beyond the paper: ``prior_model`` with ``options.prior_strength`` (an equivalent sample size)
    adds pseudo-counts ``prior_strength * p_prior_model(family)`` so that what an earlier model
    learned carries over; ``options.fit_sensors`` re-estimates every sensor's means and stddevs in
    the M-step too (for sensor models only roughly known). ``progress``: called after every E-step
    with ("parameters", E-steps done, log-likelihood) (see ``core.progress``). ``pseudo_counts``:
    more pseudo-counts for some variables (by name, shaped like the CPT), e.g. the rows of a
    variable whose values are conditions pointing at their own condition (``core.conditions``).
    ``support``: for some variables (by name), where their CPT may be non-zero (booleans shaped
    like the CPT): elsewhere the CPT starts at zero and has no pseudo-counts, so EM keeps it there
    (structural zeros, e.g. a condition's row on other conditions' values:
    ``conditions.own_condition_support``).

    The network returned carries the Dirichlet posterior of its CPTs (``Variable.counts``): the
    expected counts of the cases under the learned CPTs plus the pseudo-counts.
    """
    observed = CaseEvidence.of(cases, network)
    _check_learnable(network, observed.cases)
    allowed = [None] * len(network)
    for name, where in (support or {}).items():
        allowed[network.index(name)] = np.asarray(where, dtype=bool)
    pseudo = _pseudo_counts(network, options, prior_model, pseudo_counts or {}, allowed)
    engine = JunctionTree(network)
    shared = None if options.fit_sensors else choose_estep(engine, observed, chunk_size)
    # SQUAREM extrapolates the CPTs only: with the sensors re-estimated too, plain EM
    acceleration = "none" if options.fit_sensors else options.em_acceleration
    best, finals = None, []
    for start in range(options.n_init):
        rng = np.random.default_rng([int(options.seed), start])
        first = _first_cpts(network, observed, options, start, initial_cpts, rng)
        hook = SensorFit(network, observed.cases) if options.fit_sensors else None
        estep = shared if hook is None else choose_estep(engine, observed, chunk_size,
                                                         hook.readings())
        em = ExpectationMaximisation(estep, pseudo, options.tol, options.max_iter,
                                     acceleration_for(acceleration), hook, progress)
        result = em.fit(restricted(first, allowed),
                        SaddleEscape(network, observed.latent, rng, allowed))
        finals.append(result.log_posteriors[-1])
        if best is None or finals[-1] > best[1].log_posteriors[-1]:
            best = (network if hook is None else hook.network), result
    fitted, result = best
    result.restarts = finals
    counts = {name: c + a for name, c, a in zip(fitted.names, result.counts, pseudo)}
    return fitted.with_cpts(dict(zip(fitted.names, result.cpts)), counts), result


def _pseudo_counts(network: AffordanceNetwork, options: LearningOptions,
                   prior_model: AffordanceNetwork | None, extra: Mapping[str, np.ndarray],
                   allowed: Sequence[np.ndarray | None]) -> list:
    """The Dirichlet pseudo-counts of every CPT: ``options.prior``, what ``prior_model`` learned,
    ``extra``, and none outside ``allowed``.
    """
    prior = options.prior
    pseudo = [np.asarray(float(prior))] * len(network)
    if prior_model is not None and options.prior_strength > 0:
        pseudo = [prior + options.prior_strength * t for t in family_priors(prior_model, network)]
    for name, more in extra.items():
        pseudo[network.index(name)] = pseudo[network.index(name)] + more
    return [a if where is None else np.where(where, a, 0.0) for a, where in zip(pseudo, allowed)]


def _first_cpts(network: AffordanceNetwork, observed: CaseEvidence, options: LearningOptions,
                start: int, initial_cpts: Sequence[np.ndarray] | None,
                rng: np.random.Generator) -> list:
    """Where EM's ``start``-th run begins: ``initial_cpts`` or ``options.em_init`` for the first
    (uniform with random rows around the latent variables: else a symmetric fixed point), random
    rows for the others.
    """
    if start == 0 and initial_cpts is not None:
        return list(initial_cpts)
    init = options.em_init if start == 0 else "random"
    cpts = _initial_cpts(network, observed, options.prior, init, rng)
    if start == 0 and options.em_init == "uniform":
        cpts = break_symmetry(network, cpts, observed.latent, rng)
    return cpts


def family_priors(prior_model: AffordanceNetwork, network: AffordanceNetwork) -> list:
    """p(parents, child) under ``prior_model`` for each family of ``network``, shaped like its CPT.

    The families may differ from the prior model's (a new structure); the variables and
    their values must be the same.
    """
    for v in network.variables:
        if v.name not in prior_model.names or prior_model[v.name].values != v.values:
            raise ModelFormatError(f"the prior model has no variable '{v.name}' with values "
                                   f"{list(v.values)}")
    engine = prior_model.engine
    calibration = engine.calibrate([v.cpt for v in prior_model.variables],
                                   Evidence.empty(len(prior_model)))
    return [joint_posterior(engine, calibration,
                            [prior_model.index(n) for n in (*v.parents, v.name)])[0]
            for v in network.variables]


def log_likelihood(network: AffordanceNetwork, cases: CaseSet | CaseEvidence | Evidence) -> float:
    """Total log p(cases | model) under the network's CPTs and sensor models: the complete cases' from their
    counts (``CompleteCases``), the others' by inference.
    """
    cpts = [v.cpt for v in network.variables]
    if isinstance(cases, Evidence):
        complete = CompleteCases.in_evidence(cases)
        rest = None if complete.all else cases.take(~complete.rows) if complete.any else cases
    else:
        observed = CaseEvidence.of(cases, network)
        complete = observed.complete
        rest = None if complete.all else (observed.incomplete() if complete.any else observed).evidence()
    total = 0.0 if rest is None else float(network.engine.log_likelihood(cpts, rest).sum())
    if complete.any:
        parents = [network.parent_indices(i) for i in range(len(network))]
        total += complete.log_likelihood(parents, complete.family_counts(parents, network.cards), cpts)
    return total


def _initial_cpts(network: AffordanceNetwork, observed: CaseEvidence, prior: float, init: str,
                  rng: np.random.Generator) -> list:
    """EM's start: "uniform" CPTs, "discrete" (the Discrete baseline's, with at least one
    pseudo-count) or "random" (Dirichlet(1) rows from ``rng``).
    """
    if init == "discrete":
        return [v.cpt for v in fit_discrete(network, observed, prior=max(prior, 1.0)).variables]
    shapes = [[network[p].card for p in v.parents] + [v.card] for v in network.variables]
    if init == "uniform":
        return [np.full(shape, 1.0 / shape[-1]) for shape in shapes]
    return [random_rows(shape, rng) for shape in shapes]


def _check_learnable(network: AffordanceNetwork, cases: CaseSet) -> None:
    if not network.structure_known:
        raise ModelFormatError("learn the structure first: some variables have no 'parents'")
    unfitted = [v.sensor.name for v in network.variables
                if v.sensor is not None and not v.sensor.fitted]
    if unfitted:
        raise ModelFormatError(f"sensor models {unfitted} have no means/stddevs: fit them first")
    if cases.n_cases == 0:
        raise DataError("no cases to learn from")
    if not cases.labels and not cases.readings:
        raise DataError("the cases observe none of the network's variables")


__all__ = ["family_counts", "family_priors", "fit_discrete", "fit_em", "log_likelihood"]
