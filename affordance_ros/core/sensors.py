"""Sensor models from readings: 1-D Gaussian mixtures, the number of components by BIC.

This is the role X-means plays in the paper: each component becomes one value of the
hidden variable, components ordered by mean.
"""

from __future__ import annotations

import numpy as np

from .errors import DataError
from .network import AffordanceNetwork, SensorModel

_LOG_2PI = np.log(2.0 * np.pi)


def gaussian_log_pdf(x: np.ndarray, means: np.ndarray, stddevs: np.ndarray) -> np.ndarray:
    """The log density N(x | mean, stddev) of every reading (rows) under every component (columns)."""
    z = (x[:, None] - means) / stddevs
    return -0.5 * z * z - np.log(stddevs) - 0.5 * _LOG_2PI


def fit_gmm_1d(x: np.ndarray, n_components: int, rng: np.random.Generator, n_init: int = 4,
               max_iter: int = 300, tol: float = 1e-8):
    """Maximum-likelihood 1-D mixture by EM, best of ``n_init`` starts.

    Returns (weights, means, stddevs, log_likelihood), components sorted by mean.
    """
    x = np.asarray(x, dtype=float)
    k = n_components
    if x.size < k:
        raise DataError(f"{x.size} readings cannot fit {k} mixture components")
    floor = max(1e-6, 1e-3 * float(np.std(x)) or 1e-6)
    best = None
    for attempt in range(n_init):
        if attempt == 0:
            means = np.quantile(x, (np.arange(k) + 0.5) / k)
        else:
            means = rng.choice(x, size=k, replace=False)
        stddevs = np.full(k, max(float(np.std(x)) / k, floor))
        weights = np.full(k, 1.0 / k)
        previous = -np.inf
        for _ in range(max_iter):
            log_joint = gaussian_log_pdf(x, means, stddevs) + np.log(weights)
            top = log_joint.max(axis=1, keepdims=True)
            resp = np.exp(log_joint - top)
            norm = resp.sum(axis=1, keepdims=True)
            ll = float((np.log(norm) + top).sum())
            resp /= norm
            nk = resp.sum(axis=0) + 1e-12
            weights = nk / x.size
            means = (resp * x[:, None]).sum(axis=0) / nk
            stddevs = np.sqrt(np.maximum((resp * (x[:, None] - means) ** 2).sum(axis=0) / nk, floor ** 2))
            if ll - previous < tol * abs(ll):
                break
            previous = ll
        if best is None or ll > best[3]:
            best = (weights, means, stddevs, ll)
    weights, means, stddevs, ll = best
    order = np.argsort(means)
    return weights[order], means[order], stddevs[order], ll


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
        w, m, s, _ = fit_gmm_1d(x, n_components, rng)
        return m, s, w
    best = None
    for k in range(1, min(max_components, x.size) + 1):
        w, m, s, ll = fit_gmm_1d(x, k, rng)
        bic = -2.0 * ll + (3 * k - 1) * np.log(x.size)
        if best is None or bic < best[0]:
            best = (bic, m, s, w)
    return best[1], best[2], best[3]


def mixture_weights(model: SensorModel, readings: np.ndarray, max_iter: int = 200, tol: float = 1e-8) -> np.ndarray:
    """p(value) of a sensor's mixture with means/stddevs held fixed (EM on the weights only)."""
    x = np.asarray(readings, dtype=float)
    x = x[np.isfinite(x)]
    k = model.means.size
    weights = np.full(k, 1.0 / k)
    if x.size == 0:
        return weights
    lik = np.exp(model.log_likelihood(x) - model.log_likelihood(x).max(axis=1, keepdims=True))
    for _ in range(max_iter):
        resp = lik * weights
        resp /= resp.sum(axis=1, keepdims=True)
        new = resp.mean(axis=0)
        if np.max(np.abs(new - weights)) < tol:
            return new
        weights = new
    return weights


def fit_sensors(network: AffordanceNetwork, readings: dict, seed: int = 0) -> AffordanceNetwork:
    """Fit every sensor model that has no means yet; generate labels for variables without values."""
    rng = np.random.default_rng(seed)
    changes = {}
    for v in network.variables:
        if v.sensor is None or v.sensor.fitted:
            continue
        if v.sensor.name not in readings:
            raise DataError(f"sensor '{v.sensor.name}' of '{v.name}' has no readings to fit its model from")
        n_components = None if v.values is None else len(v.values)
        means, stddevs, _ = fit_sensor(readings[v.sensor.name], n_components, v.sensor.max_components, rng)
        values = v.values or tuple(f"{v.name.lower()}_{j}" for j in range(means.size))
        sensor = SensorModel(v.sensor.name, means, stddevs, v.sensor.max_components)
        changes[v.name] = {"values": values, "sensor": sensor}
    return network.replace_variables(changes) if changes else network
