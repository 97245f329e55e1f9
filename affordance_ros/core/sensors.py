"""Sensor models from readings: Gaussian mixtures, the number of components by BIC.

This is the role X-means plays in the paper: each component becomes one value of the
hidden variable. A 1-D sensor's components are ordered by mean. A vector sensor (several
readings at once) gets a multivariate mixture fitted on internally standardised readings,
whose number of components and covariance type (full or diagonal) BIC chooses, with a
covariance floor so that repeated identical readings never collapse a component; its
components are ordered by their first coordinate.

Descriptors of entities (objects, tools, hand postures) seen in many trials through a few views
repeat the same readings, and BIC would count every repeat as new evidence: then the *units* are
clustered, not the readings (``entity_clusters``): the entities (one point each, the mean of its
readings) when the cases name them (learning option ``entity_column``), else the distinct readings.
When another sensor's values are conditions that include this variable (``cluster_by``), the number
of clusters is the one whose clusters predict that sensor's readings of held-out units best, one unless
held-out units show that more carry over (``choose_by_held_out_effect``); else BIC's on the units. A
search that ends at ``max_components`` is reported (``SensorsFit.warnings``).

A sensor with ``cluster_by`` (typically an effect, by the action and the objects) gets its
values from the conditions of the experiment instead (``core.conditions``): two values per
condition, a core and a wide Gaussian about a centre pooled with the other conditions'.
Clusters of the pooled readings are shared by conditions whose readings differ, and a broad
cluster's mean answers for readings far from it; a prediction of the readings (the posterior
mean of the components' means) then drifts towards the middle. Per condition, the posterior
mean stays at the condition's centre.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.special import stdtrit  # Student's t quantile (scipy.stats alone takes seconds to import)

from .conditions import (
    START_STRENGTH,
    STRENGTH_FOLDS,
    PooledCentres,
    all_terms,
    entity_folds,
    fit_conditional_sensor,
    group_centres,
)
from .errors import DataError
from .gaussian import fit_mixture, log_density, n_parameters
from .network import AffordanceNetwork, SensorModel

# Variance floor of a vector sensor's components, in units of each reading's variance (standardised).
COVARIANCE_FLOOR = 1e-3


def _one_dimensional_starts(x: np.ndarray, k: int, floor: float, n_init: int, rng: np.random.Generator):
    """EM's starts for a 1-D mixture: the k quantiles, then ``n_init`` - 1 draws of k distinct readings; every
    component with the standard deviation of the readings over k (at least ``floor``).
    """
    variance = np.full((k, 1, 1), max(float(np.std(x)) / k, floor) ** 2)
    for attempt in range(n_init):
        means = np.quantile(x, (np.arange(k) + 0.5) / k) if attempt == 0 else rng.choice(x[:, 0], size=k, replace=False)
        yield means.reshape(k, 1), variance


def _fit_one_dimensional(x: np.ndarray, n_components: int, rng: np.random.Generator, n_init: int = 4):
    """Maximum-likelihood 1-D mixture by EM (``gaussian.fit_mixture``), best of ``n_init`` starts.

    Returns (weights, means, stddevs, log_likelihood), components sorted by mean.
    """
    x = np.asarray(x, dtype=float).reshape(-1, 1)
    floor = max(1e-6, 1e-3 * float(np.std(x)) or 1e-6)
    weights, means, covs, ll = fit_mixture(x, _one_dimensional_starts(x, n_components, floor, n_init, rng),
                                           min_variance=floor ** 2, max_iter=300, tol=1e-8)
    order = np.argsort(means[:, 0])
    return weights[order], means[order, 0], np.sqrt(covs[order, 0, 0]), ll


def fit_sensor(readings: np.ndarray, n_components: int | None, max_components: int,
               rng: np.random.Generator):
    """Fit one sensor: ``n_components`` fixed, or chosen by BIC in 1..max_components.

    Returns (means, stddevs, weights).
    """
    x = np.asarray(readings, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise DataError("no readings to fit the sensor model from")
    if n_components is not None:
        w, m, s, _ = _fit_one_dimensional(x, n_components, rng)
        return m, s, w
    best = None
    for k in range(1, min(max_components, x.size) + 1):
        w, m, s, ll = _fit_one_dimensional(x, k, rng)
        bic = -2.0 * ll + n_parameters(k, 1, "full") * np.log(x.size)
        if best is None or bic < best[0]:
            best = (bic, m, s, w)
    return best[1], best[2], best[3]


def _standardise(x: np.ndarray):
    centre = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return (x - centre) / scale, centre, scale


def _kmeanspp(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    centres = [x[rng.integers(len(x))]]
    d2 = ((x - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        total = d2.sum()
        j = rng.choice(len(x), p=d2 / total) if total > 0 else rng.integers(len(x))
        centres.append(x[j])
        d2 = np.minimum(d2, ((x - x[j]) ** 2).sum(axis=1))
    return np.array(centres)


def _kmeanspp_starts(x: np.ndarray, k: int, covariance_type: str, n_init: int, rng: np.random.Generator):
    """EM's starts for a vector mixture: ``n_init`` k-means++ draws of k centres, every component with the
    readings' covariance (diagonal for "diag") plus the floor.
    """
    d = x.shape[1]
    covariance = np.cov(x.T).reshape(d, d) + COVARIANCE_FLOOR * np.eye(d)
    if covariance_type == "diag":
        covariance = covariance * np.eye(d)
    for _ in range(n_init):
        yield _kmeanspp(x, k, rng), np.broadcast_to(covariance, (k, d, d)).copy()


def _fit_standardised(z: np.ndarray, k: int, covariance_type: str, rng: np.random.Generator, n_init: int = 3):
    """A vector mixture on standardised rows ``z`` (n, d) (``gaussian.fit_mixture``), best of ``n_init``
    k-means++ starts, ``COVARIANCE_FLOOR`` added to every variance.
    """
    return fit_mixture(z, _kmeanspp_starts(z, k, covariance_type, n_init, rng), covariance_type,
                       floor=COVARIANCE_FLOOR, max_iter=200, tol=1e-4)


def fit_vector_sensor(readings: np.ndarray, n_components: int | None, max_components: int,
                      covariance_type: str, rng: np.random.Generator):
    """Fit a vector sensor from readings (n, d) (rows with a missing reading are left out):
    ``n_components`` fixed or chosen by BIC in 1..max_components, ``covariance_type`` "full",
    "diag" or "auto" (chosen by BIC too). Returns (means (k, d), covariances (k, d, d), weights,
    the covariance type chosen), in the readings' own units, ordered by the first coordinate.
    """
    x = np.asarray(readings, dtype=float)
    x = x[np.all(np.isfinite(x), axis=1)]
    if len(x) == 0:
        raise DataError("no complete readings to fit the sensor model from")
    z, centre, scale = _standardise(x)
    types = ("full", "diag") if covariance_type == "auto" else (covariance_type,)
    ks = [n_components] if n_components is not None else range(1, min(max_components, len(x)) + 1)
    best = None
    for cov_type in types:
        type_best, worse = np.inf, 0  # this type's search stops once three more components in a row did not help
        for k in ks:
            w, m, c, ll = _fit_standardised(z, k, cov_type, rng)
            bic = -2.0 * ll + n_parameters(k, z.shape[1], cov_type) * np.log(len(z))
            if best is None or bic < best[0]:
                best = (bic, w, m, c, cov_type)
            if bic < type_best:
                type_best, worse = bic, 0
            else:
                worse += 1
                if worse >= 3:
                    break
    _, w, m, c, cov_type = best
    means = m * scale + centre
    covs = c * np.outer(scale, scale)
    order = np.lexsort(means.T[::-1])
    return means[order], covs[order], w[order], cov_type


@dataclass(frozen=True)
class Units:
    """What a sensor's clusters group: its distinct complete readings (U, d), once each however often trials
    repeat them; the unit of every case (n,) (-1: no complete reading); the entity of every unit (U,) (codes;
    each unit its own without entities); what is held out when the number of clusters is chosen.
    """

    points: np.ndarray
    of_case: np.ndarray
    entity: np.ndarray
    kind: str


def sensor_units(x: np.ndarray, entities: Sequence | None) -> Units:
    """The units of readings ``x`` (n, d), and their entities (``entities``: per case its id, or None)."""
    complete = np.all(np.isfinite(x), axis=1)
    of_case = np.full(len(x), -1, dtype=np.int64)
    points, first, which = np.unique(x[complete], axis=0, return_index=True, return_inverse=True)
    of_case[complete] = which.reshape(-1)
    if entities is None:
        return Units(points, of_case, np.arange(len(points)), "distinct readings")
    _, entity = np.unique(np.asarray(entities, dtype=object).astype(str)[complete], return_inverse=True)
    return Units(points, of_case, entity.reshape(-1)[first], "entities")


def _mixture(points: np.ndarray, n_components: int | None, max_components: int, covariance_type: str,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(means (k, d), covariances (k, d, d)) of a mixture of ``points`` (n, d): ``fit_sensor`` for one reading,
    ``fit_vector_sensor`` for several; ``n_components`` None: chosen by BIC.
    """
    if points.shape[1] == 1:
        means, stddevs, _ = fit_sensor(points[:, 0], n_components, max_components, rng)
        return means[:, None], (stddevs ** 2)[:, None, None]
    means, covs, _, _ = fit_vector_sensor(points, n_components, max_components, covariance_type, rng)
    return means, covs


# How many units' worth the pooled within-cluster covariance has against a cluster's own (regularised
# discriminant analysis, Friedman 1989): a cluster of a few units keeps the shape of the others, one of many its own.
POOLED_COVARIANCE_UNITS = 10.0


def cluster_gaussians(points: np.ndarray, labels: np.ndarray, covariance_type: str) -> tuple[np.ndarray, np.ndarray]:
    """Gaussians (means (k, d), covariances (k, d, d)) of clusters of units ``points`` (U, d) (``labels``: each
    unit's cluster; empty clusters dropped), ordered by the first coordinate: each at the mean of its units,
    with its own covariance shrunk towards the pooled within-cluster one (``POOLED_COVARIANCE_UNITS``), diagonal
    for "diag" or one reading, plus ``COVARIANCE_FLOOR`` of each reading's variance (a cluster of one unit
    keeps a width).
    """
    _, labels = np.unique(labels, return_inverse=True)
    labels = labels.reshape(-1)
    k, d = int(labels.max()) + 1, points.shape[1]
    sizes = np.bincount(labels, minlength=k).astype(float)
    means = np.stack([np.bincount(labels, weights=points[:, j], minlength=k) for j in range(d)], 1) / sizes[:, None]
    residuals = points - means[labels]
    scatter = np.einsum("ui,uj->uij", residuals, residuals)
    own = np.stack([scatter[labels == c].sum(axis=0) for c in range(k)])                 # (k, d, d)
    pooled = own.sum(axis=0) / max(len(points) - k, 1)
    covs = (own + POOLED_COVARIANCE_UNITS * pooled) / (sizes + POOLED_COVARIANCE_UNITS)[:, None, None]
    covs = covs + COVARIANCE_FLOOR * np.diag(np.maximum(points.var(axis=0), 1e-12))
    if covariance_type == "diag" or d == 1:
        covs = covs * np.eye(d)
    order = np.lexsort(means.T[::-1])
    return means[order], covs[order]


def ward_tree(points: np.ndarray) -> np.ndarray | None:
    """Ward's agglomerative clustering of the standardised ``points`` (U, d), each unit once, as a linkage
    matrix whose clusterings of every number of clusters are nested (``ward_clusters``); None for one point.
    """
    if len(points) < 2:
        return None
    z, _, _ = _standardise(points)
    return linkage(z, method="ward")


def ward_clusters(tree: np.ndarray | None, k: int) -> np.ndarray:
    """The cluster (0..k-1) of each unit of a ``ward_tree`` cut into (at most) k clusters."""
    return np.zeros(1, dtype=np.int64) if tree is None else fcluster(tree, k, criterion="maxclust") - 1


# The condition centres' trim when held-out effects choose the number of clusters: robust, so that
# outliers do not choose them. Up to HELD_OUT_REPEATS * STRENGTH_FOLDS entities each is held out
# once (no split's luck, no more fits than the folds); more are held out in STRENGTH_FOLDS folds
# drawn HELD_OUT_REPEATS times.
HELD_OUT_TRIM = 0.25
HELD_OUT_REPEATS = 3
# The level of the one-sided test that clusters predict held-out entities better than one does.
CARRY_OVER_SIGNIFICANCE = 0.05


def choose_by_held_out_effect(units: Units, ks: Sequence[int], effect: np.ndarray,
                              companions: np.ndarray, covariance_type: str, rng: np.random.Generator):
    """The number of clusters of ``ks`` (ascending, from 1) whose clusters predict the effect of held-out entities
    best. Entities are held out (one at a time, or in random folds when there are many), the training entities'
    units are clustered (``ward_tree``) and give the clusters' Gaussians (``cluster_gaussians``), every held-out
    unit goes to its most likely cluster, and each held-out case's ``effect`` reading (n, e) is predicted by the
    pooled centre of its condition (``companions`` (n, m): the codes of the effect's other condition variables,
    then the cluster) from the training entities' cases; squared error. Returns (k, {k: mean squared error per
    case}).

    The errors are paired by entity. One cluster unless the best number's gain over it is significant
    (one-sided paired t-test over the entities at ``CARRY_OVER_SIGNIFICANCE``): the smallest error of several
    numbers is a minimum over noisy estimates, and a grouping of ten objects can predict a few held-out ones
    better by chance; with three entities it must be large and alike in all three. Else the fewest clusters
    whose error exceeds the smallest by at most its standard error (the one-standard-error rule).
    """
    usable = (units.of_case >= 0) & np.all(np.isfinite(effect), axis=1) & np.all(companions >= 0, axis=1)
    unit, y, known = units.of_case[usable], effect[usable], companions[usable]
    terms = all_terms(known.shape[1] + 1)
    n_entities = int(units.entity.max()) + 1
    one_at_a_time = n_entities <= HELD_OUT_REPEATS * STRENGTH_FOLDS
    repeats = 1 if one_at_a_time else HELD_OUT_REPEATS
    errors = np.zeros((len(ks), n_entities))
    for _ in range(repeats):
        folds = np.arange(n_entities) if one_at_a_time else entity_folds(n_entities, None, rng)
        training_units = folds[units.entity]
        for fold in np.unique(training_units):
            training_units_now = training_units != fold
            train, test = training_units_now[unit], ~training_units_now[unit]
            if not train.any() or not test.any():
                continue
            tree = ward_tree(units.points[training_units_now])
            for i, k in enumerate(ks):
                means, covs = cluster_gaussians(units.points[training_units_now], ward_clusters(tree, k),
                                                covariance_type)
                conditions = np.column_stack([known, log_density(units.points, means, covs).argmax(axis=1)[unit]])
                seen, centres, counts, _ = group_centres(y[train], conditions[train], HELD_OUT_TRIM)
                pooled = PooledCentres.fit(seen, centres, 1.0 / counts, terms, [START_STRENGTH] * len(terms))
                squared = np.sum((y[test] - pooled.predict(conditions[test])) ** 2, axis=1)
                errors[i] += np.bincount(units.entity[unit[test]], weights=squared, minlength=n_entities)
    per_entity = errors / (repeats * max(len(y), 1))      # each entity's share of the mean squared error
    totals = per_entity.sum(axis=1)
    scores = dict(zip(ks, totals.tolist()))
    best = int(np.argmin(totals))
    if n_entities < 2 or best == 0 or not _significant_gain(per_entity[0] - per_entity[best]):
        return ks[0], scores
    excess = per_entity - per_entity[best]
    standard_error = np.sqrt(n_entities) * excess.std(axis=1, ddof=1)
    chosen = next(i for i in range(len(ks)) if excess[i].sum() <= standard_error[i])
    return ks[chosen], scores


def _significant_gain(gain: np.ndarray) -> bool:
    """Whether the summed per-entity ``gain`` (n,) is above zero by a one-sided t-test at
    ``CARRY_OVER_SIGNIFICANCE``.
    """
    spread = np.sqrt(len(gain)) * gain.std(ddof=1)
    return gain.sum() > stdtrit(len(gain) - 1, 1.0 - CARRY_OVER_SIGNIFICANCE) * spread


def _effect_of(network: AffordanceNetwork, name: str, readings: dict):
    """The variable whose sensor's values are conditions that include ``name`` (with all its readings), or None."""
    for w in network.variables:
        if w.sensor is not None and name in w.sensor.cluster_by and all(r in readings for r in w.sensor.names):
            return w
    return None


def _codable(network: AffordanceNetwork, name: str, readings: dict, labels: dict) -> bool:
    """Whether the cases' codes of ``name`` are known now: a label column, or a fitted sensor with readings."""
    v = network[name]
    return name in labels or (v.sensor is not None and v.sensor.fitted and all(r in readings for r in v.sensor.names))


def _fit_mixture_sensor(network: AffordanceNetwork, v, readings: dict, labels: dict, entities, rng,
                        warnings: list) -> dict:
    """A mixture sensor's values: on its readings (BIC), or on its units (``sensor_units``) when the cases name
    entities or repeat readings, their number by the held-out effect where there is one (``_effect_of``).
    """
    x = _stacked_readings(v, readings)
    n_components = None if v.values is None else len(v.values)
    cap = v.sensor.max_components
    units = sensor_units(x, entities)
    complete = units.of_case >= 0
    if not complete.any():
        raise DataError(f"sensor '{v.sensor.name}' of '{v.name}' has no complete readings to fit its model from")
    covariance_type = v.sensor.covariance_type if v.sensor.vector else "full"
    effect = _effect_of(network, v.name, readings)
    if n_components is not None or (entities is None and len(units.points) == complete.sum()):
        means, covs = _mixture(x[complete], n_components, cap, covariance_type, rng)
        how, among = "BIC on every reading", int(complete.sum())
    else:
        among = len(units.points)
        if effect is not None:
            companions = [c for c in effect.sensor.cluster_by if c != v.name and _codable(network, c, readings, labels)]
            known = condition_columns(network, companions, readings, labels) if companions else \
                np.zeros((len(x), 0), dtype=np.int64)
            k, _ = choose_by_held_out_effect(units, range(1, min(cap, among) + 1),
                                             _stacked_readings(effect, readings), known, covariance_type, rng)
            how = f"the effect of '{effect.name}' on held-out {units.kind}"
        else:
            k = len(_mixture(units.points, None, cap, covariance_type, rng)[0])
            how = "BIC on its distinct readings"
        means, covs = cluster_gaussians(units.points, ward_clusters(ward_tree(units.points), k), covariance_type)
    if n_components is None and len(means) == cap and cap < among:
        warnings.append(f"'{v.name}': {how} chose {cap} values, the most its sensor's 'max_components' allows: there "
                        f"may be more; raise 'max_components' (or give 'values')" + (
                            "; when trials repeat the readings of a few entities (objects, tools, hands), name the "
                            "column of the entity of each trial (learning option 'entity_column')"
                            if how == "BIC on every reading" else ""))
    values = v.values or tuple(f"{v.name.lower()}_{j}" for j in range(len(means)))
    if v.sensor.vector:
        sensor = SensorModel(names=v.sensor.names, means=means, covariances=covs, max_components=cap,
                             covariance_type=v.sensor.covariance_type, valid_range=v.sensor.valid_range)
    else:
        sensor = SensorModel(v.sensor.name, means[:, 0], np.sqrt(covs[:, 0, 0]), cap, v.sensor.valid_range)
    return {"values": values, "sensor": sensor}


def condition_columns(network: AffordanceNetwork, names: Sequence[str], readings: dict, labels: dict) -> np.ndarray:
    """Per case, the codes (n, len(names)) of the values of ``names`` (-1 where unknown): each variable's label
    where the case has one, else its MAP value from its own fitted sensor.
    """
    n = len(next(iter(readings.values()))) if readings else len(next(iter(labels.values())))
    columns = []
    for name in names:
        v = network[name]
        codes = np.asarray(labels.get(name, np.full(n, -1)), dtype=np.int64).copy()
        if v.sensor is not None and v.sensor.fitted and all(r in readings for r in v.sensor.names):
            x = _stacked_readings(v, readings)
            x = x[:, 0] if not v.sensor.vector else x
            seen = np.any(np.isfinite(x.reshape(n, -1)), axis=1)
            log_post = v.sensor.log_likelihood(x) + np.log(np.maximum(v.sensor.mixture_weights(x), 1e-300))
            codes = np.where((codes < 0) & seen, log_post.argmax(axis=1), codes)
        if np.all(codes < 0):
            raise DataError(f"'{name}' (in a sensor's 'cluster_by') has no label and no sensor reading in any case")
        columns.append(codes)
    return np.stack(columns, axis=1)


@dataclass
class SensorsFit:
    """What ``fit_sensors`` made: the network with every sensor fitted, and what a user should hear of it."""

    network: AffordanceNetwork
    warnings: list = field(default_factory=list)


def fit_sensors(network: AffordanceNetwork, readings: dict, labels: dict, seed: int,
                entities: Sequence | None = None) -> SensorsFit:
    """Fit every sensor model that has no means yet; generate labels for variables without values.
    ``readings`` and ``labels`` are the cases' columns (``CaseSet.readings``, ``CaseSet.labels``); ``seed``
    makes the mixtures' random starts and the folds; ``entities``: per case, the entity it is about (None:
    not known), whose repeated readings count once.

    Sensors with ``cluster_by`` are fitted last, from the conditions of the cases (``labels``: codes
    per variable name), once the sensors of those variables are fitted.
    """
    rng = np.random.default_rng(seed)
    out = SensorsFit(network)
    changes = {}
    for v in network.variables:
        if v.sensor is None or v.sensor.fitted or v.sensor.cluster_by:
            continue
        missing = [r for r in v.sensor.names if r not in readings]
        if missing:
            raise DataError(f"sensor '{v.sensor.name}' of '{v.name}' has no readings {missing} to fit its model from")
        changes[v.name] = _fit_mixture_sensor(network, v, readings, labels, entities, rng, out.warnings)
    out.network = network.replace_variables(changes) if changes else network
    conditional = {v.name: _fit_by_condition(out.network, v, readings, labels, entities, rng)
                   for v in out.network.variables if v.sensor is not None and not v.sensor.fitted}
    if conditional:
        out.network = out.network.replace_variables(conditional)
    return out


def _stacked_readings(v, readings: dict) -> np.ndarray:
    """The readings of ``v``'s sensor as columns (n, d), in the sensor's order."""
    absent = [n for n in v.sensor.names if n not in readings]
    if absent:
        raise DataError(f"readings {absent} of the sensor of '{v.name}' are missing: cannot fit its model")
    return np.stack([np.asarray(readings[n], dtype=float) for n in v.sensor.names], axis=1)


def _fit_by_condition(network: AffordanceNetwork, v, readings: dict, labels: dict, entities, rng) -> dict:
    names = tuple(n for n in v.sensor.cluster_by if network[n].card > 1) or v.sensor.cluster_by[:1]
    x = _stacked_readings(v, readings)
    cards = [network[n].card for n in names]
    try:
        fit = fit_conditional_sensor(x, condition_columns(network, names, readings, labels), cards, rng, entities)
    except DataError as exc:
        raise DataError(f"the sensor of '{v.name}' (cluster_by {list(names)}): {exc}; record more trials of each "
                        "condition, or name fewer variables in 'cluster_by'") from None
    kept = [names[j] for j in fit.variables]
    grid = np.indices([network[n].card for n in kept]).reshape(len(kept), -1).T
    conditions = [".".join(network[n].values[j] for n, j in zip(kept, row)) or "all" for row in grid]
    values = tuple(conditions + [f"{c}.wide" for c in conditions])
    if len(set(values)) != len(values):
        values = tuple(f"{v.name.lower()}_{j}" for j in range(len(values)))
    if v.sensor.vector:
        sensor = SensorModel(names=v.sensor.names, means=fit.means, covariances=fit.covariances,
                             max_components=v.sensor.max_components, covariance_type=v.sensor.covariance_type,
                             valid_range=v.sensor.valid_range, cluster_by=tuple(kept))
    else:
        sensor = SensorModel(v.sensor.name, fit.means[:, 0], np.sqrt(fit.covariances[:, 0, 0]),
                             v.sensor.max_components, v.sensor.valid_range, cluster_by=tuple(kept))
    return {"values": values, "sensor": sensor}
