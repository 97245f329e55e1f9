"""Online (stepwise) EM: update the CPTs as each case arrives.

Stepwise EM (Cappé & Moulines 2009; Liang & Klein 2009) keeps running averages of the
expected family counts per case, s <- (1 - eta_t) s + eta_t * E[counts | new cases], with
eta_t = (t + offset) ** -exponent, exponent in (0.5, 1]; the CPTs are the M-step of
those averages scaled by the number of cases seen, with the Dirichlet prior.

The Dirichlet posterior counts of a model that has them (``Variable.counts``: what the learner saw)
are kept up to date as well: each case adds its expected family counts, unweighted (the Bayesian
update; the step sizes above only make the CPTs forget their start faster). So are the posterior draws of a
model that has them (``Variable.draws``): each case is imputed under every draw and added to its counts
(``core.posterior_sampling.update_draws``; the model's metadata "posterior" counts these ``online_updates``).

A model that averages over a sample of structures (``AffordanceNetwork.structures``) adds every case to every
structure's draws, and each structure's CPTs and counts are, as at learn time, the posterior mean of its draws (so a
structure costs one imputation of the case per draw, and its file entry holds its draws only); the
structures and their weights stay as the learn drew them, until the next learn.
"""

from __future__ import annotations

import numpy as np

from .cases import CaseSet
from .em import normalise_counts
from .errors import DataError, ModelFormatError
from .inference import JunctionTree
from .network import AffordanceNetwork, WeightedNetwork
from .parameters import family_priors
from .posterior_answers import has_draws
from .posterior_sampling import update_draws


class OnlineEM:
    """Incremental parameter learning for a network whose structure and sensors are known.

    ``partial_fit(cases)`` processes the cases in mini-batches of ``batch_size`` (1: one
    update per case, as the node does when a trial arrives). Starts from the network's
    CPTs if it has them, else uniform; ``start_weight`` says how many cases those CPTs are
    worth (e.g. the number a batch-learned model was learned from), so that new cases refine
    them instead of replacing them. ``counts``: the Dirichlet posterior counts, the network's plus the
    expected counts of every case since (None when the network has none: they are not known).
    """

    def __init__(self, network: AffordanceNetwork, prior: float = 1.0, step_exponent: float = 0.7,
                 step_offset: float = 2.0, batch_size: int = 1, start_weight: float = 0.0):
        if not network.structure_known:
            raise ModelFormatError("online EM needs a structure: learn or configure the arcs first")
        if not 0.5 < step_exponent <= 1.0:
            raise ModelFormatError("step_exponent must be in (0.5, 1] for stepwise EM to converge")
        if step_offset < 1 or batch_size < 1 or prior < 0 or start_weight < 0:
            raise ModelFormatError("step_offset must be >= 1, batch_size >= 1, prior and start_weight >= 0")
        self.structures = list(network.structures)
        self.structure_draws = [[v.draws for v in m.network.variables] for m in self.structures]
        self.network = network
        self.prior = prior
        self.step_exponent = step_exponent
        self.step_offset = step_offset
        self.batch_size = batch_size
        self.tree = JunctionTree(network)
        self.cpts = [v.cpt if v.cpt is not None else
                     np.full([network[p].card for p in v.parents] + [v.card], 1.0 / v.card)
                     for v in network.variables]
        self.stats = None
        self.counts = [v.counts for v in network.variables] if network.has_counts else None
        posterior = network.metadata.get("posterior") or {}
        self.draws = [v.draws for v in network.variables] if has_draws(network) else None
        self.draw_updates = int(posterior.get("online_updates", 0))
        self._rng = np.random.default_rng([int(posterior.get("seed", 0)), self.draw_updates, 32])
        self.n_seen = 0
        self.n_updates = 0
        if start_weight > 0 and all(v.cpt is not None for v in network.variables):
            self.stats = family_priors(network, network)
            self.n_seen = start_weight
            self.n_updates = start_weight

    def partial_fit(self, cases: CaseSet) -> "OnlineEM":
        """Update the CPTs with ``cases``, one stepwise-EM step per mini-batch."""
        if cases.n_cases == 0:
            raise DataError("no cases to update from")
        evidence = cases.evidence(self.network)
        if self.structures:   # (every structure has the same variables and sensors: the same evidence)
            self.structure_draws = [update_draws(m.network, draws, [v.prior for v in m.network.variables], evidence,
                                                 self._rng)
                                    for m, draws in zip(self.structures, self.structure_draws)]
            self.draw_updates += evidence.n_cases
            return self
        if self.draws is not None:
            self.draws = update_draws(self.network, self.draws, [v.prior for v in self.network.variables], evidence,
                                      self._rng)
            self.draw_updates += evidence.n_cases
        for start in range(0, evidence.n_cases, self.batch_size):
            batch = evidence.take(slice(start, start + self.batch_size))
            counts, _ = self.tree.expected_counts(self.cpts, batch)
            if self.counts is not None:
                self.counts = [total + c for total, c in zip(self.counts, counts)]
            mean = [c / batch.n_cases for c in counts]
            eta = (self.n_updates + self.step_offset) ** -self.step_exponent
            if self.stats is None:
                self.stats = mean
            else:
                self.stats = [(1 - eta) * s + eta * m for s, m in zip(self.stats, mean)]
            self.n_seen += batch.n_cases
            self.n_updates += 1
            self.cpts = [normalise_counts(s * self.n_seen, self.prior) for s in self.stats]
        return self

    @property
    def model_(self) -> AffordanceNetwork:
        """The network with the current CPTs (and counts, and posterior draws): of every structure of a sample."""
        if self.structures:
            members = [WeightedNetwork(m.weight, m.network.with_posterior({v.name: (d, v.prior) for v, d in
                                                                           zip(m.network.variables, draws)}))
                       for m, draws in zip(self.structures, self.structure_draws)]
            first = members[0].network
            model = AffordanceNetwork(first.variables, self.network.metadata, self.network.learning, members)
            updates = self.draw_updates
            if "posterior" in model.metadata:
                model.metadata = {**model.metadata, "posterior": {**model.metadata["posterior"],
                                                                  "online_updates": updates}}
            return model
        names = self.network.names
        draws = None if self.draws is None else {v.name: (d, v.prior) for v, d in zip(self.network.variables,
                                                                                      self.draws)}
        model = self.network.with_cpts(dict(zip(names, self.cpts)),
                                       None if self.counts is None else dict(zip(names, self.counts)), draws)
        if draws is not None:
            model.metadata["posterior"] = {**model.metadata.get("posterior", {}), "online_updates": self.draw_updates}
        return model

