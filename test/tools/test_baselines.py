"""The strong baselines of `evaluate` (tools/baselines.py): scikit-learn's own results on a tiny data set checked
by hand, and what `evaluate` says without scikit-learn."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.ensemble import (  # noqa: E402
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import KFold, cross_val_predict  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor  # noqa: E402

from affordance_ros.core.evaluation import Inputs  # noqa: E402
from affordance_ros.tools.baselines import STRONG_BASELINES, sklearn_baselines  # noqa: E402


def tiny():
    """6 training cases: a label cell (two values), one standardised reading, a class and a reading to predict."""
    inputs = Inputs(np.array([[0], [0], [0], [1], [1], [1]]), np.array([[0], [1]]),
                    np.array([[0.0], [1.0], [5.0], [0.0], [4.0], [6.0]]), np.array([[4.5], [0.4]]), cell_cards=(2,))
    return inputs, np.array([0, 0, 1, 1, 1, 0]), np.array([[1.0], [3.0], [8.0], [2.0], [4.0], [9.0]])


def test_knn_by_hand_on_the_one_hot_cells_and_the_readings():
    inputs, y, readings = tiny()
    knn = sklearn_baselines(k=2)["knn"]
    # test case (cell 0, 4.5) = (1, 0, 4.5): squared distances 20.25, 12.25, 0.25 (cell 0), 22.25, 2.25, 4.25
    # (cell 1: 2 more for the other cell): the nearest two are x=5 (class 1, reading 8) and x=4 (class 1, 4).
    # (cell 1, 0.4): 2.16, 2.36, 23.16, then 0.16, 12.96, 31.36: x=0 of cell 1 (class 1, 2), x=0 of cell 0 (0, 1)
    np.testing.assert_allclose(knn.labels(inputs, y, 2), [[0.0, 1.0], [0.5, 0.5]])
    mean, variance = knn.readings(inputs, readings)
    np.testing.assert_allclose(mean, [[6.0], [1.5]])
    assert variance.shape == (2, 1) and np.all(variance > 0)


def test_every_baseline_is_scikit_learns_own_result_on_the_same_features():
    inputs, y, readings = tiny()
    features, test = inputs.features()
    baselines = sklearn_baselines(k=2, seed=0)
    assert tuple(baselines) == STRONG_BASELINES
    np.testing.assert_allclose(baselines["gradient_boosting"].labels(inputs, y, 2),
                               GradientBoostingClassifier(random_state=0).fit(features, y).predict_proba(test))
    np.testing.assert_allclose(baselines["logistic_regression"].labels(inputs, y, 2),
                               LogisticRegression(max_iter=1000).fit(features, y).predict_proba(test))
    assert baselines["logistic_regression"].readings(inputs, readings) is None
    mean, variance = baselines["random_forest"].readings(inputs, readings)
    forest = RandomForestRegressor(random_state=0, n_jobs=1)
    np.testing.assert_allclose(mean[:, 0], forest.fit(features, readings[:, 0]).predict(test))
    out_of_bag = RandomForestRegressor(random_state=0, n_jobs=1, oob_score=True).fit(features, readings[:, 0])
    np.testing.assert_allclose(variance, np.nanmean((out_of_bag.oob_prediction_ - readings[:, 0]) ** 2))
    mean, variance = baselines["knn"].readings(inputs, readings)   # the others: their own cross-validation
    held_out = cross_val_predict(KNeighborsRegressor(n_neighbors=2), features, readings[:, 0],
                                 cv=KFold(5, shuffle=True, random_state=0))
    np.testing.assert_allclose(variance, np.mean((held_out - readings[:, 0]) ** 2))


def test_gradient_boosting_predicts_one_reading_and_two_as_scikit_learn_does():
    # one reading (a 1-D sensor, as montesano's): MultiOutputRegressor refuses a 1-D target, its estimator does not
    inputs, _, readings = tiny()
    features, test = inputs.features()
    two = np.hstack([readings, readings[::-1]])
    for y in (readings, two):
        mean, variance = sklearn_baselines(seed=0)["gradient_boosting"].readings(inputs, y)
        expected = [GradientBoostingRegressor(random_state=0).fit(features, y[:, j]).predict(test)
                    for j in range(y.shape[1])]
        np.testing.assert_allclose(mean, np.stack(expected, axis=1))
        assert variance.shape == y[:2].shape and np.all(variance > 0)


def test_the_other_estimators_and_a_two_reading_target_are_scikit_learns_own_results_too():
    """The random forest's classes, k-NN's both ways, and gradient boosting on a displacement (dx, dy): one
    regressor per reading, each with its own held-out variance."""
    inputs, y, readings = tiny()
    features, test = inputs.features()
    baselines = sklearn_baselines(k=2, seed=0)
    np.testing.assert_allclose(baselines["random_forest"].labels(inputs, y, 2),
                               RandomForestClassifier(random_state=0, n_jobs=1).fit(features, y).predict_proba(test))
    np.testing.assert_allclose(baselines["knn"].labels(inputs, y, 2),
                               KNeighborsClassifier(n_neighbors=2).fit(features, y).predict_proba(test))
    np.testing.assert_allclose(baselines["knn"].readings(inputs, readings)[0][:, 0],
                               KNeighborsRegressor(n_neighbors=2).fit(features, readings[:, 0]).predict(test))
    displacement = np.column_stack([readings[:, 0], -2.0 * readings[:, 0] + np.arange(6)])
    mean, variance = baselines["gradient_boosting"].readings(inputs, displacement)
    folds = KFold(5, shuffle=True, random_state=0)
    for j in range(2):
        boosting = GradientBoostingRegressor(random_state=0)
        np.testing.assert_allclose(mean[:, j], boosting.fit(features, displacement[:, j]).predict(test))
        held_out = cross_val_predict(boosting, features, displacement[:, j], cv=folds)
        np.testing.assert_allclose(variance[:, j], np.mean((held_out - displacement[:, j]) ** 2))


def test_a_class_no_training_case_has_gets_probability_zero_and_missing_labels_are_skipped():
    inputs, y, _ = tiny()
    labels = np.where(y == 1, 2, y)            # classes 0 and 2 of 3
    labels[0] = -1                             # a training case without a label
    p = sklearn_baselines()["logistic_regression"].labels(inputs, labels, 3)
    assert p.shape == (2, 3) and np.all(p[:, 1] == 0.0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    one_class = sklearn_baselines()["random_forest"].labels(inputs, np.zeros(6, dtype=int), 2)
    np.testing.assert_array_equal(one_class, [[1.0, 0.0], [1.0, 0.0]])


def test_without_scikit_learn_evaluate_keeps_its_own_baselines_and_says_what_to_install():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "from affordance_ros.tools.evaluate import every_baseline\n"
            "print(sorted(every_baseline(10, 0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['cell_mean', 'majority', 'nearest_centroid']"
    assert out.stderr.count("\n") == 1 and "pip install scikit-learn" in out.stderr and "'eval' extra" in out.stderr
