"""CaseStore: the SQLite case database."""

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import learner_on_another_host

from affordance_ros.data.database_lock import DatabaseInUse, DatabaseLock
from affordance_ros.data.storage import SCHEMA_VERSION, CaseStore, CaseStoreError
from affordance_ros.data.trial import Trial, case_set


def trial(k, action="tap"):
    return Trial(trial_id=f"t{k}", action=action, object_features={"color": 1.5 * k, "shape": -2.0},
                 effects={"obj_vel": 10.25}, stamp=100.0 + k, received=200.0 + k).to_record("Action")


def test_add_and_read_back(tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        assert store.count() == 0 and store.records() == []
        assert store.add(trial(1)) is True
        assert store.add(trial(2, "grasp")) is True
        assert store.count() == 2
        assert store.records() == [trial(1), trial(2, "grasp")]
        assert store.contains("t1") and not store.contains("t3")


def test_duplicate_trial_id_changes_nothing(tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        store.add(trial(1))
        other = Trial(trial_id="t1", action="grasp", object_features={"size": 3.0}).to_record("Action")
        assert store.add(other) is False
        assert store.records() == [trial(1)]


def test_cases_survive_reopening_and_creates_folders(tmp_path):
    path = tmp_path / "deep" / "er" / "cases.db"
    with CaseStore(path) as store:
        for k in range(5):
            store.add(trial(k))
    with CaseStore(path) as store:
        assert [r.trial_id for r in store.records()] == [f"t{k}" for k in range(5)]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    sources = conn.execute("SELECT source, sensor FROM readings ORDER BY rowid LIMIT 3").fetchall()
    assert sources == [("object", "color"), ("object", "shape"), ("effect", "obj_vel")]


def test_committed_at_once_visible_to_another_connection(tmp_path):
    path = tmp_path / "cases.db"
    with CaseStore(path) as store:
        store.add(trial(1))
        # no close, no flush: another process would see it too
        assert sqlite3.connect(path).execute("SELECT trial_id FROM cases").fetchall() == [("t1",)]


def test_refuses_foreign_and_newer_databases(tmp_path):
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE stuff (x)")
    with pytest.raises(CaseStoreError, match="something else"):
        CaseStore(foreign)
    newer = tmp_path / "newer.db"
    with CaseStore(newer):
        pass
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(CaseStoreError, match="newer affordance_ros"):
        CaseStore(newer)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CaseStoreError, match="not a usable case database"):
        CaseStore(garbage)


def test_concurrent_writers_and_readers(tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        errors = []

        def write(offset):
            try:
                for k in range(50):
                    assert store.add(trial(offset + k))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def read():
            for _ in range(20):
                records = store.records()
                assert all(len(r.readings) == 3 and len(r.sources) == 3 for r in records)

        threads = [threading.Thread(target=write, args=(o,)) for o in (0, 1000)] + [threading.Thread(target=read)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert store.count() == 100


def test_read_only(tmp_path):
    path = tmp_path / "cases.db"
    with pytest.raises(CaseStoreError, match="does not exist"):
        CaseStore(path, read_only=True)
    assert not path.exists()
    with CaseStore(path) as store:
        store.add(trial(1))
    with CaseStore(path, read_only=True) as store:
        assert store.records() == [trial(1)]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.add(trial(2))


def test_records_learn_in_the_core(tmp_path):
    from affordance_ros.core.ground_truth import benchmark_structure
    with CaseStore(tmp_path / "cases.db") as store:
        store.add(trial(1))
        store.add(trial(2, "grasp"))
        cases = case_set(benchmark_structure("montesano", 1.0), store.records())
    assert cases.n_cases == 2 and list(cases.trial_ids) == ["t1", "t2"]
    assert list(cases.labels["Action"]) == [1, 0]
    assert list(cases.readings["color"]) == [1.5, 3.0]


def test_a_foreign_database_is_refused_before_any_write(tmp_path):
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE stuff (x)")
    conn.executemany("INSERT INTO stuff VALUES (?)", [(k,) for k in range(100)])
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    assert before[18:20] == b"\x01\x01"  # rollback journal, not WAL
    with pytest.raises(CaseStoreError, match="something else.*not changed"):
        CaseStore(foreign)
    assert foreign.read_bytes() == before  # header bytes 18-19 included: not switched to WAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]  # no -wal, no -shm left behind


def test_a_database_with_damaged_pages_is_refused_at_start_up_saying_what_to_do(tmp_path):
    path = tmp_path / "cases.db"
    with CaseStore(path) as store:
        for k in range(2000):
            store.add(trial(k))
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 20 * page
    for offset in range(10 * page, 12 * page):  # two pages in the middle: b-tree pages of the tables
        data[offset] = 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(CaseStoreError, match=r"is damaged \(PRAGMA quick_check.*\.recover"):
        CaseStore(path)


@pytest.mark.parametrize("kept", [100, 50_000])
def test_a_truncated_database_is_refused_as_damaged_saying_what_to_do(tmp_path, kept):
    """A copy cut short (a full disk, an interrupted transfer): damaged so that not even its schema can be read.
    Refused saying what to do about it, not with SQLite's words alone ("database disk image is malformed")."""
    path = tmp_path / "cases.db"
    with CaseStore(path) as store:
        for k in range(2000):
            store.add(trial(k))
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the file itself
    assert path.stat().st_size > 2 * kept
    path.write_bytes(path.read_bytes()[:kept])
    with pytest.raises(CaseStoreError, match=r"is damaged \(PRAGMA quick_check: database disk image is malformed\)"
                                             r".*\.recover"):
        CaseStore(path)
    path.write_text("not a database at all, a text file")
    with pytest.raises(CaseStoreError, match="is not a usable case database: file is not a database"):
        CaseStore(path)


def test_the_store_takes_only_records_and_keeps_them_as_given(tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        with pytest.raises(TypeError, match="takes a TrialRecord"):
            store.add({"trial_id": "x", "labels": {"Action": "tap"}, "readings": {}, "sources": {}})
        assert store.count() == 0
        store.add(trial(1))
        assert store.record_of("t1") == trial(1)


def test_a_keyboard_interrupt_right_after_the_commit_leaves_the_case_stored_and_no_rollback_error(tmp_path,
                                                                                                  monkeypatch):
    class InterruptedAfterCommit:
        """A connection, with a Ctrl-C arriving just after a COMMIT went through once ``armed``."""

        armed = False

        def __init__(self, conn):
            self.conn = conn

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def execute(self, sql, *args):
            result = self.conn.execute(sql, *args)
            if sql == "COMMIT" and InterruptedAfterCommit.armed:
                InterruptedAfterCommit.armed = False
                raise KeyboardInterrupt
            return result

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: InterruptedAfterCommit(connect(*a, **kw)))
    with CaseStore(tmp_path / "cases.db") as store:
        InterruptedAfterCommit.armed = True
        with pytest.raises(KeyboardInterrupt):  # not sqlite3.OperationalError "cannot rollback"
            store.add(trial(1))
        assert store.count() == 1 and store.record_of("t1").trial_id == "t1"
        assert store.record_of("t2") is None


def test_the_lock_file_removed_with_the_database_is_locked_again_as_the_database_is_written_back(tmp_path):
    db = tmp_path / "cases.db"
    lock = DatabaseLock(db, "/first")
    store = CaseStore(db, database_lock=lock)
    store.add(trial(1))
    for path in tmp_path.iterdir():  # rm -f cases.db*
        path.unlink()
    assert store.file_problem() == f"the case database {db} was removed"
    assert store.recover() == "" and store.file_problem() == ""
    assert store.records() == [trial(1)] and lock.path.exists()
    with pytest.raises(DatabaseInUse, match="in use by /first"):  # (flock: also from another open file here)
        DatabaseLock(db, "/second")
    lock.path.unlink()  # the lock file alone: locked again at once
    assert store.file_problem() == f"the lock file {lock.path} was removed"
    assert store.recover() == "" and store.file_problem() == ""
    with pytest.raises(DatabaseInUse):
        DatabaseLock(db, "/second")
    store.close()
    lock.release()


def test_a_second_learner_is_refused_while_the_files_are_gone_before_the_database_is_written_back(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = Path("db") / "cases.db"  # relative, as database_path:=cases.db
    lock = DatabaseLock(db, "/first")
    store = CaseStore(db, database_lock=lock)
    store.add(trial(1))
    for path in db.parent.iterdir():  # rm -f cases.db*: no file is locked until the store writes it back
        path.unlink()
    with pytest.raises(DatabaseInUse, match=rf"in use by /first \(pid {os.getpid()}, host "):
        DatabaseLock(db, "/second")
    assert list(db.parent.iterdir()) == []  # the refused one made nothing
    shutil.rmtree(db.parent)  # the folder too
    for _ in range(12):  # more refusals than the socket's queue holds: each still names the holder
        with pytest.raises(DatabaseInUse, match=rf"in use by /first \(pid {os.getpid()}, "):
            DatabaseLock(db, "/second")
        lock.problem()
    assert not db.parent.exists()
    db.parent.mkdir()
    assert store.recover() == "" and store.records() == [trial(1)]
    with pytest.raises(DatabaseInUse, match="in use by /first"):
        DatabaseLock(db, "/second")
    store.close()
    lock.release()
    DatabaseLock(db, "/second").release()  # released: free for the next


def test_a_second_learner_on_a_hard_link_of_the_database_is_refused_before_sqlite_opens_it(tmp_path):
    """A hard link (``ln``, a ``cp -al`` snapshot) is the same database by another path, with a lock file and a
    path socket of its own; SQLite keeps the write-ahead log beside the path, so two learners on the two paths
    corrupted it ("database disk image is malformed"). The store holds the file itself too."""
    db, link = tmp_path / "cases.db", tmp_path / "snapshot" / "cases.db"
    lock = DatabaseLock(db, "/first")
    store = CaseStore(db, database_lock=lock)
    store.add(trial(1))
    link.parent.mkdir()
    os.link(db, link)
    other = DatabaseLock(link, "/second")  # its path is free
    with pytest.raises(CaseStoreError, match=rf"is in use by /.* \(pid {os.getpid()}, "):
        CaseStore(link, database_lock=other)
    assert sorted(p.name for p in link.parent.iterdir()) == ["cases.db", "cases.db.lock"]  # no -wal: not opened
    other.release()
    link.unlink()
    db.unlink()  # written back: the new file is held (and the removed one no longer)
    assert store.recover() == "" and store.records() == [trial(1)]
    os.link(db, link)
    other = DatabaseLock(link, "/second")
    with pytest.raises(CaseStoreError, match="is in use by"):
        CaseStore(link, database_lock=other)
    other.release()
    store.close()
    lock.release()
    other = DatabaseLock(link, "/second")
    CaseStore(link, database_lock=other).close()  # released: free for the next
    other.release()


def test_the_same_path_in_another_mount_namespace_is_another_database(tmp_path):
    """Two containers on the host's network, each with its own /data/cases.db, do not refuse each other."""
    folder = tmp_path / "data"
    lock = DatabaseLock(folder / "cases.db", "/first")
    take = ("from pathlib import Path; from affordance_ros.data.database_lock import DatabaseLock; "
            f"DatabaseLock(Path({str(folder / 'cases.db')!r}), '/second').release(); print('held')")
    try:
        here = subprocess.run([sys.executable, "-c", take], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert here.returncode == 1 and "in use by /first" in here.stderr
        elsewhere = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                    f'mount -t tmpfs none "{folder}" && exec "$0" -c "$1"', sys.executable, take],
                                   capture_output=True, text=True, timeout=60, cwd=tmp_path)
        if "affordance_ros" not in elsewhere.stderr and "held" not in elsewhere.stdout:
            pytest.skip(f"no mount namespace of our own here: {elsewhere.stderr.strip()[-200:]}")
        assert elsewhere.returncode == 0 and elsewhere.stdout.strip() == "held", elsewhere.stderr
    finally:
        lock.release()


def test_a_lock_file_another_learner_took_stops_the_store_until_that_learner_ends(tmp_path):
    db = tmp_path / "cases.db"
    lock = DatabaseLock(db, "/first")
    store = CaseStore(db, database_lock=lock)
    lock.path.unlink()
    second = learner_on_another_host(lock.path, "/second")  # (a shared file system: only the file lock meets it)
    problem = store.recover()
    assert problem.startswith(f"{lock.path} now names another file than the lock file this node holds; /second (")
    assert "it uses the case database too" in problem and store.file_problem()
    os.close(second)  # it ended: the file it leaves is locked again
    assert store.recover() == "" and store.file_problem() == ""
    assert '"node": "/first"' in lock.path.read_text()
    store.close()
    lock.release()

