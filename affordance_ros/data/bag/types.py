"""What a bag of the affordance topics is made of: topics, message types, storage files, times.

The message types come from the package's .msg files, registered in a ``rosbags`` typestore,
so that bags are read and written without ROS.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from ...core import GROUPS
from ...share import PACKAGE, msg_directory
from ..trial import TOPICS, stamp_seconds

MSG_TYPES = {"action": f"{PACKAGE}/msg/Action", "object": f"{PACKAGE}/msg/Features",
             "effect": f"{PACKAGE}/msg/Features"}
STORAGES = ("sqlite3", "mcap")
STORAGE_SUFFIXES = {".db3": "sqlite3", ".mcap": "mcap"}




class BagError(Exception):
    """A bag that cannot be read or written at all; the message says why and what to do."""



@functools.cache
def typestore():
    """ROS 2 kilted's standard types plus this package's messages (from its .msg files)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # (rosbags: only once a bag is used)

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


def looks_like_bag(path: str | Path) -> bool:
    """A rosbag2 directory (metadata.yaml or storage files) or a .db3/.mcap storage file."""
    path = Path(path)
    if path.is_dir():
        return (path / "metadata.yaml").is_file() or bool(storage_files(path))
    return path.suffix.lower() in STORAGE_SUFFIXES


def storage_of_directory(path: Path) -> str:
    files = storage_files(path)
    return STORAGE_SUFFIXES[files[0].suffix.lower()] if files else ""


def storage_files(directory: Path) -> list[Path]:
    """The .db3/.mcap files of a bag directory in recording order (name_0, name_1, ..., name_10)."""
    def order(path: Path):
        match = re.search(r"_(\d+)$", path.stem)
        return (path.stem[:match.start()] if match else path.stem, int(match.group(1)) if match else -1)
    return sorted((p for p in directory.iterdir() if p.suffix.lower() in STORAGE_SUFFIXES and p.is_file()),
                  key=order)


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
        read = ", ".join(f"{self.messages[k]} on {self.topics[k]}" for k in GROUPS if k in self.topics)
        text = f"read {sum(self.messages.values())} messages from {self.path} ({self.storage}): {read or 'none'}"
        if self.other_topics:
            text += (f"; ignored {sum(self.other_topics.values())} messages on other topics "
                     f"({', '.join(sorted(self.other_topics))})")
        return text
