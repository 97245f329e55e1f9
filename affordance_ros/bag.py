"""rosbag2 bags of the affordance topics, read and written with the pure-Python ``rosbags`` library.

A bag holds the robot's trials as recorded on the wire: ``affordance_ros/msg/Action`` on
``<namespace>/action`` and ``affordance_ros/msg/Features`` on ``<namespace>/object_features``
and ``<namespace>/effects``, each message with the time it was received (its *log time*).
Both rosbag2 storage formats are read and written: sqlite3 (``.db3``) and mcap (``.mcap``).

``BagReader`` yields the affordance messages in log-time order and says what it could not
use: other topics, topics of another message type or definition, messages that do not
deserialize, a damaged or truncated storage file (the messages before the damage are kept),
a bag directory without its metadata.yaml (an interrupted recording: the storage files are
read directly). ``BagWriter`` writes a new bag. Nothing here imports ROS: the message types
come from the package's .msg files, registered in a ``rosbags`` typestore.
"""

from __future__ import annotations

import functools
import math
import re
import shutil
import sqlite3
import struct
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

import numpy as np
from rosbags.interfaces import Connection, ConnectionExtRosbag2, MessageDefinition, MessageDefinitionFormat
from rosbags.rosbag2 import Reader, ReaderError, StoragePlugin, Writer, WriterError
from rosbags.rosbag2.storage_mcap import McapReader, McapWriter
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from .pairing import KINDS
from .share import PACKAGE, msg_directory

# Topic of each part, relative to the namespace (the learner node subscribes to these names).
TOPICS = {"action": "action", "object": "object_features", "effect": "effects"}
MSG_TYPES = {"action": f"{PACKAGE}/msg/Action", "object": f"{PACKAGE}/msg/Features",
             "effect": f"{PACKAGE}/msg/Features"}
STORAGES = ("sqlite3", "mcap")
_STORAGE_SUFFIXES = {".db3": "sqlite3", ".mcap": "mcap"}
_MCAP_MAGIC = b"\x89MCAP0\r\n"


class BagError(Exception):
    """A bag that cannot be read or written at all; the message says why and what to do."""


# ------------------------------------------------------------------ types
@functools.cache
def typestore():
    """ROS 2 kilted's standard types plus this package's messages (from its .msg files)."""
    store = get_typestore(Stores.ROS2_KILTED)
    directory = msg_directory()
    types = {}
    for path in sorted(directory.glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(encoding="utf-8"), f"{PACKAGE}/msg/{path.stem}"))
    store.register(types)
    return store


def topic_names(namespace: str = "/") -> dict[str, str]:
    """Fully qualified topic of each part under ``namespace`` ('/' or '/robot1')."""
    namespace = "/" + namespace.strip("/")
    return {kind: (namespace.rstrip("/") + "/" + name) for kind, name in TOPICS.items()}


def stamp_seconds(stamp) -> float:
    """A builtin_interfaces/Time in seconds, computed as the learner node computes it."""
    return stamp.sec + stamp.nanosec * 1e-9


def action_message(trial_id: str, stamp: float, action: str):
    """An Action message (rosbags type) stamped ``stamp`` seconds."""
    types = typestore().types
    return types[MSG_TYPES["action"]](header=_header(stamp), trial_id=trial_id, action=action)


def features_message(trial_id: str, stamp: float, readings: Mapping[str, float]):
    """A Features message (rosbags type): sensor names and their readings, stamped ``stamp`` seconds."""
    types = typestore().types
    return types[MSG_TYPES["object"]](header=_header(stamp), trial_id=trial_id, names=list(readings),
                                      values=np.asarray(list(readings.values()), dtype=np.float64))


def _header(stamp: float):
    types = typestore().types
    sec, nanosec = split_nanoseconds(to_nanoseconds(stamp))
    return types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                        frame_id="")


def split_nanoseconds(ns: int) -> tuple[int, int]:
    """(sec, nanosec) of a time in nanoseconds."""
    return ns // 1_000_000_000, ns % 1_000_000_000


def to_nanoseconds(seconds: float) -> int:
    """Seconds (a float) as integer nanoseconds, without the rounding error of ``seconds * 1e9``
    (at today's epoch times a float holds ~0.24 us: the product would be off by up to ~100 ns)."""
    whole = math.floor(seconds)
    return int(whole) * 1_000_000_000 + round((seconds - whole) * 1e9)


def to_seconds(ns: int) -> float:
    """Integer nanoseconds as seconds, computed as ``stamp_seconds`` computes a stamp."""
    sec, nanosec = split_nanoseconds(ns)
    return sec + nanosec * 1e-9


# ------------------------------------------------------------------ reading
def looks_like_bag(path: str | Path) -> bool:
    """A rosbag2 directory (metadata.yaml or storage files) or a .db3/.mcap storage file."""
    path = Path(path)
    if path.is_dir():
        return (path / "metadata.yaml").is_file() or bool(_storage_files(path))
    return path.suffix.lower() in _STORAGE_SUFFIXES


@dataclass(frozen=True)
class BagMessage:
    """One affordance message of a bag: which part, its topic, when it was recorded (ns),
    the deserialized message (fields as in the .msg) and its serialized bytes as recorded."""

    kind: str
    topic: str
    log_time: int
    msg: object
    raw: bytes

    @property
    def trial_id(self) -> str:
        return self.msg.trial_id

    @property
    def stamp(self) -> float:
        return stamp_seconds(self.msg.header.stamp)


@dataclass
class BagReadReport:
    """What a read found: the topics read, messages per part, what was skipped and why."""

    path: Path
    storage: str = ""
    topics: dict[str, str] = field(default_factory=dict)          # kind -> topic read
    messages: Counter = field(default_factory=Counter)             # kind -> messages read
    other_topics: dict[str, int] = field(default_factory=dict)     # topic -> messages not read
    undecodable: Counter = field(default_factory=Counter)          # topic -> messages that did not deserialize
    warnings: list[str] = field(default_factory=list)
    complete: bool = True                                          # False: the read stopped at damage

    def summary(self) -> str:
        read = ", ".join(f"{self.messages[k]} on {self.topics[k]}" for k in KINDS if k in self.topics)
        text = f"read {sum(self.messages.values())} messages from {self.path} ({self.storage}): {read or 'none'}"
        if self.other_topics:
            text += (f"; ignored {sum(self.other_topics.values())} messages on other topics "
                     f"({', '.join(sorted(self.other_topics))})")
        return text


class BagReader:
    """The affordance messages of a bag in log-time order; ``report`` says what was read and skipped.

    ``namespace``: the bag's topics are ``<namespace>/action``, ``<namespace>/object_features``
    and ``<namespace>/effects``. ``progress(done, total)`` is called as messages are read.
    Raises BagError when the bag cannot be opened or holds none of the affordance topics.
    """

    def __init__(self, path: str | Path, namespace: str = "/",
                 progress: Callable[[int, int | None], None] | None = None):
        self.path = Path(path)
        self.topics = topic_names(namespace)
        self.progress = progress
        self.report = BagReadReport(self.path)
        self._sources = self._open_sources()
        try:
            self._selected = [self._select(source) for source in self._sources]
            if not any(self._selected):
                raise BagError(self._no_topics_message())
        except BaseException:
            self.close()
            raise
        self.total = sum(c.msgcount for selected in self._selected for c, _ in selected.values())

    # -------------------------------------------------------------- public
    def __iter__(self) -> Iterator[BagMessage]:
        store = typestore()
        done = 0
        for source, selected in zip(self._sources, self._selected):
            if not selected:
                continue
            stream = source.messages([c for c, _ in selected.values()])
            while True:
                try:
                    connection, log_time, raw = next(stream)
                except StopIteration:
                    break
                except Exception as exc:  # damaged storage: keep what was read, say where it stopped
                    self.report.complete = False
                    self.report.warnings.append(
                        f"{self.path} is damaged or cut off after {done} affordance messages "
                        f"({type(exc).__name__}: {exc}); kept the messages read before the damage")
                    return
                kind = selected[connection.id][1]
                done += 1
                if self.progress is not None:
                    self.progress(done, self.total)
                try:
                    msg = store.deserialize_cdr(raw, connection.msgtype)
                except Exception as exc:  # bytes that are not this message type: skip, count, tell
                    if not self.report.undecodable[connection.topic]:
                        self.report.warnings.append(
                            f"{connection.topic}: a message at log time {log_time} ns does not deserialize as "
                            f"{connection.msgtype} ({type(exc).__name__}: {exc}); skipped such messages")
                    self.report.undecodable[connection.topic] += 1
                    continue
                self.report.messages[kind] += 1
                yield BagMessage(kind, connection.topic, log_time, msg, bytes(raw))

    def read(self) -> list[BagMessage]:
        """All affordance messages, then closes the bag."""
        try:
            return list(self)
        finally:
            self.close()

    def close(self) -> None:
        for source in getattr(self, "_sources", ()):
            try:
                source.close()
            except Exception:
                pass
        self._sources = []

    def __enter__(self) -> "BagReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------- opening
    def _open_sources(self) -> list:
        path = self.path
        if not path.exists():
            raise BagError(f"bag '{path}' does not exist")
        if path.is_dir() and (path / "metadata.yaml").is_file():
            reader = Reader(path)
            try:
                reader.open()
            except (ReaderError, OSError, ValueError, KeyError) as exc:
                files = _storage_files(path)
                if not files:
                    raise BagError(f"cannot read bag '{path}': {exc}") from None
                self.report.warnings.append(
                    f"{path}: cannot use the bag as a whole ({exc}); reading its storage files "
                    f"{[f.name for f in files]} directly")
                return self._open_files(files)
            self.report.storage = _storage_of_directory(path) or "rosbag2"
            return [reader]
        if path.is_dir():
            files = _storage_files(path)
            if not files:
                raise BagError(f"'{path}' is not a rosbag2 bag: it has no metadata.yaml and no .db3 or .mcap files")
            self.report.warnings.append(
                f"{path}: no metadata.yaml (was the recording interrupted?); reading its storage files "
                f"{[f.name for f in files]} directly")
            return self._open_files(files)
        if path.suffix.lower() not in _STORAGE_SUFFIXES:
            raise BagError(f"'{path}' is not a rosbag2 bag: expected a bag directory, a .db3 or a .mcap file")
        return self._open_files([path])

    def _open_files(self, files: list[Path]) -> list:
        sources = []
        for path in files:
            storage = _STORAGE_SUFFIXES[path.suffix.lower()]
            self.report.storage = storage
            try:
                source = _open_storage_file(path, storage, self.report.warnings)
                sources.append(source)
                if getattr(source, "salvaged", False):
                    self.report.complete = False
            except BagError:
                for source in sources:
                    source.close()
                raise
        return sources

    # -------------------------------------------------------------- topics
    def _select(self, source) -> dict:
        """{connection id: (connection, kind)} of the connections to read; notes the ones left out."""
        wanted = {topic: kind for kind, topic in self.topics.items()}
        ours = {kind: typestore().hash_rihs01(msgtype) for kind, msgtype in MSG_TYPES.items()}
        selected = {}
        for connection in source.connections:
            kind = wanted.get(connection.topic)
            if kind is None:
                self.report.other_topics[connection.topic] = (
                    self.report.other_topics.get(connection.topic, 0) + connection.msgcount)
                continue
            if connection.msgtype != MSG_TYPES[kind]:
                self.report.warnings.append(
                    f"{connection.topic} holds {connection.msgtype} messages, expected {MSG_TYPES[kind]}: "
                    f"skipped its {connection.msgcount} messages")
                continue
            if connection.digest and connection.digest != ours[kind]:
                self.report.warnings.append(
                    f"{connection.topic} was recorded with another definition of {connection.msgtype} "
                    f"(type hash {connection.digest}, this package's is {ours[kind]}): "
                    f"skipped its {connection.msgcount} messages")
                continue
            selected[connection.id] = (connection, kind)
            self.report.topics[kind] = connection.topic
        return selected

    def _no_topics_message(self) -> str:
        expected = ", ".join(f"{topic} ({MSG_TYPES[kind]})" for kind, topic in self.topics.items())
        found = ", ".join(f"{t} ({n} messages)" for t, n in sorted(self.report.other_topics.items())) or "no topics"
        text = f"bag '{self.path}' holds none of the affordance topics {expected}; it has {found}"
        if self.report.warnings:
            text += "; " + "; ".join(self.report.warnings)
        names = set(TOPICS.values())
        namespaces = sorted({t.rsplit("/", 1)[0] for t in self.report.other_topics if t.rsplit("/", 1)[-1] in names})
        if namespaces:
            text += f". Recorded in another namespace? try --namespace {namespaces[0] or '/'}"
        return text


def _storage_of_directory(path: Path) -> str:
    files = _storage_files(path)
    return _STORAGE_SUFFIXES[files[0].suffix.lower()] if files else ""


def _storage_files(directory: Path) -> list[Path]:
    """The .db3/.mcap files of a bag directory in recording order (name_0, name_1, ..., name_10)."""
    def order(path: Path):
        match = re.search(r"_(\d+)$", path.stem)
        return (path.stem[:match.start()] if match else path.stem, int(match.group(1)) if match else -1)
    return sorted((p for p in directory.iterdir() if p.suffix.lower() in _STORAGE_SUFFIXES and p.is_file()),
                  key=order)


def _open_storage_file(path: Path, storage: str, warnings: list[str]):
    journals = [j for j in (path.with_name(path.name + "-journal"), path.with_name(path.name + "-wal")) if j.exists()]
    if storage == "sqlite3" and journals:
        # rosbags reads the file as it is ("immutable"): it would skip the journal's committed
        # pages (WAL) or see the uncommitted ones (rollback journal). SQLite itself sorts that out.
        reader = _DamagedSqlite3Reader(path, journals)
        try:
            reader.open()
        except (ReaderError, OSError, sqlite3.Error) as exc:
            reader.close()
            raise BagError(f"cannot read '{path}' with its journal {[j.name for j in journals]}: {exc}") from None
        warnings.append(f"{path} has an unfinished journal ({', '.join(j.name for j in journals)}): "
                        "was the recording cut off? reading what it had committed")
        reader.salvaged = True
        return reader
    reader = Reader(path)
    try:
        reader.open()
        return reader
    except (ReaderError, OSError) as exc:
        error = exc
    # A damaged or cut-off file: read what can still be read.
    salvage = _UnfinishedMcapReader(path) if storage == "mcap" else _DamagedSqlite3Reader(path)
    try:
        salvage.open()
    except (ReaderError, OSError, struct.error, sqlite3.Error) as exc:
        try:
            salvage.close()
        except (AssertionError, sqlite3.Error, OSError):  # McapReader closes itself when open fails
            pass
        raise BagError(f"cannot read '{path}': {error}; nor what is left of it: {exc}") from None
    warnings.append(f"{path} cannot be opened as a whole ({error}): damaged or cut off? "
                    "reading what is left of it")
    salvage.salvaged = True
    return salvage


class _UnfinishedMcapReader(McapReader):
    """Reads an MCAP file whose end is missing: the records up to the last complete one.

    ``rosbags``' McapReader needs the footer; this one finds where the complete records end
    and lets McapReader's own linear scan (``meta_scan``/``messages_scan``) read up to there.
    Relies on McapReader internals of rosbags 0.11 (pinned in requirements-ros.txt; test_bag.py
    covers it).
    """

    def _open(self) -> None:
        bio = self.bio
        if bio.read(8) != _MCAP_MAGIC:
            raise ReaderError("File magic is invalid.")
        opcode = bio.read(1)
        if opcode != b"\x01":
            raise ReaderError("no MCAP header record")
        (length,) = struct.unpack("<Q", bio.read(8))
        bio.seek(length, 1)
        self.data_start = bio.tell()
        self.data_end = _complete_records_end(bio, self.data_start)
        self.meta_scan()
        stats = self.statistics
        self.connections = [c._replace(msgcount=stats.channel_message_counts.get(c.id, 0)) for c in self.connections]
        count = stats.message_count
        self.metadata = self.metadata._replace(
            duration=stats.end_time - stats.start_time + 1 if count else 0,
            start_time=stats.start_time if count else 2**63 - 1,
            end_time=stats.end_time + 1 if count else 0,
            message_count=count)


class _DamagedSqlite3Reader:
    """Reads a damaged, cut-off or unfinished .db3 file: its messages in recording order up to the damage.

    Works on a copy. With the file's journal (-journal or -wal, left by a recording that was
    killed), SQLite opens the copy normally and rolls the journal back (or replays the WAL):
    what was committed is read. Without one, the copy is cut to whole pages and the page count
    in its header set to match, so that it opens where the original is "malformed"; the
    messages are then read by id until SQLite meets the damage.
    """

    def __init__(self, path: Path, journals: list[Path] = ()):
        self.path = path
        self.journals = list(journals)
        self.connections: list[Connection] = []
        self._directory: tempfile.TemporaryDirectory | None = None
        self._db: sqlite3.Connection | None = None

    def open(self) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix="affordance_ros-salvage-")
        copy = Path(self._directory.name) / self.path.name
        shutil.copyfile(self.path, copy)
        for journal in self.journals:
            shutil.copyfile(journal, copy.with_name(journal.name))
        if self.journals:
            self._db = sqlite3.connect(copy)
        else:
            _fit_sqlite_header(copy)
            self._db = sqlite3.connect(f"{copy.as_uri()}?immutable=1", uri=True)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(topics)")}
        digest = "type_description_hash" if "type_description_hash" in columns else "''"
        rows = self._db.execute(f"SELECT id, name, type, serialization_format, {digest} FROM topics").fetchall()
        if not rows:
            raise ReaderError("no topics table or no topics: not a rosbag2 sqlite3 file")
        try:
            counts = dict(self._db.execute("SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id"))
        except sqlite3.DatabaseError:
            counts = {}
        self.connections = [
            Connection(cid, topic, msgtype, MessageDefinition(MessageDefinitionFormat.NONE, ""), digest or "",
                       counts.get(cid, 0), ConnectionExtRosbag2(serialization, []), self)
            for cid, topic, msgtype, serialization, digest in rows]

    def messages(self, connections):
        by_id = {c.id: c for c in connections}
        for topic_id, log_time, data in self._db.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY id"):
            if topic_id in by_id:
                yield by_id[topic_id], log_time, data

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._directory is not None:
            self._directory.cleanup()
            self._directory = None


def _fit_sqlite_header(path: Path) -> None:
    """Cut an SQLite file to whole pages and make the page count in its header say so."""
    with path.open("r+b") as f:
        header = f.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise ReaderError("not an SQLite database")
        (page_size,) = struct.unpack(">H", header[16:18])
        page_size = 65536 if page_size == 1 else page_size
        if page_size < 512 or page_size & (page_size - 1):
            raise ReaderError(f"invalid SQLite page size {page_size}")
        pages = f.seek(0, 2) // page_size
        f.truncate(pages * page_size)
        f.seek(28)
        f.write(struct.pack(">I", pages))


def _complete_records_end(bio, start: int) -> int:
    """Offset after the last complete MCAP record of the data section (op, uint64 length, body)."""
    size = bio.seek(0, 2)
    position = start
    while position + 9 <= size:
        bio.seek(position)
        opcode = bio.read(1)[0]
        if opcode in (0x0F, 0x02):  # data end, footer
            break
        (length,) = struct.unpack("<Q", bio.read(8))
        if position + 9 + length > size:
            break
        position += 9 + length
    return position


# ------------------------------------------------------------------ writing
class BagWriter:
    """A new bag of the affordance topics (the path must not exist yet).

    ``write(kind, log_time_ns, msg)`` takes a rosbags message (``action_message``,
    ``features_message``); ``write_raw`` takes serialized CDR bytes as received.
    ``topics``: kind -> topic name (default: ``topic_names('/')``). ``flush()`` commits what was
    written so far, so that a recording cut off later keeps it.
    Use as a context manager, or call ``close()`` (``abort()`` on failure).
    """

    def __init__(self, path: str | Path, storage: str = "sqlite3", topics: Mapping[str, str] | None = None):
        if storage not in STORAGES:
            raise BagError(f"storage '{storage}' is not one of {list(STORAGES)}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"'{self.path}' exists already; a bag is written to a new directory")
        self.storage = storage
        self.topics = dict(topics) if topics is not None else topic_names("/")
        self.counts = Counter()
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=Writer.VERSION_LATEST, storage_plugin=plugin)
        try:
            self._writer.open()
            store = typestore()
            connections = {}
            for kind in KINDS:
                connections[kind] = self._writer.add_connection(self.topics[kind], MSG_TYPES[kind], typestore=store)
        except (WriterError, OSError) as exc:
            self._writer.abort()
            raise BagError(f"cannot write bag '{self.path}': {exc}") from None
        self._connections = connections

    def write(self, kind: str, log_time: int, msg) -> None:
        self.write_raw(kind, log_time, bytes(typestore().serialize_cdr(msg, MSG_TYPES[kind])))

    def write_raw(self, kind: str, log_time: int, raw: bytes) -> None:
        self._writer.write(self._connections[kind], int(log_time), raw)
        self.counts[kind] += 1

    def flush(self) -> None:
        """Put what was written so far into the storage file (rosbags itself does so only on close)."""
        storage = self._writer.storage
        if isinstance(storage, Sqlite3Writer):
            storage.conn.commit()
        elif isinstance(storage, McapWriter):
            if storage.chunk.bio.tell():
                storage.close_chunk()
            storage.bio.flush()

    def close(self) -> None:
        try:
            self._writer.close()
        except (WriterError, OSError) as exc:
            raise BagError(f"cannot finish bag '{self.path}': {exc}") from None

    def abort(self) -> None:
        self._writer.abort()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
