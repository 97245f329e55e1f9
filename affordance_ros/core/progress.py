"""Progress of a learning run, and how to stop one: a callback the learner calls between steps.

``progress(phase, iteration, log_likelihood)`` is called by ``AffordanceLearner.fit``,
``learn_structure``, ``fit_em`` and ``core.posterior_sampling.draw_posterior``: ``phase`` is "sensors",
"structure", "parameters" or "posterior", ``iteration`` counts the steps of that phase (K2: variables
placed, MCMC: samples drawn, EM: iterations done, the posterior's sampler: sweeps done) and
``log_likelihood`` is the structure score or the EM log-likelihood so far (NaN when there is none yet).
The callback may raise ``LearningCancelled`` (or return False, which raises it) to stop learning:
nothing learned so far is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

Progress = Optional[Callable[[str, int, float], Optional[bool]]]


@dataclass(frozen=True)
class LearnProgress:
    """Where a learn of stored cases is (the learner node's, told to its Learn action's client): ``phase``
    (sensors, structure, parameters, posterior), its ``iteration``, the score or log-likelihood so far (NaN: none
    yet), the number of ``cases`` learned from and the seconds ``elapsed``.
    """

    phase: str
    iteration: int
    log_likelihood: float
    cases: int
    elapsed: float


class LearningCancelled(Exception):
    """Learning was stopped by its progress callback; nothing of that run is kept."""


def report(progress: Progress, phase: str, iteration: int, log_likelihood: float = float("nan")) -> None:
    """Call ``progress`` (if any); ``LearningCancelled`` when it returns False."""
    if progress is not None and progress(phase, int(iteration), float(log_likelihood)) is False:
        raise LearningCancelled(f"learning was cancelled during the {phase} phase")


__all__ = ["LearnProgress", "LearningCancelled", "Progress", "report"]
