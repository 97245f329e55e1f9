"""The posterior over structures: a weighted sample of the networks the cases support, each with its CPTs' posterior.

A robot does not know its network's arcs, so learning keeps a sample of structures drawn from their posterior given
the cases, the hidden values integrated over (never MAP-assigned). Each chain is a block Gibbs sampler over
(structure, hidden values, CPTs) whose sweep

1. draws every case's hidden values jointly given the structure and CPTs (``posterior.impute``);
2. moves the structure by Metropolis-Hastings steps over DAGs (single-arc additions and deletions, MC^3:
   ``structure.ArcMoves``, and arc reversals) given those values, the CPTs integrated out: a family scores the
   marginal likelihood of its imputed counts under the Dirichlet its CPT is drawn from (the same pseudo-counts EM's
   M-step adds), and every arc adds the log prior odds of an arc (``arc_prior``);
3. draws the CPTs from their Dirichlet given the structure and the imputed values.

A kept sweep is one draw of (structure, CPTs): its structure and the counts of its imputed values (the CPTs given
them are Dirichlet(counts + pseudo-counts), as in ``core.posterior_sampling``). The draws of one structure make one
member of the sample, weighted by its share of the draws; answers average over the members
(``core.posterior_answers``).

The chains start from different structures: K2's on the MAP values (the single-structure learner's answer), no arcs,
and every variable with as many parents as ``max_parents`` allows (greedy on the MAP values). Where the sensors blur
the values, a chain holds on to the arcs it imputes under: values imputed without an arc show its dependence
weakened, so the next structure step does not add it back, and values imputed with it keep it. Such a chain stays
in one mode of the posterior; the chains' draws are pooled, so the sample spans the modes they found instead of
answering from one. ``StructureSample.disagreement`` (the largest difference between two chains' probability of
one edge, an arc either way) says how far the chains are from having mixed (0: they agree).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.special import gammaln

from .cases import CaseEvidence
from .errors import ModelFormatError
from .inference import JunctionTree
from .network import AffordanceNetwork
from .options import LearningOptions
from .posterior_sampling import dirichlet_rows, impute
from .progress import Progress, report
from .structure import ArcMoves, CaseCounts, allowed_arcs, default_order, max_log_likelihood_rows

STARTS = ("k2", "empty", "dense")   # where the chains start (one chain each)
BURN_IN = 40                        # sweeps of a chain before its first kept draw
THIN = 3                            # sweeps per kept draw
MOVES_PER_VARIABLE = 3              # Metropolis-Hastings proposals per sweep, per variable
REVERSALS = 0.25                    # the share of those proposals that reverse an arc
PROGRESS_EVERY = 10                 # sweeps between progress reports

Structure = tuple  # parents of every variable, by index: a tuple of sorted tuples


@dataclass
class Member:
    """One structure of the sample: its parents (by index), the imputed counts of its draws (per variable,
    (S, *CPT shape)) and the pseudo-counts of its CPTs' Dirichlet prior (per variable, shaped like the CPT).
    """

    parents: Structure
    draws: list
    prior: list

    @property
    def n_draws(self) -> int:
        """How many draws of the sample have this structure."""
        return len(self.draws[0])


@dataclass
class StructureSample:
    """What ``sample_structures`` drew: the members, most draws first, and how the chains went."""

    members: list
    chain_arcs: list            # per chain: {(parent, child) index pair: the share of its draws holding that arc}
    sweeps: int
    burn_in: int
    thin: int
    seed: int
    seconds: float
    arc_prior: float
    starts: tuple = STARTS

    @property
    def n_draws(self) -> int:
        """How many draws the sample holds, over all its structures."""
        return sum(m.n_draws for m in self.members)

    @property
    def weights(self) -> np.ndarray:
        """Each member's share of the draws."""
        return np.array([m.n_draws for m in self.members], dtype=float) / self.n_draws

    def arc_probabilities(self) -> dict:
        """{(parent, child) index pair: the posterior probability of that arc} over all the draws."""
        out: dict = {}
        for member, weight in zip(self.members, self.weights):
            for child, parents in enumerate(member.parents):
                for parent in parents:
                    out[parent, child] = out.get((parent, child), 0.0) + float(weight)
        return out

    @property
    def disagreement(self) -> float:
        """The largest difference between two chains' probability of one edge (an arc either way: the same
        dependence, which the cases often cannot orient): 0 when they agree on every edge, 1 when one chain always
        holds an edge another never does.
        """
        chains = [_edges(arcs) for arcs in self.chain_arcs]
        edges = {e for chain in chains for e in chain}
        if len(chains) < 2 or not edges:
            return 0.0
        return max(max(c.get(e, 0.0) for c in chains) - min(c.get(e, 0.0) for c in chains) for e in edges)

    def metadata(self, n_cases: int) -> dict:
        """The model's metadata entry "structures": how the sample was drawn."""
        return {"method": "gibbs", "chains": len(self.chain_arcs), "starts": list(self.starts),
                "burn_in": self.burn_in, "thin": self.thin, "sweeps": self.sweeps, "draws": self.n_draws,
                "structures": len(self.members), "disagreement": round(self.disagreement, 4),
                "arc_prior": self.arc_prior, "seed": self.seed, "num_cases": int(n_cases),
                "seconds": round(self.seconds, 4)}


def _edges(arcs: Mapping) -> dict:
    """{(u, v) with u < v: the probability of an arc between them either way} of {(parent, child): probability}."""
    out: dict = {}
    for (u, v), p in arcs.items():
        key = (min(u, v), max(u, v))
        out[key] = out.get(key, 0.0) + p
    return out


class FamilyMarginal:
    """The log marginal likelihood of one family's imputed counts under its Dirichlet prior, plus the arc prior's log
    odds per parent: the structure step's score (cached per family for one sweep's codes).
    """

    def __init__(self, codes: np.ndarray, cards: Sequence[int], alpha_of: Callable, arc_log_odds: float):
        self.counts = CaseCounts(codes, cards)
        self.alpha_of = alpha_of
        self.arc_log_odds = arc_log_odds
        self._tables: dict = {}
        self._scores: dict = {}

    def table(self, child: int, parents: tuple) -> np.ndarray:
        """Integer counts of the family's configurations, shaped like its CPT."""
        key = (child, parents)
        if key not in self._tables:
            shape = [self.counts.cards[a] for a in (*parents, child)]
            self._tables[key] = self.counts.table(child, parents).reshape(shape)
        return self._tables[key]

    def __call__(self, child: int, parents: tuple) -> float:
        """The family's score with these parents (ascending)."""
        key = (child, parents)
        if key not in self._scores:
            alpha = self.alpha_of(child, parents)
            table = self.table(child, parents)
            uniform = alpha.flat[0]
            if uniform > 0 and np.all(alpha == uniform):
                score = self._uniform_marginal(table, float(uniform))
            else:
                score = log_marginal(table, alpha)
            self._scores[key] = score + self.arc_log_odds * len(parents)
        return self._scores[key]

    def _uniform_marginal(self, table: np.ndarray, alpha: float) -> float:
        """``log_marginal(table, alpha)`` of integer counts with one pseudo-count ``alpha`` per entry, the common
        case: log Gamma by lookup (``CaseCounts.log_gamma``), not gammaln per entry.
        """
        rows = table.reshape(-1, table.shape[-1])
        r = rows.shape[1]
        log_gamma = self.counts.log_gamma
        return float(len(rows) * (gammaln(r * alpha) - r * gammaln(alpha))
                     - np.add.reduce(log_gamma(np.add.reduce(rows, axis=1), r * alpha))
                     + np.add.reduce(log_gamma(rows, alpha), axis=None))


def log_marginal(counts: np.ndarray, alpha: np.ndarray) -> float:
    """Log p(counts) of a CPT whose every row is Dirichlet(alpha's row): the Dirichlet-multinomial of each row (the
    BD score; K2's with alpha 1). An entry whose alpha is 0 is a structural zero (its count must be 0).
    """
    alpha = np.broadcast_to(alpha, counts.shape).reshape(-1, counts.shape[-1])
    counts = counts.reshape(-1, counts.shape[-1])
    row_alpha = alpha.sum(axis=1)
    positive = alpha > 0
    cells = np.where(positive, gammaln(np.where(positive, counts + alpha, 1.0)) - gammaln(np.where(positive, alpha,
                                                                                                   1.0)), 0.0)
    return float(np.sum(gammaln(row_alpha) - gammaln(counts.sum(axis=1) + row_alpha)) + np.sum(cells))


def sample_structures(network: AffordanceNetwork, observed: CaseEvidence, options: LearningOptions,
                      starts: Mapping[str, Structure], fit: Callable, alpha_of: Callable,
                      fixed: Mapping[int, tuple] | None = None, progress: Progress = None) -> StructureSample:
    """Chains from each of ``starts`` {name: parents by index} (the module docstring), their draws pooled.

    ``network``: the variables with their sensors fitted; ``observed``: the cases' evidence under it; ``fit(net)``:
    the CPTs of a structure (EM), where each chain's CPTs start; ``alpha_of(child, parents)``: the Dirichlet
    pseudo-counts of that family's CPT; ``fixed`` {child: parents}: families not searched. Draws
    ``options.posterior_draws`` in all (at least one a chain). ``progress`` hears of every ``PROGRESS_EVERY`` sweeps
    as phase "posterior".
    """
    if options.posterior_draws < 1:
        raise ModelFormatError("structure 'average' needs posterior_draws >= 1: the answers average over the draws")
    start_time = time.perf_counter()
    n = len(network)
    allowed = allowed_arcs(network, options)
    for child, parents in (fixed or {}).items():
        allowed[:, child] = False
        allowed[child, list(parents)] = False
    per_chain = max(1, math.ceil(options.posterior_draws / len(starts)))
    sweeps = BURN_IN + per_chain * THIN
    evidence = observed.evidence()
    odds = math.log(options.arc_prior / (1.0 - options.arc_prior))
    trees = _Trees(network, evidence)
    by_structure: dict = {}
    chain_arcs = []
    done = 0
    for c, start in enumerate(starts.values()):
        rng = np.random.default_rng([int(options.seed), 38, c])
        searched = [tuple(sorted(p)) if i not in (fixed or {}) else () for i, p in enumerate(start)]
        graph = ArcMoves(allowed, options.max_parents, searched)
        structure = _with_fixed(searched, fixed)
        cpts = [v.cpt for v in fit(network_of(network, structure)).variables]
        arcs: dict = {}
        for sweep in range(sweeps):
            tree, tables = trees[structure]
            codes = impute(tree, cpts, evidence, rng, evidence_tables=tables)
            score = FamilyMarginal(codes, network.cards, alpha_of, odds)
            _walk(graph, score, MOVES_PER_VARIABLE * n, rng)
            structure = _with_fixed(tuple(graph.parent_tuple(v) for v in range(n)), fixed)
            counts = [score.table(i, structure[i]).astype(float) for i in range(n)]
            cpts = [dirichlet_rows(k + alpha_of(i, structure[i]), rng) for i, k in enumerate(counts)]
            done += 1
            if done % PROGRESS_EVERY == 0:
                report(progress, "posterior", done)
            if sweep >= BURN_IN and (sweep - BURN_IN) % THIN == THIN - 1:
                by_structure.setdefault(structure, []).append(counts)
                for child, parents in enumerate(structure):
                    for parent in parents:
                        arcs[parent, child] = arcs.get((parent, child), 0) + 1.0 / per_chain
        chain_arcs.append(arcs)
    members = [Member(s, [np.stack([d[i] for d in draws]) for i in range(n)],
                      [np.asarray(alpha_of(i, s[i]), dtype=float) * np.ones(draws[0][i].shape) for i in range(n)])
               for s, draws in sorted(by_structure.items(), key=lambda item: -len(item[1]))]
    return StructureSample(members, chain_arcs, sweeps * len(starts), BURN_IN, THIN, int(options.seed),
                           time.perf_counter() - start_time, options.arc_prior, starts=tuple(starts))


def _walk(graph: ArcMoves, score: FamilyMarginal, steps: int, rng: np.random.Generator) -> None:
    """``steps`` Metropolis-Hastings proposals on ``graph`` under ``score``: a share ``REVERSALS`` of them reverse an
    arc drawn uniformly (rejected when that closes a cycle or exceeds max_parents: a symmetric proposal, the number
    of arcs being the same both ways), the others MC^3's (a legal addition or deletion drawn uniformly, accepted with
    probability min(1, score ratio x moves here / moves there)). Without reversals a chain whose arc points the
    wrong way must pass through a structure with neither, which the cases may make very improbable.
    """
    n = graph.n
    family = [score(v, graph.parent_tuple(v)) for v in range(n)]
    for _ in range(steps):
        uniform = rng.random()
        log_uniform = math.log(uniform) if uniform > 0 else -math.inf
        if rng.random() < REVERSALS:
            _reverse(graph, score, family, log_uniform, rng)
            continue
        n_moves = graph.n_moves
        if not n_moves:
            continue
        u, v = graph.moves[rng.integers(n_moves)]
        new = score(v, graph.parent_tuple(v, graph.parents[v] ^ 1 << u))
        bound = new - family[v] + math.log(n_moves)   # the ratio if the new graph had one move: rejects most early
        if log_uniform < bound:
            toggle = graph.toggled(u, v)
            if log_uniform < bound - math.log(toggle.n_moves):
                graph.apply(toggle)
                family[v] = new


def _reverse(graph: ArcMoves, score: FamilyMarginal, family: list, log_uniform: float,
             rng: np.random.Generator) -> None:
    """One proposal to reverse an arc of ``graph`` drawn uniformly (``_walk``)."""
    arcs = [(u, v) for v in range(graph.n) for u in graph.parent_tuple(v)]
    if not arcs:
        return
    u, v = arcs[rng.integers(len(arcs))]
    new_v = score(v, graph.parent_tuple(v, graph.parents[v] & ~(1 << u)))
    new_u = score(u, graph.parent_tuple(u, graph.parents[u] | 1 << v))
    if not log_uniform < new_v + new_u - family[v] - family[u]:
        return
    graph.apply(graph.toggled(u, v))                       # u -> v deleted: is v -> u legal now?
    if graph.legal[u] >> v & 1:
        graph.apply(graph.toggled(v, u))
        family[u], family[v] = new_u, new_v
    else:
        graph.apply(graph.toggled(u, v))                   # not legal: u -> v back


class _Trees:
    """The junction tree of each structure a sampler visits, with its tables of the cases' evidence (both made once
    per structure: the cases are the same every sweep).
    """

    def __init__(self, network: AffordanceNetwork, evidence):
        self.network = network
        self.evidence = evidence
        self._found: dict = {}

    def __getitem__(self, structure: Structure) -> tuple:
        found = self._found.get(structure)
        if found is None:
            if len(self._found) >= _MAX_TREES:
                self._found.clear()
            tree = JunctionTree(network_of(self.network, structure))
            found = self._found[structure] = (tree, tree.evidence_tables(self.evidence))
        return found


_MAX_TREES = 64   # structures whose trees a sampler keeps (then forgotten, all at once)


def _with_fixed(searched: Structure, fixed: Mapping[int, tuple] | None) -> Structure:
    return tuple(tuple(sorted(fixed[i])) if fixed and i in fixed else p for i, p in enumerate(searched))


def network_of(network: AffordanceNetwork, structure: Structure) -> AffordanceNetwork:
    """``network`` with the parents of ``structure`` (by index), without CPTs."""
    return network.with_structure({network.names[v]: tuple(network.names[u] for u in ps)
                                   for v, ps in enumerate(structure)})


def dense_structure(network: AffordanceNetwork, codes: np.ndarray, options: LearningOptions,
                    fixed: Mapping[int, tuple] | None = None) -> Structure:
    """Every variable with up to ``max_parents`` parents among its predecessors in the default order, chosen greedily
    by the log-likelihood of the MAP values ``codes`` (K, n) (which never falls when a parent is added: the densest
    start a chain can have).
    """
    counts = CaseCounts(codes, network.cards)
    allowed = allowed_arcs(network, options)
    order = default_order(network)
    parents: list = [()] * len(network)
    for pos, child in enumerate(order):
        if fixed and child in fixed:
            continue
        chosen: tuple = ()
        candidates = [u for u in order[:pos] if allowed[u, child]]
        while len(chosen) < options.max_parents:
            left = [u for u in candidates if u not in chosen]
            if not left:
                break
            gains = [np.sum(max_log_likelihood_rows(counts.table(child, (*chosen, u)).astype(float))) for u in left]
            chosen = (*chosen, left[int(np.argmax(gains))])
        parents[child] = tuple(sorted(chosen))
    return tuple(parents)


__all__ = ["BURN_IN", "STARTS", "THIN", "FamilyMarginal", "Member", "StructureSample", "dense_structure",
           "log_marginal", "network_of", "sample_structures"]
