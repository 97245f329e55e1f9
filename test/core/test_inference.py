"""Exact inference checked against brute-force enumeration of the joint distribution."""

import numpy as np
import pytest
from helpers import brute_force_joint, random_network

from affordance_ros.core import CaseSet, EvidenceError, predict, predict_batch
from affordance_ros.core.ground_truth import benchmark_network, benchmark_structure
from affordance_ros.core.inference import JunctionTree, joint_posterior
from affordance_ros.core.parameters import log_likelihood


def random_evidence(network, rng, k):
    """Columns of K cases mixing labels, sensor readings and nothing."""
    columns = {}
    for v in network.variables:
        kind = rng.choice(["none", "label", "sensor"] if v.sensor else ["none", "label"], p=None)
        if kind == "label":
            columns[v.name] = [v.values[j] if rng.random() < 0.7 else None
                               for j in rng.integers(0, v.card, k)]
        elif kind == "sensor":
            columns[v.sensor.name] = list(rng.normal(0, 5, k))
    return columns


def log_lik_rows(network, cases, k):
    """Per variable the case's log-likelihood row, mirroring CaseSet.evidence without scaling."""
    rows = [None] * len(network)
    for name, codes in cases.labels.items():
        i = network.index(name)
        if codes[k] >= 0:
            rows[i] = np.where(np.arange(network.variables[i].card) == codes[k], 0.0, -np.inf)
    for sensor, x in cases.readings.items():
        var, model = network.sensor(sensor)
        if not np.isnan(x[k]):
            i = network.index(var.name)
            ll = model.log_likelihood(x[k:k + 1])[0]
            rows[i] = ll if rows[i] is None else rows[i] + ll
    return rows


@pytest.mark.parametrize("seed", range(25))
def test_marginals_joint_and_likelihood_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    net = random_network(rng, n_vars=int(rng.integers(3, 8)))
    columns = random_evidence(net, rng, 6)
    cases = CaseSet.from_columns(net, columns)
    evidence = cases.evidence(net)
    tree = JunctionTree(net)
    cal = tree.calibrate([v.cpt for v in net.variables], evidence)
    marginals = tree.marginals(cal)
    for k in range(cases.n_cases):
        joint, log_z = brute_force_joint(net, log_lik_rows(net, cases, k))
        assert cal.log_likelihood[k] == pytest.approx(log_z, abs=1e-9)
        for i in range(len(net)):
            expected = joint.sum(axis=tuple(j for j in range(len(net)) if j != i))
            np.testing.assert_allclose(marginals[i][k], expected, atol=1e-9)
        # joint posterior of a random pair and a random triple (often spanning cliques)
        for size in (2, 3):
            query = sorted(rng.choice(len(net), size=min(size, len(net)), replace=False).tolist())
            rng.shuffle(query)
            expected = joint.sum(axis=tuple(j for j in range(len(net)) if j not in query))
            expected = np.transpose(expected, np.argsort(np.argsort(query)))
            got = joint_posterior(tree, cal, query)[k]
            np.testing.assert_allclose(got, expected, atol=1e-9)


def brute_force_counts(net, cases):
    """Expected family counts (shaped like the CPTs) and the total log-likelihood, by enumerating every case."""
    expected = [np.zeros(v.cpt.shape) for v in net.variables]
    expected_ll = 0.0
    for k in range(cases.n_cases):
        joint, log_z = brute_force_joint(net, log_lik_rows(net, cases, k))
        expected_ll += log_z
        for i, v in enumerate(net.variables):
            axes = [net.index(p) for p in v.parents] + [i]
            fam = joint.sum(axis=tuple(j for j in range(len(net)) if j not in axes))
            expected[i] += np.transpose(fam, np.argsort(np.argsort(axes)))
    return expected, expected_ll


@pytest.mark.parametrize("seed", range(10))
def test_expected_counts_equal_brute_force_family_posteriors(seed):
    rng = np.random.default_rng(100 + seed)
    net = random_network(rng, n_vars=int(rng.integers(3, 7)))
    cases = CaseSet.from_columns(net, random_evidence(net, rng, 7))
    tree = JunctionTree(net)
    counts, total_ll = tree.expected_counts([v.cpt for v in net.variables], cases.evidence(net), chunk_size=3)
    expected, expected_ll = brute_force_counts(net, cases)
    assert total_ll == pytest.approx(expected_ll, abs=1e-8)
    for got, want in zip(counts, expected):
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_predict_matches_brute_force_on_montesano_with_soft_and_hard_evidence():
    net = benchmark_network("montesano", sigma=3.0, seed=4)
    sensors = {"obj_vel": 6.3, "contact": 2.4}
    values = {"Action": "tap", "Shape": "box"}
    pred = predict(net, ["object", "HandVel"], sensors=sensors, values=values)
    cases = CaseSet.from_columns(net, {**{k: [v] for k, v in sensors.items()}, **{k: [v] for k, v in values.items()}})
    joint, _ = brute_force_joint(net, log_lik_rows(net, cases, 0))
    query = ["Color", "Shape", "Size", "HandVel"]
    idx = [net.index(q) for q in query]
    q_joint = joint.sum(axis=tuple(j for j in range(len(net)) if j not in idx))
    for name in query:
        i = net.index(name)
        want = joint.sum(axis=tuple(j for j in range(len(net)) if j != i))
        assert list(pred.marginals[name]) == list(net[name].values)
        np.testing.assert_allclose(list(pred.marginals[name].values()), want, atol=1e-9)
    best = np.unravel_index(np.argmax(q_joint), q_joint.shape)
    assert pred.most_probable == {q: net[q].values[b] for q, b in zip(query, best)}
    assert pred.joint_probability == pytest.approx(q_joint.max(), abs=1e-9)
    assert pred.marginals["Shape"]["box"] == pytest.approx(1.0)


def test_batch_prediction_equals_one_by_one():
    net = benchmark_network("montesano", sigma=3.0, seed=2)
    rng = np.random.default_rng(0)
    readings = rng.normal(5, 4, 20)
    labels = rng.choice(["grasp", "tap", "touch"], 20)
    batch = predict_batch(net, ["effect"], sensors={"obj_vel": readings}, values={"Action": labels})
    for k in range(20):
        one = predict(net, ["effect"], sensors={"obj_vel": float(readings[k])}, values={"Action": str(labels[k])})
        for j, name in enumerate(batch.variables):
            np.testing.assert_allclose(batch.marginals[name][k], list(one.marginals[name].values()), atol=1e-12)
            assert net[name].values[batch.most_probable[k, j]] == one.most_probable[name]


def test_log_likelihood_of_no_evidence_is_zero_and_prior_marginals_are_cpts():
    net = benchmark_network("simple", sigma=1.0, seed=0)
    pred = predict(net, ["A"])
    np.testing.assert_allclose(list(pred.marginals["A"].values()), net["A"].cpt, atol=1e-12)
    cases = CaseSet(net, {}, {}, ["only"])
    assert log_likelihood(net, cases) == pytest.approx(0.0, abs=1e-12)


def test_far_out_readings_do_not_underflow():
    net = benchmark_network("montesano", sigma=1.0, seed=0)
    pred = predict(net, ["Action"], sensors={"obj_vel": 1e4, "hand_vel": -1e4})
    assert sum(pred.marginals["Action"].values()) == pytest.approx(1.0)
    assert pred.marginals is not None


def test_chain_of_forty_nodes_is_exact_at_the_ends():
    """Inference on a long chain stays exact: compare with the chain's forward recursion."""
    from affordance_ros.core import AffordanceNetwork, Variable
    rng = np.random.default_rng(7)
    vs = [Variable(f"X{i}", "effect", ("a", "b"), (f"X{i-1}",) if i else ()) for i in range(40)]
    net = AffordanceNetwork(vs)
    from affordance_ros.core.ground_truth import random_cpts
    net = random_cpts(net, rng)
    pred = predict(net, ["X39"], values={"X0": "b"})
    p = np.array([0.0, 1.0])
    for i in range(1, 40):
        p = p @ net[f"X{i}"].cpt
    np.testing.assert_allclose(list(pred.marginals["X39"].values()), p, atol=1e-12)


@pytest.mark.parametrize("query, sensors, values, message", [
    (["Nope"], {}, {}, "unknown variable 'Nope'"),
    ([], {}, {}, "empty query"),
    (["Action"], {"nope": 1.0}, {}, "unknown sensor 'nope'"),
    (["Action"], {"obj_vel": float("nan")}, {}, "finite"),
    (["Action"], {"obj_vel": float("inf")}, {}, "finite"),
    (["Action"], {}, {"Shape": "triangle"}, "unknown label 'triangle'"),
    (["Action"], {}, {"Nope": "x"}, "unknown variable 'Nope'"),
])
def test_bad_queries_raise_clear_errors(query, sensors, values, message):
    net = benchmark_network("montesano", sigma=3.0, seed=0)
    with pytest.raises(EvidenceError, match=message):
        predict(net, query, sensors=sensors, values=values)


def test_impossible_evidence_is_reported():
    net = benchmark_network("simple", sigma=1.0, seed=0)
    cpt = net["A"].cpt.copy()
    cpt[:] = [1.0, 0.0]
    net = net.with_cpts({"A": cpt})
    with pytest.raises(EvidenceError, match="probability zero"):
        predict(net, ["C"], values={"A": "1"})


def test_unparameterised_network_cannot_predict():
    with pytest.raises(ValueError, match="learn it first"):
        predict(benchmark_structure("simple"), ["A"])
