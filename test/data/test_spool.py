"""TrialSpool: the trials a robot sent and the learner has not confirmed yet, kept on disk."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from affordance_ros.data.database_lock import DatabaseLock
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


def spooled_ids(path):
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT trial_id FROM trials ORDER BY sequence")]


@pytest.mark.parametrize("how", ["removed", "moved", "replaced"])
def test_a_spool_whose_file_went_while_it_ran_is_written_again_at_its_path_with_every_trial(tmp_path, how):
    """A clean-up script's ``rm spool*``, a ``mv``, another file moved over it: the robot's trials went on into the
    file it had open, which nothing would read again. ``restore`` writes what that file holds to the path."""
    path = tmp_path / "robot.spool"
    spool = TrialSpool(path)
    for k in range(20):
        spool.add(f"t{k}", parts(k))
    spool.remove(["t0"])
    if how == "removed":
        for name in ("robot.spool", "robot.spool-wal", "robot.spool-shm", "robot.spool.lock"):
            (tmp_path / name).unlink()
    elif how == "moved":
        os.rename(path, tmp_path / "elsewhere.spool")
    else:
        (tmp_path / "other").write_text("another program's file")
        os.replace(tmp_path / "other", path)
    for k in range(20, 25):  # (taken by the open file meanwhile)
        spool.add(f"t{k}", parts(k))
    told = spool.restore()
    went = "was replaced by another file" if how == "replaced" else "was removed or moved away"
    assert told.startswith(f"the spool '{path}' {went} while the robot ran: wrote a new one there, holding the 24 "
                           "trials waiting")
    assert spool.restore() == ""  # (once)
    spool.add("t25", parts(25))
    spool.close()
    assert spooled_ids(path) == [f"t{k}" for k in range(1, 26)]
    assert (tmp_path / "robot.spool.lock").exists()
    if how == "replaced":
        other = next(tmp_path.glob("robot.spool.other-*"))
        assert f"(the file that took its place is now '{other}')" in told
        assert other.read_text() == "another program's file"
    again = TrialSpool(path)  # a robot started on it again finds them
    assert [t for t, _ in again.load()] == [f"t{k}" for k in range(1, 26)] and again.load()[0][1] == parts(1)
    again.close()


def test_a_spool_whose_lock_file_another_robot_took_is_not_written_over(tmp_path):
    path = tmp_path / "robot.spool"
    spool = TrialSpool(path)
    spool.add("t0", parts(0))
    for name in ("robot.spool", "robot.spool-wal", "robot.spool-shm", "robot.spool.lock"):
        (tmp_path / name).unlink()
    script = f"import time; from affordance_ros.data.spool import TrialSpool; TrialSpool({str(path)!r}); " \
             "print('held', flush=True); time.sleep(60)"
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        with pytest.raises(SpoolError, match=f"the spool '{path}' is in use by process {other.pid}"):
            spool.restore()
        spool.add("t1", parts(1))  # (the open file takes them meanwhile)
    finally:
        other.kill()
        other.wait()
    assert "was replaced by another file" in spool.restore()  # (the other robot's new spool, moved aside)
    spool.close()
    assert spooled_ids(path) == ["t0", "t1"]


def test_a_learners_database_is_refused_without_a_byte_of_it_or_its_lock_written(tmp_path):
    """A robot given a learner's database as its spool refuses it without taking the database's lock file or writing
    its pid into it (a learner started next would name the robot's text as another learner)."""
    db = tmp_path / "cases.db"
    CaseStore(db).close()
    lock = DatabaseLock(db, "/affordance_learner")  # a learner holds it
    lock_text = (tmp_path / "cases.db.lock").read_text()
    with pytest.raises(SpoolError, match=r"^'.*cases.db' is a learner's case database, in use by /affordance_learner "
                                         rf"\(pid {os.getpid()}\): give the spool a path of its own$"):
        TrialSpool(db)
    lock.release()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(SpoolError, match="is an SQLite file of another kind, not a robot's spool"):
        TrialSpool(db)  # no learner runs: refused for what it is
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert (tmp_path / "cases.db.lock").read_text() == lock_text


@pytest.mark.parametrize("kind", ["text", "folder", "cut SQLite header"])
def test_something_refused_as_a_spool_leaves_no_lock_file_beside_it(tmp_path, kind):
    """An arbitrary file given as the spool is refused and leaves no '<file>.lock' beside it."""
    path = tmp_path / "notes"
    if kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"SQLite format 3\x00" if kind == "cut SQLite header" else b"plain text, not a spool " * 20)
    with pytest.raises(SpoolError, match=f"cannot use '{path}' as the robot's spool: "):
        TrialSpool(path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes"]


def test_trials_that_cannot_be_sent_are_set_aside_with_why_and_never_loaded_again(tmp_path):
    path = tmp_path / "robot.spool"
    spool = TrialSpool(path)
    for k in range(4):
        spool.add(f"t{k}", parts(k))
    spool.close()
    with sqlite3.connect(path) as conn:  # a hand edit: a part whose data is text
        conn.execute("UPDATE parts SET data = 'text' WHERE sequence = 3 AND position = 0")
    spool = TrialSpool(path)
    sendable, set_aside = spool.load_sendable(lambda trial_id, ps: "its topic is wrong" if trial_id == "t1" else "")
    assert [t for t, _ in sendable] == ["t0", "t3"]
    assert set_aside == {"t1": "its topic is wrong",
                         "t2": "its part 0 holds topic '/action', type 'Action' and data of type str: expected text, "
                               "text and bytes"}
    assert spool.count() == 2
    spool.close()
    again = TrialSpool(path)
    assert [t for t, _ in again.load()] == ["t0", "t3"]
    again.close()
    with sqlite3.connect(path) as conn:
        kept = conn.execute("SELECT trial_id, reason, position, topic, data FROM set_aside ORDER BY trial_id, position")
        rows = kept.fetchall()
    assert [(t, p, topic) for t, _, p, topic, _ in rows] == [("t1", 0, "/action"), ("t1", 1, "/object_features"),
                                                            ("t1", 2, "/effects"), ("t2", 0, "/action"),
                                                            ("t2", 1, "/object_features"), ("t2", 2, "/effects")]
    assert rows[0][4] == parts(1)[0].data and rows[3][4] == "text"  # kept as they were
