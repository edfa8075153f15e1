"""Starting job processes, and LuxiD's side of the handshake.

L{JobProcessProtocol} drives one job process: it waits for the child's lock
file, has it recorded durably in the job file (C{record}), confirms, and
reports the exit.  A child that says nothing within C{timeout} seconds is
killed; a child that dies before confirmation never ran anything.

Two ways to start the child, same protocol:
  - L{spawn_direct}: C{reactor.spawnProcess} of C{python -m ganeti.jobs}
    with pipes on child fds 3 and 4 (a cold interpreter: ~100 ms);
  - L{ganeti.luxid.forkserver}: a pre-imported server (forked at LuxiD's
    start, L{ganeti.forkseed}, or LuxiD's child) forks the job
    process and hands it pipes LuxiD made (~ms).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, cast

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.interfaces import IProcessTransport, IReactorTime
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import ports
from ganeti.jobs import channel, trace
from ganeti.paths import Paths
from ganeti.reactors import ITimeProcessReactor

#: seconds a new job process has to send its lock file path
HANDSHAKE_TIMEOUT = 30.0

Record = Callable[[int, str, int], Any]  # (job id, lock file, pid) -> Deferred/None


class JobExit:
    """How a job process ended."""

    def __init__(self, job_id: int, exit_code: int | None, signal: int | None, confirmed: bool) -> None:
        self.job_id = job_id
        self.exit_code = exit_code
        self.signal = signal
        self.confirmed = confirmed

    def describe(self) -> str:
        if self.signal is not None:
            return "killed by signal %d" % self.signal
        return "exited with status %s" % self.exit_code


class JobChannel:
    """LuxiD's end of the pipes to one job process (transport-agnostic)."""

    log = Logger()

    def __init__(self, job_id: int, paths: Paths, clock: IReactorTime, record: Record, timeout: float = HANDSHAKE_TIMEOUT,
                 private: dict[int, Any] | None = None) -> None:
        self.job_id = job_id
        #: LuxiD's clear private values of the jobs (L{ganeti.jobs.private}): this job's go with the
        #: confirmation, and are forgotten here once sent
        self.private = private if private is not None else {}
        self.paths = paths
        self.clock = clock
        self.record = record
        self.timeout = timeout
        self.lockfile: str | None = None
        self.pid: int | None = None
        self.confirmed = False
        self.started_at = clock.seconds()
        self.confirmed_at: float | None = None
        #: fires when the handshake is confirmed (with the job id)
        self.ready: Deferred = Deferred()
        self._decoder = channel.LineDecoder()
        self._cancels: list[Deferred] = []
        self._timer: Any = None
        self._write: Callable[[bytes], None] | None = None
        self._kill: Callable[[], None] | None = None
        #: the start was called off (L{abort}): never confirm
        self.aborted = False
        self.ended_at: float | None = None
        #: sends a signal to a pid (tests replace it)
        self.os_kill: Callable[[int, int], None] = os.kill
        #: the job as the process last had it, sent because it could not write it (the disk full)
        self.unsaved: Any = None
        #: C{(lock file, pid)} recorded durably before the process announced itself (a spare's, see
        #: L{ganeti.luxid.forkclient}): that very announcement is confirmed without another write
        self.prerecorded: tuple[str, int] | None = None
        #: the job is not acknowledged yet (L{ganeti.luxid.acks}): its confirmation waits for L{release}
        self.held = False
        self._confirm_waiting = False
        #: a confirmation addressed to the L{prerecorded} process went before its announcement came (see
        #: L{release}): that process may run the job from then on, though L{confirmed} waits for its announcement
        self.confirmed_ahead = False

    def attach(self, write: Callable[[bytes], None], kill: Callable[[], None]) -> None:
        self._write, self._kill = write, kill
        self._timer = self.clock.callLater(self.timeout, self._silent)

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._decoder.feed(data)
        except channel.ChannelError as e:
            self.log.warn("job {job}: bad message from the job process ({why}); killing it", job=self.job_id, why=e)
            self.kill()
            return
        for message in messages:
            if channel.LOCKFILE in message and self.lockfile is None:
                self._lockfile(message)
            elif channel.CANCELLED in message and self._cancels:
                self._cancels.pop(0).callback(bool(message[channel.CANCELLED]))
            elif channel.UNSAVED in message and self.confirmed:
                self.unsaved = message[channel.UNSAVED]

    def _lockfile(self, message: dict[str, Any]) -> None:
        if self.aborted:
            return
        path, pid = message.get(channel.LOCKFILE), message.get("pid")
        real = os.path.realpath(path) if isinstance(path, str) else ""
        if not isinstance(path, str) or not isinstance(pid, int) \
                or not real.startswith(os.path.realpath(self.paths.lock_dir) + os.sep):
            self.log.warn("job {job}: refused lock file {path!r}; killing the process", job=self.job_id, path=path)
            self.kill()
            return
        self._stop_timer()
        self.lockfile, self.pid = path, pid
        if self.prerecorded == (path, pid):
            trace.hop(self.job_id, "luxid.lockfile_prerecorded")
            if self.confirmed_ahead:
                self._confirmed_now()
            else:
                self._confirm(None)
            return
        d = maybeDeferred(self.record, self.job_id, path, pid)
        d.addCallbacks(self._confirm, self._record_failed)

    def release(self) -> None:
        """The job is acknowledged: confirm its process now if it waits for that, else when it asks.  A
        process whose lock file and pid the job file holds since the submission (L{prerecorded}: a planned
        spare) is confirmed ahead of its announcement, the confirmation addressed to that lock file and pid
        (L{channel.IF}): the process goes on as soon as it has announced itself, instead of waiting for
        this end to read its announcement and answer.  Another process (the spare planned was not the one
        the job got) ignores it and waits for its own confirmation, sent once its announcement is recorded."""
        self.held = False
        if self._confirm_waiting:
            self._confirm_waiting = False
            self._confirm(None)
        elif self.prerecorded is not None and self.lockfile is None and self._write is not None \
                and not self.aborted and not self.confirmed_ahead:
            self._write(self._confirmation(list(self.prerecorded)))
            self.confirmed_ahead = True
            trace.hop(self.job_id, "luxid.confirmed_ahead")

    @property
    def may_have_run(self) -> bool:
        """Whether the process may have started the job: confirmed, or confirmed ahead (L{release})."""
        return self.confirmed or self.confirmed_ahead

    def _confirm(self, _: Any) -> None:
        if self._write is None or self.aborted:
            return
        if self.held:
            self._confirm_waiting = True
            return
        self._write(self._confirmation())
        self._confirmed_now()

    def _confirmation(self, addressed: list[Any] | None = None) -> bytes:
        clear = self.private.get(self.job_id)
        return channel.encode({channel.CONFIRM: True, **({channel.IF: addressed} if addressed else {}),
                               **({channel.PRIVATE: clear} if clear else {})})

    def _confirmed_now(self) -> None:
        self.private.pop(self.job_id, None)
        self.confirmed = True
        self.confirmed_at = self.clock.seconds()
        if not self.ready.called:
            self.ready.callback(self.job_id)

    def _record_failed(self, failure: Failure) -> None:
        self.log.failure("job {job}: could not record its lock file; killing it", failure, job=self.job_id)
        self.kill()

    def _silent(self) -> None:
        self._timer = None
        self.aborted = True  # a lock file read after this is not confirmed: the child is being killed
        self.log.warn("job {job}: no handshake within {t}s; killing the process", job=self.job_id, t=self.timeout)
        self.kill()

    def _stop_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def kill(self) -> None:
        if self._kill is not None:
            self._kill()

    def abort(self) -> bool:
        """Call off a start that is not confirmed yet: the child never ran
        anything, and never will (SIGKILL).  False once confirmed, or confirmed ahead (L{release}: the
        process may run the job)."""
        if self.may_have_run:
            return False
        self.aborted = True
        self._stop_timer()
        self.kill()
        return True

    def signal(self, signum: int) -> bool:
        """Send C{signum} to the confirmed, still running job process."""
        if not self.confirmed or self.pid is None or self.ended_at is not None:
            return False
        try:
            self.os_kill(self.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def send(self, message: dict[str, Any]) -> bool:
        if self._write is None or not self.confirmed:
            return False
        try:
            self._write(channel.encode(message))
        except Exception:
            return False
        return True

    def request_cancel(self) -> Deferred:
        """Ask the job to cancel; fires with whether it could."""
        d: Deferred = Deferred()
        if not self.send({channel.CANCEL: True}):
            d.callback(False)
            return d
        self._cancels.append(d)
        return d

    def ended(self) -> None:
        self.ended_at = self.clock.seconds()
        self._stop_timer()
        self._write = None
        for d in self._cancels:
            d.callback(False)
        self._cancels = []
        if not self.ready.called:
            self.ready.errback(RuntimeError("job %d: the process ended before the handshake" % self.job_id))


class JobProcessProtocol(ProcessProtocol):
    """A job process started by LuxiD itself (L{spawn_direct})."""

    @property
    def _connected(self) -> IProcessTransport:
        """The transport, in methods that run only while connected."""
        return cast(IProcessTransport, self.transport)

    def __init__(self, job_channel: JobChannel, on_exit: Callable[[JobExit], Any]) -> None:
        self.channel = job_channel
        self.on_exit = on_exit

    def connectionMade(self) -> None:
        self.channel.attach(lambda data: self._connected.writeToChild(channel.FROM_PARENT_FD, data), self._kill)

    def _kill(self) -> None:
        try:
            self._connected.signalProcess("KILL")
        except Exception:
            pass

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        if childFD == channel.TO_PARENT_FD:
            self.channel.data_received(data)

    def processEnded(self, reason: Failure) -> None:
        self.channel.ended()
        code: int | None = None
        sig: int | None = None
        if reason.check(ProcessDone):
            code = 0
        elif reason.check(ProcessTerminated):
            code, sig = reason.value.exitCode, reason.value.signal
        self.on_exit(JobExit(self.channel.job_id, code, sig, self.channel.may_have_run))


def job_argv(paths: Paths, job_id: int, rpc_port: int = ports.NODED) -> list[str]:
    """The command line of a job process: its job, its root and the node daemons' port."""
    return [sys.executable, "-m", "ganeti.jobs", str(job_id), "--root", paths.root, "--rpc-port", str(rpc_port)]


def spawn_direct(
    reactor: ITimeProcessReactor, paths: Paths, job_channel: JobChannel, on_exit: Callable[[JobExit], Any], rpc_port: int = ports.NODED
) -> JobProcessProtocol:
    """Start C{python -m ganeti.jobs} with the handshake pipes on fds 3 and 4."""
    os.makedirs(paths.log_dir, exist_ok=True)
    log_fd = os.open(paths.log_file("jobs"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    try:
        protocol = JobProcessProtocol(job_channel, on_exit)
        argv = job_argv(paths, job_channel.job_id, rpc_port)
        reactor.spawnProcess(
            protocol,
            argv[0],
            argv,
            env=dict(os.environ),
            childFDs={0: "w", 1: log_fd, 2: log_fd, channel.TO_PARENT_FD: "r", channel.FROM_PARENT_FD: "w"},
        )
    finally:
        os.close(log_fd)
    return protocol
