"""LuxiD's side of the job handshake, with a Clock and a fake process."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import channel
from ganeti.luxid.spawner import JobChannel, JobExit, JobProcessProtocol
from ganeti.paths import Paths

PATHS = Paths("/tmp/spawner-test-root")
GOOD_LOCKFILE = PATHS.lock_dir + "/job_000007_123"


class FakeProcess(StringTransport):
    def __init__(self) -> None:
        super().__init__()
        self.signals: list[str] = []
        self.to_child: list[tuple[int, bytes]] = []

    def signalProcess(self, signal: str) -> None:
        self.signals.append(signal)

    def writeToChild(self, fd: int, data: bytes) -> None:
        self.to_child.append((fd, data))


class HandshakeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.recorded: list[tuple[int, str, int]] = []
        self.record_result: Any = None
        self.exits: list[JobExit] = []
        self.channel = JobChannel(7, PATHS, self.clock, self.record, timeout=30)
        self.process = FakeProcess()
        self.protocol = JobProcessProtocol(self.channel, self.exits.append)
        self.protocol.makeConnection(self.process)

    def record(self, job_id: int, lockfile: str, pid: int) -> Any:
        self.recorded.append((job_id, lockfile, pid))
        return self.record_result

    def say(self, message: dict[str, Any]) -> None:
        self.protocol.childDataReceived(channel.TO_PARENT_FD, channel.encode(message))

    def test_confirms_only_after_the_lock_file_is_recorded(self) -> None:
        self.record_result = Deferred()
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.assertEqual(self.recorded, [(7, GOOD_LOCKFILE, 4242)])
        self.assertEqual(self.process.to_child, [], "no confirmation before the job file is durable")
        self.record_result.callback(None)
        self.assertEqual(self.process.to_child, [(channel.FROM_PARENT_FD, b'{"confirm":true}\n')])
        self.assertEqual(self.successResultOf(self.channel.ready), 7)
        self.clock.advance(60)
        self.assertEqual(self.process.signals, [], "the handshake timer was stopped")

    def test_a_prerecorded_lock_file_is_confirmed_at_once(self) -> None:
        # a spare's lock file and pid, recorded while it woke: that announcement needs no second write
        self.channel.prerecorded = (GOOD_LOCKFILE, 4242)
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.assertEqual(self.recorded, [])
        self.assertEqual(self.process.to_child, [(channel.FROM_PARENT_FD, b'{"confirm":true}\n')])
        self.assertEqual(self.successResultOf(self.channel.ready), 7)

    def test_another_process_than_the_prerecorded_one_is_recorded_first(self) -> None:
        # the spare died and the job was forked: another pid, recorded before it is confirmed
        self.channel.prerecorded = (GOOD_LOCKFILE, 4242)
        self.record_result = Deferred()
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4343})
        self.assertEqual(self.recorded, [(7, GOOD_LOCKFILE, 4343)])
        self.assertEqual(self.process.to_child, [])
        self.record_result.callback(None)
        self.assertEqual(self.successResultOf(self.channel.ready), 7)

    def test_a_planned_spare_is_confirmed_when_the_job_is_acknowledged_before_it_announces_itself(self) -> None:
        # the job file names the spare's lock file and pid since the submission: once the job is acknowledged
        # the confirmation goes at once, addressed to that spare, without waiting for its announcement
        self.channel.prerecorded = (GOOD_LOCKFILE, 4242)
        self.channel.held = True
        self.channel.private[7] = {"0": {"password": "s3cret"}}
        self.channel.release()
        self.assertEqual(self.process.to_child, [(channel.FROM_PARENT_FD, channel.encode(
            {"confirm": True, "if": [GOOD_LOCKFILE, 4242], "private": {"0": {"password": "s3cret"}}}))])
        self.assertFalse(self.channel.confirmed, "confirmed once the announcement is read")
        self.assertTrue(self.channel.may_have_run)
        self.assertFalse(self.channel.abort(), "the spare may run the job: its start cannot be called off")
        self.assertEqual(self.process.signals, [])
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.assertEqual((self.recorded, len(self.process.to_child)), ([], 1), "no second write, no recording")
        self.assertTrue(self.channel.confirmed)
        self.assertEqual(self.successResultOf(self.channel.ready), 7)
        self.assertEqual(self.channel.private, {}, "the clear values are forgotten once confirmed")

    def test_another_process_than_the_planned_spare_gets_its_own_confirmation_after_recording(self) -> None:
        self.channel.prerecorded = (GOOD_LOCKFILE, 4242)
        self.channel.held = True
        self.channel.private[7] = {"0": {"password": "s3cret"}}
        self.channel.release()
        self.record_result = Deferred()
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4343})  # the spare died: the job was forked
        self.assertEqual(self.recorded, [(7, GOOD_LOCKFILE, 4343)])
        self.assertEqual(len(self.process.to_child), 1, "nothing for it before its lock file is recorded")
        self.record_result.callback(None)
        self.assertEqual(self.process.to_child[1], (channel.FROM_PARENT_FD, channel.encode(
            {"confirm": True, "private": {"0": {"password": "s3cret"}}})))
        self.assertTrue(self.channel.confirmed)

    def test_an_exit_after_a_confirmation_ahead_counts_as_a_confirmed_one(self) -> None:
        # the process may have run the job before its announcement was read: never started again
        self.channel.prerecorded = (GOOD_LOCKFILE, 4242)
        self.channel.ready.addErrback(lambda _: None)
        self.channel.release()
        self.protocol.processEnded(Failure(ProcessTerminated(exitCode=1)))
        self.assertEqual([e.confirmed for e in self.exits], [True])

    def test_no_confirmation_ahead_without_a_planned_spare_or_once_it_announced_itself(self) -> None:
        self.channel.held = True
        self.channel.release()
        self.assertEqual(self.process.to_child, [])
        self.channel.prerecorded = (GOOD_LOCKFILE, 4242)
        self.channel.held = True
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})  # announced before the acknowledgement
        self.assertEqual(self.process.to_child, [])
        self.channel.release()
        self.assertEqual(self.process.to_child, [(channel.FROM_PARENT_FD, b'{"confirm":true}\n')])

    def test_a_silent_child_is_killed_after_the_timeout(self) -> None:
        self.clock.advance(29.9)
        self.assertEqual(self.process.signals, [])
        self.clock.advance(0.2)
        self.assertEqual(self.process.signals, ["KILL"])
        self.protocol.processEnded(Failure(ProcessTerminated(signal=9)))
        self.failureResultOf(self.channel.ready, RuntimeError)
        (ended,) = self.exits
        self.assertEqual((ended.job_id, ended.signal, ended.confirmed), (7, 9, False))
        self.assertEqual(self.recorded, [])

    def test_a_lock_file_that_comes_after_the_timeout_is_not_confirmed(self) -> None:
        """The child is being killed for its silence: its late lock file
        (read after the timer fired, on a loaded machine) neither is
        recorded nor confirms, so the job counts as never started."""
        self.clock.advance(30.1)
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.assertEqual((self.recorded, self.process.to_child), ([], []))
        self.protocol.processEnded(Failure(ProcessTerminated(signal=9)))
        self.failureResultOf(self.channel.ready, RuntimeError)
        (ended,) = self.exits
        self.assertFalse(ended.confirmed)

    def test_a_child_that_dies_before_the_handshake_never_ran(self) -> None:
        self.protocol.processEnded(Failure(ProcessTerminated(exitCode=1)))
        (ended,) = self.exits
        self.assertFalse(ended.confirmed)
        self.assertEqual(ended.describe(), "exited with status 1")
        self.failureResultOf(self.channel.ready, RuntimeError)

    def test_a_lock_file_outside_the_lock_directory_is_refused(self) -> None:
        self.say({"lockfile": "/etc/passwd", "pid": 1})
        self.assertEqual(self.recorded, [])
        self.assertEqual(self.process.signals, ["KILL"])

    def test_garbage_from_the_child_kills_it(self) -> None:
        self.protocol.childDataReceived(channel.TO_PARENT_FD, b"this is not json\n")
        self.assertEqual(self.process.signals, ["KILL"])

    def test_a_failed_record_kills_the_child_without_confirming(self) -> None:
        self.record_result = Deferred()
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.record_result.errback(OSError(28, "No space left on device"))
        self.assertEqual(self.process.signals, ["KILL"])
        self.assertEqual(self.process.to_child, [])
        self.flushLoggedErrors(OSError)

    def test_cancel_is_asked_of_a_confirmed_child_and_answered(self) -> None:
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        answer = self.channel.request_cancel()
        self.assertEqual(self.process.to_child[-1], (channel.FROM_PARENT_FD, b'{"cancel":true}\n'))
        self.assertNoResult(answer)
        self.say({"cancelled": True})
        self.assertIs(self.successResultOf(answer), True)

    def test_cancel_before_confirmation_or_after_exit_is_refused(self) -> None:
        self.assertIs(self.successResultOf(self.channel.request_cancel()), False)
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        pending = self.channel.request_cancel()
        self.protocol.processEnded(Failure(ProcessDone(0)))
        self.assertIs(self.successResultOf(pending), False)
        (ended,) = self.exits
        self.assertEqual((ended.exit_code, ended.confirmed), (0, True))

    def test_signals_reach_only_a_confirmed_running_child(self) -> None:
        """A signal (CancelJob with kill) goes to the pid of a confirmed child
        and never after it ended: the pid may belong to another process."""
        sent: list[tuple[int, int]] = []
        self.channel.os_kill = lambda pid, signum: sent.append((pid, signum))
        self.assertFalse(self.channel.signal(15), "no pid before the handshake")
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.assertTrue(self.channel.signal(15))
        self.assertEqual(sent, [(4242, 15)])
        self.assertFalse(self.channel.abort(), "a confirmed start cannot be called off")
        self.protocol.processEnded(Failure(ProcessTerminated(signal=15)))
        self.assertFalse(self.channel.signal(9))
        self.assertEqual(sent, [(4242, 15)])

    def test_abort_before_confirmation(self) -> None:
        """A start called off is never confirmed, even if the lock file comes later."""
        self.channel.ready.addErrback(lambda _: None)
        self.assertTrue(self.channel.abort())
        self.assertEqual(self.process.signals, ["KILL"])
        self.say({"lockfile": GOOD_LOCKFILE, "pid": 4242})
        self.assertEqual((self.recorded, self.process.to_child, self.channel.confirmed), ([], [], False))
