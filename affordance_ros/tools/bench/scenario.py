"""The realistic scenarios (issue 10): ours against every baseline, leave-one-object-out and 10-fold.

    affordance-ros bench scenario [--quick] [--reps N] [--out DIR]

Trials from ``core.scenarios`` (tools: 3 tools x 11 objects x 4 actions; hands: 3 postures x
2 objects x 4 actions), learned with the shipped configurations (config/tools.json,
config/hands.json) and their learning blocks, evaluated with ``core.evaluation`` exactly as
``affordance-ros evaluate`` does. Also the time of 10 folds on about 1500 tools cases.
"""

from __future__ import annotations

import json
import time

import numpy as np

from ...core import AffordanceLearner, AffordanceNetwork
from ...core.evaluation import METHODS, evaluate, group_indices, kfold_indices
from ...core.scenarios import scenario_cases, simulate
from ...share import share_directory
from .common import machine, output_dir

# (scenario, scheme, targets)
SETTINGS = [("tools", "leave-one-object-out", ["Effect"]), ("tools", "10-fold", ["Effect"]),
            ("hands", "10-fold", ["Action", "Effect"])]
HIGHER_IS_BETTER = {"accuracy": True, "log_loss": False, "rmse": False, "log_density": True}


def run_setting(scenario: str, scheme: str, targets, seed: int, repeats: int, folds: int):
    config = AffordanceNetwork.load(share_directory() / "config" / f"{scenario}.json")
    cases = scenario_cases(config, simulate(scenario, repeats, seed))
    if scheme == "leave-one-object-out":
        _, test = group_indices(cases.extra["object_id"])
    else:
        test = kfold_indices(cases.n_cases, folds, seed)
    learner = AffordanceLearner()
    return evaluate(config, cases, lambda cfg, train: learner.fit(cfg, train).model_, test, targets,
                    groups=cases.extra["object_id"], scheme=scheme), cases.n_cases


def metric_rows(result) -> list[tuple]:
    """(target, metric, {method: value}) of one evaluation."""
    rows = []
    for r in result.targets:
        keys = ["accuracy", "log_loss"] if r.target.kind == "label" else \
            ["rmse", *[f"rmse_{n}" for n in r.target.names], "log_density"]
        for key in keys:
            rows.append((r.target.variable, key, {m: r.metrics[m][key] for m in METHODS}))
    return rows


def run(args) -> int:
    out = output_dir(args.out)
    reps = args.reps or (1 if args.quick else 3)
    repeats, folds = (5, 3) if args.quick else (10, 10)  # quick: still 3 training trials of most conditions
    lines = [f"Ours against every baseline (mean over {reps} simulated data sets; * best of the row; "
             "ours wins: on how many data sets ours was best):", ""]
    results = {}
    for scenario, scheme, targets in SETTINGS:
        scheme_name = f"{folds}-fold" if scheme == "10-fold" else scheme
        collected, n_cases = {}, 0
        for seed in range(reps):
            result, n_cases = run_setting(scenario, scheme, targets, seed, repeats, folds)
            for target, key, values in metric_rows(result):
                collected.setdefault((target, key), []).append(values)
        results[f"{scenario} {scheme}"] = {f"{t} {k}": v for (t, k), v in collected.items()}
        lines += [f"**{scenario}, {scheme_name}** ({n_cases} cases):", "",
                  "| target | metric | " + " | ".join(METHODS) + " | ours wins |",
                  "|---|---|" + "---|" * (len(METHODS) + 1)]
        for (target, key), per_seed in collected.items():
            higher = HIGHER_IS_BETTER[key.split("_")[0] if key.startswith("rmse") else key]
            means = {m: float(np.mean([v[m] for v in per_seed])) for m in METHODS}
            best = (max if higher else min)(means.values())
            wins = sum((max if higher else min)(v.values()) == v["ours"] for v in per_seed)
            fmt = "{:.1%}" if key == "accuracy" else "{:.3f}"
            cells = " | ".join(fmt.format(means[m]) + ("*" if means[m] == best else "") for m in METHODS)
            lines.append(f"| {target} | {key} | {cells} | {wins}/{len(per_seed)} |")
        lines.append("")
    # time: 10 folds on ~1500 tools cases (12 repeats: 1584 cases), as `evaluate --folds 10` runs it
    n_repeats = 2 if args.quick else 12
    start = time.perf_counter()
    _, n_timed = run_setting("tools", "10-fold", ["Effect"], 0, n_repeats, 3 if args.quick else 10)
    seconds = time.perf_counter() - start
    lines.append(f"Time: {3 if args.quick else 10} folds on {n_timed} tools cases (learn sensors, structure, "
                 f"EM in every fold; predict; every baseline): {seconds:.1f} s")
    text = "\n".join(lines)
    print("bench scenario")
    print(text)
    (out / "scenario_table.md").write_text(text + "\n")
    (out / "scenario_results.json").write_text(json.dumps(
        {"machine": machine(), "reps": reps, "results": results, "time_10_folds": seconds, "time_cases": n_timed},
        indent=1))
    return 0
