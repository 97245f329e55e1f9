"""One learner per case database: an exclusive lock on a file beside it, naming who holds it.

Two learner nodes on one database would both store and both learn, each believing its model to
be the current one. The first takes an exclusive ``flock`` on ``<database>.lock`` and writes into
it who it is (node name, process id, host, since when); the second cannot take the lock and is
refused with one line saying who holds the database and how to stop it. The kernel releases the
lock when its holder's process ends, however it ends, so a killed node leaves no stale lock
behind (the file stays; its content is rewritten by the next holder). Other programs (the
command line's ``import``) do not take it: SQLite serialises their writes with the node's.

A lock on a file that was removed (``rm cases.db*``, the folder removed) holds nothing a second
learner would see: ``problem`` says when the path no longer names the file locked, and ``retake``
locks the file at the path again (made if missing), as the case store does when it writes the
database back to its path (``storage.CaseStore.recover``). Until then (up to a second) the file
lock holds nothing, so on Linux the holder also binds a socket in the abstract namespace named
after the database's path (``_path_name``): it has no file to remove, the kernel frees it when
the process ends, and a second learner on the same host is refused by it whatever was removed,
with the holder's process id read from the socket (``SO_PEERCRED``). Its name includes the mount
namespace, so two containers sharing the host's network but each with its own ``/data/cases.db``
do not refuse each other; learners on other hosts (a database on a shared file system) meet only
the file lock.

A path is not the only name of a file: a hard link (``ln``, a ``cp -al`` snapshot of the folder) gives the
same database another path, with a lock file and a socket of its own. SQLite keeps a database's
write-ahead log beside the path it was opened by, so two learners on two paths of one file each
write to a log of their own, and the database is corrupted (seen: "database disk image is
malformed" after 1500 trials confirmed by both). So the holder also binds a socket named after
the database file itself, its device and inode (``hold_file``, which the case store calls before
SQLite opens the file, and again for the file it writes back), and a second learner on this host
that reaches the same file by another path is refused by it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import struct
import time
from pathlib import Path

SHARED = "it uses the case database too"  # how a problem that another learner holds the lock file ends


class DatabaseInUse(RuntimeError):
    """Another learner holds the database; the message says which and how to stop it."""


class DatabaseLock:
    """Holds ``<database_path>.lock`` for ``owner`` (a node's full name) until ``release``; DatabaseInUse
    when another process holds it."""

    def __init__(self, database_path: Path, owner: str):
        self.path = database_path.with_name(database_path.name + ".lock")
        self.database_path = database_path
        self._fd = None
        self._file_socket = None  # held by ``hold_file``
        self._file_identity = None
        self._socket = _bind(_path_name(database_path), database_path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise DatabaseInUse(_in_use(database_path, _holder(self._fd))) from None
        except BaseException:
            self.release()
            raise
        self._me = {"node": owner, "pid": os.getpid(), "host": socket.gethostname(),
                    "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self._identity = self._hold(self._fd)

    def problem(self) -> str:
        """'' while the path names the file this lock holds; else what happened to it (removed, replaced)."""
        if self._fd is None:
            return ""
        self._answer_probes()
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return f"the lock file {self.path} was removed"
        if (status.st_dev, status.st_ino) != self._identity or os.fstat(self._fd).st_nlink == 0:
            return f"{self.path} now names another file than the lock file this node holds"
        return ""

    def hold_file(self, status: os.stat_result) -> None:
        """Hold the database file of ``status`` (its device and inode), whatever path reaches it: DatabaseInUse,
        naming the holder, when another learner on this host holds it (through a hard link). The file held
        before, if another, is let go."""
        identity = (status.st_dev, status.st_ino)
        if identity == self._file_identity or self._socket is None:  # (no abstract sockets: the file lock alone)
            return
        held = _bind(_file_name(identity), self.database_path)
        if self._file_socket is not None:
            self._file_socket.close()
        self._file_socket = held
        self._file_identity = identity

    def retake(self) -> str:
        """Lock the file at the path again when it is not the one held (``problem``; made if missing): '' once
        it is held, else why it cannot be (another process holds it; nothing is then changed)."""
        if not self.problem():
            return ""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            return f"{_who(holder, 'another learner node')} holds {self.path} now: {SHARED}"
        except OSError:
            os.close(fd)
            raise
        os.close(self._fd)
        identity = self._hold(fd)
        self._fd = fd
        self._identity = identity
        return ""

    def _answer_probes(self) -> None:
        """Close the connections refused learners made to the sockets to learn who holds them (their queues are
        short)."""
        for held in (self._socket, self._file_socket):
            while held is not None:
                try:
                    held.accept()[0].close()
                except OSError:
                    break

    def _hold(self, fd: int) -> tuple[int, int]:
        """Write who holds the lock into its file ``fd``; the file's identity (device, inode)."""
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(self._me) + "\n").encode(), 0)
        status = os.fstat(fd)
        return status.st_dev, status.st_ino

    def release(self) -> None:
        """Give the database up (closing the file releases the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for held in (self._socket, self._file_socket):
            if held is not None:
                held.close()
        self._socket = None
        self._file_socket = None
        self._file_identity = None


def _path_name(database_path: Path) -> bytes:
    """The abstract socket name of a database: its absolute path (symbolic links resolved) in this mount
    namespace (a container's ``/data/cases.db`` is not the host's)."""
    try:
        namespace = os.readlink("/proc/self/ns/mnt")
    except OSError:
        namespace = ""
    key = f"{namespace}\0{os.path.realpath(database_path)}".encode()
    return b"\0affordance_ros.database." + hashlib.sha256(key).hexdigest().encode()


def _file_name(identity: tuple[int, int]) -> bytes:
    """The abstract socket name of a database file: its device and inode (the same file by any path)."""
    key = f"{identity[0]}:{identity[1]}".encode()
    return b"\0affordance_ros.database-file." + hashlib.sha256(key).hexdigest().encode()


def _bind(name: bytes, database_path: Path) -> socket.socket | None:
    """Bind (and listen on) the abstract socket ``name`` of the database at ``database_path``; DatabaseInUse when
    a process on this host has it. None where there is no abstract namespace (not Linux): the file lock alone
    then."""
    if not hasattr(socket, "AF_UNIX") or not hasattr(socket, "SO_PEERCRED"):
        return None
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        held.bind(name)
        held.listen(8)
        held.setblocking(False)
        return held
    except OSError as exc:
        held.close()
        if exc.errno != errno.EADDRINUSE:
            return None
    raise DatabaseInUse(_in_use(database_path, _socket_holder(name, database_path)))


def _socket_holder(name: bytes, database_path: Path) -> dict:
    """Who holds the database's abstract socket: its process id (``SO_PEERCRED`` of a connection to it) and
    what that process wrote into its lock file, read through the file it holds open (the one at the path
    may be gone, or another's); the lock file at the path when the socket tells nothing."""
    pid = None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setblocking(False)
        try:
            probe.connect(name)
            # (0: a process of another PID namespace, a container sharing the host's network)
            pid = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0] or None
        except OSError:  # its queue of connections is full, or it has just ended
            pass
    lock_path = os.path.realpath(database_path.with_name(database_path.name + ".lock"))  # as /proc names it
    candidates = [lock_path]
    if pid is not None:  # its lock file at this path first, then any (it holds the database by another path)
        targets = {fd: _target(fd).removesuffix(" (deleted)") for fd in _open_files(pid)}
        candidates[:0] = sorted((fd for fd, target in targets.items() if target.endswith(".lock")),
                                key=lambda fd: targets[fd] != lock_path)
    for candidate in candidates:
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        holder = _holder(fd)
        os.close(fd)
        if pid is None or holder.get("pid") == pid:
            return holder
    return {} if pid is None else {"pid": pid, "host": socket.gethostname()}


def _open_files(pid: int) -> list[str]:
    """The /proc paths of a process's open files; none when it is not ours to look into, or has ended."""
    try:
        return [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []


def _target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed meanwhile
        return ""


def _holder(fd: int) -> dict:
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _who(holder: dict, unknown: str) -> str:
    """The holder of a lock as a log names it: node (pid, host, since)."""
    node, pid, host = holder.get("node", unknown), holder.get("pid"), holder.get("host")
    details = ", ".join(x for x in (f"pid {pid}" if pid else "", f"host {host}" if host else "",
                                    f"since {holder['since']}" if holder.get("since") else "") if x)
    return node + (f" ({details})" if details else "")


def _in_use(database_path: Path, holder: dict) -> str:
    """The one line that refuses a second learner."""
    pid, host = holder.get("pid"), holder.get("host")
    how = "Ctrl-C where it runs" + (f", or `kill -INT {pid}`" + (f" on {host}" if host else "") if pid else "")
    return (f"the case database {database_path} is in use by {_who(holder, 'another learner node')}"
            f": stop it first ({how}), or give this node another database_path")


__all__ = ["DatabaseInUse", "DatabaseLock"]
