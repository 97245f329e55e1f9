"""A robot on WiFi, end to end: the learner and the simulated robot on two hosts (network namespaces)
joined by a link that loses frames and is cut for longer than DDS's lease, the robot killed during the outage and
started again on its spool; real executables, DDS over UDP (no shared memory, discovery over the subnet). The
figures of every fault: `affordance-ros-bench link` (docs/benchmarks/wifi.md)."""

import os
import re
import sqlite3
import time

import pytest
from conftest import wait_for
from ros_harness import LIB

from affordance_ros.data.spool import TrialSpool

linked_hosts = pytest.importorskip("affordance_ros_bench.linked_hosts")
PROBLEM = linked_hosts.namespaces_problem()
pytestmark = [pytest.mark.ros, pytest.mark.skipif(bool(PROBLEM), reason=f"no network namespaces here: {PROBLEM}")]


def stored(db) -> set:
    if not db.exists():
        return set()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            return {row[0] for row in conn.execute("SELECT trial_id FROM cases")}
        except sqlite3.OperationalError:  # (no table yet)
            return set()


def spooled(path) -> set:
    spool = TrialSpool(path)
    try:
        return {trial_id for trial_id, _ in spool.load()}
    finally:
        spool.close()


def test_a_robot_killed_during_an_outage_on_a_lossy_link_delivers_everything_once_the_link_returns(tmp_path):
    db, spool = tmp_path / "cases.db", tmp_path / "robot.spool"
    env = linked_hosts.LinkedHosts.dds_env(dict(os.environ, PYTHONUNBUFFERED="1"))

    def node(hosts, host, executable, log, **params):
        args = [LIB / executable, "--ros-args", *(a for k, v in params.items() for a in ("-p", f"{k}:={v}"))]
        with open(tmp_path / log, "w") as out:
            return hosts.popen(host, args, env=dict(env, ROS_HOME=str(tmp_path / host)), stdout=out, stderr=out)

    robot_params = dict(rate=50.0, seed=1, spool_path=spool, resend_timeout=1.0, max_resends=3)
    with linked_hosts.LinkedHosts() as hosts:
        hosts.link.set(both={"loss": 0.2})  # from the start: discovery over the lossy link too
        node(hosts, "learner", "learner_node", "learner.log", database_path=db, model_path=tmp_path / "model.json",
             status_period=0.0)
        first = node(hosts, "robot", "simulated_robot", "robot_a.log", count=400, trial_id_prefix="a", **robot_params)
        wait_for(lambda: stored(db), timeout=90, what="the first trial stored over the lossy link")
        time.sleep(1.0)
        hosts.link.set(both={"cut": True})  # an outage longer than the lease (20 s): the learner is unmatched
        time.sleep(4.0)
        first.kill()  # the robot dies meanwhile (a crash, a battery swap): what it sent is in its spool
        first.wait()
        sent_a = {t for t in spooled(spool) | stored(db) if t.startswith("a-")}
        assert len(sent_a) > 200 and spooled(spool)
        second = node(hosts, "robot", "simulated_robot", "robot_b.log", count=50, trial_id_prefix="b", **robot_params)
        time.sleep(21.0)
        hosts.link.set(both={"cut": False})  # back (20 % lost still)
        back = time.monotonic()
        wait_for(lambda: second.poll() is not None, timeout=120, what="the restarted robot done")
        caught_up = time.monotonic() - back
        counts = hosts.link.counts()
    log = (tmp_path / "robot_b.log").read_text()
    assert second.returncode == 0, log[-3000:]
    summary = re.findall(r"published 50 trials; (\d+) trials confirmed stored, 0 rejected, 0 duplicate, "
                         r"0 unconfirmed, 0 given up", log)
    assert summary and int(summary[-1]) >= 50, log[-3000:]  # its own and those of the first left in the spool
    assert "trials of an earlier run in the spool" in log and "the learner is back" in log
    sent = sent_a | {f"b-{k:06d}" for k in range(50)}
    assert sent <= stored(db)  # nothing lost (the database's unique trial_id: nothing stored twice)
    assert not spooled(spool)  # each removed once confirmed
    assert caught_up < 15.0, caught_up  # (a bound with room: the bench measures the time)
    assert sum(c["counts"]["ip_fragments"] for c in counts.values()) == 0  # every DDS message within one frame
