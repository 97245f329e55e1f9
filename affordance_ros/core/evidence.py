"""Evidence as inference consumes it: per-variable likelihood arrays over many cases.

Labels (hard evidence) and sensor readings (soft evidence through the sensor models) of K
cases both become, per variable, an array (K, card) of likelihoods p(evidence | value),
scaled so that each row's maximum is 1; what the scaling divided out is kept in
``log_scale`` so that log-likelihoods stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import EvidenceError


@dataclass(frozen=True)
class Evidence:
    """Per-variable likelihoods of K cases, each (K, card) with row maximum 1, or None.

    ``log_scale`` (K,) holds what was divided out, so that
    log p(evidence) = log(sum over joint of prior * likelihoods) + log_scale.
    """

    likelihoods: tuple
    log_scale: np.ndarray

    @property
    def n_cases(self) -> int:
        """Number of cases K."""
        return self.log_scale.shape[0]

    def take(self, rows) -> "Evidence":
        """The evidence of the cases at ``rows``."""
        return Evidence(tuple(None if lik is None else lik[rows] for lik in self.likelihoods),
                        self.log_scale[rows])

    @classmethod
    def empty(cls, n_variables: int, n_cases: int = 1) -> "Evidence":
        """No evidence on any of ``n_variables`` variables, for ``n_cases`` cases."""
        return cls((None,) * n_variables, np.zeros(n_cases))


def impossible_rows(log_lik: Sequence, n_cases: int) -> np.ndarray:
    """(K,) bool: the cases whose evidence has zero likelihood (or NaN) for every value of some variable,
    which ``evidence_from_log_likelihoods`` refuses; drop them first (``CaseSet.impossible``).
    """
    bad = np.zeros(n_cases, dtype=bool)
    for ll in log_lik:
        if ll is not None:
            top = ll.max(axis=1)
            bad |= np.isneginf(top) | np.isnan(top)
    return bad


def evidence_from_log_likelihoods(log_lik: Sequence, n_cases: int) -> Evidence:
    """Scale each variable's log-likelihood rows to a maximum of 0 before exponentiating."""
    log_scale = np.zeros(n_cases)
    likelihoods = []
    for ll in log_lik:
        if ll is None:
            likelihoods.append(None)
            continue
        top = ll.max(axis=1)
        if np.any(np.isneginf(top)):
            raise EvidenceError("evidence with zero likelihood for every value of a variable "
                                "(find such cases with CaseSet.impossible and leave them out)")
        log_scale += top
        likelihoods.append(np.exp(ll - top[:, None]))
    return Evidence(tuple(likelihoods), log_scale)


def most_probable_values(evidence: Evidence, priors: Sequence[np.ndarray]) -> np.ndarray:
    """argmax_v p(evidence | v) p(v) of every variable in every case, (K, n), each variable from its own
    likelihoods; where a variable has none, argmax p.
    """
    codes = np.empty((evidence.n_cases, len(priors)), dtype=np.int64)
    for i, (lik, prior) in enumerate(zip(evidence.likelihoods, priors)):
        prior = np.asarray(prior, dtype=float)
        codes[:, i] = np.argmax(prior) if lik is None else np.argmax(lik * prior, axis=1)
    return codes


def latent_variables(evidence: Evidence) -> list:
    """Indices of the variables that no case gives any evidence on (no label, no reading)."""
    return [i for i, lik in enumerate(evidence.likelihoods) if lik is None or bool(np.all(lik == 1.0))]
