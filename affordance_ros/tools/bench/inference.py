"""One query and batches against pyAgrum's LazyPropagation on six standard networks, same process.

The networks (asia, child, insurance, alarm, hailfinder, win95pts) are read from the BIF files
the pgmpy wheel ships (``pgmpy/utils/example_models/*.bif.gz``): ours by
``affordance_ros.data.formats.bif.read_bif``; pyAgrum's by ``pyagrum.loadBN`` from the BIF our
``write_bif`` writes of it (labels renamed s0, s1, ...: pyAgrum's parser refuses some of the
original labels). For every network, evidence sets are drawn from a sample of the network: about a
fifth of the variables, half of them hard (the sampled label), half soft (a random
likelihood vector in [0.1, 1]); the query is one other variable.

- one query: pyAgrum with one engine per network reused, the query targeted
  (``setEvidence``, ``addTarget``, ``makeInference``, ``posterior``) against ours
  (``core.query.posterior``: the cached plan of the evidence pattern). "cold" is the first
  call with an evidence pattern (ours compiles its plan then), "warm" the median of repeated
  calls with the same evidence, as a planner asking again and again;
- a batch: K cases with the evidence pattern of the first set (values drawn per case), our
  chunked ``posterior`` on all K against pyAgrum's loop over the K cases;
- the largest absolute difference between the two posteriors, over every query and case.

pyAgrum is a benchmark-only extra (requirements-bench.txt, tools/setup_bench.sh).
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.resources
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ...core import AffordanceNetwork
from ...core.ground_truth import sample_values
from ...core.query import posterior
from ...data.formats.bif import read_bif, write_bif
from .common import extras_installed, fmt_seconds, machine_line, markdown_table, output_dir, write_results

NETWORKS = ("asia", "child", "insurance", "alarm", "hailfinder", "win95pts")


def network_text(name: str) -> str | None:
    """The BIF text of a standard network from the installed pgmpy wheel, None without pgmpy."""
    if importlib.util.find_spec("pgmpy") is None:
        return None
    path = importlib.resources.files("pgmpy") / "utils" / "example_models" / f"{name}.bif.gz"
    return gzip.decompress(path.read_bytes()).decode("utf-8")


def evidence_sets(model, n_sets: int, rng: np.random.Generator) -> list:
    """[(query index, hard {index: code}, soft {index: likelihood vector})] drawn from a sample."""
    codes = sample_values(model, n_sets, rng)
    n = len(model)
    out = []
    for k in range(n_sets):
        order = rng.permutation(n)
        chosen = order[: max(2, n // 5)]
        query = int(order[-1])
        hard = {int(v): int(codes[k, v]) for v in chosen[::2]}
        soft = {int(v): rng.uniform(0.1, 1.0, model.variables[v].card) for v in chosen[1::2]}
        out.append((query, hard, soft))
    return out


def _ours_inputs(model, hard: dict, soft: dict) -> dict:
    liks = {v: np.eye(model.variables[v].card)[[c]] for v, c in hard.items()}
    liks.update({v: x[None, :] for v, x in soft.items()})
    return liks


def _agrum_evidence(model, hard: dict, soft: dict) -> dict:
    ev = {model.names[v]: int(c) for v, c in hard.items()}
    ev.update({model.names[v]: x.tolist() for v, x in soft.items()})
    return ev


def _agrum_query(engine, evidence: dict, name: str) -> np.ndarray:
    engine.setEvidence(evidence)
    engine.eraseAllTargets()
    engine.addTarget(name)
    engine.makeInference()
    return engine.posterior(name).toarray()


def _ours_query(model, query: int, liks: dict, hard: list) -> np.ndarray:
    return posterior(model, [query], liks, hard)[0]


def _timed(fn, repeats: int) -> tuple[float, float, object]:
    """(first call, median of ``repeats`` more, last result)."""
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times), result


def compare_network(name: str, n_sets: int, repeats: int, batch: int, seed: int = 0) -> dict:
    import pyagrum as gum
    text = network_text(name)
    model = read_bif(text)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.bif"
        # pyAgrum's parser refuses labels such as "Asy/Patch" or "<5": it gets the same network with
        # labels s0, s1, ... in the same order (evidence is given to it by index)
        write_bif(AffordanceNetwork([dataclasses.replace(v, values=tuple(f"s{j}" for j in range(v.card)))
                                     for v in model.variables]), path)
        bn = gum.loadBN(str(path))
    for v in model.variables:   # pyAgrum parses BIF numbers in single precision: put our doubles back
        table = bn.cpt(v.name)
        ours = [*v.parents, v.name]
        layout = np.transpose(v.cpt, [ours.index(n) for n in reversed(list(table.names))])
        table.fillWith(layout.ravel().tolist())
        assert np.array_equal(table.toarray(), layout), v.name
    engine = gum.LazyPropagation(bn)
    rng = np.random.default_rng(seed)
    rows, diff = [], 0.0
    for query, hard, soft in evidence_sets(model, n_sets, rng):
        liks, hard_idx = _ours_inputs(model, hard, soft), list(hard)
        evidence, qname = _agrum_evidence(model, hard, soft), model.names[query]
        a_cold, a_warm, theirs = _timed(lambda: _agrum_query(engine, evidence, qname), repeats)
        o_cold, o_warm, ours = _timed(lambda: _ours_query(model, query, liks, hard_idx), repeats)
        diff = max(diff, float(np.max(np.abs(ours - theirs))))
        rows.append({"pyagrum_cold": a_cold, "pyagrum_warm": a_warm, "ours_cold": o_cold, "ours_warm": o_warm})
    # a batch: the first set's pattern, values drawn per case
    query, hard, soft = evidence_sets(model, 1, np.random.default_rng(seed + 1))[0]
    codes = sample_values(model, batch, rng)
    liks = {v: np.eye(model.variables[v].card)[codes[:, v]] for v in hard}
    liks.update({v: rng.uniform(0.1, 1.0, (batch, model.variables[v].card)) for v in soft})
    start = time.perf_counter()
    ours = posterior(model, [query], liks, list(hard))
    ours_batch = time.perf_counter() - start
    start = time.perf_counter()
    theirs = np.empty_like(ours)
    engine = gum.LazyPropagation(bn)
    qname = model.names[query]
    for k in range(batch):
        ev = {model.names[v]: int(codes[k, v]) for v in hard}
        ev.update({model.names[v]: liks[v][k].tolist() for v in soft})
        theirs[k] = _agrum_query(engine, ev, qname)
    agrum_batch = time.perf_counter() - start
    diff = max(diff, float(np.max(np.abs(ours - theirs))))
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    return {"network": name, "variables": len(model), "evidence_sets": n_sets, "repeats": repeats, **med,
            "warm_ratio": med["pyagrum_warm"] / med["ours_warm"],
            "warm_faster_sets": sum(r["ours_warm"] <= r["pyagrum_warm"] for r in rows),
            "batch": batch, "ours_batch": ours_batch, "pyagrum_batch": agrum_batch,
            "batch_ratio": agrum_batch / ours_batch, "max_abs_difference": diff}


def run(args) -> int:
    if not extras_installed("inference"):
        return 0
    import pyagrum as gum
    out = output_dir(args.out)
    n_sets, repeats, batch = (5, 20, 200) if args.quick else (50, 200, 5000)
    print(f"bench inference{' (quick)' if args.quick else ''}: six standard networks, {n_sets} evidence sets each "
          f"(hard and soft), one query {repeats + 1} times per set; a batch of {batch}; pyAgrum {gum.__version__}")
    print(f"machine: {machine_line()}")
    results = []
    for name in NETWORKS:
        r = compare_network(name, n_sets, repeats, batch)
        results.append(r)
        print(f"  {name}: one query {fmt_seconds(r['ours_warm'])} (pyAgrum {fmt_seconds(r['pyagrum_warm'])}, "
              f"{r['warm_ratio']:.1f}x); batch {fmt_seconds(r['ours_batch'])} "
              f"(pyAgrum {fmt_seconds(r['pyagrum_batch'])}, {r['batch_ratio']:.1f}x); "
              f"largest difference to pyAgrum {r['max_abs_difference']:.1e}")
    table = markdown_table(
        ["network", "variables", "one query: ours", "pyAgrum", "pyAgrum / ours", "sets where ours is faster",
         "first call with a pattern: ours / pyAgrum", f"batch of {batch}: ours", "pyAgrum loop", "pyAgrum / ours",
         "largest difference"],
        [[r["network"], r["variables"], fmt_seconds(r["ours_warm"]), fmt_seconds(r["pyagrum_warm"]),
          f"{r['warm_ratio']:.1f}", f"{r['warm_faster_sets']} of {r['evidence_sets']}",
          f"{fmt_seconds(r['ours_cold'])} / {fmt_seconds(r['pyagrum_cold'])}", fmt_seconds(r["ours_batch"]),
          fmt_seconds(r["pyagrum_batch"]), f"{r['batch_ratio']:.1f}", f"{r['max_abs_difference']:.1e}"]
         for r in results])
    write_results(out, "inference", table, args.quick, {"pyagrum": gum.__version__, "results": results})
    return 0
