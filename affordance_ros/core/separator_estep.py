"""EM's fastest E-step: the per-case work on the separators' variables (``SeparatorEStep``).

While EM runs only the CPTs change, and each clique's evidence (the product of the likelihoods
assigned to it, per case) stays the same. A clique's variables split into those it shares with a
neighbouring clique (U: the union of its separators) and the rest (R). Laid out once as
(U, R, cases), a clique's evidence is read twice per E-step, each time by one matrix product:
G(u, k) = sum_r phi(u, r) E(u, r, k) in the collect pass, and sum_k E(u, r, k) W(u, k) for the
expected counts; all other per-case work runs on (U, cases) tables. Neighbouring cliques whose
separator is large next to what they hold apart are merged first (_CoarseTree), so that most of
the per-case work is in those matrix products.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .evidence import Evidence
from .inference import JunctionTree

MAX_ENTRIES = 1 << 24   # cases x sum of clique sizes above which the layout is not held (see fits)
SEPARATOR_WEIGHT = 5    # see _CoarseTree


class _CliqueLayout:
    """How one clique's tables are laid out as (U, R) and how separator tables broadcast into U."""

    def __init__(self, tree: _CoarseTree, c: int):
        clique, shape = tree.cliques[c], tree.shapes[c]
        kids = tree.children[c]
        shared = {v for d in kids for v in tree.separator[d]} | set(tree.separator.get(c, ()))
        u_axes = [j for j, v in enumerate(clique) if v in shared]
        self.perm = u_axes + [j for j, v in enumerate(clique) if v not in shared]
        self.inverse = tuple(np.argsort(self.perm))
        self.u_vars = [clique[j] for j in u_axes]
        self.u_shape = tuple(shape[j] for j in u_axes)
        self.shape = shape
        self.assigned = tree.assigned[c]
        self.ordered_vars = [clique[j] for j in self.perm]
        self.ordered_shape = tuple(shape[j] for j in self.perm)
        self.n_u = int(np.prod(self.u_shape))
        self.n_r = int(np.prod(shape)) // self.n_u
        # a child's message (over its separator, variables ascending) broadcast into U, and back
        self.child_shape = {d: self.broadcast(tree.separator[d]) for d in kids}
        self.child_axes = {d: self.other_axes(tree.separator[d]) for d in kids}
        if c in tree.separator:
            self.parent_shape = self.broadcast(tree.separator[c])
            self.parent_axes = self.other_axes(tree.separator[c])

    def broadcast(self, variables) -> tuple:
        return tuple(card if v in variables else 1
                     for v, card in zip(self.u_vars, self.u_shape)) + (-1,)

    def other_axes(self, variables) -> tuple:
        return tuple(j for j, v in enumerate(self.u_vars) if v not in variables)

    def evidence(self, likelihoods: Sequence[np.ndarray | None], n_cases: int) -> np.ndarray | None:
        """The product of the clique's likelihoods (each (K, card)) as a contiguous (U, R, K), or
        None.
        """
        factors = []
        for i in self.assigned:
            if likelihoods[i] is not None:
                shape = tuple(card if v == i else 1
                              for v, card in zip(self.ordered_vars, self.ordered_shape))
                factors.append(np.ascontiguousarray(likelihoods[i].T).reshape((*shape, n_cases)))
        if not factors:
            return None
        factors.sort(key=np.size)   # grown one factor at a time: only the last step is full size
        table = factors[0]
        for f in factors[1:]:
            table = table * f
        full = np.broadcast_to(table, (*self.ordered_shape, n_cases))
        return np.ascontiguousarray(full).reshape(self.n_u, self.n_r, n_cases)

    def to_ur(self, table: np.ndarray) -> np.ndarray:
        """A clique table without cases, (U, R)."""
        ordered = np.ascontiguousarray(table.reshape(self.shape).transpose(self.perm))
        return ordered.reshape(self.n_u, self.n_r)

    def from_ur(self, table: np.ndarray) -> np.ndarray:
        """Back to the clique's axes."""
        return table.reshape([self.shape[j] for j in self.perm]).transpose(self.inverse)


class _CoarseTree:
    """The junction tree with some cliques merged into their parents, for the E-step.

    A separator costs about ten passes over (separator, cases) tables per E-step, a clique entry
    two reads; so a clique is merged into its parent when the merged clique is smaller than the two
    cliques plus ``SEPARATOR_WEIGHT`` times their separator (merging neighbours keeps a junction
    tree). Offers what the E-step uses of a JunctionTree, over the merged cliques.
    """

    def __init__(self, tree: JunctionTree):
        self.cards = tree.cards
        self.families = tree.families
        self.cpt_perm = tree.cpt_perm
        variables = {c: set(clique) for c, clique in enumerate(tree.cliques)}
        parent = dict(enumerate(tree.parent))
        members = {c: [c] for c in variables}
        for c in tree.collect_order:   # children before parents
            p = parent[c]
            if p is None:
                continue
            union, sep = variables[p] | variables[c], variables[p] & variables[c]
            if self._size(union) <= (self._size(variables[p]) + self._size(variables[c])
                                     + SEPARATOR_WEIGHT * self._size(sep)):
                variables[p] = union
                members[p] += members.pop(c)
                del variables[c]
                for d in [d for d, q in parent.items() if q == c]:
                    parent[d] = p
        kept = [c for c in tree.order if c in variables]   # every clique after its parent
        index = {c: j for j, c in enumerate(kept)}
        self.cliques = [tuple(sorted(variables[c])) for c in kept]
        self.shapes = [tuple(int(self.cards[v]) for v in clique) for clique in self.cliques]
        self.order = list(range(len(kept)))
        self.root = 0
        self.collect_order = self.order[::-1]
        self.parent = [None if parent[c] is None else index[parent[c]] for c in kept]
        self.children = {j: [d for d in self.order if self.parent[d] == j] for j in self.order}
        self.separator = {j: tuple(v for v in self.cliques[j] if v in self.cliques[self.parent[j]])
                          for j in self.order[1:]}
        self.assigned = [[i for m in members[c] for i in tree.assigned[m]] for c in kept]
        self.home = [0] * len(tree.cards)
        for j, assigned in enumerate(self.assigned):
            for i in assigned:
                self.home[i] = j
        # per variable: its CPT's broadcast shape in its clique, the clique axes outside its family,
        # and the order that puts a family table (ascending variables) back into the CPT's axes
        self.cpt_shape = []
        self.other_axes = []
        self.cpt_order = []
        for i, family in enumerate(self.families):
            clique, shape = self.cliques[self.home[i]], self.shapes[self.home[i]]
            self.cpt_shape.append(tuple(card if v in family else 1
                                        for v, card in zip(clique, shape)) + (1,))
            self.other_axes.append(tuple(j for j, v in enumerate(clique) if v not in family))
            self.cpt_order.append(tuple(np.argsort(self.cpt_perm[i])))

    def _size(self, variables) -> int:
        return int(np.prod([self.cards[v] for v in variables]))

    def clique_tables(self, cpts: Sequence[np.ndarray]) -> list:
        """Product of the CPTs assigned to each clique, (*clique cards, 1)."""
        tables = []
        for shape, assigned in zip(self.shapes, self.assigned):
            table = np.ones((*shape, 1))
            for i in assigned:
                table = table * np.transpose(cpts[i], self.cpt_perm[i]).reshape(self.cpt_shape[i])
            tables.append(table)
        return tables

    def family_from_clique(self, i: int, table: np.ndarray) -> np.ndarray:
        """Variable i's family table (axes as in its CPT) from its clique's table."""
        return np.transpose(table.sum(axis=self.other_axes[i]), self.cpt_order[i])


class SeparatorEStep:
    """Expected family counts and log-likelihoods for many CPT settings over the same evidence.

    An ``estep.EStepBackend``, with the same results as ``inference.JunctionTreeEStep``.
    """

    def __init__(self, tree: JunctionTree, evidence: Evidence, chunk_size: int = 4096):
        self.tree = tree = _CoarseTree(tree)
        self.n_cases = evidence.n_cases
        self.log_scale = float(evidence.log_scale.sum())
        self.layouts = [_CliqueLayout(tree, c) for c in range(len(tree.cliques))]
        self._workspaces = {}
        self.chunks = []
        for start in range(0, evidence.n_cases, chunk_size):
            part = evidence.take(slice(start, start + chunk_size))
            self.chunks.append((part.n_cases, [layout.evidence(part.likelihoods, part.n_cases)
                                               for layout in self.layouts]))

    @staticmethod
    def fits(tree: JunctionTree, n_cases: int) -> bool:
        """Whether the laid-out evidence of ``n_cases`` stays within ``MAX_ENTRIES`` numbers."""
        entries = sum(int(np.prod(shape)) for shape in _CoarseTree(tree).shapes)
        return n_cases * entries <= MAX_ENTRIES

    def _phis(self, cpts: Sequence[np.ndarray]) -> list:
        tables = self.tree.clique_tables(cpts)
        return [layout.to_ur(table) for layout, table in zip(self.layouts, tables)]

    def _workspace(self, n_cases: int) -> "_Workspace":
        if n_cases not in self._workspaces:
            self._workspaces[n_cases] = _Workspace(self.tree, self.layouts, n_cases)
        return self._workspaces[n_cases]

    def _collect(self, phis: list, evidence: list, n_cases: int) -> "_Workspace":
        """Leaves to root on (U, cases) tables, in the chunk's workspace: per clique its table
        T = G x children's normalised messages, the messages and their totals; each case's
        log-likelihood.
        """
        tree, layouts = self.tree, self.layouts
        work = self._workspace(n_cases)
        work.log_lik[:] = 0.0
        for c in tree.collect_order:
            layout, table, g = layouts[c], evidence[c], work.tables[c]
            if table is None:
                g[...] = phis[c].sum(axis=1).reshape((*layout.u_shape, 1))
            else:
                np.matmul(phis[c][:, None, :], table, out=g.reshape(layout.n_u, 1, n_cases))
            product = work.products[c] = work.product(c)
            if product is not None:
                g *= product
            if c == tree.root:
                total = g.reshape(-1, n_cases).sum(axis=0, out=work.totals[c])
            else:
                msg = g.sum(axis=layout.parent_axes, out=work.sums[c]) if layout.parent_axes else g
                total = msg.reshape(-1, n_cases).sum(axis=0, out=work.totals[c])
                np.divide(msg, total, out=work.msgs[c])
                work.unnormalised[c] = msg
            with np.errstate(divide="ignore"):
                work.log_lik += np.log(total, out=work.scratch)
        JunctionTree.check_possible(work.log_lik)
        return work

    def log_likelihood(self, cpts: Sequence[np.ndarray]) -> float:
        """Total log p(evidence | CPTs), by the collect pass alone."""
        phis = self._phis(cpts)
        return self.log_scale + sum(float(self._collect(phis, ev, n).log_lik.sum())
                                    for n, ev in self.chunks)

    def __call__(self, cpts: Sequence[np.ndarray]):
        """Expected family counts (shaped like the CPTs) and the total log-likelihood."""
        tree, layouts = self.tree, self.layouts
        phis = self._phis(cpts)
        sums = [np.zeros((layout.n_u, layout.n_r)) for layout in layouts]
        total_ll = self.log_scale
        for n_cases, evidence in self.chunks:
            work = self._collect(phis, evidence, n_cases)
            total_ll += float(work.log_lik.sum())
            self._distribute(work, evidence, n_cases, sums)
        clique_counts = [layout.from_ur(phi * s) for layout, phi, s in zip(layouts, phis, sums)]
        counts = [tree.family_from_clique(i, clique_counts[tree.home[i]]) for i in range(len(cpts))]
        return counts, total_ll

    def _distribute(self, work: _Workspace, evidence: list, n_cases: int, sums: list) -> None:
        """Root to leaves: add to ``sums`` each clique's evidence rows weighted by its W(u, k)."""
        tree = self.tree
        rho = {tree.root: np.divide(1.0, work.totals[tree.root], out=work.root_rho)}
        for c in tree.order:
            layout = self.layouts[c]
            flat = self._weight(work, c, rho).reshape(layout.n_u, n_cases)
            if evidence[c] is None:
                sums[c] += flat.sum(axis=1)[:, None]
            else:
                sums[c] += np.matmul(evidence[c], flat[:, :, None]).reshape(layout.n_u, layout.n_r)

    def _weight(self, work: _Workspace, c: int, rho: dict) -> np.ndarray:
        """W(u, k) = p(U | case) / G(u, k): what each case's evidence row of clique c is weighted
        by; its children's rho into ``rho``.
        """
        weight = work.weights[c]
        if not self.tree.children[c]:
            if rho[c].shape == weight.shape:
                return rho[c]
            weight[...] = rho[c]
            return weight
        posterior = work.posterior[:weight.size].reshape(weight.shape)
        np.multiply(work.tables[c], rho[c], out=posterior)     # p(U | case)
        for d in self.tree.children[c]:
            rho[d] = self._child_rho(work, c, d, posterior)
        return np.multiply(work.products[c], rho[c], out=weight)

    def _child_rho(self, work: _Workspace, c: int, d: int, posterior: np.ndarray) -> np.ndarray:
        """p(separator | case) over the (unnormalised) message child d of clique c sent."""
        child_axes = self.layouts[c].child_axes[d]
        with np.errstate(divide="ignore", invalid="ignore"):
            if child_axes:
                ratio = posterior.sum(axis=child_axes, out=work.ratios[d])
                ratio /= work.unnormalised[d]
            else:
                ratio = np.divide(posterior, work.unnormalised[d].reshape(posterior.shape),
                                  out=work.ratios[d].reshape(posterior.shape))
        np.fmax(ratio, 0.0, out=ratio)   # 0/0 (a separator value the evidence rules out) -> 0
        return ratio.reshape(self.layouts[d].parent_shape)


class _Workspace:
    """The (U, cases) arrays of one chunk size, allocated once: fresh temporaries of this size would
    each be a new memory mapping (page faults cost more than the arithmetic here).
    """

    def __init__(self, tree: _CoarseTree, layouts: list, n_cases: int):
        self.tree = tree
        self.layouts = layouts
        self.n_cases = n_cases
        self.log_lik = np.zeros(n_cases)
        self.scratch = np.zeros(n_cases)
        self.root_rho = np.zeros(n_cases)
        self.tables = [np.zeros((*layout.u_shape, n_cases)) for layout in layouts]
        self.weights = [np.zeros((*layout.u_shape, n_cases)) for layout in layouts]
        self.totals = [np.zeros(n_cases) for _ in layouts]
        self.posterior = np.zeros(max(layout.n_u for layout in layouts) * n_cases)
        self.msgs = {}           # per non-root clique: its normalised message to its parent
        self.sums = {}           # a buffer for the unnormalised one, where it sums axes of U out
        self.ratios = {}         # p(separator | case) over the message
        self.unnormalised = {}   # the unnormalised message (a view of the table or of sums)
        for c in tree.order[1:]:
            shape = (*(tree.cards[v] for v in tree.separator[c]), n_cases)
            self.msgs[c], self.ratios[c] = np.zeros(shape), np.zeros(shape)
            if layouts[c].parent_axes:
                self.sums[c] = np.zeros(shape)
        # children by message size, smallest first (their product grows one factor at a time)
        self.kids = {c: sorted(kids, key=lambda d: self.msgs[d].size)
                     for c, kids in tree.children.items()}
        self.product_buffers = {c: np.zeros((*layouts[c].u_shape, n_cases))
                                for c, kids in self.kids.items() if len(kids) > 1}
        self.products = {}

    def product(self, c: int) -> np.ndarray | None:
        """Clique c's children's normalised messages multiplied over U (one child's: a view)."""
        kids, layout = self.kids[c], self.layouts[c]
        if not kids:
            return None
        first = self.msgs[kids[0]].reshape(layout.child_shape[kids[0]])
        if len(kids) == 1:
            return first
        out = self.product_buffers[c]
        product = first
        for d in kids[1:-1]:
            product = product * self.msgs[d].reshape(layout.child_shape[d])
        last = self.msgs[kids[-1]].reshape(layout.child_shape[kids[-1]])
        return np.multiply(product, last, out=out)
