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

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.special import gammaln

from .cases import CaseSet
from .errors import ModelFormatError
from .network import GROUPS, AffordanceNetwork
from .options import SCORES
from .parameters import map_assign
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
        self._log_gammas = {}

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
        shape = tuple(self.cards[a] for a in (*parents, child))
        counts = np.bincount(self._configurations(child, parents), minlength=math.prod(shape))
        return counts.reshape(shape).astype(float)

    def _configurations(self, child: int, parents: tuple) -> np.ndarray:
        """The flat index of each case's (parents..., child) configuration, from the contiguous code columns."""
        columns = self._columns
        flat = columns[child].copy()
        stride = self.cards[child]
        for p in reversed(parents):
            flat += columns[p] * np.int32(stride)   # int32: a table of 2**31 entries could not be held anyway
            stride *= self.cards[p]
        return flat

    def _log_gamma(self, offset: int) -> np.ndarray:
        """gammaln(m + offset) for every count m = 0..n_cases: the K2 score of integer counts by lookup."""
        if offset not in self._log_gammas:
            self._log_gammas[offset] = gammaln(np.arange(self.n_cases + 1) + float(offset))
        return self._log_gammas[offset]

    def fold_of_case(self) -> np.ndarray:
        """The fold (0..CV_FOLDS-1) of every case for the "cv" score: a fixed random split."""
        if self._fold is None:
            self._fold = np.random.default_rng(0).permutation(self.n_cases) % CV_FOLDS
        return self._fold

    def fold_counts(self, child: int, parents: tuple) -> np.ndarray:
        """Counts per fold, (CV_FOLDS, *CPT shape)."""
        shape = tuple(self.cards[a] for a in (*parents, child))
        size = math.prod(shape)
        out = np.bincount(self.fold_of_case() * size + self._configurations(child, parents), minlength=CV_FOLDS * size)
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
        q_all = math.prod(cards[p] for p in parents) * sum(cards[u] for u in candidates) * r
        if (q_all > _MAX_JOINT_COUNTS or len(candidates) * len(codes) > _MAX_JOINT_COUNTS
                or self.score not in ("k2", "bdeu", "bic") or not self.counts_from_codes):
            # too large at once, or a score (cv) or counts (expected ones) this pass does not compute
            return np.array([self(child, (*parents, u)) for u in candidates])
        columns = self._columns
        base = np.zeros(len(codes), dtype=np.int32)
        for p in parents:
            base = base * np.int32(cards[p]) + columns[p]
        q_base = math.prod(cards[p] for p in parents)
        card_u = np.array([cards[u] for u in candidates], dtype=np.int64)
        q = q_base * card_u                                    # parent configurations per candidate family
        offsets = np.concatenate([[0], np.cumsum(q * r)[:-1]])
        # the candidate is the most significant digit of its family's configuration: the rows (parent
        # configurations) come in another order than in ``counts``, which no score depends on
        index = columns[candidates]                                 # int32: half the memory traffic
        index *= np.int32(q_base * r)
        index += (base * np.int32(r) + columns[child])[None, :]
        index += offsets[:, None].astype(np.int32)
        whole = np.bincount(index.ravel(), minlength=int((q * r).sum())).reshape(-1, r)
        n_ijk = whole.astype(float)
        n_ij = n_ijk.sum(axis=1)
        starts = offsets // r                                  # where each candidate's rows begin
        if self.score == "k2":
            rows = gammaln(r) - self._log_gamma(r)[whole.sum(axis=1)] + self._log_gamma(1)[whole].sum(axis=1)
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
        r = self.cards[child]
        if self.score == "k2" and self.counts_from_codes:
            whole = np.bincount(self._configurations(child, parents),
                                minlength=math.prod(self.cards[a] for a in (*parents, child))).reshape(-1, r)
            return float(np.sum(gammaln(r) - self._log_gamma(r)[whole.sum(axis=1)])
                         + np.sum(self._log_gamma(1)[whole]))
        counts = self.counts(child, parents)
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


def _bits(mask: int):
    """The variables in a bitset (bit u set: variable u), ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass
class _Toggle:
    """One proposed arc toggle: the masks it changes and the number of legal moves of the new graph."""

    u: int
    v: int
    parents_v: int            # v's parents after the toggle (bitset)
    descendants: dict | None  # variable -> its descendants after a deletion, for those that change
    legal: dict               # target -> its legal parent additions after the toggle, for those that change
    n_additions: int
    n_moves: int


class ArcMoves:
    """A DAG as bitsets (bit u of a mask is variable u) and its legal single-arc moves (MC^3's proposals).

    An addition u -> v is legal when the arc is allowed and absent, v has fewer than ``max_parents``
    parents, and u is not a descendant of v (that arc would close a cycle); every arc may be deleted.
    ``moves`` lists them as the chain draws from them: additions, then deletions, each ordered by (u, v).
    The number of legal moves of the graph with one arc toggled (the Hastings correction) comes from the
    targets whose masks change: v, and u with its ancestors, whose descendants change; no O(n^2) rebuild.
    """

    def __init__(self, allowed: np.ndarray, max_parents: int, parents: Sequence[Sequence[int]]):
        n = len(parents)
        self.n, self.max_parents = n, max_parents
        self.allowed_into = [sum(1 << u for u in range(n) if allowed[u, v] and u != v) for v in range(n)]
        self.parents = [sum(1 << int(u) for u in ps) for ps in parents]
        self.children = [sum(1 << v for v in range(n) if self.parents[v] >> u & 1) for u in range(n)]
        self.descendants = self._closure()
        self.ancestors = [sum(1 << a for a in range(n) if self.descendants[a] >> x & 1) for x in range(n)]
        self.legal = [self._legal_into(v, self.parents[v], self.descendants[v]) for v in range(n)]
        self.n_additions = sum(m.bit_count() for m in self.legal)
        # per source u: the targets of its legal additions (bitset), and its moves in (u, v) order
        self.legal_from = [sum(1 << v for v in range(n) if self.legal[v] >> u & 1) for u in range(n)]
        self._additions_from = [[(u, v) for v in _bits(self.legal_from[u])] for u in range(n)]
        self._deletions_from = [[(u, v) for v in _bits(self.children[u])] for u in range(n)]
        self._list_moves()

    def _closure(self) -> list:
        descendants = list(self.children)
        changed = True
        while changed:
            changed = False
            for a in range(self.n):
                grown = descendants[a]
                for c in _bits(descendants[a]):
                    grown |= descendants[c]
                if grown != descendants[a]:
                    descendants[a], changed = grown, True
        return descendants

    def _legal_into(self, v: int, parents_v: int, descendants_v: int) -> int:
        if parents_v.bit_count() >= self.max_parents:
            return 0
        return self.allowed_into[v] & ~parents_v & ~descendants_v

    def _list_moves(self) -> None:
        self.moves = [m for block in (self._additions_from, self._deletions_from) for moves in block for m in moves]

    @property
    def n_moves(self) -> int:
        """How many legal moves the graph has."""
        return len(self.moves)

    def toggled(self, u: int, v: int) -> _Toggle:
        """The graph with arc u -> v added (if absent) or deleted (if present), as a proposal."""
        bit_u = 1 << u
        upstream = self.ancestors[u] | bit_u    # the variables whose descendants may change
        parents_v = self.parents[v] ^ bit_u
        legal_v = self._legal_into(v, parents_v, self.descendants[v])
        change = legal_v.bit_count() - self.legal[v].bit_count()
        if parents_v & bit_u:
            # u and its ancestors now reach v and its descendants: those are no longer legal parents of them
            # (counted here from the fewer side; the changed masks are found in ``apply``, if accepted)
            reached = (1 << v) | self.descendants[v]
            if reached.bit_count() < upstream.bit_count():
                change -= sum((self.legal_from[x] & upstream).bit_count() for x in _bits(reached))
            else:
                change -= sum((self.legal[a] & reached).bit_count() for a in _bits(upstream))
            n_additions = self.n_additions + change
            return _Toggle(u, v, parents_v, None, {v: legal_v}, n_additions, len(self.moves) + change + 1)
        descendants, legal = {}, {v: legal_v}
        # descendants before ancestors: an ancestor has strictly more descendants
        for a in sorted(_bits(upstream), key=lambda a: self.descendants[a].bit_count()):
            kids = self.children[a] & ~(1 << v) if a == u else self.children[a]
            below = kids
            for c in _bits(kids):
                below |= descendants.get(c, self.descendants[c])
            descendants[a] = below
            legal[a] = self._legal_into(a, self.parents[a], below)
            change += legal[a].bit_count() - self.legal[a].bit_count()
        n_additions = self.n_additions + change
        return _Toggle(u, v, parents_v, descendants, legal, n_additions, len(self.moves) + change - 1)

    def apply(self, toggle: _Toggle) -> None:
        """Make the proposal the current graph."""
        u, v = toggle.u, toggle.v
        descendants = toggle.descendants
        if descendants is None:   # an addition
            reached = (1 << v) | self.descendants[v]
            descendants = {a: self.descendants[a] | reached for a in _bits(self.ancestors[u] | 1 << u)}
            toggle.legal.update({a: self.legal[a] & ~reached for a in descendants if self.legal[a] & reached})
        self.parents[v] = toggle.parents_v
        self.children[u] ^= 1 << v
        self._deletions_from[u] = [(u, c) for c in _bits(self.children[u])]
        for a, below in descendants.items():
            for x in _bits(below ^ self.descendants[a]):
                self.ancestors[x] ^= 1 << a
            self.descendants[a] = below
        sources = 0
        for t, mask in toggle.legal.items():
            flipped = mask ^ self.legal[t]
            for x in _bits(flipped):
                self.legal_from[x] ^= 1 << t
            sources |= flipped
            self.legal[t] = mask
        for x in _bits(sources):
            self._additions_from[x] = [(x, t) for t in _bits(self.legal_from[x])]
        self.n_additions = toggle.n_additions
        self._list_moves()

    def parent_tuple(self, v: int, mask: int | None = None) -> tuple:
        """The parents of v (or those of a bitset), ascending."""
        return tuple(_bits(self.parents[v] if mask is None else mask))


def mcmc(score: FamilyScore, n: int, allowed: np.ndarray, max_parents: int, start: Sequence[tuple],
         n_samples: int, burn_in: int, rng: np.random.Generator, progress: Progress = None):
    """Metropolis-Hastings over DAGs with single-arc additions and deletions (MC^3).

    Each step draws one legal move uniformly and accepts it with probability min(1, score ratio x
    moves here / moves there). ``progress`` hears every ``PROGRESS_STEPS`` steps (steps done, current score).

    Returns (best parents visited, its score, arc frequencies after burn-in, acceptance rate, trace).
    """
    graph = ArcMoves(allowed, max_parents, start)
    family_scores = {}   # (child, parents bitset) -> score: the scorer's cache without building sorted tuples

    def family_score(v: int, mask: int) -> float:
        if (v, mask) not in family_scores:
            family_scores[v, mask] = score(v, graph.parent_tuple(v, mask))
        return family_scores[v, mask]

    family = [family_score(v, graph.parents[v]) for v in range(n)]
    total = sum(family)
    best_total, best_parents = total, list(graph.parents)
    freq = np.zeros((n, n))
    held_since = 0      # the step from which the current graph has been held
    accepted = 0
    trace = []
    steps = burn_in + n_samples
    for step in range(steps):
        n_moves = graph.n_moves
        if n_moves:
            u, v = graph.moves[rng.integers(n_moves)]
            new_family = family_score(v, graph.parents[v] ^ 1 << u)
            uniform = rng.random()
            log_uniform = math.log(uniform) if uniform > 0 else -math.inf
            # the log ratio if the new graph had one legal move: an upper bound, which rejects most proposals
            # before their number of legal moves is counted
            bound = new_family - family[v] + math.log(n_moves)
            toggle = graph.toggled(u, v) if log_uniform < bound else None
            if toggle is not None and log_uniform < bound - math.log(toggle.n_moves):
                _add_held(freq, graph.parents, step - max(held_since, burn_in))
                held_since = step
                graph.apply(toggle)
                total += new_family - family[v]
                family[v] = new_family
                accepted += 1
                if total > best_total:
                    best_total, best_parents = total, list(graph.parents)
        trace.append(total)
        if (step + 1) % PROGRESS_STEPS == 0:
            report(progress, "structure", step + 1, total)
    _add_held(freq, graph.parents, steps - max(held_since, burn_in))
    parents = [graph.parent_tuple(v, mask) for v, mask in enumerate(best_parents)]
    return parents, best_total, freq / max(n_samples, 1), accepted / max(steps, 1), trace


def _add_held(freq: np.ndarray, parents: Sequence[int], steps: int) -> None:
    """Count the arcs of a graph held for ``steps`` sampling steps (none if not positive)."""
    if steps > 0:
        for v, mask in enumerate(parents):
            for u in _bits(mask):
                freq[u, v] += steps


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
