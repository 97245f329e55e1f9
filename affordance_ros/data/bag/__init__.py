"""rosbag2 bags of the affordance topics, read and written with the pure-Python ``rosbags`` library.

A bag holds the robot's trials as recorded on the wire: ``affordance_ros/msg/Action`` on
``<namespace>/action`` and ``affordance_ros/msg/Features`` on ``<namespace>/object_features``
and ``<namespace>/effects``, each message with the time it was received (its *log time*).
Both rosbag2 storage formats are read and written: sqlite3 (``.db3``) and mcap (``.mcap``).

- ``types``: topics, message types (from the package's .msg files), storage files, times;
- ``reader``: ``BagReader``, the affordance messages in log-time order, and what it skipped;
- ``salvage``: reading what is left of a damaged or cut-off storage file;
- ``writer``: ``BagWriter``, a new bag.

``types`` imports ``rosbags`` (the ``bags`` extra) only when a message is made; ``BagReader`` and
``BagWriter`` load their modules (which import it) on first use.
"""

import importlib

from .types import (
                    MSG_TYPES,
                    STORAGES,
                    TOPICS,
                    BagError,
                    BagMessage,
                    BagReadReport,
                    action_message,
                    features_message,
                    looks_like_bag,
                    split_nanoseconds,
                    to_nanoseconds,
                    to_seconds,
                    topic_names,
                    typestore,
)

_LOADED_ON_USE = {"BagReader": "reader", "BagWriter": "writer"}

__all__ = ["BagError", "BagMessage", "BagReadReport", "BagReader", "BagWriter", "MSG_TYPES", "STORAGES", "TOPICS",
           "action_message", "features_message", "looks_like_bag", "split_nanoseconds", "to_nanoseconds",
           "to_seconds", "topic_names", "typestore"]


def __getattr__(name):
    module = _LOADED_ON_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
