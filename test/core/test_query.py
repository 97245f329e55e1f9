"""Queries (core.query: plans on the calibrated junction tree, the joint table of a tiny network) against
brute-force enumeration, with every way a plan can run: from the joint table, on the tree, and on the
tree with every table treated as large (summed ahead, sliced at labels, many cases by einsum)."""

import importlib
import math

import numpy as np
import pytest
from helpers import brute_force_joint, random_network

from affordance_ros.core import AffordanceNetwork, EvidenceError, Variable, benchmark_network, predict, predict_batch
from affordance_ros.core import query as query_module
from affordance_ros.core.ground_truth import random_cpts
from affordance_ros.core.query import JointPlan, QueryPlan, TreePlan, engine, plan, posterior, requisite

PLANS = {"joint": {}, "tree": {"JOINT_ENTRIES": 0}, "tree, large tables": {"JOINT_ENTRIES": 0, "SUM_AHEAD_ABOVE": 0}}


@pytest.fixture(params=list(PLANS))
def plans(request, monkeypatch):
    """Which plans the networks of a test get (models made in the test have fresh engines)."""
    for name, value in PLANS[request.param].items():
        monkeypatch.setattr(query_module, name, value)
    return request.param


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


def _impossible(net, liks, k):
    with np.errstate(divide="ignore", invalid="ignore"):
        rows = [np.log(liks[i][k]) if i in liks else None for i in range(len(net))]
        return not np.isfinite(brute_force_joint(net, rows)[1])


@pytest.mark.parametrize("seed", range(25))
def test_plan_matches_brute_force_with_hard_and_soft_evidence(seed, plans):
    rng = np.random.default_rng(seed)
    net = random_network(rng, n_vars=int(rng.integers(3, 8)), max_parents=3)
    for _ in range(4):
        hard, soft, liks = _random_pattern(net, rng, n_cases=3)
        size = int(rng.integers(1, 4))
        query = [int(q) for q in rng.permutation(len(net))[:size]]
        try:
            got = posterior(net, query, liks, hard=hard)
        except EvidenceError as exc:
            # impossible hard evidence (a zero CPT entry) must be impossible by enumeration too, and named
            impossible = [k for k in range(3) if _impossible(net, liks, k)]
            assert impossible and str(impossible[:1])[:-1] in str(exc)
            continue
        n_cases = 3 if liks else 1
        assert got.shape == (n_cases, *[net.variables[q].card for q in query])
        for k in range(n_cases):
            np.testing.assert_allclose(got[k], _brute(net, query, liks, k), atol=1e-12)
            # one case alone: labels are sliced at, not multiplied in
            if not _impossible(net, liks, k):
                one = posterior(net, query, {v: x[k:k + 1] for v, x in liks.items()}, hard=hard)
                np.testing.assert_allclose(one[0], got[k], atol=1e-12)


def test_plans_are_the_ones_asked_for(plans):
    rng = np.random.default_rng(0)
    net = random_network(rng, n_vars=6)
    compiled = plan(net, [0], (), [1])
    assert isinstance(compiled, JointPlan if plans == "joint" else TreePlan)
    assert isinstance(compiled, QueryPlan)
    assert not isinstance(plan(net, [0], (), [1], one_case=False), JointPlan)     # many cases: on a tree


def test_bayes_ball_prunes_barren_and_d_separated_nodes():
    # chain A -> B -> C -> D, and E a child of A: p(B | C observed) needs A, B, C's CPT? no:
    # Bayes-ball: CPTs of A, B, C (C observed, its CPT relates B), never D (barren) nor E (barren)
    parents = [(), (0,), (1,), (2,), (0,)]
    needed, soft_used = requisite(parents, [1], hard=[2], soft=[3])
    assert needed == {0, 1, 2} and soft_used == set()
    # A observed blocks: p(D | A) needs B, C, D, not A's CPT nor E
    needed, _ = requisite(parents, [3], hard=[0], soft=[])
    assert needed == {1, 2, 3}
    # soft evidence on E is used for p(D) (E's virtual child is an observed descendant of A)
    needed, soft_used = requisite(parents, [3], hard=[], soft=[4])
    assert soft_used == {4} and needed == {0, 1, 2, 3, 4}


def test_a_batch_runs_on_the_part_of_the_network_it_needs():
    """Many cases: barren nodes (D, E) are left out of the batch's tree; the answers equal the whole tree's."""
    rng = np.random.default_rng(4)
    net = random_cpts(AffordanceNetwork([
        Variable("A", "object", ("a0", "a1", "a2"), ()), Variable("B", "object", ("b0", "b1"), ("A",)),
        Variable("C", "effect", ("c0", "c1"), ("B",)), Variable("D", "effect", ("d0", "d1"), ("C",)),
        Variable("E", "effect", ("e0", "e1", "e2"), ("A", "D"))]), rng)
    liks = {2: rng.uniform(0.1, 1.0, (50, 2)), 0: np.eye(3)[rng.integers(0, 3, 50)]}
    batch = plan(net, [1], [0], [2], one_case=False)
    assert batch.kept == (0, 1, 2)     # A for its label only, B, C
    got = posterior(net, [1], liks, hard=[0])
    for k in (0, 17, 49):
        np.testing.assert_allclose(got[k], _brute(net, [1], liks, k), atol=1e-12)


def test_chunked_batch_equals_one_at_a_time(plans, monkeypatch):
    rng = np.random.default_rng(5)
    net = random_network(rng, n_vars=7, max_parents=3, max_card=4)
    monkeypatch.setattr(query_module, "CHUNK_ELEMENTS", 1 << 10)    # chunks of a few cases
    hard, soft, liks = _random_pattern(net, rng, n_cases=1)
    soft = [v for v in range(len(net)) if v not in hard][:3]
    liks = {v: rng.uniform(0.05, 1, (700, net.variables[v].card)) for v in soft}
    query = [next(v for v in range(len(net)) if v not in soft)]
    compiled = plan(net, query, (), soft)
    assert query_module.CHUNK_ELEMENTS // compiled.max_table < 700
    many = posterior(net, query, liks)
    for k in (0, 333, 699):
        one = compiled({v: x[k:k + 1] for v, x in liks.items()})
        np.testing.assert_allclose(many[k], one[0], atol=1e-14)


def test_an_impossible_case_is_named_by_its_row_in_the_whole_batch(plans, monkeypatch):
    monkeypatch.setattr(query_module, "CHUNK_ELEMENTS", 1 << 6)
    a = Variable("A", "object", ("a0", "a1"), (), cpt=np.array([1.0, 0.0]))
    b = Variable("B", "effect", ("b0", "b1"), ("A",), cpt=np.array([[0.3, 0.7], [0.6, 0.4]]))
    net = AffordanceNetwork([a, b])
    labels = np.zeros((500, 2))
    labels[:, 0] = 1.0
    labels[[321, 444], :] = [0.0, 1.0]    # A = a1 has probability zero
    with pytest.raises(EvidenceError, match=r"case\(s\) \[321, 444\]"):
        posterior(net, [1], {0: labels})


def test_evidence_too_improbable_for_unnormalised_messages_stays_exact(plans):
    """A chain whose evidence has probability far below 1e-280: the plan computes it again normalising
    every message (exact), and answers as the forward-backward recursion does."""
    n = 300     # a chain that stays put with probability 0.99, told by the evidence to switch every time
    stay = np.array([[0.99, 0.01], [0.01, 0.99]])
    net = AffordanceNetwork([Variable("X0", "effect", ("a", "b"), (), cpt=np.array([0.3, 0.7]))] + [
        Variable(f"X{i}", "effect", ("a", "b"), (f"X{i - 1}",), cpt=stay) for i in range(1, n)])
    liks = {i: np.array([[1.0, 1e-3]]) if i % 2 else np.array([[1e-3, 1.0]]) for i in range(1, n)}
    got, totals = plan(net, [0], (), list(liks)).evaluate(liks)
    assert totals is not None and totals[0] > 0     # it did compute again, and the evidence is possible
    got = got[0]
    backward = np.ones(2)                      # p(evidence of X1.. | X0), normalised step by step
    for i in range(n - 1, 0, -1):
        backward = net.variables[i].cpt @ (liks[i][0] * backward)
        backward /= backward.sum()
    want = net.variables[0].cpt * backward
    np.testing.assert_allclose(got, want / want.sum(), rtol=1e-10)
    np.testing.assert_allclose(posterior(net, [0], liks)[0], got, rtol=1e-14)


def test_the_joint_table_hands_a_vanishing_total_to_the_tree():
    """Every entry of the joint times the evidence underflows (1e-400): the tree's plan, normalising its
    messages, answers instead; evidence that is really impossible is still reported."""
    rare = np.array([1.0, 1e-200])
    net = AffordanceNetwork([Variable("A", "object", ("a0", "a1"), (), cpt=rare),
                             Variable("B", "object", ("b0", "b1"), (), cpt=rare),
                             Variable("C", "object", ("c0", "c1"), (), cpt=np.array([1.0, 0.0]))])
    against = {0: rare[None, ::-1].copy(), 1: rare[None, ::-1].copy()}
    compiled = plan(net, [0], (), [0, 1])
    assert isinstance(compiled, JointPlan)
    joint, totals = compiled.evaluate(against)
    assert totals is not None
    np.testing.assert_allclose(joint[0], [0.5, 0.5], rtol=1e-12)
    with pytest.raises(EvidenceError, match=r"case\(s\) \[0\] has probability zero"):
        posterior(net, [0], {**against, 2: np.array([[0.0, 1.0]])}, hard=[2])


def test_a_plan_visits_only_the_paths_from_the_evidence_to_the_query(monkeypatch):
    monkeypatch.setattr(query_module, "JOINT_ENTRIES", 0)
    rng = np.random.default_rng(1)
    chain = random_cpts(AffordanceNetwork([Variable(f"X{i}", "effect", ("a", "b"), (f"X{i - 1}",) if i else ())
                                           for i in range(10)]), rng)
    near = plan(chain, [0], (), [1])
    far = plan(chain, [0], (), [9])
    both = plan(chain, [4], [0], [9])
    assert len(near.cliques) == 1 and len(far.cliques) == 9 and len(both.cliques) == 9
    assert len(engine(chain).cliques) == 9


def test_the_joint_table_and_the_tree_agree_on_montesano(monkeypatch):
    truth = benchmark_network("montesano", sigma=2.0, seed=3)
    assert math.prod(truth.cards) > query_module.JOINT_ENTRIES           # by default: on the tree
    sensors = {"obj_vel": 5.3, "contact": 6.2, "hand_vel": 0.4}
    values = {"Shape": "box", "Size": "small"}
    on_tree = predict(truth, ["effect"], sensors=sensors, values=values)
    monkeypatch.setattr(query_module, "JOINT_ENTRIES", math.prod(truth.cards))
    again = AffordanceNetwork(truth.variables)
    from_joint = predict(again, ["effect"], sensors=sensors, values=values)
    assert isinstance(next(iter(engine(again).plans.values())), JointPlan)
    for name, dist in on_tree.marginals.items():
        np.testing.assert_allclose(list(from_joint.marginals[name].values()), list(dist.values()), atol=1e-13)
    assert from_joint.most_probable == on_tree.most_probable


def test_predict_uses_the_plan_and_equals_predict_batch():
    truth = benchmark_network("montesano", sigma=2.0, seed=3)
    sensors = {"obj_vel": 5.3, "contact": 6.2, "hand_vel": 0.4}
    values = {"Shape": "box", "Size": "small"}
    one = predict(truth, ["action"], sensors=sensors, values=values)
    batch = predict_batch(truth, ["action"], {s: [x] for s, x in sensors.items()},
                          {n: [x] for n, x in values.items()})
    np.testing.assert_allclose(list(one.marginals["Action"].values()), batch.marginals["Action"][0], atol=1e-14)
    key = ((truth.index("Action"),), tuple(sorted([truth.index("Shape"), truth.index("Size")])),
           tuple(sorted(truth.index(truth.sensor_variable[s]) for s in sensors)), True)
    assert isinstance(engine(truth).plans[key], QueryPlan)
    assert plan(truth, *key) is engine(truth).plans[key]


def test_a_batch_mixing_evidence_patterns_equals_one_query_at_a_time(monkeypatch):
    """None: not observed in that case. The evidence is made a few cases at a time (here 7)."""
    monkeypatch.setattr(importlib.import_module("affordance_ros.core.predict"), "EVIDENCE_CASES", 7)
    truth = benchmark_network("montesano", sigma=2.0, seed=5)
    rng = np.random.default_rng(2)
    readings = [None if rng.random() < 0.4 else float(x) for x in rng.normal(5, 3, 30)]
    shapes = [None if rng.random() < 0.4 else str(x) for x in rng.choice(truth["Shape"].values, 30)]
    batch = predict_batch(truth, ["action"], sensors={"obj_vel": readings}, values={"Shape": shapes})
    for k in range(30):
        one = predict(truth, ["action"], sensors={} if readings[k] is None else {"obj_vel": readings[k]},
                      values={} if shapes[k] is None else {"Shape": shapes[k]})
        np.testing.assert_allclose(batch.marginals["Action"][k], list(one.marginals["Action"].values()), atol=1e-13)
    with pytest.raises(EvidenceError, match="finite"):
        predict_batch(truth, ["action"], sensors={"obj_vel": [1.0, float("nan")]})
