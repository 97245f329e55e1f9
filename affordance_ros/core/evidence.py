"""Evidence as inference consumes it: per-variable likelihood arrays over many cases.

Labels (hard evidence) and sensor readings (soft evidence through the sensor models) of K
cases both become, per variable, an array (K, card) of likelihoods p(evidence | value),
scaled so that each row's maximum is 1; what the scaling divided out is kept in
``log_scale`` so that log-likelihoods stay exact.

A case whose every variable is given by label (``CompleteCases``) needs no inference at all: its
family counts are counted and its log-likelihood is read from the CPTs at its values.
"""

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class CompleteCases:
    """The cases whose every variable is known (one-hot likelihoods: a label): nothing in them is hidden.

    ``rows`` (K,) bool: which of the K cases; ``codes`` (complete, n): their values; ``log_scale``: what their
    readings add to their log-likelihood (the sum of log p(readings | the known values), 0 without readings).
    Their expected family counts are their counts (``family_counts``), the same under every CPTs, and their
    log-likelihood is sum over families of counts x log CPT plus ``log_scale`` (``log_likelihood``).
    """

    rows: np.ndarray
    codes: np.ndarray
    log_scale: float = 0.0

    @classmethod
    def none(cls, n_cases: int, n_variables: int) -> "CompleteCases":
        """No complete case among ``n_cases``."""
        return cls(np.zeros(n_cases, dtype=bool), np.zeros((0, n_variables), dtype=np.int64))

    @classmethod
    def in_evidence(cls, evidence: Evidence) -> "CompleteCases":
        """The cases of ``evidence`` whose every variable has exactly one value of non-zero likelihood."""
        n_cases, n = evidence.n_cases, len(evidence.likelihoods)
        if any(lik is None for lik in evidence.likelihoods):
            return cls.none(n_cases, n)
        rows = np.ones(n_cases, dtype=bool)
        for lik in evidence.likelihoods:
            rows &= np.count_nonzero(lik, axis=1) == 1
        codes = np.stack([np.argmax(lik[rows], axis=1) for lik in evidence.likelihoods], axis=1)
        return cls(rows, codes.reshape(-1, n), float(evidence.log_scale[rows].sum()))

    @property
    def n_cases(self) -> int:
        """How many cases are complete."""
        return len(self.codes)

    @property
    def any(self) -> bool:
        """Whether some case is complete."""
        return len(self.codes) > 0

    @property
    def all(self) -> bool:
        """Whether every case is complete."""
        return len(self.codes) == len(self.rows)

    def family_counts(self, parents: Sequence[Sequence[int]], cards: Sequence[int]) -> list:
        """Counts of every variable's family configurations over these cases, each shaped like its CPT (axes: its
        ``parents[i]`` in that order, then itself), floats: one counting pass per family.
        """
        columns = np.ascontiguousarray(self.codes.T)
        out = []
        for i, family in enumerate(parents):
            shape = tuple(int(cards[a]) for a in (*family, i))
            flat = columns[i].copy()
            stride = shape[-1]
            for p, card in zip(reversed(family), reversed(shape[:-1])):
                flat += columns[p] * stride
                stride *= card
            out.append(np.bincount(flat, minlength=math.prod(shape)).reshape(shape).astype(float))
        return out

    def log_likelihood(self, parents: Sequence[Sequence[int]], counts: Sequence[np.ndarray],
                       cpts: Sequence[np.ndarray]) -> float:
        """Log p(these cases | ``cpts``), from their ``family_counts(parents, ...)``; EvidenceError naming the cases
        (their indices among all K) that ``cpts`` give probability zero, as inference names them.
        """
        total = self.log_scale
        for c, cpt in zip(counts, cpts):
            seen = c > 0
            theta = cpt[seen]
            if np.any(theta <= 0):
                raise EvidenceError(f"the evidence of case(s) {self._impossible(parents, cpts)[:10].tolist()} has "
                                    "probability zero under the model")
            total += float(np.dot(c[seen], np.log(theta)))
        return total

    def _impossible(self, parents: Sequence[Sequence[int]], cpts: Sequence[np.ndarray]) -> np.ndarray:
        """The indices among all K cases of the complete cases that ``cpts`` give probability zero."""
        bad = np.zeros(self.n_cases, dtype=bool)
        for i, (family, cpt) in enumerate(zip(parents, cpts)):
            bad |= cpt[tuple(self.codes[:, a] for a in (*family, i))] <= 0
        return np.flatnonzero(self.rows)[bad]


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
