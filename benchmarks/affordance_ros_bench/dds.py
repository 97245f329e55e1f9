"""The node over DDS: cases stored per second from the simulated robot at full speed, the
learn service, and the predict service's round-trip latency.

The learner node and the simulated robot run as separate processes (the installed launchers
that `ros2 run affordance_ros ...` starts); this process is the service client. Discovery
stays on this host, in a domain of its own.

1. the robot publishes N trials as fast as it can (rate 10000 Hz asked); the throughput is
   the number of cases the learner committed to its database per second, between the first
   and the last; none may be lost (all N stored);
2. ~/learn on those cases (K2 structure, EM);
3. ~/predict called 1000 times one after the other (Action given two object labels and the
   four effect readings); median and 99th percentile of the round trip;
4. the same 1000 calls while a second client calls ~/learn back to back (the learns run in
   the node's worker process): median, 99th percentile and maximum.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .environment import close_ros, ros_context, ros_node_importable
from .report import fmt_seconds, machine_line, markdown_table, output_dir, write_results

ROBOT_RATE = 10000.0   # the simulated robot's largest allowed rate: "full speed"
LEARNER = "/affordance_learner"
CLIENT_NUMBERS = itertools.count()
LOG_TAIL = 40  # lines of each node's log printed when a run fails


def bench_env(tmp: Path) -> dict:
    """The environment of the nodes a benchmark starts: ROS_HOME in ``tmp``, discovery on this host, a domain
    of its own (unless set)."""
    env = dict(os.environ, ROS_HOME=str(tmp / "ros_home"), PYTHONUNBUFFERED="1")
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 101 + 1))
    return env


def _launcher(name: str) -> Path:
    from affordance_ros.share import share_directory
    return share_directory().parents[1] / "lib" / "affordance_ros" / name


def launch(name: str, params: dict, tmp: Path, env: dict) -> subprocess.Popen:
    """Start the installed launcher ``name`` with ``params`` (-p name:=value), its output in ``tmp/<name>.log``."""
    args = [str(_launcher(name)), "--ros-args"]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    log = open(tmp / f"{name}.log", "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)


@contextlib.contextmanager
def run_folder(bench: str, out: Path):
    """The temporary folder of a run of ``bench`` (the nodes' logs ``launch`` writes, ROS_HOME, databases),
    removed at the end. A run that fails (a node that does not end in time, ...) first leaves its logs and ROS
    logs in ``out``/failed_run, and the end of each node's log on stderr (all a CI machine that is gone keeps)."""
    with tempfile.TemporaryDirectory(prefix=f"affordance-bench-{bench}-") as tmpdir:
        try:
            yield tmpdir
        except BaseException:
            kept = out / "failed_run"
            shutil.copytree(tmpdir, kept, ignore=shutil.ignore_patterns("*.db", "*.db-*", "*.lock"),
                            dirs_exist_ok=True)
            for log in sorted(kept.glob("*/*.log")):
                tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
                print(f"--- the end of {log.relative_to(kept)}:", *tail, sep="\n", file=sys.stderr)
            print(f"bench {bench}: a run failed; the logs of its nodes are kept in {kept}", file=sys.stderr,
                  flush=True)
            raise


def stop_process(process: subprocess.Popen, timeout: float = 15.0) -> int:
    """Stop ``process`` as Ctrl-C does (SIGINT; SIGKILL after ``timeout`` seconds); its exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def store_throughput(db: Path, n_trials: int, tmp: Path, env: dict, timeout: float, settle: float = 3.0) -> dict:
    """Start the robot at full speed; watch the learner's database until all trials are stored,
    or until the robot has exited and nothing more arrived for ``settle`` seconds."""
    from affordance_ros.data.storage import CaseStore
    # (design truth: the trials whose learn docs/bench/dds_results.json records; the robot's default is balanced)
    robot = launch("simulated_robot", {"count": n_trials, "rate": ROBOT_RATE, "seed": 1, "sigma": 1.0,
                                       "design": "truth"}, tmp, env)
    first = None            # (time, count) when the first cases were seen
    changed = None          # (time, count) of the latest change
    stored = 0
    deadline = time.monotonic() + timeout
    try:
        with CaseStore(db, read_only=True) as store:
            while time.monotonic() < deadline and stored < n_trials:
                count, now = store.count(), time.monotonic()
                if count != stored:
                    stored, changed = count, (now, count)
                    first = first or changed
                if robot.poll() is not None and now - (changed or (now, 0))[0] > settle:
                    break
                time.sleep(0.002)
        robot_status = robot.wait(30)
    finally:
        stop_process(robot)
    seconds = changed[0] - first[0] if first else float("nan")
    return {"trials_published": n_trials, "cases_stored": stored, "lost": n_trials - stored,
            "seconds_first_to_last": seconds,
            "cases_per_second": (changed[1] - first[1]) / seconds if first and seconds > 0 else float("nan"),
            "robot_exit": robot_status}


class ServiceClient:
    """A service client node in this process, spinning only while it waits for an answer."""

    def __init__(self):
        import rclpy
        self.context = ros_context()
        # a name of its own: two clients of one process under one name make rcl warn of a publisher registered twice
        self.node = rclpy.create_node(f"affordance_bench_client_{next(CLIENT_NUMBERS)}", context=self.context)
        from rclpy.executors import SingleThreadedExecutor
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def client(self, srv_type, name: str, timeout: float = 30.0, qos=None):
        """A client of ``name`` (QoS ``qos``, else ``reply_qos()``: a planner's), once its server is there."""
        from affordance_ros.nodes.qos import reply_qos
        client = self.node.create_client(srv_type, name, qos_profile=qos or reply_qos())
        if not client.wait_for_service(timeout_sec=timeout):
            raise RuntimeError(f"service {name} did not appear within {timeout} s")
        return client

    def call(self, client, request, timeout: float = 120.0):
        future = client.call_async(request)
        self.executor.spin_until_future_complete(future, timeout_sec=timeout)
        if not future.done():
            raise RuntimeError("no answer from the service")
        return future.result()

    def close(self):
        close_ros(self.context, [self.node], self.executor)


# The timed ~/predict request: the Action given two object labels and the four effect readings.
PREDICT_QUERY = ["action"]
PREDICT_SENSORS = {"obj_vel": 5.3, "obj_hand_vel": 4.1, "hand_vel": 0.4, "contact": 6.2}
PREDICT_VALUES = {"Shape": "box", "Size": "small"}


def predict_request(Predict):
    return Predict.Request(query=PREDICT_QUERY, sensor_names=list(PREDICT_SENSORS),
                           sensor_values=list(PREDICT_SENSORS.values()), variable_names=list(PREDICT_VALUES),
                           variable_values=list(PREDICT_VALUES.values()))


def _predict_times(client: ServiceClient, predict, request, calls: int) -> np.ndarray:
    times = np.empty(calls)
    for k in range(calls):
        t0 = time.perf_counter()
        answer = client.call(predict, request)
        times[k] = time.perf_counter() - t0
        if not answer.success:
            raise RuntimeError(f"predict failed: {answer.message}")
    return times


def predict_while_learning(client: ServiceClient, calls: int) -> dict:
    """~/predict round trips while a second client (its own context, in a thread) calls ~/learn back to back."""
    import threading

    from affordance_ros.srv import Learn, Predict
    learner_client = ServiceClient()
    stop, learns, durations = threading.Event(), [], []
    learn = learner_client.client(Learn, f"{LEARNER}/learn")

    spans = []

    def learn_loop():
        while not stop.is_set():
            start = time.perf_counter()
            answer = learner_client.call(learn, Learn.Request(structure=""))
            spans.append((start, time.perf_counter()))
            learns.append(answer.success)
            durations.append(answer.duration)

    thread = threading.Thread(target=learn_loop, name="bench_learns", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not learns and time.monotonic() < deadline:   # the first learn also starts the worker process
            time.sleep(0.05)
        predict = client.client(Predict, f"{LEARNER}/predict")
        window = (time.perf_counter(), None)
        times = _predict_times(client, predict, predict_request(Predict), calls)
        window = (window[0], time.perf_counter())
    finally:
        stop.set()
        thread.join(120)
        learner_client.close()
    # the learns that ran (at least partly) while the predicts were timed; a learn in flight at the end is one
    during = sum(1 for a, b in spans if a < window[1] and b > window[0])
    return {"busy_predict_calls": calls, "busy_predict_median": float(np.median(times)),
            "busy_predict_p99": float(np.percentile(times, 99)), "busy_predict_max": float(times.max()),
            "busy_learns": during, "busy_learns_ok": all(learns), "busy_learn_median_duration":
            float(np.median(durations)) if durations else float("nan")}


def service_figures(client: ServiceClient, calls: int) -> dict:
    """~/learn once, then ``calls`` ~/predict round trips one after the other."""
    from affordance_ros.srv import Learn, Predict
    learn = client.client(Learn, f"{LEARNER}/learn")
    t0 = time.perf_counter()
    learned = client.call(learn, Learn.Request(structure=""))
    learn_round_trip = time.perf_counter() - t0
    if not learned.success:
        raise RuntimeError(f"learn failed: {learned.message}")
    predict = client.client(Predict, f"{LEARNER}/predict")
    request = predict_request(Predict)
    for _ in range(20):                      # warm-up: discovery, first compilation
        client.call(predict, request)
    times = _predict_times(client, predict, request, calls)
    return {"learn_round_trip": learn_round_trip, "learn_duration": learned.duration,
            "learn_cases": learned.num_cases, "learn_arcs": list(learned.arcs),
            "predict_calls": calls, "predict_median": float(np.median(times)),
            "predict_p99": float(np.percentile(times, 99)), "predict_max": float(times.max())}


# The learner's subscription history: its default (keep all), and a bounded one (keep last 100,
# the default before the move to keep all). The robot keeps its default (keep all) in both.
LEARNER_SETTINGS = (("learner defaults (keep all)", {}), ("learner qos_depth 100 (keep last 100)", {"qos_depth": 100}))


def run_learner(tmp: Path, env: dict, client: ServiceClient, extra: dict, n_trials: int, calls: int) -> tuple:
    """One learner process (a fresh database): the robot's burst, then, if ``calls``, the services."""
    from affordance_ros.srv import Learn
    tmp.mkdir()
    db = tmp / "cases.db"
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json",
                                      "status_period": 0.0, **extra}, tmp, env)
    try:
        # The learner's services appear once its database is open: then start the robot.
        client.client(Learn, f"{LEARNER}/learn", timeout=60.0)
        throughput = store_throughput(db, n_trials, tmp, env, timeout=60 + n_trials / 50)
        services = {**service_figures(client, calls), **predict_while_learning(client, calls)} if calls else {}
    finally:
        status = stop_process(learner)
    log = (tmp / "learner_node.log").read_text().splitlines()
    stopping = next((line for line in reversed(log) if "stopping;" in line), "")
    if status != 0:
        print(f"  note: the learner exited with status {status} on SIGINT; the end of its log:")
        print("\n".join(f"    {line}" for line in log[-12:]))
    return {**throughput, "learner_exit": status, "learner_summary": stopping}, services


def predict_latencies(tmp: Path, n_trials: int, calls: int) -> dict:
    """A learner that stored ``n_trials`` trials from the robot (model file ``tmp/run/model.json``):
    ``service_figures`` and ``predict_while_learning`` (the ~/predict round trips idle and while learning)."""
    env = bench_env(tmp)
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
    client = ServiceClient()
    try:
        return run_learner(tmp / "run", env, client, {}, n_trials, calls)[1]
    finally:
        client.close()


def run(args) -> int:
    if not ros_node_importable("dds"):
        return 2
    out = output_dir(args.out)
    n_trials = args.cases or (200 if args.quick else 5000)
    calls = 100 if args.quick else 1000
    print(f"bench dds{' (quick)' if args.quick else ''}: robot -> learner ({n_trials} trials at full speed), "
          f"learn, {calls} predict calls")
    print(f"machine: {machine_line()}")
    bursts, services = [], {}
    with run_folder("dds", out) as tmpdir:
        env = bench_env(Path(tmpdir))
        os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
        client = ServiceClient()
        try:
            for k, (label, extra) in enumerate(LEARNER_SETTINGS):
                burst, found = run_learner(Path(tmpdir) / f"run{k}", env, client, extra, n_trials,
                                           calls if k == 0 else 0)  # the services with the defaults
                bursts.append({"setting": label, **burst})
                services.update(found)
                print(f"  {label}: {burst['cases_stored']} of {n_trials} stored "
                      f"({burst['cases_per_second']:.0f} cases/s); {burst['learner_summary'].split('stopping; ')[-1]}")
        finally:
            client.close()
    rows = []
    for burst in bursts:
        rows.append([f"cases stored per second, robot at full speed, {burst['setting']}",
                     f"{burst['cases_per_second']:.0f} ({burst['lost']} of {n_trials} lost)"])
    rows += [[f"~/learn on {services['learn_cases']} cases (K2 + EM): in the node / round trip",
              f"{fmt_seconds(services['learn_duration'])} / {fmt_seconds(services['learn_round_trip'])}"],
             [f"~/predict round trip, median of {calls}", fmt_seconds(services["predict_median"])],
             ["~/predict round trip, 99th percentile", fmt_seconds(services["predict_p99"])],
             [f"~/predict round trip while learns run back to back ({services['busy_learns']} learns overlapping, "
              "in a worker process): median", fmt_seconds(services["busy_predict_median"])],
             ["~/predict round trip while learning: 99th percentile / max",
              f"{fmt_seconds(services['busy_predict_p99'])} / {fmt_seconds(services['busy_predict_max'])}"]]
    table = markdown_table(["what", "figure"], rows)
    write_results(out, "dds", table, args.quick, {"trials": n_trials, "bursts": bursts, **services})
    return 0
