"""Structure learning on MAP-assigned values: K2 (Cooper & Herskovits) and MCMC (Madigan & York).

As in the paper, every hidden value is first replaced by its MAP assignment; the
structure is then scored as if all variables were observed.

Beyond the paper, structural EM (Friedman 1997, 1998): the families are scored on the
*expected* counts under the current model (the posterior of every family given each case's
labels and readings, by exact inference), the search is run again on those scores, the
parameters are re-learned by EM on the new structure, and so on until the structure stops
changing. Hidden variables seen through noisy sensors then keep the parents that MAP
assignments blur away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.special import gammaln

from .cases import CaseSet
from .errors import ModelFormatError
from .network import GROUPS, AffordanceNetwork
from .options import SCORES
from .parameters import family_counts, map_assign
from .progress import Progress, report

PROGRESS_STEPS = 100  # MCMC steps between progress reports


@dataclass
class StructureResult:
    """What a structure search found: the parents, its score, and for MCMC the arc probabilities."""

    method: str
    score_name: str
    score: float
    parents: dict
    arc_probabilities: dict = field(default_factory=dict)
    acceptance_rate: float | None = None
    score_trace: list = field(default_factory=list)


_MAX_JOINT_COUNTS = 1 << 22


class FamilyScore:
    """Decomposable log score of one family on complete data, cached per (child, parents)."""

    counts_from_codes = True  # the counts are of ``codes`` (so ``additions`` may count all candidates at once)

    def __init__(self, codes: np.ndarray, cards: Sequence[int], score: str = "k2", ess: float = 1.0,
                 prior: float = 1.0):
        if score not in SCORES:
            raise ModelFormatError(f"score '{score}' is not one of {list(SCORES)}")
        self.codes, self.cards, self.score, self.ess = codes, list(cards), score, float(ess)
        self.prior = float(prior)  # the pseudo-count per CPT entry the "cv" score learns with
        self._columns = np.ascontiguousarray(np.asarray(codes, dtype=np.int32).T)   # (variables, cases)
        self._cache = {}
        self._fold = None

    def __call__(self, child: int, parents: Sequence[int]) -> float:
        """The family's score with these parents (order does not matter; cached)."""
        key = (child, tuple(sorted(parents)))
        if key not in self._cache:
            self._cache[key] = self._compute(child, key[1])
        return self._cache[key]

    @property
    def n_cases(self) -> int:
        """How many cases the counts come from."""
        return len(self.codes)

    def counts(self, child: int, parents: tuple) -> np.ndarray:
        """Counts of (parents..., child) configurations, shaped like the family's CPT."""
        return family_counts(self.codes, self.cards, child, parents)

    def fold_of_case(self) -> np.ndarray:
        """The fold (0..CV_FOLDS-1) of every case for the "cv" score: a fixed random split."""
        if self._fold is None:
            self._fold = np.random.default_rng(0).permutation(self.n_cases) % CV_FOLDS
        return self._fold

    def fold_counts(self, child: int, parents: tuple) -> np.ndarray:
        """Counts per fold, (CV_FOLDS, *CPT shape)."""
        axes = [*parents, child]
        shape = tuple(int(self.cards[a]) for a in axes)
        flat = np.ravel_multi_index(tuple(self.codes[:, a] for a in axes), shape)
        size = int(np.prod(shape))
        out = np.bincount(self.fold_of_case() * size + flat, minlength=CV_FOLDS * size)
        return out.reshape((CV_FOLDS, *shape)).astype(float)

    def _cross_validated(self, child: int, parents: tuple) -> float:
        """Held-out log-likelihood of the child given its parents: for each fold, the CPT learned (with
        ``prior`` pseudo-counts, as EM learns it) on the other folds, scored on that fold's counts.
        """
        folds = self.fold_counts(child, parents)
        r = self.cards[child]
        folds = folds.reshape(CV_FOLDS, -1, r)
        total = folds.sum(axis=0)
        out = 0.0
        for fold in folds:
            train = total - fold + self.prior
            theta = train / train.sum(axis=1, keepdims=True)
            out += float(np.sum(fold * np.log(theta)))
        return out

    def additions(self, child: int, parents: Sequence[int], candidates: Sequence[int]) -> np.ndarray:
        """Scores of the families ``parents + (u,)`` for every ``u`` in ``candidates``, all at once.

        One counting pass over cases x candidates instead of one per candidate (what K2 asks at each
        step); one at a time when the candidates' tables together would be too large.
        """
        candidates = list(candidates)
        if not candidates:
            return np.zeros(0)
        codes, cards = self.codes, self.cards
        r = cards[child]
        parents = tuple(parents)
        q_all = int(np.prod([cards[p] for p in parents])) * sum(cards[u] for u in candidates) * r
        if (q_all > _MAX_JOINT_COUNTS or len(candidates) * len(codes) > _MAX_JOINT_COUNTS
                or self.score not in ("k2", "bdeu", "bic") or not self.counts_from_codes):
            # too large at once, or a score (cv) or counts (expected ones) this pass does not compute
            return np.array([self(child, (*parents, u)) for u in candidates])
        columns = self._columns
        base = np.zeros(len(codes), dtype=np.int32)
        for p in parents:
            base = base * np.int32(cards[p]) + columns[p]
        q_base = int(np.prod([cards[p] for p in parents])) if parents else 1
        card_u = np.array([cards[u] for u in candidates], dtype=np.int64)
        q = q_base * card_u                                    # parent configurations per candidate family
        offsets = np.concatenate([[0], np.cumsum(q * r)[:-1]])
        index = base[None, :] * card_u[:, None].astype(np.int32)   # int32: half the memory traffic
        index += columns[candidates]
        index *= np.int32(r)
        index += columns[child][None, :] + offsets[:, None].astype(np.int32)
        counts = np.bincount(index.ravel(), minlength=int((q * r).sum())).astype(float)
        n_ijk = counts.reshape(-1, r)
        n_ij = n_ijk.sum(axis=1)
        starts = offsets // r                                  # where each candidate's rows begin
        if self.score == "k2":
            rows = gammaln(r) - gammaln(n_ij + r) + gammaln(n_ijk + 1).sum(axis=1)
            out = np.add.reduceat(rows, starts)
        elif self.score == "bdeu":
            q_rows = np.repeat(q, q).astype(float)
            a_ij, a_ijk = self.ess / q_rows, self.ess / (q_rows * r)
            cells = gammaln(n_ijk + a_ijk[:, None]) - gammaln(a_ijk)[:, None]
            rows = gammaln(a_ij) - gammaln(n_ij + a_ij) + cells.sum(axis=1)
            out = np.add.reduceat(rows, starts)
        else:
            ratio = np.where(n_ijk > 0, n_ijk, 1.0) / np.where(n_ij > 0, n_ij, 1.0)[:, None]
            out = np.add.reduceat((n_ijk * np.log(ratio)).sum(axis=1), starts)
            out = out - 0.5 * np.log(max(len(codes), 1)) * q * (r - 1)
        for u, value in zip(candidates, out):
            self._cache[(child, tuple(sorted((*parents, u))))] = float(value)
        return out

    def _compute(self, child: int, parents: tuple) -> float:
        if self.score == "cv":
            return self._cross_validated(child, parents)
        counts = self.counts(child, parents)
        r = self.cards[child]
        n_ijk = counts.reshape(-1, r)
        n_ij = n_ijk.sum(axis=1)
        q = n_ijk.shape[0]
        if self.score == "k2":
            return float(np.sum(gammaln(r) - gammaln(n_ij + r)) + np.sum(gammaln(n_ijk + 1)))
        if self.score == "bdeu":
            a_ij, a_ijk = self.ess / q, self.ess / (q * r)
            return float(np.sum(gammaln(a_ij) - gammaln(n_ij + a_ij))
                         + np.sum(gammaln(n_ijk + a_ijk) - gammaln(a_ijk)))
        ll = np.sum(n_ijk * np.log(np.where(n_ijk > 0, n_ijk, 1.0) / np.where(n_ij > 0, n_ij, 1.0)[:, None]))
        return float(ll - 0.5 * np.log(max(self.n_cases, 1)) * q * (r - 1))


class ExpectedFamilyScore(FamilyScore):
    """The same scores on expected counts: sum over cases of p(parents, child | case) under ``model``
    (structural EM's E-step), by exact inference over all cases at once.
    """

    counts_from_codes = False

    def __init__(self, model: AffordanceNetwork, cases: CaseSet, score: str = "k2", ess: float = 1.0,
                 prior: float = 1.0):
        super().__init__(np.zeros((cases.n_cases, 0), dtype=np.int64), model.cards, score, ess, prior)
        self.model = model
        self.calibration = model.engine.calibrate([v.cpt for v in model.variables], cases.evidence(model))

    def counts(self, child: int, parents: tuple) -> np.ndarray:
        """Expected counts of (parents..., child) over the cases."""
        family = [*parents, child]
        return self.model.engine.joint(self.calibration, family).sum(axis=0)

    def fold_counts(self, child: int, parents: tuple) -> np.ndarray:
        """Expected counts per fold, (CV_FOLDS, *CPT shape)."""
        joint = self.model.engine.joint(self.calibration, [*parents, child])        # (K, *family cards)
        fold = self.fold_of_case()
        return np.stack([joint[fold == f].sum(axis=0) for f in range(CV_FOLDS)])


CV_FOLDS = 5
DEFAULT_FORBIDDEN_GROUP_ARCS = (("effect", "action"), ("object", "action"), ("effect", "object"))


def allowed_arcs(network: AffordanceNetwork, forbidden_arcs=(), forbidden_group_arcs=()) -> np.ndarray:
    """allowed[u, v]: may u be a parent of v. Group rules like ("effect", "action") forbid whole groups."""
    n = len(network)
    allowed = ~np.eye(n, dtype=bool)
    for pair in forbidden_group_arcs:
        if len(pair) != 2 or any(g not in GROUPS for g in pair):
            raise ModelFormatError(f"forbidden group arc {pair} must be two of {list(GROUPS)}")
        src = [i for i, v in enumerate(network.variables) if v.group == pair[0]]
        dst = [i for i, v in enumerate(network.variables) if v.group == pair[1]]
        allowed[np.ix_(src, dst)] = False
    for pair in forbidden_arcs:
        if len(pair) != 2:
            raise ModelFormatError(f"forbidden arc {pair} must be [parent, child]")
        try:
            allowed[network.index(pair[0]), network.index(pair[1])] = False
        except ValueError as exc:
            raise ModelFormatError(f"forbidden arc {list(pair)}: {exc}") from None
    return allowed


def default_order(network: AffordanceNetwork) -> list[int]:
    """Actions, then objects, then effects, each group in the configuration's order."""
    return [i for g in GROUPS for i, v in enumerate(network.variables) if v.group == g]


# Relative score gain below which K2 adds no parent: equal scores computed in another order differ by rounding.
SCORE_TIE = 1e-12


def k2(score: FamilyScore, order: Sequence[int], allowed: np.ndarray, max_parents: int,
       progress: Progress = None) -> list[tuple]:
    """Greedy K2: each node takes, from its predecessors in ``order``, the parent that raises its
    family score most, until none does or it has ``max_parents``. ``progress`` hears of every node placed.
    """
    parents = [() for _ in order]
    for pos, child in enumerate(order):
        current = ()
        best = score(child, current)
        candidates = [u for u in order[:pos] if allowed[u, child]]
        while len(current) < max_parents:
            left = [u for u in candidates if u not in current]
            if not left:
                break
            values = score.additions(child, current, left)
            top = float(values.max())
            u = max(u for u, value in zip(left, values) if value == top)   # ties: the last, as max() over pairs
            if top <= best + SCORE_TIE * max(1.0, abs(best)):   # a tie (a balanced design) adds no parent
                break
            best, current = top, current + (u,)
        parents[child] = tuple(sorted(current))
        report(progress, "structure", pos + 1, best)
    return parents


def _reachability(adj: np.ndarray) -> np.ndarray:
    """reach[u, v]: a directed path u -> ... -> v exists (repeated squaring: log2(n) matrix products)."""
    reach = adj.astype(np.float64)
    while True:
        longer = (reach + reach @ reach) > 0
        if np.array_equal(longer, reach > 0):
            return longer
        reach = longer.astype(np.float64)


def _legal_moves(adj: np.ndarray, allowed: np.ndarray, max_parents: int):
    """Single-arc additions that keep the graph acyclic and within limits, and all deletions."""
    reach = _reachability(adj)
    n_parents = adj.sum(axis=0)
    add = allowed & ~adj & ~reach.T & (n_parents < max_parents)[None, :]
    np.fill_diagonal(add, False)
    return np.argwhere(add), np.argwhere(adj)


def mcmc(score: FamilyScore, n: int, allowed: np.ndarray, max_parents: int, start: Sequence[tuple],
         n_samples: int, burn_in: int, rng: np.random.Generator, progress: Progress = None):
    """Metropolis-Hastings over DAGs with single-arc additions and deletions (MC^3).

    ``progress`` hears every ``PROGRESS_STEPS`` steps (steps done, current score).

    Returns (best parents visited, its score, arc frequencies after burn-in, acceptance rate, trace).
    """
    adj = np.zeros((n, n), dtype=bool)
    for v, ps in enumerate(start):
        adj[list(ps), v] = True
    family = [score(v, tuple(np.flatnonzero(adj[:, v]))) for v in range(n)]
    total = sum(family)
    best_total, best_adj = total, adj.copy()
    freq = np.zeros((n, n))
    adds, dels = _legal_moves(adj, allowed, max_parents)
    accepted = 0
    trace = []
    for step in range(burn_in + n_samples):
        n_moves = len(adds) + len(dels)
        if n_moves:
            j = rng.integers(n_moves)
            u, v = adds[j] if j < len(adds) else dels[j - len(adds)]
            proposal = adj.copy()
            proposal[u, v] = not adj[u, v]
            new_family = score(v, tuple(np.flatnonzero(proposal[:, v])))
            p_adds, p_dels = _legal_moves(proposal, allowed, max_parents)
            log_ratio = new_family - family[v] + np.log(n_moves) - np.log(len(p_adds) + len(p_dels))
            if np.log(rng.random()) < log_ratio:
                adj, adds, dels = proposal, p_adds, p_dels
                total += new_family - family[v]
                family[v] = new_family
                accepted += 1
                if total > best_total:
                    best_total, best_adj = total, adj.copy()
        if step >= burn_in:
            freq += adj
        trace.append(total)
        if (step + 1) % PROGRESS_STEPS == 0:
            report(progress, "structure", step + 1, total)
    parents = [tuple(np.flatnonzero(best_adj[:, v])) for v in range(n)]
    steps = burn_in + n_samples
    return parents, best_total, freq / max(n_samples, 1), accepted / max(steps, 1), trace


def search(scorer: FamilyScore, network: AffordanceNetwork, method: str, max_parents: int, order, allowed,
           start=None, n_samples: int = 5000, burn_in: int = 1000, seed: int = 0,
           progress: Progress = None) -> StructureResult:
    """K2 (or MCMC started from K2's answer, or from ``start``) with ``scorer``; StructureResult.
    ``progress`` (see ``core.progress``) hears of K2's nodes and of MCMC's steps, and may cancel.
    """
    n = len(network)
    parents = k2(scorer, order, allowed, max_parents, progress) if start is None else start
    result = StructureResult("k2", scorer.score, sum(scorer(v, parents[v]) for v in range(n)), {})
    if method == "mcmc":
        parents, best, freq, acceptance, trace = mcmc(
            scorer, n, allowed, max_parents, parents, n_samples, burn_in, np.random.default_rng(seed), progress)
        probabilities = {(network.names[u], network.names[v]): float(freq[u, v])
                         for u in range(n) for v in range(n) if freq[u, v] > 0}
        result = StructureResult("mcmc", scorer.score, best, {}, probabilities, acceptance, trace)
    result.parents = {network.names[v]: tuple(network.names[u] for u in parents[v]) for v in range(n)}
    return result


def structural_em(model: AffordanceNetwork, cases: CaseSet, fit: Callable, rounds: int, method: str = "k2",
                  score: str = "k2", max_parents: int = 4, order: Sequence[str] | None = None, forbidden_arcs=(),
                  forbidden_group_arcs=DEFAULT_FORBIDDEN_GROUP_ARCS, n_samples: int = 5000,
                  burn_in: int = 1000, seed: int = 0, ess: float = 1.0, prior: float = 1.0,
                  progress: Progress = None):
    """Structural EM from a learned ``model``: score families on expected counts under the current
    model, search again, re-fit the parameters with ``fit(network) -> model``; at most ``rounds``
    times, until the structure repeats. Returns (model, StructureResult of the last search, rounds run).
    """
    allowed = allowed_arcs(model, forbidden_arcs, forbidden_group_arcs)
    order_idx = _order(model, order)
    seen = {tuple(model.arcs)}
    result = None
    done = 0
    for done in range(1, rounds + 1):
        scorer = ExpectedFamilyScore(model, cases.with_network(model), score, ess, prior)
        result = search(scorer, model, method, max_parents, order_idx, allowed, None, n_samples, burn_in, seed,
                        progress)
        candidate = model.with_structure(result.parents)
        if tuple(candidate.arcs) in seen:
            break
        seen.add(tuple(candidate.arcs))
        model = fit(candidate)
    return model, result, done


def _order(network: AffordanceNetwork, order: Sequence[str] | None) -> list[int]:
    if order is None:
        return default_order(network)
    order_idx = [network.index(name) for name in order]
    if sorted(order_idx) != list(range(len(network))):
        raise ModelFormatError(f"'order' must name every variable once: {list(network.names)}")
    return order_idx


def learn_structure(network: AffordanceNetwork, cases: CaseSet, method: str = "k2", score: str = "k2",
                    max_parents: int = 4, order: Sequence[str] | None = None, forbidden_arcs=(),
                    forbidden_group_arcs=DEFAULT_FORBIDDEN_GROUP_ARCS, n_samples: int = 5000,
                    burn_in: int = 1000, seed: int = 0, ess: float = 1.0, prior: float = 1.0,
                    progress: Progress = None):
    """MAP-assign the hidden values, then K2 or MCMC. Returns (network with the arcs, StructureResult).

    ``progress`` (see ``core.progress``) hears of K2's nodes and of MCMC's steps (K2's first: MCMC starts from
    K2's structure), and may cancel.
    """
    if method not in ("k2", "mcmc"):
        raise ModelFormatError(f"structure method '{method}' is not 'k2' or 'mcmc'")
    if not isinstance(max_parents, int) or max_parents < 0:
        raise ModelFormatError("max_parents must be an integer >= 0")
    codes = map_assign(network, cases)
    scorer = FamilyScore(codes, network.cards, score, ess, prior)
    allowed = allowed_arcs(network, forbidden_arcs, forbidden_group_arcs)
    result = search(scorer, network, method, max_parents, _order(network, order), allowed, None,
                    n_samples, burn_in, seed, progress)
    return network.with_structure(result.parents), result
