"""TrialSpool: the trials a robot sent and the learner has not confirmed yet, kept on disk."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from affordance_ros.data.spool import SpooledPart, SpoolError, TrialSpool
from affordance_ros.data.storage import CaseStore


def parts(k, kinds=("action", "object_features", "effects")):
    return [SpooledPart(f"/{kind}", "Action" if kind == "action" else "Features", bytes([k, n, 0, 255]))
            for n, kind in enumerate(kinds)]


def test_trials_come_back_in_the_order_they_were_added_until_removed(tmp_path):
    path = tmp_path / "robot" / "trials.spool"  # its folder made too
    with_spool = TrialSpool(path)
    for k in range(5):
        with_spool.add(f"t{k}", parts(k))
    with_spool.add("t9", parts(9, ("action",)))
    with_spool.add("t9", parts(9, ("object_features", "effects")))  # a bag's trial: its parts one by one
    with_spool.remove(["t1", "t3"])
    assert with_spool.count() == 6  # (a removal is committed at the next sync)
    with_spool.sync()
    assert with_spool.count() == 4
    with_spool.close()
    again = TrialSpool(path)
    loaded = again.load()
    assert [t for t, _ in loaded] == ["t0", "t2", "t4", "t9"]
    assert loaded[0][1] == parts(0)
    assert [p.topic for p in loaded[3][1]] == ["/action", "/object_features", "/effects"]
    again.close()


def test_a_trial_sent_again_after_it_was_answered_is_kept_anew(tmp_path):
    spool = TrialSpool(tmp_path / "trials.spool")
    spool.add("t0", parts(0))
    spool.remove(["t0"])
    spool.add("t0", parts(7))  # the same id, new content: the removal waiting is committed first
    spool.close()
    again = TrialSpool(tmp_path / "trials.spool")
    assert again.load() == [("t0", parts(7))]
    again.close()


def test_what_a_killed_robot_added_is_there_at_the_next_start(tmp_path):
    """Each trial is committed as it is added: a robot process killed (SIGKILL, no close) loses none."""
    path = tmp_path / "trials.spool"
    script = textwrap.dedent(f"""
        import os, signal
        from affordance_ros.data.spool import TrialSpool, SpooledPart
        spool = TrialSpool({str(path)!r})
        for k in range(200):
            spool.add(f"t{{k}}", [SpooledPart("/action", "Action", bytes([k % 256]))])
        spool.remove(["t0"])  # not committed yet: sent again after the restart (the learner answers it)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    spool = TrialSpool(path)  # the lock went with the process
    assert [t for t, _ in spool.load()] == [f"t{k}" for k in range(200)]
    spool.close()


def test_a_second_process_on_the_same_spool_is_refused_naming_the_holder(tmp_path):
    path = tmp_path / "trials.spool"
    spool = TrialSpool(path)
    script = f"from affordance_ros.data.spool import TrialSpool; TrialSpool({str(path)!r})"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"the spool '{path}' is in use by process {os.getpid()}" in done.stderr
    assert "one robot process per spool" in done.stderr
    spool.close()


def test_a_file_that_is_not_a_spool_is_refused_untouched(tmp_path):
    db = tmp_path / "cases.db"
    CaseStore(db).close()
    before = db.read_bytes()
    with pytest.raises(SpoolError, match="another kind, not a robot's spool"):
        TrialSpool(db)
    assert db.read_bytes() == before
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, but long enough to look like a header of some kind " * 10)
    with pytest.raises(SpoolError, match="cannot use .* as the robot's spool"):
        TrialSpool(text)
    with pytest.raises(SpoolError, match="another kind"):  # (the lock of a refused one was released: refused again
        TrialSpool(db)                                       # for what it is, not as in use)


def test_a_spool_of_another_version_is_refused(tmp_path):
    path = tmp_path / "trials.spool"
    TrialSpool(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 9")
    with pytest.raises(SpoolError, match="has version 9"):
        TrialSpool(path)
