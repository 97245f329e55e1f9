"""Cross-validated evaluation of the learner against simple baselines, on the same folds.

For every fold the learner is fitted on the training cases exactly as ``learn`` fits it; every
held-out case's targets are then predicted from everything else the case has. A target is a
variable: a *label target* when the cases carry its labels (scored by accuracy and log-loss),
else a *reading target* when they carry its sensor's readings (scored by the RMSE of the
predicted readings and the mean log-density of the true readings under the predictive
distribution). Of the RMSE there are three: ``euclidean_rmse``, the root mean square of the
Euclidean distance between a case's predicted and true readings (all of the target's readings
together, e.g. the displacement (dx, dy)); ``rmse``, per coordinate, the root mean square over
every single reading (``euclidean_rmse / sqrt(d)`` for d readings); ``rmse_<name>``, that of one
reading. Baselines, each given the same inputs (``Inputs``), here written by hand where no library has
them:

- ``majority``: the most frequent training label / the mean training reading;
- ``cell_mean``: the same within the held-out case's *cell* (its values of the other
  label-observed variables), a Gaussian with the pooled within-cell variance for readings;
- ``nearest_centroid``: labels: the class whose centroid of the input readings (within the
  cell) is nearest, probabilities a softmax of -d^2/2 in pooled within-class units;
  readings: the mean target of the training *group* (e.g. object) of the cell whose centroid of
  input readings is nearest (groups: a column such as object_id; without one, the cell).

``evaluate`` takes other baselines too: any object with ``labels(inputs, y, n_classes)`` and
``readings(inputs, y)`` (``Baseline``), such as scikit-learn's estimators on ``Inputs.features``
(the cell's labels one-hot, the input readings standardised: ``tools/baselines.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np
from scipy.special import softmax

from .cases import MISSING, CaseSet
from .errors import DataError
from .gaussian import diagonal_log_density
from .network import AffordanceNetwork
from .predict import predict_readings

BASELINES = ("majority", "cell_mean", "nearest_centroid")
_EPS = 1e-12


def kfold_indices(n: int, n_folds: int, seed: int = 0) -> list[np.ndarray]:
    """Test indices of ``n_folds`` folds of a random permutation of range(n)."""
    if not 2 <= n_folds <= n:
        raise DataError(f"{n_folds} folds of {n} cases: need 2 <= folds <= cases")
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, n_folds)]


def group_indices(groups: Sequence) -> tuple[list, list[np.ndarray]]:
    """One fold per distinct group (leave-one-group-out): (group names, test indices)."""
    groups = np.asarray(groups, dtype=object).astype(str)
    names = sorted(set(groups.tolist()))
    if len(names) < 2:
        raise DataError(f"leave-one-out needs at least 2 groups, the column has {names}")
    return names, [np.flatnonzero(groups == g) for g in names]


def transfer_indices(groups: Sequence, train_group: str) -> list[np.ndarray]:
    """One fold that learns on the cases of group ``train_group`` and tests on every other case (e.g. learn on
    hand postures, predict tools).
    """
    groups = np.asarray(groups, dtype=object).astype(str)
    test = np.flatnonzero(groups != str(train_group))
    if len(test) == len(groups) or len(test) == 0:
        raise DataError(f"to learn on '{train_group}' and test on the rest the column needs both: it has "
                        f"{sorted(set(groups.tolist()))}")
    return [test]


# ---------------------------------------------------------------- targets and inputs
@dataclass
class Target:
    """A variable to predict, and how it is scored."""

    variable: str
    kind: str                 # "label" or "reading"
    names: tuple = ()         # reading names of a reading target
    classes: tuple = ()       # labels of a label target


def resolve_targets(config: AffordanceNetwork, cases: CaseSet, targets: Sequence[str] | None) -> list[Target]:
    """The variables to predict: ``targets`` (names or groups), by default every variable the cases
    carry labels or all readings of.
    """
    names = config.resolve_query(targets) if targets else list(config.names)
    out = []
    for name in names:
        v = config[name]
        if name in cases.labels:
            out.append(Target(name, "label", classes=tuple(v.values)))
        elif v.sensor is not None and all(r in cases.readings for r in v.sensor.names):
            out.append(Target(name, "reading", names=tuple(v.sensor.names)))
        elif targets:
            raise DataError(f"the cases have neither labels of '{name}' nor all of its readings "
                            f"{list(v.sensor.names) if v.sensor else []}: nothing to evaluate it on")
    if not out:
        raise DataError("nothing to evaluate: the cases observe none of the variables")
    return out


def without_target(cases: CaseSet, network: AffordanceNetwork, target: Target) -> CaseSet:
    """The cases with the target's labels and its sensor's readings removed."""
    v = network[target.variable]
    hidden = set(v.sensor.names) if v.sensor else set()
    return CaseSet(network, {n: c for n, c in cases.labels.items() if n != target.variable},
                   {n: x for n, x in cases.readings.items() if n not in hidden}, cases.trial_ids)


def _label_cells(cases: CaseSet, exclude: str) -> np.ndarray:
    """Codes of the other label-observed variables, (K, m) (m may be 0)."""
    cols = [c for n, c in sorted(cases.labels.items()) if n != exclude]
    return np.stack(cols, axis=1) if cols else np.zeros((cases.n_cases, 0), dtype=np.int64)


def _reading_inputs(cases: CaseSet, network: AffordanceNetwork, target: Target) -> np.ndarray:
    v = network[target.variable]
    hidden = set(v.sensor.names) if v.sensor else set()
    cols = [x for n, x in sorted(cases.readings.items()) if n not in hidden]
    return np.stack(cols, axis=1) if cols else np.zeros((cases.n_cases, 0))


# ---------------------------------------------------------------- baselines
@dataclass
class Inputs:
    """What a baseline sees of the training and the test cases."""

    cells_train: np.ndarray
    cells_test: np.ndarray
    x_train: np.ndarray      # standardised input readings, NaN -> 0 (the training mean)
    x_test: np.ndarray
    groups_train: np.ndarray | None = None
    cell_cards: tuple = ()   # how many values each column of the cells has (the variable's card)

    @classmethod
    def build(cls, train: CaseSet, test: CaseSet, network, target: Target, groups_train=None) -> "Inputs":
        """The inputs of one fold for ``target``: the other labels, and the readings of every other sensor
        standardised by the training cases' mean and standard deviation.
        """
        x_tr, x_te = _reading_inputs(train, network, target), _reading_inputs(test, network, target)
        centre = np.nanmean(x_tr, axis=0) if x_tr.shape[1] else np.zeros(0)
        scale = np.nanstd(x_tr, axis=0) if x_tr.shape[1] else np.zeros(0)
        scale = np.where(scale > 0, scale, 1.0)
        z = lambda x: np.nan_to_num((x - centre) / scale)  # noqa: E731
        cards = tuple(network[n].card for n in sorted(train.labels) if n != target.variable)
        return cls(_label_cells(train, target.variable), _label_cells(test, target.variable), z(x_tr), z(x_te),
                   None if groups_train is None else np.asarray(groups_train, dtype=object).astype(str), cards)

    def training_rows(self, keep: np.ndarray) -> "Inputs":
        """The same inputs with only the training cases ``keep`` (a mask)."""
        groups = None if self.groups_train is None else self.groups_train[keep]
        return Inputs(self.cells_train[keep], self.cells_test, self.x_train[keep], self.x_test, groups,
                      self.cell_cards)

    def features(self) -> tuple[np.ndarray, np.ndarray]:
        """(training, test) feature matrices for a general-purpose learner: each cell column one-hot (a missing
        label: all zeros), then the standardised input readings.
        """
        def one_hot(cells: np.ndarray) -> np.ndarray:
            return np.hstack([np.eye(card + 1)[cells[:, j] + 1][:, 1:] for j, card in enumerate(self.cell_cards)]
                             + [np.zeros((len(cells), 0))])
        return (np.hstack([one_hot(self.cells_train), self.x_train]),
                np.hstack([one_hot(self.cells_test), self.x_test]))

    def same_cell(self) -> np.ndarray:
        """(n_test, n_train): training case k is in test case i's cell."""
        if self.cells_train.shape[1] == 0:
            return np.ones((len(self.cells_test), len(self.cells_train)), dtype=bool)
        return np.all(self.cells_test[:, None, :] == self.cells_train[None, :, :], axis=2)



def _cell_members(inputs: Inputs) -> np.ndarray:
    """same_cell, falling back to every training case for a test case whose cell is empty."""
    same = inputs.same_cell()
    empty = ~same.any(axis=1)
    same[empty] = True
    return same


def label_baseline(method: str, inputs: Inputs, y_train: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities (n_test, C) of a baseline for a label target (codes y_train, -1 skipped)."""
    keep = y_train != MISSING
    inputs = inputs.training_rows(keep)
    y = y_train[keep]
    onehot = np.eye(n_classes)[y]                                          # (n_train, C)
    global_freq = (onehot.sum(0) + 1.0) / (len(y) + n_classes)
    n_test = len(inputs.cells_test)
    if method == "majority":
        return np.broadcast_to(global_freq, (n_test, n_classes)).copy()
    member = _cell_members(inputs).astype(float)
    if method == "cell_mean":
        counts = member @ onehot
        return (counts + global_freq) / (counts.sum(1, keepdims=True) + 1.0)
    if method == "nearest_centroid":
        if inputs.x_train.shape[1] == 0:
            return label_baseline("cell_mean", inputs, y, n_classes)
        # centroids per (test case's cell, class): sums over members of each class
        counts = member @ onehot                                           # (n_test, C)
        sums = np.einsum("ik,kc,kd->icd", member, onehot, inputs.x_train)  # (n_test, C, d)
        global_centroid = (onehot.T @ inputs.x_train) / np.maximum(onehot.sum(0), 1.0)[:, None]
        centroids = np.where(counts[:, :, None] > 0, sums / np.maximum(counts, 1.0)[:, :, None],
                             global_centroid[None])
        within = inputs.x_train - global_centroid[y]
        var = max(float(np.mean(within ** 2)), 1e-6)
        d2 = ((inputs.x_test[:, None, :] - centroids) ** 2).sum(2)       # (n_test, C)
        return softmax(-0.5 * d2 / var, axis=1)
    raise ValueError(f"unknown baseline '{method}'; expected one of {list(BASELINES)}")


def reading_baseline(method: str, inputs: Inputs, y_train: np.ndarray):
    """(means (n_test, d), variances (n_test, d)) of a Gaussian prediction of a reading target (y_train
    (n_train, d), training rows with a missing target reading skipped).
    """
    keep = np.all(np.isfinite(y_train), axis=1)
    inputs = inputs.training_rows(keep)
    y = y_train[keep]
    n_test = len(inputs.cells_test)
    if method == "majority":
        shape = (n_test, y.shape[1])
        return np.broadcast_to(y.mean(0), shape).copy(), np.broadcast_to(y.var(0), shape).copy()
    member = _cell_members(inputs).astype(float)
    if method == "cell_mean":
        variance = _pooled_variance(inputs.cells_train, y)
        return _member_mean(member, y), np.broadcast_to(variance, (n_test, y.shape[1])).copy()
    if method == "nearest_centroid":
        if inputs.groups_train is None or inputs.x_train.shape[1] == 0:
            return reading_baseline("cell_mean", inputs, y)
        keys = np.array([f"{g}|{c}" for g, c in zip(inputs.groups_train, map(tuple, inputs.cells_train))], dtype=object)
        names, which = np.unique(keys, return_inverse=True)
        onehot = np.eye(len(names))[which.reshape(-1)]                    # (n_train, G)
        sizes = onehot.sum(0)
        centroids = (onehot.T @ inputs.x_train) / sizes[:, None]
        targets = (onehot.T @ y) / sizes[:, None]
        group_cell = np.array([inputs.cells_train[which == g][0] for g in range(len(names))]).reshape(len(names), -1)
        if group_cell.shape[1]:
            allowed = np.all(inputs.cells_test[:, None, :] == group_cell[None, :, :], axis=2)
        else:
            allowed = np.ones((n_test, len(names)), dtype=bool)
        allowed[~allowed.any(1)] = True
        d2 = ((inputs.x_test[:, None, :] - centroids[None]) ** 2).sum(2)
        best = np.argmin(np.where(allowed, d2, np.inf), axis=1)
        var = _pooled_variance(which.reshape(-1, 1), y)
        return targets[best], np.broadcast_to(var, (n_test, y.shape[1])).copy()
    raise ValueError(f"unknown baseline '{method}'; expected one of {list(BASELINES)}")


def _member_mean(member: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (member @ y) / np.maximum(member.sum(1, keepdims=True), _EPS)


def _pooled_variance(cells: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Within-cell variance of y, pooled over the cells (per dimension)."""
    if cells.shape[1] == 0:
        return y.var(0)
    _, which = np.unique(cells, axis=0, return_inverse=True)
    which = which.reshape(-1)
    n_cells = which.max() + 1
    sizes = np.bincount(which, minlength=n_cells)
    means = np.stack([np.bincount(which, weights=y[:, j], minlength=n_cells) for j in range(y.shape[1])], 1)
    means /= sizes[:, None]
    resid = y - means[which]
    dof = max(len(y) - n_cells, 1)
    return np.maximum((resid ** 2).sum(0) / dof, _EPS)


class Baseline(Protocol):
    """What ``evaluate`` asks of a baseline: a label target's class probabilities, a reading target's
    Gaussian prediction (None: it does not predict readings), given the same ``Inputs`` as every other.
    """

    def labels(self, inputs: Inputs, y_train: np.ndarray, n_classes: int) -> np.ndarray:
        """Class probabilities (n_test, n_classes) (``y_train``: codes, -1 where unknown)."""

    def readings(self, inputs: Inputs, y_train: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(means, variances), each (n_test, d) (``y_train`` (n_train, d), NaN where unknown)."""


@dataclass(frozen=True)
class HandWritten:
    """A baseline of this module, by name (one of ``BASELINES``)."""

    method: str

    def __post_init__(self):
        if self.method not in BASELINES:
            raise ValueError(f"unknown baseline '{self.method}'; expected one of {list(BASELINES)}")

    def labels(self, inputs: Inputs, y_train: np.ndarray, n_classes: int) -> np.ndarray:
        """``label_baseline`` of this method."""
        return label_baseline(self.method, inputs, y_train, n_classes)

    def readings(self, inputs: Inputs, y_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``reading_baseline`` of this method."""
        return reading_baseline(self.method, inputs, y_train)


def hand_written_baselines() -> dict[str, Baseline]:
    """Every baseline of this module, by name."""
    return {method: HandWritten(method) for method in BASELINES}


# ---------------------------------------------------------------- ours
def ours(model: AffordanceNetwork, test: CaseSet, target: Target):
    """The learned model's posterior of the target given everything else of each test case.

    Label target: probabilities (n, C). Reading target: (means (n, d), the ReadingPrediction).
    """
    hidden = without_target(test.with_network(model), model, target)
    engine = model.engine
    calibration = engine.calibrate([v.cpt for v in model.variables], hidden.evidence(model))
    marginal = engine.marginals(calibration)[model.index(target.variable)]
    if target.kind == "label":
        return marginal
    prediction = predict_readings(model, {target.variable: marginal})[target.variable]
    return prediction.mean, prediction


# ---------------------------------------------------------------- the whole run
@dataclass
class TargetResult:
    """Per method, the metrics and the held-out predictions (in the cases' order) of one target."""

    target: Target
    metrics: dict = field(default_factory=dict)          # method -> {metric: value}
    predictions: dict = field(default_factory=dict)      # method -> (n, C) probabilities or (n, d) means
    log_density: dict = field(default_factory=dict)      # method -> (n,) (reading targets)
    truth: np.ndarray | None = None                      # (n,) codes or (n, d) readings
    tested: np.ndarray | None = None                     # (n,) whether a fold held the case out


@dataclass
class EvaluationResult:
    """Every target's results, and how the folds were made."""

    folds: int
    scheme: str
    n_cases: int
    targets: list
    duration: float = 0.0
    methods: tuple = ("ours", *BASELINES)

    def to_dict(self) -> dict:
        """The metrics, JSON-ready (the predictions are left out)."""
        return {"scheme": self.scheme, "folds": self.folds, "num_cases": self.n_cases,
                "duration": round(self.duration, 3), "methods": list(self.methods),
                "targets": {t.target.variable: {"kind": t.target.kind, "names": list(t.target.names),
                                                "classes": list(t.target.classes), "metrics": t.metrics}
                            for t in self.targets}}


def evaluate(config: AffordanceNetwork, cases: CaseSet, fit: Callable, test_indices: Sequence[np.ndarray],
             targets: Sequence[str] | None = None, groups: Sequence | None = None,
             baselines: Mapping[str, Baseline] | None = None, scheme: str = "",
             progress: Callable | None = None) -> EvaluationResult:
    """Fit ``fit(config, training cases) -> model`` on every fold's complement, predict its test cases.

    ``test_indices``: the folds (``kfold_indices``, ``group_indices`` or ``transfer_indices``); ``groups``: per
    case, the group the nearest-centroid baseline averages readings over (e.g. object_id); ``baselines``: by
    name (default: ``hand_written_baselines``), each predicting from the same ``Inputs``. A baseline whose
    ``readings`` is None has no figures for a reading target.
    """
    start = time.perf_counter()
    cases = CaseSet(cases.network, {name: c for name, c in cases.labels.items() if np.any(c != MISSING)},
                    {name: x for name, x in cases.readings.items() if not np.all(np.isnan(x))}, cases.trial_ids,
                    cases.extra)  # (a column without data, learned with allow_missing, is neither target nor input)
    baselines = hand_written_baselines() if baselines is None else dict(baselines)
    methods = ("ours", *baselines)
    resolved = resolve_targets(config, cases, targets)
    n = cases.n_cases
    groups = None if groups is None else np.asarray(groups, dtype=object)
    results = []
    for t in resolved:
        r = TargetResult(t)
        width = len(t.classes) if t.kind == "label" else len(t.names)
        r.predictions = {m: np.full((n, width), np.nan) for m in methods}
        if t.kind == "label":
            r.truth = cases.labels[t.variable]
        else:
            r.truth = np.stack([cases.readings[name] for name in t.names], axis=1)
            r.log_density = {m: np.full(n, np.nan) for m in methods}
        results.append(r)
    every = np.arange(n)
    tested = np.zeros(n, dtype=bool)
    tested[np.concatenate(list(test_indices))] = True
    for r in results:
        r.tested = tested
    for f, test_idx in enumerate(test_indices):
        train_idx = np.setdiff1d(every, test_idx)
        train, test = cases.take(train_idx), cases.take(test_idx)
        model = fit(config, train)
        for r in results:
            _predict_fold(r, model, train, test, test_idx, Inputs.build(
                train, test, config, r.target, None if groups is None else groups[train_idx]), baselines)
        if progress:
            progress(f + 1, len(test_indices))
    for r in results:
        for m in methods:
            if not np.all(np.isnan(r.predictions[m][tested])):
                r.metrics[m] = _metrics(r, m)
            else:   # a baseline that does not predict this kind of target
                del r.predictions[m]
                r.log_density.pop(m, None)
    return EvaluationResult(len(test_indices), scheme, n, results, time.perf_counter() - start, methods)


def _predict_fold(r: TargetResult, model: AffordanceNetwork, train: CaseSet, test: CaseSet, test_idx: np.ndarray,
                  inputs: Inputs, baselines: Mapping[str, Baseline]) -> None:
    """Ours and every baseline on one fold's test cases, into ``r``'s predictions (and log-densities)."""
    t = r.target
    if t.kind == "label":
        r.predictions["ours"][test_idx] = ours(model, test, t)
        for name, baseline in baselines.items():
            r.predictions[name][test_idx] = baseline.labels(inputs, train.labels[t.variable], len(t.classes))
        return
    y_train = np.stack([train.readings[name] for name in t.names], axis=1)
    y_test = r.truth[test_idx]
    mean, mixture = ours(model, test, t)
    r.predictions["ours"][test_idx] = mean
    r.log_density["ours"][test_idx] = mixture.log_density(y_test)
    for name, baseline in baselines.items():
        gaussian = baseline.readings(inputs, y_train)
        if gaussian is not None:
            r.predictions[name][test_idx] = gaussian[0]
            r.log_density[name][test_idx] = diagonal_log_density(y_test, *gaussian)


def _metrics(r: TargetResult, method: str) -> dict:
    """The method's figures over the cases a fold held out (every case, unless the folds test a group only)."""
    if r.target.kind == "label":
        y = r.truth
        ok = (y != MISSING) & r.tested
        p = r.predictions[method][ok]
        y = y[ok]
        chosen = np.argmax(p, axis=1)
        prob = np.clip(p[np.arange(len(y)), y], 1e-15, 1.0)
        return {"accuracy": float(np.mean(chosen == y)), "log_loss": float(-np.mean(np.log(prob))),
                "cases": int(ok.sum())}
    y = r.truth[r.tested]
    pred = r.predictions[method][r.tested]
    err = (pred - y) ** 2
    out = {"rmse": float(np.sqrt(np.nanmean(err)))}
    for j, name in enumerate(r.target.names):
        out[f"rmse_{name}"] = float(np.sqrt(np.nanmean(err[:, j])))
    complete = np.all(np.isfinite(y), axis=1)
    out["euclidean_rmse"] = float(np.sqrt(np.mean(np.sum(err[complete], axis=1))))
    out["log_density"] = float(np.mean(r.log_density[method][r.tested][complete]))
    out["cases"] = int(complete.sum())
    return out


def confusion_matrix(truth: np.ndarray, probabilities: np.ndarray, n_classes: int) -> np.ndarray:
    """Counts (true class, predicted class) over cases with a label."""
    ok = truth != MISSING
    out = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(out, (truth[ok], np.argmax(probabilities[ok], axis=1)), 1)
    return out


__all__ = ["BASELINES", "Baseline", "EvaluationResult", "HandWritten", "Inputs", "Target", "TargetResult",
           "confusion_matrix", "evaluate", "group_indices", "hand_written_baselines", "kfold_indices", "label_baseline",
           "reading_baseline", "resolve_targets", "transfer_indices"]
