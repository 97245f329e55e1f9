"""Learning in a worker process gives what learning in this process gives, errors included."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import MONTESANO_CONFIG, sampled_records, write_config

from affordance_ros.core import AffordanceError, AffordanceNetwork
from affordance_ros.data.learn_job import learn
from affordance_ros.data.learn_worker import LearnWorker
from affordance_ros.data.model_manager import ModelManager
from affordance_ros.data.storage import CaseStore


@pytest.fixture
def worker():
    w = LearnWorker()
    yield w
    w.close()


def seed(tmp_path, n):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(n):
            store.add(record)


def test_worker_learns_the_same_model_and_writes_the_file(tmp_path, worker):
    seed(tmp_path, 300)
    here = ModelManager(MONTESANO_CONFIG, tmp_path / "cases.db", tmp_path / "here.json")
    there = ModelManager(MONTESANO_CONFIG, tmp_path / "cases.db", tmp_path / "there.json")
    local = learn(here.current.learn_job("k2", 0.0))
    remote = worker.learn(there.current.learn_job("k2", 0.0))
    assert remote.model.arcs == local.model.arcs and remote.result.num_cases == 300
    for a, b in zip(remote.model.variables, local.model.variables):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-12)
    assert not (tmp_path / "there.json").exists()  # the worker writes beside it; the node renames
    there.current.install_learned(remote)
    written = AffordanceNetwork.load(tmp_path / "there.json")
    assert written.arcs == local.model.arcs and written.metadata["cases"] == local.model.metadata["cases"]
    # with the current model as a prior: no new cases is the same clear error as in this process
    with pytest.raises(AffordanceError, match="no new cases"):
        worker.learn(there.current.learn_job("k2", 10.0))
    here.close()
    there.close()


def test_a_worker_killed_while_idle_is_replaced_at_the_next_learn(tmp_path, worker):
    seed(tmp_path, 50)
    manager = ModelManager(MONTESANO_CONFIG, tmp_path / "cases.db", tmp_path / "m.json")
    pid = worker.start()
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    assert worker.learn(manager.current.learn_job("k2", 0.0)).result.num_cases == 50  # at once, no failed learn
    assert worker.pid not in (None, pid)
    manager.close()


def test_a_worker_killed_while_learning_fails_that_learn_and_is_replaced(tmp_path, worker):
    seed(tmp_path, 200)
    manager = ModelManager(write_config(tmp_path / "slow.json", mcmc_samples=2_000_000, mcmc_burn_in=1000),
                           tmp_path / "cases.db", tmp_path / "m.json")
    steps = []

    def kill_at_the_first_step(step):
        steps.append(step)
        if len(steps) == 1:
            os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(AffordanceError, match="ended unexpectedly"):
        worker.learn(manager.current.learn_job("mcmc", 0.0), kill_at_the_first_step)
    assert worker.learn(manager.current.learn_job("k2", 0.0)).result.num_cases == 200
    manager.close()


def test_the_worker_ends_with_its_node_process_and_writes_nothing(tmp_path):
    """A process that starts a worker and is SIGKILLed in the middle of a learn: the worker ends at once."""
    seed(tmp_path, 200)
    config = write_config(tmp_path / "slow.json", mcmc_samples=5_000_000, mcmc_burn_in=1000)
    script = (f"from affordance_ros.data.learn_worker import LearnWorker\n"
              f"from affordance_ros.data.model_manager import ModelManager\n"
              f"m = ModelManager({str(config)!r}, {str(tmp_path / 'cases.db')!r}, {str(tmp_path / 'm.json')!r})\n"
              f"w = LearnWorker()\nprint(w.start(), flush=True)\n"
              f"w.learn(m.current.learn_job('mcmc', 0.0), lambda step: print('step', flush=True))\n")
    node = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        worker_pid = int(node.stdout.readline())
        assert node.stdout.readline().strip() == "step"  # learning
    finally:
        node.kill()
        node.wait()
    deadline = time.monotonic() + 5.0
    while alive(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker_pid), "the learning process outlived the process that started it"
    assert not (tmp_path / "m.json").exists() and not list(tmp_path.glob(".m.json*"))


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
