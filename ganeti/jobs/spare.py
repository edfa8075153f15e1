"""A spare job process: forked by the fork server before its job is known.

The fork server (L{ganeti.luxid.forkserver}) keeps one spare ready: a
child that has already paid for what does not depend on the job (the fork
and its first copy-on-write faults, its own reactor, the connection to
WConfD and a first read of the config, its node RPC client) and waits on a socket for its
assignment, C{{"job": id, "lockfile": path}} with the two handshake pipe
ends (C{SCM_RIGHTS}).  Then it runs exactly the handshake and job of
L{ganeti.jobs.process}: its own lock file (at the path LuxiD named, which
its job file already holds when the spare was planned at the submission:
the confirmation then comes at once), sent to LuxiD, nothing run before
LuxiD's confirmation.
End of file on the socket (the fork server is gone): it exits quietly.

A spare's connection is only a connection: no owner is registered and no
lock asked for before the job is known.  A connection that broke for good
while the spare waited is made anew for the job.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any, Iterator

import orjson

from ganeti.jobs import blanks, channel, process, trace
from ganeti.jobs.wconfdlink import WConfdLink
from ganeti.paths import Paths

#: seconds a spare waits for its job before it connects to its own node's NodeD (L{warm_node_rpc})
WARM_AFTER = 0.02


class _Assignment:
    """Reads the one assignment message from the fork server (an
    C{IReadDescriptor}); L{waiting} fires with C{(job id, [fd, fd], lock
    file path or None)}, or C{None} at end of file or on a message that is not one."""

    def __init__(self, reactor: Any, sock: socket.socket) -> None:
        from twisted.internet.defer import Deferred

        self.reactor = reactor
        self.sock = sock
        self.waiting: Deferred = Deferred()
        sock.setblocking(False)
        reactor.addReader(self)

    def fileno(self) -> int:
        return self.sock.fileno()

    def logPrefix(self) -> str:
        return "spare"

    def connectionLost(self, reason: Any) -> None:
        self._done(None)

    def doRead(self) -> None:
        try:
            message, fds, _flags, _addr = socket.recv_fds(self.sock, 4096, 2)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            message, fds = b"", []
        lock_path = None
        try:
            decoded = orjson.loads(message) if message else {}
            job_id = int(decoded["job"]) if message else None
            lock_path = decoded.get("lockfile") if isinstance(decoded.get("lockfile"), str) else None
            if job_id is not None and len(fds) != 2:
                raise ValueError("expected two pipe ends, got %d" % len(fds))
        except (ValueError, KeyError, TypeError) as e:
            print("spare job process: bad assignment %r: %s" % (message[:100], e), file=sys.stderr, flush=True)
            job_id = None
        if job_id is None:
            for fd in fds:
                os.close(fd)
            self._done(None)
        else:
            self._done((job_id, fds, lock_path))

    def _done(self, result: Any) -> None:
        if self.waiting.called:
            return
        self.reactor.removeReader(self)
        self.sock.close()
        self.waiting.callback(result)


async def warm_node_rpc(reactor: Any, paths: Paths, rpc_port: int) -> None:
    """Call C{version} on this node's NodeD with the process's node RPC client
    (L{ganeti.cmdlib.base.process_rpc}): the connection (to NodeD's Unix
    socket, L{ganeti.rpc.local}) and the client's first-use costs are paid
    before the job, whose calls to this node find the
    connection open in the client's pool, or wait for the call still under
    way (L{ganeti.rpc.client.RpcClient.warm}) instead of opening another.
    Nothing is run that changes anything; a NodeD that does not answer leaves
    the job to connect itself.  A spare makes the call once it has waited
    L{WARM_AFTER} seconds: in a burst of jobs the spares are taken at once,
    and a job without node RPCs would pay for it; a spare forked while the
    job before runs would slow that job down."""
    from ganeti.cmdlib.base import process_rpc
    from ganeti.daemons import node_address
    from ganeti.rpc import procedures

    address = node_address(paths)
    if not address:
        return
    try:
        await process_rpc(reactor, paths, rpc_port).warm(address, address, procedures.version.call().within(5))
    except Exception:  # (its client closed when the spare ends first) the job connects for itself
        pass


def prepare(reactor: Any, paths: Paths, rpc_port: int) -> None:
    """Make, while the spare waits, the process's node RPC client (no
    connection: the TLS policy following the cluster's certificate files,
    the HTTP agent and its pool; 0.85 ms in a forked spare, whose TLS
    context the fork server built), which a job's first call to a node
    made when the spare was taken before it warmed up (L{warm_node_rpc})."""
    from ganeti.cmdlib.base import process_rpc

    try:
        process_rpc(reactor, paths, rpc_port)
    except Exception:  # (no certificate yet, say) the job makes it when it calls, and says why
        pass


def _make_ahead(result: Any, reactor: Any, link: WConfdLink, steps: Iterator[None], assigned: Any) -> Any:
    """Once the spare is connected and has read the config, make the files its job's path would make
    (L{blanks.ahead}), one per turn of the reactor until its job comes (its reading is never held up
    longer than one file takes).  C{result}: L{WConfdLink.deferred}'s, passed on."""

    def step() -> None:
        if not assigned.called and next(steps, StopIteration) is not StopIteration:
            reactor.callLater(0, step)

    ready = link.prefetched[0] if link.prefetched else None
    if ready is None:
        reactor.callLater(0, step)
    else:
        ready.addBoth(lambda r: (reactor.callLater(0, step), r)[1])
    return result


def run(paths: Paths, sock: socket.socket, rpc_port: int) -> int:
    """Wait for a job (L{_Assignment}) with the WConfD connection made, then
    run it as L{process.run} does; returns the exit code.  File descriptors
    3 and 4 must be taken (by anything) when this is called: the handshake
    pipes go there, and the reactor must not get them first."""
    from twisted.internet import defer, task

    from ganeti.cmdlib.base import close_process_rpc

    codes: list[int] = []
    held: list[tuple[int, str]] = []
    premade: list[tuple[int, str]] = []  # the spare's lock file (L{blanks.ahead}), until its job takes it

    async def main(reactor: Any) -> None:
        link = WConfdLink(reactor, paths)
        reactor.callLater(0, prepare, reactor, paths, rpc_port)
        warming = reactor.callLater(WARM_AFTER, lambda: defer.ensureDeferred(warm_node_rpc(reactor, paths, rpc_port)))
        waiting = _Assignment(reactor, sock).waiting
        link.deferred.addBoth(_make_ahead, reactor, link, blanks.ahead(paths, premade), waiting)
        assignment = await waiting
        if warming.active():  # taken at once (a burst): its job would not wait for the call
            warming.cancel()
        if assignment is None:  # the fork server is gone: no job for this spare (what it made: removed at the end)
            await close_process_rpc()
            await link.close()
            codes.append(process.EXIT_DONE)
            return
        job_id, fds, named = assignment
        trace.hop(job_id, "spare.assigned")
        os.dup2(fds[0], channel.TO_PARENT_FD, inheritable=False)
        os.dup2(fds[1], channel.FROM_PARENT_FD, inheritable=False)
        for fd in fds:
            os.close(fd)
        try:
            held.append(process.announce(paths, job_id, channel.TO_PARENT_FD, named, premade.pop() if premade else None))
        except channel.ChannelError as e:
            print("job %d: not confirmed by LuxiD (%s): not running it" % (job_id, e), file=sys.stderr, flush=True)
            await link.close()
            codes.append(process.EXIT_NOT_CONFIRMED)
            return
        lock_path = held[0][1]  # LuxiD's choice, unless it named none (or not one of this job's)
        try:
            codes.append(await process.execute(reactor, paths, job_id, lock_path, channel.TO_PARENT_FD,
                                               channel.FROM_PARENT_FD, rpc_port, link=link))
        except process.NotConfirmed as e:
            print("job %d: not confirmed by LuxiD (%s): not running it" % (job_id, e), file=sys.stderr, flush=True)
            codes.append(process.EXIT_NOT_CONFIRMED)
        except Exception as e:
            codes.append(process.failure_exit(job_id, e))

    try:
        process.install_reactor()
        task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
    except SystemExit:
        pass
    finally:
        for lock_fd, lock_path in held + premade:
            process.remove_quietly(lock_path)
            os.close(lock_fd)
        blanks.drop()
    return codes[0] if codes else process.EXIT_FAILED
