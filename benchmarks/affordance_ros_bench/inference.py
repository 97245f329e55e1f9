"""Queries against pyAgrum's LazyPropagation on six standard networks, same process, and ~/predict over DDS.

The networks (asia, child, insurance, alarm, hailfinder, win95pts) are read from the BIF files
the pgmpy wheel ships (``pgmpy/utils/example_models/*.bif.gz``): ours by
``affordance_ros.data.formats.bif.read_bif``; pyAgrum's by ``pyagrum.loadBN`` from the BIF our
``write_bif`` writes of it (labels renamed s0, s1, ...: pyAgrum's parser refuses some of the
original labels). pyAgrum has one engine per network, reused, and every query is targeted
(``setEvidence``, ``eraseAllTargets``, ``addTarget``, ``makeInference``, ``posterior``).

- repeated pattern: evidence sets drawn from a sample of the network, about a fifth of the
  variables, half of them hard (the sampled label), half soft (a random likelihood vector in
  [0.1, 1]); the query is one other variable. Ours is ``core.query.posterior``; "first" is the
  first call with an evidence set, "again" the median of repeated calls with the same evidence;
  a batch of K cases with the first set's pattern, ours on all K against pyAgrum's loop;
- mixed patterns, through ``predict`` (the API users call): the network with a 1-D Gaussian
  sensor on every variable (``with_sensors``); per call a new evidence set, a fifth of the
  variables, half by label, half by a reading; pyAgrum gets the reading's likelihood vector.
  Per round a fresh copy of the model (nothing cached but its junction tree, built by one query
  without evidence first): pass one meets every evidence pattern for the first time, pass two
  asks the same sets again; ours and pyAgrum alternate call by call. The ratio of the medians is
  taken per round; the figures are the medians over the rounds;
- mixed batches through ``predict_batch``: K cases each with its own evidence pattern (None
  where a case has no label or reading), one query variable; cases per second and the peak of
  the memory allocated during the call (tracemalloc, a second run), against pyAgrum's loop;
- the largest absolute difference to pyAgrum over every query and case;
- ``~/predict`` of the learner node over DDS, idle and while learns run back to back
  (``bench dds``'s measurement), next to the same query in process on the node's model.

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
import tracemalloc
from pathlib import Path

import numpy as np

from affordance_ros.core import AffordanceNetwork, SensorModel, predict, predict_batch
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.query import posterior
from affordance_ros.data.formats.bif import read_bif, write_bif

from .environment import extras_installed
from .report import fmt_seconds, machine_line, markdown_table, output_dir, write_results

NETWORKS = ("asia", "child", "insurance", "alarm", "hailfinder", "win95pts")
READING_STDDEV = 0.7   # of ``with_sensors``' readings: neighbouring values overlap, the evidence stays soft


def network_text(name: str) -> str | None:
    """The BIF text of a standard network from the installed pgmpy wheel, None without pgmpy."""
    if importlib.util.find_spec("pgmpy") is None:
        return None
    path = importlib.resources.files("pgmpy") / "utils" / "example_models" / f"{name}.bif.gz"
    return gzip.decompress(path.read_bytes()).decode("utf-8")


def _draws(model, n_sets: int, rng: np.random.Generator):
    """Per evidence set: (the values sampled from the network, the variables observed (a fifth of them),
    the query (another variable))."""
    codes = sample_values(model, n_sets, rng)
    n = len(model)
    for k in range(n_sets):
        order = rng.permutation(n)
        yield codes[k], order[: max(2, n // 5)], int(order[-1])


def evidence_sets(model, n_sets: int, rng: np.random.Generator) -> list:
    """[(query index, hard {index: code}, soft {index: likelihood vector})] drawn from a sample."""
    out = []
    for codes, chosen, query in _draws(model, n_sets, rng):
        hard = {int(v): int(codes[v]) for v in chosen[::2]}
        soft = {int(v): rng.uniform(0.1, 1.0, model.variables[v].card) for v in chosen[1::2]}
        out.append((query, hard, soft))
    return out


def with_sensors(model: AffordanceNetwork) -> AffordanceNetwork:
    """``model`` with a 1-D Gaussian sensor on every variable: reading ``NAME~``, means 0, 1, .., card - 1."""
    return AffordanceNetwork([dataclasses.replace(v, sensor=SensorModel(
        f"{v.name}~", np.arange(v.card, dtype=float), np.full(v.card, READING_STDDEV))) for v in model.variables])


@dataclasses.dataclass(frozen=True)
class MixedSet:
    """One query with its own evidence pattern: ``predict``'s arguments and pyAgrum's evidence."""

    query: str
    sensors: dict
    values: dict
    agrum: dict


def mixed_sets(model: AffordanceNetwork, n_sets: int, rng: np.random.Generator) -> list:
    """Evidence sets of ``with_sensors(model)``: a fifth of the variables, half by label, half by a reading
    (the sampled value plus Gaussian noise); pyAgrum gets the reading's likelihood vector."""
    out = []
    for codes, chosen, query in _draws(model, n_sets, rng):
        values = {model.names[v]: model.variables[v].values[codes[v]] for v in chosen[::2]}
        agrum = {model.names[v]: int(codes[v]) for v in chosen[::2]}
        sensors = {}
        for v in chosen[1::2]:
            sensor = model.variables[v].sensor
            x = float(codes[v] + rng.normal(0.0, READING_STDDEV))
            sensors[sensor.name] = x
            agrum[model.names[v]] = _reading_likelihood(sensor, x)
        out.append(MixedSet(model.names[query], sensors, values, agrum))
    return out


def _reading_likelihood(sensor: SensorModel, x: float) -> list:
    """p(x | value) of each value, scaled to a maximum of 1: the soft evidence pyAgrum gets for a reading."""
    log_lik = sensor.log_likelihood(np.array([x]))[0]
    return np.exp(log_lik - log_lik.max()).tolist()


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


def _once(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def pyagrum_network(model: AffordanceNetwork):
    """pyAgrum's ``BayesNet`` of ``model``: the same structure, labels s0, s1, .., and the CPTs in double precision."""
    import pyagrum as gum
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "network.bif"
        # pyAgrum's parser refuses labels such as "Asy/Patch" or "<5": it gets the same network with
        # labels s0, s1, ... in the same order (evidence is given to it by index)
        write_bif(AffordanceNetwork([dataclasses.replace(v, values=tuple(f"s{j}" for j in range(v.card)), sensor=None)
                                     for v in model.variables]), path)
        bn = gum.loadBN(str(path))
    for v in model.variables:   # pyAgrum parses BIF numbers in single precision: put our doubles back
        table = bn.cpt(v.name)
        ours = [*v.parents, v.name]
        layout = np.transpose(v.cpt, [ours.index(n) for n in reversed(list(table.names))])
        table.fillWith(layout.ravel().tolist())
        assert np.array_equal(table.toarray(), layout), v.name
    return bn


def repeated_patterns(model, bn, n_sets: int, repeats: int, batch: int, seed: int = 0) -> dict:
    """One query and a batch with the same evidence pattern, through ``core.query.posterior``."""
    import pyagrum as gum
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
    ours_batch, ours = _once(lambda: posterior(model, [query], liks, list(hard)))
    theirs = np.empty_like(ours)
    engine = gum.LazyPropagation(bn)
    qname = model.names[query]
    start = time.perf_counter()
    for k in range(batch):
        ev = {model.names[v]: int(codes[k, v]) for v in hard}
        ev.update({model.names[v]: liks[v][k].tolist() for v in soft})
        theirs[k] = _agrum_query(engine, ev, qname)
    agrum_batch = time.perf_counter() - start
    diff = max(diff, float(np.max(np.abs(ours - theirs))))
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    return {"evidence_sets": n_sets, "repeats": repeats, **med,
            "warm_ratio": med["pyagrum_warm"] / med["ours_warm"],
            "warm_faster_sets": sum(r["ours_warm"] <= r["pyagrum_warm"] for r in rows),
            "batch": batch, "ours_batch": ours_batch, "pyagrum_batch": agrum_batch,
            "batch_ratio": agrum_batch / ours_batch, "max_abs_difference": diff}


def _predict_marginal(model, s: MixedSet) -> np.ndarray:
    return np.array(list(predict(model, [s.query], sensors=s.sensors, values=s.values).marginals[s.query].values()))


def mixed_patterns(model, bn, n_sets: int, rounds: int, seed: int = 0) -> dict:
    """One query per evidence set through ``predict``, every set a pattern of its own (module docstring)."""
    import pyagrum as gum
    engine = gum.LazyPropagation(bn)
    engine.makeInference()
    sets = mixed_sets(model, n_sets, np.random.default_rng(seed))
    diff = 0.0
    passes = {"new": [], "seen": []}   # per round: (ours times, pyAgrum times)
    for _ in range(rounds):
        fresh = AffordanceNetwork(model.variables)
        predict(fresh, [sets[0].query])     # its junction tree (and whatever else is per model, not per pattern)
        for name in passes:
            ours, theirs = np.empty(n_sets), np.empty(n_sets)
            for k, s in enumerate(sets):
                theirs[k], agrum = _once(lambda: _agrum_query(engine, s.agrum, s.query))
                ours[k], answer = _once(lambda: _predict_marginal(fresh, s))
                diff = max(diff, float(np.max(np.abs(answer - agrum))))
            passes[name].append((ours, theirs))
    out = {"sets": n_sets, "rounds": rounds, "max_abs_difference": diff}
    for name, per_round in passes.items():
        out[f"{name}_ours"] = statistics.median(float(np.median(o)) for o, _ in per_round)
        out[f"{name}_pyagrum"] = statistics.median(float(np.median(t)) for _, t in per_round)
        out[f"{name}_ours_p99"] = statistics.median(float(np.percentile(o, 99)) for o, _ in per_round)
        out[f"{name}_ratio"] = statistics.median(float(np.median(o) / np.median(t)) for o, t in per_round)
    return out


def mixed_batch_inputs(model: AffordanceNetwork, n_cases: int, rng: np.random.Generator) -> tuple:
    """(query name, ``predict_batch``'s sensors and values with None where a case has no evidence, and
    each case's pyAgrum evidence, the latter only for the first 5000 cases)."""
    n = len(model)
    query = int(rng.integers(n))
    others = np.array([v for v in range(n) if v != query])
    codes = sample_values(model, n_cases, rng)
    n_chosen = max(2, n // 5)
    chosen = np.argsort(rng.random((n_cases, len(others))), axis=1)[:, :n_chosen]   # a pattern per case
    by_label = np.zeros((n_cases, n), dtype=bool)
    by_reading = np.zeros((n_cases, n), dtype=bool)
    rows = np.arange(n_cases)[:, None]
    by_label[rows, others[chosen[:, ::2]]] = True
    by_reading[rows, others[chosen[:, 1::2]]] = True
    readings = codes + rng.normal(0.0, READING_STDDEV, codes.shape)
    values, sensors = {}, {}
    for v, var in enumerate(model.variables):
        if by_label[:, v].any():
            labels = np.array(var.values, dtype=object)[codes[:, v]]
            labels[~by_label[:, v]] = None
            values[var.name] = labels
        if by_reading[:, v].any():
            column = readings[:, v].astype(object)
            column[~by_reading[:, v]] = None
            sensors[var.sensor.name] = column
    agrum = []
    for k in range(min(n_cases, 5000)):
        ev = {model.names[v]: int(codes[k, v]) for v in np.flatnonzero(by_label[k])}
        for v in np.flatnonzero(by_reading[k]):
            ev[model.names[v]] = _reading_likelihood(model.variables[v].sensor, float(readings[k, v]))
        agrum.append(ev)
    return model.names[query], sensors, values, agrum


def mixed_batches(model, bn, sizes: tuple, agrum_cases: int, seed: int = 0) -> dict:
    """``predict_batch`` on K cases of mixed patterns: cases/s and peak allocations; pyAgrum's loop on the first
    ``agrum_cases`` of them."""
    import pyagrum as gum
    out = {"max_abs_difference": 0.0}
    for n_cases in sizes:
        query, sensors, values, agrum = mixed_batch_inputs(model, n_cases, np.random.default_rng(seed))
        seconds, batch = _once(lambda: predict_batch(model, [query], sensors=sensors, values=values))
        tracemalloc.start()
        predict_batch(model, [query], sensors=sensors, values=values)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[n_cases] = {"ours_seconds": seconds, "ours_cases_per_second": n_cases / seconds,
                        "ours_peak_mb": peak / 2**20}
        if n_cases == sizes[0]:
            engine = gum.LazyPropagation(bn)
            theirs = np.empty((agrum_cases, model[query].card))
            start = time.perf_counter()
            for k in range(agrum_cases):
                theirs[k] = _agrum_query(engine, agrum[k], query)
            out["pyagrum_cases_per_second"] = agrum_cases / (time.perf_counter() - start)
            out["max_abs_difference"] = float(np.max(np.abs(batch.marginals[query][:agrum_cases] - theirs)))
    return out


def dds_predict(n_trials: int, calls: int) -> dict | None:
    """``bench dds``' ~/predict round trips, idle and while learning, and the same query in process on the
    node's model; None when the node cannot run here."""
    if importlib.util.find_spec("rclpy") is None:
        print("  ~/predict over DDS: skipped, rclpy is not importable here")
        return None
    from . import dds
    with tempfile.TemporaryDirectory(prefix="affordance-bench-inference-") as tmpdir:
        figures = dds.predict_latencies(Path(tmpdir), n_trials, calls)
        model = AffordanceNetwork.load(Path(tmpdir) / "run" / "model.json")
    ask = lambda: predict(model, dds.PREDICT_QUERY, sensors=dds.PREDICT_SENSORS, values=dds.PREDICT_VALUES)  # noqa: E731
    ask()
    times = np.array([_once(ask)[0] for _ in range(calls)])
    return {**figures, "in_process_median": float(np.median(times)),
            "in_process_p99": float(np.percentile(times, 99))}


def _cases_per_second(x: float) -> str:
    return f"{x:,.0f}"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each part of the bench measures."""

    sets: int = 50              # repeated pattern: evidence sets
    repeats: int = 200          # .. calls per set after the first
    batch: int = 5000           # .. batch of one pattern
    mixed: int = 150            # mixed patterns through predict: evidence sets
    rounds: int = 3             # .. rounds (a fresh model each)
    batches: tuple = (5000, 100_000)    # predict_batch of mixed cases
    agrum_cases: int = 5000     # .. pyAgrum's loop over the first of them
    trials: int = 1000          # the node's stored cases before ~/predict over DDS
    calls: int = 1000           # .. round trips, idle and while learning


QUICK = Sizes(sets=5, repeats=20, batch=200, mixed=20, rounds=2, batches=(200, 1000), agrum_cases=200, trials=60,
              calls=50)


def run(args) -> int:
    if not extras_installed("inference"):
        return 0
    import pyagrum as gum
    out = output_dir(args.out)
    z = QUICK if args.quick else Sizes()
    print(f"bench inference{' (quick)' if args.quick else ''}: six standard networks against pyAgrum "
          f"{gum.__version__}; repeated pattern: {z.sets} evidence sets, each {z.repeats + 1} times, a batch of "
          f"{z.batch}; mixed patterns through predict: {z.mixed} sets, {z.rounds} rounds; predict_batch of "
          f"{' and '.join(map(str, z.batches))} mixed cases (pyAgrum: {z.agrum_cases}); "
          f"~/predict over DDS: {z.calls} calls")
    print(f"machine: {machine_line()}")
    results = []
    for name in NETWORKS:
        model = with_sensors(read_bif(network_text(name)))
        bn = pyagrum_network(model)
        r = {"network": name, "variables": len(model), **repeated_patterns(model, bn, z.sets, z.repeats, z.batch),
             "mixed": mixed_patterns(model, bn, z.mixed, z.rounds),
             "mixed_batch": mixed_batches(model, bn, z.batches, z.agrum_cases)}
        r["max_abs_difference"] = max(r["max_abs_difference"], r["mixed"]["max_abs_difference"],
                                      r["mixed_batch"]["max_abs_difference"])
        results.append(r)
        m, b = r["mixed"], r["mixed_batch"]
        print(f"  {name}: one query, repeated pattern {fmt_seconds(r['ours_warm'])} (pyAgrum "
              f"{fmt_seconds(r['pyagrum_warm'])}); mixed patterns through predict, new {fmt_seconds(m['new_ours'])} "
              f"(pyAgrum {fmt_seconds(m['new_pyagrum'])}, ours/pyAgrum {m['new_ratio']:.2f}), seen "
              f"{fmt_seconds(m['seen_ours'])} ({m['seen_ratio']:.2f}); mixed batch of {z.batches[0]} "
              f"{_cases_per_second(b[z.batches[0]]['ours_cases_per_second'])} cases/s (pyAgrum "
              f"{_cases_per_second(b['pyagrum_cases_per_second'])}); largest difference to pyAgrum "
              f"{r['max_abs_difference']:.1e}")
    dds_figures = dds_predict(z.trials, z.calls)
    table = markdown_table(
        ["network", "variables", "one query, repeated pattern: ours", "pyAgrum", "pyAgrum / ours",
         "sets where ours is faster", "first call with a set: ours / pyAgrum", f"batch of {z.batch}: ours",
         "pyAgrum loop", "pyAgrum / ours", "largest difference"],
        [[r["network"], r["variables"], fmt_seconds(r["ours_warm"]), fmt_seconds(r["pyagrum_warm"]),
          f"{r['warm_ratio']:.1f}", f"{r['warm_faster_sets']} of {r['evidence_sets']}",
          f"{fmt_seconds(r['ours_cold'])} / {fmt_seconds(r['pyagrum_cold'])}", fmt_seconds(r["ours_batch"]),
          fmt_seconds(r["pyagrum_batch"]), f"{r['batch_ratio']:.1f}", f"{r['max_abs_difference']:.1e}"]
         for r in results])
    table += "\n" + markdown_table(
        ["network", "predict, new pattern: ours (p99)", "pyAgrum", "ours / pyAgrum",
         "predict, seen pattern: ours (p99)", "pyAgrum", "ours / pyAgrum"],
        [[r["network"], f"{fmt_seconds(m['new_ours'])} ({fmt_seconds(m['new_ours_p99'])})",
          fmt_seconds(m["new_pyagrum"]), f"**{m['new_ratio']:.2f}**",
          f"{fmt_seconds(m['seen_ours'])} ({fmt_seconds(m['seen_ours_p99'])})", fmt_seconds(m["seen_pyagrum"]),
          f"**{m['seen_ratio']:.2f}**"] for r in results for m in [r["mixed"]]])
    table += "\n" + markdown_table(
        ["network", *[f"predict_batch of {k:,} mixed cases: cases/s (peak MB)" for k in z.batches],
         f"pyAgrum loop, {z.agrum_cases:,} cases: cases/s", "ours / pyAgrum"],
        [[r["network"], *[f"{_cases_per_second(b[k]['ours_cases_per_second'])} ({b[k]['ours_peak_mb']:.1f})"
                          for k in z.batches],
          _cases_per_second(b["pyagrum_cases_per_second"]),
          f"**{b[z.batches[0]]['ours_cases_per_second'] / b['pyagrum_cases_per_second']:.1f}**"]
         for r in results for b in [r["mixed_batch"]]])
    if dds_figures:
        d = dds_figures
        table += "\n" + markdown_table(
            ["predict of the node's model (montesano, the Action given 2 labels and 4 readings)", "p50", "p99"],
            [["in process (`predict`)", fmt_seconds(d["in_process_median"]), fmt_seconds(d["in_process_p99"])],
             ["`~/predict` over DDS, idle", fmt_seconds(d["predict_median"]), fmt_seconds(d["predict_p99"])],
             [f"`~/predict` over DDS while learns run back to back ({d['busy_learns']} learns)",
              fmt_seconds(d["busy_predict_median"]), fmt_seconds(d["busy_predict_p99"])]])
    write_results(out, "inference", table, args.quick,
                  {"pyagrum": gum.__version__, "results": results, "dds_predict": dds_figures})
    return 0
