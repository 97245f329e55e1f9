"""The fields of a serialized trial part (Action, Features), read from its CDR bytes without building a ROS message.

rclpy turns every message it takes into a Python message object (the message, its header, the header's
stamp, each field set through a checking property), which costs more than the rest of a part's path in the
learner. The learner takes its trial parts serialized (``raw``) and reads here the few fields it uses: the
header stamp, the trial_id, and the action label or the sensor names and values.

Only the encoding Fast DDS writes for these types is read here (plain CDR, little endian: encapsulation
0x0001; every field aligned to its size, counted from the end of the 4-byte encapsulation header); any other
goes through rclpy's own deserialisation, so the fields are the same whatever the writer's middleware.
Strings come out as rclpy gives them: UTF-8 with invalid bytes replaced, cut at the first NUL. A Features
with more than ``MAX_NAMES_READ_HERE`` names goes through rclpy too, whose C code reads long lists faster than
this module's loop (a flood of oversized parts, which the intake then refuses).
"""

from __future__ import annotations

import struct

from rclpy.serialization import deserialize_message

from ...msg import Action, Features

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
