"""The job process: C{python -m ganeti.jobs JOB_ID --root DIR}.

It shows it is alive by holding a flock on its own lock file, proves that
to LuxiD in the handshake of L{ganeti.jobs.channel}, then registers with
WConfD as owner C{(job id, lock file)} and runs the job's opcodes through
L{ganeti.jobs.processor.Processor}, writing its job file as it goes.
SIGTERM kills the job (L{install_kill_handler}); a second SIGTERM ends
the process at once.  When it dies, however it
dies, the kernel drops the flock: WConfD frees its locks and LuxiD marks
the job failed (canceled, when LuxiD killed it on request).

A restart of WConfD does not fail the job: the client reconnects for up to
L{ganeti.wconfd.client.JOB_RECONNECT_FOR} seconds, registers the owner
again, re-sends the lock request it waited for and every call left
unanswered (see L{ganeti.wconfd.client}).  Unless the node has seen a newer
master epoch than the process's own (L{exit_if_fenced}): then the process
ends at once and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any, cast

from twisted.internet.interfaces import IReactorFromThreads, IReactorTime, ITransport
from twisted.internet.protocol import Protocol

from ganeti import lockfile, ports, serializer
from ganeti.jobs import blanks, channel, space, trace
from ganeti.jobs.orphans import is_job_lock_path, job_lock_path
from ganeti.paths import Paths
from ganeti.reactors import IReactor

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_NOT_CONFIRMED = 3
EXIT_DISK_FULL = space.EXIT_DISK_FULL
CONFIRM_TIMEOUT = 60.0
#: exit code of a process ended by a second SIGTERM (the job is recorded as
#: LuxiD finds it: a dead job)
EXIT_TERMINATED = 143
#: seconds a finished job waits for WConfD to take back its locks; WConfD
#: frees them anyway once this process is gone, so a WConfD that is down
#: for good does not keep the process (and its kill) waiting
FREE_LOCKS_TIMEOUT = 10.0
#: exit code of a job process that found its node under a newer master (L{exit_if_fenced})
EXIT_FENCED = 4


def create_lockfile(paths: Paths, job_id: int, path: str | None = None,
                    held: tuple[int, str] | None = None) -> tuple[int, str]:
    """Create and hold this job process's lock file: C{path} when LuxiD chose
    it (and it is one of this job's in the lock directory), else a new name.
    C{held}: the spare's lock file, held, renamed to it (L{blanks.claim})."""
    if path is None or not is_job_lock_path(paths, job_id, path):
        path = job_lock_path(paths, job_id)
    claimed = blanks.claim(held, path) if held is not None else None
    return claimed or (lockfile.hold(path, create_new=True), path)


class NotConfirmed(Exception):
    """LuxiD did not confirm the handshake: the job must not run."""


def announce(paths: Paths, job_id: int, to_parent: int, path: str | None = None,
             held: tuple[int, str] | None = None) -> tuple[int, str]:
    """Step 2 of the handshake: hold a lock file of our own (at C{path} when
    LuxiD named one; C{held}: the spare's, renamed) and send its path; raises
    L{channel.ChannelError} when it cannot be sent."""
    trace.hop(job_id, "child.start")
    lock_fd, lock_path = create_lockfile(paths, job_id, path, held)
    try:
        channel.write_blocking(to_parent, {channel.LOCKFILE: lock_path, "pid": os.getpid()})
        trace.hop(job_id, "child.lockfile_sent")
    except OSError as e:
        remove_quietly(lock_path)
        os.close(lock_fd)
        raise channel.ChannelError(str(e)) from e
    return lock_fd, lock_path


def fenced_reason(paths: Paths, mine: int | None) -> str | None:
    """Why a job process of master epoch C{mine} must not go on: this node
    has since seen a newer master (C{None}: it has not, or the process has
    no epoch)."""
    from ganeti.ha.epoch import read_epoch

    if mine is None:
        return None
    seen = read_epoch(paths)
    if seen <= mine:
        return None
    return "this node has seen master epoch %d since this job started under epoch %d" % (seen, mine)


def exit_if_fenced(paths: Paths, job_id: int, mine: int | None, lock_path: str | None = None,
                   exit: Any = os._exit) -> None:
    """End the process at once, writing nothing, when its master was replaced.

    A job process cut off from its master (a partition, a pause) outlives
    its master's mastership; the new master has settled its job (ended in
    error "master failover", or run it again).  Whatever it does next, a
    config change through a WConfD that is not its master's, or its job
    file, could only contradict what the new master recorded (a success
    whose change is not in the new master's config), so it ends without a
    trace.  Checked before every job file write and before every attempt
    to reach WConfD again."""
    why = fenced_reason(paths, mine)
    if why is None:
        return
    try:
        print("job %d: stopped without recording anything: %s" % (job_id, why), file=sys.stderr, flush=True)
    except OSError:
        pass
    if lock_path is not None:
        remove_quietly(lock_path)
    exit(EXIT_FENCED)


def job_file(paths: Paths, job_id: int) -> str:
    return os.path.join(paths.queue_dir, "job-%d" % job_id)


def save_job(paths: Paths, job: Any, last: bytes | None = None, to_parent: int | None = None) -> bytes:
    """Write the job file atomically; fsync only once the job has ended.
    Returns what the file holds; nothing is written when that is C{last}
    (what this process wrote last: the final state is saved by the
    processor's last opcode, its end and this process's end, once).

    Intermediate states (waiting, running, log lines) survive a crash of
    any process; only a power loss can take them, and then the job is
    failed as a dead one on restart, which it would be anyway.

    A write that finds the disk full sends the job as it stands to LuxiD
    first (on C{to_parent}, see L{tell_unsaved}).
    """
    data: bytes = job.to_json()
    if data == last:
        return data
    try:
        serializer.write_file(job_file(paths, job.id), data, mode=0o640, durable=job.finalized,
                              blank=blanks.take(paths.queue_dir))
    except OSError as e:
        if to_parent is not None and space.is_disk_full(e):
            tell_unsaved(to_parent, job)
        raise
    trace.hop(job.id, "child.saved_" + job.status)
    return data


def tell_unsaved(to_parent: int, job: Any) -> None:
    """Send LuxiD the job this process cannot write (the disk is full): LuxiD
    records it with its space reserve, so an opcode that succeeded before
    is not reported failed.  Best effort: a job too big for one message, or
    a pipe that does not take it, leaves LuxiD to fail the job as before."""
    data = channel.encode({channel.UNSAVED: job.to_dict()})
    if len(data) > channel.MAX_LINE:
        return
    try:
        while data:
            data = data[os.write(to_parent, data):]
    except OSError:
        pass


async def execute(
    reactor: IReactor, paths: Paths, job_id: int, lock_path: str, to_parent: int, from_parent: int, rpc_port: int,
    confirm_timeout: float = CONFIRM_TIMEOUT, link: Any = None,
) -> int:
    """Wait for LuxiD's confirmation (steps 3-4 of the handshake), then run
    the job; returns the exit code.  While LuxiD records the lock file, this
    process connects to WConfD, registers as owner C{(job id, lock file)}
    and reads the config (nothing that changes anything: the owner holds no
    lock yet); the job file is read and the job run only once confirmed.
    C{link}: the L{ganeti.jobs.wconfdlink.WConfdLink} a spare made ready (a new
    one when it is gone).

    @raise NotConfirmed: no confirmation within C{confirm_timeout} seconds,
        or the pipe from LuxiD closed first: nothing ran
    """
    from twisted.internet.defer import Deferred, TimeoutError
    from twisted.internet.stdio import StandardIO

    from ganeti.cmdlib.base import close_process_rpc
    from ganeti.ha.epoch import process_epoch
    from ganeti.jobs import followup
    from ganeti.jobs.model import QueuedJob, timestamp
    from ganeti.jobs.processor import Processor
    from ganeti.jobs.wconfdlink import WConfdLink
    from ganeti.locking import Owner

    trace.hop(job_id, "child.reactor")
    trace.current_job = job_id
    control = _Control((lock_path, os.getpid()))
    # mypy reads the Windows StandardIO (no stdin/stdout file descriptors) from twisted.internet.stdio
    StandardIO(control, stdin=from_parent, stdout=to_parent, reactor=reactor)  # type: ignore[call-arg]
    confirmed = control.confirmed.addTimeout(confirm_timeout, reactor)
    if link is None or not link.usable():
        if link is not None:
            link.close()
        link = WConfdLink(reactor, paths)  # connects and reads the config
    connecting = link.deferred
    owner = Owner(job_id, lock_path, os.getpid())
    registered: list[Deferred] = []

    def register(client: Any) -> Any:
        trace.hop(job_id, "child.wconfd_connected")
        # the owner holds no lock until the job runs: registering it changes nothing either (an
        # unconfirmed process exits, and WConfD forgets the owner of its closed connection)
        registered.append(Deferred.fromCoroutine(client.register_owner(owner, with_config=True)))
        registered[0].addCallback(lambda _: trace.hop(job_id, "child.registered"))
        return client

    connecting.addCallback(register)
    try:
        clear = await confirmed
    except (NotConfirmed, TimeoutError) as e:
        for d in registered:
            d.addErrback(lambda _f: None)
        connecting.cancel()
        connecting.addCallbacks(lambda client: client.close(), lambda _f: None)
        raise NotConfirmed(str(e) or "no confirmation within %ss" % confirm_timeout) from e
    trace.hop(job_id, "child.confirmed")
    client = await connecting
    mine = process_epoch()
    client.before_reconnect = lambda: exit_if_fenced(paths, job_id, mine, lock_path)
    await registered[0]
    for d in link.prefetched:
        await d
    job = QueuedJob.from_dict(serializer.read_json(job_file(paths, job_id)))  # as LuxiD recorded it

    written: list[bytes | None] = [None]

    async def save(current: QueuedJob) -> None:
        exit_if_fenced(paths, job_id, mine, lock_path)
        written[0] = save_job(paths, current, written[0], to_parent)

    processor = Processor(
        job, client, owner, save=save, clock=reactor, paths=paths,
        submit_jobs=followup.luxi_submitter(reactor, paths.luxi_socket), rpc_port=rpc_port,
        private=clear if isinstance(clear, dict) else {},
    )
    control.attach(processor)
    install_kill_handler(reactor, processor)
    if job.start_timestamp is None:
        job.start_timestamp = timestamp()
    try:
        await processor.run()
    finally:
        if job.finalized and job.end_timestamp is None:
            job.end_timestamp = timestamp()
        exit_if_fenced(paths, job_id, mine, lock_path)
        written[0] = save_job(paths, job, written[0], to_parent)
        try:
            await release_locks(reactor, client, owner)
            trace.hop(job_id, "child.locks_freed")
        except Exception as e:  # WConfD frees them anyway once this process is gone
            print("job %d: could not release its locks: %s" % (job_id, e), file=sys.stderr, flush=True)
        finally:
            await client.close()
            await close_process_rpc()
    return EXIT_DONE


async def release_locks(clock: IReactorTime, client: Any, owner: Any, timeout: float = FREE_LOCKS_TIMEOUT) -> None:
    """Give the job's locks back, waiting at most C{timeout} seconds.

    @raise defer.TimeoutError: WConfD did not answer in time (it frees the
        locks of this process when it exits)
    """
    from twisted.internet import defer

    await defer.Deferred.fromCoroutine(client.free_locks(owner)).addTimeout(timeout, clock)


def install_kill_handler(reactor: IReactorFromThreads, processor: Any, exit: Any = os._exit) -> None:
    """SIGTERM (LuxiD's C{CancelJob} with C{kill}) kills the job: the
    processor stops what runs, records the job canceled, frees its locks,
    and the process exits (instead of Twisted's default: stop the reactor
    in the middle of the job).  A second SIGTERM exits at once with
    L{EXIT_TERMINATED}: whatever the first one waits on (a WConfD that is
    gone), a repeated kill is obeyed."""
    signals: list[int] = []

    def terminated(signum: int, _frame: Any) -> None:
        signals.append(signum)
        if len(signals) > 1:
            exit(EXIT_TERMINATED)
            return
        reactor.callFromThread(processor.kill)

    signal.signal(signal.SIGTERM, terminated)


class _Control(Protocol):
    """Messages from LuxiD: the confirmation (L{confirmed} fires, or fails
    with L{NotConfirmed}), then, while the job runs, cancel and priority
    (kept until the processor is L{attach}ed)."""

    @property
    def _connected(self) -> ITransport:
        """The transport, in methods that run only while connected."""
        return cast(ITransport, self.transport)

    def __init__(self, me: tuple[str, int] | None = None) -> None:
        from twisted.internet.defer import Deferred

        #: this process's lock file and pid: a confirmation addressed to another (L{channel.IF}) is not its own
        self.me = list(me) if me is not None else None
        self.processor: Any = None
        self.decoder = channel.LineDecoder()
        self.confirmed: Deferred = Deferred()
        self._pending: list[dict[str, Any]] = []

    def attach(self, processor: Any) -> None:
        self.processor = processor
        pending, self._pending = self._pending, []
        for message in pending:
            self._handle(message)

    def dataReceived(self, data: bytes) -> None:
        try:
            messages = self.decoder.feed(data)
        except channel.ChannelError as e:
            self._unconfirmed(str(e))
            return
        for message in messages:
            if not self.confirmed.called:
                if message.get(channel.CONFIRM) is True and channel.IF in message and message[channel.IF] != self.me:
                    continue  # (for the process LuxiD planned; its own confirmation follows the announcement)
                if message.get(channel.CONFIRM) is True:
                    self.confirmed.callback(message.get(channel.PRIVATE) or {})
                else:
                    self._unconfirmed("expected a confirmation, got %r" % (message,))
            elif self.processor is None:
                self._pending.append(message)
            else:
                self._handle(message)

    def connectionLost(self, reason: Any = None) -> None:
        self._unconfirmed("the other side closed the channel")

    def _unconfirmed(self, why: str) -> None:
        if not self.confirmed.called:
            self.confirmed.errback(NotConfirmed(why))

    def _handle(self, message: dict[str, Any]) -> None:
        if message.get(channel.CANCEL):
            cancelled = bool(self.processor.request_cancel())
            self._connected.write(channel.encode({channel.CANCELLED: cancelled}))
        elif isinstance(message.get(channel.PRIORITY), int):
            self.processor.change_priority(message[channel.PRIORITY])


def run(
    job_id: int,
    paths: Paths,
    to_parent: int = channel.TO_PARENT_FD,
    from_parent: int = channel.FROM_PARENT_FD,
    confirm_timeout: float = CONFIRM_TIMEOUT,
    rpc_port: int = ports.NODED,
) -> int:
    """Handshake, then run the job under a fresh reactor; returns the exit code."""
    try:
        lock_fd, lock_path = announce(paths, job_id, to_parent)
    except channel.ChannelError as e:
        print("job %d: not confirmed by LuxiD (%s): not running it" % (job_id, e), file=sys.stderr, flush=True)
        return EXIT_NOT_CONFIRMED
    from twisted.internet import defer, task

    codes: list[int] = []

    async def main(reactor: Any) -> None:
        try:
            codes.append(await execute(reactor, paths, job_id, lock_path, to_parent, from_parent, rpc_port,
                                       confirm_timeout))
        except NotConfirmed as e:
            print("job %d: not confirmed by LuxiD (%s): not running it" % (job_id, e), file=sys.stderr, flush=True)
            codes.append(EXIT_NOT_CONFIRMED)
        except Exception as e:
            codes.append(failure_exit(job_id, e))

    try:
        install_reactor()
        task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
    except SystemExit:
        pass
    finally:
        remove_quietly(lock_path)
        os.close(lock_fd)
    return codes[0] if codes else EXIT_FAILED


def install_reactor() -> None:
    """Install the default reactor, unless one is, without importing C{twisted.internet.reactor}
    (a module that only does this): a forked job process does not search for and load it (0.2-0.3 ms)."""
    if "twisted.internet.reactor" not in sys.modules:
        from twisted.internet import default

        default.install()


def failure_exit(job_id: int, error: BaseException) -> int:
    """The exit code of a job process that C{error} ended, after saying
    why on stderr: L{EXIT_DISK_FULL} when a write found the filesystem full
    (the error or one it was raised from), else L{EXIT_FAILED} with the
    traceback.  Saying it may fail too (standard error is a log file on the
    same full disk): the exit code is what counts."""
    import traceback

    full = any(space.is_disk_full(cause) for cause in _causes(error))
    try:
        if full:
            print("job %d: cannot write its files: %s" % (job_id, error), file=sys.stderr, flush=True)
        else:
            traceback.print_exception(error)
    except OSError:
        pass
    return EXIT_DISK_FULL if full else EXIT_FAILED


def _causes(error: BaseException) -> list[BaseException]:
    """C{error} and the exceptions it was raised from or while handling."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ganeti.jobs", description="Run one job (started by ganeti-luxid).")
    parser.add_argument("job_id", type=int)
    parser.add_argument("--root", help="root of the node's files (default: $GANETI_ROOT or /)")
    parser.add_argument(
        "--confirm-timeout", type=float, default=CONFIRM_TIMEOUT, help="seconds to wait for LuxiD's confirmation"
    )
    parser.add_argument(
        "--rpc-port", type=int, default=ports.NODED, help="port of the node daemons (LuxiD's --rpc-port)"
    )
    args = parser.parse_args(argv)
    return run(args.job_id, Paths.from_option(args.root), confirm_timeout=args.confirm_timeout, rpc_port=args.rpc_port)
