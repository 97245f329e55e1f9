"""Reading what is left of a damaged, cut-off or unfinished storage file.

A recording that was killed leaves a .db3 with its journal, or an .mcap without its footer;
a damaged disk leaves pages that do not read. ``open_storage_file`` opens a storage file and
falls back to the readers here, which read the messages up to the damage.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
import tempfile
from pathlib import Path

from rosbags.interfaces import Connection, ConnectionExtRosbag2, MessageDefinition, MessageDefinitionFormat
from rosbags.rosbag2 import Reader, ReaderError
from rosbags.rosbag2.storage_mcap import McapReader

from .types import BagError

_MCAP_MAGIC = b"\x89MCAP0\r\n"


def open_storage_file(path: Path, storage: str, warnings: list[str]):
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
