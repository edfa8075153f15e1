"""The job process's end of the handshake: which confirmation is its own."""

from __future__ import annotations

from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import channel
from ganeti.jobs.process import NotConfirmed, _Control

LOCK = "/var/lock/ganeti/job_000007_123"


class ControlTests(SynchronousTestCase):
    def control(self, pid: int = 4242) -> _Control:
        control = _Control((LOCK, pid))
        control.makeConnection(StringTransport())
        return control

    def test_a_confirmation_addressed_to_this_process_confirms_it(self) -> None:
        control = self.control()
        control.dataReceived(channel.encode({"confirm": True, "if": [LOCK, 4242], "private": {"0": {"k": "v"}}}))
        self.assertEqual(self.successResultOf(control.confirmed), {"0": {"k": "v"}})

    def test_a_confirmation_addressed_to_another_process_is_not_this_ones(self) -> None:
        # LuxiD planned another spare for the job: this process waits for the confirmation of its own
        control = self.control(pid=4343)
        control.dataReceived(channel.encode({"confirm": True, "if": [LOCK, 4242]}))
        self.assertNoResult(control.confirmed)
        control.dataReceived(channel.encode({"confirm": True}))
        self.assertEqual(self.successResultOf(control.confirmed), {})

    def test_a_confirmation_for_another_lock_file_is_not_this_ones(self) -> None:
        control = self.control()
        control.dataReceived(channel.encode({"confirm": True, "if": [LOCK + "0", 4242]}))
        self.assertNoResult(control.confirmed)

    def test_anything_else_before_the_confirmation_ends_the_handshake(self) -> None:
        control = self.control(pid=4343)
        control.dataReceived(channel.encode({"confirm": True, "if": [LOCK, 4242]}) + channel.encode({"cancel": True}))
        self.failureResultOf(control.confirmed, NotConfirmed)

    def test_a_closed_channel_before_the_confirmation_ends_the_handshake(self) -> None:
        control = self.control(pid=4343)
        control.dataReceived(channel.encode({"confirm": True, "if": [LOCK, 4242]}))
        control.connectionLost()
        self.failureResultOf(control.confirmed, NotConfirmed)
