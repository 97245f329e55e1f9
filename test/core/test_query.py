"""The single-query fast path (pruned plans, collect toward the query) against brute-force enumeration."""

import numpy as np
import pytest
from helpers import brute_force_joint, random_network

from affordance_ros.core import EvidenceError, benchmark_network, predict, predict_batch
from affordance_ros.core.query import QueryPlan, plan, posterior


def _random_pattern(net, rng, n_cases):
    """Random hard (one-hot, values sampled so the evidence is possible) and soft evidence."""
    n = len(net)
    chosen = rng.permutation(n)[: int(rng.integers(0, n))]
    hard = [int(v) for v in chosen if rng.random() < 0.5]
    soft = [int(v) for v in chosen if v not in hard]
    liks = {}
    for v in hard:
        card = net.variables[v].card
        liks[v] = np.eye(card)[rng.integers(0, card, n_cases)]
    for v in soft:
        liks[v] = rng.uniform(0.05, 1.0, (n_cases, net.variables[v].card))
    return hard, soft, liks


def _brute(net, query, liks, k):
    with np.errstate(divide="ignore"):
        rows = [np.log(liks[i][k]) if i in liks else None for i in range(len(net))]
        joint, _ = brute_force_joint(net, rows)
    others = tuple(a for a in range(len(net)) if a not in query)
    marg = joint.sum(axis=others)
    kept = sorted(query)
    return np.transpose(marg, [kept.index(q) for q in query])


@pytest.mark.parametrize("seed", range(25))
def test_plan_matches_brute_force_with_hard_and_soft_evidence(seed):
    rng = np.random.default_rng(seed)
    net = random_network(rng, n_vars=int(rng.integers(3, 8)), max_parents=3)
    for _ in range(4):
        hard, soft, liks = _random_pattern(net, rng, n_cases=3)
        size = int(rng.integers(1, 3))
        query = [int(q) for q in rng.permutation(len(net))[:size]]
        try:
            got = posterior(net, query, liks, hard=hard)
        except EvidenceError:
            # impossible hard evidence (a zero CPT entry) must be impossible by enumeration too
            impossible = []
            for k in range(3):
                rows = [np.log(liks[i][k]) if i in liks else None for i in range(len(net))]
                with np.errstate(divide="ignore", invalid="ignore"):
                    impossible.append(not np.isfinite(brute_force_joint(net, rows)[1]))
            assert any(impossible)
            continue
        n_cases = 3 if liks else 1
        assert got.shape == (n_cases, *[net.variables[q].card for q in query])
        for k in range(n_cases):
            np.testing.assert_allclose(got[k], _brute(net, query, liks, k), atol=1e-12)


def test_chunked_batch_equals_one_at_a_time():
    rng = np.random.default_rng(5)
    net = random_network(rng, n_vars=7, max_parents=3, max_card=4)
    hard, soft, liks = _random_pattern(net, rng, n_cases=1)
    soft = [v for v in range(len(net)) if v not in hard][:3]
    liks = {v: rng.uniform(0.05, 1, (700, net.variables[v].card)) for v in soft}
    query = [next(v for v in range(len(net)) if v not in soft)]
    compiled = plan(net, query, (), soft)
    many = posterior(net, query, liks)   # chunks of 1 << 16 // clique size
    for k in (0, 333, 699):
        one = compiled({v: x[k:k + 1] for v, x in liks.items()})
        np.testing.assert_allclose(many[k], one[0], atol=1e-14)


def test_predict_uses_the_plan_and_equals_predict_batch():
    truth = benchmark_network("montesano", sigma=2.0, seed=3)
    sensors = {"obj_vel": 5.3, "contact": 6.2, "hand_vel": 0.4}
    values = {"Shape": "box", "Size": "small"}
    one = predict(truth, ["action"], sensors=sensors, values=values)
    batch = predict_batch(truth, ["action"], {s: [x] for s, x in sensors.items()},
                          {n: [x] for n, x in values.items()})
    np.testing.assert_allclose(list(one.marginals["Action"].values()), batch.marginals["Action"][0], atol=1e-14)
    assert isinstance(plan(truth, [truth.index("Action")], [truth.index("Shape"), truth.index("Size")],
                           sorted(truth.index(truth.sensor_variable[s]) for s in sensors)), QueryPlan)
