"""Writing a new bag of the affordance topics (sqlite3 or mcap)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Mapping

from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer

from ...core import GROUPS
from .types import MSG_TYPES, STORAGES, BagError, topic_names, typestore

# The bytes of messages after which an mcap chunk is closed. A cut-off .mcap keeps only its complete chunks, and
# rosbags closes one at 1 MiB only: a bag of a few thousand trials would be one chunk, all lost with its end.
MCAP_CHUNK_BYTES = 16 * 1024


class BagWriter:
    """A new bag of the affordance topics (the path must not exist yet).

    ``write(kind, log_time_ns, msg)`` takes a rosbags message (``action_message``,
    ``features_message``); ``write_raw`` takes serialized CDR bytes as received.
    ``topics``: kind -> topic name (default: ``topic_names('/')``). ``flush()`` commits what was
    written so far, so that a recording cut off later keeps it; an mcap bag is written in chunks of
    about ``MCAP_CHUNK_BYTES``, so that a cut-off copy keeps the chunks before the cut.
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
            for kind in GROUPS:
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
        storage = self._writer.storage
        if isinstance(storage, McapWriter) and storage.chunk.bio.tell() >= MCAP_CHUNK_BYTES:
            storage.close_chunk()

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
