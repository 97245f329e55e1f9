"""Fast queries: the model's junction tree calibrated once without evidence, collected per query.

A planner asks many quick questions whose evidence changes, often in which variables are
observed as well as in their values. ``QueryEngine`` compiles once per model what no query
changes: the junction tree of the model (``inference.JunctionTree``), its clique beliefs without
evidence p(C), and, for every clique and neighbour, the conditional table p(C | separator). Then

    p(all variables) = p(C_root) * prod over the other cliques of p(C | separator toward the root),

so the evidence of a query only has to be multiplied into cliques that hold it and collected along
the paths from them to a clique holding the query (any clique can be the root): every other subtree
sums to one and is skipped. ``TreePlan`` compiles these paths once per evidence pattern (the query,
which variables have hard and which soft evidence): each variable's evidence enters at the clique
holding it nearest to the root, and a large table (``SUM_AHEAD_ABOVE``) is summed, once, over the
axes that neither the evidence, nor a message, nor the query touches. A label (hard evidence) of a
single case on a variable of a large table is not multiplied in: every table on the paths that holds
it is sliced at its value, which shrinks the tables for the rest of the call. A joint query over
variables of different cliques keeps their axes in the messages until the root (variable
elimination along the same paths).

A call passes one message per clique on the paths: a few numpy operations each, on tables that hold
K cases along the last axis. A plan for one case compiles in less time than one pyAgrum query, the
steps of a clique are shared between the plans that use it the same way, and plans are cached per
model. A tiny network (``JOINT_ENTRIES``) answers a single query from its joint table instead
(``JointPlan``: the evidence multiplied in, one sum, nothing to compile).

Many cases (``predict_batch``) run in chunks. Their plan is made on the junction tree of the part of
the network the query needs (Bayes-ball, Shachter 1998: barren and d-separated nodes left out, hard
evidence blocking paths, soft evidence on X acting as an observed virtual child of X), which can have
much smaller cliques, and pays for itself over the cases; each case's labels are gathered from the
tables, and a large step is one ``einsum`` that sums variables out early.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import weakref
from collections import deque
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from .errors import ModelFormatError
from .evidence import Evidence
from .inference import JunctionTree
from .network import AffordanceNetwork

_ENGINES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MAX_PLANS = 256
_MAX_STEPS = 4096           # compiled steps kept for new plans to share (then forgotten, all at once)
CHUNK_ELEMENTS = 1 << 19   # entries of the largest table of a plan times the cases of a chunk (4 MB)
JOINT_ENTRIES = 1024      # a network with at most this many joint states is answered from its joint table
SUM_AHEAD_ABOVE = 512     # entries of a clique table above which it is summed ahead and sliced at labels
_TINY = 1e-280              # a total at the root below it: compute again, normalising every message
_ALL = slice(None)
# ndarray.sum and .min go through a Python wrapper that costs as much as summing a small table: the ufuncs' own
_SUM, _SMALLEST = np.add.reduce, np.minimum.reduce


def requisite(parents: Sequence[Sequence[int]], query: Sequence[int], hard: Sequence[int],
              soft: Sequence[int], children: Sequence[Sequence[int]] | None = None) -> tuple[set, set]:
    """Bayes-ball: (nodes whose CPTs the query needs, soft-evidence nodes whose likelihood it needs).

    ``parents[i]``: the parents of node i (``children``: the other way round, derived when not given).
    Query nodes must not be in ``hard``. Soft evidence on i acts as an observed virtual child of i: a ball
    passed down to i comes back up to it from that child.
    """
    if children is None:
        children = [[] for _ in parents]
        for i, ps in enumerate(parents):
            for p in ps:
                children[p].append(i)
    hard, soft = set(hard), set(soft)
    top, bottom, soft_used = set(), set(), set()
    schedule = deque((q, True) for q in query)
    while schedule:
        j, from_child = schedule.popleft()
        if j in hard:
            if from_child or j in top:
                continue
            top.add(j)                                   # j's CPT is needed: the ball goes to its parents
            schedule.extend((p, True) for p in parents[j])
            continue
        if from_child and j not in top:
            top.add(j)
            schedule.extend((p, True) for p in parents[j])
        if j not in bottom:                              # the ball goes down to j's children
            bottom.add(j)
            schedule.extend((c, False) for c in children[j])
            if j in soft:
                soft_used.add(j)
                schedule.append((j, True))
    return top, soft_used


def _ancestors(parents: Sequence[Sequence[int]], nodes: set) -> set:
    """``nodes`` and all their ancestors."""
    out, todo = set(nodes), list(nodes)
    while todo:
        for p in parents[todo.pop()]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return out


class _Step(NamedTuple):
    """One clique of a plan: its table without evidence (axes: the clique's variables it needs, the query
    variables its kids' messages carry, the cases), the labels it is sliced at, how each evidence vector and
    each kid's message broadcast into the sliced table, what it sums out, and how the result's axes move:
    toward the next clique, its separator's variables then the query variables it carries; at the root, the
    cases then the query in its order.
    """

    clique: int
    table: np.ndarray
    slots: tuple          # ((the slices before a label's axis, its variable) per label, the last axis first;
    #                       the axes a batch's gather indexes; where the cases' axis lands), or () without labels
    evidence: tuple       # (variable, shape)
    kids: tuple           # (clique, shape)
    sum_axes: tuple
    order: tuple | None   # a transpose of the summed table (None: none needed)
    carries: tuple        # the query variables its message carries (at the root: the answer's)
    size: int             # entries of its sliced table times its kids' carried axes, per case
    contraction: list | None   # for many cases: [table, operands' axes, einsum path (once known), result's axes]


class QueryEngine:
    """What every query of one model shares: its junction tree, the clique beliefs without evidence,
    the conditional tables p(clique | separator) per clique and neighbour, and the plans compiled so
    far.
    """

    def __init__(self, model):
        if not model.parameterised:
            raise ModelFormatError("the network has no learned parameters yet: learn it first")
        tree = model.engine
        n = len(model)
        prior = tree.calibrate([v.cpt for v in model.variables], Evidence.empty(n))
        self.beliefs = [np.ascontiguousarray(b[..., 0]) for b in prior.beliefs]
        self.cliques = tree.cliques
        self.var_home = tree.var_home
        self.holding = [{c for c, clique in enumerate(self.cliques) if i in clique}
                        for i in range(n)]
        self.in_large_table = {v for c, clique in enumerate(self.cliques)
                               if self.beliefs[c].size > SUM_AHEAD_ABOVE for v in clique}
        self.cards = [v.card for v in model.variables]
        self.variables = model.variables
        self.parents = [model.parent_indices(i) for i in range(n)]
        self.children = [[i for i in range(n) if j in self.parents[i]] for j in range(n)]
        self.has_zero = {i for i, v in enumerate(model.variables) if np.any(v.cpt == 0)}
        # a tiny network: its joint distribution (*cards, 1), how each variable's vector broadcasts
        # into it
        self.joint = _joint(model) if math.prod(self.cards) <= JOINT_ENTRIES else None
        self.unit_shapes = [(*(k if j == i else 1 for j in range(n)), -1)
                            for i, k in enumerate(self.cards)]
        self.neighbours = [[] for _ in self.cliques]
        self.separators = {}    # (clique, neighbour): the variables they share, ascending
        for c, p in enumerate(tree.parent):
            if p is not None:
                self.neighbours[c].append(p)
                self.neighbours[p].append(c)
                shared = tuple(v for v in self.cliques[c] if v in self.cliques[p])
                self.separators[c, p] = shared
                self.separators[p, c] = shared
        self.plans: dict = {}
        # (clique, toward which neighbour (None: the root), its variables kept): p(clique |
        # separator), summed onto those variables
        self._tables = {(c, d, self.cliques[c]): self._conditional(c, d)
                        for c, d in self.separators}
        self._tables.update({(c, None, clique): belief
                             for c, (clique, belief) in enumerate(zip(self.cliques, self.beliefs))})
        self._steps: dict = {}
        self._rooted_at: dict = {}   # per root: the tree rooted there (``rooted``), made on its first plan

    def plan(self, query: Sequence[int], hard: Sequence[int] = (), soft: Sequence[int] = (),
             one_case: bool = True) -> "QueryPlan":
        """The cached ``QueryPlan`` of this query and evidence pattern, for one case at a time (a
        tiny network answers from its joint table) or for many (the tree's small tables cost less
        per case than the joint).
        """
        key = (tuple(query), tuple(sorted(hard)), tuple(sorted(soft)), one_case)
        found = self.plans.get(key)
        if found is None:
            if len(self.plans) >= _MAX_PLANS:
                self.plans.pop(next(iter(self.plans)))
            if not one_case:
                found = self._pruned_plan(*key[:3])
            else:
                found = (TreePlan if self.joint is None else JointPlan)(self, *key[:3])
            self.plans[key] = found
        return found

    def _pruned_plan(self, query: tuple, hard: tuple, soft: tuple) -> "QueryPlan":
        """For many cases of one pattern: the plan on the junction tree of the part of the network
        the query needs (Bayes-ball; leaving barren and d-separated nodes out can shrink the cliques
        a lot), compiled per pattern, which pays for itself over the cases. The whole tree's plan
        when nothing is left out, or when a CPT left out has zero entries (the evidence could then
        be impossible for a reason only it tells).
        """
        hard_kept = [h for h in hard if h not in query]            # a query given by label: soft
        soft_kept = [*soft, *(h for h in hard if h in query)]
        cpt_nodes, soft_needed = requisite(self.parents, query, hard_kept, soft_kept, self.children)
        if len(cpt_nodes) == len(self.cards) or self.has_zero & (
                _ancestors(self.parents, {*hard_kept, *soft_kept}) - cpt_nodes):
            return TreePlan(self, query, hard, soft)
        hard_needed = [h for h in hard_kept
                       if h in cpt_nodes or any(c in cpt_nodes for c in self.children[h])]
        keep = sorted({*cpt_nodes, *query, *hard_needed})
        number = {v: j for j, v in enumerate(keep)}
        # the nodes kept for their label only get a uniform prior (a label overrides it)
        # (without the posterior's counts and draws: shaped like the whole CPT, not the one of a label kept)
        part = AffordanceNetwork([
            dataclasses.replace(self.variables[v], sensor=None, counts=None, draws=None, prior=None)
            if v in cpt_nodes else
            dataclasses.replace(self.variables[v], sensor=None, parents=(), counts=None, draws=None, prior=None,
                                cpt=np.full(self.cards[v], 1.0 / self.cards[v]))
            for v in keep])
        inner = TreePlan(QueryEngine(part), [number[q] for q in query],
                         [number[h] for h in hard_needed], [number[v] for v in soft_needed])
        return _Renumbered(inner, query, keep, {v: number[v] for v in (*hard_needed, *soft_needed)})

    def rooted(self, root: int) -> tuple[list, list, list, list]:
        """The tree rooted at ``root``: (each clique's neighbour toward the root; each variable's clique nearest
        to the root among those holding it on the way up from its home; each clique's path to the root, a bitset
        of cliques; the cliques leaves first, the root last: a breadth-first order from the root, reversed).
        """
        found = self._rooted_at.get(root)
        if found is None:
            found = self._rooted_at[root] = self._rooted(root)
        return found

    def _rooted(self, root: int) -> tuple[list, list, list, list]:
        toward = [None] * len(self.cliques)
        order, seen = [root], {root}
        for c in order:
            for d in self.neighbours[c]:
                if d not in seen:
                    seen.add(d)
                    toward[d] = c
                    order.append(d)
        path = [0] * len(order)
        for c in order:
            path[c] = 1 << c | (0 if toward[c] is None else path[toward[c]])
        entry = []
        for v, c in enumerate(self.var_home):
            while toward[c] is not None and toward[c] in self.holding[v]:
                c = toward[c]
            entry.append(c)
        return toward, entry, path, order[::-1]

    def table(self, c: int, toward: int | None, axes: tuple) -> np.ndarray:
        """Clique c's table summed onto ``axes`` (its variables, ascending): p(clique c | its
        separator with ``toward``) (0 where the separator has probability 0), p(clique c) at the
        root (``toward`` None).
        """
        key = (c, toward, axes)
        found = self._tables.get(key)
        if found is None:
            found = self.beliefs[c] if toward is None else self._tables[c, toward, self.cliques[c]]
            unused = tuple(a for a, v in enumerate(self.cliques[c]) if v not in axes)
            found = self._tables[key] = found.sum(axis=unused)
        return found

    def _conditional(self, c: int, toward: int) -> np.ndarray:
        """p(clique c | its separator with clique ``toward``), 0 where the separator has
        probability 0.
        """
        sep = self.separators[c, toward]
        belief = self.beliefs[c]
        outside = tuple(a for a, v in enumerate(self.cliques[c]) if v not in sep)
        margin = belief.sum(axis=outside, keepdims=True)
        return np.divide(belief, margin, out=np.zeros_like(belief), where=margin > 0)

    def step(self, c: int, toward: int | None, labels: tuple, evidence: tuple, kids: tuple,
             query) -> _Step:
        """Clique c's ``_Step`` toward ``toward`` (None: c is the root), sliced at the ``labels`` of
        its variables, with ``evidence`` multiplied in, messages from ``kids`` ((clique, the query
        variables its message carries)), keeping the variables of ``query`` (at the root: the query,
        in its order); compiled once, then shared by the plans that use the clique the same way.
        """
        key = (c, toward, labels, evidence, kids, query)
        found = self._steps.get(key)
        if found is None:
            if len(self._steps) >= _MAX_STEPS:
                self._steps.clear()
            found = self._steps[key] = _compiled_step(self, *key)
        return found


def _compiled_step(engine: QueryEngine, c: int, toward: int | None, labels: tuple, evidence: tuple,
                   kids: tuple, query) -> _Step:
    """Clique c's ``_Step`` (the arguments as ``QueryEngine.step``'s)."""
    separators = engine.separators
    up = separators[c, toward] if toward is not None else ()
    if labels:
        up = tuple(v for v in up if v not in labels)
    clique = engine.cliques[c]
    if engine.beliefs[c].size > SUM_AHEAD_ABOVE:   # a small table is summed by the step, not ahead
        needed = {*up, *labels, *evidence, *query}
        for d, _ in kids:
            needed.update(separators[d, c])
        clique = tuple(v for v in clique if v in needed)
    carried = ()
    for _, carries in kids:
        carried += carries
    table = engine.table(c, toward, clique)
    table = table.reshape(table.shape + (1,) * (len(carried) + 1))
    axes = (tuple(v for v in clique if v not in labels) if labels else clique) + carried
    kid_variables = [(d, (*separators[d, c], *carries)) for d, carries in kids]
    keep = {*up, *query, *carried}
    kept = [v for v in axes if v in keep]
    order, carries = _message_order(kept, up, query, toward is None)
    cards = engine.cards
    size = math.prod([cards[v] for v in axes])
    contraction = None
    if size > SUM_AHEAD_ABOVE and not labels and (evidence or kids):
        target = kept if order is None else [*up, *carries]
        contraction = _contraction(table, clique, axes, target, evidence, kid_variables)
    position = {v: a for a, v in enumerate(axes)}
    return _Step(c, table, _label_slots(clique, labels, table.ndim) if labels else (),
                 tuple((e, _shape_in(position, cards, (e,))) for e in evidence),
                 tuple((d, _shape_in(position, cards, variables)) for d, variables in kid_variables),
                 tuple(a for a, v in enumerate(axes) if v not in keep), order, carries, size,
                 contraction)


def _label_slots(clique: tuple, labels: tuple, ndim: int) -> tuple:
    """A step's ``slots``: where its table (``ndim`` axes) is sliced at its labels; () without."""
    # one case: slicing the last label's axis first leaves the axes before it where they are
    slots = tuple(((_ALL,) * a, v) for a, v in reversed(list(enumerate(clique))) if v in labels)
    if not labels:
        return slots
    # many cases: one gather of every label's axis (and the cases' placeholder) at once
    at = [a for a, v in enumerate(clique) if v in labels] + [ndim - 1]
    return (slots, tuple(at), at[0] if at == list(range(at[0], at[0] + len(at))) else 0)


def _shape_in(position: dict, cards: Sequence[int], variables: tuple) -> tuple:
    """How a factor over ``variables`` broadcasts into a table whose axes are at ``position`` (then the cases'); a
    variable that is not an axis (a label, sliced away on both sides) broadcasts.
    """
    shape = [1] * len(position) + [-1]
    for v in variables:
        if v in position:
            shape[position[v]] = cards[v]
    return tuple(shape)


def _message_order(kept: list, up: tuple, query, at_root: bool) -> tuple:
    """(the transpose of a step's summed table, None when none is needed; the query variables its
    message carries): the separator's variables ``up`` first, then the query's; at the root the
    cases, then the query.
    """
    if at_root:
        return (len(kept), *[kept.index(q) for q in query]), tuple(kept)
    if len(kept) == len(up):
        return None, ()
    target = [*up, *[v for v in kept if v not in up]]
    order = None if kept == target else (*[kept.index(v) for v in target], len(kept))
    return order, tuple(target[len(up):])


def _contraction(table: np.ndarray, clique: tuple, axes: tuple, target: list, evidence: tuple,
                 kid_variables: list) -> list:
    """A large step's one einsum for many cases, in an order that sums variables out early
    (``_contracted``): [its table, the operands' axes, the einsum path (found on the first call), the
    result's axes].
    """
    position = {v: a for a, v in enumerate(axes)}
    k = len(axes)
    operands = [list(range(len(clique)))]
    operands += [[position[e], k] for e in evidence]
    operands += [[*(position[v] for v in variables), k] for _, variables in kid_variables]
    result = [*(position[v] for v in target), k]
    return [table.reshape(table.shape[:len(clique)]), operands, None, result]


class QueryPlan(abc.ABC):
    """p(query | evidence) for one model, query and evidence pattern: ``TreePlan`` or, for a tiny network,
    ``JointPlan``. Call it with {variable index: likelihoods (K, card)}.
    """

    query: tuple
    max_table: int    # entries of its largest table, per case (chunks of a batch keep it in cache)

    def __call__(self, likelihoods: Mapping[int, np.ndarray], n_cases: int = 1) -> np.ndarray:
        """p(query | evidence) (K, *query cards); ``likelihoods[v]`` (K, card) for every evidence variable."""
        joint, total = self.evaluate(likelihoods, n_cases)
        if total is not None:
            check_totals(total)
        return joint

    @abc.abstractmethod
    def evaluate(self, likelihoods: Mapping[int, np.ndarray], n_cases: int = 1) -> tuple:
        """(p(query | evidence) (K, *query cards), NaN for a case whose evidence is impossible; the totals of
        a pass that normalised every message, 0 or NaN for those cases, or None when that pass was not needed).
        """


class TreePlan(QueryPlan):
    """A plan on the junction tree (the module docstring).

    ``hard``: variables given by label, their likelihoods one-hot (the plan slices the tables at the label,
    so it answers one case at a time); ``soft``: the other variables with evidence (any number of cases).
    """

    def __init__(self, engine: QueryEngine, query: Sequence[int], hard: Sequence[int] = (),
                 soft: Sequence[int] = ()):
        self.query = tuple(query)
        # a label is sliced at where a large table holds its variable; elsewhere (and on the query) it is
        # multiplied in like soft evidence, which lets more plans share their steps
        self.labels = tuple(v for v in hard if v not in self.query and v in engine.in_large_table)
        soft = (*soft, *(v for v in hard if v not in self.labels))
        home, holding = engine.var_home, engine.holding
        if len(self.query) == 1:
            shared, root = holding[self.query[0]], home[self.query[0]]     # (its smallest clique)
        else:
            shared = set.intersection(*(holding[q] for q in self.query))
            root = min(shared, key=lambda c: engine.beliefs[c].size) if shared else home[self.query[0]]
        toward, entry, path, upward = engine.rooted(root)
        # evidence (and a query variable the root lacks) enters at the clique holding its variable nearest to
        # the root (the path there all holds it); the cliques on the paths from there to the root are a bitset
        soft_at, active_bits = {}, path[root]
        for v in soft:
            c = entry[v]
            active_bits |= path[c]
            soft_at.setdefault(c, []).append(v)
        for v in (*self.labels, *(q for q in self.query if q not in soft)):
            active_bits |= path[entry[v]]
        order = [c for c in upward if active_bits >> c & 1]     # leaves first, the root last
        active = set(order)
        kids = {c: [] for c in order}
        for c in order[:-1]:
            kids[toward[c]].append(c)
        while len(kids[root]) == 1 and root not in soft_at and kids[root][0] in shared and all(
                kids[root][0] in holding[v] for v in self.labels if root in holding[v]):
            order.pop()       # the root only passes one kid's message on, and that kid holds the query: drop it
            active.discard(root)
            root = order[-1]
        labels_at = {}
        for v in self.labels:
            for c in holding[v] & active:
                labels_at.setdefault(c, []).append(v)
        kept = frozenset(self.query) if len(self.query) > 1 else frozenset()   # else the root's separators keep it
        steps = {}
        for c in order:
            steps[c] = engine.step(c, toward[c] if c != root else None,
                                   tuple(labels_at[c]) if c in labels_at else (),
                                   tuple(soft_at[c]) if c in soft_at else (),
                                   tuple([(d, steps[d].carries) for d in kids[c]]), self.query if c == root else kept)
        *self._passes, self._root = steps.values()
        self.cliques = tuple(steps)        # the cliques it visits, leaves first, its root last
        self.max_table = max([step.size for step in steps.values()])

    def evaluate(self, likelihoods: Mapping[int, np.ndarray], n_cases: int = 1) -> tuple:
        """``QueryPlan.evaluate``. Messages are left unnormalised: every factor is at most 1, so they only
        shrink, and the answer is exact unless a case's evidence is so improbable that its total at the root
        falls below ``_TINY``, where something on the way may have underflowed; then the cases are computed
        again, normalising every message, which also tells the impossible ones.
        """
        codes = ({v: int(likelihoods[v].argmax()) for v in self.labels} if n_cases == 1 else
                 {v: likelihoods[v].argmax(axis=1) for v in self.labels})
        table = self._collect(likelihoods, codes, False, n_cases)
        total = _totals(table)
        if _SMALLEST(total) >= _TINY:
            return _answer(table / total, n_cases, self._root.order), None
        with np.errstate(divide="ignore", invalid="ignore"):
            table = self._collect(likelihoods, codes, True, n_cases)
            total = _totals(table)
            return _answer(table / total, n_cases, self._root.order), total

    def _collect(self, likelihoods: Mapping[int, np.ndarray], codes: dict, normalise: bool,
                 n_cases: int) -> np.ndarray:
        """The root's table summed onto the query (unnormalised), the messages on the way normalised or not."""
        messages = {}
        for step in self._passes:
            if step.contraction is not None and n_cases > 1:
                table = _contracted(step, likelihoods, messages, n_cases)
            else:
                table = _summed_product(step, likelihoods, codes, messages)
                if step.order is not None:
                    table = table.transpose(step.order)
            messages[step.clique] = table / _totals(table) if normalise else table
        if self._root.contraction is not None and n_cases > 1:
            return _contracted(self._root, likelihoods, messages, n_cases)
        return _summed_product(self._root, likelihoods, codes, messages)


class JointPlan(QueryPlan):
    """A plan for a tiny network (at most ``JOINT_ENTRIES`` joint states): every evidence vector multiplied
    into the joint distribution, then one sum; nothing depends on the evidence pattern but the answer's axes.
    A case whose total falls below ``_TINY`` (see ``TreePlan.evaluate``) is answered by the tree's plan.
    """

    def __init__(self, engine: QueryEngine, query: Sequence[int], hard: Sequence[int] = (),
                 soft: Sequence[int] = ()):
        self.query = tuple(query)
        self._engine = engine
        self._pattern = (hard, soft)
        self._tree = None
        kept = sorted(set(self.query))
        self._sum_axes = tuple(a for a in range(len(engine.cards)) if a not in kept)
        self._order = (len(kept), *(kept.index(q) for q in self.query))
        self.max_table = engine.joint.size

    def evaluate(self, likelihoods: Mapping[int, np.ndarray], n_cases: int = 1) -> tuple:
        """``QueryPlan.evaluate``."""
        table = self._engine.joint
        for v, lik in likelihoods.items():
            table = table * lik.T.reshape(self._engine.unit_shapes[v])
        table = _SUM(table, axis=self._sum_axes)
        total = _totals(table)
        if _SMALLEST(total) >= _TINY:
            return _answer(table / total, n_cases, self._order), None
        if self._tree is None:
            self._tree = TreePlan(self._engine, self.query, *self._pattern)
        return self._tree.evaluate(likelihoods, n_cases)


def _totals(table: np.ndarray) -> np.ndarray:
    """The sum over all but the last (the cases') axis, (K,)."""
    return _SUM(table.reshape(-1, table.shape[-1]), axis=0)


class _Renumbered(QueryPlan):
    """A plan on a part of the network (``QueryEngine._pruned_plan``): the evidence it needs, renumbered."""

    def __init__(self, plan: QueryPlan, query: Sequence[int], kept: Sequence[int], numbers: dict):
        self.query = tuple(query)
        self.max_table = plan.max_table
        self.kept = tuple(kept)        # the variables of the part of the network it runs on
        self._plan = plan
        self._numbers = numbers

    def evaluate(self, likelihoods: Mapping[int, np.ndarray], n_cases: int = 1) -> tuple:
        """``QueryPlan.evaluate``."""
        return self._plan.evaluate({new: likelihoods[old] for old, new in self._numbers.items()}, n_cases)


def _answer(joint: np.ndarray, n_cases: int, order: tuple) -> np.ndarray:
    """A plan's normalised table (*query axes, K or 1) as the answer: (K, *query cards in the query's order)."""
    if joint.shape[-1] != n_cases:
        joint = np.broadcast_to(joint, (*joint.shape[:-1], n_cases))
    return joint.transpose(order)


def _sliced(step: _Step, codes: dict) -> np.ndarray:
    """A step's table at its labels: sliced (one case, ``codes`` ints), or gathered per case (``codes`` (K,)
    arrays: the table's label axes and its cases' placeholder give way to one cases' axis, moved last).
    """
    per_label, axes, lands = step.slots
    table = step.table
    first = codes[per_label[0][1]]
    if isinstance(first, int):
        for before, v in per_label:
            table = table[(*before, codes[v])]
        return table
    index = [_ALL] * table.ndim
    index[-1] = np.zeros_like(first)
    for a, (_, v) in zip(axes, reversed(per_label)):
        index[a] = codes[v]
    return np.moveaxis(table[tuple(index)], lands, -1)


def _summed_product(step: _Step, likelihoods: Mapping[int, np.ndarray], codes: dict, messages: dict) -> np.ndarray:
    """A step's table sliced at its labels, times its evidence and its kids' messages, summed over what it
    leaves out.
    """
    table = step.table
    if step.slots:
        table = _sliced(step, codes)
    for v, shape in step.evidence:
        table = table * likelihoods[v].T.reshape(shape)
    for d, shape in step.kids:
        table = table * messages.pop(d).reshape(shape)
    return _SUM(table, axis=step.sum_axes) if step.sum_axes else table


def _contracted(step: _Step, likelihoods: Mapping[int, np.ndarray], messages: dict, n_cases: int) -> np.ndarray:
    """``_summed_product`` of a large step for many cases, by one einsum whose order of contractions (greedy,
    found on the first call) sums variables out as early as it can; the result's axes in the order the
    message (or the answer) takes. Multiplying everything into the full table first would make a temporary of
    the table's size times the cases for every factor.
    """
    table, axes, path, result = step.contraction
    operands = [table, axes[0]]
    for (v, _), sub in zip(step.evidence, axes[1:]):
        operands += [likelihoods[v].T, sub]
    for (d, _), sub in zip(step.kids, axes[1 + len(step.evidence):]):
        message = messages.pop(d)
        operands += [np.broadcast_to(message, (*message.shape[:-1], n_cases)), sub]
    operands.append(result)
    if path is None:
        path = step.contraction[2] = np.einsum_path(*operands, optimize="greedy")[0]
    return np.einsum(*operands, optimize=path)


def _joint(model) -> np.ndarray:
    """p(all variables) (*cards, 1): the product of the CPTs."""
    n = len(model)
    joint = np.ones((1,) * n)
    for i, var in enumerate(model.variables):
        axes = [*model.parent_indices(i), i]
        joint = joint * np.transpose(var.cpt, np.argsort(axes)).reshape(
            [var.cpt.shape[axes.index(a)] if a in axes else 1 for a in range(n)])
    return joint[..., None]


def engine(model) -> QueryEngine:
    """The ``QueryEngine`` of ``model``, compiled on its first query."""
    found = _ENGINES.get(model)
    if found is None:
        found = _ENGINES[model] = QueryEngine(model)
    return found


def plan(model, query: Sequence[int], hard: Sequence[int] = (), soft: Sequence[int] = (),
         one_case: bool = True) -> QueryPlan:
    """The cached ``QueryPlan`` of ``model`` for this query and evidence pattern (``QueryEngine.plan``)."""
    return engine(model).plan(query, hard, soft, one_case)


def posterior(model, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
              hard: Sequence[int] = ()) -> np.ndarray:
    """p(query jointly | evidence) (K, *query cards) for K cases; ``likelihoods[v]`` (K, card) per
    evidence variable (``hard``: those that are one-hot in every case, which one case is sliced at).
    EvidenceError naming the cases whose evidence is impossible.
    """
    n_cases = next(iter(likelihoods.values())).shape[0] if likelihoods else 1
    return posterior_in_chunks(model, query, n_cases, [(slice(0, n_cases), likelihoods, hard)])


def posterior_in_chunks(model, query: Sequence[int], n_cases: int, chunks) -> np.ndarray:
    """``posterior`` of ``n_cases`` cases whose evidence comes in ``chunks`` of consecutive cases: (their
    rows, a slice; their likelihoods; hard). Each chunk runs in parts of at most ``CHUNK_ELEMENTS`` entries
    of its plan's largest table; EvidenceError names the impossible cases by their row.
    """
    out = totals = None
    for rows, likelihoods, hard in chunks:
        n = rows.stop - rows.start
        hard = [v for v in hard if v in likelihoods]
        compiled = plan(model, query, hard, [v for v in likelihoods if v not in hard], n == 1)
        part = max(1, CHUNK_ELEMENTS // compiled.max_table)
        if n == n_cases <= part:      # one call (one case: no copy, no checks beyond the plan's own)
            return compiled(likelihoods, n)
        if out is None:
            out = np.empty((n_cases, *[model.variables[q].card for q in query]))
        for start in range(0, n, part):
            stop = min(start + part, n)
            joint, total = compiled.evaluate({v: lik[start:stop] for v, lik in likelihoods.items()}, stop - start)
            out[rows.start + start:rows.start + stop] = joint
            if total is not None:
                totals = np.ones(n_cases) if totals is None else totals
                totals[rows.start + start:rows.start + stop] = total
    if totals is not None:
        check_totals(totals)
    return out


def check_totals(totals: np.ndarray) -> None:
    """EvidenceError naming the cases whose total of a normalised pass (``QueryPlan.evaluate``) is 0 or NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        JunctionTree.check_possible(np.log(totals))


__all__ = ["JointPlan", "QueryEngine", "QueryPlan", "TreePlan", "check_totals", "engine", "plan", "posterior",
           "posterior_in_chunks", "requisite"]
