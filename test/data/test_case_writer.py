"""CaseWriter: storing in a thread of its own, commits in groups, results only once committed to the file the
node opened; a held lock, a removed file, a removed folder."""

import shutil
import sqlite3
import threading
import time

import pytest
from conftest import sampled_records, wait_for

from affordance_ros.data.case_writer import CaseWriter
from affordance_ros.data.storage import CaseStore


class Results:
    """What a writer hands back, gathered as the node gathers it (on every notify)."""

    def __init__(self):
        self.writer = None
        self.taken = []
        self.lock = threading.Lock()

    def notify(self):
        with self.lock:
            self.taken += self.writer.take()

    @property
    def ids(self):
        with self.lock:
            return [r.record.trial_id for r in self.taken]


@pytest.fixture
def writer(tmp_path):
    store = CaseStore(tmp_path / "db" / "cases.db")
    results = Results()
    results.writer = CaseWriter(store, results.notify)
    yield results
    results.writer.close(timeout=5.0)
    store.close()


def stored_ids(path):
    with CaseStore(path, read_only=True) as store:
        return {r.trial_id for r in store.records()}


def test_a_burst_is_committed_in_a_few_groups_and_each_result_comes_after_its_commit(tmp_path, writer):
    records = sampled_records(2000)
    committed_when_told = []
    notify = writer.notify

    def check_then_take():  # every result handed back is in the database already
        with CaseStore(tmp_path / "db" / "cases.db", read_only=True) as reader:
            committed_when_told.append(reader.count())
        notify()
    writer.writer.notify = check_then_take
    for record in records:
        writer.writer.submit(record)
    wait_for(lambda: len(writer.ids) == 2000, what="2000 results")
    assert writer.ids == [r.trial_id for r in records]  # in order
    assert [r.case_id for r in writer.taken] == list(range(1, 2001))
    assert writer.writer.groups < 200  # one transaction (one sync to disk) per group, not per trial
    assert committed_when_told[-1] == 2000 and all(n > 0 for n in committed_when_told)
    state = writer.writer.state()
    assert (state.cases, state.queued, state.held, state.problem, state.confirming) == (2000, 0, 0, "", True)


def test_a_trial_stored_already_comes_back_with_the_stored_record(writer):
    first, = sampled_records(1)
    writer.writer.submit(first)
    writer.writer.submit(first)
    wait_for(lambda: len(writer.taken) == 2, what="two results")
    assert writer.taken[0].case_id == 1 and writer.taken[1].case_id is None
    assert writer.taken[1].stored.trial_id == first.trial_id and writer.taken[1].stored.action == first.action


def test_while_another_program_holds_the_lock_trials_wait_unconfirmed_then_are_stored(tmp_path, writer):
    other = sqlite3.connect(tmp_path / "db" / "cases.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    for record in sampled_records(50):
        writer.writer.submit(record)
    wait_for(lambda: "locked" in writer.writer.state().problem, what="the writer to see the lock")
    time.sleep(0.5)
    assert writer.ids == [] and writer.writer.state().queued == 50
    assert writer.writer.state().seconds > 0.3 and writer.writer.state().confirming
    other.execute("COMMIT")
    other.close()
    wait_for(lambda: len(writer.ids) == 50, what="the trials stored once the lock is gone")
    assert writer.writer.state().problem == ""


def test_a_removed_database_file_is_written_back_and_only_then_confirmed(tmp_path, writer):
    path = tmp_path / "db" / "cases.db"
    records = sampled_records(300)
    for record in records[:100]:
        writer.writer.submit(record)
    wait_for(lambda: len(writer.ids) == 100, what="the first 100")
    path.unlink()  # `rm cases.db`: the writer's next look finds it gone and writes the open database back
    for record in records[100:]:
        writer.writer.submit(record)
    wait_for(lambda: len(writer.ids) == 300, what="the other 200")
    assert path.exists() and writer.writer.confirming
    assert stored_ids(path) == {r.trial_id for r in records}  # what a restart would read


def test_while_the_folder_is_gone_nothing_is_confirmed_and_everything_comes_back_with_it(tmp_path, writer):
    folder, path = tmp_path / "db", tmp_path / "db" / "cases.db"
    records = sampled_records(200)
    for record in records[:50]:
        writer.writer.submit(record)
    wait_for(lambda: len(writer.ids) == 50, what="the first 50")
    shutil.rmtree(folder)  # the database, its -wal and -shm: nowhere to write it back
    for record in records[50:]:
        writer.writer.submit(record)
    wait_for(lambda: not writer.writer.confirming, what="the writer to stop confirming")
    time.sleep(1.5)
    state = writer.writer.state()
    assert "folder" in state.problem and "was removed" in state.problem and not state.confirming
    assert state.held + state.queued == 150
    assert len(writer.ids) == 50  # none of those stored since was handed back: they are not in any file
    folder.mkdir()
    wait_for(lambda: len(writer.ids) == 200, what="everything, once the folder is back")
    assert writer.writer.confirming and stored_ids(path) == {r.trial_id for r in records}


def test_close_stores_what_is_queued_and_says_what_it_could_not(tmp_path):
    store = CaseStore(tmp_path / "cases.db")
    writer = CaseWriter(store, lambda: None)
    for record in sampled_records(30):
        writer.submit(record)
    assert writer.close() == 0 and store.count() == 30
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit(sampled_records(1, prefix="late")[0])
    other = sqlite3.connect(tmp_path / "cases.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    locked = CaseWriter(store, lambda: None)
    for record in sampled_records(5, prefix="l"):
        locked.submit(record)
    assert locked.close(timeout=1.0) == 5  # the lock outlasted the wait: not stored, and said so
    other.execute("ROLLBACK")
    other.close()
    store.close()


def test_giving_up_ends_the_close_only_while_storing_is_held_up(tmp_path):
    store = CaseStore(tmp_path / "cases.db")
    writer = CaseWriter(store, lambda: None)
    for record in sampled_records(300):
        writer.submit(record)
    assert writer.close(give_up=lambda: True) == 0 and store.count() == 300  # storing that works is not cut short
    other = sqlite3.connect(tmp_path / "cases.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    locked = CaseWriter(store, lambda: None)
    for record in sampled_records(5, prefix="l"):
        locked.submit(record)
    wait_for(lambda: "locked" in locked.state().problem, what="the writer to see the lock")
    asked, waiting, unstored = threading.Event(), threading.Event(), []

    def second_signal() -> bool:  # what close asks while it waits
        waiting.set()
        return asked.is_set()

    closing = threading.Thread(target=lambda: unstored.append(locked.close(timeout=30.0, give_up=second_signal)))
    closing.start()
    assert waiting.wait(10.0), "close did not wait for the locked database"
    asked.set()  # a second signal, while close waits
    closing.join(10.0)  # (close's own timeout is 30 s: it ends at the signal)
    assert not closing.is_alive() and unstored == [5]
    other.execute("ROLLBACK")
    other.close()
    store.close()


def test_the_trials_waiting_stay_within_the_capacity_while_storing_fails(tmp_path):
    """The node takes parts only while the writer is not ``full``. The group being tried counts too: it is out
    of the queue while its commit is tried, and uncounted every failed try would let a capacity more in (a disk
    full for a minute under a robot streaming)."""
    store = CaseStore(tmp_path / "cases.db")
    other = sqlite3.connect(tmp_path / "cases.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # every commit fails (as on a full disk), and the group is tried again
    writer = CaseWriter(store, lambda: None, capacity=100)
    records, submitted, most = iter(sampled_records(3000)), 0, 0
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # as the node takes parts: only while the writer is not full
        if not writer.full:
            writer.submit(next(records))
            submitted += 1
        most = max(most, writer.state().queued)
        time.sleep(0.0002)
    assert "locked" in writer.state().problem
    assert (submitted, most) == (100, 100)
    other.execute("ROLLBACK")
    other.close()
    assert writer.close() == 0 and store.count() == 100
    store.close()
