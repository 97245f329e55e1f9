"""Learning in a worker process gives what learning in this process gives, errors included."""

import os
import signal

import numpy as np
import pytest
from conftest import MONTESANO_CONFIG, sampled_records

from affordance_ros.core import AffordanceError, AffordanceNetwork
from affordance_ros.data.learn import learn
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
    local = learn(here.learn_job("k2", 0.0))
    remote = worker.learn(there.learn_job("k2", 0.0))
    assert remote.model.arcs == local.model.arcs and remote.result.num_cases == 300
    for a, b in zip(remote.model.variables, local.model.variables):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-12)
    written = AffordanceNetwork.load(tmp_path / "there.json")
    assert written.arcs == local.model.arcs and written.metadata["cases"] == local.model.metadata["cases"]
    # with the current model as a prior: no new cases is the same clear error as in this process
    there.install(remote.model)
    with pytest.raises(AffordanceError, match="no new cases"):
        worker.learn(there.learn_job("k2", 10.0))
    here.close()
    there.close()


def test_a_worker_that_dies_is_replaced(tmp_path, worker):
    seed(tmp_path, 50)
    manager = ModelManager(MONTESANO_CONFIG, tmp_path / "cases.db", tmp_path / "m.json")
    pid = worker.start().result(timeout=60)
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(AffordanceError, match="ended unexpectedly"):
        worker.learn(manager.learn_job("k2", 0.0))
    assert worker.learn(manager.learn_job("k2", 0.0)).result.num_cases == 50
    manager.close()
