"""Helpers and fixtures shared by the tests.

``ros`` (a fixture): real nodes over DDS, from ros_harness.py, which needs ROS 2 and the interfaces the
CMake build generates. It is imported only by the tests that use it, and those tests are marked ``ros``:
a pip install without ROS runs the others (``-m "not ros"``, see test.sh). Discovery stays on this host,
in a domain of this run (./test.sh sets one; a bare `pytest` run gets one from its process id).
"""

import contextlib
import fcntl
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 101 + 1))

# The tests test the installed package, never the source tree. `python -m pytest` from the repository root puts
# the root first on sys.path, where affordance_ros/ is the source tree (without the generated interfaces): take
# it off before anything imports the package, and keep it off in the Pythons the tests start (`python -m ...`),
# as test.sh does (PYTHONSAFEPATH).
REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != REPO_ROOT]
os.environ["PYTHONSAFEPATH"] = "1"
PYTEST_INI = Path(__file__).with_name("pytest.ini")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from affordance_ros.core import AffordanceNetwork  # noqa: E402
from affordance_ros.core.ground_truth import benchmark_network, sample_values  # noqa: E402
from affordance_ros.data.storage import CaseStore, CaseStoreError  # noqa: E402
from affordance_ros.data.trial import Trial  # noqa: E402
from affordance_ros.share import default_config_path, share_directory  # noqa: E402

MONTESANO_CONFIG = default_config_path()
# The command line of the install under test: in the bin/ of its prefix (<prefix>/share/affordance_ros: colcon's
# install/affordance_ros, .venv, a pip venv), else beside the interpreter, else on PATH.
CLI = shutil.which("affordance-ros", path=os.pathsep.join(
    [str(share_directory().parents[1] / "bin"), str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
# The benchmarks' command (benchmarks/, not part of the package): beside the interpreter (.venv), else on PATH.
BENCH = shutil.which("affordance-ros-bench", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                   os.environ.get("PATH", "")]))


def committed_events(intake, timeout=20.0):
    """The events of the trials ``intake`` (a TrialIntake) had its writer store, once every trial the intake gave
    it is stored, as the node takes them."""
    events = intake.committed()
    deadline = time.monotonic() + timeout
    while intake.storing:
        assert time.monotonic() < deadline, f"the writer did not store {intake.storing} trials in {timeout} s"
        time.sleep(0.001)
        events += intake.committed()
    return events


def stored_ids(db) -> set:
    """The trial ids in the case database ``db`` (none if it does not exist)."""
    if not db.exists():
        return set()
    with CaseStore(db, read_only=True) as store:
        return {r.trial_id for r in store.records()}


def stored_count(db) -> int:
    try:
        with CaseStore(db, read_only=True) as store:
            return store.count()
    except CaseStoreError:  # not created yet
        return 0


def wait_for(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class NodeProcess(subprocess.Popen):
    """An executable the tests started, its output (stdout and stderr) written to the file ``log`` (opened with
    ``mode``)."""

    def __init__(self, args, log: Path, mode: str = "w", **kwargs):
        with open(log, mode) as out:
            super().__init__(args, stdout=out, stderr=subprocess.STDOUT, **kwargs)
        self.log = log


def exit_status(process: subprocess.Popen, timeout: float) -> int:
    """The exit status of ``process`` within ``timeout`` seconds. One still running then gets SIGABRT first (a
    Python started with PYTHONFAULTHANDLER=1, as the tests start the executables, writes every thread's stack
    to its output), then SIGKILL, and the test fails with the end of its log (and, called in a ``finally``, with
    what failed the test before)."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired as expired:
        process.send_signal(signal.SIGABRT)
        try:
            process.wait(10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log = getattr(process, "log", None)  # a NodeProcess's
        tail = log.read_text(errors="replace")[-6000:] if log is not None and log.exists() else ""
        raise AssertionError(f"{Path(process.args[0]).name} still ran {timeout:g} s on; its stacks at SIGABRT "
                             f"end its output:\n{tail}") from expired.__context__


@pytest.fixture(autouse=True)
def collect_rclpy():
    """rclpy objects left in reference cycles (nodes, contexts: a context's DDS participant and its ~11 threads
    live as long as they do) are freed at the end of each test, in the main thread, its executors stopped (those
    of the test itself at the end of the next one: pytest lets go of a test's fixtures after its teardown). Else
    the garbage collector would free them whenever it ran next, in whichever thread, in the middle of a later test,
    and the test process would carry a DDS participant (and its threads) of every test since its last collection."""
    yield
    if "rclpy" in sys.modules:
        gc.collect()


@pytest.fixture(autouse=True)
def learn_without_posterior(request, monkeypatch):
    """Learning in this process draws no posterior (``posterior_draws`` 0, and so one structure, K2's, where the
    default would average over a sample of them) unless the test is marked ``posterior`` or asks for draws or for
    structure 'average' itself (the learner's options or the configuration's learning block): the samplers cost about
    a hundred E-steps per learn, and most tests learn to test something else. Nodes and commands the tests start
    learn with the product's default."""
    if request.node.get_closest_marker("posterior") is not None:
        return
    from affordance_ros.core import AffordanceLearner
    options = AffordanceLearner.options

    def without_posterior(self, config):
        chosen = options(self, config)
        asked = {**config.learning, **{k: v for k, v in self.params.items() if v is not None}}
        if "posterior_draws" in asked or asked.get("structure") == "average":
            return chosen
        return chosen.replace(posterior_draws=0, structure="k2" if chosen.structure == "average" else None)

    monkeypatch.setattr(AffordanceLearner, "options", without_posterior)


def pytest_configure(config):
    """pytest without a path from the repository root reads no test/pytest.ini (the tests' time limits, the 'ros'
    marker): say how to run them instead."""
    if config.inipath is None or Path(config.inipath).resolve() != PYTEST_INI:
        pytest.exit(f"the tests' settings are in {PYTEST_INI.relative_to(REPO_ROOT)}, which pytest reads when given "
                    "the tests' folder: run `pytest test` (or a test file in it), or ./test.sh", returncode=2)


def pytest_collection_modifyitems(items):
    for item in items:
        if "ros" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ros)


@pytest.fixture
def ros(tmp_path):
    from ros_harness import Ros  # (rclpy and the generated interfaces: only for the tests over DDS)

    harness = Ros(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


def learner_on_another_host(lock_path, node: str) -> int:
    """What a learner on another host does to a database's lock file on a shared file system (where only the
    file lock meets it: ``database_lock``): its file descriptor, holding the lock until closed."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, json.dumps({"node": node, "pid": 4242, "host": "robot2"}).encode(), 0)
    return fd


def sampled_records(n, seed=0, sigma=1.0, prefix="r", start=0.0, spacing=1.0, delay=0.0):
    """n trials from the montesano ground truth as the node stores them (for seeding a database): stamped
    ``start + spacing * k``, received ``delay`` after their stamp."""
    truth = benchmark_network("montesano", sigma, seed)
    rng = np.random.default_rng([seed, 7])
    codes = sample_values(truth, n, rng)
    records = []
    for k in range(n):
        parts = {"object": {}, "effect": {}}
        for i, v in enumerate(truth.variables):
            if v.group in parts:
                parts[v.group][v.sensor.name] = float(v.sensor.means[codes[k, i]] + sigma * rng.standard_normal())
        action = truth["Action"].values[codes[k, truth.index("Action")]]
        stamp = start + spacing * k
        records.append(Trial(f"{prefix}{k:05d}", action, parts["object"], parts["effect"],
                             stamp=stamp, received=stamp + delay).to_record("Action"))
    return records


def learned_node(ros, tmp_path, n: int):
    """A learner node with a model learned from ``n`` stored trials of the montesano world, and that model."""
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(n):
            store.add(record)
    learner = ros.learner()
    assert ros.learn().success
    return learner, AffordanceNetwork.load(tmp_path / "model.json")


def write_config(path, **learning):
    """The montesano configuration with a 'learning' block."""
    doc = json.loads(MONTESANO_CONFIG.read_text())
    doc["learning"] = learning
    path.write_text(json.dumps(doc))
    return path


def assert_distributions(response, expected_variables, config):
    """Marginals in the order asked, over the configured values, each normalised."""
    assert response.success, response.message
    assert [d.variable for d in response.marginals] == expected_variables
    for dist, best in zip(response.marginals, response.most_probable):
        assert list(dist.values) == list(config[dist.variable].values)
        probabilities = np.asarray(dist.probabilities)
        assert probabilities.shape == (len(dist.values),)
        assert np.all(probabilities >= 0) and abs(probabilities.sum() - 1.0) < 1e-9
        assert best in dist.values
    assert len(response.most_probable) == len(expected_variables)
    assert 0.0 < response.joint_probability <= 1.0


def interrupted(args, ready, cwd=None, env=None, timeout=120):
    """Run ``args`` until ``ready`` shows in its output (or ``ready()`` is true), then Ctrl-C it as a terminal does
    (SIGINT to its process group); its exit status, stdout and stderr. Without PYTHONUNBUFFERED, as a user's shell
    runs it: what the command prints through a pipe must show when it happens."""
    env = {name: value for name, value in (os.environ if env is None else env).items() if name != "PYTHONUNBUFFERED"}
    env["PYTHONFAULTHANDLER"] = "1"  # (SIGABRT: every thread's stack on stderr)
    process = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=cwd, env=env, start_new_session=True)
    seen = {"stdout": [], "stderr": []}
    readers = [threading.Thread(target=lambda name=name: seen[name].extend(iter(getattr(process, name).readline, "")),
                                daemon=True) for name in seen]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    while not (ready() if callable(ready) else ready in "".join(seen["stdout"] + seen["stderr"])):
        assert process.poll() is None, f"ended before it showed {ready!r}: {''.join(seen['stderr'])}"
        assert time.monotonic() < deadline, f"no {ready!r} within {timeout} s"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    try:
        status = process.wait(timeout=60)
    except subprocess.TimeoutExpired:  # where it is stuck, and nothing of it left running for the next tests
        os.killpg(process.pid, signal.SIGABRT)
        try:
            process.wait(timeout=10)
        finally:
            with contextlib.suppress(ProcessLookupError):  # (the group ended with it)
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for reader in readers:
                reader.join(timeout=10)
        raise AssertionError(f"{args[1:3]} did not end within 60 s of SIGINT; its stderr ends:\n"
                             + "".join(seen["stderr"])[-6000:]) from None
    for reader in readers:
        reader.join(timeout=10)
    return status, "".join(seen["stdout"]), "".join(seen["stderr"])
