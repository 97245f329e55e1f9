"""How sure answers are: the 90 % credible intervals' coverage of the truth, and what they cost.

    affordance-ros-bench posterior [--quick] [--reps N] [--out DIR]

Coverage, cell by cell (trials x how the robot sees the values): each of ``reps`` truths is a montesano network with
CPT rows from Dirichlet(1) (the learner's prior), learned with its structure and sensors known, the action given by
label; it is asked p(effect = label | action, object) for ``OBJECTS`` objects drawn from the truth, seen as the cases
saw them (labels or readings), of every effect. An interval covers when the truth's own p lies in it. Beside the
model's intervals (``core.posterior_sampling``), those of EM's expected counts taken as a Dirichlet (what the issue's
prototype used), on the same models and queries. Standard errors over truths (queries about one truth share its model).
Two more rows: 1000 and 3000 trials at sigma 3 (3000: the sampler on a subset of 1000, scaled to all; the large-sample
approximation of ``core.posterior_sampling.scaled_to``), and a model learned from 100 trials then updated online with
200 more (``core.online``), against the truth, at sigma 3.

With the structure learned, not given (``learned_cell``): at sigma 1 and 3 and 100, 300 and 1000 trials, each truth
learned from a configuration without arcs by the default learner (structure 'average': a sample of structures, every
answer averaged over it), by K2 (one structure: what the learner did before), and with the truth's arcs given; asked
p(effect = label | action, object) with the object given by label. Coverage, the intervals' mean width against the
given arcs', how many of the truth's 10 arcs each misses (1 - its posterior probability, summed), and how far the
sampler's chains are from agreeing (``StructureSample.disagreement``).

Cost, measured in one run, interleaved, on one core: ``predict`` and ``rank_actions`` with the posterior and without
it (``uncertainty=False``: what they cost before), ``predict_batch`` of 1000 cases; and a learn with the posterior and
without it. The same calls on a model averaged over structures (montesano, sigma 3, 1000 trials), and that learn.
"""

from __future__ import annotations

import time

import numpy as np

from affordance_ros.core import (
    AffordanceLearner,
    benchmark_network,
    predict,
    predict_batch,
    rank_actions,
    sample_cases,
)
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.online import OnlineEM

from .report import machine_line, markdown_table, output_dir, write_results

TRIALS = (10, 30, 100, 300)
MODES = ("labels", "sigma1", "sigma3")
LEARNED_TRIALS = (100, 300, 1000)
LEARNED_MODES = ("sigma1", "sigma3")
QUICK_LEARNED = (("sigma3", 100),)
LARGE = (1000, 3000)
OBJECTS = 10
QUICK_TRIALS = (10, 100)


def truth_of(mode: str, seed: int):
    sigma = 3.0 if mode == "sigma3" else 1.0
    truth = benchmark_network("montesano", sigma, 9000 + seed).replace_variables({"Action": {"sensor": None}})
    return truth, truth.replace_variables({v.name: {"cpt": None} for v in truth.variables})


def queries(truth, mode: str, rng) -> tuple[dict, dict]:
    """``OBJECTS`` objects drawn from the truth, each with a random action: (sensors, values) columns."""
    objects = sample_values(truth, OBJECTS, rng)
    values = {"Action": list(rng.choice(truth["Action"].values, OBJECTS))}
    sensors = {}
    for name in truth.group("object"):
        var, codes = truth[name], objects[:, truth.index(name)]
        if mode == "labels":
            values[name] = [var.values[c] for c in codes]
        else:
            noise = rng.standard_normal(OBJECTS)
            sensors[var.sensor.name] = var.sensor.means[codes] + var.sensor.stddevs[codes] * noise
    return sensors, values


def covered(model, truth, mode: str, rng) -> tuple[float, float]:
    """(the share of the model's intervals that cover the truth, of EM's counts' intervals) over one truth's queries."""
    counts = model.replace_variables({v.name: {"draws": np.maximum(v.counts - v.prior, 0.0)[None]}
                                      for v in model.variables})
    sensors, values = queries(truth, mode, rng)
    hits, total = np.zeros(2), 0
    for name in truth.group("effect"):
        label = rng.integers(truth[name].card, size=OBJECTS)
        rows = np.arange(OBJECTS)
        p = predict_batch(truth, [name], sensors, values, uncertainty=False).marginals[name][rows, label]
        for j, m in enumerate((model, counts)):
            interval = predict_batch(m, [name], sensors, values).intervals[name][rows, label]
            hits[j] += np.sum((interval[:, 0] <= p) & (p <= interval[:, 1]))
        total += OBJECTS
    return tuple(hits / total)


def coverage_cell(mode: str, trials: int, seed: int, online_from: int | None = None) -> tuple[float, float]:
    truth, config = truth_of(mode, seed)
    rng = np.random.default_rng([seed, trials, MODES.index(mode), online_from or 0])
    labelled = truth.names if mode == "labels" else ("Action",)
    cases, _ = sample_cases(truth, trials, rng, labelled=tuple(labelled))
    if online_from is None:
        model = AffordanceLearner(structure="fixed", seed=seed).fit(config, cases).model_
    else:
        model = AffordanceLearner(structure="fixed", seed=seed).fit(config, cases.take(slice(0, online_from))).model_
        online = OnlineEM(model, start_weight=online_from)
        for k in range(online_from, trials, 10):
            online.partial_fit(cases.take(slice(k, min(k + 10, trials))))
        model = online.model_
    return covered(model, truth, mode, rng)


def learned_cell(mode: str, trials: int, seed: int) -> list:
    """[coverage, width, arcs missed, chains' disagreement] of the default learner, then [coverage, width, arcs missed]
    of K2, then [coverage, width] with the truth's arcs given, on one truth learned from a configuration without arcs
    (the module docstring).
    """
    truth, given = truth_of(mode, 100 + seed)
    config = given.replace_variables({v.name: {"parents": None} for v in given.variables})
    rng = np.random.default_rng([seed, trials, LEARNED_MODES.index(mode), 38])
    cases, _ = sample_cases(truth, trials, rng, labelled=("Action",))
    averaged = AffordanceLearner(seed=seed).fit(config, cases)
    single = AffordanceLearner(structure="k2", seed=seed).fit(config, cases).model_
    arcs = AffordanceLearner(structure="fixed", seed=seed).fit(given, cases).model_
    objects = sample_values(truth, OBJECTS, rng)
    values = {"Action": list(rng.choice(truth["Action"].values, OBJECTS))}
    for name in truth.group("object"):
        values[name] = [truth[name].values[c] for c in objects[:, truth.index(name)]]
    rows = np.arange(OBJECTS)
    hits, widths = np.zeros(3), np.zeros(3)
    for name in truth.group("effect"):
        label = rng.integers(truth[name].card, size=OBJECTS)
        p = predict_batch(truth, [name], values=values, uncertainty=False).marginals[name][rows, label]
        for j, model in enumerate((averaged.model_, single, arcs)):
            interval = predict_batch(model, [name], values=values).intervals[name][rows, label]
            hits[j] += np.sum((interval[:, 0] <= p) & (p <= interval[:, 1]))
            widths[j] += np.sum(interval[:, 1] - interval[:, 0])
    n = OBJECTS * len(truth.group("effect"))
    missed = [sum(1.0 - m.arc_probabilities().get(arc, 0.0) for arc in truth.arcs) for m in (averaged.model_, single)]
    return [hits[0] / n, widths[0] / n, missed[0], averaged.result_.structures.disagreement,
            hits[1] / n, widths[1] / n, missed[1], hits[2] / n, widths[2] / n]


def mean_sem(x) -> list:
    x = np.asarray(x, dtype=float)
    return [float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")]


def costs(repeats: int) -> dict:
    """Seconds per call with the posterior and without, interleaved (best of ``repeats`` rounds), and of a learn; the
    same on a model averaged over structures (``averaged_costs``).
    """
    truth, config = truth_of("sigma1", 0)
    cases, _ = sample_cases(truth, 300, np.random.default_rng(1), labelled=("Action",))
    start = time.process_time()
    bare = AffordanceLearner(structure="fixed", posterior_draws=0).fit(config, cases).model_
    learn_without = time.process_time() - start
    start = time.process_time()
    model = AffordanceLearner(structure="fixed").fit(config, cases).model_
    learn_with = time.process_time() - start
    out = {"learn_300_cases": {"with": learn_with, "without": learn_without, "ratio": learn_with / learn_without},
           "posterior_seconds": model.metadata["posterior"]["seconds"]}
    out.update(call_costs(model, repeats))
    del bare
    return out


def averaged_costs(repeats: int, trials: int = 1000) -> dict:
    """A learn of ``trials`` montesano cases at sigma 3 by the default learner (structure 'average'), and the calls of
    ``call_costs`` on the model it makes."""
    truth, given = truth_of("sigma3", 0)
    config = given.replace_variables({v.name: {"parents": None} for v in given.variables})
    cases, _ = sample_cases(truth, trials, np.random.default_rng(1), labelled=("Action",))
    start = time.process_time()
    learner = AffordanceLearner().fit(config, cases)
    learn = time.process_time() - start
    model = learner.model_
    return {f"learn_{trials}_cases": learn, "structures": len(model.members),
            "disagreement": learner.result_.structures.disagreement, **call_costs(model, repeats)}


def call_costs(model, repeats: int) -> dict:
    """Seconds per call of predict, rank_actions and predict_batch of 1000 cases on ``model``, with the posterior and
    without (interleaved, best of ``repeats`` rounds)."""
    one = dict(sensors={"size": 4.0, "shape": 1.0}, values={"Action": "tap"})
    rng = np.random.default_rng(2)
    batch = dict(sensors={"size": rng.normal(5, 3, 1000).clip(-20, 20)}, values={"Action": ["tap"] * 1000})
    calls = {
        "predict": (lambda: predict(model, ["ObjVel"], **one), lambda: predict(model, ["ObjVel"], **one,
                                                                               uncertainty=False)),
        "rank_actions": (lambda: rank_actions(model, {"ObjVel": "fast"}, sensors=one["sensors"], rng=0),
                         lambda: rank_actions(model, {"ObjVel": "fast"}, sensors=one["sensors"], rng=0,
                                              uncertainty=False)),
        "rank_actions, optimistic": (lambda: rank_actions(model, {"ObjVel": "fast"}, sensors=one["sensors"], rng=0,
                                                          strategy="optimistic"),
                                     lambda: rank_actions(model, {"ObjVel": "fast"}, sensors=one["sensors"], rng=0,
                                                          uncertainty=False)),
        "predict_batch, 1000 cases": (lambda: predict_batch(model, ["ObjVel"], **batch),
                                      lambda: predict_batch(model, ["ObjVel"], **batch, uncertainty=False)),
    }
    out = {}
    for name, (with_, without) in calls.items():
        with_(), without()     # (plans compiled, the draws' network built: once per model)
        loops = 3 if "batch" in name else 200
        best = {"with": np.inf, "without": np.inf}
        for _ in range(repeats):
            for key, call in (("with", with_), ("without", without)):
                start = time.process_time()
                for _ in range(loops):
                    call()
                best[key] = min(best[key], (time.process_time() - start) / loops)
        out[name] = {**best, "ratio": best["with"] / best["without"]}
    return out


PARTS = ("given", "learned", "costs")


def add_arguments(parser) -> None:
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"which parts to run, comma-separated: {', '.join(PARTS)} (the structure given, learned; "
                             "the calls' cost)")


def run(args) -> int:
    out = output_dir(args.out)
    reps = args.reps or (3 if args.quick else 40)
    trials = QUICK_TRIALS if args.quick else TRIALS
    parts = set(getattr(args, "parts", ",".join(PARTS)).split(","))
    unknown = parts - set(PARTS)
    if unknown:
        raise SystemExit(f"bench posterior: unknown parts {sorted(unknown)}; choose from {list(PARTS)}")
    start = time.perf_counter()
    cells = {}
    for mode in MODES if "given" in parts else ():
        for n in trials:
            runs = np.array([coverage_cell(mode, n, seed) for seed in range(reps)])
            cells[f"{mode} {n}"] = {"model": mean_sem(runs[:, 0]), "em_counts": mean_sem(runs[:, 1])}
    extra = {} if args.quick or "given" not in parts else {
        **{f"sigma3 {n}": np.array([coverage_cell("sigma3", n, seed) for seed in range(reps // 2)]) for n in LARGE},
        "sigma3 100 + 200 online": np.array([coverage_cell("sigma3", 300, seed, online_from=100)
                                             for seed in range(reps)])}
    for key, runs in extra.items():
        cells[key] = {"model": mean_sem(runs[:, 0]), "em_counts": mean_sem(runs[:, 1]), "truths": len(runs)}
    learned = {}
    chosen = QUICK_LEARNED if args.quick else [(m, t) for m in LEARNED_MODES for t in LEARNED_TRIALS]
    for mode, n in chosen if "learned" in parts else ():
        runs = np.array([learned_cell(mode, n, seed) for seed in range(reps if args.quick else max(reps // 2, 8))])
        learned[f"{mode} {n}"] = {"averaged": mean_sem(runs[:, 0]), "averaged_width": mean_sem(runs[:, 1]),
                                  "averaged_missed": mean_sem(runs[:, 2]), "disagreement": mean_sem(runs[:, 3]),
                                  "k2": mean_sem(runs[:, 4]), "k2_width": mean_sem(runs[:, 5]),
                                  "k2_missed": mean_sem(runs[:, 6]), "given": mean_sem(runs[:, 7]),
                                  "given_width": mean_sem(runs[:, 8]), "truths": len(runs)}
    cost = costs(3 if args.quick else 7) if "costs" in parts else {}
    averaged = averaged_costs(3 if args.quick else 7, 300 if args.quick else 1000) if "costs" in parts else {}
    print(f"bench posterior: {time.perf_counter() - start:.0f} s ({machine_line()})")
    results = {"reps": reps, "objects": OBJECTS, "cells": cells, "learned": learned, "costs": cost,
               "averaged_costs": averaged}
    rows = [[cell, f"{c['model'][0]:.3f} ± {c['model'][1]:.3f}", f"{c['em_counts'][0]:.3f} ± {c['em_counts'][1]:.3f}",
             c.get("truths", reps)] for cell, c in cells.items()]
    table = (f"\nCoverage of the truth by the 90 % credible intervals of p(effect | action, object) (mean ± s.e.m. "
             f"over truths, {OBJECTS} objects x 4 effects each)\n\n"
             + markdown_table(["trials, how the values are seen", "posterior draws", "EM's counts", "truths"], rows))
    rows = [[cell, f"{c['averaged'][0]:.3f} ± {c['averaged'][1]:.3f}",
             f"{c['averaged_width'][0] / c['given_width'][0]:.2f}", f"{c['averaged_missed'][0]:.1f}",
             f"{c['disagreement'][0]:.2f}", f"{c['k2'][0]:.3f} ± {c['k2'][1]:.3f}",
             f"{c['k2_width'][0] / c['given_width'][0]:.2f}", f"{c['k2_missed'][0]:.1f}",
             f"{c['given'][0]:.3f} ± {c['given'][1]:.3f}", c["truths"]] for cell, c in learned.items()]
    table += ("\nWith the structure learned: coverage, width against the given arcs', true arcs missed (of 10), the "
              "chains' disagreement; the object given by label\n\n"
              + markdown_table(["trials", "average", "width", "missed", "chains differ", "k2", "width", "missed",
                                "arcs given", "truths"], rows))
    rows = [[name, f"{c['with'] * 1e3:.3f} ms", f"{c['without'] * 1e3:.3f} ms", f"{c['ratio']:.1f}x"]
            for name, c in cost.items() if isinstance(c, dict) and "with" in c and name != "learn_300_cases"]
    if cost:
        learn = cost["learn_300_cases"]
        rows.append(["learn, 300 cases (montesano, structure fixed)", f"{learn['with'] * 1e3:.0f} ms",
                     f"{learn['without'] * 1e3:.0f} ms", f"{learn['ratio']:.1f}x"])
        table += ("\nCost with the posterior and without it (CPU time of this process, best of interleaved rounds)"
                  "\n\n" + markdown_table(["call", "with", "without", "ratio"], rows))
        rows = [[name, f"{c['with'] * 1e3:.3f} ms", f"{c['without'] * 1e3:.3f} ms", f"{c['ratio']:.1f}x"]
                for name, c in averaged.items() if isinstance(c, dict)]
        learn_key = next(k for k in averaged if k.startswith("learn_"))
        rows.append([f"learn, {learn_key.split('_')[1]} cases (montesano, sigma 3, structure average: "
                     f"{averaged['structures']} structures)", f"{averaged[learn_key] * 1e3:.0f} ms", "", ""])
        table += ("\nThe same on a model averaged over structures\n\n"
                  + markdown_table(["call", "with", "without", "ratio"], rows))
    write_results(out, "posterior", table, args.quick, results)
    return 0


__all__ = ["averaged_costs", "call_costs", "costs", "coverage_cell", "learned_cell", "run"]
