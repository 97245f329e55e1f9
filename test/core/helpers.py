"""Shared test fixtures: random networks and brute-force enumeration of the joint."""

import itertools

import numpy as np

from affordance_ros.core import AffordanceNetwork, LearningOptions, SensorModel, Variable
from affordance_ros.core.ground_truth import random_cpts


def plain(**options) -> LearningOptions:
    """Learning options with plain EM (``em_acceleration`` "none"), the others as given or the defaults."""
    return LearningOptions(em_acceleration="none", **options)


def random_network(rng, n_vars=6, max_parents=3, max_card=3, sensor_fraction=0.7):
    """A random DAG over n_vars variables (order = index), random CPTs and some sensors."""
    variables = []
    for i in range(n_vars):
        card = int(rng.integers(2, max_card + 1))
        k = int(rng.integers(0, min(i, max_parents) + 1))
        parents = tuple(f"V{j}" for j in sorted(rng.choice(i, size=k, replace=False))) if k else ()
        sensor = None
        if rng.random() < sensor_fraction:
            sensor = SensorModel(f"s{i}", np.sort(rng.normal(0, 4, card)), rng.uniform(0.5, 3.0, card))
        group = ("action", "object", "effect")[min(2, i * 3 // n_vars)]
        variables.append(Variable(f"V{i}", group, tuple(f"v{i}_{j}" for j in range(card)), parents, sensor))
    # shuffle the declared order so that topological order != declaration order
    order = rng.permutation(n_vars)
    net = AffordanceNetwork([variables[j] for j in order])
    return random_cpts(net, rng, alpha=0.7)


def brute_force_joint(network, log_lik_rows):
    """p(all variables | evidence) for one case by enumerating every joint state.

    log_lik_rows: per variable a (card,) array of log-likelihoods or None.
    Returns (joint array over variables in network order, log p(evidence)).
    """
    cards = network.cards
    joint = np.zeros(cards)
    for state in itertools.product(*[range(c) for c in cards]):
        p = 1.0
        for i, v in enumerate(network.variables):
            idx = tuple(state[network.index(q)] for q in v.parents) + (state[i],)
            p *= v.cpt[idx]
            if log_lik_rows[i] is not None:
                p *= np.exp(log_lik_rows[i][state[i]])
        joint[state] = p
    z = joint.sum()
    return joint / z, np.log(z)
