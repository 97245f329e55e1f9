"""EM: SQUAREM against plain EM, and a latent variable (a start that is not a saddle, restarts).

1. Montesano network (sigma 3), 10,000 cases, the default options (prior 1, tol 0.001): plain
   EM against SQUAREM (``acceleration="squarem"``, the learner's default): time on one core (best
   of 3), E-steps, the objective reached; then both run to a tight tolerance (1e-8), the largest
   difference between the two fixed points, and the E-steps each needed to get there.
2. A latent variable: asia and alarm (pgmpy's BIF files), 2000 cases, 30 % of the labels
   missing and one variable never observed (asia: ``either``, alarm: ``LVFAILURE``); maximum
   likelihood. The uniform start everywhere (EM before: a symmetric fixed point where it stopped
   at once), the default start (random rows around the latent variable) and ``n_init=5``; the
   log-likelihood each reaches next to the truth's, and in the full run pyAgrum's EM (BNLearner
   ``useEM``, a smoothing prior of 1e-6) on the same cases, its CPTs scored by our engine.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time

import numpy as np

from affordance_ros.core import (
    AffordanceNetwork,
    CaseSet,
    LearningOptions,
    benchmark_network,
    benchmark_structure,
    fit_em,
    log_likelihood,
    sample_cases,
)
from affordance_ros.core.em import EMResult, ExpectationMaximisation
from affordance_ros.core.em_acceleration import PlainEM
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.inference import JunctionTree
from affordance_ros.data.formats.bif import read_bif, write_bif

from .inference import network_text
from .report import best_time, fmt_seconds, machine_line, markdown_table, output_dir, write_results

LATENT = (("asia", "either"), ("alarm", "LVFAILURE"))


def acceleration(n_cases: int, seeds: int, repeats: int) -> list:
    structure = benchmark_structure("montesano", 3.0)
    rows = []
    for seed in range(seeds):
        truth = benchmark_network("montesano", 3.0, seed=seed)
        cases, _ = sample_cases(truth, n_cases, np.random.default_rng(seed))
        row = {"seed": seed, "cases": n_cases}
        for name in ("none", "squarem"):
            options = LearningOptions(em_acceleration=name)
            wall, cpu, (_, result) = best_time(lambda: fit_em(structure, cases, options), repeats)
            row[name] = {"seconds": wall, "cpu": cpu, "iterations": result.iterations,
                         "objective": result.log_posteriors[-1], "converged": result.converged}
        tight = {name: fit_em(structure, cases, LearningOptions(tol=1e-8, max_iter=20000, em_acceleration=name))
                 for name in ("none", "squarem")}
        row["tight_iterations"] = {name: r.iterations for name, (_, r) in tight.items()}
        row["fixed_point_difference"] = max(float(np.max(np.abs(a.cpt - b.cpt))) for a, b in
                                            zip(tight["none"][0].variables, tight["squarem"][0].variables))
        rows.append(row)
    return rows


def latent_setting(name: str, hidden: str, n_cases: int = 2000, missing: float = 0.3, seed: int = 0):
    truth = read_bif(network_text(name))
    rng = np.random.default_rng(seed)
    codes = sample_values(truth, n_cases, rng)
    codes[rng.random(codes.shape) < missing] = -1
    codes[:, truth.index(hidden)] = -1
    labels = {v.name: codes[:, i] for i, v in enumerate(truth.variables) if v.name != hidden}
    return truth, CaseSet(truth, labels, {}), codes


def _uniform(network: AffordanceNetwork) -> AffordanceNetwork:
    return network.with_cpts({v.name: np.full(v.cpt.shape, 1.0 / v.card) for v in network.variables})


def latent(name: str, hidden: str, with_pyagrum: bool) -> dict:
    truth, cases, codes = latent_setting(name, hidden)
    start = _uniform(truth)
    out = {"network": name, "hidden": hidden, "cases": cases.n_cases, "truth": log_likelihood(truth, cases)}
    # before: plain EM from the uniform start, stopped where it first converges
    t0 = time.perf_counter()
    estep = JunctionTree(truth).estep(cases.evidence(truth))
    before = EMResult()
    plain = ExpectationMaximisation(estep, [np.asarray(0.0)] * len(truth), 1e-5, 1000, PlainEM())
    cpts = plain.run([v.cpt for v in start.variables], before)
    out["uniform_before"] = {"log_likelihood": estep.log_likelihood(cpts), "iterations": before.iterations,
                             "seconds": time.perf_counter() - t0, "converged": before.converged}
    for label, n_init in (("default", 1), ("n_init_5", 5)):
        t0 = time.perf_counter()
        options = LearningOptions(prior=0.0, tol=1e-5, max_iter=1000, em_acceleration="squarem", n_init=n_init)
        _, result = fit_em(start, cases, options)
        out[label] = {"log_likelihood": result.log_likelihood, "iterations": result.iterations,
                      "seconds": time.perf_counter() - t0, "converged": result.converged, "saddles": result.saddles}
    if with_pyagrum:
        out["pyagrum"] = pyagrum_em(truth, codes)
        theirs = truth.with_cpts(out["pyagrum"].pop("cpts"))
        out["pyagrum"]["log_likelihood"] = log_likelihood(theirs, cases)
    return out


def pyagrum_em(truth: AffordanceNetwork, codes: np.ndarray) -> dict:
    import tempfile
    from pathlib import Path

    import pandas as pd
    import pyagrum as gum
    relabelled = AffordanceNetwork([dataclasses.replace(v, values=tuple(f"s{j}" for j in range(v.card)))
                                    for v in truth.variables])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "template.bif"
        write_bif(relabelled, path)
        template = gum.loadBN(str(path))
    data = pd.DataFrame({v.name: ["?" if c < 0 else f"s{c}" for c in codes[:, i]]
                         for i, v in enumerate(truth.variables)})
    learner = gum.BNLearner(data, template, ["?"])
    learner.useEM(1e-5)
    learner.useSmoothingPrior(1e-6)
    t0 = time.perf_counter()
    bn = learner.learnParameters(template.dag())
    seconds = time.perf_counter() - t0
    cpts = {}
    for v in truth.variables:
        table = bn.cpt(v.name)
        axes = list(reversed(list(table.names)))
        cpts[v.name] = np.transpose(table.toarray(), [axes.index(n) for n in (*v.parents, v.name)])
        cpts[v.name] = cpts[v.name] / cpts[v.name].sum(axis=-1, keepdims=True)
    return {"seconds": seconds, "cpts": cpts}


def run(args) -> int:
    out = output_dir(args.out)
    n_cases = args.cases or (2000 if args.quick else 10_000)
    seeds, repeats = (1, 1) if args.quick else (3, 3)
    have_networks = importlib.util.find_spec("pgmpy") is not None
    with_pyagrum = not args.quick and importlib.util.find_spec("pyagrum") is not None
    print(f"bench em{' (quick)' if args.quick else ''}: SQUAREM vs plain EM on {n_cases} montesano cases; "
          "a latent variable in asia and alarm" + (" (with pyAgrum's EM)" if with_pyagrum else ""))
    print(f"machine: {machine_line()}")
    speed = acceleration(n_cases, seeds, repeats)
    for r in speed:
        print(f"  seed {r['seed']}: plain {fmt_seconds(r['none']['seconds'])} ({r['none']['iterations']} it), "
              f"SQUAREM {fmt_seconds(r['squarem']['seconds'])} ({r['squarem']['iterations']} E-steps); to 1e-8: "
              f"{r['tight_iterations']['none']} vs {r['tight_iterations']['squarem']}, fixed points differ by "
              f"{r['fixed_point_difference']:.1e}")
    latent_rows = []
    if have_networks:
        for name, hidden in LATENT[:1] if args.quick else LATENT:
            row = latent(name, hidden, with_pyagrum)
            latent_rows.append(row)
            print(f"  {name} ({hidden} hidden): truth {row['truth']:.1f}, "
                  f"uniform start {row['uniform_before']['log_likelihood']:.1f}, "
                  f"default {row['default']['log_likelihood']:.1f}, n_init 5 {row['n_init_5']['log_likelihood']:.1f}"
                  + (f", pyAgrum {row['pyagrum']['log_likelihood']:.1f} in {fmt_seconds(row['pyagrum']['seconds'])}"
                     if "pyagrum" in row else ""))
    else:
        print("  latent-variable part skipped: pgmpy (the networks) is not installed")
    table = markdown_table(
        ["seed", "plain EM: time", "E-steps", "objective", "SQUAREM: time", "E-steps", "objective",
         "E-steps to tol 1e-8: plain / SQUAREM", "fixed points differ by"],
        [[r["seed"], fmt_seconds(r["none"]["seconds"]), r["none"]["iterations"], f"{r['none']['objective']:.2f}",
          fmt_seconds(r["squarem"]["seconds"]), r["squarem"]["iterations"], f"{r['squarem']['objective']:.2f}",
          f"{r['tight_iterations']['none']} / {r['tight_iterations']['squarem']}",
          f"{r['fixed_point_difference']:.1e}"] for r in speed])
    if latent_rows:
        table += "\n" + markdown_table(
            ["network (hidden)", "truth", "uniform start (before)", "default start", "n_init 5", "pyAgrum EM"],
            [[f"{r['network']} ({r['hidden']})", f"{r['truth']:.1f}",
              f"{r['uniform_before']['log_likelihood']:.1f} ({r['uniform_before']['iterations']} it, "
              f"{fmt_seconds(r['uniform_before']['seconds'])})",
              f"{r['default']['log_likelihood']:.1f} ({fmt_seconds(r['default']['seconds'])})",
              f"{r['n_init_5']['log_likelihood']:.1f} ({fmt_seconds(r['n_init_5']['seconds'])})",
              f"{r['pyagrum']['log_likelihood']:.1f} ({fmt_seconds(r['pyagrum']['seconds'])})" if "pyagrum" in r
              else "(full run only)"] for r in latent_rows])
    write_results(out, "em", table, args.quick, {"acceleration": speed, "latent": latent_rows})
    return 0
