"""trial_wire reads a serialized part's fields as rclpy's deserialisation gives them: every
alignment of the fields, strings with NULs and bytes that are not UTF-8, another encoding, truncated bytes."""

import struct

import pytest
from rclpy.serialization import deserialize_message, serialize_message

from affordance_ros.msg import Action, Features
from affordance_ros.nodes import contract as trial_wire
from affordance_ros.nodes.contract import action_fields, features_fields


def rclpy_fields(data, msg_type):
    """The fields as the node read them from a typed message: (trial_id, stamp, action label or (names, values))."""
    msg = deserialize_message(data, msg_type)
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    if msg_type is Action:
        return msg.trial_id, stamp, msg.action
    return msg.trial_id, stamp, (list(msg.names), tuple(msg.values))


def features(trial_id="t1", names=("color", "shape"), values=(1.5, -2.25), frame_id="", sec=1_700_000_000,
             nanosec=123_456_789):
    msg = Features(trial_id=trial_id, names=list(names), values=list(values))
    msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = sec, nanosec, frame_id
    return msg


@pytest.mark.parametrize("frame_id", ["", "a", "ab", "abc", "abcd", "abcde", "abcdefg"])
@pytest.mark.parametrize("names", [(), ("x",), ("color", "shape", "size"), ("ünïcödé", "名前", "")])
def test_features_fields_are_rclpys_at_every_alignment(frame_id, names):
    values = [0.5 * k - 1e300 * (k == 2) for k in range(len(names))]
    msg = features(trial_id="r-" + frame_id, names=names, values=values, frame_id=frame_id)
    data = serialize_message(msg)
    assert features_fields(data) == rclpy_fields(data, Features)


@pytest.mark.parametrize("trial_id", ["", "a", "r-000123", "x" * 257])
@pytest.mark.parametrize("label", ["", "tap", "grasp-ü"])
def test_action_fields_are_rclpys(trial_id, label):
    msg = Action(trial_id=trial_id, action=label)
    msg.header.stamp.sec, msg.header.stamp.nanosec = -5, 999_999_999
    data = serialize_message(msg)
    assert action_fields(data) == rclpy_fields(data, Action)


def test_a_nul_or_bytes_that_are_not_utf8_come_out_as_rclpy_gives_them():
    data = serialize_message(features(trial_id="AAAAAAAA", names=["BBBBBB"]))
    data = data.replace(b"AAAAAAAA", b"ab\x00cd\xffef").replace(b"BBBBBB", b"\xc3(\xff\x00zz")
    fields = features_fields(data)
    assert fields == rclpy_fields(data, Features)
    assert fields[0] == "ab" and fields[2][0] == ["\ufffd(\ufffd"]


def test_another_encoding_is_read_by_rclpy():
    """Big-endian CDR (encapsulation 0x0000), as another middleware may write it."""
    def string(text, pos):
        raw = text.encode() + b"\x00"
        return b"\x00" * (-pos % 4) + struct.pack(">I", len(raw)) + raw
    body = struct.pack(">iI", 42, 500_000_000)
    for text in ("frame", "t-be", "push"):
        body += string(text, 4 + len(body))
    data = b"\x00\x00\x00\x00" + body
    assert action_fields(data) == rclpy_fields(data, Action) == ("t-be", 42.5, "push")


def test_truncated_bytes_are_refused_not_misread():
    data = serialize_message(features(names=["color", "shape", "size"], values=[1.0, 2.0, 3.0]))
    for end in (len(data) - 8, len(data) - 30, 20):
        with pytest.raises(Exception):  # noqa: B017 (rclpy's error, whichever it raises)
            features_fields(data[:end])
    huge = bytearray(data)
    count = data.index(b"size\x00") + 5
    count += -count % 4  # where the number of values is
    assert huge[count:count + 4] == struct.pack("<I", 3)
    huge[count:count + 4] = struct.pack("<I", 2**31)  # a sequence longer than the bytes can hold
    with pytest.raises(Exception):  # noqa: B017
        features_fields(bytes(huge))


def test_a_long_list_of_names_is_read_by_rclpy(monkeypatch):
    """rclpy reads 5000 names about ten times faster than a Python loop: a flood of oversized parts (which the
    intake refuses) must not cost the learner more than it did with typed takes."""
    calls = []
    original = trial_wire.deserialize_message
    monkeypatch.setattr(trial_wire, "deserialize_message", lambda *a: calls.append(a[1]) or original(*a))
    few = serialize_message(features(names=[f"s{k}" for k in range(trial_wire.MAX_NAMES_READ_HERE)],
                                     values=[1.0] * trial_wire.MAX_NAMES_READ_HERE))
    assert features_fields(few) == rclpy_fields(few, Features) and calls == []
    many = serialize_message(features(names=["obj_vel"] * 5000, values=[1.0] * 5000))
    assert features_fields(many) == rclpy_fields(many, Features) and calls == [Features]
