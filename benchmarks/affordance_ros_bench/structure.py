"""Structure learning at the size of the standard networks: ours (K2, MCMC) next to pyAgrum's (K2, greedy).

1. K2 with the order given, as a user of both would run it, on asia, child, insurance and alarm at
   1,000 and 10,000 complete cases sampled from them (read from the pgmpy wheel's BIF files): ours
   ``learn_structure`` from the cases' value codes (and from the ``CaseSet``, its MAP values included)
   against pyAgrum's ``BNLearner.learnDAG`` with the K2 score in the same topological order of the true
   network, at most 4 parents (on a ``BNLearner`` made from the data frame before its clock starts, and
   with that load timed). Both in this process, one after the other in every round, each the best of a
   few calls; the ratio ours / pyAgrum per round, its median over the rounds; the same arcs checked.
2. Accuracy, 10,000 complete cases of alarm (37 nodes, 46 arcs) and insurance (27 nodes, 52 arcs):
   ours K2 (the true order) and MCMC over DAGs (single-arc moves, K2 score, no order; started from that
   K2 result, as ``learn_structure`` does), at most 4 parents; pyAgrum's K2 in the same order and greedy
   hill climbing (its BDeu score default and the K2 score), all by ``learnDAG``. The structural Hamming
   distance to the true DAG (missing + extra + reversed arcs, a reversed arc counted once); time from
   the cases in memory to the arcs, the best of 3 runs (1 with --quick).

The cases are drawn with seed 40: not those the code was tuned on.
"""

from __future__ import annotations

import dataclasses
import statistics
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
K2_NETWORKS = ("asia", "child", "insurance", "alarm")
K2_CASES, K2_CASES_QUICK = (1000, 10_000), (1000,)
SEED = 40


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


def _cpu_timed(fn):
    """(CPU seconds of this process, result) of fn(): on one core, what the call cost, not the other processes
    sharing the core (wall time on a shared machine counts them)."""
    start = time.process_time()
    result = fn()
    return time.process_time() - start, result


def _best(fn, repeats: int):
    """(shortest time, result) of ``repeats`` calls of fn() -> (seconds, result)."""
    runs = [fn() for _ in range(repeats)]
    return min(seconds for seconds, _ in runs), runs[-1][1]


def compare_network(name: str, n_cases: int, mcmc_samples: int, seed: int = SEED, repeats: int = 3) -> list:
    truth, blank, order, codes, cases = setting(name, n_cases, seed)
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
    data = data_frame(truth, codes)

    def agrum(setup):
        def once():
            learner = agrum_learner(truth, data)   # reading the data frame is not timed (ours gets a CaseSet)
            learner.setMaxIndegree(4)
            setup(learner)
            seconds, dag = _timed(learner.learnDAG)
            return seconds, [(learner.nameFromId(a), learner.nameFromId(b)) for a, b in dag.arcs()]

        return _best(once, repeats)

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


def setting(name: str, n_cases: int, seed: int = SEED) -> tuple:
    """(the true network, a network of its variables without arcs, its topological order by name, the value codes of
    ``n_cases`` cases sampled from it, those cases as a CaseSet)."""
    truth = read_bif(network_text(name))
    codes = sample_values(truth, n_cases, np.random.default_rng(seed))
    cases = CaseSet(truth, {v.name: codes[:, i] for i, v in enumerate(truth.variables)}, {})
    blank = AffordanceNetwork([dataclasses.replace(v, parents=None, cpt=None) for v in truth.variables])
    return truth, blank, [truth.names[i] for i in truth.topological_order()], codes, cases


def data_frame(truth: AffordanceNetwork, codes: np.ndarray):
    """The cases as pyAgrum reads them from pandas: a column per variable, labels s0, s1, ..."""
    import pandas as pd
    return pd.DataFrame({v.name: [f"s{c}" for c in codes[:, i]] for i, v in enumerate(truth.variables)})


def agrum_learner(truth: AffordanceNetwork, data):
    """pyAgrum's BNLearner of ``data`` with the variables' values of ``truth`` (a template network): from the data
    frame alone it keeps only the values some case has, and learns other arcs where a rare value is missing."""
    import pyagrum as gum
    template = gum.BayesNet()
    for v in truth.variables:
        template.add(gum.LabelizedVariable(v.name, v.name, [f"s{j}" for j in range(v.card)]))
    return gum.BNLearner(data, template)


def k2_against_learn_dag(name: str, n_cases: int, rounds: int, calls: int = 3) -> dict:
    """K2 in the true order, ours against pyAgrum's learnDAG (module docstring, 1): median times and ratios."""
    truth, blank, order, codes, cases = setting(name, n_cases)
    options = LearningOptions(structure="k2", score="k2", max_parents=4, order=order, forbidden_group_arcs=())
    data = data_frame(truth, codes)

    def k2_learner():
        learner = agrum_learner(truth, data)
        learner.setMaxIndegree(4)
        learner.useScoreK2()
        learner.useK2([learner.idFromName(n) for n in order])
        return learner

    def agrum_dag():
        learner = k2_learner()
        seconds, dag = _cpu_timed(learner.learnDAG)
        return seconds, sorted((learner.nameFromId(a), learner.nameFromId(b)) for a, b in dag.arcs())

    timed = {
        "ours_codes": lambda: _cpu_timed(lambda: learn_structure(blank, codes, options)[0].arcs),
        "ours_cases": lambda: _cpu_timed(lambda: learn_structure(blank, CaseEvidence(cases, blank).map_values(),
                                                                 options)[0].arcs),
        "pyagrum": agrum_dag,
        "pyagrum_load": lambda: _cpu_timed(lambda: k2_learner().learnDAG()),
    }
    per_round = {key: [] for key in timed}
    arcs = {}
    for k in range(rounds):
        for key in (list(timed) if k % 2 == 0 else list(timed)[::-1]):
            seconds, found = _best(timed[key], calls)
            per_round[key].append(seconds)
            arcs.setdefault(key, found)
    same = sorted(arcs["ours_codes"]) == arcs["pyagrum"] == sorted(arcs["ours_cases"])
    out = {"network": name, "cases": n_cases, "rounds": rounds, "calls": calls, "same_arcs": same,
           "arcs": len(arcs["pyagrum"])}
    out.update({key: statistics.median(times) for key, times in per_round.items()})
    for ours, theirs in (("ours_codes", "pyagrum"), ("ours_cases", "pyagrum"), ("ours_cases", "pyagrum_load")):
        out[f"{ours}/{theirs}"] = statistics.median(a / b for a, b in zip(per_round[ours], per_round[theirs]))
    return out


def k2_table(rows: list) -> str:
    return markdown_table(
        ["network", "cases", "ours, from the codes", "ours, from the CaseSet", "pyAgrum learnDAG",
         "pyAgrum, its load too", "ours / pyAgrum", "from the CaseSet / pyAgrum", "same arcs"],
        [[r["network"], f"{r['cases']:,}", fmt_seconds(r["ours_codes"]), fmt_seconds(r["ours_cases"]),
          fmt_seconds(r["pyagrum"]), fmt_seconds(r["pyagrum_load"]), f"**{r['ours_codes/pyagrum']:.2f}**",
          f"{r['ours_cases/pyagrum']:.2f}", "yes" if r["same_arcs"] else "NO"] for r in rows])


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
    k2_rows = []
    print("K2 with the order given, ours against pyAgrum's learnDAG (ratio ours / pyAgrum, median of the rounds):")
    for n in (K2_CASES_QUICK if args.quick else K2_CASES):
        for name in K2_NETWORKS:
            row = k2_against_learn_dag(name, n, rounds=3 if args.quick else 15)
            k2_rows.append(row)
            print(f"  {name}, {n} cases: ours {fmt_seconds(row['ours_codes'])} (from the CaseSet "
                  f"{fmt_seconds(row['ours_cases'])}), pyAgrum {fmt_seconds(row['pyagrum'])} (with its load "
                  f"{fmt_seconds(row['pyagrum_load'])}): ours / pyAgrum {row['ours_codes/pyagrum']:.2f}, "
                  f"same arcs: {row['same_arcs']}")
    rows = []
    for name in NETWORKS:
        for row in compare_network(name, n_cases, mcmc_samples, repeats=1 if args.quick else 3):
            rows.append(row)
            print(f"  {name}: {row['learner']}: SHD {row['shd']} in {fmt_seconds(row['seconds'])}")
    table = markdown_table(
        ["network", "learner", "SHD", "missing / extra / reversed", "arcs (true)", "time"],
        [[r["network"], r["learner"], r["shd"], f"{r['missing']} / {r['extra']} / {r['reversed']}",
          f"{r['arcs']} ({r['true_arcs']})", fmt_seconds(r["seconds"])] for r in rows])
    table = k2_table(k2_rows) + "\n" + table
    write_results(out, "structure", table, args.quick,
                  {"cases": n_cases, "pyagrum": gum.__version__, "k2": k2_rows, "results": rows})
    return 0
