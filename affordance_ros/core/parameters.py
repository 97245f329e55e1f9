"""Parameter learning: EM with sensor readings as soft evidence, and the paper's Discrete baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .cases import CaseSet
from .errors import DataError, ModelFormatError
from .evidence import Evidence
from .inference import JunctionTree
from .network import AffordanceNetwork, SensorModel
from .progress import Progress, report
from .sensors import mixture_weights


@dataclass
class EMResult:
    """Trace of one EM run.

    ``log_likelihoods[t]`` is log p(data | CPTs after t iterations); ``log_posteriors`` adds the
    log Dirichlet prior, which is what EM increases when ``prior`` > 0.
    """

    log_likelihoods: list = field(default_factory=list)
    log_posteriors: list = field(default_factory=list)
    rms_changes: list = field(default_factory=list)
    iterations: int = 0
    converged: bool = False

    @property
    def log_likelihood(self) -> float:
        """The log-likelihood after the last iteration."""
        return self.log_likelihoods[-1]


def family_counts(codes: np.ndarray, cards: Sequence[int], child: int, parents: Sequence[int],
                  weights: np.ndarray | None = None) -> np.ndarray:
    """Counts of (parents..., child) configurations over complete cases (K, n) of value codes."""
    axes = [*parents, child]
    shape = tuple(int(cards[a]) for a in axes)
    flat = np.ravel_multi_index(tuple(codes[:, a] for a in axes), shape)
    return np.bincount(flat, weights=weights, minlength=int(np.prod(shape))).reshape(shape).astype(float)


def normalise_counts(counts: np.ndarray, prior: float) -> np.ndarray:
    """Theta = (N_ijk + prior) / (N_ij + r * prior); rows with no data and no prior are uniform."""
    padded = counts + prior
    totals = padded.sum(axis=-1, keepdims=True)
    r = counts.shape[-1]
    return np.divide(padded, totals, out=np.full_like(padded, 1.0 / r), where=totals > 0)


def value_priors(network: AffordanceNetwork, cases: CaseSet) -> list:
    """p(value) per variable for MAP assignment: the sensor's mixture weights (means fixed)."""
    priors = []
    readings = cases.sensor_readings(network)
    for v in network.variables:
        if v.name in readings:
            priors.append(mixture_weights(v.sensor, readings[v.name]))
        else:
            priors.append(np.full(v.card, 1.0 / v.card))
    return priors


def map_assign(network: AffordanceNetwork, cases: CaseSet, priors: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The most probable value of every variable in every case, argmax_v p(evidence | v) p(v).

    Each variable is assigned from its own label and sensor (the paper's equation for e*, o*);
    ``priors`` defaults to ``value_priors``. Returns codes (K, n).
    """
    priors = value_priors(network, cases) if priors is None else priors
    evidence = cases.evidence(network)
    codes = np.empty((cases.n_cases, len(network)), dtype=np.int64)
    for i, lik in enumerate(evidence.likelihoods):
        p = np.asarray(priors[i], dtype=float)
        codes[:, i] = np.argmax(p) if lik is None else np.argmax(lik * p, axis=1)
    return codes


def fit_discrete(network: AffordanceNetwork, cases: CaseSet, prior: float = 1.0,
                 priors: Sequence[np.ndarray] | None = None) -> AffordanceNetwork:
    """The paper's Discrete baseline: MAP-assign every hidden value, then count."""
    _check_learnable(network, cases)
    codes = map_assign(network, cases, priors)
    cards = network.cards
    return network.with_cpts({
        v.name: normalise_counts(family_counts(codes, cards, i, network.parent_indices(i)), prior)
        for i, v in enumerate(network.variables)})


def fit_em(network: AffordanceNetwork, cases: CaseSet, prior: float = 1.0, tol: float = 1e-3,
           max_iter: int = 100, init: str = "uniform", chunk_size: int = 512,
           prior_model: AffordanceNetwork | None = None, prior_strength: float = 0.0,
           fit_sensors: bool = False, progress: Progress = None):
    """EM for the CPTs with sensor readings (and labels) as evidence, as derived in the paper.

    E-step: p(family | case) for every family and case by one junction-tree pass over all
    cases; M-step: the paper's theta equation with ``prior`` pseudo-counts per CPT entry
    (0 gives maximum likelihood). Stops when the RMS change of all CPT entries is below
    ``tol`` or after ``max_iter`` iterations. ``init``: "uniform", "discrete" or "model"
    (the network's own CPTs). Returns (network with the learned CPTs, EMResult).

    Beyond the paper: ``prior_model`` with ``prior_strength`` (an equivalent sample size)
    adds pseudo-counts ``prior_strength * p_prior_model(family)`` so that what an earlier
    model learned carries over; ``fit_sensors`` re-estimates every sensor's means and
    stddevs in the M-step too (for sensor models only roughly known). ``progress``: called after
    every iteration with ("parameters", iterations done, log-likelihood) (see ``core.progress``).
    """
    _check_learnable(network, cases)
    if prior < 0 or not np.isfinite(prior) or prior_strength < 0 or not np.isfinite(prior_strength):
        raise ModelFormatError(f"prior and prior_strength must be finite numbers >= 0, got {prior}, {prior_strength}")
    if tol <= 0 or max_iter < 0:
        raise ModelFormatError("tol must be > 0 and max_iter >= 0")
    pseudo = [np.asarray(float(prior))] * len(network)
    if prior_model is not None and prior_strength > 0:
        pseudo = [prior + prior_strength * t for t in family_priors(prior_model, network)]
    cpts = _initial_cpts(network, cases, prior, init)
    engine = JunctionTree(network)
    readings = ({network.index(var): sensor_features(x) for var, x in cases.sensor_readings(network).items()}
                if fit_sensors else None)
    estep = engine.estep(cases.evidence(network), chunk_size, readings)
    result = EMResult()
    for _ in range(max_iter):
        if fit_sensors:
            counts, ll, moments = estep(cpts)
        else:
            counts, ll = estep(cpts)
        result.log_likelihoods.append(ll)
        result.log_posteriors.append(ll + log_dirichlet(cpts, pseudo))
        new = [normalise_counts(c, a) for c, a in zip(counts, pseudo)]
        change = rms_difference(new, cpts)
        cpts = new
        if fit_sensors:
            network, sensor_change = _reestimate_sensors(network, moments)
            change = float(np.sqrt(change ** 2 + sensor_change ** 2))
            estep = engine.estep(cases.evidence(network), chunk_size, readings)
        result.rms_changes.append(change)
        result.iterations += 1
        report(progress, "parameters", result.iterations, ll)
        if change < tol:
            result.converged = True
            break
    ll = estep.log_likelihood(cpts)
    result.log_likelihoods.append(ll)
    result.log_posteriors.append(ll + log_dirichlet(cpts, pseudo))
    return network.with_cpts(dict(zip(network.names, cpts))), result


def family_priors(prior_model: AffordanceNetwork, network: AffordanceNetwork) -> list:
    """p(parents, child) under ``prior_model`` for each family of ``network``, shaped like its CPT.

    The families may differ from the prior model's (a new structure); the variables and
    their values must be the same.
    """
    for v in network.variables:
        if v.name not in prior_model.names or prior_model[v.name].values != v.values:
            raise ModelFormatError(f"the prior model has no variable '{v.name}' with values {list(v.values)}")
    engine = prior_model.engine
    calibration = engine.calibrate([v.cpt for v in prior_model.variables],
                                   Evidence.empty(len(prior_model)))
    return [engine.joint(calibration, [prior_model.index(n) for n in (*v.parents, v.name)])[0]
            for v in network.variables]


def sensor_features(x: np.ndarray) -> np.ndarray:
    """What the E-step weights by the posterior of a sensor's variable to re-estimate the sensor.

    1-D readings (K,): returned as they are (the E-step forms [1, y, y^2]). Vector readings
    (K, d): [1, y, vec(y y^T)] per case, (K, 1 + d + d^2); a case with a missing reading
    contributes zeros (the vector sensor is re-estimated from complete readings).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        return x
    complete = np.all(np.isfinite(x), axis=1)
    y = np.where(complete[:, None], x, 0.0)
    outer = (y[:, :, None] * y[:, None, :]).reshape(len(y), -1)
    return np.concatenate([complete[:, None].astype(float), y, outer], axis=1)


def _reestimate_vector_sensor(old: SensorModel, moments: np.ndarray):
    """Weighted means and covariances of a vector sensor from moments (1 + d + d^2, card)."""
    d = old.dim
    w = moments[0]
    weight = np.maximum(w, 1e-12)
    means = np.where(w[:, None] > 1e-9, moments[1:1 + d].T / weight[:, None], old.means)
    second = moments[1 + d:].T.reshape(-1, d, d) / weight[:, None, None]
    covs = second - means[:, :, None] * means[:, None, :]
    floor = np.diag((1e-3 * np.maximum(np.ptp(old.means, axis=0), 1.0)) ** 2)  # as for 1-D sensors
    covs = np.where(w[:, None, None] > 1e-9, 0.5 * (covs + np.swapaxes(covs, 1, 2)) + floor, old.covariances)
    sensor = SensorModel(names=old.names, means=means, covariances=covs, max_components=old.max_components,
                         covariance_type=old.covariance_type)
    stddevs = np.sqrt(np.diagonal(covs, axis1=1, axis2=2))
    return sensor, np.concatenate([(means - old.means).ravel(), (stddevs - old.component_stddevs()).ravel()])


def _reestimate_sensors(network: AffordanceNetwork, moments: dict):
    """Gaussian M-step per sensor from posterior-weighted reading moments; returns the RMS change."""
    changes, diffs = {}, []
    for i, m in moments.items():
        v = network.variables[i]
        old = v.sensor
        if old.vector:
            sensor, diff = _reestimate_vector_sensor(old, m)
            changes[v.name] = {"sensor": sensor}
            diffs.append(diff)
            continue
        w, wy, wy2 = m
        weight = np.maximum(w, 1e-12)
        means = np.where(w > 1e-9, wy / weight, old.means)
        var = np.where(w > 1e-9, wy2 / weight - means ** 2, old.stddevs ** 2)
        floor = 1e-3 * max(float(np.ptp(old.means)), 1.0)
        stddevs = np.sqrt(np.maximum(var, floor ** 2))
        diffs.append(np.concatenate([means - old.means, stddevs - old.stddevs]))
        changes[v.name] = {"sensor": SensorModel(old.name, means, stddevs, old.max_components)}
    change = float(np.sqrt(np.mean(np.concatenate(diffs) ** 2))) if diffs else 0.0
    return network.replace_variables(changes), change


def log_likelihood(network: AffordanceNetwork, cases: CaseSet | Evidence) -> float:
    """Total log p(cases | model) under the network's CPTs and sensor models."""
    evidence = cases.evidence(network) if isinstance(cases, CaseSet) else cases
    return float(network.engine.log_likelihood([v.cpt for v in network.variables], evidence).sum())


def log_dirichlet(cpts: Sequence[np.ndarray], prior) -> float:
    """Log of the (unnormalised) Dirichlet prior whose MAP estimate ``normalise_counts`` gives.

    ``prior``: pseudo-counts, one number for every entry or one array per CPT.
    """
    priors = prior if isinstance(prior, (list, tuple)) else [prior] * len(cpts)
    return float(sum(np.sum(a * np.log(np.maximum(c, 1e-300))) for c, a in zip(cpts, priors)))


def rms_difference(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Root mean square difference of all entries of two lists of arrays."""
    diff = np.concatenate([(x - y).ravel() for x, y in zip(a, b)])
    return float(np.sqrt(np.mean(diff * diff)))


def _initial_cpts(network: AffordanceNetwork, cases: CaseSet, prior: float, init: str) -> list:
    if init == "discrete":
        start = fit_discrete(network, cases, prior=max(prior, 1.0))
        return [v.cpt for v in start.variables]
    if init == "uniform":
        return [np.full([network[p].card for p in v.parents] + [v.card], 1.0 / v.card)
                for v in network.variables]
    if init == "model":
        if any(v.cpt is None for v in network.variables):
            raise ModelFormatError("init='model' needs a network with CPTs")
        return [v.cpt for v in network.variables]
    raise ModelFormatError(f"unknown EM init '{init}'; expected 'discrete', 'uniform' or 'model'")


def _check_learnable(network: AffordanceNetwork, cases: CaseSet) -> None:
    if not network.structure_known:
        raise ModelFormatError("learn the structure first: some variables have no 'parents'")
    unfitted = [v.sensor.name for v in network.variables if v.sensor is not None and not v.sensor.fitted]
    if unfitted:
        raise ModelFormatError(f"sensor models {unfitted} have no means/stddevs: fit them first")
    if cases.n_cases == 0:
        raise DataError("no cases to learn from")
    if not cases.labels and not cases.readings:
        raise DataError("the cases observe none of the network's variables")


__all__ = ["EMResult", "fit_em", "fit_discrete", "map_assign", "family_counts", "normalise_counts",
           "log_likelihood", "rms_difference", "sensor_features", "value_priors"]
