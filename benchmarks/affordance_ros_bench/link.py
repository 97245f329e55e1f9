"""`affordance-ros-bench link`: a robot on WiFi. The simulated robot and the learner on two hosts (network namespaces)
joined by a link that loses, delays, duplicates, corrupts, slows and cuts frames (``linked_hosts``, ``lossy_link``),
real nodes (the installed executables), DDS over UDP (no shared memory, discovery over the subnet), each fault
injected while the trials stream.

Per fault: a learner on a fresh database, then the robot (``count`` trials at ``rate`` Hz, confirmations, a spool);
the fault is set from the start (loss, delay, ...) or once the first trial is stored (outages: the link cut, and
back; a node killed and started again meanwhile). What is measured: trials sent, confirmed (the robot's count),
in the database, lost (sent and not in the database at the end), stored twice (rows of one trial_id: the
database's unique trial_id makes it 0 unless that broke), given up; seconds from the robot's start to the first
trial stored and to the last one confirmed (the robot exits once every trial is answered), and from the link's
return to that last confirmation; and the frames the link saw that were IP fragments of a larger datagram (one
lost loses the datagram: DDS discovery's ~18 kB messages before its messages were capped at 1400 bytes).
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from .dds import bench_env, run_folder
from .environment import ros_node_importable
from .linked_hosts import LinkedHosts, namespaces_problem
from .report import machine_line, markdown_table, output_dir, write_results

RESTARTED_ROBOT_TRIALS = 20  # new trials of a robot started again after its first sent them all, at least
FIRST_TRIAL_LIMIT = 180.0  # seconds a run waits for its first trial stored before it is given up as failed
DONE_LIMIT = 240.0         # seconds after the last step a run waits for the robot to be done
SUMMARY = re.compile(r"(\d+) trials confirmed stored, (\d+) rejected, (\d+) duplicate, (\d+) unconfirmed.*?, "
                     r"(\d+) given up")
CUT = {"both": {"cut": True}}
BACK = {"reset": True}


@dataclass
class Fault:
    """``start``: the link's faults from the start; ``steps``: (seconds after the step before, the first after the
    first trial was stored; what: a dict for ``Link.set``, 'kill learner', 'start learner', 'kill robot', 'start
    robot'); the link's return is the last step that sets BACK; ``robot``: the robot's parameters of this fault.
    ``recovery``: the time from the link's return to the last confirmation tells how fast the robot catches up
    (false when the robot still streams then: flapping)."""

    name: str
    start: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)
    robot: dict = field(default_factory=dict)
    recovery: bool = True


def faults(quick: bool) -> list[Fault]:
    """The faults of a run (quick: three short ones, for the tests: the code cannot rot)."""
    if quick:
        return [Fault("none"), Fault("10 % of frames lost", {"both": {"loss": 0.1}}),
                Fault("outage 5 s", steps=[(0.1, CUT), (5.0, BACK)])]  # (its few trials are sent within 1 s)
    outage = 60.0
    flaps = [step for _ in range(6) for step in ((0.0 if _ == 0 else 3.0, CUT), (2.0, BACK))]
    found = [
        Fault("none"),
        Fault("10 % of frames lost", {"both": {"loss": 0.1}}),
        Fault("30 % lost (from the start: discovery too)", {"both": {"loss": 0.3}}),
        Fault("50 % lost (from the start)", {"both": {"loss": 0.5}}),
        Fault("200 ± 100 ms delay (reordered), 5 % duplicated, 5 % corrupted",
              {"both": {"delay": 0.2, "jitter": 0.1, "duplicate": 0.05, "corrupt": 0.05}}),
        Fault("256 kbit/s", {"both": {"rate": 256_000, "queue": 200}}),
        Fault("flapping: down 2 s, up 3 s, 6 times", steps=flaps, recovery=False),
        Fault("outage 20 s", steps=[(1.0, CUT), (20.0, BACK)]),
        Fault(f"outage {outage:.0f} s, max_resends 3, resend_timeout 1", steps=[(1.0, CUT), (outage, BACK)],
              robot={"max_resends": 3, "resend_timeout": 1.0}),
        Fault(f"answers cut {outage:.0f} s (learner to robot)", steps=[(1.0, {"learner_to_robot": {"cut": True}}),
                                                                        (outage, BACK)]),
        Fault("learner killed (-9) and started again during a 30 s outage",
              steps=[(1.0, CUT), (5.0, "kill learner"), (2.0, "start learner"), (23.0, BACK)]),
        Fault("robot killed (-9) once it sent its trials, started again on its spool (20 more), during a 30 s outage",
              steps=[(1.0, CUT), (12.0, "kill robot"), (2.0, "start robot"), (16.0, BACK)]),
    ]
    return found


def add_arguments(parser) -> None:
    parser.add_argument("--rate", type=float, default=50.0, help="the robot's trials per second (default 50)")
    parser.add_argument("--only", action="append", default=[],
                        help="run the faults whose name contains this text (repeatable; default: all)")


class Run:
    """One fault's run on ``hosts``: the learner and the robot (started again as the steps say) and what they did."""

    def __init__(self, hosts: LinkedHosts, tmp: Path, env: dict, n: int, rate: float, robot: dict):
        from affordance_ros.share import share_directory
        self.hosts, self.tmp, self.env, self.n, self.rate = hosts, tmp, env, n, rate
        self.lib = share_directory().parents[1] / "lib" / "affordance_ros"
        self.robot_params = dict({"count": n, "rate": rate, "seed": 1}, **robot)
        # (a build without a spool, for the figures before it: its robot restarted starts afresh)
        self.spool = tmp / "robot.spool" if importlib.util.find_spec("affordance_ros.data.spool") else None
        if self.spool is not None:
            self.robot_params["spool_path"] = self.spool
        self.db = tmp / "cases.db"
        self.learners, self.robots = [], []  # processes, in the order started
        self.sent = {}  # robot prefix -> trials it sent (known once it is done or killed)
        self.counts = {}  # robot prefix -> its count parameter
        self.spooled_at_restart = 0  # the killed robots' trials waiting in the spool when the next one started

    def start(self, node: str) -> None:
        if node == "learner":
            params = {"database_path": self.db, "model_path": self.tmp / "model.json", "status_period": 0.0}
            processes, host = self.learners, "learner"
        else:
            prefix = f"r{len(self.robots)}"
            if self.robots:  # the spool as the killed robot left it: the next one confirms these
                self.spooled_at_restart += len(self.spooled())
            self.counts[prefix] = max(self.n - sum(self.sent.values()), RESTARTED_ROBOT_TRIALS)
            params = dict(self.robot_params, trial_id_prefix=prefix, count=self.counts[prefix])
            processes, host = self.robots, "robot"
        log = open(self.tmp / f"{node}{len(processes)}.log", "w")
        command = [self.lib / ("learner_node" if node == "learner" else "simulated_robot"), "--ros-args"]
        for key, value in params.items():
            command += ["-p", f"{key}:={value}"]
        env = dict(self.env, ROS_HOME=str(self.tmp / f"{host}_home"))
        processes.append(self.hosts.popen(host, command, env=env, stdout=log, stderr=log))

    def kill(self, node: str) -> None:
        process = (self.learners if node == "learner" else self.robots)[-1]
        process.kill()
        process.wait()
        if node == "robot":  # what it sent: in the spool (each trial kept before it is sent) or stored
            prefix = f"r{len(self.robots) - 1}"
            self.sent[prefix] = len(self.trial_ids(prefix))

    def spooled(self) -> set:
        """The ids of the trials in the spool (read as a robot's next run does: no robot may run)."""
        if self.spool is None:
            return set()
        from affordance_ros.data.spool import TrialSpool
        spool = TrialSpool(self.spool)
        try:
            return {trial_id for trial_id, _ in spool.load()}
        finally:
            spool.close()

    def trial_ids(self, prefix: str) -> set:
        """The ids of ``prefix``'s trials in the spool and in the database."""
        return {t for t in self.spooled() | set(self.stored()) if t.startswith(f"{prefix}-")}

    def stored(self) -> list:
        """The trial ids of every row of the database (a trial stored twice would be there twice)."""
        if not self.db.exists():
            return []
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as conn:
            try:
                return [row[0] for row in conn.execute("SELECT trial_id FROM cases")]
            except sqlite3.OperationalError:  # (the learner has not made its table yet)
                return []

    def wait_active(self, timeout: float = 60.0) -> bool:
        log = self.tmp / f"learner{len(self.learners) - 1}.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "active: taking trials" in log.read_text(errors="replace"):
                return True
            time.sleep(0.05)
        return False

    def summary(self) -> dict:
        """The last robot's summary line (confirmed, rejected, duplicate, unconfirmed, given up), {} if none."""
        text = (self.tmp / f"robot{len(self.robots) - 1}.log").read_text(errors="replace")
        found = SUMMARY.findall(text)
        return dict(zip(("confirmed", "rejected", "duplicate", "unconfirmed", "given_up"), map(int, found[-1]))) \
            if found else {}


def run_fault(fault: Fault, tmp: Path, env: dict, n: int, rate: float, seed: int) -> dict:
    """One run of ``fault`` (see the module's description); its figures."""
    tmp.mkdir()
    result = {"fault": fault.name, "trials": n}
    with LinkedHosts(seed) as hosts:
        run = Run(hosts, tmp, env, n, rate, fault.robot)
        if fault.start:
            hosts.link.set(**fault.start)
        run.start("learner")
        if not run.wait_active():
            raise RuntimeError(f"link bench '{fault.name}': the learner did not start (see {tmp}/learner0.log)")
        run.start("robot")
        started = time.monotonic()
        first = returned = done = None
        steps, next_at = list(fault.steps), None
        while done is None:
            now = time.monotonic()
            if first is None and run.stored():
                first = now
                next_at = first + steps[0][0] if steps else None
            if first is None and now - started > FIRST_TRIAL_LIMIT:
                break
            while next_at is not None and now >= next_at:
                _, what = steps.pop(0)
                if isinstance(what, dict):
                    hosts.link.set(**what)
                    returned = now if what is BACK else returned
                else:
                    getattr(run, what.split()[0])(what.split()[1])
                next_at = next_at + steps[0][0] if steps else None
            if run.robots[-1].poll() is not None and "start robot" not in [what for _, what in steps]:
                done = now
            elif not steps and now - (returned or first or started) > DONE_LIMIT:
                break
            time.sleep(0.02)
        counts = hosts.link.counts()
        summary = run.summary() if done is not None else {}
    last = f"r{len(run.robots) - 1}"  # (its spool read once its robot was stopped with the hosts)
    run.sent[last] = run.counts[last] if done is not None else len(run.trial_ids(last))
    rows = run.stored()
    sent_ids = {f"{prefix}-{k:06d}" for prefix, count in run.sent.items() for k in range(count)}
    # the killed robots' trials not in the spool when the next robot started were confirmed to them
    killed_robots_confirmed = sum(run.sent.values()) - run.sent[last] - run.spooled_at_restart
    result.update({
        "sent": sum(run.sent.values()), "confirmed": summary.get("confirmed", 0) + killed_robots_confirmed,
        "stored": len(set(rows) & sent_ids), "lost": len(sent_ids - set(rows)),
        "stored_twice": len(rows) - len(set(rows)), "given_up": summary.get("given_up"),
        "robot_exit": run.robots[-1].returncode, "done": done is not None,
        "first_stored_s": None if first is None else first - started,
        "last_confirmed_s": None if done is None else done - started,
        "return_to_last_confirmed_s": None if done is None or returned is None or not fault.recovery
        else done - returned,
        "ip_fragments": sum(c["counts"]["ip_fragments"] for c in counts.values()),
        "frames": {direction: c["counts"] for direction, c in counts.items()}})
    return result


def run(args) -> int:
    if not ros_node_importable("link"):
        return 2
    problem = namespaces_problem()
    if problem:
        print(f"affordance-ros-bench link: skipped: {problem} (two network namespaces and a bridge between them)")
        return 0
    out = output_dir(args.out)
    n = args.cases or (60 if args.quick else 500)
    chosen = [f for f in faults(args.quick) if not args.only or any(text in f.name for text in args.only)]
    if importlib.util.find_spec("affordance_ros.data.spool") is None:  # (what a robot killed had sent is unknown)
        chosen = [f for f in chosen if "start robot" not in [what for _, what in f.steps]]
    print(f"bench link{' (quick)' if args.quick else ''}: {n} trials at {args.rate:g} Hz through a lossy link, "
          f"{len(chosen)} faults")
    print(f"machine: {machine_line()}")
    results = []
    with run_folder("link", out) as tmpdir:
        env = LinkedHosts.dds_env(bench_env(Path(tmpdir)))
        for k, fault in enumerate(chosen):
            started = time.monotonic()
            result = run_fault(fault, Path(tmpdir) / f"fault{k}", env, n, args.rate, seed=k)
            results.append(result)
            print(f"  {fault.name} ({time.monotonic() - started:.0f} s): " + ", ".join(
                f"{key} {value}" for key, value in result.items() if key not in ("fault", "frames")), flush=True)
    table = markdown_table(
        ["fault", "sent", "confirmed", "in the database", "lost", "stored twice", "given up", "first stored (s)",
         "last confirmed (s)", "link back → last confirmed (s)", "IP fragments"],
        [[r["fault"], r["sent"], r["confirmed"], r["stored"], r["lost"], r["stored_twice"],
          "—" if r["given_up"] is None else r["given_up"], _seconds(r["first_stored_s"]),
          _seconds(r["last_confirmed_s"]) + ("" if r["done"] else " (not done)"),
          _seconds(r["return_to_last_confirmed_s"]), r["ip_fragments"]] for r in results])
    write_results(out, "link", table, args.quick, {"trials": n, "rate": args.rate, "runs": results})
    return 0 if all(r["done"] and not r["lost"] for r in results) else 1


def _seconds(value) -> str:
    return "—" if value is None else f"{value:.1f}"
