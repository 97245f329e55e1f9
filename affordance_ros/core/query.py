"""Fast queries: a plan per model and evidence pattern, pruned to what the query needs.

A planner asks the same kind of question again and again: the same query variables, evidence
on the same variables, only the values change. ``QueryPlan`` compiles once per (model, query,
evidence pattern) everything that depends only on those:

- the requisite part of the network by Bayes-ball (Shachter 1998): barren nodes and the
  nodes d-separated from the query by the evidence are dropped; hard evidence blocks paths,
  soft evidence on X acts as an observed virtual child of X. (When a CPT left out that way
  has zero entries, the evidence itself could be impossible, which must be reported: then
  only barren nodes are pruned, the whole ancestry of the query and the evidence is kept);
- a junction tree over what is left, triangulated with the query as one family so that one
  clique holds the whole query, rooted there;
- the product of the CPTs assigned to each clique, and how each evidence vector and each
  message broadcasts into its clique.

A call then multiplies the evidence into the cliques and collects toward the query's clique
only: a fixed number of numpy operations per clique, on tables that hold K cases along the
last axis (one case for a single query; chunks of cases for ``predict_batch``).
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Mapping, Sequence

import numpy as np

from .errors import EvidenceError
from .inference import _spanning_tree, _triangulate

_PLANS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MAX_PLANS = 256
_CHUNK_ELEMENTS = 1 << 16   # entries of the largest clique table times cases per chunk (stays in cache)


def requisite(parents: Sequence[Sequence[int]], query: Sequence[int], hard: Sequence[int],
              soft: Sequence[int]) -> tuple[set, set]:
    """Bayes-ball: (nodes whose CPTs the query needs, soft-evidence nodes whose likelihood it needs).

    ``parents[i]``: the parents of node i. Query nodes must not be in ``hard``.
    """
    n = len(parents)
    virtual = {i: n + k for k, i in enumerate(soft)}
    # Soft evidence on i is an observed virtual child of i (its "CPT" is the likelihood).
    parents = [*parents, *([i] for i in soft)]
    children = [[] for _ in parents]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    observed = set(hard) | set(virtual.values())
    top, bottom, visited = set(), set(), set()
    schedule = deque((q, True) for q in query)

    def up(j: int) -> None:  # j's CPT is needed: pass the ball to its parents
        if j not in top:
            top.add(j)
            schedule.extend((p, True) for p in parents[j])

    def down(j: int) -> None:  # pass the ball to j's children
        if j not in bottom:
            bottom.add(j)
            schedule.extend((c, False) for c in children[j])

    while schedule:
        j, from_child = schedule.popleft()
        visited.add(j)
        if j in observed:
            if not from_child:
                up(j)
        elif from_child:
            up(j)
            down(j)
        else:
            down(j)
    return {j for j in top if j < n}, {i for i, v in virtual.items() if v in visited}


def _ancestors(parents: Sequence[Sequence[int]], nodes: set) -> set:
    """``nodes`` and all their ancestors."""
    out, todo = set(nodes), list(nodes)
    while todo:
        for p in parents[todo.pop()]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return out


class QueryPlan:
    """p(query | evidence) for one model, query and evidence pattern, compiled once.

    ``hard``: variables whose evidence is one-hot in every case (a label); ``soft``: the other
    variables with evidence. Call it with {variable index: likelihoods (K, card)}.
    """

    def __init__(self, model, query: Sequence[int], hard: Sequence[int] = (), soft: Sequence[int] = ()):
        self.query = tuple(query)
        qset = set(self.query)
        soft = sorted(set(soft) | (set(hard) & qset))       # a query with hard evidence: treat it as soft
        hard = [h for h in hard if h not in qset]
        parents = [model.parent_indices(i) for i in range(len(model))]
        cpt_nodes, soft_needed = requisite(parents, self.query, hard, soft)
        evidence_ancestry = _ancestors(parents, set(hard) | set(soft))
        if any(np.any(model.variables[i].cpt == 0) for i in evidence_ancestry - cpt_nodes):
            # zero CPT entries outside the requisite part could make this evidence impossible, which
            # only the whole ancestry of the evidence can tell: barren-node pruning only
            cpt_nodes, soft_needed = evidence_ancestry | _ancestors(parents, qset), set(soft)
        self.pruned = len(model) - len(cpt_nodes)
        hard_set = set(hard)
        keep = set(cpt_nodes) | qset | {p for i in cpt_nodes for p in parents[i] if p in hard_set}
        self.evidence_vars = tuple(sorted((keep & hard_set) | soft_needed))
        self.variables = tuple(sorted(keep))
        local = {v: j for j, v in enumerate(self.variables)}
        cards = np.array([model.variables[v].card for v in self.variables])
        families = [tuple(sorted(local[u] for u in (*parents[i], i))) for i in sorted(cpt_nodes)]
        families.append(tuple(sorted(local[q] for q in self.query)))
        cliques = _triangulate(len(self.variables), families, cards)
        shapes = [tuple(int(cards[v]) for v in c) for c in cliques]
        sizes = [int(np.prod(s)) for s in shapes]
        tree_parent, _ = _spanning_tree(cliques, sizes)
        qlocal = {local[q] for q in self.query}
        root = min((c for c in range(len(cliques)) if qlocal <= set(cliques[c])), key=lambda c: sizes[c])
        self._compile(model, cliques, shapes, tree_parent, root, local, sorted(cpt_nodes), parents)
        self.max_clique = max(sizes)

    def _compile(self, model, cliques, shapes, tree_parent, root, local, cpt_nodes, parents) -> None:
        m = len(cliques)
        adjacent = [set() for _ in range(m)]
        for c, p in enumerate(tree_parent):
            if p is not None:
                adjacent[c].add(p)
                adjacent[p].add(c)
        parent = {root: None}
        order = [root]
        for c in order:                                      # breadth first from the query's clique
            for d in sorted(adjacent[c]):
                if d not in parent:
                    parent[d] = c
                    order.append(d)
        smallest = {}
        for v in range(len(self.variables)):
            smallest[v] = min((c for c in range(m) if v in cliques[c]), key=lambda c: np.prod(shapes[c]))
        phis = [np.ones((*shape, 1)) for shape in shapes]
        for i in cpt_nodes:
            family = [local[u] for u in (*parents[i], i)]
            home = min((c for c in range(m) if set(family) <= set(cliques[c])), key=lambda c: np.prod(shapes[c]))
            clique = cliques[home]
            perm = np.argsort(family)
            shape = tuple(int(shapes[home][a]) if v in family else 1 for a, v in enumerate(clique)) + (1,)
            phis[home] = phis[home] * np.transpose(model.variables[i].cpt, perm).reshape(shape)
        evidence_home = {smallest[local[v]]: True for v in self.evidence_vars}
        has_evidence = {}
        for c in reversed(order):                            # leaves first: does c's subtree hold evidence?
            has_evidence[c] = evidence_home.get(c, False) or any(
                has_evidence[d] for d in order if parent[d] == c)
        self._steps = []
        for c in reversed(order):
            clique = cliques[c]
            evidence = []
            for v in self.evidence_vars:
                lv = local[v]
                if smallest[lv] == c:
                    shape = tuple(shapes[c][a] if u == lv else 1 for a, u in enumerate(clique)) + (-1,)
                    evidence.append((v, shape))
            kids = [d for d in order if parent[d] == c and has_evidence[d]]
            if c == root:
                qpos = [clique.index(local[q]) for q in self.query]
                sum_axes = tuple(a for a in range(len(clique)) if a not in qpos)
                # after summing, the query axes are in clique order; permute them to the query's order
                kept = sorted(qpos)
                self._root = (c, sum_axes, tuple(kept.index(a) for a in qpos) + (len(qpos),))
                self._root_parts = (evidence, kids)
                continue
            p = parent[c]
            sep = [v for v in clique if v in cliques[p]]
            sum_axes = tuple(a for a, v in enumerate(clique) if v not in sep)
            into = tuple(shapes[p][a] if v in sep else 1 for a, v in enumerate(cliques[p])) + (-1,)
            if has_evidence[c]:
                self._steps.append((c, evidence, kids, sum_axes, into))
            else:
                # no evidence below c: its message depends on the CPTs only; fold it into the parent's table
                msg = phis[c].sum(axis=sum_axes) if sum_axes else phis[c]
                phis[p] = phis[p] * msg.reshape(into)
        self._phis = phis

    def __call__(self, likelihoods: Mapping[int, np.ndarray], n_cases: int = 1) -> np.ndarray:
        """p(query | evidence) (K, *query cards); ``likelihoods[v]`` (K, card) for every evidence variable."""
        msgs = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for c, evidence, kids, sum_axes, into in self._steps:
                table = self._product(c, evidence, kids, likelihoods, msgs)
                msg = table.sum(axis=sum_axes) if sum_axes else table
                total = msg.reshape(-1, msg.shape[-1]).sum(axis=0)
                msgs[c] = (msg / total).reshape(into)
            c, sum_axes, perm = self._root
            table = self._product(c, *self._root_parts, likelihoods, msgs)
            joint = table.sum(axis=sum_axes) if sum_axes else table
            joint = np.broadcast_to(joint, (*joint.shape[:-1], n_cases)).transpose(perm)
            total = joint.reshape(-1, n_cases).sum(axis=0)
            joint = joint / total
        if not np.all(total > 0):
            bad = np.flatnonzero(~(total > 0))
            raise EvidenceError(f"the evidence of case(s) {bad[:10].tolist()} has probability zero under the model")
        return np.moveaxis(joint, -1, 0)

    def _product(self, c, evidence, kids, likelihoods, msgs):
        table = self._phis[c]
        for v, shape in evidence:
            table = table * likelihoods[v].T.reshape(shape)
        for d in kids:
            table = table * msgs[d]
        return table


def plan(model, query: Sequence[int], hard: Sequence[int] = (), soft: Sequence[int] = ()) -> QueryPlan:
    """The cached ``QueryPlan`` of ``model`` for this query and evidence pattern."""
    key = (tuple(query), tuple(sorted(hard)), tuple(sorted(soft)))
    plans = _PLANS.get(model)
    if plans is None:
        plans = _PLANS[model] = {}
    found = plans.get(key)
    if found is None:
        if len(plans) >= _MAX_PLANS:
            plans.pop(next(iter(plans)))
        found = plans[key] = QueryPlan(model, *key)
    return found


def posterior(model, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
              hard: Sequence[int] = ()) -> np.ndarray:
    """p(query jointly | evidence) (K, *query cards) for K cases; ``likelihoods[v]`` (K, card) per
    evidence variable (``hard``: those that are one-hot in every case). Large K runs in chunks
    sized so that the largest clique table of a chunk stays in cache.
    """
    hard = [v for v in hard if v in likelihoods]
    soft = [v for v in likelihoods if v not in set(hard)]
    compiled = plan(model, query, hard, soft)
    n_cases = next(iter(likelihoods.values())).shape[0] if likelihoods else 1
    chunk = max(1, _CHUNK_ELEMENTS // compiled.max_clique)
    if n_cases <= chunk:
        return compiled(likelihoods, n_cases)
    out = np.empty((n_cases, *[model.variables[q].card for q in query]))
    for start in range(0, n_cases, chunk):
        rows = slice(start, min(start + chunk, n_cases))
        out[rows] = compiled({v: lik[rows] for v, lik in likelihoods.items()}, rows.stop - rows.start)
    return out


__all__ = ["QueryPlan", "plan", "posterior", "requisite"]
