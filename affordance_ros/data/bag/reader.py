"""Reading bags: the affordance messages in log-time order, and a report of what was skipped.

Skipped and reported: other topics, topics of another message type or definition, messages
that do not deserialize, a damaged or truncated storage file (the messages before the damage
are kept; see ``salvage``), a bag directory without its metadata.yaml (an interrupted
recording: the storage files are read directly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from rosbags.rosbag2 import Reader, ReaderError

from .salvage import open_storage_file
from .types import (
    MSG_TYPES,
    STORAGE_SUFFIXES,
    TOPICS,
    BagError,
    BagMessage,
    BagReadReport,
    storage_files,
    storage_of_directory,
    topic_names,
    typestore,
)


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
                files = storage_files(path)
                if not files:
                    raise BagError(f"cannot read bag '{path}': {exc}") from None
                self.report.warnings.append(
                    f"{path}: cannot use the bag as a whole ({exc}); reading its storage files "
                    f"{[f.name for f in files]} directly")
                return self._open_files(files)
            self.report.storage = storage_of_directory(path) or "rosbag2"
            return [reader]
        if path.is_dir():
            files = storage_files(path)
            if not files:
                raise BagError(f"'{path}' is not a rosbag2 bag: it has no metadata.yaml and no .db3 or .mcap files")
            self.report.warnings.append(
                f"{path}: no metadata.yaml (was the recording interrupted?); reading its storage files "
                f"{[f.name for f in files]} directly")
            return self._open_files(files)
        if path.suffix.lower() not in STORAGE_SUFFIXES:
            raise BagError(f"'{path}' is not a rosbag2 bag: expected a bag directory, a .db3 or a .mcap file")
        return self._open_files([path])

    def _open_files(self, files: list[Path]) -> list:
        sources = []
        for path in files:
            storage = STORAGE_SUFFIXES[path.suffix.lower()]
            self.report.storage = storage
            try:
                source = open_storage_file(path, storage, self.report.warnings)
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
