"""A job process obeys kills even when WConfD is gone for good."""

from __future__ import annotations

import signal
from typing import Any

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import process


class _Reactor:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def callFromThread(self, function: Any, *args: Any) -> None:
        self.calls.append(function)


class _Processor:
    def kill(self) -> None:
        pass


class KillHandlerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.previous = signal.getsignal(signal.SIGTERM)
        self.addCleanup(signal.signal, signal.SIGTERM, self.previous)

    def test_first_sigterm_kills_the_job_second_exits(self) -> None:
        """The first SIGTERM asks the processor to kill the job; a second one exits with 143."""
        reactor, processor, exits = _Reactor(), _Processor(), []
        process.install_kill_handler(reactor, processor, exit=exits.append)
        handler = signal.getsignal(signal.SIGTERM)
        handler(signal.SIGTERM, None)
        self.assertEqual(reactor.calls, [processor.kill])
        self.assertEqual(exits, [])
        handler(signal.SIGTERM, None)
        self.assertEqual(exits, [process.EXIT_TERMINATED])
        self.assertEqual(len(reactor.calls), 1)


class _SilentWConfd:
    """A WConfD client reconnecting to a daemon that never comes back."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    async def free_locks(self, owner: Any) -> None:
        self.asked.append(owner)
        await defer.Deferred()


class ReleaseLocksTests(SynchronousTestCase):
    def test_a_gone_wconfd_does_not_keep_the_job_waiting(self) -> None:
        """Releasing the locks gives up after FREE_LOCKS_TIMEOUT (WConfD frees them when the process exits)."""
        clock, client = Clock(), _SilentWConfd()
        d = defer.Deferred.fromCoroutine(process.release_locks(clock, client, "owner"))
        clock.advance(process.FREE_LOCKS_TIMEOUT - 0.1)
        self.assertNoResult(d)
        clock.advance(0.2)
        self.failureResultOf(d, defer.TimeoutError)
        self.assertEqual(client.asked, ["owner"])


class FailureExitTests(SynchronousTestCase):
    def test_a_full_disk_has_its_own_exit_code(self) -> None:
        """A write that found the disk full ends the process with EXIT_DISK_FULL, also when wrapped."""
        import errno
        import io
        from contextlib import redirect_stderr

        full = OSError(errno.ENOSPC, "No space left on device")
        try:
            try:
                raise full
            except OSError as e:
                raise RuntimeError("saving the job failed") from e
        except RuntimeError as wrapped:
            outer = wrapped
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(process.failure_exit(7, full), process.EXIT_DISK_FULL)
            self.assertEqual(process.failure_exit(7, outer), process.EXIT_DISK_FULL)
            self.assertEqual(process.failure_exit(7, ValueError("bug")), process.EXIT_FAILED)
        self.assertIn("job 7: cannot write its files", err.getvalue())
        self.assertIn("ValueError: bug", err.getvalue())


class SaveJobTests(SynchronousTestCase):
    """The job process writes each state of its job file once (the final one is durable: one fsync pair)."""

    def test_a_state_already_written_is_not_written_again(self) -> None:
        import os

        from ganeti.jobs.model import QueuedJob, QueuedOpCode
        from tests.unit.queue_helpers import temp_root

        paths = temp_root(self, "gntsave")
        os.makedirs(paths.queue_dir, exist_ok=True)
        job = QueuedJob(id=9, ops=[QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status="success")],
                        received_timestamp=[1, 0], start_timestamp=[2, 0], end_timestamp=[3, 0])
        written = process.save_job(paths, job)
        path = process.job_file(paths, 9)
        os.unlink(path)
        self.assertEqual(process.save_job(paths, job, written), written)
        self.assertFalse(os.path.exists(path))  # the same state again: no write
        job.ops[0].result = "changed"
        process.save_job(paths, job, written)
        self.assertTrue(os.path.exists(path))

    def test_a_full_disk_sends_the_job_to_luxid_before_failing(self) -> None:
        """A write that finds no room: the job as it stands goes to LuxiD on the
        pipe (one line it accepts), and the error still ends the process."""
        import errno
        import os

        from ganeti import serializer
        from ganeti.jobs import channel
        from ganeti.jobs.model import QueuedJob, QueuedOpCode
        from tests.unit.queue_helpers import temp_root

        def full(*_args: Any, **_kwargs: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        self.patch(serializer, "write_file", full)
        paths = temp_root(self, "gntsave")
        job = QueuedJob(id=9, ops=[QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status="success")],
                        received_timestamp=[1, 0], start_timestamp=[2, 0], end_timestamp=[3, 0])
        read, write = os.pipe()
        self.addCleanup(os.close, read)
        self.addCleanup(os.close, write)
        self.assertRaises(OSError, process.save_job, paths, job, None, write)
        (message,) = channel.LineDecoder().feed(os.read(read, channel.MAX_LINE))
        self.assertEqual(QueuedJob.from_dict(message[channel.UNSAVED]).to_dict(), job.to_dict())


class FailureExitOnAFullLogTests(SynchronousTestCase):
    def test_an_unwritable_stderr_does_not_change_the_exit_code(self) -> None:
        """Standard error is a log file on the same full disk: saying why fails, the exit code stays."""
        import errno
        import sys

        class Full:
            def write(self, text: str) -> int:
                raise OSError(errno.ENOSPC, "No space left on device")

            def flush(self) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

        self.patch(sys, "stderr", Full())
        full = OSError(errno.ENOSPC, "No space left on device")
        self.assertEqual(process.failure_exit(3, full), process.EXIT_DISK_FULL)
        self.assertEqual(process.failure_exit(3, ValueError("bug")), process.EXIT_FAILED)
