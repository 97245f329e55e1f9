"""EM's one loop, written like scikit-learn's ``BaseMixture.fit_predict``: the steps are methods.

``ExpectationMaximisation`` runs E-step, M-step and the convergence check; what varies is handed
to it: how the E-step runs (an ``EStepBackend``, chosen by ``core.estep.choose_estep``), where the
next E-step runs (an ``Acceleration``: plain EM or SQUAREM, ``core.em_acceleration``) and what the
M-step re-estimates beside the CPTs (an ``MStepHook``: the sensor models, ``core.em_sensors``).
``fit_em`` (``core.parameters``) puts them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from .estep import EStepBackend
from .network import AffordanceNetwork
from .progress import Progress, report


@dataclass
class EMResult:
    """Trace of one EM run.

    ``log_likelihoods[t]`` is log p(data | CPTs after t iterations); ``log_posteriors`` adds the
    log Dirichlet prior, which is what EM increases when ``prior`` > 0. ``saddles``: how often
    the run reached a symmetric latent fixed point (and was restarted from there);
    ``restarts``: the final objective of each of the ``n_init`` starts; ``cpts``: the result;
    ``counts``: the expected family counts of the cases under it (one E-step at ``cpts``).
    """

    log_likelihoods: list = field(default_factory=list)
    log_posteriors: list = field(default_factory=list)
    rms_changes: list = field(default_factory=list)
    iterations: int = 0
    converged: bool = False
    saddles: int = 0
    restarts: list = field(default_factory=list)
    cpts: list = field(default_factory=list, repr=False)
    counts: list = field(default_factory=list, repr=False)

    @property
    def log_likelihood(self) -> float:
        """The log-likelihood after the last iteration."""
        return self.log_likelihoods[-1]

    def record(self, step: EMStep) -> None:
        """Put ``step`` on the trace."""
        self.log_likelihoods.append(step.log_likelihood)
        self.log_posteriors.append(step.log_posterior)
        self.rms_changes.append(step.change)


@dataclass(frozen=True)
class EMStep:
    """One E-step at ``point`` and the M-step after it: ``updated``, the CPTs it gives; the
    log-likelihood and log posterior (the objective) of ``point``; the RMS change from ``point`` to
    ``updated``, the hook's re-estimates included.
    """

    point: list
    updated: list
    log_likelihood: float
    log_posterior: float
    change: float


class Acceleration(Protocol):
    """Where EM's next E-step runs (``core.em_acceleration``)."""

    def start(self, cpts: list) -> None:
        """A new run from ``cpts``."""

    def accept(self, step: EMStep) -> bool:
        """Whether ``step`` goes on the trace (its ``updated`` is then the run's current result)."""

    def next_point(self, step: EMStep) -> list:
        """The CPTs at which the next E-step runs, after ``step`` (and ``accept`` of it)."""


class MStepHook(Protocol):
    """What the M-step re-estimates beside the CPTs (``core.em_sensors.SensorFit``)."""

    def m_step(self, estep: EStepBackend) -> float:
        """Re-estimate from what ``estep``'s last call gathered; returns the RMS change."""


class ExpectationMaximisation:
    """EM for the CPTs with ``pseudo`` Dirichlet pseudo-counts (one array per CPT).

    ``run`` iterates until one EM step changes the CPTs by less than ``tol`` (RMS) or ``max_iter``
    E-steps were run (every E-step counts, an acceleration's rejected extrapolations too); ``fit``
    also escapes the symmetric fixed points of latent variables and ends with one E-step at the
    result.
    """

    def __init__(self, estep: EStepBackend, pseudo: Sequence, tol: float, max_iter: int,
                 acceleration: Acceleration, hook: MStepHook | None = None,
                 progress: Progress = None):
        self.estep = estep
        self.pseudo = list(pseudo)
        self.tol = tol
        self.max_iter = max_iter
        self.acceleration = acceleration
        self.hook = hook
        self.progress = progress

    def fit(self, cpts: list, saddles: SaddleEscape) -> EMResult:
        """``run`` from ``cpts``, again from random rows wherever it ends on a latent saddle."""
        result = EMResult()
        for attempt in range(saddles.attempts + 1):
            cpts = self.run(cpts, result)
            stuck = saddles.stuck(cpts)
            if not stuck:
                break
            result.converged = False
            result.saddles += 1
            if attempt == saddles.attempts or result.iterations >= self.max_iter:
                break
            cpts = saddles.restart(cpts, stuck)
        result.counts, ll = self.e_step(cpts)
        result.log_likelihoods.append(ll)
        result.log_posteriors.append(ll + log_dirichlet(cpts, self.pseudo))
        result.cpts = cpts
        return result

    def run(self, cpts: list, result: EMResult) -> list:
        """The loop: EM steps from ``cpts``, recorded on ``result``, until converged or ``max_iter``
        E-steps in all (``result.iterations``); returns the last accepted step's CPTs.
        """
        result.converged = False
        self.acceleration.start(cpts)
        point = current = cpts
        while result.iterations < self.max_iter:
            step = self.step(point)
            result.iterations += 1
            report(self.progress, "parameters", result.iterations, step.log_likelihood)
            if self.acceleration.accept(step):
                result.record(step)
                current = step.updated
                if step.change < self.tol:
                    result.converged = True
                    break
            if result.iterations >= self.max_iter:
                break
            point = self.acceleration.next_point(step)
        return current

    def step(self, point: list) -> EMStep:
        """One E-step at ``point`` and the M-step after it."""
        counts, ll = self.e_step(point)
        updated, change = self.m_step(point, counts)
        return EMStep(point, updated, ll, ll + log_dirichlet(point, self.pseudo), change)

    def e_step(self, cpts: list) -> tuple[list, float]:
        """Expected family counts and the log-likelihood under ``cpts``."""
        return self.estep(cpts)

    def m_step(self, cpts: list, counts: list) -> tuple[list, float]:
        """The paper's theta equation on ``counts``, then the hook; the CPTs and the RMS change."""
        updated = [normalise_counts(c, a) for c, a in zip(counts, self.pseudo)]
        change = rms_difference(updated, cpts)
        if self.hook is not None:
            change = float(np.sqrt(change ** 2 + self.hook.m_step(self.estep) ** 2))
        return updated, change


class SaddleEscape:
    """Where EM must not stop: a fixed point where latent variables' children do not depend on them.

    A uniform start is such a point (EM would stop at once); ``restart`` gives the stuck variables
    and their children random (Dirichlet(1)) rows from ``rng``, within ``allowed`` (one mask or None
    per CPT).
    """

    def __init__(self, network: AffordanceNetwork, latent: Sequence[int], rng: np.random.Generator,
                 allowed: Sequence[np.ndarray | None], attempts: int = 3):
        self.network = network
        self.latent = list(latent)
        self.rng = rng
        self.allowed = list(allowed)
        self.attempts = attempts

    def stuck(self, cpts: Sequence[np.ndarray]) -> list:
        """The latent variables at a symmetric fixed point under ``cpts``."""
        return symmetric_latents(self.network, cpts, self.latent)

    def restart(self, cpts: list, stuck: Sequence[int]) -> list:
        """``cpts`` with random rows for ``stuck`` and their children."""
        return restricted(break_symmetry(self.network, cpts, stuck, self.rng), self.allowed)


def normalise_counts(counts: np.ndarray, prior) -> np.ndarray:
    """Theta = (N_ijk + prior) / (N_ij + r * prior); rows with no data and no prior are uniform."""
    padded = counts + prior
    totals = padded.sum(axis=-1, keepdims=True)
    r = counts.shape[-1]
    return np.divide(padded, totals, out=np.full_like(padded, 1.0 / r), where=totals > 0)


def log_dirichlet(cpts: Sequence[np.ndarray], prior) -> float:
    """Log of the (unnormalised) Dirichlet prior whose MAP estimate ``normalise_counts`` gives.

    ``prior``: pseudo-counts, one number for every entry or one array per CPT.
    """
    priors = prior if isinstance(prior, (list, tuple)) else [prior] * len(cpts)
    return float(sum(np.sum(a * np.log(np.maximum(c, 1e-300))) for c, a in zip(cpts, priors)))


def rms_difference(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Root mean square difference of all entries of two lists of arrays."""
    diff = np.concatenate([(x - y).ravel() for x, y in zip(a, b)])
    return float(np.sqrt(np.mean(diff * diff)))


def symmetric_latents(network: AffordanceNetwork, cpts: Sequence[np.ndarray], latent: Sequence[int],
                      atol: float = 1e-9) -> list:
    """The latent variables with children whose CPTs do not depend on them: a symmetric fixed point
    of EM (a saddle of the likelihood unless the data have nothing for the latent to explain).
    """
    out = []
    for i in latent:
        kids = [(j, network.parent_indices(j).index(i)) for j in range(len(network))
                if i in network.parent_indices(j)]
        if kids and all(np.ptp(cpts[j], axis=axis).max() <= atol for j, axis in kids):
            out.append(i)
    return out


def break_symmetry(network: AffordanceNetwork, cpts: list, latent: Sequence[int],
                   rng: np.random.Generator) -> list:
    """Random (Dirichlet(1)) rows for the latent variables and their children, the rest as given."""
    touched = set(latent) | {j for j in range(len(network)) for i in latent
                             if i in network.parent_indices(j)}
    return [random_rows(c.shape, rng) if j in touched else c for j, c in enumerate(cpts)]


def random_rows(shape, rng) -> np.ndarray:
    """A CPT of ``shape`` whose every row is drawn from a Dirichlet(1)."""
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1]).reshape(shape)


def restricted(cpts: Sequence[np.ndarray], allowed: Sequence[np.ndarray | None]) -> list:
    """``cpts`` with every entry outside its ``allowed`` mask (None: all allowed) set to zero, rows
    renormalised (a row with nothing left stays as it was).
    """
    out = []
    for c, where in zip(cpts, allowed):
        if where is not None:
            kept = np.where(where, c, 0.0)
            total = kept.sum(axis=-1, keepdims=True)
            c = np.divide(kept, total, out=np.array(c, dtype=float), where=total > 0)
        out.append(c)
    return out


__all__ = ["Acceleration", "EMResult", "EMStep", "ExpectationMaximisation", "MStepHook",
           "SaddleEscape", "break_symmetry", "log_dirichlet", "normalise_counts", "random_rows",
           "restricted", "rms_difference", "symmetric_latents"]
