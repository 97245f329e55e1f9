"""Structure learning on MAP-assigned values: K2 (Cooper & Herskovits) and MCMC (Madigan & York).

As in the paper, every hidden value is first replaced by its MAP assignment; the
structure is then scored as if all variables were observed.

Beyond the paper, structural EM (Friedman 1997, 1998): the families are scored on the
*expected* counts under the current model (the posterior of every family given each case's
labels and readings, by exact inference), the search is run again on those scores, the
parameters are re-learned by EM on the new structure, and so on until the structure stops
changing. Hidden variables seen through noisy sensors then keep the parents that MAP
assignments blur away.

A score is a class (``K2Score``, ``BDeuScore``, ``BICScore``, ``CVScore``: ``family_score`` picks
the one ``LearningOptions.score`` names) over the counts of complete cases (``CaseCounts``) or
the expected counts (``ExpectedCounts``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.special import gammaln

from .cases import CaseEvidence
from .errors import EvidenceError, ModelFormatError
from .evidence import Evidence
from .inference import joint_posterior
from .network import GROUPS, AffordanceNetwork
from .options import LearningOptions
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
_DISTINCT_AT_LEAST = 64     # cases below which they are counted as they are, not as distinct cases
_SMALL_COUNTING = 4096      # (distinct cases x candidates) up to which a round's counting is ``_small_tables``'
_PADDED_UP_TO = 8           # children with at most this many values share one table, their rows padded with zeros
CV_FOLDS = 5
_SUM = np.add.reduce    # (ndarray.sum's Python wrapper costs as much as summing a K2 round's few rows)


class FamilyCounts:
    """Where a family score's counts come from; the cases are split into ``CV_FOLDS`` fixed random folds."""

    def __init__(self, cards: Sequence[int], n_cases: int):
        self.cards = list(cards)
        self.n_cases = n_cases
        self._fold = None

    def fold_of_case(self) -> np.ndarray:
        """The fold (0..CV_FOLDS-1) of every case: a fixed random split."""
        if self._fold is None:
            self._fold = np.random.default_rng(0).permutation(self.n_cases) % CV_FOLDS
        return self._fold

    def counts(self, child: int, parents: tuple) -> np.ndarray:
        """Counts of (parents..., child) configurations, shaped like the family's CPT (floats)."""
        return self.table(child, parents).reshape([self.cards[a] for a in (*parents, child)]).astype(float)


class CaseCounts(FamilyCounts):
    """Counts over complete cases: value codes (K, n), e.g. MAP assignments.

    Counted over the distinct cases, each weighted by how often it occurs, when they are at most half of them
    (a small network: asia's 10,000 cases are 57 distinct ones).
    """

    def __init__(self, codes: np.ndarray, cards: Sequence[int]):
        super().__init__(cards, len(codes))
        n = len(self.cards)
        codes = np.asarray(codes, dtype=np.int32).reshape(len(codes), n)
        # (variables + 2, cases): then a row of zeros, the digit of a parent with one value (``candidate_tables``),
        # and a row of ones, the digit of where a family begins (``_small_tables``)
        self._codes = codes
        self._columns = None          # (every case's codes as ``_rows``, for the folds: made when first needed)
        self._rows, self._weights = None, None
        distinct = _distinct_cases(codes, self.cards)
        if distinct is not None:
            first, rows, times = distinct
            self._rows = _with_zeros_and_ones(codes[first].T if rows is None else rows)
            self._weights = times.astype(float)
        else:
            self._rows = self._case_columns()
        self._values = np.array([*self.cards, 1])   # per variable, and 1 for the row of zeros
        self._log_gammas = _LogGammas(self.n_cases)
        self._pairs = None
        self._tiled = None

    def _case_columns(self) -> np.ndarray:
        """Every case's codes (variables + 2, cases), then the rows of zeros and ones."""
        if self._columns is None:
            self._columns = _with_zeros_and_ones(self._codes.T)
        return self._columns

    def _configurations(self, child: int, parents: tuple, columns: np.ndarray) -> np.ndarray:
        """The flat index of each case's (parents..., child) configuration, from contiguous code ``columns``."""
        flat = columns[child].copy()
        stride = self.cards[child]
        for p in reversed(parents):
            flat += columns[p] * np.int32(stride)   # int32: a table of 2**31 entries could not be held anyway
            stride *= self.cards[p]
        return flat

    def _count(self, index: np.ndarray, size: int, weights: np.ndarray | None) -> np.ndarray:
        """Integer counts of ``index`` (rows x distinct cases, flat), each distinct case with its weight."""
        if weights is None:
            return np.bincount(index, minlength=size)
        return np.bincount(index, weights=weights, minlength=size).astype(np.int64)

    def table(self, child: int, parents: tuple) -> np.ndarray:
        """Integer counts (parent configurations, child values)."""
        size = math.prod(self.cards[a] for a in (*parents, child))
        index = self._configurations(child, parents, self._rows)
        return self._count(index, size, self._weights).reshape(-1, self.cards[child])

    def fold_counts(self, child: int, parents: tuple) -> np.ndarray:
        """Counts per fold, (CV_FOLDS, *CPT shape)."""
        shape = tuple(self.cards[a] for a in (*parents, child))
        size = math.prod(shape)
        index = self.fold_of_case() * size + self._configurations(child, parents, self._case_columns())
        return np.bincount(index, minlength=CV_FOLDS * size).reshape((CV_FOLDS, *shape)).astype(float)

    def log_gamma(self, counts: np.ndarray, offset) -> np.ndarray:
        """gammaln(counts + offset) of integer counts, by lookup (``_LogGammas``)."""
        return self._log_gammas(counts, offset)

    def candidate_table(self, child: int, parents: tuple, candidates: Sequence[int]):
        """``candidate_tables`` of one request."""
        return self.candidate_tables([(child, parents, candidates)])

    def candidate_tables(self, requests: Sequence[tuple]):
        """The counts of the families ``parents + (u,)`` for every ``u`` in ``candidates`` of every request
        (child, parents, candidates), in one counting pass over cases x candidates (what K2 asks at each step, of
        every child at once): (integer counts (rows, the most values of a child), parent configurations per
        family, the row where each family begins, each family's child's number of values or one number for
        all), the families in the order of the requests and of their candidates, a child with fewer values than
        the table's width padded with zero counts; a candidate None stands for the family ``parents`` itself.
        None when the tables together would be too large.
        """
        cards, n_rows, zero = self.cards, self._rows.shape[1], len(self.cards)
        width = max(cards[child] for child, _, _ in requests)
        if n_rows * sum(len(candidates) for _, _, candidates in requests) <= _SMALL_COUNTING:
            return self._small_tables(requests, width)
        # per candidate (in Python: a round has a few hundred at most): its variable (None: the row of zeros), the
        # stride of its digit (its request's parent configurations times ``width``), its request; per request the
        # digits of its (parents..., child) configuration, the last parent's just above the child's, and their strides
        variable, strides, request_of, sizes, digits, weights = [], [], [], [], [], []
        for j, (child, parents, candidates) in enumerate(requests):
            digit, weight, stride = [child], [1], width
            for p in reversed(parents):
                digit.append(p)
                weight.append(stride)
                stride *= cards[p]
            digits.append(digit)
            weights.append(weight)
            variable += [zero if u is None else u for u in candidates]
            strides += [stride] * len(candidates)
            request_of += [j] * len(candidates)
            sizes.append(len(candidates))
        stride = np.array(strides)
        cells = stride * self._values[variable]
        if int(cells.sum()) > _MAX_JOINT_COUNTS or len(variable) * n_rows > _MAX_JOINT_COUNTS:
            return None
        ends = np.cumsum(cells)
        q, starts = cells // width, (ends - cells) // width
        r_of = [cards[child] for child, _, _ in requests]
        r = width if r_of.count(width) == len(r_of) else np.repeat(r_of, sizes)   # one number when all have as many
        if self._pairs_pay(requests, len(variable)):
            return self._pair_tables(requests, np.array(variable), q, width), q, starts, r
        # the candidate is the most significant digit of its family's configuration: the rows (parent
        # configurations) come in another order than in ``counts``, which no score depends on
        index = self._rows[variable]                                # int32: half the memory traffic
        index *= stride.astype(np.int32)[:, None]
        index += self._bases(digits, weights)[request_of]
        index += (ends - cells).astype(np.int32)[:, None]
        return self._count(index.ravel(), int(ends[-1]), self._tiled_weights(len(variable))).reshape(-1, width), \
            q, starts, r

    def _small_tables(self, requests: Sequence[tuple], width: int) -> tuple:
        """``candidate_tables`` of few (distinct cases x candidates): each family's cell of a case as one sum of
        its digits' values (the candidate's, the child's, the parents', and a one for where the family begins)
        times their strides, and what is per candidate in Python (numpy's cost per call is most of such a round).
        """
        digits, strides, q, starts, r, size = _small_layout(self.cards, requests, width)
        if size > _MAX_JOINT_COUNTS:
            return None
        index = np.einsum("fkc,fk->fc", self._rows[digits], strides.astype(np.int32))
        counts = self._count(index.ravel(), size, self._tiled_weights(len(q)))
        return counts.reshape(-1, width), np.array(q), np.array(starts), width if r.count(width) == len(r) else \
            np.array(r)

    def _tiled_weights(self, times: int) -> np.ndarray | None:
        """The distinct cases' weights repeated ``times`` over (one per candidate), None without weights."""
        if self._weights is None:
            return None
        size = times * len(self._weights)
        if self._tiled is None or len(self._tiled) < size:    # (K2's first round asks for the most)
            self._tiled = np.repeat(self._weights[None, :], times, axis=0).ravel()
        return self._tiled[:size]

    def _pairs_pay(self, requests: Sequence[tuple], n_candidates: int) -> bool:
        """Whether ``requests`` (all without parents: K2's first round) are read from the counts of every pair of
        variables (``_pair_counts``): held when (distinct cases x values) <= ``_MAX_JOINT_COUNTS``, and made in
        about (values)^2 / 16 passes over the cases, against about 6 per candidate to count the candidates.
        """
        values = sum(self.cards) + 1
        return (all(not parents for _, parents, _ in requests) and self._rows.shape[1] * values <= _MAX_JOINT_COUNTS
                and (self._pairs is not None or values * values < 96 * n_candidates))

    def _pair_tables(self, requests: Sequence[tuple], variable: np.ndarray, q: np.ndarray, width: int) -> np.ndarray:
        """``candidate_tables``' counts of requests without parents, read from ``_pair_counts``: family f's rows
        are its candidate's values (one row for None), its columns its child's values (then zeros).
        """
        pairs, first = self._pair_counts()
        rows = np.repeat(first[variable] - np.cumsum(q) + q, q) + np.arange(int(q.sum()))
        columns = first[[child for child, _, _ in requests]][:, None] + np.arange(width)
        beyond = np.arange(width) >= np.array([self.cards[child] for child, _, _ in requests])[:, None]
        columns[beyond] = len(pairs) - 1                                      # the column of zeros
        request_of = np.repeat(np.arange(len(requests)), [len(candidates) for _, _, candidates in requests])
        return pairs[rows[:, None], columns[np.repeat(request_of, q)]]

    def _pair_counts(self) -> tuple:
        """(the weighted counts of every pair of values of two variables, (values + 2, values + 2), integers: the
        product of the distinct cases' values one-hot; the row of variable v's first value, None's: its row is the
        number of cases, the last row and column are zeros), made once.
        """
        if self._pairs is None:
            n_rows, cards = self._rows.shape[1], self.cards
            first = np.concatenate([[0], np.cumsum(cards)])
            # (values + 2, distinct cases), in single precision when every count (at most the cases) is exact in it
            kind = np.float32 if self.n_cases < 1 << 24 else float
            one_hot = np.zeros((int(first[-1]) + 2, n_rows), dtype=kind)
            one_hot.ravel()[((first[:-1, None] + self._rows[:len(cards)]) * n_rows + np.arange(n_rows)).ravel()] = 1
            one_hot[-2] = 1.0
            weighted = one_hot if self._weights is None else one_hot * self._weights.astype(kind)
            self._pairs = (np.rint(one_hot @ weighted.T).astype(np.int64), first)   # first[n]: None's, the ones
        return self._pairs

    def _bases(self, digits: list, weights: list) -> np.ndarray:
        """Each request's configuration of every distinct case (requests, cases): the sum of its ``digits``' values
        (variables, per request) times their ``weights`` (strides).
        """
        depth = max(map(len, digits))
        for digit, weight in zip(digits, weights):    # (padded with the row of zeros)
            digit += [len(self.cards)] * (depth - len(digit))
            weight += [0] * (depth - len(weight))
        return np.einsum("jkc,jk->jc", self._rows[digits], np.array(weights, dtype=np.int32))


def _distinct_cases(codes: np.ndarray, cards: Sequence[int]) -> tuple | None:
    """(the first case of each distinct one (None: ``rows`` given instead), their codes (variables, distinct), how
    often each occurs) when the distinct cases (``codes`` (K, n)) are at most half of them, else None.
    """
    states = math.prod(cards)
    if len(codes) < 2 * _DISTINCT_AT_LEAST or states >= 1 << 62:
        return None
    strides = [1]
    for card in cards[:0:-1]:
        strides.append(strides[-1] * card)
    strides = np.array(strides[::-1])                                # the first variable most significant
    # (in double precision, exact below 2**53: a product of integers in numpy costs twice as much)
    keys = (codes @ strides.astype(float)).astype(np.int64) if states < 1 << 53 else codes.astype(np.int64) @ strides
    if states <= 4 * len(codes):      # few joint states (asia: 256): counted, no sort
        times = np.bincount(keys, minlength=states)
        distinct = np.flatnonzero(times)
        times, first = times[distinct], None
        rows = (distinct[None, :] // strides[:, None]) % np.array(cards)[:, None]
    elif 2 * (1 + np.count_nonzero(np.diff(np.sort(keys)))) <= len(codes):   # (a sort: cheaper than unique's)
        _, first, times = np.unique(keys, return_index=True, return_counts=True)
        rows = None
    else:
        return None
    return (first, rows, times) if 2 * len(times) <= len(codes) else None


def _small_layout(cards: Sequence[int], requests: Sequence[tuple], width: int) -> tuple:
    """``CaseCounts._small_tables``' families: (per family the rows of ``_rows`` whose values make its cell of a
    case (the candidate's, the row of ones, the child's, the parents', then the row of zeros), (families, digits);
    their strides (the candidate's, where the family begins, the child's 1, the parents'); per family its
    parent configurations, the row where it begins and its child's number of values; the cells of all), the
    bookkeeping in Python (numpy's cost per call is most of such a round).
    """
    zero, one = len(cards), len(cards) + 1
    depth = max(len(parents) for _, parents, _ in requests)
    digits, strides, q, starts, r = [], [], [], [], []      # digits and strides: per family, flat
    at = 0        # where the next family begins (cells)
    for child, parents, candidates in requests:
        digit, weight, stride = [child], [1], width
        for p in reversed(parents):
            digit.append(p)
            weight.append(stride)
            stride *= cards[p]
        digit += [zero] * (depth - len(parents))     # (the row of zeros, stride 0)
        weight += [0] * (depth - len(parents))
        for u in candidates:
            cells = stride if u is None else stride * cards[u]
            digits.append(zero if u is None else u)
            digits.append(one)
            digits += digit
            strides.append(stride)
            strides.append(at)
            strides += weight
            q.append(cells // width)
            starts.append(at // width)
            at += cells
        r += [cards[child]] * len(candidates)
    shape = (len(q), depth + 3)
    return np.array(digits).reshape(shape), np.array(strides).reshape(shape), q, starts, r, at


class _LogGammas:
    """gammaln(counts + offset) of integer counts (at most ``n_cases``), by lookup in tables of m = 0..n_cases: one
    per offset, or for integer offsets per count (K2's children of different numbers of values) one row per offset.
    """

    def __init__(self, n_cases: int):
        self.n_cases = n_cases
        self._tables = {}
        self._rows = None

    def __call__(self, counts: np.ndarray, offset) -> np.ndarray:
        if not isinstance(offset, np.ndarray):
            table = self._tables.get(offset)
            if table is None:
                table = self._tables[offset] = _log_gamma_table(float(offset), self.n_cases)
            return table[counts]
        rows = int(offset.max()) + 1 if offset.dtype.kind in "iu" else 0
        if not rows or rows * (self.n_cases + 1) > _LOG_GAMMA_ROWS:
            return gammaln(counts + offset)
        if self._rows is None or len(self._rows) < rows:
            self._rows = np.stack([_log_gamma_table(float(k), self.n_cases)[:self.n_cases + 1] for k in range(rows)])
        return self._rows[offset, counts]


def _with_zeros_and_ones(codes: np.ndarray) -> np.ndarray:
    """Codes (variables, cases) as int32, then a row of zeros and a row of ones."""
    out = np.empty((len(codes) + 2, codes.shape[1]), dtype=np.int32)
    out[:-2] = codes
    out[-2] = 0
    out[-1] = 1
    return out


_LOG_GAMMAS: dict = {}        # offset -> gammaln(m + offset), m = 0, 1, ..: the same numbers for every learn
_SHARED_LOG_GAMMAS = 1 << 17  # counts up to which those tables are kept for the next learns
_LOG_GAMMA_ROWS = 1 << 21     # entries of a learn's table per integer offset (``CaseCounts.log_gamma``), at most


def _log_gamma_table(offset: float, n: int) -> np.ndarray:
    """gammaln(m + offset) for m = 0..n at least (kept for the process up to ``_SHARED_LOG_GAMMAS``)."""
    if n > _SHARED_LOG_GAMMAS:
        return gammaln(np.arange(n + 1) + offset)
    table = _LOG_GAMMAS.get(offset)
    if table is None or len(table) <= n:
        size = min(_SHARED_LOG_GAMMAS, max(n, 2 * (0 if table is None else len(table)))) + 1
        table = _LOG_GAMMAS[offset] = gammaln(np.arange(size) + offset)
    return table


class ExpectedCounts(FamilyCounts):
    """Expected counts: the sum over cases of p(parents, child | case) under ``model`` (structural EM's
    E-step), by exact inference over all cases at once.
    """

    def __init__(self, model: AffordanceNetwork, evidence: Evidence):
        super().__init__(model.cards, evidence.n_cases)
        self.model = model
        self.calibration = model.engine.calibrate([v.cpt for v in model.variables], evidence)

    def table(self, child: int, parents: tuple) -> np.ndarray:
        """Expected counts (parent configurations, child values)."""
        joint = joint_posterior(self.model.engine, self.calibration, [*parents, child]).sum(axis=0)
        return joint.reshape(-1, self.cards[child])

    def fold_counts(self, child: int, parents: tuple) -> np.ndarray:
        """Expected counts per fold, (CV_FOLDS, *CPT shape)."""
        joint = joint_posterior(self.model.engine, self.calibration, [*parents, child])  # (K, *family cards)
        fold = self.fold_of_case()
        return np.stack([joint[fold == f].sum(axis=0) for f in range(CV_FOLDS)])

    def log_gamma(self, counts: np.ndarray, offset) -> np.ndarray:
        """gammaln(counts + offset)."""
        return gammaln(counts + offset)

    def candidate_tables(self, requests: Sequence[tuple]):
        """Always None: expected counts come one family at a time."""
        return None


class FamilyScore:
    """Decomposable log score of one family, cached per (child, parents); a subclass per score, each with its
    formula written once: ``of_candidates``, the scores of many families from their counts laid out row by row
    (``FamilyCounts.candidate_tables``), of which ``local``, one family's score, is the case of one family. A score
    without such a form (``CVScore``) writes ``local`` alone.
    """

    name = ""
    batched = True   # whether ``of_candidates`` is the formula (else ``local`` is)

    def __init__(self, data: FamilyCounts):
        self.data = data
        self.cards = data.cards
        self._cache = {}
        self._many = {}   # (child, parents ascending) -> (candidates, their scores) of a request to ``many``

    @classmethod
    def from_options(cls, data: FamilyCounts, options: LearningOptions) -> "FamilyScore":
        """The score on ``data``, with its parameters from ``options``."""
        return cls(data)

    def __call__(self, child: int, parents: Sequence[int]) -> float:
        """The family's score with these parents (order does not matter; cached)."""
        key = (child, tuple(sorted(parents)))
        if key not in self._cache:
            found = self._scored_in_many(*key)
            self._cache[key] = self.local(*key) if found is None else found
        return self._cache[key]

    def _scored_in_many(self, child: int, parents: tuple) -> float | None:
        """The family's score if ``many`` computed it: as one of a request's candidates, or as its None."""
        for u in (None, *parents):
            scored = self._many.get((child, parents if u is None else tuple(p for p in parents if p != u)))
            if scored is not None and u in scored[0]:
                return float(scored[1][scored[0].index(u)])
        return None

    def local(self, child: int, parents: tuple) -> float:
        """The family's score, computed (not cached): ``of_candidates`` of its table alone."""
        table = self.data.table(child, parents)
        return float(self.of_candidates(table, np.array([table.shape[0]]), np.zeros(1, dtype=np.int64),
                                        table.shape[1])[0])

    def of_candidates(self, table: np.ndarray, q: np.ndarray, starts: np.ndarray, r) -> np.ndarray:
        """The score of every family laid out in ``table`` (rows: parent configurations, columns: the child's
        values), family f having ``q[f]`` rows from row ``starts[f]`` and a child of ``r`` values (one number for
        all, or one per family; columns beyond a family's ``r`` hold zeros): the score's formula.
        """
        raise NotImplementedError

    def additions(self, child: int, parents: Sequence[int], candidates: Sequence[int]) -> np.ndarray:
        """Scores of the families ``parents + (u,)`` for every ``u`` in ``candidates``, all at once where the
        score and the counts allow (one counting pass), else one at a time.
        """
        return self.many([(child, tuple(parents), list(candidates))])[0]

    def many(self, requests: Sequence[tuple]) -> list:
        """``additions`` of many requests (child, parents, candidates) at once, a candidate None standing for the
        family ``parents`` itself: one counting pass for all the requests whose children have the same number of
        values (in as few as their tables' size allows), else one family at a time. ``__call__`` then finds the
        scores.
        """
        out = [None] * len(requests)
        by_width = {}   # children of few values share one table (rows padded with zeros), the others by their number
        for j, (child, _, candidates) in enumerate(requests):
            if len(candidates):
                r = self.cards[child]
                by_width.setdefault(0 if r <= _PADDED_UP_TO else r, []).append(j)
            else:
                out[j] = np.zeros(0)
        per_batch = max(1, _MAX_JOINT_COUNTS // max(self.data.n_cases, 1))
        for group in by_width.values():
            requests_of = [requests[j] for j in group]
            if sum(len(candidates) for _, _, candidates in requests_of) <= per_batch:
                self._score_batch(list(enumerate(requests_of)), out, group)
                continue
            for batch in self._batches(requests_of, per_batch):
                self._score_batch(batch, out, group)
        return out

    @staticmethod
    def _batches(requests: list, per_batch: int):
        """``requests`` in runs whose candidates number at most ``per_batch``."""
        batch, size = [], 0
        for j, request in enumerate(requests):
            if batch and size + len(request[2]) > per_batch:
                yield batch
                batch, size = [], 0
            batch.append((j, request))
            size += len(request[2])
        if batch:
            yield batch

    def _score_batch(self, batch: list, out: list, group: list) -> None:
        found = self.data.candidate_tables([request for _, request in batch]) if self.batched else None
        if found is None:
            for j, (child, parents, candidates) in batch:
                out[group[j]] = np.array([self(child, parents if u is None else (*parents, u)) for u in candidates])
            return
        values = self.of_candidates(*found)
        at = 0
        for j, (child, parents, candidates) in batch:
            scores = out[group[j]] = values[at:at + len(candidates)]
            at += len(candidates)
            self._many[child, tuple(sorted(parents))] = (candidates, scores)   # what ``__call__`` then finds


class K2Score(FamilyScore):
    """Cooper & Herskovits' K2: the marginal likelihood with a uniform Dirichlet(1) prior per CPT row."""

    name = "k2"

    def of_candidates(self, table: np.ndarray, q: np.ndarray, starts: np.ndarray, r) -> np.ndarray:
        """Sum over parent configurations j of log Gamma(r) - log Gamma(N_ij + r) + sum_k log Gamma(N_ijk + 1)."""
        first = gammaln(r)
        if isinstance(r, np.ndarray):     # (per family: to each of its rows)
            r, first = np.repeat(r, q), np.repeat(first, q)
        rows = first - self.data.log_gamma(_SUM(table, axis=1), r) + _SUM(self.data.log_gamma(table, 1), axis=1)
        return np.add.reduceat(rows, starts)


class BDeuScore(FamilyScore):
    """BDeu: the marginal likelihood with the equivalent sample size ``ess`` spread evenly over the CPT."""

    name = "bdeu"

    def __init__(self, data: FamilyCounts, ess: float):
        super().__init__(data)
        self.ess = float(ess)

    @classmethod
    def from_options(cls, data: FamilyCounts, options: LearningOptions) -> "BDeuScore":
        """BDeu with ``options.ess``."""
        return cls(data, options.ess)

    def of_candidates(self, table: np.ndarray, q: np.ndarray, starts: np.ndarray, r) -> np.ndarray:
        """With a_ij = ess / q, a_ijk = ess / (q r): sum over j of log Gamma(a_ij) - log Gamma(N_ij + a_ij)
        + sum_k log Gamma(N_ijk + a_ijk) - log Gamma(a_ijk), each family with its own q and r (a padded cell,
        a count of 0, adds 0).
        """
        n_ijk = table.astype(float)
        q_rows = np.repeat(q, q).astype(float)
        a_ij, a_ijk = self.ess / q_rows, self.ess / (q_rows * (np.repeat(r, q) if isinstance(r, np.ndarray) else r))
        cells = gammaln(n_ijk + a_ijk[:, None]) - gammaln(a_ijk)[:, None]
        return np.add.reduceat(gammaln(a_ij) - gammaln(n_ijk.sum(axis=1) + a_ij) + cells.sum(axis=1), starts)


class BICScore(FamilyScore):
    """BIC: the maximum log-likelihood less half log(cases) per free parameter."""

    name = "bic"

    def of_candidates(self, table: np.ndarray, q: np.ndarray, starts: np.ndarray, r) -> np.ndarray:
        """The maximum log-likelihood sum N_ijk log(N_ijk / N_ij), less log(cases) q (r - 1) / 2."""
        n_ijk = table.astype(float)
        penalty = 0.5 * np.log(max(self.data.n_cases, 1)) * q * (r - 1)
        return np.add.reduceat(max_log_likelihood_rows(n_ijk), starts) - penalty


def max_log_likelihood_rows(n_ijk: np.ndarray) -> np.ndarray:
    """Per row (parent configuration) of counts (rows, child values), the maximum log-likelihood
    sum_k N_ijk log(N_ijk / N_ij) (a count of 0 adds 0).
    """
    n_ij = n_ijk.sum(axis=1)
    return (n_ijk * np.log(np.where(n_ijk > 0, n_ijk, 1.0) / np.where(n_ij > 0, n_ij, 1.0)[:, None])).sum(axis=1)


class CVScore(FamilyScore):
    """The child's held-out log-likelihood given its parents: for each of ``CV_FOLDS`` folds, the CPT learned
    (with ``prior`` pseudo-counts, as EM learns it) on the other folds, scored on that fold's counts.
    """

    name = "cv"
    batched = False

    def __init__(self, data: FamilyCounts, prior: float):
        super().__init__(data)
        self.prior = float(prior)

    @classmethod
    def from_options(cls, data: FamilyCounts, options: LearningOptions) -> "CVScore":
        """The cross-validated score with ``options.prior`` pseudo-counts."""
        return cls(data, options.prior)

    def local(self, child: int, parents: tuple) -> float:
        """The sum over the folds of the fold's counts times the log of the CPT learned on the other folds."""
        r = self.cards[child]
        folds = self.data.fold_counts(child, parents).reshape(CV_FOLDS, -1, r)
        total = folds.sum(axis=0)
        out = 0.0
        for fold in folds:
            train = total - fold + self.prior
            theta = train / train.sum(axis=1, keepdims=True)
            out += float(np.sum(fold * np.log(theta)))
        return out


SCORE_CLASSES = {score.name: score for score in (K2Score, BDeuScore, BICScore, CVScore)}


def family_score(data: FamilyCounts, options: LearningOptions) -> FamilyScore:
    """The score ``options.score`` on ``data``."""
    return SCORE_CLASSES[options.score].from_options(data, options)


def allowed_arcs(network: AffordanceNetwork, options: LearningOptions) -> np.ndarray:
    """allowed[u, v]: may u be a parent of v, under ``options.forbidden_group_arcs`` (whole groups, e.g.
    nothing from an effect into the action) and ``options.forbidden_arcs``.
    """
    n = len(network)
    allowed = ~np.eye(n, dtype=bool)
    for source, target in options.forbidden_group_arcs:
        src = [i for i, v in enumerate(network.variables) if v.group == source]
        dst = [i for i, v in enumerate(network.variables) if v.group == target]
        allowed[np.ix_(src, dst)] = False
    for pair in options.forbidden_arcs:
        try:
            allowed[network.index(pair[0]), network.index(pair[1])] = False
        except EvidenceError as exc:
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
    family score most, until none does or it has ``max_parents``. Every node takes its next parent in
    the same round (the scores of all their candidates from one counting pass: ``FamilyScore.many``);
    ``progress`` hears of every node placed, in ``order``.
    """
    return _k2(score, order, allowed, max_parents, progress)[0]


def _k2(score: FamilyScore, order: Sequence[int], allowed: np.ndarray, max_parents: int,
        progress: Progress = None) -> tuple[list, dict]:
    """``k2``'s parents, and each node's family score with them ({node: score}, as ``score`` gives it)."""
    parents = [() for _ in order]
    allowed = allowed.tolist()    # (Python lists: a numpy scalar per pair would cost more than the round)
    candidates = {child: [u for u in order[:pos] if allowed[u][child]] if max_parents > 0 else []
                  for pos, child in enumerate(order)}
    best = {}
    # the first round also scores each node without parents (the candidate None)
    requests = [(child, (), [None, *candidates[child]]) for child in order]
    reported = 0
    while requests:
        growing = []
        scored = score.many(requests)
        for (child, current, left), found in zip(requests, scored):
            values = found.tolist()     # Python floats: a request's few values need no numpy call
            if left[0] is None:
                best[child], left, values = values[0], left[1:], values[1:]
                if not left:
                    continue
            top = max(values)
            if top <= best[child] + SCORE_TIE * max(1.0, abs(best[child])):   # a tie (a balanced design) adds none
                continue
            u = left[values.index(top)] if values.count(top) == 1 else \
                max(u for u, value in zip(left, values) if value == top)   # ties: the last
            best[child], parents[child] = top, current + (u,)
            if len(parents[child]) < max_parents:
                growing.append(child)
        requests = [(child, parents[child], [u for u in candidates[child] if u not in parents[child]])
                    for child in growing]
        requests = [request for request in requests if request[2]]
        busy = {request[0] for request in requests}
        while reported < len(order) and order[reported] not in busy:
            report(progress, "structure", reported + 1, best[order[reported]])
            reported += 1
    return [tuple(sorted(p)) for p in parents], best


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
        self.n = n
        self.max_parents = max_parents
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


def search(scorer: FamilyScore, network: AffordanceNetwork, options: LearningOptions,
           progress: Progress = None, fixed: Mapping[str, Sequence[str]] | None = None) -> StructureResult:
    """K2 with ``scorer`` under ``options`` (its order, rules and ``max_parents``); for ``options.structure``
    "mcmc", MCMC started from K2's answer. ``progress`` (see ``core.progress``) hears of K2's nodes and of
    MCMC's steps, and may cancel. ``fixed``: families not searched, their parents given (e.g. a variable whose
    values are the conditions of its parents); no arc goes from such a variable into its parents, and the
    score is that of the other families.
    """
    n = len(network)
    allowed = allowed_arcs(network, options)
    for child, parents in (fixed or {}).items():
        allowed[:, network.index(child)] = False
        allowed[network.index(child), [network.index(p) for p in parents]] = False
    parents, best = _k2(scorer, _order(network, options.order), allowed, options.max_parents, progress)
    result = StructureResult("k2", scorer.name, sum(best[v] for v in range(n)), {})   # (what scorer(v, parents[v]) is)
    if options.structure == "mcmc":
        parents, best, freq, acceptance, trace = mcmc(
            scorer, n, allowed, options.max_parents, parents, options.mcmc_samples, options.mcmc_burn_in,
            np.random.default_rng(options.seed), progress)
        probabilities = {(network.names[u], network.names[v]): float(freq[u, v])
                         for u in range(n) for v in range(n) if freq[u, v] > 0}
        result = StructureResult("mcmc", scorer.name, best, {}, probabilities, acceptance, trace)
    result.parents = {network.names[v]: tuple(network.names[u] for u in parents[v]) for v in range(n)}
    result.parents.update({child: tuple(given) for child, given in (fixed or {}).items()})
    return result


def structural_em(model: AffordanceNetwork, observed: CaseEvidence, fit: Callable, options: LearningOptions,
                  progress: Progress = None, fixed: Mapping[str, Sequence[str]] | None = None):
    """Structural EM from a learned ``model``: score families on expected counts under the current model
    (``observed``: the cases' evidence), search again, re-fit the parameters with ``fit(network) -> model``;
    at most ``options.structural_em`` times, until the structure repeats. Returns (model, StructureResult of
    the last search, rounds run). ``fixed``: families not searched (``search``).
    """
    _check_searchable(options)
    seen = {tuple(model.arcs)}
    result = None
    done = 0
    for done in range(1, options.structural_em + 1):
        counts = ExpectedCounts(model, CaseEvidence.of(observed, model).evidence())
        result = search(family_score(counts, options), model, options, progress, fixed)
        candidate = model.with_structure(result.parents)
        if tuple(candidate.arcs) in seen:
            break
        seen.add(tuple(candidate.arcs))
        model = fit(candidate)
    return model, result, done


def _order(network: AffordanceNetwork, order: Sequence[str] | None) -> list[int]:
    if order is None:
        return default_order(network)
    if len(order) == len(network) and set(order) == set(network.names):     # (every variable once)
        return [network.index(name) for name in order]
    unknown = [name for name in order if name not in network.names]
    twice = sorted({name for name in order if order.count(name) > 1})
    left_out = [name for name in network.names if name not in order]
    for wrong, names in (("names unknown variables", unknown), ("names twice", twice), ("leaves out", left_out)):
        if names:
            raise ModelFormatError(f"learning option 'order' {wrong} {names}; it must name every variable once: "
                                   f"{list(network.names)}")
    return [network.index(name) for name in order]


def _check_searchable(options: LearningOptions) -> None:
    if options.structure == "fixed":
        raise ModelFormatError("structure 'fixed' keeps the configured arcs: there is no structure to search")


def learn_structure(network: AffordanceNetwork, codes: np.ndarray, options: LearningOptions,
                    progress: Progress = None, fixed: Mapping[str, Sequence[str]] | None = None):
    """K2 or MCMC (``options.structure``) on complete value codes (K, n), as the paper does on the MAP
    assignments of the hidden values (``CaseEvidence.map_values``). Returns (network with the arcs,
    StructureResult). ``fixed``: families not searched (``search``).

    ``progress`` (see ``core.progress``) hears of K2's nodes and of MCMC's steps (K2's first: MCMC starts from
    K2's structure), and may cancel.
    """
    _check_searchable(options)
    result = search(family_score(CaseCounts(codes, network.cards), options), network, options, progress, fixed)
    return network.with_structure(result.parents), result
