"""Answers averaged over a model's sample of structures (Bayesian model averaging), and the draws behind how sure.

A model learned with structure 'average' holds a weighted sample of structures (``AffordanceNetwork.members``, drawn
by ``core.structure_posterior``), each with its CPTs' posterior draws. An answer averages the members':

- the probability: sum_m w_m p(query | evidence, structure m, its posterior-mean CPTs);
- the draws behind its standard deviation and interval: every imputation of every member, each drawn from
  ``ENSEMBLE / imputations`` times as in ``core.posterior.DrawEnsemble``, pooled: each pooled draw is a joint draw of
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
import weakref
from typing import Mapping, Sequence

import numpy as np

from .network import AffordanceNetwork, Variable
from .posterior import DRAW, ENSEMBLE, ENSEMBLE_SEED, DrawEnsemble, dirichlet_rows, has_draws
from .query import posterior, requisite

_AVERAGES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MAX_PATTERNS = 256   # evidence patterns whose groups a model keeps (then forgotten, all at once)


def averaged(model: AffordanceNetwork) -> bool:
    """Whether ``model`` answers from a sample of more than one structure."""
    return len(model.members) > 1


def averaged_posterior(model: AffordanceNetwork, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
                       hard: Sequence[int] = ()) -> np.ndarray:
    """p(query jointly | evidence) (K, *query cards), averaged over ``model``'s structures (``query.posterior``'s
    arguments).
    """
    if not averaged(model):
        return posterior(model, query, likelihoods, hard)
    average = StructureAverage.of(model)
    out = None
    for group in average.groups(query, hard, likelihoods):
        joint = group.point_answers(query, likelihoods, hard)
        out = joint if out is None else out + joint
    return out


def averaged_draws(model: AffordanceNetwork, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
                   hard: Sequence[int] = ()) -> np.ndarray:
    """p(query | evidence) under every pooled posterior draw, (K, *query cards, S): NaN for a draw under which the
    evidence is impossible. ``model`` must have draws (``has_draws``).
    """
    if not averaged(model):
        ensemble = DrawEnsemble.of(model)
        return ensemble.answers(posterior(ensemble.network, [*query, ensemble.draw], likelihoods, hard))
    average = StructureAverage.of(model)
    return np.concatenate([group.draw_answers(query, likelihoods, hard)
                           for group in average.groups(query, hard, likelihoods)], axis=-1)


def draw_imputations(model: AffordanceNetwork, query: Sequence[int], likelihoods: Mapping[int, np.ndarray],
                     hard: Sequence[int] = ()) -> np.ndarray:
    """Which imputation of the learn (over all structures) each of ``averaged_draws``' draws comes from, (S,): the
    draws of one imputation share its counts, so their Monte Carlo noise is that of the imputations.
    """
    if not averaged(model):
        n_draws = DrawEnsemble.of(model).n_draws
        return np.arange(n_draws) % model.variables[0].draws.shape[0]
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
        self.draw_sets, self.imputations = _draw_sets(self.members) if has_draws(model) else (None, None)
        self._groups: dict = {}

    @classmethod
    def of(cls, model: AffordanceNetwork) -> "StructureAverage":
        """The average of ``model``'s members (built on first use, then kept as long as the model)."""
        found = _AVERAGES.get(model)
        if found is None:
            found = _AVERAGES[model] = cls(model)
        return found

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
        if len(self.members) == 1:
            return self.weight * posterior(first, query, likelihoods, hard)
        if self._point is None:
            cpts = [np.stack([self.average.members[k].network.variables[i].cpt for k in self.members])
                    for i in self.needed]
            self._point = _stacked(first, self.needed, cpts)
        joint = _per_draw(posterior(self._point, [*query, len(first)], likelihoods, hard))   # (K, *q, members)
        shares = self.average.weights[self.members]
        return np.tensordot(np.nan_to_num(joint), shares, axes=([-1], [0]))

    def draw_answers(self, query: Sequence[int], likelihoods: Mapping, hard: Sequence[int]) -> np.ndarray:
        """p(query | evidence) under each of the group's pooled draws, (K, *query cards, draws)."""
        if self._draws is None:
            first = self.average.members[self.members[0]].network
            sets = self.average.draw_sets
            cpts = [np.concatenate([sets[k][i] for k in self.members]) for i in self.needed]
            self._draws = _stacked(first, self.needed, cpts)
        network = self._draws
        return _per_draw(posterior(network, [*query, len(network) - 1], likelihoods, hard))


def _draw_sets(members) -> tuple[list, list]:
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


__all__ = ["StructureAverage", "averaged", "averaged_draws", "averaged_posterior", "draw_imputations"]
