"""Sensors whose values are the conditions of the experiment (``cluster_by``): fitting, codes, the file,
and learning on the hand-posture scenario checked against the simulator's true expected displacements."""

import json

import numpy as np
import pytest
from scipy.stats import trim_mean

from affordance_ros.core import AffordanceLearner, AffordanceNetwork, DataError, ModelFormatError, predict
from affordance_ros.core.conditions import (
    WIDE_VARIANCE,
    all_terms,
    choose_centre_trim,
    fit_conditional_sensor,
    group_trimmed_means,
    robust_covariance,
)
from affordance_ros.core.scenarios import scenario_cases, simulate
from affordance_ros.core.sensors import condition_columns
from affordance_ros.share import share_directory


def _effect_config(by=("Action", "Hand", "Object"), values=None, effect_sensor=None):
    doc = json.loads((share_directory() / "config" / "hands.json").read_text())
    for v in doc["variables"]:
        if v["name"] == "Effect":
            v["values"] = values
            v["sensor"] = effect_sensor or {"names": ["dx", "dy"], "cluster_by": list(by)}
    return doc


def test_each_condition_gets_a_robust_centre_a_core_and_a_wide_gaussian():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 10.0], [8.0, 0.0], [-5.0, -5.0]])
    conditions = np.repeat([4, 7, 9], 200)
    x = centres[np.repeat([0, 1, 2], 200)] + rng.standard_t(3, (600, 2))
    outliers = rng.random(600) < 0.05
    angle = rng.uniform(0.0, 2.0 * np.pi, outliers.sum())
    x[outliers] += 30.0 * np.stack([np.cos(angle), np.sin(angle)], axis=1)   # far outliers, in any direction
    conditions[:5] = -1                       # unknown condition: left out
    x[10, 1] = np.nan                         # incomplete reading: left out
    fit = fit_conditional_sensor(x, conditions[:, None], [10])
    means, covs = fit.means, fit.covariances
    # every value of the variable gets a core and a wide Gaussian, those of no case too
    assert fit.variables == (0,) and means.shape == (20, 2) and covs.shape == (20, 2, 2)
    np.testing.assert_allclose(means[:10], means[10:])
    assert fit.trim > 0.0                                      # trimmed: the outliers are cut
    plain = np.array([x[(conditions == c) & np.all(np.isfinite(x), 1)].mean(0) for c in (4, 7, 9)])
    seen = means[[4, 7, 9]]
    assert np.max(np.abs(seen - centres)) < 0.6 * np.max(np.abs(plain - centres))   # the mean is dragged
    # a value no case has is the grand centre: between the conditions'
    np.testing.assert_allclose(means[0], means[5], rtol=1e-9)
    assert np.all((means[0] > centres.min(0)) & (means[0] < centres.max(0)))
    # t(3) has a MAD of 0.765: the core's standard deviation is 1.4826 * that, the wide one twice it
    np.testing.assert_allclose(np.sqrt(np.diagonal(covs[4])), 1.4826 * 0.765, rtol=0.12)
    np.testing.assert_allclose(covs[10:], WIDE_VARIANCE * covs[:10])


@pytest.mark.parametrize("n", [3, 4, 7, 10, 23, 100])
def test_trimmed_means_equal_scipys_trimmed_mean_and_the_median(n):
    x = np.random.default_rng(n).standard_t(2, (n, 3))
    expected = [trim_mean(x, trim, axis=0) for trim in (0.0, 0.1, 0.25)] + [np.median(x, axis=0)]
    one_group = np.zeros(n, dtype=int)
    np.testing.assert_allclose([group_trimmed_means(x, one_group, 1, trim)[0] for trim in (0.0, 0.1, 0.25, 0.5)],
                               expected, rtol=1e-12, atol=1e-12)


def test_the_centre_is_the_trim_that_predicts_held_out_trials_best():
    """Outliers in any direction: a robust centre (a trim of a quarter or more); skewed readings (most
    trials barely move the object, some move it far): the mean, which is the reading to expect. (Outliers
    all to one side shift the reading to expect: then the mean is right too.)"""
    rng = np.random.default_rng(1)
    conditions = np.repeat(np.arange(8), 40)
    folds = np.random.default_rng(0).permutation(320) % 5
    centres = rng.normal(0.0, 10.0, (8, 2))
    symmetric = centres[conditions] + rng.normal(0.0, 1.0, (320, 2))
    far = rng.random(320) < 0.08
    symmetric[far] += rng.normal(0.0, 40.0, (far.sum(), 2))
    trim = choose_centre_trim(symmetric, conditions[:, None], folds, all_terms(1))
    robust = group_trimmed_means(symmetric, conditions, 8, trim)
    plain = np.array([symmetric[conditions == c].mean(0) for c in range(8)])
    # a trimmed centre, which the outliers do not drag: far nearer the true centres than the plain means
    assert trim > 0.0 and np.abs(robust - centres).max() < 0.3 * np.abs(plain - centres).max()
    skewed = centres[conditions] + rng.exponential(1.0, (320, 2)) ** 2
    assert choose_centre_trim(skewed, conditions[:, None], folds, all_terms(1)) == 0.0
    fit = fit_conditional_sensor(skewed, conditions[:, None], [8])
    assert fit.trim == 0.0
    # one variable, 40 trials of each value: each centre is its plain mean shrunk towards the mean of them all
    # by 40 / (40 + strength), the strength chosen by cross-validation
    plain = np.array([skewed[conditions == c].mean(0) for c in range(8)])
    strength = fit.strengths[(0,)]
    np.testing.assert_allclose(fit.means[:8], plain.mean(0) + 40 / (40 + strength) * (plain - plain.mean(0)))


def test_a_condition_with_few_readings_borrows_and_identical_readings_keep_a_width():
    x = np.array([[1.0, 1.0]] * 5 + [[3.0, 3.0]] * 2)
    fit = fit_conditional_sensor(x, np.array([0] * 5 + [1] * 2)[:, None], [2])
    # the condition of two readings gets values too, its centre pulled from its readings towards the others'
    assert fit.means.shape == (4, 2)
    assert np.all((fit.means[1] > 1.0) & (fit.means[1] <= 3.0))
    assert np.all(np.linalg.eigvalsh(fit.covariances) > 0)
    assert np.all(np.diag(robust_covariance(np.zeros((4, 2)))) > 0)
    with pytest.raises(DataError, match="no condition has 3 complete readings"):
        fit_conditional_sensor(x[:2], np.array([[0], [1]]), [2])


def test_condition_codes_use_labels_then_the_variables_own_sensor():
    config = AffordanceNetwork.from_dict(_effect_config())
    labels = {"Action": np.array([0, 1, 2, -1]), "Hand": np.array([2, -1, -1, 0]), "Object": np.array([1, 0, -1, 1])}
    readings = {"finger_flexion": np.array([np.nan, 44.0, 91.0, 1.0]),
                "object_circleness": np.array([0.2, 0.9, np.nan, 0.1])}
    codes = condition_columns(config, ["Action", "Hand", "Object"], readings, labels)
    # Hand of case 1 from its flexion (45 degrees: 'fortyfive'); case 2 has no object at all; case 3 no action
    assert codes.tolist() == [[0, 2, 1], [1, 1, 0], [2, 2, -1], [-1, 0, 1]]


def test_configuration_errors_say_what_to_fix_and_the_file_round_trips(tmp_path):
    with pytest.raises(ModelFormatError, match="leave 'values' out"):
        AffordanceNetwork.from_dict(_effect_config(values=["a", "b"]))
    with pytest.raises(ModelFormatError, match="unknown variable 'Colour'"):
        AffordanceNetwork.from_dict(_effect_config(by=["Action", "Colour"]))
    with pytest.raises(ModelFormatError, match="cannot name the variable itself"):
        AffordanceNetwork.from_dict(_effect_config(by=["Effect"]))
    with pytest.raises(ModelFormatError, match="must be a list of variable names"):
        AffordanceNetwork.from_dict(_effect_config(effect_sensor={"names": ["dx", "dy"], "cluster_by": "Action"}))
    config = AffordanceNetwork.from_dict(_effect_config())
    again = AffordanceNetwork.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again["Effect"].sensor.cluster_by == ("Action", "Hand", "Object")
    one_d = _effect_config(effect_sensor={"name": "dy", "cluster_by": ["Action"]})
    assert AffordanceNetwork.from_dict(one_d)["Effect"].sensor.cluster_by == ("Action",)


def _true_mean_displacements() -> dict:
    """The simulator's expected displacement of every (action, hand, object), from 2000 trials each."""
    big = simulate("hands", 2000, seed=99)
    keys = list(zip(big["Action"], big["Hand"], big["Object"]))
    y = np.stack([big["dx"], big["dy"]], axis=1)
    out = {}
    for key in set(keys):
        out[key] = y[[k == key for k in keys]].mean(axis=0)
    return out


def _learned_and_plain_errors(config, seed: int, truth: dict) -> tuple[float, float]:
    """RMS distance to the true expectations of the learned predictions and of the plain means, all conditions."""
    columns = simulate("hands", 10, seed=seed)
    model = AffordanceLearner().fit(config, scenario_cases(config, columns)).model_
    keys = list(zip(columns["Action"], columns["Hand"], columns["Object"]))
    y = np.stack([columns["dx"], columns["dy"]], axis=1)
    ours, plain, true = [], [], []
    for key in sorted(truth):
        answer = predict(model, ["Effect"], values=dict(zip(("Action", "Hand", "Object"), key)))
        ours.append([answer.readings["dx"]["mean"], answer.readings["dy"]["mean"]])
        plain.append(y[[k == key for k in keys]].mean(axis=0))
        true.append(truth[key])
    ours, plain, true = map(np.array, (ours, plain, true))
    rms = lambda a: float(np.sqrt(np.mean(np.sum((a - true) ** 2, axis=1))))  # noqa: E731
    return rms(ours), rms(plain)


def test_learned_model_has_a_value_per_condition_and_the_right_parents():
    config = AffordanceNetwork.from_dict(_effect_config())
    model = AffordanceLearner().fit(config, scenario_cases(config, simulate("hands", 10, seed=0))).model_
    effect = model["Effect"]
    assert len(effect.values) == 2 * 24
    assert {"push.straight.ball", "push.straight.ball.wide", "tap_right.bent.box"} <= set(effect.values)
    assert set(effect.parents) == {"Action", "Hand", "Object"}


def test_the_reading_to_expect_is_the_conditions_centre_not_pulled_by_the_background():
    """A CPT row of the effect is on its own condition's core and wide values (about one centre) and, as the
    background for outliers, on other conditions' wide values. The reading to expect is the condition's centre:
    given the labels of a condition, exactly its core's mean, though the row's mixture mean is pulled towards
    the other conditions; the standard deviation is the mixture's root mean square deviation about it
    (brute force over the components). Given less (the action only), the core-weighted mean of the centres."""
    config = AffordanceNetwork.from_dict(_effect_config())
    model = AffordanceLearner().fit(config, scenario_cases(config, simulate("hands", 10, seed=0))).model_
    effect = model["Effect"]
    means, covs = effect.sensor.component_means(), effect.sensor.component_covariances()
    g = effect.card // 2
    assert effect.values[g:] == tuple(f"{c}.wide" for c in effect.values[:g])
    pulled = 0.0
    for key in [("push", "straight", "ball"), ("tap_right", "bent", "box"), ("pull", "fortyfive", "ball")]:
        labels = dict(zip(("Action", "Hand", "Object"), key))
        answer = predict(model, ["Effect"], values=labels)
        w = np.array([answer.marginals["Effect"][value] for value in effect.values])
        own = effect.values.index(".".join(key))
        assert np.count_nonzero(w[:g] > 1e-12) == 1 and w[own] > 0.5   # one core: its own condition's
        expected = np.array([answer.readings[n]["mean"] for n in ("dx", "dy")])
        np.testing.assert_allclose(expected, means[own], rtol=1e-9, atol=1e-9)
        pulled = max(pulled, float(np.abs(w @ means - means[own]).max()))
        spread = w @ (np.diagonal(covs, axis1=1, axis2=2) + (means - expected) ** 2)
        np.testing.assert_allclose([answer.readings[n]["stddev"] for n in ("dx", "dy")], np.sqrt(spread), rtol=1e-9)
    assert pulled > 0.01                     # the background pulls the mixture mean by more than 0.1 mm
    answer = predict(model, ["Effect"], values={"Action": "push"})
    w = np.array([answer.marginals["Effect"][value] for value in effect.values])
    np.testing.assert_allclose([answer.readings[n]["mean"] for n in ("dx", "dy")],
                               w[:g] @ means[:g] / w[:g].sum(), rtol=1e-9)
    # the model file keeps cluster_by: a model read back (a node restarted, the command line) predicts the same
    again = AffordanceNetwork.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again["Effect"].sensor.cluster_by == effect.sensor.cluster_by == ("Action", "Hand", "Object")
    read_back = predict(again, ["Effect"], values={"Action": "push", "Hand": "bent"})
    assert read_back.readings == predict(model, ["Effect"], values={"Action": "push", "Hand": "bent"}).readings


def test_learned_predictions_are_near_the_true_expected_displacement_and_beat_the_cell_means():
    """240 trials (10 per condition, heavy tails, 2 % outliers) per data set: the predicted displacement of
    each condition is near the simulator's true expectation, and on average over six data sets nearer than
    the plain mean of the condition's trials (which an outlier drags)."""
    config = AffordanceNetwork.from_dict(_effect_config())
    truth = _true_mean_displacements()
    size = float(np.sqrt(np.mean(np.sum(np.array(list(truth.values())) ** 2, axis=1))))
    errors = np.array([_learned_and_plain_errors(config, seed, truth) for seed in range(6)])
    assert np.all(errors[:, 0] < 0.3 * size)
    assert errors[:, 0].mean() < 0.95 * errors[:, 1].mean()


def test_too_few_trials_of_every_condition_is_an_error_that_says_what_to_do():
    config = AffordanceNetwork.from_dict(_effect_config())
    cases = scenario_cases(config, simulate("hands", 1, seed=0))      # one trial of each condition
    with pytest.raises(DataError, match=r"'Effect' \(cluster_by .*the most any has is 1.*record more trials"):
        AffordanceLearner().fit(config, cases)
