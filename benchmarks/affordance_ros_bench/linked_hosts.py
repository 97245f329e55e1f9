"""Two hosts joined by a lossy link, on one machine: a network namespace for the robot, one for the learner, and
the bridge of ``lossy_link`` in a third between them (root, and ``ip netns``: a CI machine or a developer's).

    with LinkedHosts() as hosts:
        learner = hosts.popen("learner", [executable, ...], env=hosts.dds_env(os.environ))
        hosts.link.set(both={"loss": 0.3})           # while trials stream
        hosts.link.set(learner_to_robot={"cut": True})
        hosts.link.set(reset=True)

Each host has its loopback and one veth to the bridge, an address in a /24 of its own and a route for multicast
(DDS discovery) through it. ``dds_env`` gives the nodes DDS over UDP only: processes in two network namespaces of
one machine would otherwise meet in Fast DDS's shared memory (/dev/shm is shared) and never cross the link.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading

HOSTS = ("robot", "learner")
_NAME = re.compile(r"^afr(\d+)_(\d+)[rlx]$")  # afr<pid>_<n><host>: a process's n-th LinkedHosts
_instances = itertools.count()


def namespaces_problem() -> str:
    """'' when this process can make network namespaces joined by veths, else why not (a test skips saying so)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "no 'ip' command (iproute2)"
    name = f"afr{os.getpid()}_999x"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return f"'ip netns add' fails here: {made.stderr.strip()}"
    try:
        veth = subprocess.run(["ip", "-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"],
                              capture_output=True, text=True)
        if veth.returncode != 0:
            return f"'ip link add ... type veth' fails here: {veth.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ""


def remove_stale_namespaces() -> list[str]:
    """Remove the namespaces of ``LinkedHosts`` whose process has ended (one killed leaves them); their names."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    removed = []
    for name in listed:
        match = _NAME.match(name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            removed.append(name)
    return removed


class Link:
    """The bridge process: ``set`` changes the faults of a direction (robot_to_learner, learner_to_robot, both;
    reset=True clears them all first: ``lossy_link``'s commands) and returns the counts of each direction."""

    _DIRECTIONS = {"robot_to_learner": "a_to_b", "learner_to_robot": "b_to_a"}

    def __init__(self, namespace: str, robot_end: str, learner_end: str, seed: int):
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, sys.executable, "-m", "affordance_ros_bench.lossy_link", robot_end,
             learner_end, "--seed", str(seed)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._lock = threading.Lock()
        if not self.process.stdout.readline():
            raise RuntimeError(f"the lossy link did not start (exit status {self.process.wait()})")

    def set(self, **faults) -> dict:
        order = {self._DIRECTIONS.get(key, key): value for key, value in faults.items()}
        with self._lock:
            self.process.stdin.write(json.dumps(order) + "\n")
            self.process.stdin.flush()
            answer = json.loads(self.process.stdout.readline())
        if "error" in answer:
            raise ValueError(answer["error"])
        back = {wire: name for name, wire in self._DIRECTIONS.items()}
        return {back[key]: value for key, value in answer.items()}

    def counts(self) -> dict:
        return self.set()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class LinkedHosts:
    """The robot's and the learner's namespaces and the bridge's (``link``), made on entry; on exit the processes
    started with ``popen`` that still run are killed, and the namespaces removed."""

    def __init__(self, seed: int = 0):
        tag = f"{os.getpid()}_{next(_instances)}"
        self.namespaces = {"robot": f"afr{tag}r", "learner": f"afr{tag}l", "bridge": f"afr{tag}x"}
        self.interfaces = {"robot": f"af{tag}r", "learner": f"af{tag}l"}  # (at most 15 characters)
        self.bridge_ends = {"robot": f"af{tag}R", "learner": f"af{tag}L"}
        subnet = 10 + os.getpid() % 200
        self.addresses = {"robot": f"10.{subnet}.0.1", "learner": f"10.{subnet}.0.2"}
        self.seed = seed
        self.link: Link | None = None
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> "LinkedHosts":
        remove_stale_namespaces()
        try:
            for namespace in self.namespaces.values():
                _ip("netns", "add", namespace)
            bridge = self.namespaces["bridge"]
            for host in HOSTS:
                inside, outside, namespace = self.interfaces[host], self.bridge_ends[host], self.namespaces[host]
                _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
                _ip("link", "set", inside, "netns", namespace)
                _ip("link", "set", outside, "netns", bridge)
                _ip("-n", namespace, "addr", "add", f"{self.addresses[host]}/24", "dev", inside)
                for interface in ("lo", inside):
                    _ip("-n", namespace, "link", "set", interface, "up")
                _ip("-n", namespace, "route", "add", "224.0.0.0/4", "dev", inside)
                _ip("-n", bridge, "link", "set", outside, "up")
                _offloads_off(namespace, inside)
                _offloads_off(bridge, outside)
            self.link = Link(bridge, self.bridge_ends["robot"], self.bridge_ends["learner"], self.seed)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        if self.link is not None:
            self.link.close()
        for namespace in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)

    def popen(self, host: str, command, **kwargs) -> subprocess.Popen:
        """``command`` run on ``host`` ('robot' or 'learner'), killed at exit if it still runs."""
        process = subprocess.Popen(["ip", "netns", "exec", self.namespaces[host], *map(str, command)], **kwargs)
        self.processes.append(process)
        return process

    @staticmethod
    def dds_env(env: dict) -> dict:
        """``env`` for nodes on these hosts: DDS over UDP only (no shared memory), discovery over the subnet."""
        env = dict(env, ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET", FASTDDS_BUILTIN_TRANSPORTS="UDPv4")
        for variable in ("ROS_STATIC_PEERS", "ROS_LOCALHOST_ONLY"):
            env.pop(variable, None)
        return env


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _offloads_off(namespace: str, interface: str) -> None:
    subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-m", "affordance_ros_bench.lossy_link",
                    interface, "--offloads-off"], check=True)
