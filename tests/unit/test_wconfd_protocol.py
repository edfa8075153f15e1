"""Tests for WConfD's AMP protocol and client, over an in-memory pipe.

A L{WConfdClient} talks to a L{WConfdProtocol} through
L{twisted.test.iosim}; raw boxes are sent with C{callRemoteString} to see
what a misbehaving client gets.
"""

from __future__ import annotations

from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.protocols import amp
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.locking import Owner
from ganeti.objects import ConfigData
from ganeti.wconfd import commands as c
from tests.unit.wconfd_helpers import BGL, Wire, by_name, first_instance, job, make_config, make_service

INST1 = "inst1.example.test"
LOCK1 = "instance/" + INST1
GOOD_OWNER = b'[7, "/run/ganeti/lock/job-7.lock", 0]'


class ProtocolTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.service = make_service(self.config())
        self.wire = Wire.connect(self.service)
        self.client = self.wire.client
        self.a, self.b = job(1), job(2)

    def config(self) -> ConfigData:
        return make_config()

    def run_ok(self, work: Any) -> Any:
        return self.successResultOf(self.wire.run(work))

    def raw(self, command: bytes, **arguments: bytes) -> Deferred:
        return self.wire.run(self.client.protocol.callRemoteString(command, **arguments))

    def assertStillServing(self, wire: Wire | None = None) -> None:
        wire = wire or self.wire
        self.assertFalse(wire.server.transport.disconnecting)
        self.assertEqual(self.successResultOf(wire.run(wire.client.echo("still there"))), "still there")

    def assertBadArguments(self, d: Deferred, *fragments: str) -> None:
        error = self.failureResultOf(d, amp.RemoteAmpError).value
        self.assertEqual(error.errorCode, b"BAD_ARGUMENTS")
        for fragment in fragments:
            self.assertIn(fragment, error.description)
        self.assertStillServing()


class BigConfigTests(ProtocolTestCase):
    def config(self) -> ConfigData:
        config = make_config()
        inst = first_instance(config)
        padded = attrs.evolve(inst, osparams={"pad": "x" * (20 << 20)})
        return attrs.evolve(config, instances=dict(config.instances, **{inst.uuid: padded}))

    def test_a_20_mb_config_round_trips_through_read_config_and_write_config(self) -> None:
        """Values over AMP's 64 KiB limit are chunked both ways."""
        data, serial = self.run_ok(self.client.read_config_bytes())
        self.assertGreater(len(data), 20 << 20)
        self.assertEqual((data, serial), self.service.read_config())

        config = self.run_ok(self.client.lock_config(self.a))
        inst = by_name(config, "instance", INST1)
        changed = attrs.evolve(inst, osparams={"pad": "y" * (20 << 20)})
        config = attrs.evolve(config, instances=dict(config.instances, **{inst.uuid: changed}))
        new_serial = self.run_ok(self.client.write_config_and_unlock(self.a, config))

        self.assertEqual(new_serial, serial + 1)
        stored = self.service.config_store.lookup("instance", INST1)
        self.assertEqual(stored.osparams["pad"], "y" * (20 << 20))
        again = self.run_ok(self.client.read_config())
        self.assertEqual(by_name(again, "instance", INST1).osparams, changed.osparams)
        self.assertEqual(self.run_ok(self.client.list_locks(self.a)), [])


class ConfigCacheTests(ProtocolTestCase):
    """A job process's client (C{cache_config}) reads a big config once while its serial stays."""

    config = BigConfigTests.config

    def test_the_same_config_is_reused_until_it_changes(self) -> None:
        self.client.cache_config = True
        snapshots = []
        self.patch(self.service, "read_config", lambda real=self.service.read_config: snapshots.append(1) or real())
        first = self.run_ok(self.client.read_config())
        self.assertIs(self.run_ok(self.client.read_config()), first)
        self.assertEqual(len(snapshots), 1)  # the second answer carried no config

        config = self.run_ok(self.client.lock_config(self.a))
        inst = by_name(config, "instance", INST1)
        changed = attrs.evolve(inst, osparams={"pad": "z"})
        config = attrs.evolve(config, instances=dict(config.instances, **{inst.uuid: changed}))
        self.run_ok(self.client.write_config_and_unlock(self.a, config))
        fresh = self.run_ok(self.client.read_config())
        self.assertIsNot(fresh, first)
        self.assertEqual(by_name(fresh, "instance", INST1).osparams, {"pad": "z"})
        self.assertIs(self.run_ok(self.client.read_config()), fresh)

    def test_a_registration_brings_the_first_read_along(self) -> None:
        # a job process: the copy it holds is confirmed (or replaced) by its owner registration, and its
        # first read then asks nothing
        self.client.cache_config = True
        first = self.run_ok(self.client.read_config())
        calls: list[Any] = []
        real_call = self.client.call
        self.patch(self.client, "call", lambda command, **kw: calls.append(command.__name__) or real_call(command, **kw))
        self.run_ok(self.client.register_owner(self.b, with_config=True))
        self.assertIs(self.run_ok(self.client.read_config()), first)
        self.assertEqual(calls, ["RegisterOwner"])
        self.assertIs(self.run_ok(self.client.read_config()), first)  # the next read asks again
        self.assertEqual(calls, ["RegisterOwner", "ReadConfig"])

        config = self.run_ok(self.client.lock_config(self.a))  # changed before the registration
        inst = by_name(config, "instance", INST1)
        config = attrs.evolve(config, instances=dict(config.instances, **{
            inst.uuid: attrs.evolve(inst, osparams={"pad": "w"})}))
        self.run_ok(self.client.write_config_and_unlock(self.a, config))
        del calls[:]
        self.run_ok(self.client.register_owner(self.b, with_config=True))
        fresh = self.run_ok(self.client.read_config())
        self.assertEqual((calls, by_name(fresh, "instance", INST1).osparams), (["RegisterOwner"], {"pad": "w"}))

    def test_without_the_cache_every_read_is_a_fresh_copy(self) -> None:
        first = self.run_ok(self.client.read_config())
        self.assertIsNot(self.run_ok(self.client.read_config()), first)


class ErrorTests(ProtocolTestCase):
    def test_unknown_command_gets_unhandled_and_the_connection_stays(self) -> None:
        failure = self.failureResultOf(self.raw(b"NoSuchCommand", text=b"x"), amp.UnhandledCommand)
        self.assertEqual(failure.value.args, (b"UNHANDLED", "Unhandled Command: b'NoSuchCommand'"))
        self.assertStillServing()

    def test_request_that_is_not_json_gets_bad_arguments(self) -> None:
        self.assertBadArguments(self.raw(b"TryUpdateLocks", owner=GOOD_OWNER, request=b"["), "not valid JSON")

    def test_request_that_is_not_a_list_gets_bad_arguments(self) -> None:
        """A request of the wrong shape is a decoding error, not a lock error."""
        for request in (b'"cluster/BGL"', b'{"cluster/BGL": "shared"}', b'[["cluster/BGL"]]', b"[[1, 2]]"):
            self.assertBadArguments(self.raw(b"TryUpdateLocks", owner=GOOD_OWNER, request=request), "TryUpdateLocks")
        self.assertBadArguments(
            self.raw(b"UpdateLocksWaiting", owner=GOOD_OWNER, priority=b"0", request=b"7"), "request"
        )

    def test_owner_that_is_not_json_gets_bad_arguments(self) -> None:
        self.assertBadArguments(self.raw(b"TryUpdateLocks", owner=b"xx", request=b"[]"), "owner is not valid JSON")

    def test_owner_of_the_wrong_shape_gets_bad_arguments(self) -> None:
        self.assertBadArguments(self.raw(b"TryUpdateLocks", owner=b'["only-an-id"]', request=b"[]"), "Owner")

    def test_missing_argument_gets_bad_arguments(self) -> None:
        """Whatever the argument's type, a missing one is named in the answer."""
        self.assertBadArguments(self.raw(b"TryUpdateLocks", owner=GOOD_OWNER), "missing argument", "request")
        self.assertBadArguments(self.raw(b"FreeLocksLevel", owner=GOOD_OWNER), "missing argument", "level")
        self.assertBadArguments(self.raw(b"ReadEntity", kind=b"node"), "missing argument", "key")
        self.assertBadArguments(self.raw(b"LockConfig", owner=GOOD_OWNER), "missing argument", "shared")
        self.assertBadArguments(self.raw(b"WriteConfig", owner=GOOD_OWNER), "WriteConfig", "'config'")

    def test_malformed_chunked_value_gets_bad_arguments(self) -> None:
        self.assertBadArguments(
            self.raw(b"WriteConfig", owner=GOOD_OWNER, config=b"2", **{"config.1": b"{}"}), "not a valid chunked value"
        )

    def test_unexpected_exception_gives_internal_error_not_a_dropped_connection(self) -> None:
        def broken() -> Any:
            raise RuntimeError("the disk is on fire")

        self.patch(self.service, "read_config", broken)
        failure = self.failureResultOf(self.wire.run(self.client.read_config_bytes()), c.InternalError)
        self.assertIn("ReadConfig failed: RuntimeError: the disk is on fire", str(failure.value))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertStillServing()

    def test_order_violation_arrives_as_lock_error(self) -> None:
        self.assertEqual(self.run_ok(self.client.try_update_locks(self.a, [(LOCK1, "exclusive")])), [])
        failure = self.failureResultOf(self.wire.run(self.client.try_update_locks(self.a, [(BGL, "shared")])), errors.LockError)
        self.assertEqual(
            str(failure.value), "Order violation: requesting 'cluster/BGL' (shared) while holding '%s'" % LOCK1
        )
        self.assertStillServing()

    def test_unknown_entity_arrives_as_its_own_error(self) -> None:
        failure = self.failureResultOf(self.wire.run(self.client.read_instance("nope")), errors.ConfigurationError)
        self.assertIsInstance(failure.value, c.UnknownEntity)
        self.assertEqual(str(failure.value), "instance 'nope' is not known")

    def test_stale_update_arrives_as_configuration_error(self) -> None:
        inst = self.run_ok(self.client.read_instance(INST1))
        self.run_ok(self.client.try_update_locks(self.a, [(BGL, "shared"), (LOCK1, "exclusive")]))
        self.run_ok(self.client.update_instance(self.a, attrs.evolve(inst, os="first")))
        failure = self.failureResultOf(
            self.wire.run(self.client.update_instance(self.a, attrs.evolve(inst, os="second"))), errors.ConfigurationError
        )
        self.assertIn("was changed since it was read", str(failure.value))
        self.assertEqual(self.run_ok(self.client.read_instance(INST1)).os, "first")


class AcquireTests(ProtocolTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.other = Wire.connect(self.service)
        self.request = [(BGL, "shared"), (LOCK1, "exclusive")]
        self.assertEqual(self.run_ok(self.client.try_update_locks(self.a, self.request)), [])

    def acquire(self, owner: Owner, timeout: float | None = None) -> Deferred:
        return self.other.run(self.other.client.acquire(owner, self.request, timeout=timeout))

    def test_acquire_returns_only_after_the_grant_is_pushed(self) -> None:
        acquired = self.acquire(self.b)
        self.assertNoResult(acquired)
        self.assertTrue(self.run_ok(self.client.has_pending_request(self.b)))

        self.run_ok(self.client.try_update_locks(self.a, [(LOCK1, "release")]))
        # granted in WConfD, but the push has not crossed the other connection yet
        self.assertEqual(self.run_ok(self.client.list_locks(self.b)), self.request)
        self.assertNoResult(acquired)

        self.other.pump.flush()
        self.assertIsNone(self.successResultOf(acquired))
        self.assertEqual(self.other.client.protocol.granted, {})

    def test_acquire_without_contention_needs_no_push(self) -> None:
        self.assertIsNone(self.successResultOf(self.other.run(self.other.client.acquire(self.b, [(BGL, "shared")]))))
        self.assertEqual(self.other.client.protocol.granted, {})

    def test_acquire_timeout_raises_lock_error_and_withdraws_the_request(self) -> None:
        """(The client caught CancelledError, but addTimeout raises
        TimeoutError: the caller got that, and the request stayed queued.)"""
        acquired = self.acquire(self.b, timeout=5)
        self.service.clock.advance(4.9)
        self.other.pump.flush()
        self.assertNoResult(acquired)
        self.service.clock.advance(0.1)
        self.other.pump.flush()
        failure = self.failureResultOf(acquired, errors.LockError)
        self.assertIn("timed out after 5", str(failure.value))
        self.assertFalse(self.run_ok(self.client.has_pending_request(self.b)))
        self.assertEqual(self.other.client.protocol.granted, {})
        # a later release does not hand the lock to the caller who gave up
        self.run_ok(self.client.try_update_locks(self.a, [(LOCK1, "release")]))
        self.assertEqual(self.run_ok(self.client.list_locks(self.b)), [])


class LockConfigOverTheWireTests(ProtocolTestCase):
    def test_lock_config_timeout_arrives_as_lock_error(self) -> None:
        self.run_ok(self.client.lock_config(self.a))
        other = Wire.connect(self.service)
        waiting = other.run(other.client.lock_config(self.b, timeout=2))
        self.assertNoResult(waiting)
        self.service.clock.advance(2)
        other.pump.flush()
        failure = self.failureResultOf(waiting, errors.LockError)
        self.assertIn("timed out after 2", str(failure.value))
        self.assertFalse(self.run_ok(self.client.has_pending_request(self.b)))
        self.assertStillServing(other)
