"""`affordance-ros evaluate` and `affordance-ros simulate`: cross-validation against baselines, and scenarios.

    affordance-ros simulate --scenario tools --out cases.csv
    affordance-ros evaluate --cases cases.csv --config config/tools.json --leave-out object_id --targets Effect
    affordance-ros evaluate --cases cases.csv --config config/hands.json --folds 10 --targets Action Effect --out eval/
    affordance-ros evaluate --cases transfer.csv --config transfer --train-on kind=hand --groups manipulator_id

The folds, the hand-written baselines and the metrics are in ``affordance_ros.core.evaluation``, the strong
baselines (scikit-learn) in ``tools/baselines.py``; this module reads the files, runs it with a progress bar
and writes the table, the JSON and the figures.
"""

from __future__ import annotations

import csv
import json
import sys
import textwrap
from pathlib import Path

import numpy as np

from ..core import AffordanceNetwork, CaseSet, LearningOptions
from ..core.ground_truth import benchmark_network
from ..core.network import written_atomically
from ..core.scenarios import SCENARIOS, simulate
from ..core.worlds import DESIGNS, NetworkWorld
from .progress import ProgressBar
from .ros_args import whole_number

# `simulate --scenario montesano`: the simulated robot's trials (its default ground truth and sensor noise)
ROBOT_SCENARIO = "montesano"
ROBOT_SIGMA = 1.0
_LABEL_METRICS = (("accuracy", "accuracy", "{:.1%}"), ("log_loss", "log-loss", "{:.3f}"))
METRICS_HELP = (
    "Metrics. Label targets: accuracy (the most probable label is the true one) and log-loss (mean -ln p(true "
    "label)). Reading targets: 'RMSE Euclidean' is the root mean square of the Euclidean distance between a "
    "case's predicted and true readings, all of the target's readings together (for an effect (dx, dy): how far "
    "the predicted displacement is from the true one); 'RMSE per coord.' is the root mean square over every "
    "single reading, 'RMSE Euclidean' / sqrt(d) for d readings (the two are equal for one reading); 'RMSE NAME' "
    "is that of reading NAME alone; log-density is the mean log-density of the true readings under the "
    "predicted distribution (higher is better). In evaluation.json: accuracy, log_loss, euclidean_rmse, rmse "
    "(per coordinate), rmse_NAME, log_density. '*' marks the best method of a row.")


def add_arguments(evaluate_parser, simulate_parser, config_help: str = "a configuration") -> None:
    p = evaluate_parser
    p.description = ("Cross-validate learning on recorded cases: learn on the training cases of every fold as "
                     "`learn` does, predict each held-out case's targets from everything else it has, and score "
                     "ours and the baselines on the same folds: majority, cell_mean, nearest_centroid (written "
                     "here) and, from scikit-learn (the 'eval' extra), knn, gradient_boosting, random_forest and "
                     "logistic_regression, on the other labels one-hot and the input readings standardised.")
    p.epilog = METRICS_HELP
    p.add_argument("--cases", required=True, help="CSV (trial_id, labels, readings, and e.g. an object_id column)")
    p.add_argument("--config", required=True,
                   help=f"{config_help} (its 'learning' block is used)")
    scheme = p.add_mutually_exclusive_group()
    scheme.add_argument("--folds", type=int, help="k-fold cross-validation (default 10)")
    scheme.add_argument("--leave-out", metavar="COLUMN",
                        help="a CSV column that groups cases and is not a variable (e.g. object_id): "
                             "one fold per group (leave-one-group-out)")
    scheme.add_argument("--train-on", metavar="COLUMN=VALUE",
                        help="one fold: learn on the cases whose CSV column COLUMN (not a variable) is VALUE, test on "
                             "all the others (e.g. --train-on kind=hand: learn on hand postures, predict tools)")
    p.add_argument("--targets", nargs="+", metavar="VAR",
                   help="variables (or groups) to predict from everything else; default: every variable observed")
    p.add_argument("--groups", metavar="COLUMN",
                   help="the column whose groups the nearest-centroid baseline averages over (default: --leave-out's "
                        "or --train-on's)")
    p.add_argument("--ignore-columns", nargs="+", metavar="COLUMN", default=[],
                   help="other CSV columns that are not variables, to skip")
    p.add_argument("--baselines", nargs="+", metavar="NAME",
                   help="the baselines to compare with (default: every one: majority, cell_mean, nearest_centroid, "
                        "and with scikit-learn knn, gradient_boosting, random_forest, logistic_regression; the "
                        "forests and boosting take most of the time on thousands of cases)")
    p.add_argument("--k", type=int, default=10, help="neighbours of the k-NN baseline (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the k-fold split and of the baselines' forests")
    p.add_argument("--out", help="directory for evaluation.json and the PNGs (confusion matrices, predicted vs true)")
    p.add_argument("--progress", action="store_true", default=None,
                   help="show a progress bar on stderr (default: only on a terminal)")
    p.add_argument("--allow-missing", action="store_true", default=None,
                   help=f"{LearningOptions.describe('allow_missing').help} (default: the configuration's, else false)")
    s = simulate_parser
    s.description = ("Write simulated trials to a CSV file, to learn from or to evaluate on: the simulated robot's "
                     "(montesano: trial_id, the action label, every reading) or a realistic scenario's, with the "
                     "labels, the readings and a column naming each trial's entity (object_id; manipulator_id and "
                     "kind in transfer).")
    s.add_argument("--scenario", choices=(ROBOT_SCENARIO, *SCENARIOS), required=True,
                   help="montesano: the simulated robot's trials (the ground truth of Montesano et al., sensor "
                        f"noise {ROBOT_SIGMA:g}, the action as a label; learn them with --config montesano); "
                        + "; ".join(f"{name}: {what}" for name, what in SCENARIOS.items()))
    s.add_argument("--out", required=True, help="the CSV file to write")
    s.add_argument("--repeats", type=whole_number, default=None,
                   help="every scenario but montesano: trials of every combination (default 10)")
    s.add_argument("--trials", type=whole_number, default=None, help="montesano: how many trials (default 1000)")
    s.add_argument("--design", choices=DESIGNS, default=None,
                   help="montesano: how the robot picks its objects and actions, as the simulated robot's 'design': "
                        "balanced (default), every action on every kind of object equally often; truth, as the "
                        "ground truth's CPTs draw them (some kinds and actions almost never)")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the random draws: the trials, their order and their noise (default 0; montesano's "
                        "ground truth is the simulated robot's whatever the seed); the same scenario, seed and size "
                        "give the same trials, with the same trial ids, another seed or size other trials and ids")


def run_simulate(args, user_error) -> int:
    out = Path(args.out)
    if out.exists():
        raise user_error(f"'{out}' exists already; simulate writes a new file")
    size, ignored = ("trials", "repeats") if args.scenario == ROBOT_SCENARIO else ("repeats", "trials")
    if getattr(args, ignored) is not None:
        raise user_error(f"--{ignored} is not for the '{args.scenario}' scenario: give --{size} "
                         + ("(how many trials)" if size == "trials" else "(trials of every combination)"))
    if args.design is not None and args.scenario != ROBOT_SCENARIO:
        raise user_error(f"--design is for the '{ROBOT_SCENARIO}' scenario: '{args.scenario}' makes every "
                         "combination --repeats times")
    if args.scenario == ROBOT_SCENARIO:
        trials = 1000 if args.trials is None else args.trials
        design = args.design or DESIGNS[0]
        # (design truth's trials are those simulate made before there was a design: so are their ids)
        columns = robot_trials(trials, args.seed, design)
        size = f"n{trials}" + ("" if design == "truth" else f"-{design}")
    else:
        repeats = 10 if args.repeats is None else args.repeats
        columns, size = simulate(args.scenario, repeats, args.seed), f"r{repeats}"
    n = len(columns["trial_id"])
    columns["trial_id"] = [f"{data_set_name(args.scenario, args.seed, size)}-{k:06d}" for k in range(n)]
    names = list(columns)
    try:
        with written_atomically(out, newline="", exclusive=True) as f:
            writer = csv.writer(f)
            writer.writerow(names)
            for k in range(n):
                writer.writerow([_cell(columns[name][k]) for name in names])
    except FileExistsError:  # made while the trials were simulated
        raise user_error(f"'{out}' exists already (made while the trials were simulated); simulate writes a new "
                         "file") from None
    print(f"wrote {n} '{args.scenario}' trials to {out} (columns: {', '.join(names)})")
    return 0


def data_set_name(scenario: str, seed: int, size: str) -> str:
    """What the trial ids of a simulated data set start with: its scenario, seed and size (``n1000`` trials,
    ``n1000-balanced`` in the robot's balanced design, ``r10`` repeats), which make its trials (the same three:
    the same trials, so the same ids; any other: other ids, so that one case database can hold both)."""
    return f"{scenario}-seed{seed}-{size}"


def robot_trials(n: int, seed: int, design: str = DESIGNS[0]) -> dict:
    """``n`` trials as the simulated robot does them (the ground truth of its defaults, truth_seed 0), its objects
    and actions by ``design`` (``core.worlds.DESIGNS``): trial_id, the action label and every reading, as
    columns."""
    truth = benchmark_network(ROBOT_SCENARIO, ROBOT_SIGMA, 0)
    rng = np.random.default_rng(seed)
    codes = NetworkWorld(truth, design).trials(n, rng)
    columns = {"trial_id": [f"sim-{k:06d}" for k in range(n)]}
    for i, v in enumerate(truth.variables):
        if v.group == "action":
            columns[v.name] = np.asarray(v.values, dtype=object)[codes[:, i]]
        else:
            noise = v.sensor.stddevs[codes[:, i]] * rng.standard_normal(n)
            columns[v.sensor.name] = v.sensor.means[codes[:, i]] + noise
    return columns


def _cell(x) -> str:
    return repr(float(x)) if isinstance(x, (float, np.floating)) else str(x)


def run_evaluate(args, user_error) -> int:
    # (learning and the evaluation import scipy: here, not at the command line's start)
    from ..core import AffordanceLearner
    from ..core.evaluation import evaluate, group_indices, kfold_indices, transfer_indices
    from ..core.learner import missing_data_warnings

    config = AffordanceNetwork.load(args.config, what="configuration")
    train_column, _, train_group = (args.train_on or "").partition("=")
    if args.train_on and not (train_column and train_group):
        raise user_error(f"--train-on {args.train_on}: give COLUMN=VALUE, e.g. --train-on kind=hand")
    extra = [c for c in dict.fromkeys([args.leave_out, train_column, args.groups, *args.ignore_columns]) if c]
    cases = CaseSet.from_csv(config, args.cases, extra=extra)
    if cases.n_cases == 0:
        raise user_error(f"no cases to evaluate on: '{args.cases}' has a header but no rows")
    group_column = args.groups or args.leave_out or train_column
    if args.leave_out:
        names, folds = group_indices(cases.extra[args.leave_out])
        scheme = f"leave one {args.leave_out} out ({len(names)} folds)"
    elif args.train_on:
        folds = transfer_indices(cases.extra[train_column], train_group)
        scheme = f"learn on {args.train_on} ({cases.n_cases - len(folds[0])} cases), test on the others"
    else:
        n_folds = args.folds or 10
        if n_folds < 2:
            raise user_error(f"--folds {n_folds}: at least 2 folds")
        folds = kfold_indices(cases.n_cases, n_folds, args.seed)
        scheme = f"{n_folds}-fold cross-validation"
    # (the scores are of the point predictions: the posterior draws, a hundred E-steps per fold, change none of them)
    learner = AffordanceLearner(allow_missing=args.allow_missing, posterior_draws=0)
    for warning in missing_data_warnings(config, cases, learner.options(config)):  # (said once, not every fold)
        print(f"affordance-ros evaluate: warning: {warning}", file=sys.stderr)

    baselines = chosen_baselines(args.baselines, args.k, args.seed, user_error)

    def fit(cfg, train):
        return learner.fit(cfg, train).model_

    with ProgressBar(f"evaluate: {len(folds)} folds", enabled=args.progress) as bar:
        bar.update(0, len(folds))
        result = evaluate(config, cases, fit, folds, args.targets,
                          groups=cases.extra[group_column] if group_column else None,
                          baselines=baselines, scheme=scheme, progress=bar.update)
    print(f"{scheme}, {cases.n_cases} cases, {result.duration:.1f} s")
    for line in [*options_lines(learner.options(config).to_dict()), "", *table(result)]:
        print(line)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.json").write_text(json.dumps(result.to_dict(), indent=1))
        written = figures(result, out)
        print(f"wrote {out / 'evaluation.json'}" + (f" and {', '.join(p.name for p in written)}" if written else ""))
    return 0


def chosen_baselines(names, k: int, seed: int, user_error) -> dict:
    """The baselines ``names`` (--baselines) by name, in that order; None: ``every_baseline``. scikit-learn is
    imported only when a name needs it."""
    if names is None:
        return every_baseline(k, seed)
    from ..core.evaluation import hand_written_baselines

    every = hand_written_baselines()
    if any(name not in every for name in names):
        strong = strong_baselines(k, seed)
        if strong is None:
            raise user_error(f"--baselines {' '.join(names)}: knn, gradient_boosting, random_forest and "
                             "logistic_regression need scikit-learn: pip install scikit-learn (the package's 'eval' "
                             f"extra), or choose from {', '.join(every)}")
        every.update(strong)
    unknown = [name for name in names if name not in every]
    if unknown:
        raise user_error(f"--baselines: no baseline '{unknown[0]}'; choose from {', '.join(every)}")
    return {name: every[name] for name in dict.fromkeys(names)}


def every_baseline(k: int, seed: int) -> dict:
    """The hand-written baselines and, when scikit-learn is installed, the strong ones (``tools/baselines.py``);
    without it, one line on stderr says what to install.
    """
    from ..core.evaluation import hand_written_baselines

    strong = strong_baselines(k, seed)
    if strong is None:
        print("evaluate: scikit-learn is not installed, so knn, gradient_boosting, random_forest and "
              "logistic_regression are left out: pip install scikit-learn (the package's 'eval' extra)",
              file=sys.stderr)
    return {**hand_written_baselines(), **(strong or {})}


def strong_baselines(k: int, seed: int) -> dict | None:
    """scikit-learn's baselines (``tools/baselines.py``), imported here; None when scikit-learn is not installed."""
    try:
        from .baselines import sklearn_baselines
    except ImportError as exc:
        if not (exc.name or "").startswith("sklearn"):
            raise
        return None
    return sklearn_baselines(k, seed)


def table(result) -> list[str]:
    """A table per kind of target (labels, then readings): one row per target and metric, one column per method
    that predicts such targets, the best of each row marked with *; method names over two lines where they
    have two words, so that the table fits 100 columns."""
    lines = []
    for kind in ("label", "reading"):
        results = [r for r in result.targets if r.target.kind == kind]
        rows = [(r.target.variable, title, [_formatted(r, m, key, fmt, higher) for m in result.methods])
                for r in results for key, title, fmt, higher in _metric_rows(r)]
        if not rows:
            continue
        keep = [j for j in range(len(result.methods)) if any(cells[j] != "-" for _, _, cells in rows)]
        heads = [result.methods[j].split("_", 1) for j in keep]
        widths = [max(*map(len, head), *(len(cells[j]) for _, _, cells in rows)) + 2
                  for head, j in zip(heads, keep)]
        left = (max(len(target) for target, _, _ in rows) + 2, max(len(title) for _, title, _ in rows) + 1)
        for line in range(2):
            names = [head[line] if line < len(head) else "" for head in heads]
            first = ("target", "metric") if line == 0 else ("", "")
            lines.append(f"{first[0]:{left[0]}s}{first[1]:{left[1]}s}"
                         + "".join(f"{name:>{w}s}" for name, w in zip(names, widths)).rstrip())
        lines.append("-" * (sum(left) + sum(widths)))
        for target, title, cells in rows:
            cells = "".join(f"{cells[j]:>{w}s}" for j, w in zip(keep, widths))
            lines.append(f"{target:{left[0]}s}{title:{left[1]}s}{cells}".rstrip())
        lines.append("")
    return lines[:-1]


def _metric_rows(r) -> list:
    """(key, title, format, higher is better) of every metric of the target result ``r``."""
    if r.target.kind == "label":
        return [(key, title, fmt, key != "log_loss") for key, title, fmt in _LABEL_METRICS]
    rows = [("euclidean_rmse", "RMSE Euclidean", "{:.3f}", False), ("rmse", "RMSE per coord.", "{:.3f}", False)]
    rows += [(f"rmse_{n}", f"RMSE {n}", "{:.3f}", False) for n in r.target.names]
    return rows + [("log_density", "log-density", "{:.3f}", True)]


def _formatted(r, method: str, key: str, fmt: str, higher: bool) -> str:
    """The cell of ``method`` in the row ``key`` of the target result ``r``: '-' where the method does not predict
    the target, a '*' after the best of the row (a space after the others, so that the numbers line up)."""
    if method not in r.metrics:
        return "-"
    values = [m[key] for m in r.metrics.values()]
    value = r.metrics[method][key]
    return fmt.format(value) + ("*" if value == (max if higher else min)(values) else " ")


def options_lines(options: dict) -> list[str]:
    """The learning options a run used, 'name value' pairs wrapped to 100 columns."""
    pairs = ", ".join(f"{name} {json.dumps(value)}" for name, value in options.items())
    return textwrap.wrap(f"learning options: {pairs}", width=100, subsequent_indent="  ")


def figures(result, out: Path) -> list[Path]:
    """Confusion matrices of label targets, predicted-vs-true readings of reading targets (ours and
    the best baseline by RMSE); none when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("evaluate: matplotlib is not installed: no figures (tools/setup_bench.sh installs it)", file=sys.stderr)
        return []
    from ..core.evaluation import confusion_matrix

    written = []
    for r in result.targets:
        t = r.target
        if t.kind == "label":
            fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
            best = max((m for m in r.metrics if m != "ours"), key=lambda m: r.metrics[m]["accuracy"])
            for ax, method in zip(axes, ("ours", best)):
                cm = confusion_matrix(r.truth[r.tested], r.predictions[method][r.tested], len(t.classes))
                ax.imshow(cm, cmap="Blues")
                for (i, j), c in np.ndenumerate(cm):
                    ax.text(j, i, str(c), ha="center", va="center", fontsize=8)
                ax.set_xticks(range(len(t.classes)), t.classes, rotation=45, ha="right")
                ax.set_yticks(range(len(t.classes)), t.classes)
                ax.set_xlabel("predicted")
                ax.set_ylabel("true")
                ax.set_title(f"{method}: accuracy {r.metrics[method]['accuracy']:.1%}")
            fig.suptitle(f"{t.variable}: {result.scheme}")
        else:
            best = min((m for m in r.metrics if m != "ours"), key=lambda m: r.metrics[m]["rmse"])
            fig, axes = plt.subplots(2, len(t.names), figsize=(4.5 * len(t.names), 8.5), squeeze=False)
            for row, method in enumerate(("ours", best)):
                for j, name in enumerate(t.names):
                    ax = axes[row, j]
                    y, p = r.truth[:, j], r.predictions[method][:, j]
                    ax.scatter(y, p, s=4, alpha=0.4)
                    lo, hi = np.nanmin(y), np.nanmax(y)
                    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
                    ax.set_xlabel(f"true {name}")
                    ax.set_ylabel(f"predicted {name}")
                    ax.set_title(f"{method}: RMSE {r.metrics[method][f'rmse_{name}']:.3f}")
            fig.suptitle(f"{t.variable}: {result.scheme}")
        fig.tight_layout()
        path = out / f"{t.variable}_{'confusion' if t.kind == 'label' else 'predicted_vs_true'}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
