"""Where EM's next E-step runs: plain EM, or SQUAREM's extrapolation (``em_acceleration``).

Each is an ``Acceleration`` of ``core.em.ExpectationMaximisation``: told every EM step, it says
whether the step goes on the trace and where the next E-step runs.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .em import Acceleration, EMStep
from .errors import ModelFormatError

TINY = 1e-300          # added before a logarithm: a CPT entry may be exactly zero
MAX_STEP_LENGTH = 1e6  # SQUAREM's bound on its step length never grows past this


class PlainEM:
    """Every EM step is kept and the next runs at its result."""

    def start(self, cpts: list) -> None:
        """Nothing to remember."""

    def accept(self, step: EMStep) -> bool:
        """Always."""
        return True

    def next_point(self, step: EMStep) -> list:
        """The M-step's CPTs."""
        return step.updated


class Squarem:
    """SQUAREM (Varadhan & Roland 2008, SqS3 step length) on the logarithms of the CPT entries,
    with a monotone safeguard.

    One cycle: theta1 = M(theta0), theta2 = M(theta1); with l = log theta, r = l1 - l0,
    v = l2 - 2 l1 + l0, alpha = |r|/|v| clipped to [1, a bound],
    theta' = exp(l0 + 2 alpha r + alpha^2 v), capped at 1 and each row renormalised (every entry is
    positive: no step needs shortening); then one EM step from theta'. theta' is kept only if its
    objective is at least theta1's; otherwise, and whenever alpha is 1, the cycle ends at theta2, a
    plain EM point. The bound starts at 1, grows fourfold (up to ``MAX_STEP_LENGTH``) when an
    accepted alpha reached it or when it clipped alpha to 1, and falls to a quarter of a rejected
    alpha (at least 1). The objective of every point on the trace is therefore at least its
    predecessor's. The EM step from an accepted theta' is the first step of the next cycle: a cycle
    costs 2 or 3 E-steps.
    """

    # what the last E-step ran at: theta0 (a cycle's start), theta1 (its first EM point), theta'
    CYCLE_START, FIRST_POINT, EXTRAPOLATED = range(3)

    def __init__(self):
        self.step_max = 1.0
        self.stage = self.CYCLE_START
        self.origin = []          # theta0 of the current cycle
        self.plain_point = []     # theta2: where the cycle ends when theta' is not kept
        self.alpha = 1.0          # the step length of the pending theta'
        self.objective = -np.inf  # the objective of the last step on the trace
        self.accepted = True

    def start(self, cpts: list) -> None:
        """A cycle from ``cpts``, the bound on the step length back at 1."""
        self.step_max = 1.0
        self.stage = self.CYCLE_START
        self.origin = cpts

    def accept(self, step: EMStep) -> bool:
        """Every EM step but one from a theta' whose objective is below theta1's."""
        self.accepted = self.stage != self.EXTRAPOLATED or step.log_posterior >= self.objective
        if self.accepted:
            self.objective = step.log_posterior
        return self.accepted

    def next_point(self, step: EMStep) -> list:
        """After theta0, theta1; after theta1, theta' (or, when alpha is 1, a new cycle at theta2);
        after theta', its EM point as the next cycle's theta1 when kept, else a new cycle at theta2.
        """
        if self.stage == self.CYCLE_START:
            self.stage = self.FIRST_POINT
            return step.updated
        if self.stage == self.FIRST_POINT:
            return self.extrapolate(step.point, step.updated)
        if self.accepted:
            if self.alpha >= self.step_max:
                self.step_max = min(4.0 * self.step_max, MAX_STEP_LENGTH)
            self.origin = step.point
            self.stage = self.FIRST_POINT
            return step.updated
        self.step_max = max(1.0, self.alpha / 4.0)
        return self.new_cycle(self.plain_point)

    def extrapolate(self, theta1: list, theta2: list) -> list:
        """The cycle's theta' from its three points, or a new cycle at theta2 when alpha is 1."""
        logs = [np.log(np.concatenate([c.ravel() for c in t]) + TINY)
                for t in (self.origin, theta1, theta2)]
        r, v = logs[1] - logs[0], logs[2] - 2 * logs[1] + logs[0]
        norm_v = float(np.sqrt(v @ v))
        raw = float(np.sqrt(r @ r)) / norm_v if norm_v > 0 else 1.0
        alpha = min(max(raw, 1.0), self.step_max)
        if alpha <= 1.0:
            if raw >= self.step_max:
                self.step_max *= 4.0
            return self.new_cycle(theta2)
        self.alpha = alpha
        self.plain_point = theta2
        self.stage = self.EXTRAPOLATED
        flat = np.exp(np.minimum(logs[0] + 2 * alpha * r + alpha * alpha * v, 0.0))
        return unflatten(flat, self.origin)

    def new_cycle(self, theta: list) -> list:
        """A cycle from ``theta`` (a plain EM point)."""
        self.origin = theta
        self.stage = self.CYCLE_START
        return theta


def unflatten(flat: np.ndarray, like: Sequence[np.ndarray]) -> list:
    """Split a flat vector into arrays shaped like ``like``, every last-axis row renormalised."""
    out, start = [], 0
    for a in like:
        part = flat[start:start + a.size].reshape(a.shape)
        start += a.size
        out.append(part / part.sum(axis=-1, keepdims=True))
    return out


ACCELERATIONS = {"none": PlainEM, "squarem": Squarem}


def acceleration_for(name: str) -> Acceleration:
    """A new ``Acceleration`` by its ``LearningOptions.em_acceleration`` name."""
    if name not in ACCELERATIONS:
        raise ModelFormatError(f"em_acceleration must be one of {sorted(ACCELERATIONS)}, "
                               f"not {name!r}")
    return ACCELERATIONS[name]()


__all__ = ["ACCELERATIONS", "PlainEM", "Squarem", "acceleration_for", "unflatten"]
