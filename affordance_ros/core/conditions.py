"""A sensor's values from the conditions of the experiment, each borrowing strength from the others.

A *condition* is a combination of the values of some variables (a sensor's ``cluster_by``, e.g.
Action, Tool, Shape), given per variable as codes. Each condition gets two values of the sensor's
variable about one centre: a core Gaussian and a wide one (Tukey's contaminated normal: the wide
part takes the heavy tails and the outliers, so that they neither inflate the core nor pull the
centre).

The centres borrow strength (hierarchical partial pooling, empirical Bayes): a condition's centre is
a grand mean plus one effect per *term*, a non-empty subset of the variables (the action's; the
action and the tool's; ...; the action, tool and shape's own), every term's effects Gaussian with a
variance of their own. A term's *strength* λ is in trials: its effects vary as much as the mean of λ
trials does (variance σ²/λ, σ² the variance of one trial about its condition's centre); λ = inf
drops the term. The posterior mean of a condition's centre is then a kernel prediction over the
conditions seen (Rasmussen & Williams 2006, §2.7, with the grand mean by generalised least squares):
each seen condition contributes its robust centre (a trimmed mean, ``group_trimmed_means``) worth
its number of trials, so a condition with few trials leans on its coarser conditions and one with
many keeps its own, and a condition never seen is predicted from its coarser conditions. The
strengths are chosen by cross-validation within the training cases (``choose_strengths``: the
squared error of held-out readings, folds that hold out whole entities when the cases name them,
coordinate descent over the terms on the grid ``STRENGTHS``). A term whose best strength is inf is
dropped, and conditions that differ only in variables of dropped terms are one condition: the values
are those of the variables that matter (``ConditionFit.variables``), every combination of theirs.

The spreads borrow strength too: each condition's core variance (per reading, from the median
absolute deviation of its residuals) is shrunk towards the pooled one with a weight ν (in trials)
chosen by the held-out log-density (``SPREAD_WEIGHTS``). The wide value is one for every condition,
``WIDE_VARIANCE`` times the pooled variance, and no core is broader than it (``condition_spreads``):
what lies beyond the readings of the training is then explained by the wide values alone, all of one
shape, so it goes to the condition whose centre it lies towards (a wide value of each condition's
own would give it to the broadest condition, in whatever direction it lay).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from .errors import DataError
from .gaussian import LOG_2PI

# fewest readings of the condition with the most that give the sensor a spread to learn from
MIN_CONDITION_READINGS = 3
# The wide Gaussian has this many times the pooled core variance (twice the standard deviation).
WIDE_VARIANCE = 4.0
# The share of a condition's trials its wide Gaussian is expected to take, for the choice of the
# spreads and the CPT's prior rows (EM learns the real shares).
WIDE_SHARE = 0.1
# The trims of a condition's centre, mean (0) to median (0.5), ``choose_centre_trim`` picks from:
# the median where outliers would drag the mean, the mean where skewed readings would make the
# median miss.
CENTRE_TRIMS = (0.0, 0.1, 0.25, 0.5)
# The strengths a term may get (trials; inf: dropped), the search's start and sweeps, and its folds
# (drawn STRENGTH_REPEATS times, so that a choice among few entities does not hang on one split).
STRENGTHS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, math.inf)
START_STRENGTH = 4.0
MAX_SWEEPS = 3
STRENGTH_FOLDS = 5
STRENGTH_REPEATS = 3
# The share of a trial's variance an entity's own deviation may have (``centre_uncertainty``), when the cases
# name entities.
ENTITY_SHARES = (0.0, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
# How many trials' worth the pooled core variance has against a condition's own (inf: every condition the
# pooled spread).
SPREAD_WEIGHTS = (1.0, 3.0, 10.0, 30.0, math.inf)
# Variance floor of the spreads, in units of each reading's residual variance.
VARIANCE_FLOOR = 1e-3


def robust_covariance(residuals: np.ndarray) -> np.ndarray:
    """Diagonal covariance (d, d) of residuals (n, d) from each coordinate's median absolute deviation
    (x 1.4826: the standard deviation of a Gaussian), floored so that identical readings keep a width.
    """
    r = np.asarray(residuals, dtype=float)
    variance = (1.4826 * np.median(np.abs(r), axis=0)) ** 2
    return np.diag(np.maximum(variance, np.maximum(VARIANCE_FLOOR * r.var(axis=0), 1e-12)))


def fold_splits(folds: np.ndarray):
    """(training, held-out) masks of every fold of every repetition: ``folds`` (n,) or (repetitions, n), the fold
    of each case.
    """
    for row in np.atleast_2d(folds):
        for fold in np.unique(row):
            yield row != fold, row == fold


def all_terms(n_variables: int) -> tuple[tuple[int, ...], ...]:
    """Every non-empty subset of the variables (by position), the coarsest first."""
    return tuple(t for size in range(1, n_variables + 1) for t in itertools.combinations(range(n_variables), size))


def _agreement(a: np.ndarray, b: np.ndarray, terms) -> np.ndarray:
    """(terms, len(a), len(b)): 1 where condition a_i and condition b_j agree on every variable of the term."""
    same = a[:, None, :] == b[None, :, :]
    return np.stack([same[:, :, list(term)].all(axis=2) for term in terms]).astype(float)


@dataclass(frozen=True)
class PooledCentres:
    """The posterior mean centre of any condition, from the conditions seen (``fit``)."""

    conditions: np.ndarray    # (G, m): the conditions seen, codes per variable
    terms: tuple
    weights: np.ndarray       # (terms,): 1 / strength (0: dropped)
    mean: np.ndarray          # (d,): the grand mean
    coefficients: np.ndarray  # (G, d): (K + D)^-1 (centres - mean)

    @classmethod
    def fit(cls, conditions: np.ndarray, centres: np.ndarray, uncertainty: np.ndarray, terms,
            strengths: Sequence[float]) -> "PooledCentres":
        """From the seen conditions (G, m), their robust centres (G, d) and the variance of each centre in units
        of a trial's (G,) (``centre_uncertainty``: 1 / n for n trials).
        """
        weights = 1.0 / np.asarray(strengths, dtype=float)
        return cls._solved(conditions, centres, uncertainty, terms, weights,
                           _agreement(conditions, conditions, terms))

    @classmethod
    def _solved(cls, conditions, centres, uncertainty, terms, weights, agreement) -> "PooledCentres":
        factor = cho_factor(np.tensordot(weights, agreement, 1) + np.diag(uncertainty))
        through_ones = cho_solve(factor, np.ones(len(uncertainty)))
        mean = through_ones @ centres / through_ones.sum()
        return cls(conditions, tuple(terms), weights, mean, cho_solve(factor, centres - mean))

    def predict(self, conditions: np.ndarray) -> np.ndarray:
        """Centres (n, d) of conditions (n, m), seen or not."""
        return self.mean + self.cross(conditions) @ self.coefficients

    def cross(self, conditions: np.ndarray) -> np.ndarray:
        """k(c*) of every condition (n, G): the prior covariance with the seen conditions."""
        return np.tensordot(self.weights, _agreement(conditions, self.conditions, self.terms), 1)

    def variables(self) -> tuple[int, ...]:
        """The variables (by position) of the terms kept: the centres depend on these only."""
        return tuple(sorted({j for term, w in zip(self.terms, self.weights) if w > 0 for j in term}))


def group_trimmed_means(x: np.ndarray, which: np.ndarray, n_groups: int, trim: float) -> np.ndarray:
    """Coordinate-wise trimmed means (n_groups, d) of every group's rows at once, for rows ``x`` (n, d) in groups
    ``which`` (n,) (every group with at least one row): int(trim * n) of a group's n rows cut from each end of
    every sorted coordinate (0.5: the median).
    """
    counts = np.bincount(which, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.empty((n_groups, x.shape[1]))
    for j in range(x.shape[1]):
        ordered = x[np.lexsort((x[:, j], which)), j]          # by group, then by value
        if trim >= 0.5:
            out[:, j] = 0.5 * (ordered[starts + (counts - 1) // 2] + ordered[starts + counts // 2])
        else:
            cut = (trim * counts).astype(np.int64)
            cumulative = np.concatenate([[0.0], np.cumsum(ordered)])
            out[:, j] = (cumulative[starts + counts - cut] - cumulative[starts + cut]) / (counts - 2 * cut)
    return out


def group_robust_variances(residuals: np.ndarray, which: np.ndarray, n_groups: int) -> np.ndarray:
    """``robust_covariance``'s diagonal of every group's residuals at once, (n_groups, d), floored by the
    residuals' own variance over all groups.
    """
    mad = group_trimmed_means(np.abs(residuals), which, n_groups, 0.5)
    return np.maximum((1.4826 * mad) ** 2, np.maximum(VARIANCE_FLOOR * residuals.var(axis=0), 1e-12))


def centre_uncertainty(counts: np.ndarray, entities: np.ndarray | None = None, entity_share: float = 0.0) -> np.ndarray:
    """The variance of each condition's centre in units of a trial's: 1 / n for n trials, plus
    ``entity_share`` / E for the E entities among them when the cases name entities (each entity's own
    deviation, a share of a trial's variance, is averaged over its condition's entities only: ten trials of
    one object say little of the next object).
    """
    out = 1.0 / np.asarray(counts, dtype=float)
    return out if entities is None else out + entity_share / np.asarray(entities, dtype=float)


def entities_per_group(which: np.ndarray, entity: np.ndarray | None, n_groups: int) -> np.ndarray | None:
    """How many distinct entities (``entity``: codes per row) each group (``which``) has; None without."""
    if entity is None:
        return None
    pairs = np.unique(np.stack([which, entity]), axis=1)
    return np.bincount(pairs[0], minlength=n_groups)


def distinct_conditions(conditions: np.ndarray):
    """``np.unique(conditions, axis=0)`` of codes (n, m) >= 0, by one flat key per row (faster than rows):
    (the distinct conditions (G, m), each row's (n,), how many rows each has (G,)).
    """
    span = conditions.max(axis=0, initial=0) + 1
    keys, which, counts = np.unique(np.ravel_multi_index(conditions.T, span), return_inverse=True,
                                    return_counts=True)
    return np.stack(np.unravel_index(keys, span), axis=1).reshape(len(keys), -1), which.reshape(-1), counts


def group_centres(x: np.ndarray, conditions: np.ndarray, trim: float):
    """The distinct conditions (G, m) of rows ``conditions`` (n, m), the trimmed centre of each one's readings
    (G, d), their numbers of readings (G,) and each row's condition (n,).
    """
    seen, which, counts = distinct_conditions(conditions)
    return seen, group_trimmed_means(x, which, len(seen), trim), counts, which


def entity_folds(n: int, groups: np.ndarray | None, rng: np.random.Generator, n_folds: int = STRENGTH_FOLDS):
    """The fold of every case (n,): whole entities (``groups``, one id per case) when there are at least two,
    else cases at random; at most ``n_folds`` folds.
    """
    if groups is not None:
        names, entity = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
        if len(names) >= 2:
            return rng.permutation(len(names))[entity.reshape(-1)] % min(n_folds, len(names))
    return rng.permutation(n) % min(n_folds, n)


class FoldErrors:
    """The cross-validated squared error of pooled centres with given strengths and entity share, the folds laid
    out once (``entity``: codes per reading, or None) as stacked arrays, every fold's system padded to the most
    conditions any fold has (a padded condition is decoupled: no agreement, unit uncertainty, no centre, nothing
    asked of it), so that many choices of strengths are solved for every fold in one batched call.
    """

    def __init__(self, x: np.ndarray, conditions: np.ndarray, folds: np.ndarray, trim: float, terms,
                 entity: np.ndarray | None = None):
        self.terms = terms
        laid_out = []
        for train, test in fold_splits(folds):
            if not train.any() or not test.any():
                continue
            seen, centres, counts, which = group_centres(x[train], conditions[train], trim)
            entities = entities_per_group(which, None if entity is None else entity[train], len(seen))
            asked, which, n_asked = distinct_conditions(conditions[test])
            sums = np.stack([np.bincount(which, weights=x[test][:, j], minlength=len(asked))
                             for j in range(x.shape[1])], axis=1)
            laid_out.append((centres, counts, entities, _agreement(seen, seen, terms), _agreement(asked, seen, terms),
                             sums, n_asked, float(np.sum(x[test] ** 2))))
        self.n_folds = len(laid_out)
        if not laid_out:
            return
        n_seen, n_asked_max = max(len(f[0]) for f in laid_out), max(len(f[6]) for f in laid_out)
        shape = (self.n_folds, n_seen)
        self.centres = np.zeros((*shape, x.shape[1]))
        self.seen = np.zeros(shape, dtype=bool)
        self.counts = np.ones(shape)
        self.entities = np.ones(shape)
        self.agreement = np.zeros((self.n_folds, len(terms), n_seen, n_seen))
        self.cross = np.zeros((self.n_folds, len(terms), n_asked_max, n_seen))
        self.sums = np.zeros((self.n_folds, n_asked_max, x.shape[1]))
        self.n_asked = np.zeros((self.n_folds, n_asked_max))
        self.squares = np.array([f[7] for f in laid_out])
        for f, (centres, counts, entities, agreement, cross, sums, n_asked, _) in enumerate(laid_out):
            g, a = len(centres), len(n_asked)
            self.centres[f, :g], self.seen[f, :g], self.counts[f, :g] = centres, True, counts
            if entities is not None:
                self.entities[f, :g] = entities
            self.agreement[f, :, :g, :g], self.cross[f, :, :a, :g] = agreement, cross
            self.sums[f, :a], self.n_asked[f, :a] = sums, n_asked
        self.with_entities = entity is not None

    def __call__(self, strengths: Sequence[float], entity_share: float) -> float:
        """The error summed over the folds."""
        return float(self.per_fold(strengths, entity_share).sum())

    def per_fold(self, strengths: Sequence[float], entity_share: float) -> np.ndarray:
        """The squared error of every fold's held-out readings."""
        return self.per_fold_of_many([strengths], [entity_share])[0]

    def per_fold_of_many(self, strengths: Sequence[Sequence[float]], entity_shares: Sequence[float]) -> np.ndarray:
        """``per_fold`` (choices, folds) of several choices at once: strengths (choices, terms), shares (choices,).
        The pooled centres as ``PooledCentres.fit`` makes them (the grand mean by generalised least squares),
        every (choice, fold) system solved in one batched call.
        """
        if not self.n_folds:
            return np.zeros((len(strengths), 0))
        weights = 1.0 / np.asarray(strengths, dtype=float).reshape(len(strengths), len(self.terms))  # (S, T)
        shares = np.asarray(entity_shares, dtype=float)
        uncertainty = 1.0 / self.counts + (shares[:, None, None] / self.entities if self.with_entities else 0.0)
        uncertainty = np.where(self.seen, np.broadcast_to(uncertainty, (len(weights), *self.seen.shape)), 1.0)
        kernel = np.einsum("st,ftij->sfij", weights, self.agreement)
        kernel = kernel + uncertainty[..., None] * np.eye(self.seen.shape[1])                    # (S, F, G, G)
        right = np.concatenate([self.seen[..., None].astype(float), self.centres], axis=2)       # (F, G, 1 + d)
        solved = np.linalg.solve(kernel, np.broadcast_to(right, (*kernel.shape[:2], *right.shape[1:])))
        through_ones, through_centres = solved[..., 0], solved[..., 1:]
        mean = np.einsum("sfg,fgd->sfd", through_ones, self.centres) / through_ones.sum(axis=2)[..., None]
        coefficients = through_centres - through_ones[..., None] * mean[:, :, None, :]       # (K + D)^-1 (c - m)
        across = np.einsum("st,ftag->sfag", weights, self.cross)
        predicted = mean[:, :, None, :] + across @ coefficients                                # (S, F, A, d)
        return (self.squares - 2.0 * np.einsum("sfad,fad->sf", predicted, self.sums)
                + np.einsum("fa,sfad->sf", self.n_asked, predicted ** 2))


def choose_centre_trim(x: np.ndarray, conditions: np.ndarray, folds: np.ndarray, terms,
                       entity: np.ndarray | None = None) -> float:
    """The trim of ``CENTRE_TRIMS`` whose pooled centres (every term at ``START_STRENGTH``) of the training folds
    predict the held-out readings best, in squared error: readings ``x`` (n, d), their conditions (n, m), their
    folds (``fold_splits``; whole entities when the cases name them: then the trim that predicts a new entity).
    The least trim whose error exceeds the best one's by at most its standard error over the folds (paired):
    the mean unless a trimmed centre predicts clearly better (with two or three trials a condition, the folds
    barely tell a mean from a median).
    """
    start = [START_STRENGTH] * len(terms)
    errors = np.array([FoldErrors(x, conditions, folds, trim, terms, entity).per_fold(start, 0.0)
                       for trim in CENTRE_TRIMS])                                  # (trims, folds)
    excess = errors - errors[int(np.argmin(errors.sum(axis=1)))]
    standard_error = np.sqrt(excess.shape[1]) * excess.std(axis=1, ddof=1) if excess.shape[1] > 1 else 0 * excess[:, 0]
    return CENTRE_TRIMS[next(t for t in range(len(CENTRE_TRIMS)) if excess[t].sum() <= standard_error[t])]


def estimated_entity_share(x: np.ndarray, which: np.ndarray, entity: np.ndarray) -> float:
    """A moment estimate of the entity share (one-way analysis of variance within the conditions): how much the
    entities' means vary about their condition's mean beyond what their trials' noise explains, in units of a
    trial's variance about its entity's mean. Readings ``x`` (n, d), their conditions ``which`` and entities.
    """
    pairs, pair = np.unique(which * (int(entity.max()) + 1) + entity, return_inverse=True)
    pair = pair.reshape(-1)
    sizes = np.bincount(pair).astype(float)
    means = np.stack([np.bincount(pair, weights=x[:, j]) for j in range(x.shape[1])], axis=1) / sizes[:, None]
    within = np.sum((x - means[pair]) ** 2) / max(len(x) - len(pairs), 1)
    of_pair = pairs // (int(entity.max()) + 1)
    counts = np.bincount(of_pair, minlength=int(which.max()) + 1).astype(float)
    centres = np.stack([np.bincount(of_pair, weights=means[:, j], minlength=len(counts)) for j in range(x.shape[1])],
                       axis=1) / np.maximum(counts, 1.0)[:, None]
    several = counts[of_pair] > 1
    if not several.any() or within <= 0:
        return 0.0
    between = np.sum((means[several] - centres[of_pair[several]]) ** 2) / max(several.sum() - np.sum(counts > 1), 1)
    return max(between - within / np.mean(sizes[several]), 0.0) / within


def choose_strengths(x: np.ndarray, conditions: np.ndarray, folds: np.ndarray, trim: float, terms,
                     entity: np.ndarray | None = None) -> tuple[tuple, float]:
    """The strength of every term (``STRENGTHS``) and, when the cases name entities (``entity``: codes per
    reading), the entity share (``ENTITY_SHARES``, ``centre_uncertainty``) whose pooled centres of the training
    folds predict the held-out readings best (squared error): coordinate descent from ``START_STRENGTH`` and
    the share's moment estimate (``estimated_entity_share``; the strengths and the share trade off, and a
    descent from no share stays there), each coordinate in turn set to the best value of its grid, until a
    sweep changes nothing (at most ``MAX_SWEEPS``). Returns (strengths, entity share).
    """
    error = FoldErrors(x, conditions, folds, trim, terms, entity)
    grids = [STRENGTHS] * len(terms) + [ENTITY_SHARES if entity is not None else ENTITY_SHARES[:1]]
    share = 0.0 if entity is None else estimated_entity_share(x, distinct_conditions(conditions)[1], entity)
    at = [STRENGTHS.index(START_STRENGTH)] * len(terms) + [
        int(np.argmin(np.abs(np.log1p(np.array(ENTITY_SHARES)) - np.log1p(share))))]

    def value(positions) -> tuple[tuple, float]:
        return tuple(STRENGTHS[i] for i in positions[:-1]), ENTITY_SHARES[positions[-1]]

    if not error.n_folds:
        return value(at)
    known = {}

    def cost(positions) -> float:
        return known[tuple(positions)]

    for _ in range(MAX_SWEEPS):
        changed = False
        for t, grid in enumerate(grids):
            trials = [[*at[:t], i, *at[t + 1:]] for i in range(len(grid))]
            new = [p for p in trials if tuple(p) not in known]
            if new:
                chosen = [value(p) for p in new]
                errors = error.per_fold_of_many([c[0] for c in chosen], [c[1] for c in chosen]).sum(axis=1)
                known.update({tuple(p): float(e) for p, e in zip(new, errors)})
            best = min(trials, key=cost)
            if cost(best) < cost(at) - 1e-9 * abs(cost(at)):
                at, changed = best, True
        if not changed:
            break
    return value(at)


def condition_spreads(residuals: np.ndarray, which: np.ndarray, n_conditions: int,
                      folds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The core variances (n_conditions, d) per condition (``which``: each residual's) and the wide variance (d,)
    of every condition: a core is the condition's own robust variance shrunk towards the pooled one, the weight
    of the pooled one (``SPREAD_WEIGHTS``) chosen by the held-out log-density of the core-and-wide mixture, and
    at most the wide variance, ``WIDE_VARIANCE`` times the pooled one; a condition with fewer than
    ``MIN_CONDITION_READINGS`` residuals gets the pooled variance.
    """
    def spreads(rows: np.ndarray, weight: float) -> tuple[np.ndarray, np.ndarray]:
        pooled = np.diagonal(robust_covariance(residuals[rows]))
        if math.isinf(weight):
            return np.tile(pooled, (n_conditions, 1)), WIDE_VARIANCE * pooled
        counts = np.bincount(which[rows], minlength=n_conditions)[:, None]
        present, local = np.unique(which[rows], return_inverse=True)
        own = np.tile(pooled, (n_conditions, 1))
        own[present] = group_robust_variances(residuals[rows], local.reshape(-1), len(present))
        shrunk = np.minimum((counts * own + weight * pooled) / (counts + weight), WIDE_VARIANCE * pooled)
        return np.where(counts >= MIN_CONDITION_READINGS, shrunk, pooled), WIDE_VARIANCE * pooled

    def held_out_log_density(weight: float) -> float:
        total = 0.0
        for train, test in fold_splits(folds):
            if not train.any():
                continue
            cores, wide = spreads(train, weight)
            r2 = residuals[test] ** 2
            core, wide = (-0.5 * np.sum(r2 / variance + LOG_2PI + np.log(variance), axis=1)
                          for variance in (cores[which[test]], wide))
            total += float(np.sum(np.logaddexp(np.log1p(-WIDE_SHARE) + core, np.log(WIDE_SHARE) + wide)))
        return total

    weight = max(SPREAD_WEIGHTS, key=held_out_log_density)
    return spreads(np.ones(len(residuals), dtype=bool), weight)


@dataclass(frozen=True)
class ConditionFit:
    """What ``fit_conditional_sensor`` found: the variables that matter (positions in the ``cluster_by``), the
    centres and covariances of the values (the G cores of every combination of those variables' values in
    code order, then the G wide ones), the trim of the centres and each term's strength.
    """

    variables: tuple
    means: np.ndarray         # (2G, d)
    covariances: np.ndarray   # (2G, d, d)
    trim: float
    strengths: dict           # term (variable positions) -> strength in trials (inf: dropped)
    entity_share: float = 0.0


def fit_conditional_sensor(readings: np.ndarray, conditions: np.ndarray, cards: Sequence[int],
                           rng: np.random.Generator | None = None, groups: Sequence | None = None,
                           min_readings: int = MIN_CONDITION_READINGS) -> ConditionFit:
    """A sensor's values from the conditions of the experiment: readings (n, d), and per reading its condition
    (n, m), the code of each of m variables with ``cards`` values (-1: unknown, the reading left out).

    The centres are pooled across conditions (module docstring) with strengths chosen by cross-validation
    (``rng`` makes the folds; ``groups``: per reading, the entity it is about, held out whole, and whose own
    deviation makes a condition of few entities less certain: ``centre_uncertainty``), the spreads likewise;
    the values are every combination of the values of the variables whose terms are kept.
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    x = np.asarray(readings, dtype=float).reshape(len(conditions), -1)
    conditions = np.asarray(conditions, dtype=np.int64).reshape(len(x), -1)
    keep = np.all(np.isfinite(x), axis=1) & np.all(conditions >= 0, axis=1)
    x, conditions = x[keep], conditions[keep]
    entity = None
    if groups is not None:
        names, entity = np.unique(np.asarray(groups, dtype=object)[keep].astype(str), return_inverse=True)
        entity = entity.reshape(-1) if len(names) >= 2 else None
    _, which, counts = distinct_conditions(conditions)
    if not np.any(counts >= min_readings):
        most = int(counts.max()) if counts.size else 0
        raise DataError(f"no condition has {min_readings} complete readings to fit the sensor model from (the most "
                        f"any has is {most})")
    folds = np.stack([entity_folds(len(x), entity, rng) for _ in range(STRENGTH_REPEATS)])
    terms = all_terms(conditions.shape[1])
    trim = choose_centre_trim(x, conditions, folds, terms, entity)
    strengths, share = choose_strengths(x, conditions, folds, trim, terms, entity)
    seen, centres, counts, which = group_centres(x, conditions, trim)
    uncertainty = centre_uncertainty(counts, entities_per_group(which, entity, len(seen)), share)
    pooled = PooledCentres.fit(seen, centres, uncertainty, terms, strengths)
    variables = pooled.variables()
    kept_cards = [cards[j] for j in variables]
    grid = np.zeros((math.prod(kept_cards), conditions.shape[1]), dtype=np.int64)   # one row when none is kept
    if variables:
        grid[:, list(variables)] = np.indices(kept_cards).reshape(len(variables), -1).T
    means = pooled.predict(grid)
    residuals = x - pooled.predict(seen)[which]
    own = np.ravel_multi_index(conditions[:, list(variables)].T, kept_cards) if variables else np.zeros(len(x), int)
    variances, wide = condition_spreads(residuals, own, len(grid), folds)
    covariances = np.concatenate([np.stack([np.diag(v) for v in variances]), np.tile(np.diag(wide), (len(grid), 1, 1))])
    return ConditionFit(variables, np.concatenate([means, means]), covariances, trim, dict(zip(terms, strengths)),
                        share)


def own_condition_prior(parent_cards: Sequence[int], parent_of: Sequence[int | None], kept_cards: Sequence[int],
                        strength: float) -> np.ndarray:
    """Pseudo-counts shaped like the CPT (*parent_cards, 2G) of a variable whose values are
    conditions (the G cores, then the G wide ones, of every combination of ``kept_cards``): every
    row gives ``strength`` trials to the values of its own condition, shared as ``WIDE_SHARE`` says,
    so that a parent configuration the training cases never saw predicts its condition's pooled
    centre, not the mean of all values. ``parent_of[k]``: the parent (position) that is condition
    variable k, None when it is not a parent (the row is then every condition of that variable's
    values alike).
    """
    match = _own_conditions(parent_cards, parent_of, kept_cards)
    share = match / match.sum(axis=1, keepdims=True)
    prior = strength * np.concatenate([(1.0 - WIDE_SHARE) * share, WIDE_SHARE * share], axis=1)
    return prior.reshape(*parent_cards, -1)


def own_condition_support(parent_cards: Sequence[int], parent_of: Sequence[int | None],
                          kept_cards: Sequence[int]) -> np.ndarray:
    """Where the CPT (*parent_cards, 2G) of a variable whose values are conditions may be non-zero
    (``fit_em``'s ``support``): each row on its own condition's core and wide values and on the wide
    values of every other condition; zeros on the other conditions' cores. Without them, EM explains
    a trial far out in its own condition's tail by a neighbouring condition's core, part of the row
    leaks there, and the predicted reading (the mean of the row's mixture) drifts to the middle. The
    other wide values stay: they are the broad background that takes the outliers (an object that
    fell), which a row of its own two Gaussians only would give a log-density far too low (and an
    action recognised from such an effect a confident wrong answer). Arguments as
    ``own_condition_prior``'s.
    """
    match = _own_conditions(parent_cards, parent_of, kept_cards)
    return np.concatenate([match, np.ones_like(match)], axis=1).reshape(*parent_cards, -1)


def _own_conditions(parent_cards, parent_of, kept_cards) -> np.ndarray:
    """(q, G): whether parent configuration i (in code order) can be condition g (every combination of
    ``kept_cards``): they agree on every condition variable that is a parent.
    """
    rows = np.indices(parent_cards).reshape(len(parent_cards), -1).T                    # (q, parents)
    grid = np.indices(kept_cards).reshape(len(kept_cards), -1).T                         # (G, kept)
    match = np.ones((len(rows), len(grid)), dtype=bool)
    for k, p in enumerate(parent_of):
        if p is not None:
            match &= rows[:, p][:, None] == grid[:, k][None, :]
    return match


__all__ = ["CENTRE_TRIMS", "MIN_CONDITION_READINGS", "STRENGTHS", "WIDE_VARIANCE", "ConditionFit", "FoldErrors",
           "PooledCentres",
           "all_terms", "choose_centre_trim", "choose_strengths", "entity_folds", "fit_conditional_sensor",
           "condition_spreads", "group_centres", "group_trimmed_means", "own_condition_prior", "own_condition_support",
           "robust_covariance"]
