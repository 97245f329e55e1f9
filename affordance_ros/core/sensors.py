"""Sensor models from readings: Gaussian mixtures, the number of components by BIC.

This is the role X-means plays in the paper: each component becomes one value of the
hidden variable. A 1-D sensor's components are ordered by mean. A vector sensor (several
readings at once) gets a multivariate mixture fitted on internally standardised readings,
whose number of components and covariance type (full or diagonal) BIC chooses, with a
covariance floor so that repeated identical readings never collapse a component; its
components are ordered by their first coordinate.

A sensor with ``cluster_by`` (typically an effect, by the action and the objects) gets its
values from the conditions of the experiment instead: each combination of those variables'
values seen in enough cases becomes two values, a robust centre of its readings with a core
and a wide Gaussian (``fit_conditional_sensor``). Clusters of the pooled readings are shared
by conditions whose readings differ, and a broad cluster's mean answers for readings far from
it; a prediction of the readings (the posterior mean of the components' means) then drifts
towards the middle. Per condition, the posterior mean stays at the condition's robust centre.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import DataError
from .gaussian import fit_mixture, n_parameters
from .network import AffordanceNetwork, SensorModel

# fewest readings of one condition that give it values of its own (``cluster_by``)
MIN_CONDITION_READINGS = 3
# A condition's wide Gaussian has this many times the variance of its core (twice the standard
# deviation): the two about one centre are Tukey's contaminated normal, whose wide part takes the
# heavy tails and the outliers so that they neither inflate the core nor pull the centre.
WIDE_VARIANCE = 4.0
# A condition's centre is the trimmed mean, from the mean (0) to the median (0.5), that predicts held-out
# trials of their condition best (CENTRE_FOLDS-fold cross-validation within every condition, squared error):
# the median where outliers would drag the mean, the mean where the readings are skewed and the median
# would miss the reading to expect.
CENTRE_TRIMS = (0.0, 0.1, 0.25, 0.5)
CENTRE_FOLDS = 5
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


def robust_covariance(residuals: np.ndarray) -> np.ndarray:
    """Diagonal covariance (d, d) of residuals (n, d) from each coordinate's median absolute deviation
    (x 1.4826: the standard deviation of a Gaussian), floored so that identical readings keep a width.
    """
    r = np.asarray(residuals, dtype=float)
    variance = (1.4826 * np.median(np.abs(r), axis=0)) ** 2
    return np.diag(np.maximum(variance, np.maximum(COVARIANCE_FLOOR * r.var(axis=0), 1e-12)))


def trimmed_centres(x: np.ndarray, trims: Sequence[float] = CENTRE_TRIMS) -> np.ndarray:
    """Coordinate-wise trimmed means (len(trims), d) of rows ``x`` (n, d): for each trim, int(trim * n) rows
    cut from each end of every sorted coordinate (0.5: the median).
    """
    ordered = np.sort(x, axis=0)
    n = len(ordered)
    return np.array([np.median(ordered, axis=0) if trim >= 0.5 else ordered[int(trim * n):n - int(trim * n)].mean(0)
                     for trim in trims])


def choose_centre_trim(parts: Sequence[np.ndarray], rng: np.random.Generator) -> float:
    """The trim of ``CENTRE_TRIMS`` whose centres of the training folds of every condition (``parts``:
    each condition's readings) are nearest, in squared error, to the held-out readings.
    """
    errors = np.zeros(len(CENTRE_TRIMS))
    for part in parts:
        folds = rng.permutation(len(part)) % min(CENTRE_FOLDS, len(part))
        for fold in range(folds.max() + 1):
            test = part[folds == fold]
            centres = trimmed_centres(part[folds != fold])                        # (trims, d)
            errors += ((test[None, :, :] - centres[:, None, :]) ** 2).sum(axis=(1, 2))
    return CENTRE_TRIMS[int(np.argmin(errors))]


def fit_conditional_sensor(readings: np.ndarray, conditions: np.ndarray, rng: np.random.Generator | None = None,
                           min_readings: int = MIN_CONDITION_READINGS):
    """A sensor's values from the conditions of the experiment: readings (n, d), and per reading the
    code of its condition (n,) (-1: unknown, left out).

    Every condition with at least ``min_readings`` complete readings gets two components centred at
    the trimmed mean of its readings (the trim by ``choose_centre_trim``; ``rng`` makes its folds): a
    core, with the robust covariance of all conditions' residuals (``robust_covariance``), and a wide
    one with ``WIDE_VARIANCE`` times it. Returns (condition codes (G,), means (2G, d), covariances
    (2G, d, d): the G cores in code order, then the G wide ones, and the trim chosen).
    """
    x = np.asarray(readings, dtype=float).reshape(len(conditions), -1)
    conditions = np.asarray(conditions)
    keep = np.all(np.isfinite(x), axis=1) & (conditions >= 0)
    codes, inverse, counts = np.unique(conditions[keep], return_inverse=True, return_counts=True)
    enough = counts >= min_readings
    if not np.any(enough):
        most = int(counts.max()) if counts.size else 0
        raise DataError(f"no condition has {min_readings} complete readings to fit the sensor model from (the most "
                        f"any has is {most})")
    rows = enough[inverse]
    x, group = x[keep][rows], np.cumsum(enough)[inverse[rows]] - 1
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(int(enough.sum())))
    parts = np.split(x[order], starts[1:])
    trim = choose_centre_trim(parts, rng if rng is not None else np.random.default_rng(0))
    centres = np.array([trimmed_centres(part, (trim,))[0] for part in parts])
    core = robust_covariance(x - centres[group])
    means = np.concatenate([centres, centres])
    covs = np.repeat(np.stack([core, WIDE_VARIANCE * core]), len(centres), axis=0)
    return codes[enough], means, covs, trim


def condition_codes(network: AffordanceNetwork, names: Sequence[str], readings: dict,
                    labels: dict) -> np.ndarray:
    """Per case, the code of its combination of the values of ``names`` (-1 where one is unknown):
    each variable's label where the case has one, else its MAP value from its own fitted sensor.
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
    codes = np.stack(columns, axis=1)
    known = np.all(codes >= 0, axis=1)
    cards = [network[name].card for name in names]
    return np.where(known, np.ravel_multi_index(np.where(known[:, None], codes, 0).T, cards), -1)


def fit_sensors(network: AffordanceNetwork, readings: dict, labels: dict, seed: int) -> AffordanceNetwork:
    """Fit every sensor model that has no means yet; generate labels for variables without values.
    ``readings`` and ``labels`` are the cases' columns (``CaseSet.readings``, ``CaseSet.labels``); ``seed``
    makes the mixtures' random starts.

    Sensors with ``cluster_by`` are fitted last, from the conditions of the cases (``labels``: codes
    per variable name), once the sensors of those variables are fitted.
    """
    rng = np.random.default_rng(seed)
    changes = {}
    for v in network.variables:
        if v.sensor is None or v.sensor.fitted or v.sensor.cluster_by:
            continue
        if v.sensor.vector:
            changes[v.name] = _fit_vector(v, readings, rng)
            continue
        if v.sensor.name not in readings:
            raise DataError(f"sensor '{v.sensor.name}' of '{v.name}' has no readings to fit its model from")
        n_components = None if v.values is None else len(v.values)
        means, stddevs, _ = fit_sensor(readings[v.sensor.name], n_components, v.sensor.max_components, rng)
        values = v.values or tuple(f"{v.name.lower()}_{j}" for j in range(means.size))
        sensor = SensorModel(v.sensor.name, means, stddevs, v.sensor.max_components)
        changes[v.name] = {"values": values, "sensor": sensor}
    network = network.replace_variables(changes) if changes else network
    conditional = {v.name: _fit_by_condition(network, v, readings, labels, rng)
                   for v in network.variables if v.sensor is not None and not v.sensor.fitted}
    return network.replace_variables(conditional) if conditional else network


def _stacked_readings(v, readings: dict) -> np.ndarray:
    """The readings of ``v``'s sensor as columns (n, d), in the sensor's order."""
    absent = [n for n in v.sensor.names if n not in readings]
    if absent:
        raise DataError(f"readings {absent} of the sensor of '{v.name}' are missing: cannot fit its model")
    return np.stack([np.asarray(readings[n], dtype=float) for n in v.sensor.names], axis=1)


def _fit_by_condition(network: AffordanceNetwork, v, readings: dict, labels: dict, rng: np.random.Generator) -> dict:
    names = v.sensor.cluster_by
    x = _stacked_readings(v, readings)
    try:
        codes, means, covs, _ = fit_conditional_sensor(x, condition_codes(network, names, readings, labels), rng)
    except DataError as exc:
        raise DataError(f"the sensor of '{v.name}' (cluster_by {list(names)}): {exc}; record more trials of each "
                        "condition, or name fewer variables in 'cluster_by'") from None
    cards = [network[n].card for n in names]
    conditions = [".".join(network[n].values[j] for n, j in zip(names, np.unravel_index(c, cards))) for c in codes]
    values = tuple(conditions + [f"{c}.wide" for c in conditions])
    if len(set(values)) != len(values):
        values = tuple(f"{v.name.lower()}_{j}" for j in range(len(values)))
    if v.sensor.vector:
        sensor = SensorModel(names=v.sensor.names, means=means, covariances=covs,
                             max_components=v.sensor.max_components, covariance_type=v.sensor.covariance_type)
    else:
        sensor = SensorModel(v.sensor.name, means[:, 0], np.sqrt(covs[:, 0, 0]), v.sensor.max_components)
    return {"values": values, "sensor": sensor}


def _fit_vector(v, readings: dict, rng: np.random.Generator) -> dict:
    x = _stacked_readings(v, readings)
    n_components = None if v.values is None else len(v.values)
    means, covs, _, cov_type = fit_vector_sensor(x, n_components, v.sensor.max_components,
                                                 v.sensor.covariance_type, rng)
    values = v.values or tuple(f"{v.name.lower()}_{j}" for j in range(len(means)))
    sensor = SensorModel(names=v.sensor.names, means=means, covariances=covs,
                         max_components=v.sensor.max_components, covariance_type=v.sensor.covariance_type)
    return {"values": values, "sensor": sensor}
