"""The exact posterior of the CPTs given the cases, drawn once per learned model, and the spread of answers under it.

EM's expected counts (``Variable.counts``) treat every hidden value as if it had been seen, with the weight of its
posterior: a Dirichlet of them is right when the sensors tell the values apart, and too sure when they do not (at
sigma 3 their 90 % intervals cover the truth far less often: docs/benchmarks/posterior.md). The posterior of the CPTs
given the readings is not a Dirichlet; it is drawn here by data augmentation (Tanner & Wong 1987), a block Gibbs
sampler that alternates

1. every case's hidden values, jointly, from p(values | the case's labels and readings, CPTs): one junction-tree
   calibration of all the cases at once, then forward sampling clique by clique from the root, each clique's
   values given those its separator already has (``impute``, vectorised over cases);
2. every CPT row from its Dirichlet given the counts of the imputed values plus the prior's pseudo-counts (the same
   pseudo-counts EM's M-step adds, ``dirichlet_prior``).

A case whose every value is seen (labels) has nothing to impute: its counts are added to every sweep's as they are,
and only the other cases are imputed. When every value of every case is seen, the posterior is the Dirichlet of the
counts, and one sweep makes it. Otherwise the chain starts at EM's CPTs, near the posterior's mode, runs ``BURN_IN``
sweeps, then keeps one sweep in ``THIN``: for each kept sweep, the counts of the imputed values (``Variable.draws``;
the pseudo-counts are ``Variable.prior``). A CPT drawn from Dirichlet(draw + prior) is a draw of the exact posterior
(the imputed values and CPTs of a sweep are a draw of their joint posterior, and the CPTs given the values are that
Dirichlet): the imputations carry what the readings leave unknown about the values, each Dirichlet what a finite
number of cases leaves unknown about the CPTs, so ``DRAWS`` imputations, each drawn from ``ENSEMBLE / DRAWS`` times,
give the answers' ``ENSEMBLE`` CPT sets. This runs once per learn; a query never samples.

A sweep costs about what an E-step of EM does, for every case. Beyond ``EXACT_CASES`` cases the chain runs on a
random subset of that many (``scaled_to``): the posterior is then centred on all the cases' expected counts (EM's),
with each imputation's deviation from the subset's mean imputation grown by sqrt(cases / subset) (the spread that
the unknown values add grows as the number of cases, its share of the counts' spread stays), a large-sample
approximation where the exact posterior is nearly Gaussian; the model's metadata says so.

Answers (``DrawEnsemble``): the S posterior CPTs (drawn from the kept Dirichlets with a fixed seed, once per model)
form one network with a hidden variable ``DRAW`` (S values, uniform) that is a parent of every variable; one exact
query of (query, DRAW) gives p(query | evidence, CPTs of draw s) for every s at once, through the same query engine
as ``predict``. Standard deviations and 90 % credible intervals are those of these S answers.

Online learning between learns (``update_draws``): each new case's values are imputed under CPTs drawn from every
draw's Dirichlet and added to that draw's counts (steps 1 and 2 once more per draw, the earlier cases' imputations
held). The draws stay as diverse as the learn made them, so they never become surer than it did about the earlier
cases; what they leave out is the reweighing of the earlier cases' imputations by what the new cases say of them
(the exact update would do it, at a cost that grows with every case), so they lag behind the exact posterior until
the next learn draws it again.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .errors import ModelFormatError
from .evidence import CompleteCases, Evidence
from .inference import JunctionTree, collected
from .network import AffordanceNetwork, Variable
from .progress import Progress, report

DRAWS = 50           # imputations a learn keeps (the learning option posterior_draws)
BURN_IN = 20         # sweeps from EM's CPTs before the first imputation kept
THIN = 2             # sweeps per imputation kept
ENSEMBLE = 200       # CPT sets drawn from the imputations' Dirichlets to answer under (at least one per imputation)
EXACT_CASES = 1000   # cases the chain runs on: a random subset of this many when there are more (scaled_to)
LEVEL = 0.90         # the credible intervals' probability
DRAW = "~draw"       # the ensemble's variable whose value says which draw's CPTs hold
ENSEMBLE_SEED = 20   # the CPTs drawn from a model's Dirichlets: the same answers every time the model is loaded
_IMPUTE_CASES = 4096   # cases calibrated at once (memory: their clique beliefs)
_MISSING_POSTERIOR = ("the model has no posterior draws (learned by a version before them, imported, or learned with "
                      "posterior_draws 0): learn it again to get them")

_ENSEMBLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def has_draws(model: AffordanceNetwork) -> bool:
    """Whether every CPT of ``model`` carries posterior draws (``Variable.draws``)."""
    return all(v.draws is not None for v in model.variables) and model.parameterised


def missing_posterior(what: str) -> ModelFormatError:
    """The error for ``what`` (e.g. "strategy 'thompson'") asked of a model without posterior draws."""
    return ModelFormatError(f"{what} needs the posterior of the CPTs, and {_MISSING_POSTERIOR} "
                            "(affordance-ros learn, or the node's ~/learn)")


# ------------------------------------------------------------------ sampling
def dirichlet_rows(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every row (last axis) of ``alpha`` drawn from its Dirichlet; an entry of 0 stays 0 (a structural zero), a row
    of zeros (no data, no prior) is drawn from a flat Dirichlet(1). Leading axes are any (draws, parents).
    """
    alpha = np.asarray(alpha, dtype=float)
    empty = alpha.sum(axis=-1, keepdims=True) <= 0
    gamma = rng.standard_gamma(np.where(empty, 1.0, alpha))
    total = gamma.sum(axis=-1, keepdims=True)
    # a row whose every positive entry drew 0 (tiny parameters underflow): its largest parameter takes it all
    degenerate = total <= 0
    if np.any(degenerate):
        top = np.argmax(np.where(empty, 1.0, alpha), axis=-1)[..., None]
        gamma = np.where(degenerate, np.arange(alpha.shape[-1]) == top, gamma)
        total = gamma.sum(axis=-1, keepdims=True)
    return gamma / total


def impute(tree: JunctionTree, cpts: Sequence[np.ndarray], evidence: Evidence, rng: np.random.Generator,
           per_case: bool = False, evidence_tables: list | None = None) -> np.ndarray:
    """Every variable's value in every case drawn jointly from p(values | the case's evidence, ``cpts``), codes
    (K, n): the tree's collect pass on all cases at once, then each clique (root first) drawn from its collected
    table at the values its separator with its parent already has (backward sampling: no distribute pass).
    ``per_case``: case k under CPTs of its own (``cpts[i][k]``); ``evidence_tables``: the tree's tables of
    ``evidence``, when the caller keeps them (``inference.collected``).
    """
    n_cases = evidence.n_cases
    tables = collected(tree, cpts, evidence, per_case, evidence_tables)
    codes = np.zeros((n_cases, len(tree.cards)), dtype=np.int64)
    done: set = set()
    rows = np.arange(n_cases)
    for c in tree.order:
        clique = tree.cliques[c]
        known = [a for a, v in enumerate(clique) if v in done]
        free = [a for a, v in enumerate(clique) if v not in done]
        if not free:
            continue
        table = np.broadcast_to(tables[c], (*tree.shapes[c], n_cases)).transpose((*known, *free, len(clique)))
        if known:   # the rows at the values already drawn: (K, *free cards)
            table = table[(*(codes[:, clique[a]] for a in known), Ellipsis, rows)].reshape(n_cases, -1)
        else:
            table = table.reshape(-1, n_cases).T
        cumulative = np.cumsum(table, axis=1)
        u = rng.random(n_cases) * cumulative[:, -1]
        flat = np.minimum((cumulative < u[:, None]).sum(axis=1), table.shape[1] - 1)
        for a, value in zip(free, np.unravel_index(flat, [tree.cards[clique[a]] for a in free])):
            codes[:, clique[a]] = value
            done.add(clique[a])
    return codes


def family_counts_of(network: AffordanceNetwork, codes: np.ndarray, i: int) -> np.ndarray:
    """Counts of variable ``i``'s family configurations (its CPT's shape) over the cases' codes (K, n)."""
    axes = [*network.parent_indices(i), i]
    shape = tuple(network.variables[a].card for a in axes)
    flat = np.ravel_multi_index(tuple(codes[:, a] for a in axes), shape)
    return np.bincount(flat, minlength=math.prod(shape)).reshape(shape)


def dirichlet_prior(network: AffordanceNetwork, prior: float, extra: Sequence[np.ndarray | float] | None = None,
                    support: Mapping[str, np.ndarray] | None = None) -> list:
    """The prior's pseudo-counts of every CPT (shaped like it): ``prior`` per entry, plus ``extra`` per variable
    (e.g. a prior model's ``prior_strength`` times its family probabilities, a condition's own-condition counts),
    zero outside ``support`` {variable: booleans shaped like its CPT} (structural zeros). What EM's M-step adds.
    """
    out = []
    for i, v in enumerate(network.variables):
        shape = tuple(network[p].card for p in v.parents) + (v.card,)
        alpha = np.full(shape, float(prior)) + (0.0 if extra is None else np.asarray(extra[i], dtype=float))
        if support and v.name in support:
            alpha = np.where(np.asarray(support[v.name], dtype=bool), alpha, 0.0)
        out.append(alpha)
    return out


@dataclass
class PosteriorSample:
    """What ``draw_posterior`` made: ``draws`` {variable: (imputed counts (S, *CPT shape), pseudo-counts)}, and
    how.
    """

    draws: dict
    sweeps: int
    burn_in: int
    thin: int
    seed: int
    seconds: float
    subset: int | None = None

    def metadata(self, n_cases: int) -> dict:
        """The model's metadata entry "posterior": how the draws were made, from how many cases (``sampled_cases``:
        the subset the chain ran on, when it was one; ``scaled_to``).
        """
        return {"method": "gibbs", "draws": len(next(iter(self.draws.values()))[0]), "burn_in": self.burn_in,
                "thin": self.thin, "sweeps": self.sweeps, "seed": self.seed, "num_cases": int(n_cases),
                **({"sampled_cases": self.subset} if self.subset else {}), "online_updates": 0,
                "seconds": round(self.seconds, 4)}


def draw_posterior(model: AffordanceNetwork, evidence_chunks, prior: Sequence[np.ndarray], draws: int = DRAWS,
                   seed: int = 0, burn_in: int = BURN_IN, thin: int = THIN, progress: Progress = None
                   ) -> PosteriorSample:
    """``draws`` draws of the exact posterior of ``model``'s CPTs given the cases (the module docstring).

    ``evidence_chunks()``: the cases' evidence under ``model``, an iterable of ``Evidence`` made anew per call (e.g.
    ``CaseEvidence.chunks``); ``prior``: the pseudo-counts of every CPT (``dirichlet_prior``). The chain starts at
    ``model``'s CPTs. ``progress`` hears of every sweep as phase "posterior" (``core.progress``).
    """
    if draws < 1:
        raise ModelFormatError(f"posterior draws must be at least 1, got {draws}")
    start = time.perf_counter()
    rng = np.random.default_rng([int(seed), 32])
    tree = JunctionTree(model)
    n = len(model)
    cpts = [v.cpt for v in model.variables]
    kept = [np.empty((draws, *np.shape(a))) for a in prior]
    parents = [model.parent_indices(i) for i in range(n)]
    seen = [np.zeros(np.shape(a)) for a in prior]     # the counts of the cases whose every value is seen
    hidden = 0                                         # how many other cases there are
    for chunk in evidence_chunks():
        complete = CompleteCases.in_evidence(chunk)
        seen = [s + c for s, c in zip(seen, complete.family_counts(parents, model.cards))]
        hidden += chunk.n_cases - complete.n_cases
    sweeps = 1 if hidden == 0 else burn_in + draws * thin
    for sweep in range(sweeps):
        counts = [c.copy() for c in seen]
        for chunk in _with_hidden_values(evidence_chunks()):
            for part in range(0, chunk.n_cases, _IMPUTE_CASES):
                codes = impute(tree, cpts, chunk.take(slice(part, part + _IMPUTE_CASES)), rng)
                for i in range(n):
                    counts[i] += family_counts_of(model, codes, i)
        cpts = [dirichlet_rows(c + a, rng) for c, a in zip(counts, prior)]
        report(progress, "posterior", sweep + 1)
        if sweeps == 1:    # every value seen: the imputation is the cases themselves, the posterior a Dirichlet
            for i, c in enumerate(counts):
                kept[i][:] = c
        elif sweep >= burn_in and (sweep - burn_in) % thin == thin - 1:
            for i, c in enumerate(counts):
                kept[i][(sweep - burn_in) // thin] = c
    return PosteriorSample({name: (k, np.asarray(a, dtype=float)) for name, k, a in zip(model.names, kept, prior)},
                           sweeps, burn_in, thin, int(seed), time.perf_counter() - start)


def _with_hidden_values(chunks):
    """The cases of every chunk of evidence that have a value not seen (``CompleteCases``: the others are counted)."""
    for chunk in chunks:
        complete = CompleteCases.in_evidence(chunk)
        if not complete.any:
            yield chunk
        elif not complete.all:
            yield chunk.take(~complete.rows)


def scaled_to(sample: PosteriorSample, expected: Mapping[str, np.ndarray], n_cases: int, subset: int
              ) -> PosteriorSample:
    """``sample``, drawn from ``subset`` of ``n_cases`` cases, as the posterior of all of them (the module docstring):
    each draw's counts = ``expected`` {variable: all cases' expected counts (EM's)} + its deviation from the mean of
    the draws x sqrt(n_cases / subset), at least 0, to 0.01.
    """
    grow = math.sqrt(n_cases / subset)
    # (to 0.01 of a case: the file writes short numbers, and what is in memory is what is in the file)
    draws = {name: (np.round(np.maximum(expected[name] + (d - d.mean(axis=0)) * grow, 0.0), 2), a)
             for name, (d, a) in sample.draws.items()}
    return dataclasses.replace(sample, draws=draws, subset=subset)


def with_draws(model: AffordanceNetwork, sample: PosteriorSample, n_cases: int) -> AffordanceNetwork:
    """``model`` with the draws of ``sample`` and its metadata entry "posterior"."""
    out = model.replace_variables({name: {"draws": d, "prior": a} for name, (d, a) in sample.draws.items()})
    out.metadata = {**model.metadata, "posterior": sample.metadata(n_cases)}
    return out


def update_draws(network: AffordanceNetwork, draws: Sequence[np.ndarray], prior: Sequence[np.ndarray],
                 evidence: Evidence, rng: np.random.Generator) -> list:
    """The draws (S, *CPT shape) of every variable after the cases of ``evidence`` (the module docstring): for each
    draw, CPTs drawn from Dirichlet(draw + prior), the cases' values imputed under them, their counts added to the
    draw. ``network``: the model's structure (its junction tree).
    """
    tree = network.engine
    n_draws = len(draws[0])
    draws = [np.array(d, dtype=float) for d in draws]
    per_part = max(1, _IMPUTE_CASES // n_draws)
    for start in range(0, evidence.n_cases, per_part):
        part = evidence.take(slice(start, start + per_part))
        cpts = [dirichlet_rows(d + a, rng) for d, a in zip(draws, prior)]
        # case b under draw s is row b * S + s
        repeated = part.take(np.repeat(np.arange(part.n_cases), n_draws))
        tiled = [np.tile(t, (part.n_cases,) + (1,) * (t.ndim - 1)) for t in cpts]
        codes = impute(tree, tiled, repeated, rng, per_case=True)
        which = np.tile(np.arange(n_draws), part.n_cases)
        for i, d in enumerate(draws):
            np.add.at(d, (which, *(codes[:, a] for a in (*network.parent_indices(i), i))), 1.0)
    return draws


# ------------------------------------------------------------------ answers
class DrawEnsemble:
    """A model's posterior as ``n_draws`` CPT sets in one network (the module docstring), built once per model: set j
    drawn from Dirichlet(draw j mod S + prior), with a fixed seed (the same answers whenever the model is loaded).
    """

    def __init__(self, model: AffordanceNetwork):
        if not has_draws(model):
            raise ModelFormatError(_MISSING_POSTERIOR)
        rng = np.random.default_rng(ENSEMBLE_SEED)
        self.n_draws = max(ENSEMBLE, model.variables[0].draws.shape[0])
        which = np.arange(self.n_draws) % model.variables[0].draws.shape[0]
        self.cpts = [dirichlet_rows(v.draws[which] + v.prior, rng) for v in model.variables]
        variables = [dataclasses.replace(v, parents=(DRAW, *v.parents), cpt=cpt, counts=None, draws=None, prior=None,
                                         sensor=None)
                     for v, cpt in zip(model.variables, self.cpts)]
        variables.append(Variable(DRAW, "object", tuple(str(s) for s in range(self.n_draws)), (), None,
                                  np.full(self.n_draws, 1.0 / self.n_draws)))
        self.network = AffordanceNetwork(variables)
        self.draw = len(model)     # DRAW's index: the model's variables keep theirs

    @classmethod
    def of(cls, model: AffordanceNetwork) -> "DrawEnsemble":
        """The ensemble of ``model``'s draws (built on first use, then kept as long as the model)."""
        found = _ENSEMBLES.get(model)
        if found is None:
            found = _ENSEMBLES[model] = cls(model)
        return found

    def answers(self, joint: np.ndarray) -> np.ndarray:
        """p(query | evidence, draw s) (K, *query cards, S) from the ensemble's p(query, DRAW | evidence); a draw
        under which the evidence is impossible is NaN throughout.
        """
        total = joint.sum(axis=tuple(range(1, joint.ndim - 1)), keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(total > 0, joint / total, np.nan)


def spread(draws: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, standard deviation, equal-tailed ``level`` credible interval (..., 2)) of probabilities given as S
    posterior draws on the last axis of ``draws``; draws that are NaN are left out.
    """
    tail = (1.0 - level) / 2.0
    if np.isnan(np.add.reduce(draws, axis=None)):
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # an all-NaN slice: its NaN answer says it already
            bounds = np.nanquantile(draws, [tail, 1.0 - tail], axis=-1, method="weibull")
            return np.nanmean(draws, axis=-1), np.nanstd(draws, axis=-1, ddof=1), np.moveaxis(bounds, 0, -1)
    n = draws.shape[-1]
    mean = np.add.reduce(draws, axis=-1) / n
    stddev = np.sqrt(np.add.reduce((draws - mean[..., None]) ** 2, axis=-1) / max(n - 1, 1))
    ordered = np.sort(draws, axis=-1)
    bounds = []
    # the order statistic at q (S + 1) (numpy's "weibull" quantile): an interval between those at tail (S + 1) and
    # (1 - tail)(S + 1) holds the next draw with probability level (numpy's default quantile covers less)
    for q in (tail, 1.0 - tail):
        at = min(max(q * (n + 1) - 1.0, 0.0), n - 1.0)
        below = int(at)
        above = min(below + 1, n - 1)
        bounds.append(ordered[..., below] + (at - below) * (ordered[..., above] - ordered[..., below]))
    return mean, stddev, np.stack(bounds, axis=-1)


def support(mean: np.ndarray, stddev: np.ndarray) -> np.ndarray:
    """The trials behind a distribution's probabilities (..., card) with these posterior means and standard
    deviations: the n for which a Dirichlet of precision n with these means, what n trials seen outright (beyond a
    prior worth nothing) give, has the same total variance, n = sum_k m_k (1 - m_k) / sum_k sd_k^2 - 1 (clipped at
    0; infinite when every sd is 0: the answer is certain, e.g. the variable was given by label).
    """
    spread_total = np.sum(stddev ** 2, axis=-1)
    binomial = np.sum(mean * (1.0 - mean), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(spread_total > 0, binomial / spread_total - 1.0, np.inf)
    return np.where(np.isnan(spread_total), np.nan, np.maximum(n, 0.0))


__all__ = ["DRAW", "DRAWS", "ENSEMBLE", "EXACT_CASES", "LEVEL", "DrawEnsemble", "PosteriorSample",
           "dirichlet_prior", "dirichlet_rows", "draw_posterior", "has_draws", "impute", "missing_posterior",
           "scaled_to", "spread", "support", "update_draws", "with_draws"]
