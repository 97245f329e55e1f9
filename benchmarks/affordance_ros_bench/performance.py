"""Performance: EM time against the number of cases and of nodes, EM's peak memory, predict latency, and learning
next to pyAgrum and pgmpy (``learning_peers``: the CPTs with the structure given, EM with missing values; when the
benchmark-only extras are installed).

Timings are printed and written, never asserted. For numbers comparable with docs/benchmarks.md
run on one core with one BLAS thread:

    OPENBLAS_NUM_THREADS=1 taskset -c 1 affordance-ros-bench perf
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

from affordance_ros.core import (
    AffordanceNetwork,
    SensorModel,
    Variable,
    benchmark_network,
    benchmark_structure,
    fit_em,
    predict,
    predict_batch,
    sample_cases,
)
from affordance_ros.core.ground_truth import random_cpts

from .environment import PLAIN_EM
from .learning_peers import peers_table, run_peers
from .report import best_time, fmt_seconds, machine, machine_line, markdown_table, output_dir, pyplot, write_json

SIGMA = 3.0
CASES_FULL = (300, 1000, 3000, 10000, 30000, 100000)
CASES_QUICK = (300, 1000, 3000)
NODES_FULL = (5, 10, 20, 40)
NODES_QUICK = (5, 10, 20)
NODE_CASES_FULL, NODE_CASES_QUICK = 3000, 500
MEMORY_CASES_FULL, MEMORY_CASES_QUICK = 100_000, 5_000
BATCH = 10_000
# The project's targets (printed beside the measurements, not asserted).
TARGET_EM_10K, TARGET_PREDICT, TARGET_BATCH = 0.5, 1e-3, 0.2


# ------------------------------------------------------------------ EM timings
def em_timing(structure: AffordanceNetwork, cases, repeats: int) -> dict:
    """Seconds per EM iteration (difference of a 12- and a 2-iteration run, so set-up and the
    final log-likelihood pass cancel out) and to convergence with the default options but plain EM
    (``PLAIN_EM``: prior 1, tol 0.001, at most 100 iterations, the uniform start); each the best of
    ``repeats`` runs."""
    short, long_, extra = 2, 12, 10
    t_short, _, _ = best_time(lambda: fit_em(structure, cases, PLAIN_EM.replace(tol=1e-300, max_iter=short)), repeats)
    t_long, _, _ = best_time(lambda: fit_em(structure, cases, PLAIN_EM.replace(tol=1e-300, max_iter=long_)), repeats)
    t_conv, cpu_conv, (_, result) = best_time(lambda: fit_em(structure, cases, PLAIN_EM), repeats)
    return {"cases": cases.n_cases, "per_iteration": max(t_long - t_short, 0.0) / extra,
            "to_convergence": t_conv, "to_convergence_cpu": cpu_conv, "iterations": result.iterations,
            "converged": result.converged}


def em_vs_cases(sizes, log=print) -> list[dict]:
    truth = benchmark_network("montesano", SIGMA, seed=0)
    structure = benchmark_structure("montesano", SIGMA)
    rows = []
    for n in sizes:
        cases, _ = sample_cases(truth, n, np.random.default_rng(n))
        row = em_timing(structure, cases, repeats=3 if n <= 30_000 else 1)
        rows.append(row)
        log(f"  {n:>7} cases: {fmt_seconds(row['per_iteration'])} per iteration, "
            f"{fmt_seconds(row['to_convergence'])} to convergence ({row['iterations']} iterations)")
    return rows


def shaped_network(shape: str, n_nodes: int, card: int = 3, seed: int = 0) -> AffordanceNetwork:
    """A chain X0 -> X1 -> ... or a random tree (each node's parent drawn among the earlier
    ones) of ``n_nodes`` variables, each with a sensor N(5v, sigma) and Dirichlet(1) CPTs."""
    rng = np.random.default_rng(seed)
    variables = []
    for i in range(n_nodes):
        if i == 0:
            parents = ()
        elif shape == "chain":
            parents = (f"X{i - 1}",)
        else:
            parents = (f"X{int(rng.integers(0, i))}",)
        sensor = SensorModel(f"x{i}", 5.0 * np.arange(card), np.full(card, SIGMA))
        variables.append(Variable(f"X{i}", "object", tuple(str(v) for v in range(card)), parents, sensor))
    return random_cpts(AffordanceNetwork(variables), rng)


def em_vs_nodes(sizes, n_cases: int, log=print) -> list[dict]:
    rows = []
    for shape in ("chain", "tree"):
        for n_nodes in sizes:
            truth = shaped_network(shape, n_nodes)
            cases, _ = sample_cases(truth, n_cases, np.random.default_rng(n_nodes))
            # EM starts from the default start, not from the truth's CPTs.
            row = {"shape": shape, "nodes": n_nodes, **em_timing(truth, cases, repeats=3)}
            rows.append(row)
            log(f"  {shape:>5} of {n_nodes:>2} nodes, {n_cases} cases: {fmt_seconds(row['per_iteration'])} "
                f"per iteration, {fmt_seconds(row['to_convergence'])} to convergence ({row['iterations']} iterations)")
    return rows


# ------------------------------------------------------------------ memory
def memory_probe(n_cases: int) -> dict:
    """Run in a fresh process: EM on n montesano cases; peak traced allocations and max RSS."""
    import resource
    import tracemalloc
    truth = benchmark_network("montesano", SIGMA, seed=0)
    structure = benchmark_structure("montesano", SIGMA)
    cases, _ = sample_cases(truth, n_cases, np.random.default_rng(1))
    input_bytes = sum(x.nbytes for x in cases.readings.values())
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    _, result = fit_em(structure, cases, PLAIN_EM)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"cases": n_cases, "iterations": result.iterations, "input_mb": input_bytes / 2**20,
            "em_peak_traced_mb": peak / 2**20, "max_rss_before_em_mb": rss_before / 1024,
            "max_rss_mb": rss_after / 1024}


def memory_in_subprocess(n_cases: int) -> dict:
    code = f"import json; from {__name__} import memory_probe; print(json.dumps(memory_probe({int(n_cases)})))"
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONSAFEPATH": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ predict
def predict_latency(batch: int, calls: int = 300) -> dict:
    """One query (the action, given object labels and effect readings) and a batch of such queries."""
    model = benchmark_network("montesano", SIGMA, seed=0)
    rng = np.random.default_rng(2)
    cases, _ = sample_cases(model, batch, rng)
    effect_sensors = [model[n].sensor.name for n in model.group("effect")]
    one = {s: float(cases.readings[s][0]) for s in effect_sensors}
    labels = {"Shape": "box", "Size": "small"}
    predict(model, ["action"], sensors=one, values=labels)   # compile the junction tree once
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        predict(model, ["action"], sensors=one, values=labels)
        times.append(time.perf_counter() - start)
    sensors = {s: cases.readings[s] for s in effect_sensors}
    values = {"Shape": np.full(batch, "box"), "Size": np.full(batch, "small")}
    t_batch, _, answer = best_time(lambda: predict_batch(model, ["action"], sensors=sensors, values=values), 5)
    assert answer.marginals["Action"].shape == (batch, 3)
    return {"one_median": float(np.median(times)), "one_p99": float(np.percentile(times, 99)),
            "calls": calls, "batch": batch, "batch_seconds": t_batch}


# ------------------------------------------------------------------ figures, tables
def cases_figure(rows: list[dict], path) -> None:
    plt = pyplot()
    n = np.array([r["cases"] for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
    ax.loglog(n, [r["per_iteration"] for r in rows], "o-", label="one EM iteration")
    ax.loglog(n, [r["to_convergence"] for r in rows], "s-", label="EM to convergence (prior 1)")
    ref = rows[-1]["per_iteration"] * n / n[-1]
    ax.loglog(n, ref, "k:", lw=1, label="linear in cases")
    ax.set_xlabel("cases")
    ax.set_ylabel("wall time (s)")
    ax.set_title(f"EM on the montesano network, σ = {SIGMA:g}", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def nodes_figure(rows: list[dict], path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
    for shape, marker in (("chain", "o-"), ("tree", "s-")):
        part = [r for r in rows if r["shape"] == shape]
        ax.plot([r["nodes"] for r in part], [1e3 * r["per_iteration"] for r in part], marker, label=f"{shape}")
    ax.set_xlabel("nodes (3 values each, one sensor each)")
    ax.set_ylabel("one EM iteration (ms)")
    ax.set_title(f"EM cost against network size ({rows[0]['cases']} cases)", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _target(value: float, target: float) -> str:
    return f"target < {fmt_seconds(target)}: {'met' if value < target else 'NOT met'}"


def tables(cases_rows, node_rows, memory, latency) -> str:
    per_case = [[r["cases"], fmt_seconds(r["per_iteration"]), f"{1e6 * r['per_iteration'] / r['cases']:.2f}",
                 fmt_seconds(r["to_convergence"]), fmt_seconds(r["to_convergence_cpu"]),
                 f"{r['iterations']}{'' if r['converged'] else ' (max)'}"] for r in cases_rows]
    per_node = [[r["shape"], r["nodes"], fmt_seconds(r["per_iteration"]), fmt_seconds(r["to_convergence"]),
                 f"{r['iterations']}{'' if r['converged'] else ' (max)'}"] for r in node_rows]
    text = ("EM against the number of cases (montesano network, σ = 3, prior 1, tol 0.001; best of 3 runs "
            "up to 30000 cases, one run above):\n\n")
    text += markdown_table(["cases", "one iteration", "µs per case per iteration", "to convergence",
                            "CPU time to convergence", "iterations"], per_case)
    text += f"\nEM against the number of nodes ({node_rows[0]['cases']} cases, 3 values per node, best of 3 runs):\n\n"
    text += markdown_table(["shape", "nodes", "one iteration", "to convergence", "iterations"], per_node)
    text += "\nPeak memory of EM (fresh process, montesano network):\n\n"
    text += markdown_table(
        ["cases", "readings in memory", "peak allocations during EM (tracemalloc)", "process max RSS"],
        [[memory["cases"], f"{memory['input_mb']:.1f} MB", f"{memory['em_peak_traced_mb']:.1f} MB",
          f"{memory['max_rss_mb']:.0f} MB (before EM: {memory['max_rss_before_em_mb']:.0f} MB)"]])
    text += "\nPredict, in process (montesano model, query Action given object labels and effect readings):\n\n"
    text += markdown_table(["what", "time"], [
        [f"one query, median of {latency['calls']}", fmt_seconds(latency["one_median"])],
        ["one query, 99th percentile", fmt_seconds(latency["one_p99"])],
        [f"batch of {latency['batch']} (predict_batch, best of 5)", fmt_seconds(latency["batch_seconds"])]])
    return text


def target_lines(cases_rows, latency) -> list[str]:
    lines = []
    at_10k = [r for r in cases_rows if r["cases"] == 10_000]
    if at_10k:
        t, cpu = at_10k[0]["to_convergence"], at_10k[0]["to_convergence_cpu"]
        lines.append(f"EM to convergence, 10000 montesano cases, sigma 3: {fmt_seconds(t)} wall, "
                     f"{fmt_seconds(cpu)} CPU ({_target(t, TARGET_EM_10K)})")
    one = latency["one_median"]
    lines.append(f"one predict: {fmt_seconds(one)} ({_target(one, TARGET_PREDICT)})")
    lines.append(f"predict_batch of {latency['batch']}: {fmt_seconds(latency['batch_seconds'])} "
                 f"({_target(latency['batch_seconds'], TARGET_BATCH)})")
    return lines


# ------------------------------------------------------------------ command
def run(args) -> int:
    out = output_dir(args.out)
    quick = args.quick
    print(f"bench perf{' (quick)' if quick else ''}")
    print(f"machine: {machine_line()}")
    if os.environ.get("OPENBLAS_NUM_THREADS") is None and (os.cpu_count() or 1) > 1:
        print("note: OPENBLAS_NUM_THREADS is not set; for one-core figures run with "
              "OPENBLAS_NUM_THREADS=1 taskset -c 1")
    print("EM against the number of cases:")
    cases_rows = em_vs_cases(CASES_QUICK if quick else CASES_FULL)
    n_cases = NODE_CASES_QUICK if quick else NODE_CASES_FULL
    print("EM against the number of nodes:")
    node_rows = em_vs_nodes(NODES_QUICK if quick else NODES_FULL, n_cases)
    memory = memory_in_subprocess(MEMORY_CASES_QUICK if quick else MEMORY_CASES_FULL)
    print(f"memory: EM on {memory['cases']} cases: peak allocations {memory['em_peak_traced_mb']:.1f} MB, "
          f"max RSS {memory['max_rss_mb']:.0f} MB")
    latency = predict_latency(BATCH)
    print(f"predict: one query {fmt_seconds(latency['one_median'])} (median), "
          f"batch of {latency['batch']} {fmt_seconds(latency['batch_seconds'])}")
    peers = run_peers(quick) if importlib.util.find_spec("pyagrum") and importlib.util.find_spec("pgmpy") else None
    if peers is None:
        print("learning next to pyAgrum and pgmpy: skipped, they are benchmark-only extras (tools/setup_bench.sh)")

    cases_figure(cases_rows, out / "perf_em_cases.png")
    nodes_figure(node_rows, out / "perf_em_nodes.png")
    text = tables(cases_rows, node_rows, memory, latency)
    if peers is not None:
        text += "\nLearning next to pyAgrum and pgmpy (CPU time on one core; the structure given, complete cases; " \
                "then EM with missing values):\n\n" + peers_table(peers)
    targets = target_lines(cases_rows, latency)
    (out / "perf_table.md").write_text(text + "\nThe targets:\n\n" + "".join(f"- {t}\n" for t in targets))
    write_json(out / "perf_results.json", {"machine": machine(), "quick": quick, "em_vs_cases": cases_rows,
                                           "em_vs_nodes": node_rows, "memory": memory, "predict": latency,
                                           "peers": peers})
    print()
    print(text)
    for line in targets:
        print(line)
    for name in ("perf_em_cases.png", "perf_em_nodes.png", "perf_table.md", "perf_results.json"):
        print(f"wrote {out / name}")
    return 0
