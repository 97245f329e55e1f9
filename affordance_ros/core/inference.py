"""Exact inference by a junction tree, vectorised over many evidence cases at once.

The tree is compiled once from the structure (moralise, triangulate by greedy
min-fill, maximum-spanning-tree over the cliques). Every clique potential is an
array (*clique cards, K) holding all K cases, so one collect/distribute pass
answers all of them; its cost grows with the clique sizes (the treewidth), not
exponentially with the number of variables. The case axis is the last one: every
sum and product then runs over long contiguous rows, which is several times faster
in numpy than small trailing axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import EvidenceError
from .evidence import Evidence

_MAX_JOINT_STATES = 1 << 22
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"


@dataclass
class Calibration:
    """Clique beliefs p(clique | evidence), each (*clique cards, K); separator posteriors
    (*separator cards, K) by child clique; the log-likelihood of each case (K,).
    """

    beliefs: list
    separators: dict
    log_likelihood: np.ndarray


class JunctionTree:
    """Compiled from the network's structure; CPT values are passed to each call.

    The tree's two passes are the module's ``_collect`` and ``_propagate``.
    """

    def __init__(self, network):
        self.network = network
        self.cards = np.array(network.cards)
        n = len(network)
        self.parents = [network.parent_indices(i) for i in range(n)]
        self.families = [tuple(sorted((*self.parents[i], i))) for i in range(n)]
        self.cliques = _triangulate(n, self.families, self.cards)
        sizes = [int(np.prod([self.cards[v] for v in c])) for c in self.cliques]
        self.parent, self.order = _spanning_tree(self.cliques, sizes)
        self.root = self.order[0]
        self._compile()

    def _compile(self) -> None:
        cliques, cards = self.cliques, self.cards
        n = len(self.cards)
        self.shapes = [tuple(int(cards[v]) for v in c) for c in cliques]
        self.home = [min((c for c in range(len(cliques))
                          if set(self.families[i]) <= set(cliques[c])),
                         key=lambda c: np.prod(self.shapes[c])) for i in range(n)]
        self.var_home = [min((c for c in range(len(cliques)) if i in cliques[c]),
                             key=lambda c: np.prod(self.shapes[c])) for i in range(n)]
        # Per variable: how its CPT (axes: parents in declared order, then itself) and
        # its likelihood (card, K) broadcast into its home clique (axes: clique vars, cases).
        self.cpt_perm = []
        self.cpt_shape = []
        self.lik_shape = []
        for i in range(n):
            axes = [*self.parents[i], i]
            self.cpt_perm.append(tuple(np.argsort(axes)))
            clique = cliques[self.home[i]]
            self.cpt_shape.append(tuple(int(cards[v]) if v in axes else 1 for v in clique) + (1,))
            self.lik_shape.append(tuple(int(cards[v]) if v == i else 1 for v in clique) + (-1,))
        self.assigned = [[i for i in range(n) if self.home[i] == c] for c in range(len(cliques))]
        # Per non-root clique c with parent p: the separator, the axes to sum out of c (and
        # of p) to reach it, and how a separator array broadcasts into c (and into p).
        self.sep_axes_c = {}
        self.sep_axes_p = {}
        self.sep_in_c = {}
        self.sep_in_p = {}
        self.separator = {}
        for c in self.order[1:]:
            p = self.parent[c]
            sep = tuple(v for v in cliques[c] if v in cliques[p])
            self.separator[c] = sep
            self.sep_axes_c[c] = tuple(j for j, v in enumerate(cliques[c]) if v not in sep)
            self.sep_axes_p[c] = tuple(j for j, v in enumerate(cliques[p]) if v not in sep)
            self.sep_in_c[c] = tuple(int(cards[v]) if v in sep else 1 for v in cliques[c]) + (-1,)
            self.sep_in_p[c] = tuple(int(cards[v]) if v in sep else 1 for v in cliques[p]) + (-1,)
        self.children = {c: [d for d in self.order if self.parent[d] == c] for c in self.order}
        self.collect_order = list(reversed(self.order))
        self.children_by_separator = {c: sorted(kids, key=lambda d: -len(self.separator[d]))
                                      for c, kids in self.children.items()}

    # ------------------------------------------------------------ potentials
    def clique_tables(self, cpts: Sequence[np.ndarray], per_case: bool = False) -> list:
        """Product of the CPTs assigned to each clique, (*clique cards, 1); ``per_case``: each case
        with CPTs of its own, ``cpts[i]`` (K, *CPT shape), the tables (*clique cards, K).
        """
        tables = []
        for c, shape in enumerate(self.shapes):
            table = np.ones((*shape, 1))
            for i in self.assigned[c]:
                if per_case:
                    cpt = np.transpose(cpts[i], (*(1 + a for a in self.cpt_perm[i]), 0))
                    table = table * cpt.reshape((*self.cpt_shape[i][:-1], -1))
                else:
                    cpt = np.transpose(cpts[i], self.cpt_perm[i])
                    table = table * cpt.reshape(self.cpt_shape[i])
            tables.append(table)
        return tables

    def evidence_tables(self, evidence: Evidence) -> list:
        """Product of the likelihoods assigned to each clique, broadcastable to (*cards, K), or
        None.
        """
        tables = []
        for c in range(len(self.cliques)):
            table = None
            for i in self.assigned[c]:
                lik = evidence.likelihoods[i]
                if lik is not None:
                    lik = np.ascontiguousarray(lik.T).reshape(self.lik_shape[i])
                    table = lik if table is None else table * lik
            tables.append(table)
        return tables

    def calibrate(self, cpts: Sequence[np.ndarray], evidence: Evidence,
                  per_case: bool = False) -> Calibration:
        """p(clique | evidence) for every clique and case, each case's log-likelihood; ``per_case``:
        ``clique_tables``'.
        """
        psi, rho, sep_post, log_lik = _propagate(self, self.clique_tables(cpts, per_case),
                                                 self.evidence_tables(evidence), evidence.n_cases)
        beliefs = [np.broadcast_to(psi[c] * rho[c], (*self.shapes[c], evidence.n_cases))
                   for c in range(len(self.cliques))]
        return Calibration(beliefs, sep_post, log_lik + evidence.log_scale)

    @staticmethod
    def check_possible(log_lik: np.ndarray) -> None:
        """EvidenceError naming the cases whose log-likelihood ``log_lik`` (K,) is not finite
        (probability zero).
        """
        if not np.all(np.isfinite(log_lik)):
            bad = np.flatnonzero(~np.isfinite(log_lik))
            raise EvidenceError(
                f"the evidence of case(s) {bad[:10].tolist()} has probability zero under the model")

    # ------------------------------------------------------------- answers
    def log_likelihood(self, cpts, evidence: Evidence) -> np.ndarray:
        """Log p(evidence | CPTs) of each case (K,), by the collect pass alone."""
        log_lik = _collect(self, self.clique_tables(cpts), self.evidence_tables(evidence),
                           evidence.n_cases)[3]
        return log_lik + evidence.log_scale

    def estep(self, evidence: Evidence, chunk_size: int = 512,
              readings=None) -> JunctionTreeEStep:
        """An E-step over fixed evidence, its likelihood tables prepared once for all iterations."""
        return JunctionTreeEStep(self, evidence, chunk_size, readings)

    def expected_counts(self, cpts, evidence: Evidence, chunk_size: int = 512):
        """Sum over cases of p(family | evidence), each shaped like its CPT; the total
        log-likelihood.
        """
        return self.estep(evidence, chunk_size)(cpts)

    def marginals(self, cal: Calibration) -> list:
        """p(variable | evidence) for every variable, each (K, card)."""
        out = []
        for i, c in enumerate(self.var_home):
            axes = tuple(j for j, v in enumerate(self.cliques[c]) if v != i)
            out.append(cal.beliefs[c].sum(axis=axes).T)
        return out


# ---------------------------------------------------------------- passes
def _collect(tree: JunctionTree, phis: list, ev_tables: list, n_cases: int):
    """Leaves to root: psi[c] is the clique's potential times its children's normalised
    messages. Returns (psi, messages, message totals, log-likelihood per case, the root's
    1/total, and the separator posteriors the root's pass gave for free).
    """
    psi, msgs, totals, sep_post = {}, {}, {}, {}
    log_lik = np.zeros(n_cases)
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in tree.collect_order:
            factors = [msgs[d].reshape(tree.sep_in_p[d]) for d in tree.children[c]]
            if ev_tables[c] is not None:
                factors.append(ev_tables[c])
            factors.sort(key=np.size)
            table = phis[c]
            if factors:
                table = factors[0]
                for f in factors[1:]:
                    table = table * f
                if len(factors) > 1 and table.shape[:-1] == phis[c].shape[:-1]:
                    table *= phis[c]
                else:
                    table = table * phis[c]
            psi[c] = table
            if c == tree.root:
                # The root's largest child separator sum also gives the per-case total.
                first = tree.children_by_separator[c][:1]
                sums = {d: table.sum(axis=tree.sep_axes_p[d]) for d in first}
                some = sums[first[0]] if first else table
                total = some.reshape(-1, some.shape[-1]).sum(axis=0)
                root_rho = (1.0 / total).reshape((1,) * (table.ndim - 1) + (-1,))
                sep_post.update({d: s / total for d, s in sums.items()})
            else:
                msg = table.sum(axis=tree.sep_axes_c[c])
                total = msg.reshape(-1, msg.shape[-1]).sum(axis=0)
                msgs[c] = msg / total
                totals[c] = total
            log_lik += np.log(total)
    tree.check_possible(log_lik)
    return psi, msgs, totals, log_lik, root_rho, sep_post


def _propagate(tree: JunctionTree, phis: list, ev_tables: list, n_cases: int):
    """Collect then distribute, keeping beliefs factored as psi * rho: rho[c] (over the
    separator with its parent) scales psi[c] to p(clique | evidence). Beliefs are never
    formed unless asked for, which saves full passes over the largest arrays.
    """
    psi, msgs, totals, log_lik, root_rho, sep_post = _collect(tree, phis, ev_tables, n_cases)
    rho = {tree.root: root_rho}
    for c in tree.order:
        for d in tree.children_by_separator[c]:
            if d not in sep_post:
                sep_post[d] = _separator_posterior(tree, c, d, psi, rho, sep_post)
            denom = msgs[d] * totals[d]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(denom > 0, sep_post[d] / denom, 0.0)
            rho[d] = ratio.reshape(tree.sep_in_c[d])
    return psi, rho, sep_post, log_lik


def _separator_posterior(tree: JunctionTree, c: int, d: int, psi, rho, sep_post) -> np.ndarray:
    """p(separator of child d | evidence), from a larger separator of a sibling if one covers
    it.
    """
    sep = set(tree.separator[d])
    for e in tree.children_by_separator[c]:
        if e == d:
            break
        if sep <= set(tree.separator[e]):
            axes = tuple(j for j, v in enumerate(tree.separator[e]) if v not in sep)
            return sep_post[e].sum(axis=axes)
    return _weighted_sum(psi[c], rho[c], tree.sep_axes_p[d], keep_batch=True)


class JunctionTreeEStep:
    """Expected family counts for many CPT settings over the same cases (an
    ``estep.EStepBackend``), by the junction tree's two passes over ``chunk_size`` cases at a time.

    With ``readings`` ({variable index: readings (K,), NaN where missing}) each call also leaves in
    ``moments`` the posterior-weighted moments of those readings per value, (3, card): sum w,
    sum w*y, sum w*y^2, for re-estimating the sensor models (``core.em_sensors``). A 2-D entry
    (K, m) is taken as per-case features already (e.g. [1, y, y y^T] of a vector sensor): moments
    (m, card).
    """

    def __init__(self, tree: JunctionTree, evidence: Evidence, chunk_size: int = 512,
                 readings=None):
        self.tree = tree
        self.n_cases = evidence.n_cases
        self.chunk_size = chunk_size
        self.moments = {}
        rows = [slice(start, start + chunk_size)
                for start in range(0, evidence.n_cases, chunk_size)]
        self.powers = [{i: _reading_powers(x[r]) if x.ndim == 1 else x[r]
                        for i, x in (readings or {}).items()} for r in rows]
        self.log_scale = 0.0
        self.chunks = []
        self.use_evidence(evidence)

    def use_evidence(self, evidence: Evidence) -> None:
        """Hold ``evidence``: the same cases' (e.g. under re-estimated sensor models)."""
        self.log_scale = float(evidence.log_scale.sum())
        self.chunks = []
        for start, powers in zip(range(0, evidence.n_cases, self.chunk_size), self.powers):
            part = evidence.take(slice(start, start + self.chunk_size))
            self.chunks.append((part.n_cases, self.tree.evidence_tables(part), powers))

    def log_likelihood(self, cpts: Sequence[np.ndarray]) -> float:
        """Total log p(evidence | CPTs), by the collect pass alone."""
        phis = self.tree.clique_tables(cpts)
        return self.log_scale + sum(float(_collect(self.tree, phis, ev, n)[3].sum())
                                    for n, ev, _ in self._chunks())

    def _chunks(self):
        return self.chunks

    def __call__(self, cpts: Sequence[np.ndarray]):
        """Expected family counts (shaped like the CPTs) and the total log-likelihood."""
        tree = self.tree
        phis = tree.clique_tables(cpts)
        clique_counts = [np.zeros(shape) for shape in tree.shapes]
        moments = {}
        total_ll = self.log_scale
        for n_cases, ev_tables, powers in self._chunks():
            psi, rho, _, log_lik = _propagate(tree, phis, ev_tables, n_cases)
            total_ll += float(log_lik.sum())
            for c in range(len(tree.cliques)):
                clique_counts[c] += _weighted_sum(psi[c], rho[c], (), keep_batch=False)
            for i, power in powers.items():
                c = tree.var_home[i]
                others = tuple(j for j, v in enumerate(tree.cliques[c]) if v != i)
                posterior = _weighted_sum(psi[c], rho[c], others, keep_batch=True)   # (card, K)
                moments[i] = moments.get(i, 0.0) + posterior @ power                 # (card, 3)
        self.moments = {i: m.T for i, m in moments.items()}
        counts = [self.family_from_clique(i, clique_counts[tree.home[i]])
                  for i in range(len(cpts))]
        return counts, total_ll

    def family_from_clique(self, i: int, table: np.ndarray) -> np.ndarray:
        """Variable i's family table (axes as in its CPT) from its home clique's table."""
        tree = self.tree
        clique = tree.cliques[tree.home[i]]
        family = tree.families[i]
        fam_table = table.sum(axis=tuple(j for j, v in enumerate(clique) if v not in family))
        # fam_table axes are the family in ascending variable order; CPT order is parents then self.
        return np.transpose(fam_table, np.argsort(tree.cpt_perm[i]))


class StreamingEStep(JunctionTreeEStep):
    """A ``JunctionTreeEStep`` that holds no evidence tables: each call asks ``evidence_chunks()``
    for the evidence again, chunk by chunk (e.g. computed from the readings of a CaseSet), so that
    memory is bounded by a chunk, not by the number of cases. Costs the evidence computation in
    every iteration.
    """

    def __init__(self, tree: JunctionTree, evidence_chunks, n_cases: int, chunk_size: int = 512):
        self.tree = tree
        self.n_cases = n_cases
        self.chunk_size = chunk_size
        self.moments = {}
        self._evidence_chunks = evidence_chunks
        self.log_scale = 0.0   # added per chunk instead, into _pending_scale during a pass
        self._pending_scale = 0.0

    def _chunks(self):
        for evidence in self._evidence_chunks():
            scale = float(evidence.log_scale.sum())
            for start in range(0, evidence.n_cases, self.chunk_size):
                part = evidence.take(slice(start, start + self.chunk_size))
                yield part.n_cases, self.tree.evidence_tables(part), {}
            self._pending_scale += scale

    def log_likelihood(self, cpts: Sequence[np.ndarray]) -> float:
        """Total log p(evidence | CPTs), by the collect pass alone."""
        self._pending_scale = 0.0
        total = super().log_likelihood(cpts)
        return total + self._pending_scale

    def __call__(self, cpts: Sequence[np.ndarray]):
        """(expected family counts shaped like the CPTs, total log-likelihood)."""
        self._pending_scale = 0.0
        counts, total = super().__call__(cpts)
        return counts, total + self._pending_scale


def collected(tree: JunctionTree, cpts: Sequence[np.ndarray], evidence: Evidence,
              per_case: bool = False, evidence_tables: list | None = None) -> list:
    """Each clique's table after ``tree``'s collect pass alone, (*clique cards, K) or broadcastable:
    p(the clique's variables outside its separator, the evidence below | the separator), up to a
    factor per case (at the root p(root clique, evidence)): what sampling from the root down needs.
    ``per_case`` as for ``calibrate``; ``evidence_tables``: ``tree.evidence_tables(evidence)``, when the caller
    keeps them (a sampler that sweeps the same cases many times).
    """
    tables = tree.evidence_tables(evidence) if evidence_tables is None else evidence_tables
    psi = _collect(tree, tree.clique_tables(cpts, per_case), tables, evidence.n_cases)[0]
    return [psi[c] for c in range(len(tree.cliques))]


def joint_posterior(tree: JunctionTree, cal: Calibration, query: Sequence[int]) -> np.ndarray:
    """p(query variables jointly | evidence), (K, *cards in query order).

    Within one clique: marginalise its belief. Otherwise eliminate along the smallest
    subtree covering the query, using p(subtree) = prod beliefs / prod separators.
    """
    query = list(query)
    if int(np.prod([tree.cards[q] for q in query])) > _MAX_JOINT_STATES:
        raise EvidenceError(f"the joint of {len(query)} query variables has too many states; "
                            "query fewer variables at once")
    qset = set(query)
    inside = [c for c in range(len(tree.cliques)) if qset <= set(tree.cliques[c])]
    if inside:
        c = min(inside, key=lambda c: np.prod(tree.shapes[c]))
        return np.moveaxis(_contract([(cal.beliefs[c], tree.cliques[c])], query), -1, 0)
    covering = _covering_subtree(tree, {tree.var_home[q] for q in query})
    top = min(covering, key=tree.order.index)
    messages = {}
    for c in sorted(covering, key=tree.order.index, reverse=True):
        factors = [(cal.beliefs[c], tree.cliques[c])]
        factors += [messages.pop(d) for d in tree.children[c] if d in covering]
        if c == top:
            return np.moveaxis(_contract(factors, query), -1, 0)
        conditional = np.divide(cal.beliefs[c], cal.separators[c].reshape(tree.sep_in_c[c]),
                                out=np.zeros_like(cal.beliefs[c]),
                                where=cal.separators[c].reshape(tree.sep_in_c[c]) > 0)
        factors[0] = (conditional, tree.cliques[c])
        keep = sorted(set(tree.separator[c]) | (qset & {v for _, vs in factors for v in vs}))
        messages[c] = (_contract(factors, keep), tuple(keep))
    raise AssertionError("unreachable: the covering subtree has a top clique")


def _covering_subtree(tree: JunctionTree, homes: set) -> set:
    """The smallest subtree of cliques that connects ``homes``."""
    subtree = set()
    for c in homes:
        while c is not None and c not in subtree:
            subtree.add(c)
            c = tree.parent[c]
    top = tree.root
    while top not in homes:
        kids = [d for d in tree.children[top] if d in subtree]
        if len(kids) != 1:
            break
        subtree.discard(top)
        top = kids[0]
    return subtree


def _reading_powers(x: np.ndarray) -> np.ndarray:
    """(K, 3): [1, y, y^2] for present readings, zeros where the reading is missing."""
    present = ~np.isnan(x)
    y = np.where(present, x, 0.0)
    return np.stack([present.astype(float), y, y * y], axis=1)


def _weighted_sum(table: np.ndarray, weight: np.ndarray, sum_axes: tuple,
                  keep_batch: bool) -> np.ndarray:
    """Sum of table * weight (both broadcastable to (*cards, K)) over ``sum_axes``, and over the
    cases unless ``keep_batch``; one fused pass (BLAS when the weight is per case only).
    """
    n = max(table.shape[-1], weight.shape[-1])
    ndim = table.ndim
    table = np.broadcast_to(table, (*table.shape[:-1], n))
    w_axes = [a for a in range(ndim - 1) if weight.shape[a] != 1]
    if not w_axes and not sum_axes and not keep_batch and weight.shape[-1] == n:
        return (table.reshape(-1, n) @ weight.reshape(n)).reshape(table.shape[:-1])
    out = [a for a in range(ndim) if a not in sum_axes and (keep_batch or a != ndim - 1)]
    w = np.broadcast_to(weight.reshape([weight.shape[a] for a in w_axes] + [weight.shape[-1]]),
                        (*[weight.shape[a] for a in w_axes], n))
    return np.einsum(table, list(range(ndim)), w, w_axes + [ndim - 1], out)


def _contract(factors, keep: Sequence[int]) -> np.ndarray:
    """Sum-product of batched factors [(array (*cards, K), variable ids)] onto ``keep``."""
    ids = sorted({v for _, vs in factors for v in vs})
    if len(ids) > len(_LETTERS) - 1:
        raise EvidenceError("too many variables in one inference step for this query")
    letter = {v: _LETTERS[j] for j, v in enumerate(ids)}
    spec = ",".join("".join(letter[v] for v in vs) + "Z" for _, vs in factors)
    spec += "->" + "".join(letter[v] for v in keep) + "Z"
    return np.einsum(spec, *[a for a, _ in factors], optimize=len(factors) > 2)


def _triangulate(n: int, families, cards) -> list[tuple[int, ...]]:
    """Greedy min-fill elimination (ties: smallest clique weight); the maximal cliques, sorted."""
    adj = {i: set() for i in range(n)}
    for fam in families:
        for a in fam:
            adj[a].update(v for v in fam if v != a)
    remaining = set(range(n))
    cliques = []
    log_cards = np.log(np.asarray(cards, dtype=float))
    while remaining:
        def cost(v):
            nb = adj[v]
            fill = sum(1 for a in nb for b in nb if a < b and b not in adj[a])
            return fill, log_cards[v] + sum(log_cards[u] for u in nb), v
        v = min(remaining, key=cost)
        clique = frozenset(adj[v] | {v})
        if not any(clique <= c for c in cliques):
            cliques.append(clique)
        for a in adj[v]:
            adj[a].update(adj[v] - {a})
            adj[a].discard(v)
        del adj[v]
        remaining.discard(v)
    return [tuple(sorted(c)) for c in cliques]


def _spanning_tree(cliques, sizes) -> tuple[list, list]:
    """Maximum-weight spanning tree (weight: separator size) by Prim from the largest clique
    (the root, so that the largest table is never rescaled); parent array and an order in
    which every clique comes after its parent.

    Disconnected parts of the network join with empty separators.
    """
    m = len(cliques)
    sets = [set(c) for c in cliques]
    parent = [None] * m
    in_tree = [False] * m
    best = [-1] * m
    link = [None] * m
    order = []
    best[max(range(m), key=lambda j: (sizes[j], -j))] = 0
    for _ in range(m):
        c = max((j for j in range(m) if not in_tree[j]), key=lambda j: best[j])
        in_tree[c] = True
        parent[c] = link[c]
        order.append(c)
        for j in range(m):
            if not in_tree[j]:
                w = len(sets[c] & sets[j])
                if w > best[j]:
                    best[j], link[j] = w, c
    return parent, order
