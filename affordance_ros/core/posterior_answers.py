"""Answers under a model's posterior: every draw of its CPTs and every structure of its sample, and how sure they are.

The posterior draws a learn keeps (``core.posterior_sampling``: per structure, imputed counts whose Dirichlets are
draws of the CPTs) answer a query at once: the CPT sets drawn from them with a fixed seed, once per model, are
stacked along a hidden index variable ``DRAW`` (uniform) that is a parent of every variable the query needs; one exact
query of (query, DRAW) gives p(query | evidence, CPTs of draw s) for every s, through the same query engine as
``predict``. Standard deviations and 90 % credible intervals are those of these answers (``spread``), ``support`` the
trials behind them.

A model learned with structure 'average' holds a weighted sample of structures (``AffordanceNetwork.members``, drawn
by ``core.structure_sampling``), each with its CPTs' posterior draws. An answer averages the members':

- the probability: sum_m w_m p(query | evidence, structure m, its posterior-mean CPTs);
- the draws behind its standard deviation and interval: every imputation of every member, each drawn from
  ``ENSEMBLE / imputations`` times, pooled: each pooled draw is a joint draw of
  a structure and its CPTs, so a member holds its weight's share of them. ``thompson`` takes one of them.

Each draw's (and each member's) answer is normalised on its own: what is reported is the posterior of the probability
p(query | evidence), not the evidence's likelihood under each structure.

Members whose families the query needs are the same (Bayes-ball, ``query.requisite``, per evidence pattern) answer
alike up to their CPTs, so they are answered together: their CPT sets stacked along one index variable (``DRAW``) of
one network, the first member's structure (the query never reaches the families in which they differ). A query then
costs one pass per group of members, not per member. A model with one structure answers as before.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Mapping, Sequence

import numpy as np

from .errors import ModelFormatError
from .network import AffordanceNetwork, Variable
from .posterior_sampling import dirichlet_rows
from .query import posterior, requisite

ENSEMBLE = 200       # CPT sets drawn from the imputations' Dirichlets to answer under (at least one per imputation)
LEVEL = 0.90         # the credible intervals' probability
DRAW = "~draw"       # the ensemble's variable whose value says which draw's CPTs hold
ENSEMBLE_SEED = 20   # the CPTs drawn from a model's Dirichlets: the same answers every time the model is loaded
_MISSING_POSTERIOR = ("the model has no posterior draws (learned by a version before them, imported, or learned with "
                      "posterior_draws 0): learn it again to get them")

_MAX_PATTERNS = 256   # evidence patterns whose groups a model keeps (then forgotten, all at once)


def averaged(model: AffordanceNetwork) -> bool:
    """Whether ``model`` answers from a sample of more than one structure."""
    return len(model.members) > 1


def averaged_posterior(model: AffordanceNetwork, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
                       hard: Sequence[int] = ()) -> np.ndarray:
    """p(query jointly | evidence) (K, *query cards), averaged over ``model``'s structures (``query.posterior``'s
    arguments; a model with one structure answers as ``query.posterior`` does).
    """
    if not averaged(model):
        return posterior(model, query, likelihoods, hard)
    out = None
    for group in StructureAverage.of(model).groups(query, hard, likelihoods):
        joint = group.point_answers(query, likelihoods, hard)
        out = joint if out is None else out + joint
    return out


def averaged_draws(model: AffordanceNetwork, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
                   hard: Sequence[int] = ()) -> np.ndarray:
    """p(query | evidence) under every pooled posterior draw, (K, *query cards, S): NaN for a draw under which the
    evidence is impossible. ``model`` must have draws (``has_draws``).
    """
    if not has_draws(model):
        raise ModelFormatError(_MISSING_POSTERIOR)
    return np.concatenate([group.draw_answers(query, likelihoods, hard)
                           for group in StructureAverage.of(model).groups(query, hard, likelihoods)], axis=-1)


def draw_imputations(model: AffordanceNetwork, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
                     hard: Sequence[int] = ()) -> np.ndarray:
    """Which imputation of the learn (over all structures) each of ``averaged_draws``' draws comes from, (S,): the
    draws of one imputation share its counts, so their Monte Carlo noise is that of the imputations.
    """
    average = StructureAverage.of(model)
    return np.concatenate([average.imputations[k] for group in average.groups(query, hard, likelihoods)
                           for k in group.members])


class StructureAverage:
    """A model's members, their CPT sets for answers drawn once (fixed seed: the same answers whenever the model is
    loaded), and their groups per evidence pattern.
    """

    def __init__(self, model: AffordanceNetwork):
        self.model = model
        self.members = model.members
        self.weights = np.array([m.weight for m in self.members])
        self.draw_sets, self.imputations = draw_sets(self.members) if has_draws(model) else (None, None)
        self._groups: dict = {}

    @classmethod
    def of(cls, model: AffordanceNetwork) -> "StructureAverage":
        """The average of ``model``'s members (built on first use, then kept with the model)."""
        return model.derived("structure average", lambda: cls(model))

    def groups(self, query: Sequence[int], hard: Sequence[int], likelihoods: Mapping) -> list:
        """The members grouped by the families the query needs, for this evidence pattern (cached)."""
        hard = tuple(sorted(v for v in hard if v in likelihoods))
        soft = tuple(sorted(v for v in likelihoods if v not in hard))
        key = (tuple(query), hard, soft)
        found = self._groups.get(key)
        if found is None:
            if len(self._groups) >= _MAX_PATTERNS:
                self._groups.clear()
            by_families: dict = {}
            for k, member in enumerate(self.members):
                parents = [member.network.parent_indices(i) for i in range(len(self.model))]
                needed = requisite(parents, query, hard, soft)[0]
                by_families.setdefault(tuple(sorted((i, parents[i]) for i in needed)), []).append(k)
            found = self._groups[key] = [_Group(self, families, members) for families, members in by_families.items()]
        return found


class _Group:
    """Members that answer a query pattern alike: their point CPTs and their CPT draw sets, each stacked along
    ``DRAW`` in a network of the first member's structure (built on first use).
    """

    def __init__(self, average: StructureAverage, families: list, members: list):
        self.average = average
        self.needed = [i for i, _ in families]
        self.members = members
        self.weight = float(average.weights[members].sum())
        self._point = None
        self._draws = None

    def point_answers(self, query: Sequence[int], likelihoods: Mapping, hard: Sequence[int]) -> np.ndarray:
        """Sum over the group's members of w_m p(query | evidence, member m), (K, *query cards)."""
        first = self.average.members[self.members[0]].network
        if len(self.members) == 1 or not self.needed:
            return self.weight * posterior(first, query, likelihoods, hard)
        if self._point is None:
            cpts = [np.stack([self.average.members[k].network.variables[i].cpt for k in self.members])
                    for i in self.needed]
            self._point = _stacked(first, self.needed, cpts)
        joint = _per_draw(posterior(self._point, [*query, len(first)], likelihoods, hard))   # (K, *q, members)
        shares = self.average.weights[self.members]
        # (a member under which a case's evidence is impossible leaves its share to the others)
        possible = ~np.isnan(joint.reshape(len(joint), -1, len(shares))[:, 0])               # (K, members)
        scale = self.weight / np.maximum(possible @ shares, 1e-300)
        return np.tensordot(np.nan_to_num(joint), shares, axes=([-1], [0])) * scale.reshape(-1, *[1] * (joint.ndim - 2))

    def draw_answers(self, query: Sequence[int], likelihoods: Mapping, hard: Sequence[int]) -> np.ndarray:
        """p(query | evidence) under each of the group's pooled draws, (K, *query cards, draws)."""
        n_draws = sum(len(self.average.draw_sets[k][0]) for k in self.members)
        if not self.needed:   # the evidence alone answers (a query given by label): every draw alike
            first = self.average.members[self.members[0]].network
            answer = posterior(first, query, likelihoods, hard)
            return np.repeat(answer[..., None], n_draws, axis=-1)
        if self._draws is None:
            first = self.average.members[self.members[0]].network
            sets = self.average.draw_sets
            cpts = [np.concatenate([sets[k][i] for k in self.members]) for i in self.needed]
            self._draws = _stacked(first, self.needed, cpts)
        network = self._draws
        return _per_draw(posterior(network, [*query, len(network) - 1], likelihoods, hard))


def draw_sets(members) -> tuple[list, list]:
    """Per member, per variable, its CPT sets for answers (n_m, *CPT shape): the pooled imputations (every member's
    draws in turn) each drawn from ``ENSEMBLE / imputations`` times (at least once), with ``ENSEMBLE_SEED``; and per
    member the imputation (numbered over all members) each of its sets comes from.
    """
    rng = np.random.default_rng(ENSEMBLE_SEED)
    sizes = [m.network.variables[0].draws.shape[0] for m in members]
    total = sum(sizes)
    n_draws = max(ENSEMBLE, total)
    pooled = np.arange(n_draws) % total            # pooled draw j answers under imputation j mod total
    starts = np.cumsum([0, *sizes])
    sets, imputations = [], []
    for k, member in enumerate(members):
        mine = pooled[(pooled >= starts[k]) & (pooled < starts[k + 1])]
        sets.append([dirichlet_rows(v.draws[mine - starts[k]] + v.prior, rng) for v in member.network.variables])
        imputations.append(mine)
    return sets, imputations


def _stacked(network: AffordanceNetwork, needed: Sequence[int], cpts: Sequence[np.ndarray]) -> AffordanceNetwork:
    """``network`` with a root ``DRAW`` (its values the sets of ``cpts``) that is a parent of every variable in
    ``needed``, whose CPT given DRAW = s is ``cpts[.][s]``; the other variables keep their CPTs (the query does not
    need them).
    """
    n_sets = len(cpts[0])
    stacked = dict(zip(needed, cpts))
    variables = [dataclasses.replace(v, parents=(DRAW, *v.parents), cpt=stacked[i], counts=None, draws=None,
                                     prior=None, sensor=None) if i in stacked else
                 dataclasses.replace(v, counts=None, draws=None, prior=None, sensor=None)
                 for i, v in enumerate(network.variables)]
    variables.append(Variable(DRAW, "object", tuple(str(s) for s in range(n_sets)), (), None,
                              np.full(n_sets, 1.0 / n_sets)))
    return AffordanceNetwork(variables)


def _per_draw(joint: np.ndarray) -> np.ndarray:
    """p(query | evidence, DRAW = s) (K, *query cards, S) from p(query, DRAW | evidence); NaN where DRAW = s makes the
    evidence impossible.
    """
    total = joint.sum(axis=tuple(range(1, joint.ndim - 1)), keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, joint / total, np.nan)


def has_draws(model: AffordanceNetwork) -> bool:
    """Whether every CPT of ``model`` carries posterior draws (``Variable.draws``)."""
    return all(v.draws is not None for v in model.variables) and model.parameterised


def missing_posterior(what: str) -> ModelFormatError:
    """The error for ``what`` (e.g. "strategy 'thompson'") asked of a model without posterior draws."""
    return ModelFormatError(f"{what} needs the posterior of the CPTs, and {_MISSING_POSTERIOR} "
                            "(affordance-ros learn, or the node's ~/learn)")


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


__all__ = ["DRAW", "ENSEMBLE", "LEVEL", "StructureAverage", "averaged", "averaged_draws", "averaged_posterior",
           "draw_imputations", "draw_sets", "has_draws", "missing_posterior", "spread", "support"]
