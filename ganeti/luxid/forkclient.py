"""LuxiD's side of the fork server (L{ganeti.luxid.forkserver}).

L{ForkServer.spawn} makes the two handshake pipes, passes the child's ends
to the server over a C{SOCK_SEQPACKET} socket with C{SCM_RIGHTS}, and wraps
its own ends in a Twisted transport for the job's L{JobChannel}.  Exits are
reported by the server on its stdout.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any, Callable

import orjson
from twisted.internet.protocol import ProcessProtocol, Protocol
from twisted.internet.stdio import StandardIO
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti.jobs import channel
from ganeti.luxid.spawner import JobChannel, JobExit
from ganeti.paths import Paths


class _PipeProtocol(Protocol):
    def __init__(self, job_channel: JobChannel) -> None:
        self.job_channel = job_channel

    def dataReceived(self, data: bytes) -> None:
        self.job_channel.data_received(data)


class _ServerProtocol(ProcessProtocol):
    def __init__(self, owner: "ForkServer") -> None:
        self.owner = owner
        self.decoder = channel.LineDecoder()

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        if childFD != 1:
            return
        try:
            messages = self.decoder.feed(data)
        except channel.ChannelError as e:
            self.owner.log.error("fork server sent garbage: {e}", e=e)
            return
        for message in messages:
            self.owner.report(message)

    def processEnded(self, reason: Failure) -> None:
        self.owner.server_ended(reason)


class ForkServer:
    """A pre-imported fork server for job processes."""

    log = Logger()

    def __init__(self, reactor: Any, paths: Paths, on_exit: Callable[[JobExit], Any]) -> None:
        self.reactor = reactor
        self.paths = paths
        self.on_exit = on_exit
        self.running = False
        self._sock: socket.socket | None = None
        self._process: Any = None
        self._channels: dict[int, JobChannel] = {}
        self._pids: dict[int, int] = {}

    def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.makedirs(self.paths.log_dir, exist_ok=True)
        log_fd = os.open(self.paths.log_file("jobs"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        argv = [sys.executable, "-m", "ganeti.luxid.forkserver", "--root", self.paths.root]
        try:
            self._process = self.reactor.spawnProcess(
                _ServerProtocol(self),
                argv[0],
                argv,
                env=dict(os.environ),
                childFDs={0: "w", 1: "r", 2: log_fd, 3: child.fileno()},
            )
        finally:
            os.close(log_fd)
            child.close()
        self._sock = parent
        self.running = True
        self.log.info("fork server started (pid {pid})", pid=self._process.pid)

    def stop(self) -> None:
        self.running = False
        if self._sock is not None:
            self._sock.close()  # the server exits on end of file
            self._sock = None

    def spawn(self, job_channel: JobChannel) -> None:
        if not self.running or self._sock is None:
            raise RuntimeError("the fork server is not running")
        to_child_r, to_child_w = os.pipe2(os.O_CLOEXEC)
        from_child_r, from_child_w = os.pipe2(os.O_CLOEXEC)
        try:
            socket.send_fds(self._sock, [orjson.dumps({"job": job_channel.job_id})], [from_child_w, to_child_r])
        except OSError:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            raise
        os.close(from_child_w)
        os.close(to_child_r)
        job_id = job_channel.job_id
        self._channels[job_id] = job_channel
        pipes = _PipeProtocol(job_channel)
        StandardIO(pipes, stdin=from_child_r, stdout=to_child_w, reactor=self.reactor)
        job_channel.attach(pipes.transport.write, lambda: self.kill(job_id))

    def kill(self, job_id: int) -> None:
        job_channel = self._channels.get(job_id)
        pid = self._pids.get(job_id) or (job_channel.pid if job_channel else None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def report(self, message: dict[str, Any]) -> None:
        if "spawned" in message:
            self._pids[int(message["spawned"])] = int(message["pid"])
        elif "exited" in message and message.get("job") is not None:
            job_id = int(message["job"])
            self._pids.pop(job_id, None)
            job_channel = self._channels.pop(job_id, None)
            if job_channel is None:
                return
            job_channel.ended()
            self.on_exit(JobExit(job_id, message.get("code"), message.get("signal"), job_channel.confirmed))

    def server_ended(self, reason: Failure) -> None:
        was_running, self.running = self.running, False
        if was_running:
            self.log.error("the fork server died ({why}); jobs are started directly until it is back", why=reason.value)
        # Its children live on (they are their own sessions); LuxiD follows
        # them through their lock files from now on.
        self._channels.clear()
        self._pids.clear()
