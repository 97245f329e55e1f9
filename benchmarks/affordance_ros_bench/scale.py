"""Learning through the node on up to a million stored cases: time and peak memory against the number of cases.

For each size N a case database is written with N montesano trials (the simulated robot's
ground truth, sigma 1; written in bulk, one transaction, as the node would have stored them
one by one), the learner node is started on it as its own process (the installed launcher)
and ~/learn is called once over DDS (K2 structure + EM, the defaults). Figures: the learn's
round trip, its duration in the worker process, and the peak resident memory (VmHWM) of the
node process and of its learning worker process.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np

from affordance_ros.core import benchmark_network
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.data.storage import CaseStore

from .dds import LEARNER, ServiceClient, bench_env, launch, stop_process
from .report import fmt_seconds, machine_line, markdown_table, output_dir, write_results

SIZES_FULL = (10_000, 30_000, 100_000, 300_000, 1_000_000)
SIZES_QUICK = (2_000,)
WRITE_CHUNK = 100_000


def write_database(path: Path, n_cases: int, seed: int = 0) -> None:
    """N montesano trials in the node's schema, written in one transaction."""
    CaseStore(path).close()   # the schema
    truth = benchmark_network("montesano", 1.0, seed)
    rng = np.random.default_rng(seed)
    sensors = [(i, v.sensor.name, "object" if v.group == "object" else "effect")
               for i, v in enumerate(truth.variables) if v.group != "action"]
    action = truth.index("Action")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")
    with conn:
        for start in range(0, n_cases, WRITE_CHUNK):
            n = min(WRITE_CHUNK, n_cases - start)
            codes = sample_values(truth, n, rng)
            ids = np.arange(start + 1, start + n + 1)
            labels = np.array(truth["Action"].values, dtype=object)[codes[:, action]]
            conn.executemany("INSERT INTO cases (id, trial_id, stamp, action_variable, action, received) "
                             "VALUES (?, ?, ?, 'Action', ?, ?)",
                             ((int(k), f"t{k:07d}", float(k), a, float(k)) for k, a in zip(ids, labels)))
            for i, name, source in sensors:
                v = truth.variables[i]
                x = v.sensor.means[codes[:, i]] + v.sensor.stddevs[codes[:, i]] * rng.standard_normal(n)
                conn.executemany("INSERT INTO readings (case_id, source, sensor, value) VALUES (?, ?, ?, ?)",
                                 ((int(k), source, name, float(r)) for k, r in zip(ids, x)))
    conn.close()


def _peak_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def learn_once(n_cases: int, tmp: Path, env: dict, client: ServiceClient) -> dict:
    from affordance_ros.srv import Learn
    db = tmp / f"cases_{n_cases}.db"
    t0 = time.perf_counter()
    write_database(db, n_cases)
    write_seconds = time.perf_counter() - t0
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / f"model_{n_cases}.json",
                                      "status_period": 0.0}, tmp, env)
    try:
        learn = client.client(Learn, f"{LEARNER}/learn", timeout=120.0)
        t0 = time.perf_counter()
        answer = client.call(learn, Learn.Request(structure=""), timeout=900.0)
        round_trip = time.perf_counter() - t0
        if not answer.success:
            raise RuntimeError(f"learn failed: {answer.message}")
        node_kb = _peak_kb(learner.pid)
        worker_kb = max([_peak_kb(c) for c in _children(learner.pid)] or [0])
    finally:
        stop_process(learner)
        db.unlink(missing_ok=True)
    return {"cases": n_cases, "learned_cases": answer.num_cases, "round_trip": round_trip,
            "learn_duration": answer.duration, "iterations": answer.iterations, "arcs": len(answer.arcs),
            "node_peak_mb": node_kb / 1024, "worker_peak_mb": worker_kb / 1024, "write_seconds": write_seconds}


def run(args) -> int:
    try:
        from affordance_ros.nodes.learner.learner_node import LearnerNode  # noqa: F401  (rclpy and the generated interfaces)
    except ImportError as exc:
        print(f"affordance-ros-bench scale: error: the ROS 2 node cannot be imported here ({exc})")
        return 2
    out = output_dir(args.out)
    sizes = (args.cases,) if args.cases else (SIZES_QUICK if args.quick else SIZES_FULL)
    print(f"bench scale{' (quick)' if args.quick else ''}: ~/learn through the node on {', '.join(map(str, sizes))} "
          "stored cases")
    print(f"machine: {machine_line()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="affordance-bench-scale-") as tmpdir:
        env = bench_env(Path(tmpdir))
        os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
        client = ServiceClient()
        try:
            for n in sizes:
                row = learn_once(n, Path(tmpdir), env, client)
                rows.append(row)
                print(f"  {n} cases: learn {fmt_seconds(row['round_trip'])} round trip "
                      f"({fmt_seconds(row['learn_duration'])} in the worker, {row['iterations']} EM iterations); "
                      f"peak RSS node {row['node_peak_mb']:.0f} MB, worker {row['worker_peak_mb']:.0f} MB")
        finally:
            client.close()
    table = markdown_table(
        ["stored cases", "~/learn round trip", "in the worker", "EM iterations", "peak RSS: node", "learning worker",
         "µs per case"],
        [[f"{r['cases']:,}", fmt_seconds(r["round_trip"]), fmt_seconds(r["learn_duration"]), r["iterations"],
          f"{r['node_peak_mb']:.0f} MB", f"{r['worker_peak_mb']:.0f} MB", f"{1e6 * r['round_trip'] / r['cases']:.1f}"]
         for r in rows])
    write_results(out, "scale", table, args.quick, {"results": rows})
    return 0
