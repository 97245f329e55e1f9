"""The wire contract: what the learner, the robot and the planner agree on, and the one thing of ``nodes/`` they share.

The three sides (``learner/``, ``robot/``, ``planner/``) talk only over ROS; none imports another, and this module
imports none of them.

- **Topics.** A trial's three parts go on ``trial_topics(robot_name)`` (``action``, ``object_features``,
  ``effects``; under ``<robot_name>/`` for a robot with topics of its own: ``robot_name_problem`` says which names
  make topic names); the learner answers each trial on its ``~/stored`` (``STORED_TOPIC``; a robot's
  ``STATUS_TOPIC``), publishes its model on ``~/model`` (``MODEL_TOPIC``, ``MODEL_QOS``) and why it refused a learn
  on ``~/learn_refused`` (``REFUSED_TOPIC``, ``REFUSED_QOS``).
- **QoS.** The trial topics and their answers: ``trial_qos``. Reliable, and by default KEEP_ALL on both ends: a
  publisher faster than the learner is slowed down (a reliable KEEP_ALL writer blocks in ``publish`` while the
  reader's history is full) instead of losing trials. Memory stays bounded even so: Fast DDS caps a reader's
  history by its resource limits (``max_samples``, 5000 by default; ``qos.dds_profiles``); a sample that finds it
  full is not acknowledged, stays in the writer's history and is sent again once the reader has taken some
  (within milliseconds). A depth > 0 asks for KEEP_LAST(depth) instead, for users who prefer a fixed bound and
  accept losing the oldest messages of a burst longer than that. A client of the learner's services:
  ``reply_qos``.
- **Trial ids.** The learner answers a trial under the id it was sent with only when ``trial_id_problem`` is
  empty; a robot refuses any other before sending.
- **A trial part's bytes.** ``action_fields``, ``features_fields`` and ``trial_id_of`` read a serialized part as
  the learner reads it (below); a robot checks its spooled parts with them before sending.
- **Rankings.** A suggestion ranked by the criterion asked for says ``ranked_by(criterion)``; any other message
  is a note on how it was ranked instead.
"""

from __future__ import annotations

import struct

from rclpy.exceptions import InvalidTopicNameException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.validate_full_topic_name import validate_full_topic_name

from ..data.pairing import DEFAULT_MAX_TRIAL_ID_LENGTH
from ..data.trial import trial_topics
from ..msg import Action, Features

KEEP_ALL = 0  # the value of a 'qos_depth' parameter or option that asks for KEEP_ALL
STORED_TOPIC = "stored"  # under the learner: each trial's answer (msg/TrialStatus), with trial_qos(KEEP_ALL)
STATUS_TOPIC = f"affordance_learner/{STORED_TOPIC}"  # the learner's ~/stored, relative: the robot's namespace applies
MODEL_TOPIC = "model"  # under the learner: the current model's JSON (std_msgs/String)
MODEL_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
REFUSED_TOPIC = "learn_refused"  # under the node: why each refused learn was refused (rcl_interfaces/msg/Log)
REFUSED_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)  # a caller that matches late still hears it


def trial_qos(depth: int = KEEP_ALL) -> QoSProfile:
    """Reliable; ``depth`` 0: KEEP_ALL, else KEEP_LAST with that depth."""
    if depth < 0:
        raise ValueError(f"qos depth must be >= 0 (0: keep all), got {depth}")
    if depth == KEEP_ALL:
        return QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE)


# How many replies a client of the learner's services keeps until it takes them (rclpy's default: 10). Fast DDS
# sends every reply of a service to every client of it, and a reply is lost when more replies to other clients
# than this arrive before its client takes it (a client not scheduled for a moment while other planners call).
REPLY_DEPTH = 1000


def reply_qos() -> QoSProfile:
    """The QoS of a client of the learner's services: reliable, keeping the last ``REPLY_DEPTH`` replies."""
    return QoSProfile(depth=REPLY_DEPTH, reliability=ReliabilityPolicy.RELIABLE)


def robot_name_problem(name: str, node_name: str = "robot", namespace: str = "/") -> str:
    """'' if ``<name>/action`` is a topic name a node ``node_name`` in ``namespace`` can use, else why not."""
    try:
        validate_full_topic_name(expand_topic_name(f"{name}/action", node_name, namespace))
    except (ValueError, InvalidTopicNameException) as exc:
        return f"robot name '{name}' does not make a topic name: {str(exc).split(', at /')[0]}"
    return ""


def trial_id_problem(trial_id, max_length: int = DEFAULT_MAX_TRIAL_ID_LENGTH) -> str:
    """'' if the learner answers ``trial_id`` under that same id, else why it would not."""
    if not isinstance(trial_id, str) or not trial_id:
        return f"a trial sent with confirmation needs a non-empty trial_id, got {trial_id!r}"
    if "\x00" in trial_id:
        return (f"trial_id {trial_id[:80]!r} holds a NUL character: the middleware cuts the string there, so the "
                "learner would answer another id")
    try:
        trial_id.encode("utf-8")
    except UnicodeEncodeError:
        return (f"trial_id {trial_id[:80]!r} is not valid Unicode text (a lone surrogate): its UTF-8 bytes cannot "
                "be made, so the learner would answer another id")
    if len(trial_id) > max_length:
        return (f"trial_id is {len(trial_id)} characters long, more than the learner's max_trial_id_length "
                f"{max_length}: it would not answer it")
    return ""


def ranked_by(criterion: str) -> str:
    """The message of an answer ranked by the criterion asked for (``TrialSuggestions.note`` is empty)."""
    return f"ranked by {criterion}"


__all__ = ["KEEP_ALL", "MODEL_QOS", "MODEL_TOPIC", "REFUSED_QOS", "REFUSED_TOPIC", "REPLY_DEPTH", "STATUS_TOPIC",
           "STORED_TOPIC", "ranked_by", "reply_qos", "robot_name_problem", "trial_id_problem", "trial_qos",
           "trial_topics"]


# ---------------------------------------------------------------- a trial part's bytes
# The fields of a serialized trial part (Action, Features), read from its CDR bytes without building a ROS message.
#
# rclpy turns every message it takes into a Python message object (the message, its header, the header's
# stamp, each field set through a checking property), which costs more than the rest of a part's path in the
# learner. The learner takes its trial parts serialized (``raw``) and reads here the few fields it uses: the
# header stamp, the trial_id, and the action label or the sensor names and values.
#
# Only the encoding Fast DDS writes for these types is read here (plain CDR, little endian: encapsulation
# 0x0001; every field aligned to its size, counted from the end of the 4-byte encapsulation header); any other
# goes through rclpy's own deserialisation, so the fields are the same whatever the writer's middleware.
# Strings come out as rclpy gives them: UTF-8 with invalid bytes replaced, cut at the first NUL. A Features
# with more than ``MAX_NAMES_READ_HERE`` names goes through rclpy too, whose C code reads long lists faster than
# this module's loop (a flood of oversized parts, which the intake then refuses).



_PLAIN_CDR_LE = b"\x00\x01"
_UINT32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")
MAX_NAMES_READ_HERE = 64  # a Features with more names goes through rclpy's deserialisation (faster per name)


def action_fields(data: bytes) -> tuple[str, float, str]:
    """(trial_id, header stamp in seconds, action label) of a serialized Action."""
    if data[:2] == _PLAIN_CDR_LE:
        try:
            sec, nanosec = _STAMP.unpack_from(data, 4)
            _, pos = _string(data, 12)  # header.frame_id
            trial_id, pos = _string(data, pos)
            return trial_id, _seconds(sec, nanosec), _string(data, pos)[0]
        except (struct.error, ValueError):
            pass  # not what it claims to be: rclpy's deserialisation says what is wrong
    msg = deserialize_message(data, Action)
    return msg.trial_id, _seconds(msg.header.stamp.sec, msg.header.stamp.nanosec), msg.action


def features_fields(data: bytes) -> tuple[str, float, tuple[list[str], tuple[float, ...]]]:
    """(trial_id, header stamp in seconds, (names, values)) of a serialized Features."""
    if data[:2] == _PLAIN_CDR_LE:
        try:
            sec, nanosec = _STAMP.unpack_from(data, 4)
            _, pos = _string(data, 12)  # header.frame_id
            trial_id, pos = _string(data, pos)
            count, pos = _count(data, pos, 5)  # a name: its length and at least its NUL
            if count > MAX_NAMES_READ_HERE:  # rclpy's C code reads many names faster than this loop
                return _rclpy_features(data)
            names = []
            for _ in range(count):
                name, pos = _string(data, pos)
                names.append(name)
            count, pos = _count(data, pos, 8)
            pos += -(pos - 4) % 8  # (doubles are aligned to 8 from the end of the encapsulation header)
            return trial_id, _seconds(sec, nanosec), (names, struct.unpack_from(f"<{count}d", data, pos))
        except (struct.error, ValueError):
            pass
    return _rclpy_features(data)


def trial_id_of(data: bytes) -> str:
    """The trial_id of a serialized Action or Features (plain CDR, little endian) whose later fields may be damaged;
    '' when it cannot be read either."""
    if data[:2] != _PLAIN_CDR_LE:
        return ""
    try:
        _, pos = _string(data, 12)  # (after the header's stamp: its frame_id)
        return _string(data, pos)[0]
    except (struct.error, ValueError):
        return ""


def _rclpy_features(data: bytes) -> tuple[str, float, tuple[list[str], tuple[float, ...]]]:
    msg = deserialize_message(data, Features)
    return msg.trial_id, _seconds(msg.header.stamp.sec, msg.header.stamp.nanosec), (list(msg.names),
                                                                                      tuple(msg.values))


def _seconds(sec: int, nanosec: int) -> float:
    return sec + nanosec * 1e-9  # as data.trial.stamp_seconds


def _count(data: bytes, pos: int, least_size: int) -> tuple[int, int]:
    """A sequence's length at ``pos`` (aligned to 4), and where its elements start; ValueError when ``data`` is
    too short for that many elements of ``least_size`` bytes."""
    pos += -pos % 4  # (4-byte alignment from the encapsulation header's end, 4 bytes in, is the same as from 0)
    (count,) = _UINT32.unpack_from(data, pos)
    if count * least_size > len(data) - pos - 4:
        raise ValueError(f"a sequence of {count} elements in {len(data)} bytes")
    return count, pos + 4


def _string(data: bytes, pos: int) -> tuple[str, int]:
    """The string at ``pos`` (its length aligned to 4, its bytes, a NUL), and where the next field may start."""
    size, pos = _count(data, pos, 1)
    end = pos + size
    text = data[pos:end - 1]
    if b"\x00" in text:  # rclpy cuts a string at its first NUL
        text = text[:text.index(b"\x00")]
    return text.decode("utf-8", "replace"), end
