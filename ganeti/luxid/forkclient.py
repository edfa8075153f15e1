"""LuxiD's side of the fork server (L{ganeti.luxid.forkserver}).

L{ForkServer.spawn} makes the two handshake pipes, passes the child's ends
to the server over a C{SOCK_SEQPACKET} socket with C{SCM_RIGHTS}, and wraps
its own ends in a Twisted transport for the job's L{JobChannel}.  Exits are
reported by the server on its stdout, and so is each spare it forks.

A spare is planned for a job at its submission (L{plan}): LuxiD names the
lock file the spare is to hold and writes it, with the spare's pid, in the
job file it makes durable before acknowledging the job anyway; C{spawn}
passes the name on, and the spare's announcement of that very file and pid
is confirmed at once (L{JobChannel.prerecorded}), without the durable write
of the usual handshake.  Any other announcement (the spare died or went to
another job, the job was forked) goes the usual way: recorded, then confirmed.

LuxiD retires the server after L{IDLE} seconds without a job (C{--forkserver-idle}) and, for the next
job, forks a new one from itself (L{ganeti.forkseed.fork_running}).

LuxiD's two ends are closed when the job process has closed its own (end of
file: it exited), at the latest L{EXIT_GRACE} seconds after the server
reported the exit, and at once when the server dies or is stopped: a
C{StandardIO} transport never closes the descriptors it was given, so
without this every job left two pipe fds behind.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any, Callable, cast

import orjson
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IReadDescriptor, ITransport
from twisted.internet.protocol import ProcessProtocol, Protocol, connectionDone
from twisted.internet.stdio import StandardIO
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from ganeti import forkseed, ports, serializer
from ganeti.jobs import channel
from ganeti.jobs.orphans import job_lock_path
from ganeti.luxid.spawner import JobChannel, JobExit
from ganeti.paths import Paths
from ganeti.reactors import IReactor

#: the fork server's pid file (C{run/ganeti/}), written by LuxiD while it runs (not locked: its jobs would inherit
#: the lock); where a fork server forked at LuxiD's start is found, its command line being LuxiD's launcher's
PID_FILE_NAME = "ganeti-luxid-forkserver"

#: seconds LuxiD keeps a job's pipes open after the server reported its exit
#: (so that the job's last messages are still read)
EXIT_GRACE = 2.0

#: seconds without a job after which LuxiD retires its fork server (C{--forkserver-idle}; 0: never)
IDLE = 60.0


def recorded_pid(paths: Paths) -> int | None:
    """The pid of the fork server of the LuxiD of C{paths} (its pid file), if that process runs."""
    try:
        with open(paths.pid_file(PID_FILE_NAME), "rb") as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


class _PipeProtocol(Protocol):
    """LuxiD's ends of one job's pipes; owns (and closes) both descriptors."""

    def __init__(self, job_channel: JobChannel, fds: tuple[int, int],
                 on_closed: Callable[[_PipeProtocol], Any]) -> None:
        self.job_channel = job_channel
        self.fds: tuple[int, ...] = fds
        self.on_closed = on_closed

    def dataReceived(self, data: bytes) -> None:
        self.job_channel.data_received(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """End of file from the job (or L{close}): close both descriptors."""
        fds, self.fds = self.fds, ()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        if fds:
            self.on_closed(self)

    @property
    def closed(self) -> bool:
        return not self.fds

    def close(self) -> None:
        """Stop watching both pipes and close them, whatever the job does."""
        if self.closed:
            return
        transport: Any = self.transport  # a StandardIO (mypy reads the Windows one's stub)
        if transport is not None and not getattr(transport, "disconnected", True):
            transport.connectionLost(Failure(ConnectionDone("job pipes closed by LuxiD")))
        self.connectionLost()


class _ServerProtocol(ProcessProtocol):
    def __init__(self, owner: ForkServer) -> None:
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


@implementer(IReadDescriptor)
class _Watched:
    """One descriptor of an adopted fork server the reactor reads (an C{IReadDescriptor}): data goes to
    C{on_data}; the end of file or an error calls C{on_end} once."""

    def __init__(self, fd: int, on_data: Callable[[bytes], Any], on_end: Callable[[], Any]) -> None:
        self.fd = fd
        self.on_data = on_data
        self.on_end = on_end

    def fileno(self) -> int:
        return self.fd

    def logPrefix(self) -> str:
        return "forkserver"

    def doRead(self) -> Any:
        try:
            data = os.read(self.fd, 65536)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            return e
        if not data:
            return ConnectionDone()
        self.on_data(data)
        return None

    def connectionLost(self, reason: Failure) -> None:
        self.on_end()


#: seconds after the fork server died before the next job starts a new one (doubled, up to L{COMEBACK_MAX}, while
#: the new ones die within L{COMEBACK_MAX} seconds: a server that dies at once is not started again for every job)
COMEBACK_AFTER = 1.0
COMEBACK_MAX = 600.0


class ForkServer:
    """A pre-imported fork server for job processes."""

    log = Logger()

    def __init__(self, reactor: IReactor, paths: Paths, on_exit: Callable[[JobExit], Any],
                 on_orphaned: Callable[[list[JobChannel]], Any] | None = None, rpc_port: int = ports.NODED,
                 idle: float = IDLE) -> None:
        """@param on_orphaned: called with the channels of the jobs still
            running when the server dies (their exits will not be reported)
        @param rpc_port: the node daemons' port, handed to every job process
        @param idle: seconds without a job after which the server is retired (L{retired}; 0: never)"""
        self.reactor = reactor
        self.paths = paths
        self.rpc_port = rpc_port
        self.idle = idle
        #: the server was retired for want of jobs: the next job starts a new one (L{spawn})
        self.retired = False
        self._idle_call: Any = None
        self.on_exit = on_exit
        self.on_orphaned = on_orphaned
        self.running = False
        self._sock: socket.socket | None = None
        self._process: Any = None
        #: the seed adopted (L{adopt}), and the descriptors of it the reactor watches
        self._seed: Any = None
        self._watched: list[_Watched] = []
        self._channels: dict[int, JobChannel] = {}
        self._pids: dict[int, int] = {}
        self._pipes: dict[int, _PipeProtocol] = {}
        #: the pid of the spare the server reported last, until it is planned for a job or a job is sent to it
        self.spare: int | None = None
        #: C{(job id, lock file, pid)}: the spare planned for a job (L{plan}) not spawned yet
        self.planned: tuple[int, str, int] | None = None
        #: after the server died: the wait before the next job may start a new one (L{server_ended})
        self.comeback_after = COMEBACK_AFTER
        self._comeback: Any = None
        self._started_at = 0.0

    @property
    def available(self) -> bool:
        """Whether jobs can be sent to L{spawn}: the server runs, or was retired and starts again."""
        return self.running or self.retired

    def start(self) -> None:
        """Run the fork server: the seed forked at LuxiD's start, if there is one (L{adopt}), else a new
        C{python -m ganeti.luxid.forkserver} child.  It is retired after L{idle} seconds without a job; a new
        one is then forked from LuxiD as it runs (L{forkseed.fork_running})."""
        seed, how = forkseed.take(), "at LuxiD's start"
        if seed is None and self.retired:
            seed, how = forkseed.fork_running(), "from LuxiD"
        if seed is not None:
            try:
                self.adopt(seed, how)
                return
            except OSError as e:
                self.log.warn("the fork server forked {how} is gone ({e}); starting one", how=how, e=e)
                seed.close()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.makedirs(self.paths.log_dir, exist_ok=True)
        log_fd = os.open(self.paths.log_file("jobs"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        argv = [sys.executable, "-m", "ganeti.luxid.forkserver", "--root", self.paths.root,
                "--rpc-port", str(self.rpc_port)]
        try:
            self._process = self.reactor.spawnProcess(
                _ServerProtocol(self),
                argv[0],
                argv,
                env=dict(os.environ),
                childFDs={0: "w", 1: "r", 2: log_fd, 3: child.fileno()},
            )
        except BaseException:
            parent.close()
            raise
        finally:
            os.close(log_fd)
            child.close()
        self._sock = parent
        self._started()
        self._record_pid(self._process.pid)
        self.log.info("fork server started (pid {pid})", pid=self._process.pid)

    def adopt(self, seed: Any, how: str = "at LuxiD's start") -> None:
        """Make C{seed} (a L{ganeti.forkseed.Seed}) the fork server: it is told this node's root, the
        RPC port and LuxiD's environment; its reports are read from its pipe, and the end of file on its
        socket (it is not LuxiD's child after twistd daemonized) is its end."""
        seed.sock.send(forkseed.adopt_message(self.paths.root, self.rpc_port, dict(os.environ)))
        os.set_blocking(seed.reports, False)
        reports = _ServerProtocol(self)
        self._watched = [
            _Watched(seed.reports, lambda data: reports.childDataReceived(1, data), self._seed_ended),
            _Watched(seed.sock.fileno(), lambda _data: None, self._seed_ended),
        ]
        for watched in self._watched:
            self.reactor.addReader(watched)
        self._sock = seed.sock
        self._seed = seed
        self._started()
        self._record_pid(seed.pid)
        self.log.info("fork server started (pid {pid}, forked {how})", pid=seed.pid, how=how)

    def _started(self) -> None:
        self.running, self.retired = True, False
        self._started_at = self.reactor.seconds()
        self._idle_from_now()

    def _seed_ended(self) -> None:
        seed, self._seed = self._seed, None  # once: its descriptors' numbers may be reused after
        if seed is None:
            return
        self._unwatch()
        self._sock = None
        seed.close()
        self._reap(seed.pid)
        self.server_ended(Failure(ConnectionDone("its socket closed")))

    def _record_pid(self, pid: int | None) -> None:
        """Write the fork server's pid file (remove it: C{None})."""
        path = self.paths.pid_file(PID_FILE_NAME)
        try:
            if pid is None:
                os.unlink(path)
            else:
                serializer.write_file(path, b"%d\n" % pid, durable=False)
        except OSError:
            pass

    def _reap(self, pid: int, tries: int = 20) -> None:
        """Reap the seed if it is LuxiD's child (LuxiD run without daemonizing; else init's), trying again
        for a while: its socket may close just before it exits."""
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if not done and tries:
            self.reactor.callLater(0.5, self._reap, pid, tries - 1)

    def _unwatch(self) -> None:
        watched, self._watched = self._watched, []
        for one in watched:
            self.reactor.removeReader(one)

    def stop(self) -> None:
        if self.running:
            self._record_pid(None)
        self.running = False
        if self._comeback is not None and self._comeback.active():
            self._comeback.cancel()
        self._comeback = None
        self.spare = self.planned = None
        self._idle_stop()
        self._unwatch()
        seed, self._seed = self._seed, None
        if seed is not None:
            seed.close()  # (its socket too: the server exits on end of file)
            self._reap(seed.pid)
        if self._sock is not None:
            self._sock.close()  # the server exits on end of file
            self._sock = None
        self._close_all_pipes()

    def _idle_from_now(self) -> None:
        """Count L{idle} seconds without a job from now."""
        self._idle_stop()
        if self.idle > 0:
            self._idle_call = self.reactor.callLater(self.idle, self._retire)

    def _idle_stop(self) -> None:
        """Stop counting the idle time (a job came, or the server is gone)."""
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.cancel()
        self._idle_call = None

    def _retire(self) -> None:
        """No job for L{idle} seconds: end the server (its memory comes back; the next job starts a new one,
        forked from LuxiD, which imports what jobs need: about 0.2 s).  Not while a job's pipes are open."""
        self._idle_call = None
        if not self.running or self._channels:
            return  # (the last job's exit counts again)
        if self.open_pipes:
            return self._idle_from_now()
        self.stop()
        self.retired = True
        self.log.info("fork server retired after {idle}s without a job", idle=self.idle)

    @property
    def open_pipes(self) -> int:
        """How many jobs' pipes LuxiD still holds open."""
        return sum(1 for pipes in self._pipes.values() if not pipes.closed)

    def plan(self, job_id: int) -> tuple[str, int] | None:
        """The lock file and pid of the spare waiting, planned for job C{job_id} (to be recorded in its
        job file before it is acknowledged); C{None} when no spare is known."""
        if not self.running or self.spare is None:
            return None
        self.planned = (job_id, job_lock_path(self.paths, job_id), self.spare)
        self.spare = None
        return self.planned[1], self.planned[2]

    def is_planned(self, job_id: int, lock_path: str | None, pid: int | None) -> bool:
        """Whether the spare planned last (L{plan}) is job C{job_id}'s, with that lock file and pid."""
        return self.planned == (job_id, lock_path, pid)

    def spawn(self, job_channel: JobChannel, planned: bool = False) -> None:
        """Start C{job_channel}'s job.  C{planned}: its job file holds, durably, the spare planned for it
        (L{is_planned}); the spare is told the name and its announcement of them is confirmed at once.
        A retired server is started again first."""
        if self.retired:
            self.start()
        self._idle_stop()
        if not self.running or self._sock is None:
            raise RuntimeError("the fork server is not running")
        plan, self.planned = self.planned, None
        lock_path = None
        if planned and plan is not None:
            lock_path, job_channel.prerecorded = plan[1], plan[1:]
        opened: list[int] = []
        try:
            opened += os.pipe2(os.O_CLOEXEC)
            opened += os.pipe2(os.O_CLOEXEC)
            to_child_r, to_child_w, from_child_r, from_child_w = opened
            request = {"job": job_channel.job_id, **({"lockfile": lock_path} if lock_path else {})}
            socket.send_fds(self._sock, [orjson.dumps(request)], [from_child_w, to_child_r])
        except OSError:
            for fd in opened:  # a failed spawn leaves no descriptor behind
                os.close(fd)
            raise
        os.close(from_child_w)
        os.close(to_child_r)
        job_id = job_channel.job_id
        self._channels[job_id] = job_channel
        pipes = _PipeProtocol(job_channel, (from_child_r, to_child_w), self._pipes_closed)
        self._forget_pipes(job_id)
        self._pipes[job_id] = pipes
        try:
            # mypy reads the Windows StandardIO (no stdin/stdout file descriptors) from twisted.internet.stdio
            StandardIO(pipes, stdin=from_child_r, stdout=to_child_w, reactor=self.reactor)  # type: ignore[call-arg]
        except BaseException:
            pipes.close()
            raise
        job_channel.attach(cast(ITransport, pipes.transport).write, lambda: self.kill(job_id))  # connected by StandardIO

    def kill(self, job_id: int) -> None:
        job_channel = self._channels.get(job_id)
        pid = self._pids.get(job_id) or (job_channel.pid if job_channel else None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def report(self, message: dict[str, Any]) -> None:
        if "spare" in message:
            self.spare = int(message["spare"])
        elif "retired" in message:
            if self.spare == int(message["retired"]):
                self.spare = None
        elif "spawned" in message:
            self._pids[int(message["spawned"])] = int(message["pid"])
            if self.spare == int(message["pid"]):  # taken by a job sent before its report came
                self.spare = None
        elif "exited" in message and message.get("job") is not None:
            job_id = int(message["job"])
            self._pids.pop(job_id, None)
            job_channel = self._channels.pop(job_id, None)
            pipes = self._pipes.get(job_id)
            if pipes is not None and not pipes.closed:
                self.reactor.callLater(EXIT_GRACE, self._forget_pipes, job_id, pipes)
            if not self._channels and self.running:
                self._idle_from_now()
            if job_channel is None:
                return
            job_channel.ended()
            self.on_exit(JobExit(job_id, message.get("code"), message.get("signal"), job_channel.may_have_run))

    def server_ended(self, reason: Failure) -> None:
        was_running, self.running = self.running, False
        if was_running:
            self._record_pid(None)
        self.spare = self.planned = None
        self._idle_stop()
        if was_running:
            if self.reactor.seconds() - self._started_at >= COMEBACK_MAX:  # it had run a good while: soon again
                self.comeback_after = COMEBACK_AFTER
            self.log.error("the fork server died ({why}); jobs are started directly, and a new one in {t:g}s",
                           why=reason.value, t=self.comeback_after)
            self._comeback = self.reactor.callLater(self.comeback_after, self._may_come_back)
            self.comeback_after = min(self.comeback_after * 2, COMEBACK_MAX)
        # Its children live on (they are their own sessions); LuxiD follows
        # them through their lock files from now on.
        orphans = list(self._channels.values())
        self._channels.clear()
        self._pids.clear()
        self._close_all_pipes()
        for job_channel in orphans:
            job_channel.ended()
        if orphans and self.on_orphaned is not None:
            self.on_orphaned(orphans)

    def _may_come_back(self) -> None:
        """The wait after a death is over: the next job starts a new server (as after a retirement)."""
        self._comeback = None
        if not self.running:
            self.retired = True

    def _forget_pipes(self, job_id: int, pipes: _PipeProtocol | None = None) -> None:
        """Close the pipes of C{job_id} (only C{pipes}, if given)."""
        current = self._pipes.get(job_id)
        if current is None or (pipes is not None and current is not pipes):
            return
        current.close()
        self._pipes.pop(job_id, None)

    def _pipes_closed(self, pipes: _PipeProtocol) -> None:
        job_id = pipes.job_channel.job_id
        if self._pipes.get(job_id) is pipes:
            del self._pipes[job_id]

    def _close_all_pipes(self) -> None:
        for job_id in list(self._pipes):
            self._forget_pipes(job_id)
