"""Ours' figures on a cases CSV, learned and scored as `affordance-ros evaluate` does, by whichever affordance_ros
is first on PYTHONPATH: also by a commit older than `evaluate --train-on` (cffa89a, bb1df40), so that a figure
can be followed across commits on the same trials (docs/benchmarks/pooling.md).

    git worktree add /tmp/at-bb1df40 bb1df40
    PYTHONPATH=/tmp/at-bb1df40 .venv/bin/python benchmarks/evaluate_cases.py transfer_0.csv config/transfer.json \
        --train-on kind=hand --no-entity-column

Prints one JSON line: per target, ours' accuracy and log-loss (a label target) or Euclidean RMSE and log-density
(a reading target) over the cases the folds held out, and the confusion matrix of a label target. Only the
core is imported (numpy and scipy: no ROS, no baselines).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile

import numpy as np

from affordance_ros.core import AffordanceLearner, AffordanceNetwork, CaseSet, LearningOptions, evaluation

EXTRA_COLUMNS = ("kind", "manipulator_id", "object_id")


def folds(args, cases) -> list:
    """The test indices of every fold: --train-on's one, --leave-out's groups, or --folds N with --seed."""
    if args.train_on:
        column, value = args.train_on.split("=", 1)
        groups = np.asarray(cases.extra[column], dtype=object).astype(str)
        return [np.flatnonzero(groups != value)]
    if args.leave_out:
        return evaluation.group_indices(cases.extra[args.leave_out])[1]
    return evaluation.kfold_indices(cases.n_cases, args.folds, args.seed)


def figures(result, tested: np.ndarray) -> dict:
    """Ours' figures of every target over the ``tested`` cases (commits before 66ece62 scored every case)."""
    out = {}
    for r in result.targets:
        truth, predicted = r.truth[tested], r.predictions["ours"][tested]
        if r.target.kind == "label":
            probability = np.clip(predicted[np.arange(len(truth)), truth], 1e-15, 1.0)
            confusion = np.zeros((len(r.target.classes),) * 2, dtype=int)
            np.add.at(confusion, (truth, predicted.argmax(axis=1)), 1)
            out[r.target.variable] = {"accuracy": float(np.mean(predicted.argmax(axis=1) == truth)),
                                      "log_loss": float(-np.mean(np.log(probability))),
                                      "confusion": confusion.tolist()}
        else:
            complete = np.all(np.isfinite(truth), axis=1)
            squared = np.sum((predicted[complete] - truth[complete]) ** 2, axis=1)
            out[r.target.variable] = {"euclidean_rmse": float(np.sqrt(np.mean(squared))),
                                      "log_density": float(np.mean(r.log_density["ours"][tested][complete]))}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", help="a CSV written by `affordance-ros simulate`")
    parser.add_argument("config", help="a configuration file (its learning block is used)")
    scheme = parser.add_mutually_exclusive_group(required=True)
    scheme.add_argument("--folds", type=int, help="k-fold cross-validation, split by --seed")
    scheme.add_argument("--leave-out", metavar="COLUMN", help="one fold per group of the column")
    scheme.add_argument("--train-on", metavar="COLUMN=VALUE", help="learn on these cases, test on the others")
    parser.add_argument("--seed", type=int, default=0, help="the k-fold split's seed (the bench uses the data set's)")
    parser.add_argument("--targets", nargs="+", help="default: every variable the cases observe")
    parser.add_argument("--no-entity-column", action="store_true",
                        help="leave the learning block's entity_column out (commits before 5e44f29 knew none)")
    args = parser.parse_args(argv)
    doc = json.loads(open(args.config).read())
    if args.no_entity_column:
        doc.get("learning", {}).pop("entity_column", None)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as config_file:
        json.dump(doc, config_file)
        config_file.flush()
        config = AffordanceNetwork.load(config_file.name)
    with open(args.cases, newline="") as f:
        header = next(csv.reader(f))
    cases = CaseSet.from_csv(config, args.cases, extra=[c for c in EXTRA_COLUMNS if c in header])
    test = folds(args, cases)
    # the posterior's draws give the answers' spreads, not the point predictions scored here
    learner = AffordanceLearner(**({"posterior_draws": 0} if "posterior_draws" in LearningOptions.names() else {}))
    result = evaluation.evaluate(config, cases, lambda cfg, train: learner.fit(cfg, train).model_, test, args.targets)
    tested = np.zeros(cases.n_cases, dtype=bool)
    tested[np.concatenate(test)] = True
    print(json.dumps(figures(result, tested)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
