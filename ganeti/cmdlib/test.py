"""LUs for testing the job machinery: OP_TEST_DELAY, OP_TEST_JQUEUE, OP_TEST_OS_PARAMS and OP_TEST_DUMMY.

Both speak Ganeti's socket handshake (L{ganeti.cmdlib.notify_socket}) with
the client following the job: C{gnt-debug delay --interruptible} and
C{gnt-debug test-jobqueue}.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib.base import LEVEL_NODE, Feedback, LogicalUnit, expand_node, register
from ganeti.cmdlib.jqueue_test import JQT_EXEC, JQT_EXPANDNAMES, JQT_LOGMSG, JQT_MSGPREFIX, JQT_STARTMSG
from ganeti.cmdlib.notify_socket import NotifySocket, TimeoutError
from ganeti.jobs import lifecycle
from ganeti.opcodes.typed import OpTestDelay, OpTestDummy, OpTestJqueue, OpTestOsParams
from ganeti.rpc import procedures


@register
class LUTestDelay(LogicalUnit[OpTestDelay]):
    """Sleep C{duration} seconds, C{repeat} times (once for 0), logging each round.

    As Ganeti: a duration that is not positive is refused; the nodes slept on
    are the C{on_nodes} and, with C{on_master}, the master, all of them by
    RPC C{test_delay} at the same time; with none of them the job process
    sleeps.  C{interruptible}: no RPC, the job process waits on a Unix
    socket it names in a C{delay-test} log entry for at most the duration; a
    client that connects and then sends a byte or closes ends the delay and
    the remaining repetitions.

    Locks: none with C{no_locks} (the default); otherwise the BGL shared and
    the nodes slept on exclusively.
    """

    OP_ID = "OP_TEST_DELAY"
    REQ_BGL = False

    def uses_bgl(self) -> bool:
        return not self.op.no_locks

    def check_arguments(self) -> None:
        if self.op.duration <= 0:
            raise errors.OpPrereqError("Duration must be greater than zero", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        uuids = [expand_node(self.cfg, name).uuid or "" for name in self.op.on_nodes]
        master = self.cfg.cluster.master_node
        if self.op.on_master and master and master not in uuids:
            uuids.append(master)
        self.node_uuids = uuids
        self.op = attrs.evolve(self.op, on_node_uuids=list(uuids))
        if not self.op.no_locks and uuids:
            self.needed_locks[LEVEL_NODE] = list(uuids)

    async def _uninterruptible(self) -> None:
        duration = self.op.duration
        if not self.node_uuids:
            await self.ctx.sleep(duration)
            return
        nodes = {self.cfg.nodes[u].name: self.cfg.nodes[u].primary_ip for u in self.node_uuids}
        results = await self.ctx.rpc().run(nodes, procedures.test_delay.call(duration).within(duration + 30))
        for name in nodes:
            result = results[name]
            if result.failed:
                raise errors.OpExecError("Failure during rpc call to node %s: %s" % (name, result.fail_msg))

    async def _interruptible(self) -> bool:
        """One interruptible delay; whether a client interrupted it."""
        duration = self.op.duration
        clock = self.ctx.clock
        start = clock.seconds()
        sock = NotifySocket(clock)
        path = sock.listen()
        try:
            await self.ctx.feedback([path], lifecycle.ELOG_DELAY_TEST)
            await sock.wait_connected(duration)
        except TimeoutError:
            return False
        finally:
            await sock.close()
        try:
            left = max(0.0, duration - (clock.seconds() - start))
            await self.ctx.feedback("Received connection, time to go is %d" % left)
            await sock.wait_confirmed(left)
        except TimeoutError:
            return False
        finally:
            sock.disconnect()
        await self.ctx.feedback("Interrupted, time spent waiting: %d" % (clock.seconds() - start))
        return True

    async def _delay(self) -> bool:
        if self.op.interruptible:
            return await self._interruptible()
        await self._uninterruptible()
        return False

    async def exec_(self, feedback: Feedback) -> Any:
        repeat = self.op.repeat
        if repeat == 0:
            await self._delay()
            return None
        last = repeat - 1
        for index in range(repeat):
            await self.log_info("Test delay iteration %d/%d", index, last)
            if await self._delay():
                break
        return None


@register
class LUTestJqueue(LogicalUnit[OpTestJqueue]):
    """Ganeti's job queue test: tell the client following the job, through
    the socket handshake, when names are expanded (job C{waiting}), when
    the opcode executes (C{running}), before and after each of
    C{log_messages} (logged with L{JQT_MSGPREFIX}); then fail if asked.

    Locks: the master node (only to hold a lock).  The result is C{True}.
    """

    OP_ID = "OP_TEST_JQUEUE"
    REQ_BGL = False
    #: how long a client may take to connect, then to confirm (Ganeti's values)
    CONNECT_TIMEOUT = 20.0
    CONFIRM_TIMEOUT = 60.0

    def uses_bgl(self) -> bool:
        return False

    def expand_names(self) -> None:
        master = self.cfg.cluster.master_node
        if master:
            self.needed_locks[LEVEL_NODE] = [master]
        self._expand_notified = False

    async def probe(self) -> None:
        # runs after expand_names, before the locks, while the job is waiting
        if self.op.notify_waitlock and not self._expand_notified:
            self._expand_notified = True
            await self._notify(JQT_EXPANDNAMES, None, errors.OpPrereqError)
        await self.log_info("Expanding names")

    async def _notify(self, test: str, arg: Any, errcls: type[Exception]) -> None:
        """Name a socket in a C{jqueue-test} entry; wait until the client
        connected and confirmed (C{errcls} when it does not)."""
        sock = NotifySocket(self.ctx.clock)
        path = sock.listen()
        try:
            await self.ctx.feedback([path, test, arg], lifecycle.ELOG_JQUEUE_TEST)
            try:
                await sock.wait_connected(self.CONNECT_TIMEOUT)
            except TimeoutError:
                raise errcls("Client didn't connect in time (%s)" % test) from None
        finally:
            await sock.close()
        try:
            await sock.wait_confirmed(self.CONFIRM_TIMEOUT)
        except TimeoutError:
            raise errcls("Client failed to confirm notification (%s)" % test) from None
        finally:
            sock.disconnect()

    async def exec_(self, feedback: Feedback) -> Any:
        if self.op.notify_exec:
            await self._notify(JQT_EXEC, None, errors.OpExecError)
        await self.log_info("Executing")
        messages = self.op.log_messages
        if messages:
            await self._notify(JQT_STARTMSG, len(messages), errors.OpExecError)
            for index, message in enumerate(messages):
                await self.log_info("Sending log message %s", index + 1)
                await self.ctx.feedback(JQT_MSGPREFIX + message)
                await self._notify(JQT_LOGMSG, index + 1, errors.OpExecError)
        if self.op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        return True


@register
class LUTestOsParams(LogicalUnit[OpTestOsParams]):
    """Ganeti's C{LUTestOsParams}: the secret OS parameters reached the job
    (logged back, as Ganeti does, for the test to read); none is an error.
    No locks."""

    OP_ID = "OP_TEST_OS_PARAMS"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        if not self.op.osparams_secret:
            raise errors.OpExecError("Opcode needs secret parameters")
        await self.ctx.feedback("Secret OS parameters: %s" % (self.op.osparams_secret,))
        return None


@register
class LUTestDummy(LogicalUnit[OpTestDummy]):
    """Ganeti's C{OP_TEST_DUMMY} (its unit tests' opcode; Ganeti runs it
    without a logical unit): log C{messages}, then fail if C{fail}, submit
    C{submit_jobs} (the result lists them), or answer C{result}.  No locks."""

    OP_ID = "OP_TEST_DUMMY"
    REQ_BGL = False

    def check_arguments(self) -> None:
        messages = self.op.messages
        if messages is not None and not (isinstance(messages, list) and all(isinstance(m, str) for m in messages)):
            raise errors.OpPrereqError("'messages' must be a list of strings", errors.ECODE_INVAL)
        jobs = self.op.submit_jobs
        if jobs is not None and not (isinstance(jobs, list) and all(
                isinstance(job, list) and job and all(isinstance(op, dict) for op in job) for job in jobs)):
            raise errors.OpPrereqError("'submit_jobs' must be a list of jobs, each a list of opcodes",
                                       errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        for message in self.op.messages or []:
            await self.ctx.feedback(message)
        if self.op.fail:
            raise errors.OpExecError("Opcode failed as requested (fail)")
        if self.op.submit_jobs:
            return lifecycle.ResultWithJobs(list(self.op.submit_jobs))
        return self.op.result
