"""HealthMonitor: /diagnostics says what is true about storing (a removed file, a held lock, a read-only file)."""

import os
import time
from collections import Counter

from conftest import learner_on_another_host

from affordance_ros.data import health
from affordance_ros.data.case_writer import WriterState
from affordance_ros.data.health import ERROR, OK, WARN, HealthMonitor

MODEL = {"learned": {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "duration": 1.0}}


def writer(**changes):
    state = dict(cases=10, queued=0, held=0, committed=10, groups=3, problem="", seconds=0.0, confirming=True)
    return WriterState(**{**state, **changes})


def assess(tmp_path, state, counts=Counter()):
    return HealthMonitor().assess(counts, time.time(), state="active", writer=state, database=tmp_path / "cases.db",
                                  pending=0, model_metadata=MODEL, last_learn=None, online=False)


def test_storing_as_it_is(tmp_path):
    (tmp_path / "cases.db").touch()
    assert assess(tmp_path, writer()).level == OK
    removed = assess(tmp_path, writer(problem="the case database x was removed", held=7, queued=2, confirming=False))
    assert removed.level == ERROR and "not confirming trials (7 stored since are held, 2 wait)" in removed.message
    locked = assess(tmp_path, writer(problem="the case database is locked by another program", seconds=3.0, queued=40))
    assert locked.level == WARN and "for 3 s: 40 trials wait to be stored (not confirmed yet" in locked.message
    assert assess(tmp_path, writer(problem="the case database is locked by another program", seconds=30.0)).level \
        == ERROR
    failing = assess(tmp_path, writer(problem="storing fails: database or disk is full", seconds=1.0))
    assert failing.level == ERROR and "disk is full" in failing.message


def test_another_learner_on_the_lock_file_is_an_error_that_lasts_until_it_stops(tmp_path):
    from affordance_ros.data.database_lock import DatabaseLock
    from affordance_ros.data.storage import CaseStore
    db = tmp_path / "cases.db"
    lock = DatabaseLock(db, "/first")
    store = CaseStore(db, database_lock=lock)
    lock.path.unlink()
    second = learner_on_another_host(lock.path, "/second")  # started in the moment the lock file was gone
    try:
        problem = store.recover()
        shared = assess(tmp_path, writer(problem=problem, held=3, queued=1, confirming=False))
        assert shared.level == ERROR and shared.message.startswith(problem)
        assert shared.message.endswith("not confirming trials (3 stored since are held, 1 wait) until that node stops")
        removed = assess(tmp_path, writer(problem="the case database x was removed", confirming=False))
        assert removed.message.endswith("until the database is written to its path again")
    finally:
        os.close(second)
        store.close()
        lock.release()


def test_a_database_read_only_on_disk_is_a_warning_that_says_storing_goes_on(tmp_path, monkeypatch):
    (tmp_path / "cases.db").touch()
    # (as root every file is writable; this is what a robot's own user sees after `chmod a-w` of the folder)
    monkeypatch.setattr(health.os, "access", lambda path, mode: not (mode == os.W_OK and path == tmp_path))
    found = assess(tmp_path, writer())
    assert found.level == WARN and f"folder {tmp_path} became read-only on disk" in found.message
    assert "storing goes on in the open file" in found.message and "next start" in found.message
