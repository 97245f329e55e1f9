"""A lossy link between two network namespaces: a user-space bridge over AF_PACKET sockets (the kernels here have
no netem). ``linked_hosts`` starts it; by hand:

    ip netns exec BRIDGE_NS python -m affordance_ros_bench.lossy_link IFACE_A IFACE_B [--seed N]

Forwards every Ethernet frame that arrives on one interface out of the other, through the faults set for
that direction: ``loss`` (probability a frame is dropped), ``delay`` and ``jitter`` (seconds; jitter
uniform in ±jitter, so frames are reordered), ``duplicate`` (probability a frame is sent twice),
``corrupt`` (probability one byte of a frame's payload is flipped: the receiver's UDP checksum then drops
it), ``rate`` (bits per second, 0: unlimited; a frame waits for the frames before it, the queue holds at
most ``queue`` frames and drops the newest beyond) and ``cut`` (true: every frame dropped).

Commands come on stdin, one JSON object a line; each is answered on stdout by one JSON line with the
counts so far: ``{"both": {"loss": 0.3}}``, ``{"a_to_b": {"cut": true}, "b_to_a": {}}``, ``{"reset": true}``
(no faults), ``{}`` (just the counts). Faults not named keep their value. stdin closed: the bridge exits.
The counts also tell how many frames were IPv4 fragments of a larger datagram (``ip_fragments``: one of them lost
loses the datagram) and the largest frame.

Standard library only: it runs in the bridge's namespace as a process of its own.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import select
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # a frame this host sent (an AF_PACKET socket sees those too): not forwarded
ETH_HEADER = 14
FAULTS = ("loss", "delay", "jitter", "duplicate", "corrupt", "rate", "queue", "cut")


@dataclass
class Faults:
    """What happens to the frames of one direction."""

    loss: float = 0.0
    delay: float = 0.0
    jitter: float = 0.0
    duplicate: float = 0.0
    corrupt: float = 0.0
    rate: float = 0.0
    queue: int = 1000
    cut: bool = False


@dataclass
class Counts:
    """What became of the frames of one direction."""

    frames: int = 0
    forwarded: int = 0
    lost: int = 0
    cut: int = 0
    duplicated: int = 0
    corrupted: int = 0
    overflowed: int = 0
    ip_fragments: int = 0  # IPv4 frames that are a fragment of a larger datagram (MF set or an offset)
    largest: int = 0       # bytes of the largest frame


class Direction:
    """The frames from one interface to the other: the faults, the counts, the time the rate frees the link."""

    def __init__(self, out: socket.socket):
        self.out, self.faults, self.counts = out, Faults(), Counts()
        self.link_free = 0.0  # when the frames queued for the rate have left
        self.queued: list[float] = []  # departure times of frames waiting for the rate (a heap)


class Bridge:
    """Forwards the frames of ``a`` to ``b`` and back, through the faults of each direction."""

    def __init__(self, a: str, b: str, seed: int = 0):
        self.sockets = {name: _packet_socket(name) for name in (a, b)}
        sa, sb = self.sockets[a], self.sockets[b]
        self.directions = {"a_to_b": Direction(sb), "b_to_a": Direction(sa)}
        self.by_socket = {sa.fileno(): self.directions["a_to_b"], sb.fileno(): self.directions["b_to_a"]}
        self.rng = random.Random(seed)
        self.schedule: list[tuple[float, int, socket.socket, bytes]] = []  # (due, order, out, frame)
        self._order = 0

    def command(self, line: str) -> dict:
        order = json.loads(line) if line.strip() else {}
        if order.get("reset"):
            for direction in self.directions.values():
                direction.faults = Faults()
        for name, faults in order.items():
            targets = list(self.directions.values()) if name == "both" else (
                [self.directions[name]] if name in self.directions else [])
            for direction in targets:
                for key, value in faults.items():
                    if key not in FAULTS:
                        raise ValueError(f"unknown fault '{key}': one of {FAULTS}")
                    setattr(direction.faults, key, type(getattr(Faults(), key))(value))
        return {name: {"faults": asdict(d.faults), "counts": asdict(d.counts)} for name, d in self.directions.items()}

    def run(self, control) -> None:
        control_fd = control.fileno()
        os.set_blocking(control_fd, False)
        pending = b""
        watched = [control_fd, *self.by_socket]
        while True:
            timeout = max(0.0, self.schedule[0][0] - time.monotonic()) if self.schedule else None
            ready, _, _ = select.select(watched, [], [], timeout)
            for fd in ready:
                if fd == control_fd:
                    data = os.read(control_fd, 65536)
                    if not data:
                        return
                    pending += data
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        try:
                            answer = self.command(line.decode())
                        except (ValueError, TypeError) as exc:
                            answer = {"error": str(exc)}
                        sys.stdout.write(json.dumps(answer) + "\n")
                        sys.stdout.flush()
                else:
                    self._receive(fd)
            self._send_due()

    def _receive(self, fd: int) -> None:
        sock = next(s for s in self.sockets.values() if s.fileno() == fd)
        for _ in range(64):  # the frames waiting, up to a bound, before looking at the other socket again
            try:
                frame, address = sock.recvfrom(65535)
            except BlockingIOError:
                return
            if address[2] == PACKET_OUTGOING:
                continue
            self._forward(self.by_socket[fd], frame)

    def _forward(self, direction: Direction, frame: bytes) -> None:
        faults, counts, rng = direction.faults, direction.counts, self.rng
        counts.frames += 1
        counts.largest = max(counts.largest, len(frame))
        if len(frame) > ETH_HEADER + 8 and frame[12:14] == b"\x08\x00":
            flags_offset = struct.unpack_from("!H", frame, ETH_HEADER + 6)[0]
            if flags_offset & 0x3FFF:
                counts.ip_fragments += 1
        if faults.cut:
            counts.cut += 1
            return
        if rng.random() < faults.loss:
            counts.lost += 1
            return
        copies = 2 if rng.random() < faults.duplicate else 1
        counts.duplicated += copies - 1
        now = time.monotonic()
        for _ in range(copies):
            sent = frame
            if rng.random() < faults.corrupt and len(frame) > ETH_HEADER + 28:
                at = rng.randrange(ETH_HEADER + 28, len(frame))  # past the IP and UDP headers: the payload
                sent = frame[:at] + bytes([frame[at] ^ (1 << rng.randrange(8))]) + frame[at + 1:]
                counts.corrupted += 1
            due = now + max(0.0, faults.delay + rng.uniform(-faults.jitter, faults.jitter))
            if faults.rate > 0:
                while direction.queued and direction.queued[0] <= now:
                    heapq.heappop(direction.queued)
                if len(direction.queued) >= faults.queue:
                    counts.overflowed += 1
                    continue
                direction.link_free = max(direction.link_free, now) + len(sent) * 8 / faults.rate
                heapq.heappush(direction.queued, direction.link_free)
                due = max(due, direction.link_free)
            self._order += 1
            heapq.heappush(self.schedule, (due, self._order, direction.out, sent))

    def _send_due(self) -> None:
        now = time.monotonic()
        while self.schedule and self.schedule[0][0] <= now:
            _, _, out, frame = heapq.heappop(self.schedule)
            direction = self.directions["a_to_b"] if out is self.directions["a_to_b"].out else self.directions["b_to_a"]
            try:
                out.send(frame)
                direction.counts.forwarded += 1
            except OSError:
                direction.counts.overflowed += 1


SIOCETHTOOL = 0x8946
# ethtool's legacy commands that switch an offload off: tx checksums, scatter-gather, TSO, GSO, GRO
_OFFLOADS_OFF = (0x17, 0x19, 0x1F, 0x24, 0x2C)


def offloads_off(interface: str) -> None:
    """Switch off the checksum and segmentation offloads of ``interface`` (in this network namespace): a veth
    hands its frames over with the checksum left for the hardware to fill in, and a frame read on an AF_PACKET
    socket and sent on would then reach the other end with a checksum that fails."""
    import ctypes
    import fcntl
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for command in _OFFLOADS_OFF:
            value = ctypes.create_string_buffer(struct.pack("II", command, 0), 8)
            try:
                fcntl.ioctl(sock, SIOCETHTOOL, struct.pack("16sP", interface.encode(), ctypes.addressof(value)))
            except OSError:
                if command == 0x17:  # the checksum is the one that matters
                    raise


def _packet_socket(interface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((interface, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.setblocking(False)
    return sock


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a")
    parser.add_argument("b", nargs="?")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--offloads-off", action="store_true",
                        help="only switch the offloads of the interfaces given off (see offloads_off), and exit")
    args = parser.parse_args(argv)
    if args.offloads_off:
        for interface in (args.a, args.b):
            if interface:
                offloads_off(interface)
        return 0
    bridge = Bridge(args.a, args.b, args.seed)
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    bridge.run(sys.stdin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
