"""EM's E-step: the one protocol its backends follow, and the factory that chooses one.

An E-step backend is called with CPTs and returns the expected family counts of the cases (each
shaped like its CPT) and their total log-likelihood; ``log_likelihood(cpts)`` gives the latter
alone. ``choose_estep`` picks one for an EM run (docs/python-api.md has the table, with why); where
some cases are complete (every variable given by label), ``CountedEStep`` counts them once and
hands only the others to the backend it picks for them:

- ``separator_estep.SeparatorEStep`` when the cases' evidence is held and its layout fits in
  ``separator_estep.MAX_ENTRIES`` numbers;
- ``inference.JunctionTreeEStep`` when the evidence is held but that layout does not fit, and when
  the sensors are re-estimated inside EM (it also gathers the readings' moments);
- ``inference.StreamingEStep`` when the evidence is not held (``CaseEvidence.held``).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from .cases import CaseEvidence
from .evidence import CompleteCases
from .inference import JunctionTree, JunctionTreeEStep, StreamingEStep
from .separator_estep import SeparatorEStep


class EStepBackend(Protocol):
    """What EM's driver calls for an E-step (``core.em.ExpectationMaximisation``)."""

    n_cases: int

    def __call__(self, cpts: Sequence[np.ndarray]) -> tuple[list, float]:
        """Expected family counts (shaped like the CPTs) and the total log-likelihood."""

    def log_likelihood(self, cpts: Sequence[np.ndarray]) -> float:
        """Total log p(evidence | CPTs)."""


class CountedEStep:
    """An ``EStepBackend`` for cases some of which are complete: their family counts, counted once, are their
    expected counts under any CPTs, and their log-likelihood comes from those counts (``CompleteCases``); only
    the other cases go through ``rest``, another backend (None: there are none).
    """

    def __init__(self, tree: JunctionTree, complete: CompleteCases, rest: EStepBackend | None):
        self.complete = complete
        self.parents = tree.parents
        self.counts = complete.family_counts(tree.parents, tree.cards)
        self.rest = rest
        self.n_cases = complete.n_cases + (0 if rest is None else rest.n_cases)

    def __call__(self, cpts: Sequence[np.ndarray]) -> tuple[list, float]:
        """Expected family counts (shaped like the CPTs) and the total log-likelihood."""
        if self.rest is None:
            counts, ll = [c.copy() for c in self.counts], 0.0
        else:
            counts, ll = self.rest(cpts)
            counts = [c + k for c, k in zip(counts, self.counts)]
        return counts, ll + self.complete.log_likelihood(self.parents, self.counts, cpts)

    def log_likelihood(self, cpts: Sequence[np.ndarray]) -> float:
        """Total log p(evidence | CPTs)."""
        rest = 0.0 if self.rest is None else self.rest.log_likelihood(cpts)
        return rest + self.complete.log_likelihood(self.parents, self.counts, cpts)


def choose_estep(tree: JunctionTree, observed: CaseEvidence, chunk_size: int = 512,
                 readings: dict | None = None) -> EStepBackend:
    """The E-step backend for EM on ``observed`` under ``tree``'s structure; with ``readings``
    (sensor features by variable index, ``core.em_sensors``) one that also gathers their
    posterior-weighted moments (of every case: the complete ones are not set apart).
    """
    if readings is not None:
        return JunctionTreeEStep(tree, observed.evidence(), chunk_size, readings)
    complete = observed.complete
    if complete.any:
        rest = None if complete.all else _inferred(tree, observed.incomplete(), chunk_size)
        return CountedEStep(tree, complete, rest)
    return _inferred(tree, observed, chunk_size)


def _inferred(tree: JunctionTree, observed: CaseEvidence, chunk_size: int) -> EStepBackend:
    """The backend that infers the expected counts of every case of ``observed``."""
    if not observed.held:
        return StreamingEStep(tree, observed.chunks, observed.n_cases, chunk_size)
    if SeparatorEStep.fits(tree, observed.n_cases):
        return SeparatorEStep(tree, observed.evidence())
    return JunctionTreeEStep(tree, observed.evidence(), chunk_size)


__all__ = ["CountedEStep", "EStepBackend", "choose_estep"]
