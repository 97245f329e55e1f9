"""The realistic scenarios (issues 10 and 23): ours against every baseline, and what a fold of learning costs.

    affordance-ros-bench scenario [--quick] [--reps N] [--jobs N] [--out DIR]

Trials from ``core.scenarios``: tools (3 tools x 11 objects x 4 actions), hands (3 postures x 2 objects x 4
actions), hands_shared (the hands' conditions with effects that share structure), tools_unseen (an object's
effect its own, not its shape's) and transfer (learn on hand postures, predict tools), learned with the
shipped configurations (config/tools.json, config/hands.json, config/transfer.json) and their learning
blocks, evaluated with ``core.evaluation`` against every baseline exactly as ``affordance-ros evaluate``
does (scikit-learn's too, when installed). Then, on the tools scenario left one object out, each fold's
learn alone: its time, its peak memory (``tracemalloc``: what numpy allocates) and the size of the effect;
and the time of 10 folds on about 1500 tools cases (ours and the hand-written baselines). ``--jobs``: the
evaluations (one per scenario and data set) in that many processes; the fold costs and the time always in this
one, after them. Each scenario's table is printed as soon as its data sets are done. The simulated robot's
trials (montesano) are learned with config/montesano.json, so that every shipped configuration has figures.

``--compare FILE``: then compare the run's figures of ours with those of an earlier run (``compare.py``; the
repository keeps the references: docs/bench/scenario_results.json of the full run, scenario_quick_results.json
of ``--quick --reps 3``), print every figure that got worse beyond its noise, and exit with status 1 if one
did; ``--run FILE`` compares that run's scenario_results.json instead of running.
"""

from __future__ import annotations

import contextlib
import json
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from affordance_ros.core import AffordanceLearner, AffordanceNetwork
from affordance_ros.core.evaluation import (
    evaluate,
    group_indices,
    hand_written_baselines,
    kfold_indices,
    transfer_indices,
)
from affordance_ros.core.scenarios import scenario_cases, simulate
from affordance_ros.share import share_directory
from affordance_ros.tools.evaluate import every_baseline, robot_trials

from .compare import figure_changes, higher_is_better, load_results, report
from .report import machine, output_dir

# (scenario, configuration, scheme, targets)
SETTINGS = [("tools", "tools", "leave-one-object-out", ["Effect"]), ("tools", "tools", "10-fold", ["Effect"]),
            ("hands", "hands", "10-fold", ["Action", "Effect"]),
            ("hands_shared", "hands", "10-fold", ["Action", "Effect"]),
            ("tools_unseen", "tools", "leave-one-object-out", ["Effect"]),
            ("transfer", "transfer", "learn on hands, test on tools", ["Action", "Effect"]),
            ("montesano", "montesano", "10-fold", ["Action", "effect"])]
# the column that names each scenario's entities (objects; the manipulators of the transfer; none of the robot's)
ENTITIES = {"transfer": "manipulator_id", "montesano": None}
# the simulated robot's trials: this many for each of a scenario's trials of every condition (10: 1000 trials)
MONTESANO_TRIALS_PER_REPEAT = 100
# Data sets per repetition of the settings of 240 hand-posture trials (cheap): the transfer's accuracy moves by 3-7
# points from one data set to the next, so a loss of a few points stands out of that noise only over a dozen.
# --quick runs the transfer at its full size (one fold) with 4 data sets a repetition too.
MORE_DATA_SETS = {"hands": 4, "hands_shared": 4, "transfer": 4}
QUICK_MORE_DATA_SETS = {"transfer": 4}


def scenario_config(name: str) -> AffordanceNetwork:
    """A shipped configuration."""
    return AffordanceNetwork.load(share_directory() / "config" / f"{name}.json")


def setting_cases(scenario: str, config_name: str, seed: int, repeats: int):
    """(configuration, cases with their entity column and, for the transfer, the kind column; the column's name,
    None for the simulated robot's trials)."""
    config = scenario_config(config_name)
    entity = ENTITIES.get(scenario, "object_id")
    if scenario == "montesano":
        # (design truth, the trials of docs/bench/scenario_results.json: the robot's default is balanced since)
        trials = robot_trials(MONTESANO_TRIALS_PER_REPEAT * repeats, seed, design="truth")
        return config, scenario_cases(config, trials, extra=()), None
    extra = (entity, "kind") if scenario == "transfer" else (entity,)
    return config, scenario_cases(config, simulate(scenario, repeats, seed), extra=extra), entity


def run_setting(scenario: str, config_name: str, scheme: str, targets, seed: int, repeats: int, folds: int,
                baselines=None, objects_left_out: int | None = None):
    """One evaluation: k-fold with ``folds``, leave-one-object-out (the first ``objects_left_out`` objects only,
    when given), or the transfer's one fold."""
    config, cases, entity = setting_cases(scenario, config_name, seed, repeats)
    if scheme == "leave-one-object-out":
        test = group_indices(cases.extra[entity])[1][:objects_left_out]
    elif scenario == "transfer":
        test = transfer_indices(cases.extra["kind"], "hand")
    else:
        test = kfold_indices(cases.n_cases, folds, seed)
    learner = AffordanceLearner(posterior_draws=0)   # (the scores are of point predictions, as evaluate's)
    return evaluate(config, cases, lambda cfg, train: learner.fit(cfg, train).model_, test, targets,
                    groups=cases.extra[entity] if entity else None, scheme=scheme, baselines=baselines), cases.n_cases


def metric_rows(result) -> list[tuple]:
    """(target, metric, {method: value}) of one evaluation (a method without the figure is left out)."""
    rows = []
    for r in result.targets:
        keys = ["accuracy", "log_loss"] if r.target.kind == "label" else \
            ["euclidean_rmse", "rmse", *[f"rmse_{n}" for n in r.target.names], "log_density"]
        for key in keys:
            rows.append((r.target.variable, key, {m: v[key] for m, v in r.metrics.items()}))
    return rows


def setting_rows(task) -> tuple[list[tuple], int]:
    """``metric_rows`` of one evaluation against every baseline and its number of cases; ``task``:
    ``run_setting``'s arguments but the baselines (made here: scikit-learn's estimators do not pickle)."""
    result, n_cases = run_setting(*task[:7], every_baseline(10, 0), *task[7:])
    return metric_rows(result), n_cases


def fold_costs(seed: int, repeats: int, n_folds: int) -> list[dict]:
    """The first ``n_folds`` folds of the tools scenario left one object out: each learn's time (wall and this
    process's CPU: a shared machine's load slows the one, not the other), its peak memory and the effect's values,
    parents and parent configurations."""
    config, cases, entity = setting_cases("tools", "tools", seed, repeats)
    _, folds = group_indices(cases.extra[entity])
    every = np.arange(cases.n_cases)
    out = []
    for test in folds[:n_folds]:
        train = cases.take(np.setdiff1d(every, test))
        tracemalloc.start()
        start, cpu = time.perf_counter(), time.process_time()
        model = AffordanceLearner(posterior_draws=0).fit(config, train).model_   # (as the table before the draws)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        effect = model["Effect"]
        out.append({"seconds": seconds, "cpu_seconds": cpu, "peak_mb": peak / 1e6, "effect_values": effect.card,
                    "effect_parents": list(effect.parents),
                    "parent_configurations": int(np.prod([model[p].card for p in effect.parents]))})
    return out


def _table(title: str, n_cases: int, collected: dict) -> list[str]:
    methods = list(dict.fromkeys(m for per_seed in collected.values() for values in per_seed for m in values))
    n_sets = len(next(iter(collected.values())))
    lines = [f"**{title}** ({n_cases} cases, {n_sets} data sets):", "",
             "| target | metric | " + " | ".join(methods) + " | ours wins |",
             "|---|---|" + "---|" * (len(methods) + 1)]
    for (target, key), per_seed in collected.items():
        higher = higher_is_better(key)
        means = {m: float(np.mean([v[m] for v in per_seed])) for m in methods if m in per_seed[0]}
        best = (max if higher else min)(means.values())
        wins = sum((max if higher else min)(v.values()) == v["ours"] for v in per_seed)
        fmt = "{:.1%}" if key == "accuracy" else "{:.3f}"
        cells = " | ".join(fmt.format(means[m]) + ("*" if means[m] == best else "") if m in means else "-"
                           for m in methods)
        lines.append(f"| {target} | {key} | {cells} | {wins}/{len(per_seed)} |")
    return lines + [""]


def add_arguments(parser) -> None:
    parser.add_argument("--compare", metavar="FILE",
                        help="an earlier run's scenario_results.json (docs/bench/scenario_results.json, or "
                             "scenario_quick_results.json with --quick --reps 3): print every figure of ours that "
                             "got worse beyond its noise; exit status 1 if one did")
    parser.add_argument("--run", metavar="FILE",
                        help="with --compare: compare this run's scenario_results.json instead of running")


def run(args) -> int:
    if args.run:
        if not args.compare:
            raise SystemExit("affordance-ros-bench scenario: --run FILE compares a run: give --compare REFERENCE")
        return compared(load_results(args.run), args.compare)
    out = output_dir(args.out)
    reps = args.reps or (1 if args.quick else 3)
    # quick: 3 trials of every condition, 3 folds, 3 objects left out in turn (CI-sized), the transfer full-sized
    repeats, folds, objects_left_out = (3, 3, 3) if args.quick else (10, 10, None)
    sizes = {"repeats": repeats, "folds": folds, "objects_left_out": objects_left_out,
             "montesano_trials": MONTESANO_TRIALS_PER_REPEAT * repeats, "transfer_repeats": 10}
    more = QUICK_MORE_DATA_SETS if args.quick else MORE_DATA_SETS
    seeds = {f"{scenario} {scheme}": list(range(reps * more.get(scenario, 1)))
             for scenario, _, scheme, _ in SETTINGS}
    lines = ["Ours against every baseline (mean over the simulated data sets; * best of the row; ours wins: on how "
             "many data sets ours was best; euclidean_rmse: of the displacement (dx, dy) as a whole, rmse: per "
             "coordinate):", ""]
    tasks = [(scenario, config_name, scheme, targets, seed, 10 if scenario == "transfer" else repeats, folds,
              objects_left_out)
             for scenario, config_name, scheme, targets in SETTINGS for seed in seeds[f"{scenario} {scheme}"]]
    results = {}
    with ProcessPoolExecutor(max_workers=args.jobs) if args.jobs > 1 else contextlib.nullcontext() as pool:
        done = (pool.map if pool else map)(setting_rows, tasks)
        for scenario, config_name, scheme, targets in SETTINGS:
            scheme_name = f"{folds}-fold" if scheme == "10-fold" else scheme
            if objects_left_out and scheme == "leave-one-object-out":
                scheme_name += f" (the first {objects_left_out} objects)"
            collected, n_cases = {}, 0
            for _ in seeds[f"{scenario} {scheme}"]:
                rows, n_cases = next(done)
                for target, key, values in rows:
                    collected.setdefault((target, key), []).append(values)
            results[f"{scenario} {scheme}"] = {f"{t} {k}": v for (t, k), v in collected.items()}
            table = _table(f"{scenario}, {scheme_name}", n_cases, collected)
            lines += table
            print("\n".join(table), flush=True)
    costs = fold_costs(0, repeats, 2 if args.quick else 11)
    lines.append(f"A fold's learn on the tools scenario, left one object out ({len(costs)} folds): "
                 f"{np.mean([c['seconds'] for c in costs]):.2f} s on average "
                 f"({np.mean([c['cpu_seconds'] for c in costs]):.2f} s of CPU), peak memory "
                 f"{max(c['peak_mb'] for c in costs):.0f} MB at most; the effect "
                 f"{min(c['effect_values'] for c in costs)}-{max(c['effect_values'] for c in costs)} values for "
                 f"{min(c['parent_configurations'] for c in costs)}-{max(c['parent_configurations'] for c in costs)} "
                 "parent configurations")
    # time: 10 folds on ~1500 tools cases (12 repeats: 1584 cases), as `evaluate --folds 10` runs it
    n_repeats = 2 if args.quick else 12
    start = time.perf_counter()
    _, n_timed = run_setting("tools", "tools", "10-fold", ["Effect"], 0, n_repeats, 3 if args.quick else 10,
                             hand_written_baselines())
    seconds = time.perf_counter() - start
    lines.append(f"Time: {3 if args.quick else 10} folds on {n_timed} tools cases (learn sensors, structure, "
                 f"EM in every fold; predict; the hand-written baselines): {seconds:.1f} s")
    text = "\n".join(lines)
    print("bench scenario")
    print(text)
    (out / "scenario_table.md").write_text(text + "\n")
    doc = {"machine": machine(), "reps": reps, "seeds": seeds, "sizes": sizes, "results": results,
           "fold_costs": costs, "time_10_folds": seconds, "time_cases": n_timed}
    (out / "scenario_results.json").write_text(json.dumps(doc, indent=1))
    return compared(doc, args.compare) if args.compare else 0


def compared(doc: dict, reference_path: str) -> int:
    """Print the comparison of a run's results ``doc`` with the reference file; 1 if a figure got worse beyond its
    noise."""
    reference = load_results(reference_path)
    try:
        changes = figure_changes(doc, reference)
    except ValueError as exc:
        raise SystemExit(f"affordance-ros-bench scenario: cannot compare with '{reference_path}': {exc}") from None
    lines, worse = report(changes, reference_path)
    print("\n".join(lines))
    return 1 if worse else 0
