"""EM's E-step: the one protocol its backends follow, and the factory that chooses one.

An E-step backend is called with CPTs and returns the expected family counts of the cases (each
shaped like its CPT) and their total log-likelihood; ``log_likelihood(cpts)`` gives the latter
alone. ``choose_estep`` picks one for an EM run (docs/python-api.md has the table, with why):

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
from .inference import JunctionTree, JunctionTreeEStep, StreamingEStep
from .separator_estep import SeparatorEStep


class EStepBackend(Protocol):
    """What EM's driver calls for an E-step (``core.em.ExpectationMaximisation``)."""

    n_cases: int

    def __call__(self, cpts: Sequence[np.ndarray]) -> tuple[list, float]:
        """Expected family counts (shaped like the CPTs) and the total log-likelihood."""

    def log_likelihood(self, cpts: Sequence[np.ndarray]) -> float:
        """Total log p(evidence | CPTs)."""


def choose_estep(tree: JunctionTree, observed: CaseEvidence, chunk_size: int = 512,
                 readings: dict | None = None) -> EStepBackend:
    """The E-step backend for EM on ``observed`` under ``tree``'s structure; with ``readings``
    (sensor features by variable index, ``core.em_sensors``) one that also gathers their
    posterior-weighted moments.
    """
    if readings is not None:
        return JunctionTreeEStep(tree, observed.evidence(), chunk_size, readings)
    if not observed.held:
        return StreamingEStep(tree, observed.chunks, observed.n_cases, chunk_size)
    if SeparatorEStep.fits(tree, observed.n_cases):
        return SeparatorEStep(tree, observed.evidence())
    return JunctionTreeEStep(tree, observed.evidence(), chunk_size)


__all__ = ["EStepBackend", "choose_estep"]
