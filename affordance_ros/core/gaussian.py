"""Gaussians: the one log-density of the sensor models, and mixtures of Gaussians fitted by EM.

A 1-D reading is the case d = 1 of a vector of d readings: one density and one EM loop serve both.
A component's covariance is a (d, d) matrix (a 1-D sensor's: its variance, (1, 1)). Readings that are
NaN are missing: the density marginalises them out.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .errors import DataError

LOG_2PI = math.log(2.0 * math.pi)
# what is added to a component's weight (in cases) so that an empty component divides by no zero
_EMPTY_WEIGHT = 1e-12


def _log_normal(squared_distance: np.ndarray, log_scale: np.ndarray, dims) -> np.ndarray:
    """Log N from the squared Mahalanobis distance, half the log-determinant of the covariance (the log of a
    1-D Gaussian's standard deviation) and the dimension.
    """
    return -0.5 * squared_distance - log_scale - 0.5 * dims * LOG_2PI


def log_density(x: np.ndarray, means: np.ndarray, covariances: np.ndarray) -> np.ndarray:
    """Log N(x_k; means[j], covariances[j]) for every reading k and component j, (K, card).

    ``x`` (K, d), ``means`` (card, d), ``covariances`` (card, d, d). NaN entries of ``x`` are marginalised
    out: the cases are grouped by which readings they have, and each group is done at once on its
    sub-vector (rows with none: 0, no evidence).
    """
    n, d = x.shape
    missing = np.isnan(x)
    if not missing.any():
        return _complete_log_density(x, means, covariances)
    present = ~missing
    out = np.zeros((n, means.shape[0]))
    code = present.astype(np.int64) @ (1 << np.arange(d, dtype=np.int64))   # the missing-pattern of each case
    for pattern in np.unique(code):
        if pattern == 0:
            continue
        rows = np.flatnonzero(code == pattern)
        dims = np.flatnonzero((pattern >> np.arange(d)) & 1)
        out[rows] = _complete_log_density(x[np.ix_(rows, dims)], means[:, dims],
                                          covariances[:, dims[:, None], dims[None, :]])
    return out


def _complete_log_density(x: np.ndarray, means: np.ndarray, covariances: np.ndarray) -> np.ndarray:
    """``log_density`` for rows without NaN."""
    d = x.shape[1]
    if d == 1:   # the Cholesky factor of a 1x1 covariance is the standard deviation: no matrix work
        stddevs = np.sqrt(covariances[:, 0, 0])
        z = (x - means[:, 0]) / stddevs                                # (K, card)
        return _log_normal(z * z, np.log(stddevs), 1)
    chol = np.linalg.cholesky(covariances)                             # (card, d, d)
    inv_chol = np.linalg.inv(chol)
    z = inv_chol @ (x.T[None, :, :] - means[:, :, None])               # (card, d, K)
    log_scale = np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    return _log_normal((z * z).sum(axis=1), log_scale[:, None], d).T


def diagonal_log_density(x: np.ndarray, means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """Log N(x_k; means[k], diag(variances[k])) of every row k, (K,): each case its own Gaussian with
    independent readings (``x``, ``means``, ``variances`` all (K, d)); NaN readings are marginalised out.
    """
    present = ~np.isnan(x)
    squared = np.where(present, (x - means) ** 2 / variances, 0.0).sum(axis=1)
    log_scale = 0.5 * np.where(present, np.log(variances), 0.0).sum(axis=1)
    return _log_normal(squared, log_scale, present.sum(axis=1))


def log_sum_exp_rows(log_values: np.ndarray) -> np.ndarray:
    """Per row, log sum exp of ``log_values`` (n, k), as a column (n, 1)."""
    # by hand: in EM's inner loop, scipy.special.logsumexp's overhead would cost more than the sum
    top = log_values.max(axis=1, keepdims=True)
    return np.log(np.exp(log_values - top).sum(axis=1, keepdims=True)) + top


def responsibilities(log_joint: np.ndarray) -> tuple[np.ndarray, float]:
    """A mixture's E-step: p(component | reading) from log p(reading, component) (n, k), and the total
    log-likelihood of the readings.
    """
    log_norm = log_sum_exp_rows(log_joint)
    return np.exp(log_joint - log_norm), float(log_norm.sum())


def fit_mixture(x: np.ndarray, starts: Iterable[tuple[np.ndarray, np.ndarray]], covariance_type: str = "full",
                floor: float = 0.0, min_variance: float = 0.0, max_iter: int = 200, tol: float = 1e-4):
    """Maximum-likelihood Gaussian mixture by EM on complete rows ``x`` (n, d), the best of its ``starts``.

    ``starts``: (means (k, d), covariances (k, d, d)) to start EM from, one run each, equal weights.
    ``covariance_type`` "full" or "diag" (for d = 1 the same). In every M-step each variance is raised to
    ``min_variance`` and then ``floor`` is added to it, so that repeated readings never collapse a
    component. EM stops when the log-likelihood gains less than ``tol`` (relative) or after ``max_iter``
    steps. Returns (weights (k,), means (k, d), covariances (k, d, d), log-likelihood).
    """
    n, d = x.shape
    diagonal = np.arange(d)
    best = None
    for means, covariances in starts:
        k = len(means)
        if n < k:
            raise DataError(f"{n} readings cannot fit {k} mixture components")
        weights = np.full(k, 1.0 / k)
        previous = -np.inf
        for _ in range(max_iter):
            resp, ll = responsibilities(log_density(x, means, covariances) + np.log(weights))
            nk = resp.sum(axis=0) + _EMPTY_WEIGHT
            weights = nk / n
            means = (resp.T @ x) / nk[:, None]
            diff = x[None, :, :] - means[:, None, :]                          # (k, n, d)
            weighted = resp.T[:, :, None] * diff
            if covariance_type == "diag":
                covariances = (weighted * diff).sum(axis=1)[:, :, None] * np.eye(d) / nk[:, None, None]
            else:
                covariances = np.swapaxes(weighted, 1, 2) @ diff / nk[:, None, None]
            covariances[:, diagonal, diagonal] = np.maximum(covariances[:, diagonal, diagonal], min_variance) + floor
            if ll - previous < tol * abs(ll):
                break
            previous = ll
        if best is None or ll > best[3]:
            best = (weights, means, covariances, ll)
    return best


def n_parameters(k: int, d: int, covariance_type: str) -> int:
    """Free parameters of a mixture of k Gaussians in d dimensions (BIC's penalty counts them)."""
    per_cov = d * (d + 1) // 2 if covariance_type == "full" else d
    return k * (d + per_cov) + k - 1


def mixture_weights(log_likelihoods: np.ndarray, max_iter: int = 200, tol: float = 1e-8) -> np.ndarray:
    """p(component) of a mixture whose components are held fixed (EM on the weights only), from the log
    p(reading | component) (n, k) of readings; uniform when there are none.
    """
    k = log_likelihoods.shape[1]
    weights = np.full(k, 1.0 / k)
    if len(log_likelihoods) == 0:
        return weights
    lik = np.exp(log_likelihoods - log_likelihoods.max(axis=1, keepdims=True))
    for _ in range(max_iter):
        resp = lik * weights
        resp /= resp.sum(axis=1, keepdims=True)
        new = resp.mean(axis=0)
        if np.max(np.abs(new - weights)) < tol:
            return new
        weights = new
    return weights


__all__ = ["LOG_2PI", "diagonal_log_density", "fit_mixture", "log_density", "mixture_weights", "n_parameters",
           "responsibilities", "log_sum_exp_rows"]
