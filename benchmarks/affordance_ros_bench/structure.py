"""Structure learning at the size of the standard networks: ours (K2, MCMC) next to pyAgrum's (K2, greedy).

10,000 complete cases are sampled from alarm (37 nodes, 46 arcs) and insurance (27 nodes, 52
arcs), read from the pgmpy wheel's BIF files. Every learner gets the same cases:

- ours: K2 with the K2 score in a topological order of the true network, and MCMC over DAGs
  (single-arc moves, K2 score, no order; started from that K2 result, as ``learn_structure``
  does), at most 4 parents;
- pyAgrum: K2 with the K2 score in the same order, and greedy hill climbing (its BDeu score
  default and the K2 score), at most 4 parents.

Accuracy is the structural Hamming distance to the true DAG (missing + extra + reversed arcs,
a reversed arc counted once); time is wall time in this process, one core, from the cases in
memory (ours: a CaseSet; pyAgrum: a fresh BNLearner made from the data frame, not timed) to the
arcs, the best of 3 runs (1 with --quick): on a shared machine single runs vary by 1.5x.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from affordance_ros.core import AffordanceNetwork, CaseEvidence, CaseSet, LearningOptions
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.structure import learn_structure
from affordance_ros.data.formats.bif import read_bif

from .environment import extras_installed
from .inference import network_text
from .report import fmt_seconds, machine_line, markdown_table, output_dir, write_results

NETWORKS = ("alarm", "insurance")


def shd(true_arcs, learned_arcs) -> dict:
    """Structural Hamming distance between two DAGs, with its parts."""
    true, learned = set(true_arcs), set(learned_arcs)
    reversed_ = {(a, b) for a, b in learned - true if (b, a) in true}
    extra = learned - true - reversed_
    missing = {(a, b) for a, b in true - learned if (b, a) not in learned}
    return {"shd": len(extra) + len(missing) + len(reversed_), "extra": len(extra), "missing": len(missing),
            "reversed": len(reversed_)}


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _best(fn, repeats: int):
    """(shortest time, result) of ``repeats`` calls of fn() -> (seconds, result)."""
    runs = [fn() for _ in range(repeats)]
    return min(seconds for seconds, _ in runs), runs[-1][1]


def compare_network(name: str, n_cases: int, mcmc_samples: int, seed: int = 0, repeats: int = 3) -> list:
    import pandas as pd
    import pyagrum as gum
    truth = read_bif(network_text(name))
    codes = sample_values(truth, n_cases, np.random.default_rng(seed))
    cases = CaseSet(truth, {v.name: codes[:, i] for i, v in enumerate(truth.variables)}, {})
    blank = AffordanceNetwork([dataclasses.replace(v, parents=None, cpt=None) for v in truth.variables])
    order = [truth.names[i] for i in truth.topological_order()]
    rows = []

    def ours(method, **extra):
        options = LearningOptions(structure=method, score="k2", max_parents=4, order=order, forbidden_group_arcs=(),
                                  **extra)
        seconds, (net, _) = _best(lambda: _timed(lambda: learn_structure(
            blank, CaseEvidence(cases, blank).map_values(), options)), repeats)
        return seconds, net.arcs

    for label, fn in (("affordance_ros K2 (K2 score, true order)", lambda: ours("k2")),
                      (f"affordance_ros MCMC ({mcmc_samples} samples from K2, K2 score)",
                       lambda: ours("mcmc", mcmc_samples=mcmc_samples, mcmc_burn_in=mcmc_samples // 5, seed=seed))):
        seconds, arcs = fn()
        rows.append({"network": name, "learner": label, "seconds": seconds, "arcs": len(arcs),
                     **shd(truth.arcs, arcs)})
    data = pd.DataFrame({v.name: [f"s{c}" for c in codes[:, i]] for i, v in enumerate(truth.variables)})

    def agrum(setup):
        def once():
            learner = gum.BNLearner(data)   # reading the data frame is not timed (ours gets a CaseSet)
            learner.setMaxIndegree(4)
            setup(learner)
            return _timed(learner.learnBN)

        seconds, bn = _best(once, repeats)
        return seconds, [(bn.variable(a).name(), bn.variable(b).name()) for a, b in bn.arcs()]

    def k2_in_order(lr):
        lr.useScoreK2()
        lr.useK2([lr.idFromName(n) for n in order])

    for label, setup in (("pyAgrum K2 (K2 score, true order)", k2_in_order),
                         ("pyAgrum greedy hill climbing (BDeu)", lambda lr: (lr.useScoreBDeu(),
                                                                             lr.useGreedyHillClimbing())),
                         ("pyAgrum greedy hill climbing (K2 score)", lambda lr: (lr.useScoreK2(),
                                                                                 lr.useGreedyHillClimbing()))):
        seconds, arcs = agrum(setup)
        rows.append({"network": name, "learner": label, "seconds": seconds, "arcs": len(arcs),
                     **shd(truth.arcs, arcs)})
    for row in rows:
        row["true_arcs"] = len(truth.arcs)
    return rows


def run(args) -> int:
    if not extras_installed("structure"):
        return 0
    import pyagrum as gum
    out = output_dir(args.out)
    n_cases = args.cases or (1000 if args.quick else 10_000)
    mcmc_samples = 500 if args.quick else 5000
    print(f"bench structure{' (quick)' if args.quick else ''}: K2 and MCMC on {n_cases} cases sampled from "
          f"{' and '.join(NETWORKS)}, next to pyAgrum {gum.__version__}'s K2 and greedy hill climbing")
    print(f"machine: {machine_line()}")
    rows = []
    for name in NETWORKS:
        for row in compare_network(name, n_cases, mcmc_samples, repeats=1 if args.quick else 3):
            rows.append(row)
            print(f"  {name}: {row['learner']}: SHD {row['shd']} in {fmt_seconds(row['seconds'])}")
    table = markdown_table(
        ["network", "learner", "SHD", "missing / extra / reversed", "arcs (true)", "time"],
        [[r["network"], r["learner"], r["shd"], f"{r['missing']} / {r['extra']} / {r['reversed']}",
          f"{r['arcs']} ({r['true_arcs']})", fmt_seconds(r["seconds"])] for r in rows])
    write_results(out, "structure", table, args.quick,
                  {"cases": n_cases, "pyagrum": gum.__version__, "results": rows})
    return 0
