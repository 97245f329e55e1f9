"""Bags -> cases as the node builds them (both storage formats), import/export, and bad bags. No ROS graph."""

import shutil
import subprocess
from dataclasses import replace

import pytest
from conftest import CLI
from conftest import sampled_records as stored_records
from rosbags.rosbag2 import StoragePlugin, Writer

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.bag import (
    BagError,
    BagReader,
    BagWriter,
    action_message,
    features_message,
    to_nanoseconds,
    typestore,
)
from affordance_ros.data.offline import PairingOptions, read_bag, write_bag
from affordance_ros.data.storage import CaseStore
from affordance_ros.data.trial import Trial
from affordance_ros.share import default_config_path

CONFIG = AffordanceNetwork.load(default_config_path())
T0 = 1_700_000_000.0
OBJECT = {"color": 5.1, "shape": 0.2, "size": 9.7}
EFFECT = {"obj_vel": 10.3, "obj_hand_vel": 4.9, "hand_vel": 0.1, "contact": 5.2}


def run(*args):
    assert CLI, "affordance-ros is not installed (conftest.CLI: in the bin/ of the install under test, or on PATH)"
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=60)


def part(log_time, kind, trial_id, stamp, payload):
    return (to_nanoseconds(log_time), kind, trial_id, stamp, payload)


def write_parts(path, parts, storage="sqlite3", namespace="/", flush_every=0):
    """A bag of the given parts: (log time ns, kind, trial_id, stamp s, action label or readings)."""
    from affordance_ros.data.bag import topic_names
    with BagWriter(path, storage, topic_names(namespace)) as writer:
        for n, (log_time, kind, trial_id, stamp, payload) in enumerate(parts, start=1):
            msg = (action_message(trial_id, stamp, payload) if kind == "action"
                   else features_message(trial_id, stamp, payload))
            writer.write(kind, log_time, msg)
            if flush_every and n % flush_every == 0:
                writer.flush()
    return path


def readings(k):
    return ({s: x + 0.01 * k for s, x in OBJECT.items()}, {s: x - 0.01 * k for s, x in EFFECT.items()})


def known_trials():
    """Parts of trials the node pairs by id and by stamp, in mixed order, plus trials it cannot complete;
    and the records the node stores for them."""
    parts, expected = [], []
    for k in range(10):  # by trial_id; the three parts in varying order, 0.5 s apart
        t, obj, eff = T0 + 0.5 * k, *readings(k)
        order = [("action", "tap" if k % 2 else "grasp"), ("object", obj), ("effect", eff)]
        order = order[k % 3:] + order[:k % 3]
        for j, (kind, payload) in enumerate(order):
            parts.append(part(t + 0.01 * j, kind, f"a{k}", t, payload))
        expected.append(Trial(f"a{k}", order[[kind for kind, _ in order].index("action")][1], obj, eff,
                              stamp=t, received=t + 0.02).to_record("Action"))
    parts.append(part(T0 + 1.7, "action", "a3", T0 + 1.5, "touch"))  # a part sent again: ignored
    for k in range(5):  # without trial_id: paired by stamp (jittered within slop), interleaved
        t, obj, eff = T0 + 10 + 0.5 * k, *readings(20 + k)
        parts += [part(t, "effect", "", t + 0.02, eff), part(t + 0.001, "action", "", t, "touch"),
                  part(t + 0.3, "object", "", t - 0.03, obj)]
        expected.append(Trial(f"stamp-{t:.6f}", "touch", obj, eff, stamp=t,
                              received=t + 0.3).to_record("Action"))
    obj, eff = readings(99)
    parts += [part(T0 + 20, "action", "late", T0 + 20, "tap"), part(T0 + 20, "object", "late", T0 + 20, obj),
              part(T0 + 27, "effect", "late", T0 + 20, eff),  # after 7 s of silence: the trial was dropped at 5 s
              part(T0 + 28, "action", "kick", T0 + 28, "kick"),  # unknown action: rejected
              part(T0 + 28, "object", "kick", T0 + 28, obj), part(T0 + 28, "effect", "kick", T0 + 28, eff),
              part(T0 + 29, "action", "cut", T0 + 29, "grasp")]  # the bag ends before its other parts
    parts.sort(key=lambda p: p[0])
    return parts, expected


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_known_trials_give_exactly_their_cases(tmp_path, storage):
    parts, expected = known_trials()
    bag = write_parts(tmp_path / "bag", parts, storage)
    cases = read_bag(bag, CONFIG)
    assert cases.records == expected
    assert cases.warnings == []
    report = "\n".join(cases.report)
    assert f"read {len(parts)} messages" in report and f"({storage})" in report
    assert "built 15 cases (10 paired by trial_id, 5 by stamp)" in report
    assert "4 incomplete trials" in report
    # 'late': 7 s without any message before its effect (the node's fallback on its clock drops it), then
    # its effect alone, dropped once the stamps of 'kick' are 8 s later (data time)
    assert "1 with no 'effect' part and no message at all for trial_timeout 5 s ('late')" in report
    assert ("1 with no 'action' or 'object' part while the header stamps moved on by trial_timeout 5 s ('late')"
            in report)
    assert "no 'action' part before the bag ends ('kick')" in report
    assert "no 'object' or 'effect' part before the bag ends ('cut')" in report
    assert "1 rejected parts: 'action' part of trial 'kick': unknown action 'kick'" in report
    assert "1 duplicate parts ignored: 'action' part of trial 'a3'" in report


def test_a_longer_trial_timeout_keeps_the_late_trial(tmp_path):
    parts, expected = known_trials()
    cases = read_bag(write_parts(tmp_path / "bag", parts), CONFIG, PairingOptions(trial_timeout=10.0))
    late = [r for r in cases.records if r.trial_id == "late"]
    assert len(late) == 1 and late[0].received == pytest.approx(T0 + 27)
    assert len(cases.records) == len(expected) + 1


def test_the_storage_file_alone_and_a_bag_without_metadata_read_the_same(tmp_path):
    parts, expected = known_trials()
    bag = write_parts(tmp_path / "bag", parts, "mcap")
    assert read_bag(bag / "bag.mcap", CONFIG).records == expected
    (bag / "metadata.yaml").unlink()  # as after a recording that was killed
    cases = read_bag(bag, CONFIG)
    assert cases.records == expected
    assert any("no metadata.yaml" in w for w in cases.warnings)


def test_learn_from_bags_of_both_formats(tmp_path):
    records = sampled_records(300)
    for storage in ("sqlite3", "mcap"):
        write_bag(tmp_path / storage, records, storage)
        out = run("learn", "--cases", tmp_path / storage, "--config", default_config_path(),
                  "--out", tmp_path / f"{storage}.json", *(["--progress"] if storage == "mcap" else []))
        assert out.returncode == 0, out.stderr
        assert "read 900 messages" in out.stdout and "built 300 cases" in out.stdout
        assert "learned from 300 cases" in out.stdout
        # the progress bar only when asked for (stderr is not a terminal here)
        assert ("reading mcap [" in out.stderr and "100% 900/900" in out.stderr) == (storage == "mcap")
    assert (AffordanceNetwork.load(tmp_path / "sqlite3.json").to_dict()["variables"]
            == AffordanceNetwork.load(tmp_path / "mcap.json").to_dict()["variables"])


def test_a_bag_made_with_another_configuration_says_so_not_record_some_trials(tmp_path):
    write_bag(tmp_path / "bag", sampled_records(30), "sqlite3")
    out = run("learn", "--cases", tmp_path / "bag", "--config", "hands", "--out", tmp_path / "model.json")
    assert out.returncode == 2 and not (tmp_path / "model.json").exists()
    assert out.stderr.splitlines()[-1] == (
        f"affordance-ros learn: error: '{tmp_path / 'bag'}' gave no cases: none of its trials was usable (the lines "
        "above say why); is --config the configuration the robot's trials were made with?"), out.stderr
    assert "record some trials" not in out.stderr


def test_import_appends_without_duplicates_and_export_round_trips(tmp_path):
    records = sampled_records(40)
    db = tmp_path / "cases.db"
    with CaseStore(db) as store:  # already in the database: 10 of the bag's trials, and one of its own
        for record in records[:10]:
            store.add(record)
        own = Trial("own-1", "grasp", {"color": 1.0}, {"contact": 2.0}, stamp=5.0, received=6.0).to_record("Action")
        store.add(own)
    write_bag(tmp_path / "bag", records, "mcap")
    out = run("import", tmp_path / "bag", "--db", db)
    assert out.returncode == 0, out.stderr
    assert "added 30 cases" in out.stdout and "(10 were there already)" in out.stdout
    out = run("import", tmp_path / "bag", "--db", db)
    assert "added 0 cases" in out.stdout and "(40 were there already)" in out.stdout
    with CaseStore(db, read_only=True) as store:
        assert store.records() == [*records[:10], own, *records[10:]]

    # database -> bag -> new database: the same records; -> CSV -> database: the same but for stamps
    assert run("export", db, "--out", tmp_path / "copy", "--storage", "sqlite3").returncode == 0
    assert run("import", tmp_path / "copy", "--db", tmp_path / "copy.db").returncode == 0
    with CaseStore(tmp_path / "copy.db", read_only=True) as store:  # in the bag's order: by log time
        assert store.records() == sorted([own, *records], key=lambda r: r.received)
    out = run("export", db, "--out", tmp_path / "cases.csv")
    assert out.returncode == 0 and "wrote 41 cases" in out.stdout, out.stderr
    assert run("import", tmp_path / "cases.csv", "--db", tmp_path / "from_csv.db").returncode == 0
    with CaseStore(tmp_path / "from_csv.db", read_only=True) as store:
        strip = lambda r: replace(r, stamp=None, received=None)  # noqa: E731
        assert store.records() == [strip(r) for r in [*records[:10], own, *records[10:]]]
    # a CSV file made into a bag gets stamps, and comes back the same
    assert run("export", tmp_path / "cases.csv", "--out", tmp_path / "csv_bag", "--storage", "mcap").returncode == 0
    cases = read_bag(tmp_path / "csv_bag", CONFIG)
    assert [strip(r) for r in cases.records] == [strip(r) for r in [*records[:10], own, *records[10:]]]


def test_import_and_export_take_their_sources_as_cases_as_learn_does(tmp_path):
    """--cases as learn and evaluate take it (several for import, also after the command's other options); the
    sources without it (the positional form, kept as an alias) are the same command; none is one line saying what
    to give."""
    records = sampled_records(12)
    write_bag(tmp_path / "first", records[:6], "mcap")
    write_bag(tmp_path / "second", records[6:], "sqlite3")
    out = run("import", "--db", tmp_path / "cases.db", "--cases", tmp_path / "first", tmp_path / "second")
    assert out.returncode == 0 and "in all: added 12 cases" in out.stdout, out.stderr
    out = run("import", tmp_path / "first", "--db", tmp_path / "cases.db", "--cases", tmp_path / "second")
    assert out.returncode == 0 and "in all: added 0 cases" in out.stdout, out.stderr
    out = run("export", "--cases", tmp_path / "cases.db", "--out", tmp_path / "cases.csv")
    assert out.returncode == 0 and "wrote 12 cases" in out.stdout, out.stderr
    out = run("export", tmp_path / "cases.db", "--out", tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "cases.csv").read_text()
    for command, extra in (("import", ["--db", tmp_path / "none.db"]), ("export", ["--out", tmp_path / "no.csv"])):
        out = run(command, *extra)
        assert out.returncode == 2 and out.stderr.splitlines() == [
            f"affordance-ros {command}: error: give the cases to {command}: --cases SOURCE (a bag, a .csv file or "
            "the node's .db)"], out.stderr
    out = run("export", "--cases", tmp_path / "cases.db", tmp_path / "first", "--out", tmp_path / "two.csv")
    assert out.returncode == 2 and "export writes one source at a time, got 2" in out.stderr
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "no.csv").exists()


def test_export_refuses_to_overwrite_and_to_write_a_database(tmp_path):
    db = tmp_path / "cases.db"
    with CaseStore(db) as store:
        store.add(sampled_records(1)[0])
    (tmp_path / "there.csv").write_text("keep me")
    out = run("export", db, "--out", tmp_path / "there.csv")
    assert out.returncode == 2 and "exists already" in out.stderr
    assert (tmp_path / "there.csv").read_text() == "keep me"
    out = run("export", db, "--out", tmp_path / "other.db")
    assert out.returncode == 2 and "affordance-ros import" in out.stderr


def test_export_never_replaces_a_file_made_while_it_wrote_its_own(tmp_path, monkeypatch):
    """docs/bags.md: existing files are never overwritten. Another program makes the file between export's check
    and its rename (a large export takes seconds to write): export fails, the file stays, not replaced by
    os.replace."""
    import affordance_ros.core.model_file as network
    from affordance_ros.core import DataError
    from affordance_ros.data.offline import write_csv

    out, fsync = tmp_path / "out.csv", network.os.fsync

    def meanwhile(fd):
        fsync(fd)
        out.write_text("made meanwhile")
    monkeypatch.setattr(network.os, "fsync", meanwhile)
    with pytest.raises(DataError, match="exists already"):
        write_csv(out, sampled_records(3), CONFIG)
    assert out.read_text() == "made meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # the temporary file is gone

# ---------------------------------------------------------------- bad bags
@pytest.fixture
def database(tmp_path):
    """A case database holding cases already: none of them may be lost."""
    db = tmp_path / "cases.db"
    records = sampled_records(5, prefix="kept")
    with CaseStore(db) as store:
        for record in records:
            store.add(record)
    return db, records


def stored(db):
    with CaseStore(db, read_only=True) as store:
        return store.records()


def foreign_bag(path, topics, storage=StoragePlugin.SQLITE3):
    """A bag with other message types: {topic: (msgtype, [messages])}."""
    store = typestore()
    with Writer(path, version=9, storage_plugin=storage) as writer:
        for topic, (msgtype, messages) in topics.items():
            connection = writer.add_connection(topic, msgtype, typestore=store)
            for k, msg in enumerate(messages):
                writer.write(connection, to_nanoseconds(T0 + k), bytes(store.serialize_cdr(msg, msgtype)))
    return path


def string(text):
    return typestore().types["std_msgs/msg/String"](data=text)


def test_a_bag_without_the_topics_is_an_error_and_changes_nothing(tmp_path, database):
    db, before = database
    bag = foreign_bag(tmp_path / "chatter", {"/chatter": ("std_msgs/msg/String", [string("hi")] * 3)})
    out = run("import", bag, "--db", db)
    assert out.returncode == 2
    assert "holds none of the affordance topics /action" in out.stderr
    assert "/chatter (3 messages)" in out.stderr
    assert stored(db) == before
    out = run("learn", "--cases", bag, "--config", default_config_path(), "--out", tmp_path / "m.json")
    assert out.returncode == 2 and "none of the affordance topics" in out.stderr
    assert not (tmp_path / "m.json").exists()


def test_topics_in_another_namespace_are_found_with_namespace(tmp_path, database):
    db, before = database
    parts, expected = known_trials()
    bag = write_parts(tmp_path / "bag", parts, namespace="/robot1")
    out = run("import", bag, "--db", db)
    assert out.returncode == 2 and "try --namespace /robot1" in out.stderr
    out = run("import", bag, "--db", db, "--namespace", "/robot1")
    assert out.returncode == 0, out.stderr
    assert stored(db) == before + expected


def test_other_topics_mixed_in_are_ignored(tmp_path):
    parts, expected = known_trials()
    bag = write_parts(tmp_path / "bag", parts)
    mixed = tmp_path / "mixed"
    store = typestore()
    with Writer(mixed, version=9) as writer:
        connections = {}
        for kind, topic, msgtype in (("action", "/action", "affordance_ros/msg/Action"),
                                     ("object", "/object_features", "affordance_ros/msg/Features"),
                                     ("effect", "/effects", "affordance_ros/msg/Features")):
            connections[kind] = writer.add_connection(topic, msgtype, typestore=store)
        chatter = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
        # the same topic name with another type, as a second connection: skipped with a warning
        action_as_string = writer.add_connection("/action", "std_msgs/msg/String", typestore=store)
        with BagReader(bag) as reader:
            for k, message in enumerate(reader):
                writer.write(connections[message.kind], message.log_time, message.raw)
                writer.write(chatter, message.log_time,
                             bytes(store.serialize_cdr(string(f"{k}"), "std_msgs/msg/String")))
        writer.write(action_as_string, to_nanoseconds(T0),
                     bytes(store.serialize_cdr(string("tap"), "std_msgs/msg/String")))
    cases = read_bag(mixed, CONFIG)
    assert cases.records == expected
    assert f"ignored {len(parts)} messages on other topics (/chatter)" in cases.report[0]
    assert cases.warnings == ["/action holds std_msgs/msg/String messages, expected affordance_ros/msg/Action: "
                              "skipped its 1 messages"]


def test_wrong_message_types_are_skipped_with_a_warning(tmp_path, database):
    db, before = database
    # /action carries strings: no trial can be complete
    bag = foreign_bag(tmp_path / "strings", {
        "/action": ("std_msgs/msg/String", [string("tap")]),
        "/object_features": ("affordance_ros/msg/Features", [features_message("t0", T0, OBJECT)]),
        "/effects": ("affordance_ros/msg/Features", [features_message("t0", T0, EFFECT)])})
    out = run("import", bag, "--db", db)
    assert out.returncode == 0, out.stderr
    assert "/action holds std_msgs/msg/String messages, expected affordance_ros/msg/Action" in out.stderr
    assert "no usable messages for the 'action' parts" in out.stderr
    assert "added 0 cases" in out.stdout
    assert stored(db) == before


def test_another_message_definition_and_undecodable_messages(tmp_path):
    parts, expected = known_trials()
    bag = tmp_path / "bag"
    store = typestore()
    with Writer(bag, version=9) as writer:
        action = writer.add_connection("/action", "affordance_ros/msg/Action", typestore=store)
        features = writer.add_connection("/object_features", "affordance_ros/msg/Features", typestore=store)
        # a Features of another definition (another type hash): skipped as a whole
        msgdef, _ = store.generate_msgdef("affordance_ros/msg/Features", ros_version=2)
        effects = writer.add_connection("/effects", "affordance_ros/msg/Features",
                                        msgdef=msgdef.replace("float64[] values", "float32[] values"),
                                        rihs01="RIHS01_" + "0" * 64)
        for log_time, kind, trial_id, stamp, payload in parts:
            if kind == "action":
                writer.write(action, log_time, bytes(store.serialize_cdr(
                    action_message(trial_id, stamp, payload), "affordance_ros/msg/Action")))
            else:
                writer.write(features if kind == "object" else effects, log_time, bytes(store.serialize_cdr(
                    features_message(trial_id, stamp, payload), "affordance_ros/msg/Features")))
        writer.write(action, to_nanoseconds(T0 + 0.001), b"\x00\x01\x00\x00\xff\xff")  # garbage: does not deserialize
    cases = read_bag(bag, CONFIG)
    assert cases.records == []
    assert any("/effects was recorded with another definition of affordance_ros/msg/Features" in w
               for w in cases.warnings)
    assert any("/action: a message at log time" in w and "does not deserialize" in w for w in cases.warnings)
    assert any("1 messages on /action did not deserialize" in w for w in cases.warnings)


@pytest.mark.parametrize("storage, suffix", [("sqlite3", "db3"), ("mcap", "mcap")])
def test_truncated_bags_keep_the_cases_before_the_damage(tmp_path, database, storage, suffix):
    db, before = database
    records = sampled_records(400)
    parts = []
    for r in records:
        parts += [part(r.received, "action", r.trial_id, r.stamp, r.action),
                  part(r.received, "object", r.trial_id, r.stamp, r.object_features),
                  part(r.received, "effect", r.trial_id, r.stamp, r.effects)]
    # flushed every 100 messages, as the recorder flushes every second
    bag = write_parts(tmp_path / "bag", parts, storage, flush_every=100)
    data = (bag / f"bag.{suffix}").read_bytes()
    cut = tmp_path / f"cut.{suffix}"
    cut.write_bytes(data[:len(data) * 6 // 10])

    cases = read_bag(cut, CONFIG)
    assert any("damaged or cut off" in w for w in cases.warnings)
    assert 100 <= len(cases.records) < 400
    assert cases.records == records[:len(cases.records)]  # the cases before the damage, exactly

    out = run("import", cut, "--db", db)
    assert out.returncode == 0, out.stderr
    assert "damaged or cut off" in out.stderr
    assert f"added {len(cases.records)} cases" in out.stdout
    assert stored(db) == before + cases.records


def test_an_exported_mcap_bag_cut_off_keeps_most_of_its_cases(tmp_path, database):
    db, before = database
    records = sampled_records(400)
    write_bag(tmp_path / "bag", records, "mcap")  # as `export --storage mcap` writes it: no flushes
    data = (tmp_path / "bag" / "bag.mcap").read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[:len(data) * 3 // 4])

    cases = read_bag(cut, CONFIG)
    assert any("damaged or cut off" in w for w in cases.warnings)
    assert 240 <= len(cases.records) < 400, len(cases.records)  # all but those of the last chunk before the cut
    assert cases.records == records[:len(cases.records)]
    out = run("import", cut, "--db", db)
    assert out.returncode == 0 and f"added {len(cases.records)} cases" in out.stdout, out.stderr
    assert "damaged or cut off" in out.stderr


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_recording_killed_while_writing_keeps_what_it_flushed(tmp_path, storage):
    records = sampled_records(60)
    writer = BagWriter(tmp_path / "bag", storage)
    for k, r in enumerate(records):
        for kind in ("action", "object", "effect"):
            payload = r.action if kind == "action" else r.part(kind)
            writer.write(kind, to_nanoseconds(r.received),
                         (action_message if kind == "action" else features_message)(r.trial_id, r.stamp, payload))
        if k == 29:
            writer.flush()  # as the recorder does every second
    killed = tmp_path / "killed"  # the files as a SIGKILL leaves them: no metadata.yaml, an open transaction
    killed.mkdir()
    for path in (tmp_path / "bag").iterdir():
        shutil.copyfile(path, killed / path.name)
    writer.abort()
    if storage == "sqlite3":
        assert (killed / "bag.db3-journal").is_file()
    cases = read_bag(killed, CONFIG)
    assert cases.records == records[:30]
    assert any("no metadata.yaml" in w for w in cases.warnings)
    assert any(("unfinished journal" if storage == "sqlite3" else "damaged or cut off") in w for w in cases.warnings)


def test_unreadable_files_are_errors(tmp_path, database):
    db, before = database
    (tmp_path / "junk.mcap").write_bytes(b"not an mcap file at all")
    (tmp_path / "junk.db3").write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)
    (tmp_path / "empty").mkdir()
    for path, message in ((tmp_path / "junk.mcap", "cannot read"), (tmp_path / "junk.db3", "cannot read"),
                          (tmp_path / "missing.mcap", "does not exist")):
        with pytest.raises(BagError, match=message):
            BagReader(path)
        out = run("import", path, "--db", db)
        assert out.returncode == 2 and "error" in out.stderr, out.stderr
    out = run("import", tmp_path / "empty", "--db", db)
    assert out.returncode == 2 and "cannot read cases from" in out.stderr
    assert stored(db) == before
    out = run("import", tmp_path / "junk.mcap", "--db", tmp_path / "junk.db3")
    assert out.returncode == 2


def test_a_folder_that_is_not_a_bag_says_what_a_bag_folder_has_and_it_lacks(tmp_path):
    lacks = "it has no metadata.yaml and no .db3 or .mcap storage file"
    empty, notes, bags, csvs = (tmp_path / name for name in ("empty", "notes", "bags", "csvs"))
    for folder in (empty, notes, bags, csvs):
        folder.mkdir()
    (notes / "readme.txt").write_text("trials of Monday\n")
    write_bag(bags / "run1", sampled_records(3), "sqlite3")
    for folder in (bags, csvs):
        (folder / "hands.csv").write_text("trial_id,Action\n")
    for folder, end in ((empty, "(it is empty)"), (notes, "(it holds readme.txt)"),
                        (csvs, f"(it holds a CSV file '{csvs / 'hands.csv'}': give that)"),
                        (bags, f"(it holds a CSV file '{bags / 'hands.csv'}' and a bag '{bags / 'run1'}': "
                               "give one of those)")):
        for args in (["learn", "--cases", folder, "--config", default_config_path(), "--out", tmp_path / "model.json"],
                     ["import", folder, "--db", tmp_path / "c.db"]):
            out = run(*args)
            assert out.returncode == 2, out.stderr
            assert out.stderr == (f"affordance-ros {args[0]}: error: cannot read cases from '{folder}': "
                                  f"the folder is not a rosbag2 bag: {lacks} {end}\n")
    assert not (tmp_path / "model.json").exists() and not (tmp_path / "c.db").exists()


def test_a_bags_metadata_given_as_the_cases_names_the_bag(tmp_path):
    """The error names the bag whose metadata.yaml was given, not only the kinds of source it expected."""
    write_bag(tmp_path / "run1", sampled_records(3), "sqlite3")
    out = run("learn", "--cases", tmp_path / "run1" / "metadata.yaml", "--config", default_config_path(),
              "--out", tmp_path / "model.json")
    assert out.returncode == 2 and not (tmp_path / "model.json").exists()
    assert out.stderr == (f"affordance-ros learn: error: cannot read cases from '{tmp_path / 'run1' / 'metadata.yaml'}'"
                          f": it is a bag's metadata; give the bag, its folder '{tmp_path / 'run1'}'\n")


def test_a_bag_is_not_taken_for_the_database(tmp_path):
    bag = tmp_path / "bag"
    write_bag(bag, sampled_records(3), "sqlite3")
    db3 = bag / "bag.db3"
    data = db3.read_bytes()
    out = run("import", bag, "--db", db3)
    assert out.returncode == 2 and "is a bag, not a case database" in out.stderr
    assert db3.read_bytes() == data


def test_a_bag_whose_writing_stops_half_way_leaves_nothing_behind(tmp_path, monkeypatch):
    from affordance_ros.data.bag import writer as bag_writer

    written, original = [], bag_writer.BagWriter.write

    def write_then_fail(self, *args):
        if len(written) == 40:
            raise KeyboardInterrupt  # as Ctrl-C would, half-way
        written.append(original(self, *args))

    monkeypatch.setattr(bag_writer.BagWriter, "write", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_bag(tmp_path / "bag", sampled_records(30), "mcap")
    assert len(written) == 40 and list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    write_bag(tmp_path / "bag", sampled_records(30), "mcap")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag"]
    assert len(read_bag(tmp_path / "bag", CONFIG, PairingOptions()).records) == 30


# ---------------------------------------------------------------- helpers
def sampled_records(n, seed=0, prefix="r"):
    """n trials from the montesano ground truth as the node stores them, 50 ms apart."""
    return stored_records(n, seed=seed, prefix=prefix, start=T0, spacing=0.05, delay=0.01)


@pytest.mark.ros  # (the bag player is a node: rclpy)
def test_ros_arguments_are_split_off():
    from affordance_ros.nodes.robot.bag_player import playback_offsets
    from affordance_ros.tools.ros_args import split_ros_args
    assert split_ros_args(["bag", "--rate", "2", "--ros-args", "-r", "a:=b", "--", "--clock"]) == (
        ["bag", "--rate", "2", "--clock"], ["--ros-args", "-r", "a:=b"])
    assert split_ros_args(["bag"]) == (["bag"], [])
    assert playback_offsets([5_000_000_000, 5_500_000_000, 7_000_000_000], rate=2.0) == [0.0, 0.25, 1.0]
