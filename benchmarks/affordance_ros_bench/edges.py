"""Faults at the edges, for ``bench faults``: each run injects one fault for real into a learner node
running as a process of its own (the installed launcher) and returns what it cost.

1. the database file removed while a robot streams with confirmations (then its folder, then the folder
   back): confirmed trials missing at the next start, confirmations while nothing could be written back;
2. lifecycle transitions while a learn runs (deactivate during the service and the action), then random
   transitions while trials stream and learns run: calls answered, the node's exit;
3. SIGKILL of the node during a long learn: processes of the node alive after it, the model file written
   after it (also after a restarted node wrote a newer one);
4. ``use_sim_time`` set remotely and /clock at 1 s: the set refused?, good trials answered rejected/retry/stored;
5. floods of parts that never complete (fresh ids and one stamp; stamp = now; no ids, stamps 1 us apart):
   pending trials, memory, log lines, and how long a good trial then waits for its answer;
6. another program holding the database's lock: ~/predict round trips during it, /diagnostics, trials lost;
7. a confirmed stream at full speed, the learner on one core: trials confirmed per second, against the peer
   without confirmations in the same run;
8. ~/predict round trips, one client and four, idle and while learns on 20,000 cases run back to back;
9. a trial nobody answers: re-sends before the robot gives up; ids the middleware would mangle;
10. a second learner on one database, a configuration too large, 3 million sensor names in one predict, an
    online save over a model file another program replaced.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from affordance_ros.data.pairing import INTERFACE_MAX_LIST_LENGTH

from .dds import ServiceClient, predict_request, stop_process
from .environment import close_ros, ros_context

LEARNER = "/affordance_learner"


def launch(name: str, params: dict, tmp: Path, env: dict, cpus: str | None = None, log: str | None = None,
           args: tuple = ()) -> subprocess.Popen:
    """The installed launcher ``name`` with ``params`` (-p name:=value), pinned to ``cpus`` (taskset) if given,
    its output in ``tmp/<log or name>.log``."""
    from affordance_ros.share import share_directory
    command = [str(share_directory().parents[1] / "lib" / "affordance_ros" / name), *args, "--ros-args"]
    for key, value in params.items():
        command += ["-p", f"{key}:={value}"]
    if cpus is not None:
        command = ["taskset", "-c", cpus, *command]
    output = open(tmp / f"{log or name}.log", "a")
    return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return float("nan")


def wait(predicate, timeout: float, period: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period)
    return False


def seed(db: Path, n: int, prefix: str = "s") -> None:
    """A case database of ``n`` trials of the montesano ground truth."""
    from affordance_ros.data.storage import CaseStore
    with CaseStore(db) as store:
        store.insert_many([replace(r, stamp=1.0 + k, received=2.0 + k) for k, r in enumerate(records(n, prefix))])


def latencies(times: list, unanswered: int) -> dict:
    times = np.array(times) if times else np.array([float("nan")])
    return {"calls": len(times) + unanswered, "unanswered": unanswered, "p50": float(np.median(times)),
            "p99": float(np.percentile(times, 99)), "max": float(times.max())}


def predict_clients(clients: int, calls: int, env: dict, timeout: float = 10.0, server: int | None = None,
                    resend: float = 2.0, reply_depth: int | None = None, rounds: int = 1) -> dict:
    """``clients`` clients, each a process of its own (as planners are), calling ~/predict ``calls`` times each
    as a planner is told to (docs/interfaces.md): a request not answered within ``resend`` seconds is sent
    again; a call not answered within ``timeout`` seconds counts as unanswered. The clients keep the last
    ``reply_depth`` replies (None: ``reply_qos()``, as planners are told to). ``first_sends_missed`` are the
    requests whose first send got no answer within ``resend`` (warm-up calls included), each with what came of
    it (``late``: the first send's answer came after all, ``resent``: only the re-send's, ``none``), its
    index, its sequence number and the seconds since its client was created. With the ``server``'s pid, the
    CPU time it spent per call (milliseconds; clients' start-up and warm-up calls included)."""
    return summary(run_clients(clients, calls, env, timeout, server, resend, reply_depth), server is not None)


def run_clients(clients: int, calls: int, env: dict, timeout: float = 10.0, server: int | None = None,
                resend: float = 2.0, reply_depth: int | None = None) -> dict:
    """What ``predict_clients`` measures, unsummed: each client's ``call_predict`` and the server's CPU seconds."""
    server_cpu = cpu_seconds([server]) if server else 0.0
    code = ("import sys, json; from affordance_ros_bench.edges import call_predict; "
            f"print(json.dumps(call_predict({calls}, {timeout}, {resend}, {reply_depth})))")
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
            for _ in range(clients)]
    found = [json.loads(run.communicate(timeout=calls * timeout + 120)[0].strip().splitlines()[-1]) for run in runs]
    return {"clients": found, "server_cpu": cpu_seconds([server]) - server_cpu if server else 0.0}


def summary(runs: dict | list, with_server: bool = False) -> dict:
    """One summary of ``run_clients``'s result, or of a list of them (pooled)."""
    runs = runs if isinstance(runs, list) else [runs]
    found = [f for run in runs for f in run["clients"]]
    result = latencies([t for f in found for t in f["times"]], sum(f["unanswered"] for f in found))
    result["requests_sent"] = sum(f["sent"] for f in found)
    result["first_sends_missed"] = missed = [dict(m, client=c) for c, f in enumerate(found) for m in f["missed"]]
    result["first_sends_missed_by_outcome"] = {o: sum(m["outcome"] == o for m in missed)
                                               for o in ("late", "resent", "none")}
    if with_server:
        result["server_cpu_ms_per_call"] = (1000 * sum(run["server_cpu"] for run in runs)
                                            / sum(len(f["times"]) + f["unanswered"] + 20 for f in found))
    return result


def call_predict(calls: int, timeout: float, resend: float, reply_depth: int | None = None) -> dict:
    """One planner: ~/predict ``calls`` times, one after the other (after 20 to warm up), each sent again
    after ``resend`` seconds without an answer, its client keeping the last ``reply_depth`` replies (None:
    ``reply_qos()``); the round trips, the requests sent, and what became of each first send that was not
    answered in time."""
    from rclpy.qos import QoSProfile

    from affordance_ros.srv import Predict
    created = time.perf_counter()
    client = ServiceClient()
    predict = client.client(Predict, f"{LEARNER}/predict", timeout=60.0,
                            qos=QoSProfile(depth=reply_depth) if reply_depth else None)
    request = predict_request(Predict)
    times, unanswered, missed, sequence = [], 0, [], 0
    for k in range(calls + 20):
        t0 = time.perf_counter()
        first = predict.call_async(request)
        sequence += 1  # this request's: a client numbers its requests 1, 2, ... (the middleware's sequence)
        client.executor.spin_until_future_complete(first, timeout_sec=min(resend, timeout))
        answered = first
        if not first.done():
            again = predict.call_async(request)
            sequence += 1
            answered = first_of(first, again)
            client.executor.spin_until_future_complete(answered, timeout_sec=timeout - (time.perf_counter() - t0))
            missed.append({"index": k, "sequence": sequence, "seconds_since_client_created": t0 - created,
                           "wall_time": time.time() - (time.perf_counter() - t0),
                           "outcome": "late" if first.done() else "resent" if again.done() else "none"})
            for sent in (first, again):
                predict.remove_pending_request(sent)
        if k >= 20:
            if answered.done():
                times.append(time.perf_counter() - t0)
            else:
                unanswered += 1
    client.close()
    return {"times": times, "unanswered": unanswered, "missed": missed, "sent": calls + 20 + len(missed)}


def first_of(*futures):
    """A future done with the result of whichever of ``futures`` is done first."""
    from rclpy.task import Future
    either = Future()
    for future in futures:
        future.add_done_callback(lambda done: either.done() or either.set_result(done.result()))
    return either


RCLPY_REPLY_DEPTH = 10  # the replies a client keeps with rclpy's default QoS: the peer of ``reply_qos()``


def predict_latency(tmp: Path, env: dict, cases: int, calls: int, rounds: int = 1) -> dict:
    """~/predict round trips, one client and four, idle and while learns run back to back on ``cases`` cases;
    the clients made as planners are told to (``reply_qos()``, a request sent again after 2 s), and, while
    learning, four with rclpy's default QoS (``learning_4_rclpy_default``: the peer, in the same run), the two
    four-client runs taking turns ``rounds`` times. How many
    requests the clients sent, against how many the learner answered (its log's count): equal when every
    request lost was lost on its way back."""
    from affordance_ros.srv import Learn
    tmp.mkdir()
    db = tmp / "cases.db"
    seed(db, cases)
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0},
                     tmp, env, cpus="0")
    learns, stop = [], threading.Event()
    results = {}
    try:
        client = ServiceClient()
        learn = client.client(Learn, f"{LEARNER}/learn", timeout=60.0)
        first = client.call(learn, Learn.Request(structure="k2"), timeout=600.0)
        if not first.success:
            raise RuntimeError(f"learn failed: {first.message}")
        for clients in (1, 4):
            results[f"idle_{clients}"] = predict_clients(clients, calls, env, server=learner.pid)

        def learn_loop():
            while not stop.is_set():
                answer = client.call(learn, Learn.Request(structure="k2"), timeout=600.0)
                learns.append(answer.duration)
        learning = threading.Thread(target=learn_loop, daemon=True)
        learning.start()
        time.sleep(1.0)
        results["learning_1"] = predict_clients(1, calls, env, server=learner.pid)
        pooled = {"learning_4": [], "learning_4_rclpy_default": []}
        for _ in range(rounds):
            for name, depth in (("learning_4", None), ("learning_4_rclpy_default", RCLPY_REPLY_DEPTH)):
                pooled[name].append(run_clients(4, calls, env, server=learner.pid, reply_depth=depth))
        results.update({name: summary(runs, True) for name, runs in pooled.items()})
        stop.set()
        learning.join(600)
        client.close()
    finally:
        exit_status = stop_process(learner)
    answered = re.findall(r"predict ok/failed: (\d+)/(\d+)", (tmp / "learner_node.log").read_text())
    return {"cases": cases, "learns": len(learns), "learn_seconds": float(np.median(learns)) if learns else None,
            "learner_exit": exit_status, "requests_sent": sum(r["requests_sent"] for r in results.values()),
            "learner_answered": sum(map(int, answered[-1])) if answered else None, **results}


class Robot:
    """A robot in this process: a TrialPublisher on a node of its own context, spun in a thread, and every
    answer of the learner with the time it came."""

    def __init__(self, resend_timeout: float = 1.0, **kw):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from affordance_ros.msg import TrialStatus
        from affordance_ros.nodes.qos import trial_qos
        from affordance_ros.nodes.robot.trial_publisher import TrialPublisher
        self.context = ros_context()
        self.node = rclpy.create_node("affordance_bench_robot", context=self.context)
        self.trials = TrialPublisher(self.node, resend_timeout=resend_timeout, **kw)
        self.answers, self.lock = [], threading.Lock()
        self.node.create_subscription(TrialStatus, f"{LEARNER}/stored", self._answer, trial_qos())
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        wait(lambda: all(p.get_subscription_count() for p in self.trials.publishers.values()), 60)

    def _answer(self, msg) -> None:
        with self.lock:
            self.answers.append((time.monotonic(), msg.trial_id, msg.status))

    def send(self, records, pause: float = 0.0) -> None:
        for record in records:
            self.trials.publish(record.trial_id, record.action, record.object_features, record.effects,
                                stamp=self.node.get_clock().now())
            if pause:
                time.sleep(pause)

    def answered(self, status: str = "stored", since: float = 0.0) -> set:
        with self.lock:
            return {trial_id for t, trial_id, s in self.answers if s == status and t >= since}

    def close(self) -> None:
        close_ros(self.context, [self.node], self.executor, self.thread)


def records(n: int, prefix: str):
    from affordance_ros.core.ground_truth import benchmark_network, sample_values
    from affordance_ros.data.trial import Trial
    truth = benchmark_network("montesano", 1.0, 0)
    rng = np.random.default_rng(abs(hash(prefix)) % 2**32)
    codes = sample_values(truth, n, rng)
    made = []
    for k in range(n):
        parts = {"object": {}, "effect": {}}
        for i, v in enumerate(truth.variables):
            if v.group in parts:
                parts[v.group][v.sensor.name] = float(v.sensor.means[codes[k, i]] + rng.standard_normal())
        made.append(Trial(f"{prefix}{k:06d}", truth["Action"].values[codes[k, truth.index("Action")]],
                          parts["object"], parts["effect"]).to_record("Action"))
    return made


def stored_ids(db: Path) -> set:
    from affordance_ros.data.storage import CaseStore, CaseStoreError
    try:
        with CaseStore(db, read_only=True) as store:
            return {r.trial_id for r in store.records()}
    except CaseStoreError:
        return set()


def removed_database(tmp: Path, env: dict, n: int) -> dict:
    """1. ``rm cases.db`` while a robot streams n trials with confirmations; later its folder, then the folder
    back; the learner stopped and the database read as a restart reads it."""
    import shutil
    tmp.mkdir()
    db = tmp / "db" / "cases.db"
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0},
                     tmp, env)
    robot = Robot()
    sent = records(n, "rm")
    try:
        robot.send(sent[:n // 3], pause=0.001)
        wait(lambda: len(robot.answered()) >= n // 6, 60)
        db.unlink()
        robot.send(sent[n // 3:2 * n // 3], pause=0.001)
        wait(lambda: len(robot.answered()) >= 2 * n // 3, 60)
        shutil.rmtree(db.parent)
        gone = time.monotonic()
        robot.send(sent[2 * n // 3:], pause=0.001)
        time.sleep(3.0)
        confirmed_while_gone = len(robot.answered(since=gone + 0.5))
        db.parent.mkdir()
        back = time.monotonic()
        wait(lambda: robot.trials.pending == 0, 120)
        recovered = time.monotonic() - back
    finally:
        robot.close()
        exit_status = stop_process(learner)
    confirmed = robot.answered()
    return {"trials": n, "confirmed": len(confirmed), "lost": len(confirmed - stored_ids(db)),
            "confirmed_while_gone": confirmed_while_gone, "seconds_to_confirm_all_after": recovered,
            "learner_exit": exit_status}


def slow_config(path: Path, samples: int) -> Path:
    """The montesano configuration with an MCMC structure search of ``samples`` steps (a slow learn)."""
    import json as json_module

    from affordance_ros.share import default_config_path
    doc = json_module.loads(default_config_path().read_text())
    doc["learning"] = {"mcmc_samples": samples, "mcmc_burn_in": 1000}
    path.write_text(json_module.dumps(doc))
    return path


def lifecycle(tmp: Path, env: dict, seconds: float) -> dict:
    """2. deactivate while ~/learn (service, then action) runs; then ``seconds`` of random transitions while a
    robot streams and learns run: calls answered, the node alive, its exit status."""
    import random

    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from rclpy.action import ActionClient

    from affordance_ros.action import Learn as LearnAction
    from affordance_ros.srv import Learn
    tmp.mkdir()
    db = tmp / "cases.db"
    seed(db, 200)
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0,
                                      "config_path": slow_config(tmp / "slow.json", 300_000)}, tmp, env)
    robot = launch("simulated_robot", {"count": 0, "rate": 200.0, "trial_id_prefix": "lc", "resend_timeout": 0.5},
                   tmp, env)
    client = ServiceClient()
    change = client.client(ChangeState, f"{LEARNER}/change_state", timeout=60.0)
    get_state = client.client(GetState, f"{LEARNER}/get_state")
    learn = client.client(Learn, f"{LEARNER}/learn")
    actions = ActionClient(client.node, LearnAction, f"{LEARNER}/learn")
    futures = []

    def transition(t):
        return client.call(change, ChangeState.Request(transition=Transition(id=t)), timeout=60.0).success

    def state():
        return client.call(get_state, GetState.Request()).current_state.label

    def spin(seconds_: float):
        client.executor.spin_once(timeout_sec=0.0)
        deadline = time.monotonic() + seconds_
        while time.monotonic() < deadline:
            client.executor.spin_once(timeout_sec=0.01)
    try:
        first = learn.call_async(Learn.Request(structure="mcmc"))
        spin(0.1)
        learning(learner.pid)
        transition(Transition.TRANSITION_DEACTIVATE)
        client.executor.spin_until_future_complete(first, timeout_sec=30.0)
        service_answered = first.done() and "deactivated" in first.result().message
        transition(Transition.TRANSITION_ACTIVATE)
        actions.wait_for_server(timeout_sec=20.0)
        goal = actions.send_goal_async(LearnAction.Goal(structure="mcmc"))
        client.executor.spin_until_future_complete(goal, timeout_sec=20.0)
        result = goal.result().get_result_async()
        spin(0.1)
        learning(learner.pid)
        transition(Transition.TRANSITION_DEACTIVATE)
        client.executor.spin_until_future_complete(result, timeout_sec=30.0)
        action_result = result.done() and not result.result().result.success
        transition(Transition.TRANSITION_ACTIVATE)
        rng = random.Random(3)
        moves = {"unconfigured": [Transition.TRANSITION_CONFIGURE],
                 "inactive": [Transition.TRANSITION_ACTIVATE] * 2 + [Transition.TRANSITION_CLEANUP],
                 "active": [Transition.TRANSITION_DEACTIVATE]}
        transitions, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline and learner.poll() is None:
            label = state()
            if label == "active" and rng.random() < 0.5:
                futures.append(learn.call_async(Learn.Request(structure=rng.choice(["mcmc", "k2"]))))
                if actions.server_is_ready():
                    futures.append(actions.send_goal_async(LearnAction.Goal(structure="mcmc")))
            spin(rng.uniform(0.0, 1.0))
            transitions += transition(rng.choice(moves[label]))
        while learner.poll() is None and state() != "active":
            transition(moves[state()][0])
        for future in futures:
            client.executor.spin_until_future_complete(future, timeout_sec=30.0)
        alive = learner.poll() is None
    finally:
        client.close()
        stop_process(robot)
        exit_status = stop_process(learner)
    log = (tmp / "learner_node.log").read_text()
    return {"service_answered": service_answered, "action_result": action_result, "random_seconds": seconds,
            "transitions": transitions, "learn_calls": len(futures),
            "unanswered": sum(not f.done() for f in futures), "alive": alive, "learner_exit": exit_status,
            "tracebacks": log.count("Traceback")}


def descendants(pid: int) -> set:
    """The process ids of ``pid``'s children, their children, ..."""
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as children:
                    kids = {int(k) for k in children.read().split()}
            except FileNotFoundError:
                continue
            todo += kids - found
            found |= kids
    return found


def cpu_seconds(pids) -> float:
    """The CPU time (user and system) the processes ``pids`` have used so far."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def thread_cpu_seconds(pid: int) -> dict:
    """{thread id: (what it is, CPU seconds so far)} of the process ``pid``: its main thread is 'executor' (a
    node spins there), a thread with the process's own name another Python thread (the learner's case writer),
    the others by the name their library gave them (Fast DDS's: 'dds.shm.<port>' receives, 'dds.ev.*' its
    timed events, ...)."""
    threads, tick = {}, os.sysconf("SC_CLK_TCK")
    try:
        process_name = Path(f"/proc/{pid}/comm").read_text().strip()
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return threads
    for task in tasks:
        try:
            name = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        what = ("executor" if int(task) == pid else "python threads" if name == process_name
                else name.rsplit(".", 1)[0] if name.startswith("dds.") else name)
        threads[int(task)] = (what, (int(fields[11]) + int(fields[12])) / tick)
    return threads


def thread_cpu_since(before: dict, after: dict) -> dict:
    """{what: CPU seconds} the threads of ``after`` used since ``before`` (``thread_cpu_seconds`` of one process)."""
    spent = {}
    for task, (what, seconds) in after.items():
        spent[what] = spent.get(what, 0.0) + seconds - before.get(task, (what, 0.0))[1]
    return spent


def learning(pid: int, timeout: float = 60.0, work: float = 0.3) -> bool:
    """Wait until the learning process of the node ``pid`` has worked ``work`` CPU seconds more than when this
    was called (a learn it was asked for runs: on a loaded machine a request may take seconds to get there)."""
    before = cpu_seconds(descendants(pid))
    return wait(lambda: cpu_seconds(descendants(pid)) - before >= work, timeout, period=0.05)


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def orphaned_worker(tmp: Path, env: dict) -> dict:
    """3. SIGKILL of the node during a ~20 s learn; a restarted node learns; is anything of the old node left,
    and does anything write over the newer model?"""
    from affordance_ros.srv import Learn
    tmp.mkdir()
    db, model = tmp / "cases.db", tmp / "model.json"
    seed(db, 300)
    learner = launch("learner_node", {"database_path": db, "model_path": model, "status_period": 0.0,
                                      "config_path": slow_config(tmp / "slow.json", 3_000_000)}, tmp, env)
    client = ServiceClient()
    learn = client.client(Learn, f"{LEARNER}/learn", timeout=60.0)
    learn.call_async(Learn.Request(structure="mcmc"))
    client.executor.spin_once(timeout_sec=1.0)
    learning(learner.pid)
    children = descendants(learner.pid)
    learner.kill()
    learner.wait()
    time.sleep(5.0)
    alive = [pid for pid in children if running(pid)]
    restarted = launch("learner_node", {"database_path": db, "model_path": model, "status_period": 0.0}, tmp, env,
                       log="learner_node.2")
    client.close()
    wait(lambda: "active: taking trials" in (tmp / "learner_node.2.log").read_text(), 60)
    newer = call_restarted(Learn, f"{LEARNER}/learn", Learn.Request(structure="k2"))
    written = model.read_bytes() if model.exists() else b""
    time.sleep(20.0)  # the killed node's learn would have finished by now
    overwritten = model.read_bytes() != written
    for pid in alive:  # (they would outlive the benchmark)
        os.kill(pid, 9)
    stop_process(restarted)
    return {"processes_of_the_node": len(children), "alive_5_s_after_the_kill": len(alive),
            "newer_model_learned": newer.success, "newer_model_overwritten": overwritten}


def call_restarted(srv_type, name: str, request, tries: int = 3, timeout: float = 30.0):
    """A call to a node that has just been restarted under the name of one killed before: a request sent
    before the new server matched the client is lost (wait_for_service may see the killed node's server,
    still in the graph), so ask again, from a new client each time."""
    for attempt in range(1, tries + 1):
        client = ServiceClient()
        try:
            return client.call(client.client(srv_type, name, timeout=60.0), request, timeout=timeout * attempt)
        except RuntimeError:
            if attempt == tries:
                raise
        finally:
            client.close()


def clock(tmp: Path, env: dict, n: int) -> dict:
    """4. SetParameters use_sim_time:=true on an active learner, refused?; then a learner started with sim time
    and /clock at 1 s: what n good trials (stamped now) are answered, and stored once /clock is right."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rosgraph_msgs.msg import Clock
    tmp.mkdir()
    params = {"database_path": tmp / "cases.db", "model_path": tmp / "model.json", "status_period": 0.0}
    learner = launch("learner_node", params, tmp, env)
    client = ServiceClient()
    try:
        set_parameters = client.client(SetParameters, f"{LEARNER}/set_parameters", timeout=60.0)
        answer = client.call(set_parameters, SetParameters.Request(parameters=[Parameter(
            name="use_sim_time", value=ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=True))]))
        refused = not answer.results[0].successful
    finally:
        client.close()
        stop_process(learner)
    learner = launch("learner_node", {**params, "use_sim_time": "true"}, tmp, env, log="learner_node.sim")
    robot = Robot(resend_timeout=1.0)
    publisher = robot.node.create_publisher(Clock, "/clock", 10)
    sim = {"seconds": 1}
    ticking = threading.Event()

    def tick():
        while not ticking.is_set():
            msg = Clock()
            msg.clock.sec = sim["seconds"] or int(time.time())
            publisher.publish(msg)
            time.sleep(0.05)
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        wait(lambda: publisher.get_subscription_count() > 0, 60)  # the learner hears /clock ...
        time.sleep(1.0)  # ... and has heard it
        sent = records(n, "clk")
        robot.send(sent, pause=0.01)
        wait(lambda: len(robot.answered("retry") | robot.answered("rejected")) >= n, 30)
        answered = {status: len(robot.answered(status)) for status in ("rejected", "retry", "stored")}
        sim["seconds"] = 0
        wait(lambda: robot.trials.pending == 0, 60)
    finally:
        ticking.set()
        ticker.join()
        robot.close()
        stop_process(learner)
    return {"set_use_sim_time_refused": refused, "trials": n, "answered": answered,
            "stored_once_the_clock_is_right": len(stored_ids(tmp / "cases.db") & {r.trial_id for r in sent})}


def flood(tmp: Path, env: dict, kind: str, seconds: float, rate: float, overloaded: bool = False,
          keep_all: bool = False, own_topics: bool = False) -> dict:
    """5. ``rate`` action parts a second for ``seconds`` of trials that never complete (``kind``: 'fresh' ids and
    one stamp, 'now' fresh ids stamped now, 'stampless' no id and stamps 1 us apart), then one good trial from
    a robot of its own process (as a robot is: ``good_trial_robot``) that was started before the flood.
    ``overloaded``: the learner shares core 0 with a busy loop, so that it takes parts slower than the flood
    comes, and the good trial is sent half-way through the flood instead of after it. ``keep_all``: the flood's
    writer keeps all it was refused (reliable KEEP_ALL, as ``TrialPublisher``'s), else the last 1000.
    ``own_topics``: the good robot publishes on topics of its own (``robot_name`` 'good', the learner's
    ``robots``), else on the shared ones the flood is on."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from affordance_ros.msg import Action
    from affordance_ros.nodes.qos import trial_qos
    tmp.mkdir()
    learner = launch("learner_node", {"database_path": tmp / "cases.db", "model_path": tmp / "model.json",
                                      "status_period": 0.0, "diagnostics_period": 0.5,
                                      **({"robots": "good"} if own_topics else {})}, tmp, env,
                     cpus="0" if overloaded else None)
    code = ("from affordance_ros_bench.edges import good_trial_robot; "
            f"good_trial_robot('good-{kind}-', robot_name={'good' if own_topics else ''!r})")
    robot = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    context = ros_context()
    pending, flooder, hog, spinning = [], None, None, None
    executor = SingleThreadedExecutor(context=context)
    try:
        flooder = rclpy.create_node("affordance_bench_flood", context=context)
        flooder.create_subscription(DiagnosticArray, "/diagnostics", lambda msg: pending.extend(
            int(kv.value) for s in msg.status for kv in s.values if kv.key == "trials pending"), 10)
        publisher = flooder.create_publisher(Action, "action", trial_qos() if keep_all else
                                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        executor.add_node(flooder)
        spinning = threading.Thread(target=executor.spin, daemon=True)
        spinning.start()
        if overloaded:
            hog = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
        if robot.stdout.readline().strip() != "ready":
            raise RuntimeError("the good trial's robot did not start")
        if not wait(lambda: publisher.get_subscription_count() > 0, 60):
            raise RuntimeError(f"the learner did not subscribe: see {tmp / 'learner_node.log'}")
        rss, learner_cpu = [rss_mb(learner.pid)], cpu_seconds([learner.pid])
        load = float(open("/proc/loadavg").read().split()[0])
        stamp, started, k, refused = time.time(), time.monotonic(), 0, 0
        go_at = seconds / 2 if overloaded else None  # when the good trial is sent during the flood
        while time.monotonic() - started < seconds:
            if go_at is not None and time.monotonic() - started >= go_at:
                robot.stdin.write("go\n")
                robot.stdin.flush()
                go_at = None
            msg = Action(trial_id="" if kind == "stampless" else f"{kind}{k}", action="tap")
            part = {"fresh": stamp, "now": time.time(), "stampless": stamp + k * 1e-6}[kind]
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(part), int(part % 1 * 1e9)
            try:
                publisher.publish(msg)
            except _rclpy.RCLError:  # the writer's history is full of parts the learner refused: held back
                refused += 1
            k += 1
            time.sleep(max(0.0, started + k / rate - time.monotonic()))
        rss.append(rss_mb(learner.pid))
        learner_cpu = cpu_seconds([learner.pid]) - learner_cpu
        said = robot.communicate(None if overloaded else "go\n", timeout=180)[0]
        waited = json.loads(said.strip().splitlines()[-1])["seconds"]
    finally:
        if robot.poll() is None:
            robot.kill()
        if hog is not None:
            hog.kill()
            hog.wait()
        close_ros(context, [flooder], executor, spinning)
        exit_status = stop_process(learner)
    log = (tmp / "learner_node.log").read_text()
    return {"kind": kind, "overloaded": overloaded, "keep_all": keep_all, "own_topics": own_topics,
            "parts": k - refused, "held_back": refused, "seconds": seconds, "load": load,
            "max_pending": max(pending, default=-1),
            "rss_mb": rss, "log_lines": log.count("\n"), "log_bytes": len(log),
            "good_trial_seconds": waited if waited is not None else float("nan"),
            "learner_cpu_ms_per_part": 1000 * learner_cpu / max(k - refused, 1), "learner_exit": exit_status}


def good_trial_robot(prefix: str, timeout: float = 120.0, robot_name: str = "") -> None:
    """A robot process with this package's DDS profiles (``qos.dds_profiles``, as the simulated robot has):
    says 'ready' once its writers matched the learner, sends one good trial (on the topics of ``robot_name``,
    '': the shared ones) when 'go' comes on stdin, and prints {"seconds": from sending to its confirmation}
    (null: none within ``timeout``)."""
    from affordance_ros.nodes.qos import TRIAL_HEARTBEAT_PERIOD, dds_profiles
    with dds_profiles(heartbeat_period=TRIAL_HEARTBEAT_PERIOD):
        robot = Robot(resend_timeout=1.0, robot_name=robot_name)
    try:
        print("ready", flush=True)
        sys.stdin.readline()
        good = records(1, prefix)
        sent = time.monotonic()
        robot.send(good)
        confirmed = wait(lambda: good[0].trial_id in robot.answered(), timeout)
        with robot.lock:
            first = min((t for t, trial_id, s in robot.answers if trial_id == good[0].trial_id), default=None)
        print(json.dumps({"seconds": first - sent if confirmed else None}), flush=True)
    finally:
        robot.close()


def keep_all_flooder(seconds: float, topic: str = "action") -> None:
    """A robot process whose reliable KEEP_ALL writer (``TrialPublisher``'s QoS) sends action parts of trials that
    never complete (fresh ids, stamped now) on ``topic`` as fast as it can for ``seconds``, once a reader
    matched; prints 'held back' the first time its history is full (the learner's reader is full, and the writer
    holds what it refused), then {"parts": sent, "held_back": publishes that found its history full}."""
    import rclpy
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    from affordance_ros.msg import Action
    from affordance_ros.nodes.qos import TRIAL_HEARTBEAT_PERIOD, dds_profiles, trial_qos
    # (Fast DDS's default message size: a robot of another program, whose large datagrams fill the learner's reader
    # in bursts; capped at 1400 bytes, as this package's, the learner kept up with it here)
    with dds_profiles(heartbeat_period=TRIAL_HEARTBEAT_PERIOD, max_message_size=None):
        context = ros_context()
        node = rclpy.create_node("affordance_keep_all_flood", context=context)
        publisher = node.create_publisher(Action, topic, trial_qos())
    try:
        wait(lambda: publisher.get_subscription_count() > 0, 60)
        started, sent, held_back = time.monotonic(), 0, 0
        while time.monotonic() - started < seconds:
            msg = Action(trial_id=f"flood{sent}", action="tap")
            now = time.time()
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(now), int(now % 1 * 1e9)
            try:
                publisher.publish(msg)
                sent += 1
            except _rclpy.RCLError:
                held_back += 1
                if held_back == 1:
                    print("held back", flush=True)
        print(json.dumps({"parts": sent, "held_back": held_back}), flush=True)
    finally:
        close_ros(context, [node])


def held_lock(tmp: Path, env: dict, hold: float, n: int) -> dict:
    """6. another program holds the database's lock for ``hold`` seconds while a robot sends n trials and a
    planner calls ~/predict every 50 ms: the slowest answer, those not answered within 15 s, /diagnostics."""
    import sqlite3

    from diagnostic_msgs.msg import DiagnosticArray

    from affordance_ros.srv import Learn, Predict
    tmp.mkdir()
    db = tmp / "cases.db"
    seed(db, 200)
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0},
                     tmp, env)
    client = ServiceClient()
    messages = []
    client.node.create_subscription(DiagnosticArray, "/diagnostics", lambda msg: messages.extend(
        s.message for s in msg.status), 10)
    robot = None
    try:
        client.call(client.client(Learn, f"{LEARNER}/learn", timeout=60.0), Learn.Request(structure="k2"))
        predict, request = client.client(Predict, f"{LEARNER}/predict"), predict_request(Predict)
        robot = Robot()
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        started, times, unanswered = time.monotonic(), [], 0
        sent = records(n, "lock")
        threading.Thread(target=robot.send, args=(sent, hold / (2 * n)), daemon=True).start()
        while time.monotonic() - started < hold:
            t0 = time.perf_counter()
            future = predict.call_async(request)
            client.executor.spin_until_future_complete(future, timeout_sec=15.0)
            if future.done():
                times.append(time.perf_counter() - t0)
            else:
                unanswered += 1
            time.sleep(0.05)
        confirmed_during = len(robot.answered())
        other.execute("COMMIT")
        other.close()
        wait(lambda: robot.trials.pending == 0, 120)
        told = any("locked by another program" in m for m in messages)
    finally:
        if robot is not None:
            robot.close()
        client.close()
        exit_status = stop_process(learner)
    return {"hold_seconds": hold, "predicts": latencies(times, unanswered), "told_on_diagnostics": told,
            "confirmed_during_the_lock": confirmed_during, "trials": n,
            "lost": len({r.trial_id for r in sent} - stored_ids(db)), "learner_exit": exit_status}


def confirmed_rate(tmp: Path, env: dict, n: int, confirm: bool) -> dict:
    """7. the simulated robot at full speed (on the second core) into a learner on the first core: trials per
    second from the first one stored to the last one stored and, with confirmations, confirmed (the robot done);
    and the CPU time each side spent per trial (milliseconds: the figure a loaded machine changes least), the
    learner's also by thread (``thread_cpu_seconds``)."""
    from affordance_ros.data.storage import CaseStore
    tmp.mkdir()
    db = tmp / "cases.db"
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0},
                     tmp, env, cpus="0")
    try:
        wait(lambda: "active: taking trials" in (tmp / "learner_node.log").read_text(), 60)
        learner_cpu, learner_threads = cpu_seconds([learner.pid]), thread_cpu_seconds(learner.pid)
        robot = launch("simulated_robot", {"count": n, "rate": 10000.0, "seed": 1, "trial_id_prefix": "r",
                                           "confirm": str(confirm).lower()}, tmp, env, cpus="1")
        with CaseStore(db, read_only=True) as store:
            wait(lambda: store.count() > 0, 120, period=0.001)
            started = time.monotonic()
            wait(lambda: store.count() >= n, 600, period=0.005)
            # the robot is done once it exits (with confirmations: once every trial is confirmed)
            _, status, robot_usage = os.wait4(robot.pid, 0)
        seconds = time.monotonic() - started
        learner_cpu = cpu_seconds([learner.pid]) - learner_cpu
        learner_threads = thread_cpu_since(learner_threads, thread_cpu_seconds(learner.pid))
        robot.returncode = robot_exit = os.waitstatus_to_exitcode(status)
    finally:
        exit_status = stop_process(learner)
    stored = len(stored_ids(db))
    return {"confirm": confirm, "trials": n, "stored": stored, "seconds": seconds, "per_second": stored / seconds,
            "learner_cpu_ms_per_trial": 1000 * learner_cpu / max(stored, 1),
            "learner_threads_cpu_ms_per_trial": {what: round(1000 * spent / max(stored, 1), 3)
                                                 for what, spent in learner_threads.items() if spent > 0},
            "robot_cpu_ms_per_trial": 1000 * (robot_usage.ru_utime + robot_usage.ru_stime) / max(stored, 1),
            "robot_exit": robot_exit, "learner_exit": exit_status}


def resends() -> dict:
    """9. a trial no learner ever answers (resend_timeout 1 s): re-sends in its first 8 s and in 1000 s of timer ticks,
    the longest wait between two, and whether it was given up (never while the learner is silent); and
    whether ids the middleware would mangle are refused before sending."""
    import rclpy

    from affordance_ros.nodes.robot.trial_publisher import TrialPublisher
    context = ros_context()
    node = rclpy.create_node("affordance_bench_resends", context=context)
    trials = TrialPublisher(node, resend_timeout=1.0)
    trials.publish("never-answered", "tap", {"color": 1.0}, {"obj_vel": 1.0})
    now, sent, gave_up = time.monotonic(), [], None
    for tick in range(4000):  # the timer's ticks (every resend_timeout / 4), without waiting for them
        sent.append(trials.resend_due(now + 0.25 * tick))
        if trials.given_up and gave_up is None:
            gave_up = 0.25 * tick
    refused = []
    for trial_id in ("nul\x00A", "\udcff", "x" * 300):
        try:
            trials.publish(trial_id, "tap", {"color": 1.0}, {"obj_vel": 1.0})
        except ValueError:
            refused.append(trial_id)
    close_ros(context, [node])
    ticks = [0.25 * tick for tick, n in enumerate(sent) if n]
    return {"resends_in_8_s": sum(sent[:33]), "resends_in_all": sum(sent), "given_up": list(trials.given_up),
            "seconds_until_given_up": gave_up, "longest_wait_s": max(b - a for a, b in zip(ticks, ticks[1:])),
            "mangled_ids_refused": len(refused), "mangled_ids": 3}


def smaller(tmp: Path, env: dict) -> dict:
    """10. a second learner on one database; a configuration whose tables would not fit; 3 million sensor names
    in one ~/predict (not sent: the client's middleware refuses it), then the most a client can send; an online
    save over a model file another program replaced."""
    import json as json_module

    from affordance_ros.share import default_config_path
    from affordance_ros.srv import Learn, Predict
    tmp.mkdir()
    db = tmp / "cases.db"
    seed(db, 200)
    results = {}
    params = {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0,
              "online_learning": "true", "online_save_period": 0.5}
    learner = launch("learner_node", params, tmp, env)
    client = ServiceClient()
    try:
        learn = client.client(Learn, f"{LEARNER}/learn", timeout=60.0)
        second = launch("learner_node", {**params, "model_path": tmp / "other.json"}, tmp, env, log="second")
        results["second_learner_exit"] = second.wait(60)
        refusal = [line for line in (tmp / "second.log").read_text().splitlines() if "in use by" in line]
        results["second_learner_lines"] = refusal

        client.call(learn, Learn.Request(structure="k2"))
        replacement = (tmp / "model.json").read_text().replace('"format"', '"replaced_by": "bench", "format"', 1)
        (tmp / "model.json").write_text(replacement)
        robot = launch("simulated_robot", {"count": 20, "rate": 100.0, "trial_id_prefix": "o"}, tmp, env)
        robot.wait(120)
        time.sleep(2.0)
        results["replaced_model_kept"] = (tmp / "model.json").read_text() == replacement

        predict = client.client(Predict, f"{LEARNER}/predict")
        before = rss_mb(learner.pid)
        names = [f"s{k}" for k in range(3_000_000)]
        try:  # the interfaces bound every list: the client's middleware refuses to send this one
            client.call(predict, Predict.Request(query=["action"], sensor_names=names,
                                                 sensor_values=[1.0] * len(names)), timeout=120.0)
            results["huge_request_not_sent"] = ""
        except Exception as refused:  # rclpy's error for a request it cannot serialise
            results["huge_request_not_sent"] = str(refused)[:120]
        names = names[:INTERFACE_MAX_LIST_LENGTH]  # the most a client can send
        t0 = time.perf_counter()
        answer = client.call(predict, Predict.Request(query=["action"], sensor_names=names,
                                                      sensor_values=[1.0] * len(names)), timeout=120.0)
        results["huge_request"] = {"names": len(names), "seconds": time.perf_counter() - t0,
                                   "refused": not answer.success, "rss_mb": [before, rss_mb(learner.pid)],
                                   "message": answer.message[:120]}
    finally:
        client.close()
        results["learner_exit"] = stop_process(learner)
    values = [f"v{i}" for i in range(1000)]
    doc = json_module.loads(default_config_path().read_text())
    doc["variables"] = [doc["variables"][0]] + [
        {"name": f"V{k}", "group": "object" if k < 3 else "effect", "values": values,
         "parents": [] if k < 3 else ["Action", "V0", "V1"],
         "sensor": {"name": f"s{k}", "means": [5.0 * i for i in range(1000)], "stddevs": [1.0] * 1000}}
        for k in range(6)]
    doc["variables"][0]["parents"] = []
    (tmp / "huge.json").write_text(json_module.dumps(doc))
    huge = launch("learner_node", {"database_path": tmp / "huge.db", "config_path": tmp / "huge.json"}, tmp, env,
                  log="huge")
    results["huge_config_exit"] = huge.wait(60)
    results["huge_config_line"] = next((line for line in (tmp / "huge.log").read_text().splitlines()
                                        if "would need" in line), "")
    return results
