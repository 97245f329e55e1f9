"""The strong baselines of `affordance-ros evaluate`, from scikit-learn (the package's optional 'eval' extra).

k-NN, gradient boosting, random forest and logistic regression, each fitted on every fold's training cases
with scikit-learn's defaults, on the features ``core.evaluation.Inputs.features`` gives every method of a
fold alike (the other labels one-hot, the input readings standardised). A label target gets the
classifier's ``predict_proba``; a reading target the regressor's prediction (gradient boosting one per
reading: ``MultiOutputRegressor``) with, for the log-density, a Gaussian whose variance per reading is
the mean squared error of the regressor's own held-out predictions within the training cases
(``cross_val_predict``, ``CV_FOLDS`` folds; a random forest's out-of-bag predictions, the same at a sixth of
the cost): the training error of a forest or of boosting would be far too small. Logistic regression has
no reading counterpart here.

This module imports scikit-learn at the top: callers import it where the baselines run
(``tools/evaluate.py`` ``every_baseline``, which says in one line what to install when scikit-learn is missing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.multioutput import MultiOutputRegressor
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from ..core.cases import MISSING
from ..core.evaluation import Inputs

STRONG_BASELINES = ("knn", "gradient_boosting", "random_forest", "logistic_regression")
# folds of the held-out predictions within the training cases that give a regressor's predictive variance
CV_FOLDS = 5
_MIN_VARIANCE = 1e-12


@dataclass(frozen=True)
class SklearnBaseline:
    """A baseline from scikit-learn estimators: ``classifier(n_train)`` and ``regressor(n_train)`` make a new
    unfitted estimator for that many training cases (k-NN needs no more neighbours than cases); no
    ``regressor``: no prediction of readings.
    """

    classifier: Callable
    regressor: Callable | None = None
    seed: int = 0

    def labels(self, inputs: Inputs, y_train: np.ndarray, n_classes: int) -> np.ndarray:
        """``predict_proba`` of the classifier fitted on the training cases with a label, (n_test, n_classes);
        0 for a class no training case has.
        """
        keep = y_train != MISSING
        f_train, f_test = inputs.features()
        y = y_train[keep]
        out = np.zeros((len(f_test), n_classes))
        classes = np.unique(y)
        if len(classes) == 1:          # a classifier refuses one class: that class, surely
            out[:, classes[0]] = 1.0
            return out
        model = self.classifier(int(keep.sum())).fit(f_train[keep], y)
        out[:, model.classes_] = model.predict_proba(f_test)
        return out

    def readings(self, inputs: Inputs, y_train: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(means, variances) (n_test, d): the regressor's prediction, and per reading the mean squared error
        of its held-out predictions within the training cases with every reading; None without a regressor.
        """
        if self.regressor is None:
            return None
        keep = np.all(np.isfinite(y_train), axis=1)
        f_train, f_test = inputs.features()
        f, y = f_train[keep], y_train[keep]
        target = y[:, 0] if y.shape[1] == 1 else y            # one reading: the 1-D target estimators expect
        folds = KFold(min(CV_FOLDS, len(y)), shuffle=True, random_state=self.seed)
        inner = len(y) - -(-len(y) // folds.n_splits)        # training cases of an inner fold, at least
        model = _for(target, self.regressor(len(y)))
        if isinstance(model, RandomForestRegressor) and model.bootstrap:
            # a forest's out-of-bag predictions are held-out ones, without fitting it CV_FOLDS times more
            held_out = model.set_params(oob_score=True).fit(f, target).oob_prediction_.reshape(y.shape)
        else:
            held_out = cross_val_predict(_for(target, self.regressor(inner)), f, target, cv=folds).reshape(y.shape)
            model.fit(f, target)
        variance = np.maximum(np.nanmean((held_out - y) ** 2, axis=0), _MIN_VARIANCE)
        mean = model.predict(f_test).reshape(len(f_test), y.shape[1])
        return mean, np.broadcast_to(variance, mean.shape).copy()


def _for(target: np.ndarray, regressor):
    """``regressor`` for ``target``: a ``MultiOutputRegressor``'s own estimator for one reading (it refuses 1-D
    targets)."""
    return regressor.estimator if target.ndim == 1 and isinstance(regressor, MultiOutputRegressor) else regressor


def sklearn_baselines(k: int = 10, seed: int = 0) -> dict[str, SklearnBaseline]:
    """The strong baselines by name (``STRONG_BASELINES``): k-NN with ``k`` neighbours (fewer when there are
    fewer training cases), the others with scikit-learn's defaults, seeded by ``seed``.
    """
    return {
        "knn": SklearnBaseline(lambda n: KNeighborsClassifier(n_neighbors=min(k, n)),
                               lambda n: KNeighborsRegressor(n_neighbors=min(k, n)), seed),
        "gradient_boosting": SklearnBaseline(
            lambda n: GradientBoostingClassifier(random_state=seed),
            lambda n: MultiOutputRegressor(GradientBoostingRegressor(random_state=seed)), seed),
        "random_forest": SklearnBaseline(lambda n: RandomForestClassifier(random_state=seed, n_jobs=1),
                                         lambda n: RandomForestRegressor(random_state=seed, n_jobs=1), seed),
        "logistic_regression": SklearnBaseline(lambda n: LogisticRegression(max_iter=1000), None, seed),
    }
