"""Vector sensors: inference and EM against brute force, BIC on synthetic mixtures, the model file."""

import itertools
import json

import numpy as np
import pytest
from helpers import brute_force_joint, plain

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    ModelFormatError,
    SensorModel,
    Variable,
    predict,
    predict_batch,
)
from affordance_ros.core.ground_truth import random_cpts
from affordance_ros.core.parameters import fit_em
from affordance_ros.core.sensors import fit_vector_sensor


def _random_cov(rng, d):
    a = rng.normal(0, 1, (d, d))
    return a @ a.T + 0.5 * np.eye(d)


def vector_network(rng, n_vars=5, d=3):
    """A random DAG whose variables are seen through vector sensors of d readings (some 1-D, some none)."""
    variables = []
    for i in range(n_vars):
        card = int(rng.integers(2, 4))
        k = int(rng.integers(0, min(i, 2) + 1))
        parents = tuple(f"V{j}" for j in sorted(rng.choice(i, size=k, replace=False))) if k else ()
        sensor = None
        if i % 3 == 0:
            names = tuple(f"r{i}_{j}" for j in range(d))
            sensor = SensorModel(names=names, means=rng.normal(0, 2, (card, d)),
                                 covariances=np.stack([_random_cov(rng, d) for _ in range(card)]))
        elif i % 3 == 1:
            sensor = SensorModel(f"s{i}", rng.normal(0, 3, card), rng.uniform(0.5, 2.0, card))
        group = ("action", "object", "effect")[min(2, i * 3 // n_vars)]
        variables.append(Variable(f"V{i}", group, tuple(f"v{i}_{j}" for j in range(card)), parents, sensor))
    return random_cpts(AffordanceNetwork(variables), rng, alpha=0.8)


def mvn_log_pdf(x, mean, cov):
    d = len(x)
    diff = x - mean
    quad = diff @ np.linalg.solve(cov, diff)
    return float(-0.5 * quad - 0.5 * np.log(np.linalg.det(cov)) - 0.5 * d * np.log(2 * np.pi))


def readings_with_holes(rng, net, k):
    """Random readings of every sensor, about a third of the vector readings missing (NaN)."""
    columns = {}
    for v in net.variables:
        if v.sensor is None:
            continue
        for name in v.sensor.names:
            x = rng.normal(0, 3, k)
            if v.sensor.vector:
                x[rng.random(k) < 0.35] = np.nan
            columns[name] = [None if np.isnan(a) else float(a) for a in x]
    return columns


def test_vector_log_likelihood_marginalises_missing_readings_exactly():
    rng = np.random.default_rng(0)
    means = rng.normal(0, 2, (3, 4))
    covs = np.stack([_random_cov(rng, 4) for _ in range(3)])
    sensor = SensorModel(names=("a", "b", "c", "d"), means=means, covariances=covs)
    x = rng.normal(0, 2, (40, 4))
    x[rng.random((40, 4)) < 0.4] = np.nan
    got = sensor.log_likelihood(x)
    for k in range(40):
        dims = np.flatnonzero(~np.isnan(x[k]))
        for j in range(3):
            want = 0.0 if not dims.size else mvn_log_pdf(x[k, dims], means[j, dims], covs[j][np.ix_(dims, dims)])
            assert got[k, j] == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_marginals_and_likelihood_match_brute_force_with_vector_sensors(seed):
    rng = np.random.default_rng(seed)
    net = vector_network(rng)
    k = 25
    cases = CaseSet.from_columns(net, readings_with_holes(rng, net, k))
    engine = net.engine
    cal = engine.calibrate([v.cpt for v in net.variables], cases.evidence(net))
    marginals = engine.marginals(cal)
    readings = cases.sensor_readings(net)
    for case in range(k):
        rows = []
        for v in net.variables:
            if v.name not in readings:
                rows.append(None)
                continue
            x = readings[v.name][case]
            if not v.sensor.vector:
                rows.append(np.array([mvn_log_pdf(np.array([x]), np.array([m]), np.array([[s * s]]))
                                      for m, s in zip(v.sensor.means, v.sensor.stddevs)]))
                continue
            dims = np.flatnonzero(~np.isnan(x))
            rows.append(np.array([mvn_log_pdf(x[dims], m[dims], c[np.ix_(dims, dims)]) if dims.size else 0.0
                                  for m, c in zip(v.sensor.means, v.sensor.covariances)]))
        joint, log_z = brute_force_joint(net, rows)
        assert cal.log_likelihood[case] == pytest.approx(log_z, abs=1e-8)
        for i in range(len(net)):
            axes = tuple(a for a in range(len(net)) if a != i)
            np.testing.assert_allclose(marginals[i][case], joint.sum(axis=axes), atol=1e-9)


def test_em_sensor_step_is_the_posterior_weighted_mean_and_covariance():
    """One EM iteration re-estimates a vector sensor as the brute-force posterior-weighted moments."""
    rng = np.random.default_rng(3)
    net = vector_network(rng, n_vars=4, d=2)
    k = 30
    columns = {name: rng.normal(0, 3, k) for name in net.sensor_variable}
    cases = CaseSet.from_columns(net, columns)
    model, result = fit_em(net, cases, plain(prior=0.0, max_iter=1, fit_sensors=True),
                           initial_cpts=[v.cpt for v in net.variables])
    assert result.iterations == 1
    cal = net.engine.calibrate([v.cpt for v in net.variables], cases.evidence(net))
    marginals = net.engine.marginals(cal)
    for i, v in enumerate(net.variables):
        if v.sensor is None or not v.sensor.vector:
            continue
        x = np.stack([columns[n] for n in v.sensor.names], axis=1)
        w = marginals[i]                                                # (K, card)
        for j in range(v.card):
            mean = (w[:, j:j + 1] * x).sum(0) / w[:, j].sum()
            diff = x - mean
            cov = (w[:, j, None, None] * diff[:, :, None] * diff[:, None, :]).sum(0) / w[:, j].sum()
            new = model[v.name].sensor
            np.testing.assert_allclose(new.means[j], mean, atol=1e-8)
            np.testing.assert_allclose(new.covariances[j], cov, atol=2e-3)   # plus the small variance floor


def test_em_log_likelihood_never_decreases_with_vector_sensors_refitted():
    rng = np.random.default_rng(5)
    net = vector_network(rng, n_vars=5, d=2)
    columns = readings_with_holes(rng, net, 200)
    cases = CaseSet.from_columns(net, columns)
    _, result = fit_em(net, cases, plain(prior=0.0, max_iter=15, fit_sensors=True, tol=1e-9))
    assert np.all(np.diff(result.log_likelihoods) > -1e-6)


@pytest.mark.parametrize("true_k,cov_type", [(3, "full"), (4, "diag"), (2, "full")])
def test_bic_picks_the_true_number_and_shape_of_clusters(true_k, cov_type):
    rng = np.random.default_rng(true_k)
    d = 3
    centres = rng.normal(0, 6, (true_k, d))
    x = []
    for j in range(true_k):
        if cov_type == "full":
            a = rng.normal(0, 1, (d, d))
            cov = a @ a.T + 0.3 * np.eye(d)
            cov = cov / np.sqrt(np.max(np.diag(cov))) * 1.5  # strongly correlated readings
        else:
            cov = np.diag(rng.uniform(0.3, 1.5, d))
        x.append(rng.multivariate_normal(centres[j], cov, 400))
    means, covs, weights, chosen = fit_vector_sensor(np.concatenate(x), None, 7, "auto", rng)
    assert len(means) == true_k
    assert chosen == cov_type
    for c in centres:
        assert np.min(np.linalg.norm(means - c, axis=1)) < 0.5


def test_repeated_identical_readings_never_collapse_a_component():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.tile([[1.0, 2.0]], (300, 1)), rng.normal(5, 1, (300, 2))])
    means, covs, _, _ = fit_vector_sensor(x, 2, 2, "full", rng)
    assert np.all(np.linalg.eigvalsh(covs)[:, 0] > 0)
    sensor = SensorModel(names=("a", "b"), means=means, covariances=covs)
    assert np.all(np.isfinite(sensor.log_likelihood(x)))


def test_model_file_v2_round_trip_and_v1_still_written_for_1d_models(tmp_path):
    rng = np.random.default_rng(1)
    net = vector_network(rng, n_vars=4, d=2)
    net.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["format"] == "affordance_ros/model/2"
    vector = next(v for v in doc["variables"] if v["sensor"] and "names" in v["sensor"])
    assert set(vector["sensor"]) == {"names", "means", "covariances"}
    again = AffordanceNetwork.load(tmp_path / "m.json")
    for a, b in zip(net.variables, again.variables):
        if a.sensor is not None:
            assert a.sensor.names == b.sensor.names
            np.testing.assert_allclose(a.sensor.component_means(), b.sensor.component_means())
            np.testing.assert_allclose(a.sensor.component_covariances(), b.sensor.component_covariances())
    # a 1-D sensor written the /2 way loads as the 1-D sensor it is
    one_d = {"format": "affordance_ros/model/2", "variables": [
        {"name": "X", "group": "object", "values": ["a", "b"],
         "sensor": {"names": ["x"], "means": [[0.0], [5.0]], "covariances": [[[1.0]], [[4.0]]]}}]}
    x = AffordanceNetwork.from_dict(one_d)
    assert not x["X"].sensor.vector and x["X"].sensor.stddevs.tolist() == [1.0, 2.0]
    assert x.to_dict()["format"] == "affordance_ros/model/1"
    # a vector sensor needs /2, and sound matrices
    doc["format"] = "affordance_ros/model/1"
    with pytest.raises(ModelFormatError, match="needs 'format'"):
        AffordanceNetwork.from_dict(doc)
    doc["format"] = "affordance_ros/model/2"
    vector["sensor"]["covariances"][0][0][0] = -1.0
    with pytest.raises(ModelFormatError, match="positive definite|symmetric"):
        AffordanceNetwork.from_dict(doc)


def test_every_reading_name_maps_to_its_variable_and_partial_vectors_are_evidence():
    rng = np.random.default_rng(2)
    net = vector_network(rng, n_vars=4, d=3)
    vec = next(v for v in net.variables if v.sensor is not None and v.sensor.vector)
    for name in vec.sensor.names:
        assert net.sensor_variable[name] == vec.name and net.sensor(name)[0].name == vec.name
    one = vec.sensor.names[1]
    answer = predict(net, [vec.name], sensors={one: 1.5})
    batch = predict_batch(net, [vec.name], sensors={one: [1.5]})
    assert answer.marginals[vec.name] == pytest.approx(dict(zip(vec.values, batch.marginals[vec.name][0])))
    # the predicted readings: the mixture's mean and standard deviation, by brute force
    w = batch.marginals[vec.name][0]
    mean = w @ vec.sensor.means
    second = w @ (np.diagonal(vec.sensor.covariances, axis1=1, axis2=2) + vec.sensor.means ** 2)
    for j, name in enumerate(vec.sensor.names):
        assert answer.readings[name]["mean"] == pytest.approx(mean[j])
        assert answer.readings[name]["stddev"] == pytest.approx(np.sqrt(second[j] - mean[j] ** 2))
    assert answer.mixtures[vec.name]["weights"] == pytest.approx(w.tolist())
    assert "readings" in answer.to_dict()


def test_learner_fits_vector_sensors_left_open():
    rng = np.random.default_rng(0)
    centres = {"a": (0.0, 0.0), "b": (6.0, 0.0), "c": (0.0, 6.0)}
    labels = rng.choice(list(centres), 600)
    xy = np.array([centres[c] for c in labels]) + rng.normal(0, 0.7, (600, 2))
    config = AffordanceNetwork([
        Variable("Action", "action", tuple(centres), None, None),
        Variable("Effect", "effect", None, None, SensorModel(names=("dx", "dy"), max_components=6))])
    cases = CaseSet.from_columns(config, {"Action": list(labels), "dx": xy[:, 0], "dy": xy[:, 1]})
    model = AffordanceLearner().fit(config, cases).model_
    assert model["Effect"].card == 3 and ("Action", "Effect") in model.arcs
    answer = predict(model, ["Effect"], values={"Action": "b"})
    assert answer.readings["dx"]["mean"] == pytest.approx(6.0, abs=0.3)
    assert answer.readings["dy"]["mean"] == pytest.approx(0.0, abs=0.3)


def test_combinations_of_missing_patterns_are_all_used():
    """Every pattern of present readings is scored (no case silently dropped)."""
    sensor = SensorModel(names=("a", "b"), means=np.array([[0.0, 0.0], [3.0, 3.0]]),
                         covariances=np.stack([np.eye(2)] * 2))
    rows = np.array([[x, y] for x, y in itertools.product([np.nan, 0.0, 3.0], repeat=2)])
    ll = sensor.log_likelihood(rows)
    assert np.all(ll[0] == 0.0) and np.all(np.isfinite(ll))
    assert ll[4, 0] > ll[4, 1] and ll[8, 1] > ll[8, 0]
