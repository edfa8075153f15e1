"""C{gnt-debug test-jobqueue}: Ganeti's test of the job queue, run against the cluster.

As Ganeti's C{TestJobqueue}, in its order and with its messages:

  1. job submission: a job with an opcode of a priority outside the
     submittable ones (-10, 0, 10) is refused, alone or among other jobs;
  2. job dependencies: a single job may not depend on a relative job id;
     five jobs with relative dependencies run in the order they name, with
     the ids resolved;
  3. OP_TEST_JQUEUE in four modes (success, several successes, failure,
     partial failure): the opcode names a Unix socket in its job log at
     each step; the client connects (the LU waits for that), checks the
     job's status (waiting while names are expanded, running while it
     executes) and the test messages logged, then the final job and opcode
     statuses.
"""

from __future__ import annotations

import argparse
import socket
import time
from typing import Any

from ganeti import errors
from ganeti.client.command import EXIT_SUCCESS, Context
from ganeti.client.jobs import JobExecutor, JobReporter, opcode, poll_job
from ganeti.cmdlib.jqueue_test import JQT_EXEC, JQT_EXPANDNAMES, JQT_LOGMSG, JQT_MSGPREFIX, JQT_STARTMSG
from ganeti.jobs import lifecycle

PRIO_SUBMIT_VALID = sorted(lifecycle.PRIO_SUBMIT_VALID)
PRIO_LOWEST, PRIO_HIGHEST = lifecycle.PRIO_LOWEST, lifecycle.PRIO_HIGHEST
JQT_ALL = (JQT_EXPANDNAMES, JQT_EXEC, JQT_LOGMSG, JQT_STARTMSG)
#: seconds the client waits to connect to a test socket
SOCKET_TIMEOUT = 30.0


def _delay(ctx: Context, **params: Any) -> dict[str, Any]:
    return opcode(ctx, "OP_TEST_DELAY", duration=params.pop("duration", 0), **params)


def _job_submission(ctx: Context, opts: argparse.Namespace) -> None:
    ctx.out("Testing job submission")
    cases = [(0, 0, PRIO_LOWEST), (0, 0, PRIO_HIGHEST)]
    for priority in sorted(set(PRIO_SUBMIT_VALID) | {PRIO_LOWEST, PRIO_HIGHEST}):
        for offset in (-1, +1):
            cases += [(0, 0, priority + offset), (3, 0, priority + offset), (0, 3, priority + offset),
                      (4, 2, priority + offset)]
    for before, after, bad in cases:
        ops = [_delay(ctx) for _ in range(before)]
        wrong = _delay(ctx)
        wrong["priority"] = bad
        ops += [wrong] + [_delay(ctx) for _ in range(after)]
        try:
            ctx.client().submit_job(ops)
        except errors.GenericError as e:
            if opts.debug:
                ctx.out("Ignoring error for 'wrong priority' test: %s" % e)
        else:
            raise errors.OpExecError("Submitting opcode with priority %s did not fail when it should (allowed are"
                                     " %s)" % (bad, ", ".join(map(str, PRIO_SUBMIT_VALID))))
        dry = _delay(ctx)
        dry["dry_run"] = True
        jobs = [[_delay(ctx), _delay(ctx), dry], ops]
        try:
            answers = ctx.client().submit_many_jobs(jobs)
        except errors.GenericError as e:
            if opts.debug:
                ctx.out("Ignoring error for 'wrong priority' test: %s" % e)
        else:
            raise errors.OpExecError("Submitting manyjobs with an incorrect one did not fail when it should: %s"
                                     % (answers,))
    ctx.out("Job submission tests were successful")


def _job_dependency(ctx: Context, opts: argparse.Namespace) -> None:
    ctx.out("Testing job dependencies")
    client = ctx.client()
    try:
        job_id = client.submit_job([_delay(ctx, depends=[[-1, None]])])
    except errors.GenericError as e:
        if opts.debug:
            ctx.out("Ignoring error for 'wrong dependencies' test: %s" % e)
    else:
        try:
            poll_job(client, job_id, JobReporter(ctx))
        except errors.GenericError as e:
            if opts.debug:
                ctx.out("Ignoring error for 'wrong dependencies' test: %s" % e)
        else:
            raise errors.OpExecError("Submitting plain opcode with relative job ID did not fail as expected")
    success = lifecycle.SUCCESS
    jobs = [
        [_delay(ctx, duration=1)],
        [_delay(ctx, duration=1, depends=[[-1, []]])],
        [_delay(ctx, duration=1, depends=[[-2, [success]]])],
        [_delay(ctx, duration=1, depends=[])],
        [_delay(ctx, duration=1, depends=[[-2, [success]]])],
    ]
    result = client.submit_many_jobs(jobs)
    if not (isinstance(result, list) and len(result) == len(jobs)
            and all(isinstance(row, list) and len(row) == 2 and row[0] is True for row in result)):
        raise errors.OpExecError("Job submission doesn't match [[true, job id], ...]: %s" % (result,))
    executor = JobExecutor(ctx)
    for ok, job_id in result:
        executor.add_job_id(None, ok, job_id)
    outcomes = executor.get_results()
    if not all(ok for ok, _ in outcomes):
        raise errors.OpExecError("At least one of the submitted jobs failed: %s" % (outcomes,))
    ids = [job_id for _, job_id in result]
    data = [row or [None, [], []] for row in client.query_jobs(ids, ["id", "opexec", "ops"])]
    opexec = [row[1] for row in data]
    ops = [row[2] for row in data]
    for index, wanted in ((1, ids[0]), (2, ids[0]), (4, ids[2])):
        depends = ops[index][0].get("depends") or []
        if not depends or int(depends[0][0]) != int(wanted):
            raise errors.OpExecError("Job %s's opcode doesn't depend on correct job ID (%s)" % (index, wanted))

    def when(value: Any) -> float:
        return float(value[0]) + float(value[1]) / 1e6

    start = [when(value[0]) for value in opexec]
    if not (start[0] <= start[1] and start[0] <= start[2] and start[2] <= start[4]):
        raise errors.OpExecError("Jobs did not run in correct order: %s" % (data,))
    ctx.out("Job dependency tests were successful")


class _TestReporter(JobReporter):
    """Follows a test job: answers its socket handshakes, collects its test messages."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.all_messages: list[str] = []
        self._messages: list[str] | None = None
        self.job_id: int | None = None

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None:
        if self.job_id is None:
            self.job_id = job_id
        elif self.job_id != job_id:
            raise errors.ProgrammerError("The same reporter instance was used for more than one job")
        if log_type == lifecycle.ELOG_JQUEUE_TEST:
            sockname, test, arg = message
            self._handshake(job_id, sockname, test, arg)
            return
        if log_type == lifecycle.ELOG_MESSAGE and isinstance(message, str) and message.startswith(JQT_MSGPREFIX):
            if self._messages is None:
                raise errors.OpExecError("Received test message without a preceding start message")
            text = message[len(JQT_MSGPREFIX):]
            self._messages.append(text)
            self.all_messages.append(text)
            return
        super().log(job_id, serial, timestamp, log_type, message)

    def _handshake(self, job_id: int, sockname: str, test: str, arg: Any) -> None:
        if test not in JQT_ALL:
            raise errors.OpExecError("Received invalid test message %s" % test)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(SOCKET_TIMEOUT)
            sock.connect(sockname)
            rows = self.ctx.client().query_jobs([job_id], ["status"])
            if not rows or not rows[0]:
                raise errors.OpExecError("Can't find job %s" % job_id)
            status = rows[0][0]
            if test == JQT_EXPANDNAMES and status != lifecycle.WAITING:
                raise errors.OpExecError("Job status while expanding names is '%s', not '%s' as expected"
                                         % (status, lifecycle.WAITING))
            if test in (JQT_EXEC, JQT_LOGMSG) and status != lifecycle.RUNNING:
                raise errors.OpExecError("Job status while executing opcode is '%s', not '%s' as expected"
                                         % (status, lifecycle.RUNNING))
            if test == JQT_STARTMSG:
                self._messages = []
            elif test == JQT_LOGMSG and len(self._messages or []) != arg:
                raise errors.OpExecError("Received %s test messages when %s are expected"
                                         % (len(self._messages or []), arg))
        finally:
            sock.close()


def _jqueue_mode(ctx: Context, mode: int) -> None:
    messages = ["Testing mode %s" % mode, "Hello World", "A", "", "B", "Foo|bar|baz",
                time.strftime("%Y-%m-%d_%H_%M_%S")]

    def op(fail: bool) -> dict[str, Any]:
        return opcode(ctx, "OP_TEST_JQUEUE", notify_waitlock=True, notify_exec=True, log_messages=messages,
                      fail=fail)

    ok, error = lifecycle.SUCCESS, lifecycle.ERROR
    if mode == 3:
        ctx.out("Testing partial job failure")
        ops = [op(False), op(False), op(True), op(False)]
        expect_messages, expect_opstatus, fail = 3 * messages, [ok, ok, error, error], True
    elif mode == 1:
        ctx.out("Testing multiple successful opcodes")
        ops = [op(False), op(False)]
        expect_messages, expect_opstatus, fail = 2 * messages, [ok, ok], False
    else:
        fail = mode == 2
        ctx.out("Testing job failure" if fail else "Testing job success")
        ops = [op(fail)]
        expect_messages, expect_opstatus = messages, [error if fail else ok]
    client = ctx.client()
    job_id = client.submit_job(ops)
    reporter = _TestReporter(ctx)
    results: Any = None
    try:
        results = poll_job(client, job_id, reporter)
    except errors.OpExecError as e:
        if not fail:
            raise
        ctx.out("Ignoring error for 'job fail' test: %s" % e)
    else:
        if fail:
            raise errors.OpExecError("Job didn't fail when it should")
    if not fail and len(results) != len(ops):
        raise errors.OpExecError("Received %s results (%s), expected %s" % (len(results), results, len(ops)))
    if reporter.all_messages != expect_messages:
        raise errors.OpExecError("Received test messages don't match input (input %r, received %r)"
                                 % (expect_messages, reporter.all_messages))
    if reporter.job_id != job_id:
        raise errors.OpExecError("Reported job ID %s doesn't match submission job ID %s" % (reporter.job_id, job_id))
    rows = client.query_jobs([job_id], ["status", "opstatus"])
    if not rows or not rows[0]:
        raise errors.OpExecError("Can't find job %s" % job_id)
    status, opstatus = rows[0]
    expected = lifecycle.ERROR if fail else lifecycle.SUCCESS
    if status != expected:
        raise errors.OpExecError("Final job status is %s, not %s as expected" % (status, expected))
    if list(opstatus) != expect_opstatus:
        raise errors.OpExecError("Opcode status is %s, expected %s" % (opstatus, expect_opstatus))


def test_jobqueue(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{TestJobqueue}."""
    _job_submission(ctx, opts)
    _job_dependency(ctx, opts)
    for mode in range(4):
        _jqueue_mode(ctx, mode)
    ctx.out("Job queue test successful")
    return EXIT_SUCCESS
