"""How this package's processes use DDS: the Fast DDS profiles they start with, publishing that waits, taking
what is queued. The QoS the sides agree on (``trial_qos``, ``reply_qos``) is the wire contract's (``contract``);
``affordance_ros.nodes.qos.reply_qos`` and ``.trial_qos`` stay where users and the docs find them.

The learner's readers hold at most ``LEARNER_READER_SAMPLES``, and the trial writers of this
package's robot processes send heartbeats every ``TRIAL_HEARTBEAT_PERIOD`` (``dds_profiles``):
under a flood a good trial's part waits behind the few parts queued in the reader (not 5000) and
those the flooding writer still holds, and a part refused by a full queue is offered again every
heartbeat, not every 3 s.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from .contract import KEEP_ALL, REPLY_DEPTH, reply_qos, trial_qos  # noqa: F401 (their documented place too)

LEARNER_READER_SAMPLES = 100  # most samples a learner's reader holds (Fast DDS's default: 5000)
TRIAL_HEARTBEAT_PERIOD = 0.1  # seconds between a trial writer's heartbeats while it has unacknowledged parts
# Seconds a learner's service waits for a caller's reply reader to be matched before it gives up on the answer
# (Fast DDS's default, its response writer's max_blocking_time, is 100 ms): a caller that has just started can send
# its request before the learner has discovered its reader. The wait ends as soon as the reader is matched; only
# an answer to a caller whose reader never matches (its QoS incompatible) holds the executor this long.
SERVICE_ANSWER_WAIT = 1.0
# Bytes of the largest RTPS message (one UDP datagram) a process of this package sends: within one Ethernet or WiFi
# frame (1500 bytes, less the IP and UDP headers and room for a tunnel's). With Fast DDS's default (65,500) a
# discovery message goes as IP fragments, and one fragment lost loses the message; capped, a larger sample goes as
# RTPS fragments, each sent again on its own when lost. The cap is on what is sent (Fast DDS's
# fastdds.max_message_size property): larger messages from other programs are still taken.
MAX_MESSAGE_SIZE = 1400
# Seconds between a participant's announcements (Fast DDS: 3 s; its lease stays 20 s): a learner unmatched after an
# outage longer than the lease is found again at the next announcement after the link's return.
ANNOUNCEMENT_PERIOD = 1.0
PROFILES_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
PROFILES_PREFIX = "affordance_ros_dds_"  # the profiles files: <prefix><pid>_<random>.xml in the temporary folder
_PARTICIPANT_PROFILE = """    <participant profile_name="affordance_ros_participant" is_default_profile="true">
      <rtps>
        <builtin>
          <discovery_config>
            <leaseAnnouncement>{announcement}</leaseAnnouncement>
          </discovery_config>
        </builtin>
        <propertiesPolicy>
          <properties>
            <property>
              <name>fastdds.max_message_size</name>
              <value>{size}</value>
            </property>
          </properties>
        </propertiesPolicy>
      </rtps>
    </participant>
"""
_READER_PROFILE = """    <data_reader profile_name="affordance_ros_reader" is_default_profile="true">
      <topic>
        <resourceLimitsQos>
          <max_samples>{samples}</max_samples>
          <max_instances>1</max_instances>
          <max_samples_per_instance>{samples}</max_samples_per_instance>
          <allocated_samples>{allocated}</allocated_samples>
        </resourceLimitsQos>
      </topic>
    </data_reader>
"""
_WRITER_PROFILE = """    <data_writer profile_name="{name}"{default}>
{qos}{times}    </data_writer>
"""
_HEARTBEAT = """      <times>
        <heartbeat_period>{period}</heartbeat_period>
      </times>
"""
_BLOCKING = """      <qos>
        <reliability>
          <max_blocking_time>{wait}</max_blocking_time>
        </reliability>
      </qos>
"""


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"<sec>{whole}</sec><nanosec>{int(round((seconds - whole) * 1e9))}</nanosec>"


@contextlib.contextmanager
def dds_profiles(reader_samples: int | None = None, heartbeat_period: float | None = None,
                 service_answer_wait: float | None = None,
                 max_message_size: int | None = MAX_MESSAGE_SIZE) -> Iterator[str]:
    """Within the block, the DDS messages this process sends are at most ``max_message_size`` bytes (UDP datagrams
    that fit one frame, discovery's too) and its participant announces itself every ``ANNOUNCEMENT_PERIOD`` seconds
    (None: Fast DDS's defaults for both), the DDS readers it creates hold at most ``reader_samples`` samples each,
    its writers send a heartbeat every ``heartbeat_period`` seconds while a reader has not acknowledged
    all they sent, and its services wait up to ``service_answer_wait`` seconds for a caller's reply reader
    to be matched before they give up on an answer (Fast DDS default profiles, read once, when the
    process's first node is made: rmw_fastrtps makes the DDS participant then, not at ``rclpy.init``; make
    every node in the block; later ones keep what the first read). Yields a line
    for the log: what applies.

    Why the message size and the announcements: ``MAX_MESSAGE_SIZE``, ``ANNOUNCEMENT_PERIOD``. Why the reader queue
    and the heartbeat: a reader whose history is full refuses a sample; the
    sample stays in its writer's history and is sent again once the writer learns it is missing, which for a
    writer that sent one trial is at its next heartbeat (Fast DDS: every 3 s). A short reader queue bounds
    the parts a good trial waits behind under a flood; a short heartbeat bounds how long a part refused
    by a full queue waits for its re-send. A KEEP_LAST reader deeper than ``reader_samples`` also holds at
    most that many: what a reliable writer sends beyond them is sent again, not lost. Why the service wait:
    ``SERVICE_ANSWER_WAIT``. rmw_fastrtps makes a service's response writer from the data_writer profile
    named "service" when there is one (its max_blocking_time is that wait); the heartbeat is repeated there so that
    it does
    not depend on whether that profile starts from the default one.

    Left as it is when the user gave Fast DDS profiles of their own (``FASTDDS_DEFAULT_PROFILES_FILE``: docs/node.md
    says what to put in them to keep messages within one frame) or chose another middleware (``RMW_IMPLEMENTATION``).
    """
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    given = next((os.environ[v] for v in PROFILES_VARIABLES if os.environ.get(v)), None)
    if given is not None or not rmw.startswith("rmw_fastrtps"):
        yield (f"DDS message sizes, queues and heartbeats as the Fast DDS profiles in {given} say" if given
               else f"DDS message sizes, queues and heartbeats as {rmw} sets them")
        return
    profiles, said = [], []
    if max_message_size is not None:
        profiles.append(_PARTICIPANT_PROFILE.format(size=int(max_message_size),
                                                    announcement=_duration(ANNOUNCEMENT_PERIOD)))
        said.append(f"DDS messages sent of at most {max_message_size} bytes, announced every "
                    f"{ANNOUNCEMENT_PERIOD:g} s")
    if reader_samples is not None:
        profiles.append(_READER_PROFILE.format(samples=reader_samples, allocated=min(reader_samples, 100)))
        said.append(f"DDS readers hold at most {reader_samples} samples each")
    times = "" if heartbeat_period is None else _HEARTBEAT.format(period=_duration(heartbeat_period))
    if heartbeat_period is not None:
        profiles.append(_WRITER_PROFILE.format(name="affordance_ros_writer", default=' is_default_profile="true"',
                                               qos="", times=times))
        said.append(f"DDS writers send a heartbeat every {heartbeat_period:g} s while unacknowledged")
    if service_answer_wait is not None:
        profiles.append(_WRITER_PROFILE.format(name="service", default="", times=times,
                                               qos=_BLOCKING.format(wait=_duration(service_answer_wait))))
        said.append(f"services wait up to {service_answer_wait:g} s for a new caller's reply reader")
    text = ('<?xml version="1.0" encoding="UTF-8"?>\n<dds xmlns="http://www.eprosima.com">\n'
            f'  <profiles>\n{"".join(profiles)}  </profiles>\n</dds>\n')
    with _profiles_file(text) as path:
        os.environ[PROFILES_VARIABLES[0]] = path
        try:
            yield "; ".join(said)
        finally:
            os.environ.pop(PROFILES_VARIABLES[0], None)


@contextlib.contextmanager
def _profiles_file(text: str) -> Iterator[str]:
    """The path of a temporary file holding ``text`` for the block, named after this process; first the files
    of processes that ended without removing theirs (killed) are removed."""
    remove_stale_profiles(Path(tempfile.gettempdir()))
    with tempfile.NamedTemporaryFile("w", prefix=f"{PROFILES_PREFIX}{os.getpid()}_", suffix=".xml",
                                     delete=False) as handle:
        handle.write(text)
    try:
        yield handle.name
    finally:
        os.unlink(handle.name)


def remove_stale_profiles(folder: Path, age: float = 60.0) -> None:
    """Remove the profiles files in ``folder`` older than ``age`` seconds whose process has ended (Fast DDS
    reads the file when the process makes its first node; one killed leaves it)."""
    for path in folder.glob(f"{PROFILES_PREFIX}*_*.xml"):
        try:
            pid = int(path.name[len(PROFILES_PREFIX):].split("_")[0])
            if time.time() - path.stat().st_mtime < age:
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except (ValueError, OSError):  # not one of ours, gone meanwhile, or its process runs (another user's)
            continue


def describe_qos(depth: int) -> str:
    return "reliable, keep all" if depth == KEEP_ALL else f"reliable, keep last {depth}"


def publish_waiting(publisher, msg, ok: Callable[[], bool], pause: float = 0.01,
                    on_wait: Callable[[], None] | None = None) -> int:
    """Publish ``msg``, waiting while the writer's history is full, so that it is delayed, never dropped.

    A reliable KEEP_ALL writer whose reader is behind blocks in ``publish`` for Fast DDS's
    max_blocking_time (100 ms), then fails ("cannot publish data") without having queued the
    message; then this sleeps ``pause`` (letting other threads of the process take the GIL,
    e.g. an in-process subscriber that has to catch up) and tries again, calling ``on_wait``
    once per failed attempt. Returns the number of failed attempts. Raises the last error
    once ``ok()`` is false (the context is shutting down).
    """
    failed = 0
    while True:
        try:
            publisher.publish(msg)
            return failed
        except _rclpy.RCLError:
            if not ok():
                raise
            failed += 1
            if on_wait is not None:
                on_wait()
            time.sleep(pause)


def take_queued(subscription):
    """The next message queued on ``subscription`` (taken the way rclpy's executor takes one), or None.

    rclpy's executors build their wait set anew for every message they take, which costs more than
    handling a small message; a callback that goes on with the messages queued behind its own saves that.
    """
    with subscription.handle:
        taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
    return taken[0] if taken is not None else None
