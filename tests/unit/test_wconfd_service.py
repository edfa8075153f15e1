"""Tests for L{ganeti.wconfd.service}: ordering, persistence and owners.

Everything runs on L{MemoryStorage} and a L{Clock}; storage that finishes
later is modelled with Deferreds the test fires itself.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import attrs
from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.locking import CONFIG_LOCK, Owner
from ganeti.objects import ConfigData, Instance
from ganeti.wconfd.service import WConfdService
from ganeti.wconfd.storage import MemoryStorage
from ganeti.wconfd.store import ConfigStore
from tests.unit.wconfd_helpers import BGL, FakeConnection, by_name, job, make_config, make_service

INST1, INST2 = "inst1.example.test", "inst2.example.test"
LOCK1, LOCK2 = "instance/" + INST1, "instance/" + INST2


class SlowStorage(MemoryStorage):
    """MemoryStorage whose journal appends finish only when the test says so."""

    def __init__(self, config: bytes | None = None) -> None:
        super().__init__(config)
        self.appending: list[Deferred] = []

    def append(self, record: dict[str, Any]) -> Deferred:
        super().append(record)
        d: Deferred = Deferred()
        self.appending.append(d)
        return d


def _journalled(record: dict[str, Any]) -> dict[str, Any]:
    return serializer.loads(serializer.dumps(record))


class ServiceTestCase(SynchronousTestCase):
    """A started service on MemoryStorage, two jobs A and B."""

    def setUp(self) -> None:
        self.config = make_config()
        self.clock = Clock()
        self.storage = self.make_storage()
        self.dead: set[str] = set()
        self.service = make_service(
            storage=self.storage, clock=self.clock, probe=self.dead.__contains__, **self.service_options()
        )
        self.a, self.b = job(1), job(2)

    def make_storage(self) -> MemoryStorage:
        return MemoryStorage(self.config.to_json())

    def service_options(self) -> dict[str, Any]:
        return {}

    def instance(self, name: str = INST1) -> Instance:
        return by_name(self.service.config_store, "instance", name)

    def hold(self, owner: Owner, *locks: str) -> None:
        """Give C{owner} the BGL shared and C{locks} exclusively."""
        blockers = self.service.try_update(owner, [(BGL, "shared")] + [(lock, "exclusive") for lock in locks])
        self.assertEqual(blockers, [])

    def change(self, owner: Owner, release: list[str] = (), **changes: Any) -> Deferred:
        """Update instance 1 with C{changes} as C{owner}."""
        data = attrs.evolve(self.instance(), **changes).to_dict()
        return ensureDeferred(self.service.update_entity(owner, "instance", data, list(release)))

    def wait_for(self, owner: Owner, *locks: str, timeout: float | None = None) -> tuple[Deferred, FakeConnection]:
        """C{owner} queues for C{locks} (exclusive, with the BGL shared)."""
        connection = FakeConnection()
        self.service.attach(owner, connection)
        request = [(BGL, "shared")] + [(lock, "exclusive") for lock in locks]
        d = ensureDeferred(self.service.acquire(owner, 0, request, timeout))
        return d, connection

    def owned(self, owner: Owner) -> list[str]:
        return [name for name, _mode in self.service.locks.owned(owner)]


class RecoveryTests(SynchronousTestCase):
    def test_recovery_replays_journal_records_newer_than_config_data(self) -> None:
        """Records up to config.data's serial are already in it; later ones are replayed."""
        config = make_config()
        store = ConfigStore(config)
        inst1, inst2 = by_name(store, "instance", INST1), by_name(store, "instance", INST2)
        _, old = store.update("instance", attrs.evolve(inst1, os="older").to_dict())
        store.update("instance", attrs.evolve(store.lookup("instance", INST1), os="saved").to_dict())
        saved = store.snapshot()  # serial 3
        _, new = store.update("instance", attrs.evolve(inst2, os="newer").to_dict())
        storage = MemoryStorage(saved)
        storage.journal = [_journalled(old), _journalled(new)]

        service = make_service(storage=storage)

        self.assertEqual(service.config_store.serial_no, 4)
        recovered = service.config_store.lookup("instance", INST1)
        self.assertEqual((recovered.os, recovered.serial_no), ("saved", 3))
        self.assertEqual(service.config_store.lookup("instance", INST2).os, "newer")
        self.assertEqual(service.config_store.snapshot(), store.snapshot())
        # the recovered state is checkpointed at once and the journal dropped
        self.assertEqual(storage.config_writes, 1)
        self.assertEqual(ConfigData.from_json(storage.config).serial_no, 4)
        self.assertEqual((storage.journal, storage.old_journal), ([], []))

    def test_start_without_config_data_is_refused(self) -> None:
        error = self.assertRaises(errors.ConfigurationError, WConfdService(MemoryStorage(None), Clock()).startService)
        self.assertIn("no config.data found", str(error))

    def test_recovery_applies_lock_journal_lines_on_top_of_locks_data(self) -> None:
        a, b = job(1), job(2)
        storage = MemoryStorage(make_config().to_json())
        storage.locks = [[[a.to_wire(), [[BGL, "shared"], [LOCK1, "exclusive"]]]], []]
        storage.lock_journal = [
            [a.to_wire(), [[BGL, "shared"]], None],  # a released instance 1 ...
            [b.to_wire(), [[BGL, "shared"], [LOCK1, "exclusive"]], None],  # ... and b took it
        ]
        service = make_service(storage=storage)
        self.assertEqual(service.locks.owned(a), [(BGL, "shared")])
        self.assertEqual(service.locks.owned(b), [(BGL, "shared"), (LOCK1, "exclusive")])
        # the merged state is the new locks.data
        self.assertEqual(storage.locks, service.locks.to_data())
        self.assertEqual(storage.lock_journal, [])

    def test_recovery_grants_a_waiter_whose_blocker_released_before_the_crash(self) -> None:
        """A crash between two lock-journal lines (the release, then the grant
        it caused) must not leave the waiter queued behind a free lock.

        (Recovery replayed the lines without retrying the queue, so the
        waiter stayed pending until some unrelated lock changed.)
        """
        a, b = job(1), job(2)
        storage = MemoryStorage(make_config().to_json())
        storage.locks = [[[a.to_wire(), [[LOCK1, "exclusive"]]]], [[0, b.to_wire(), [[LOCK1, "exclusive"]]]]]
        storage.lock_journal = [[a.to_wire(), [], None]]
        service = make_service(storage=storage)
        self.assertFalse(service.locks.has_pending(b))
        self.assertEqual(service.locks.owned(b), [(LOCK1, "exclusive")])


class CommitOrderTests(ServiceTestCase):
    def make_storage(self) -> MemoryStorage:
        return SlowStorage(self.config.to_json())

    def test_release_waits_until_the_change_is_durable(self) -> None:
        """Locks in C{release} stay held until the journal append has fired:
        a crash before that must not show the lock free and the change lost."""
        storage: SlowStorage = self.storage
        self.hold(self.a, LOCK1)
        waiting, connection = self.wait_for(self.b, LOCK1)
        changed = self.change(self.a, release=[LOCK1], os="debian")

        self.assertNoResult(changed)
        self.assertEqual(len(storage.appending), 1)
        self.assertIn(LOCK1, self.owned(self.a))
        self.assertNoResult(waiting)
        self.assertEqual(connection.granted, [])
        last_line_of_a = [line for line in storage.lock_journal if line[0] == self.a.to_wire()][-1]
        self.assertIn([LOCK1, "exclusive"], last_line_of_a[1])

        storage.appending[0].callback(None)

        stored, serial = self.successResultOf(changed)
        self.assertEqual((stored.os, serial), ("debian", self.service.config_store.serial_no))
        self.assertNotIn(LOCK1, self.owned(self.a))
        self.successResultOf(waiting)
        self.assertEqual(connection.granted, [self.b])
        self.assertIn(LOCK1, self.owned(self.b))

    def test_failed_journal_write_keeps_the_locks_and_refuses_later_changes(self) -> None:
        storage: SlowStorage = self.storage
        self.hold(self.a, LOCK1)
        changed = self.change(self.a, release=[LOCK1], os="debian")
        storage.appending[0].errback(OSError("disk full"))
        error = self.failureResultOf(changed, errors.ConfigurationError)
        self.assertIn("change not saved", str(error.value))
        self.assertIn(LOCK1, self.owned(self.a))
        refused = self.failureResultOf(self.change(self.a, os="other"), errors.ConfigurationError)
        self.assertIn("restart", str(refused.value))
        self.assertEqual(len(storage.appending), 1)


class UpdateTests(ServiceTestCase):
    def test_update_needs_the_entity_lock(self) -> None:
        self.hold(self.a, LOCK2)
        failure = self.failureResultOf(self.change(self.a, os="x"), errors.LockError)
        self.assertIn("must hold %s exclusively" % LOCK1, str(failure.value))
        self.assertEqual(self.instance().os, "noop")

    def test_a_disk_is_updated_under_its_instances_lock(self) -> None:
        """Disks have no lock of their own: their instance's lock guards them.

        (The service asked for a lock 'disk/<uuid>', which cannot exist, so
        no disk could ever be changed.)
        """
        disk = self.service.config_store.lookup("disk", self.instance().disks[0])
        self.hold(self.a, LOCK1)
        d = ensureDeferred(self.service.update_entity(self.a, "disk", attrs.evolve(disk, size=4096).to_dict(), []))
        stored, _serial = self.successResultOf(d)
        self.assertEqual(stored.size, 4096)
        self.assertEqual(self.service.config_store.lookup("disk", disk.uuid).size, 4096)

    def test_a_disk_cannot_be_updated_without_its_instances_lock(self) -> None:
        disk = self.service.config_store.lookup("disk", self.instance().disks[0])
        self.hold(self.a, LOCK2)
        d = ensureDeferred(self.service.update_entity(self.a, "disk", attrs.evolve(disk, size=4096).to_dict(), []))
        failure = self.failureResultOf(d, errors.LockError)
        self.assertIn(LOCK1, str(failure.value))

    def test_rename_moves_the_instance_lock_name(self) -> None:
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, release=[LOCK1], name="web.example.test"))
        self.assertEqual(self.service.try_update(self.b, [("instance/web.example.test", "exclusive")]), [])
        error = self.assertRaises(errors.LockError, self.service.try_update, job(3), [(LOCK1, "exclusive")])
        self.assertIn("does not exist", str(error))


class CheckpointTests(ServiceTestCase):
    def service_options(self) -> dict[str, Any]:
        return {"checkpoint_delay": 0.2}

    def test_a_burst_of_changes_gives_one_config_data_write(self) -> None:
        self.hold(self.a, LOCK1)
        for number in range(10):
            self.successResultOf(self.change(self.a, os="os%d" % number))
            self.clock.advance(0.01)
        self.assertEqual(self.storage.config_writes, 0)
        self.clock.advance(0.2)
        self.assertEqual(self.storage.config_writes, 1)
        written = ConfigData.from_json(self.storage.config)
        self.assertEqual(written.serial_no, self.service.config_store.serial_no)
        self.assertEqual(by_name(written, "instance", INST1).os, "os9")
        self.assertEqual((self.storage.journal, self.storage.old_journal), ([], []))
        self.clock.advance(10)
        self.assertEqual(self.storage.config_writes, 1)

    def test_flush_fires_only_after_config_data_is_written(self) -> None:
        writes: list[Deferred] = []
        self.storage.on_write = lambda data: writes.append(Deferred()) or writes[-1]
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="x"))
        flushed = self.service.flush()
        self.assertEqual(len(writes), 1)  # started at once, not after the delay
        self.assertNoResult(flushed)
        writes[0].callback(None)
        self.assertEqual(self.successResultOf(flushed), self.service.config_store.serial_no)
        self.assertEqual(self.storage.config_writes, 1)

    def test_flush_with_nothing_new_answers_at_once(self) -> None:
        self.assertEqual(self.successResultOf(self.service.flush()), self.service.config_store.serial_no)
        self.assertEqual(self.storage.config_writes, 0)

    def test_flush_during_a_write_that_misses_the_newest_change_waits_for_the_next(self) -> None:
        writes: list[Deferred] = []
        self.storage.on_write = lambda data: writes.append(Deferred()) or writes[-1]
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="first"))
        self.clock.advance(0.2)
        self.assertEqual(len(writes), 1)
        self.successResultOf(self.change(self.a, os="second"))
        flushed = self.service.flush()
        writes[0].callback(None)
        self.assertNoResult(flushed)
        self.assertEqual(len(writes), 2)
        writes[1].callback(None)
        self.assertEqual(self.successResultOf(flushed), self.service.config_store.serial_no)
        self.assertEqual(by_name(ConfigData.from_json(self.storage.config), "instance", INST1).os, "second")

    def test_a_failed_config_data_write_is_retried_after_the_delay(self) -> None:
        """A write error is retried on the checkpoint timer, not in a tight loop.

        (A flush waiting for a failing write retried at once, recursively:
        with a storage failing synchronously that hit the recursion limit.)
        """
        attempts: list[bytes] = []

        def write(data: bytes) -> Deferred:
            attempts.append(data)
            return fail(OSError("disk full")) if len(attempts) == 1 else succeed(None)

        self.storage.on_write = write
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="x"))
        flushed = self.service.flush()
        self.assertEqual(len(attempts), 1)
        self.assertNoResult(flushed)
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
        self.clock.advance(0.2)
        self.assertEqual(len(attempts), 2)
        self.assertEqual(self.successResultOf(flushed), self.service.config_store.serial_no)
        # the records of the failed attempt were kept until a write succeeded
        self.assertEqual((self.storage.journal, self.storage.old_journal), ([], []))

    def test_stop_writes_pending_changes_and_the_lock_state(self) -> None:
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="x"))
        self.successResultOf(self.service.stopService())
        self.assertEqual(ConfigData.from_json(self.storage.config).serial_no, self.service.config_store.serial_no)
        self.assertEqual(self.storage.locks, self.service.locks.to_data())
        self.assertEqual(self.storage.lock_journal, [])


class DistributorTests(ServiceTestCase):
    def service_options(self) -> dict[str, Any]:
        self.distributed: list[tuple[int, bytes, Deferred]] = []

        def distributor(data: bytes, serial: int) -> Deferred:
            d: Deferred = Deferred()
            self.distributed.append((serial, data, d))
            return d

        return {"distributor": distributor, "checkpoint_delay": 0.2}

    def serials(self) -> list[int]:
        return [serial for serial, _data, _d in self.distributed]

    def setUp(self) -> None:
        super().setUp()
        # at start-up the current config goes out once (lagging replicas catch up)
        self.assertEqual(self.serials(), [self.service.config_store.serial_no])
        self.distributed.pop()[2].callback(None)

    def test_checkpoints_during_a_distribution_coalesce_to_the_newest(self) -> None:
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="first"))
        self.clock.advance(0.2)
        first = self.service.config_store.serial_no
        self.assertEqual(self.serials(), [first])
        for name in ("second", "third", "fourth"):
            self.successResultOf(self.change(self.a, os=name))
            self.clock.advance(0.2)
        newest = self.service.config_store.serial_no
        self.assertEqual(self.storage.config_writes, 4)  # writes do not wait for distribution
        self.assertEqual(self.serials(), [first])
        self.distributed[0][2].callback(None)
        self.assertEqual(self.serials(), [first, newest])
        self.assertEqual(self.distributed[1][1], self.storage.config)
        self.distributed[1][2].callback(None)
        self.clock.advance(10)
        self.assertEqual(self.serials(), [first, newest])

    def test_a_failed_distribution_does_not_stop_the_next(self) -> None:
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="first"))
        self.clock.advance(0.2)
        self.successResultOf(self.change(self.a, os="second"))
        self.clock.advance(0.2)
        self.distributed[0][2].errback(ConnectionError("candidate down"))
        self.assertEqual(len(self.flushLoggedErrors(ConnectionError)), 1)
        self.assertEqual(self.serials()[-1], self.service.config_store.serial_no)

    def test_a_distributed_flush_waits_for_the_distribution_of_its_change(self) -> None:
        # (what gnt-cluster verify waits for before it compares the nodes' ssconf files)
        self.hold(self.a, LOCK1)
        self.successResultOf(self.change(self.a, os="first"))
        self.clock.advance(0.2)  # first checkpoint: its distribution starts and hangs
        self.successResultOf(self.change(self.a, os="second"))
        target = self.service.config_store.serial_no
        flushed = self.service.flush(distributed=True)
        durable_only = self.service.flush()
        self.assertEqual(self.successResultOf(durable_only), target)  # config.data holds it at once
        self.assertNoResult(flushed)
        self.distributed[0][2].callback(None)  # the older serial's distribution ended: not enough
        self.assertNoResult(flushed)
        self.assertEqual(self.serials()[-1], target)
        self.distributed[-1][2].errback(ConnectionError("a node down"))  # ended, though a node missed it
        self.flushLoggedErrors(ConnectionError)
        self.assertEqual(self.successResultOf(flushed), target)
        # nothing changed since: answered at once
        self.assertEqual(self.successResultOf(self.service.flush(distributed=True)), target)


class DeathTests(ServiceTestCase):
    def service_options(self) -> dict[str, Any]:
        return {"death_interval": 0.25}

    def test_check_owners_frees_a_dead_owners_locks_and_grants_the_waiter(self) -> None:
        self.hold(self.a, LOCK1)
        waiting, connection = self.wait_for(self.b, LOCK1)
        self.assertEqual(self.service.check_owners(), [])
        self.assertNoResult(waiting)

        self.dead.add(self.a.lockfile)
        self.assertEqual(self.service.check_owners(), [self.a])

        self.assertEqual(self.owned(self.a), [])
        self.successResultOf(waiting)
        self.assertEqual(connection.granted, [self.b])
        self.assertEqual(self.owned(self.b), [BGL, LOCK1])
        last_line_of_a = [line for line in self.storage.lock_journal if line[0] == self.a.to_wire()][-1]
        self.assertEqual(last_line_of_a[1:], [[], None])

    def test_dead_owners_are_found_every_death_interval(self) -> None:
        self.hold(self.a, LOCK1)
        waiting, connection = self.wait_for(self.b, LOCK1)
        self.dead.add(self.a.lockfile)
        self.clock.advance(0.2)
        self.assertNoResult(waiting)
        self.clock.advance(0.05)
        self.successResultOf(waiting)
        self.assertEqual(connection.granted, [self.b])

    def test_a_request_blocked_only_by_a_dead_owner_is_granted_at_once(self) -> None:
        self.hold(self.a, LOCK1)
        self.dead.add(self.a.lockfile)
        self.assertEqual(self.service.try_update(self.b, [(LOCK1, "exclusive")]), [])
        self.assertEqual(self.owned(self.b), [LOCK1])

    def test_a_waiter_that_dies_is_told_so(self) -> None:
        self.hold(self.a, LOCK1)
        waiting, _connection = self.wait_for(self.b, LOCK1)
        self.dead.add(self.b.lockfile)
        self.service.check_owners()
        self.failureResultOf(waiting, errors.LockError)
        self.assertFalse(self.service.locks.has_pending(self.b))


class OwnerDirTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.lock_dir = tempfile.mkdtemp(prefix="wconfd-locks-")
        self.addCleanup(shutil.rmtree, self.lock_dir, True)
        self.dead: set[str] = set()
        self.service = make_service(owner_dirs=[self.lock_dir], probe=self.dead.__contains__)

    def test_owners_with_lock_files_elsewhere_are_refused(self) -> None:
        inside = Owner(1, os.path.join(self.lock_dir, "job-1.lock"))
        self.assertEqual(self.service.try_update(inside, [(BGL, "shared")]), [])
        for lockfile in (
            "/etc/passwd",
            os.path.join(self.lock_dir, "..", "..", "etc", "shadow"),
            self.lock_dir.rstrip("/") + "-other/job-2.lock",
        ):
            intruder = Owner(2, lockfile)
            error = self.assertRaises(errors.LockError, self.service.try_update, intruder, [(BGL, "shared")])
            self.assertIn("is not under", str(error))
            self.assertEqual(self.service.locks.owned(intruder), [])

    def test_a_dead_owners_lock_file_is_deleted(self) -> None:
        lockfile = os.path.join(self.lock_dir, "job-1.lock")
        open(lockfile, "w").close()
        owner = Owner(1, lockfile)
        self.service.try_update(owner, [(BGL, "shared")])
        self.dead.add(lockfile)
        self.assertEqual(self.service.check_owners(), [owner])
        self.assertFalse(os.path.exists(lockfile))


class WriteConfigTests(ServiceTestCase):
    def read(self) -> ConfigData:
        return ConfigData.from_json(self.service.read_config()[0])

    def write(self, owner: Owner, config: ConfigData, release: list[str] = (), unlock: bool = False) -> Deferred:
        return ensureDeferred(self.service.write_config(owner, config.to_dict(), list(release), unlock))

    def renamed(self) -> ConfigData:
        config = self.read()
        inst = by_name(config, "instance", INST1)
        instances = dict(config.instances, **{inst.uuid: attrs.evolve(inst, name="web.example.test")})
        return attrs.evolve(config, instances=instances, cluster=attrs.evolve(config.cluster, candidate_pool_size=2))

    def test_write_config_needs_the_config_lock_held_exclusively(self) -> None:
        config = self.renamed()
        self.failureResultOf(self.write(self.a, config), errors.LockError)
        self.successResultOf(ensureDeferred(self.service.lock_config(self.a, True, None)))
        failure = self.failureResultOf(self.write(self.a, config), errors.LockError)
        self.assertIn("exclusively", str(failure.value))
        self.assertEqual(self.read().cluster.candidate_pool_size, 10)

    def test_write_config_replaces_the_config_durably_and_renames_locks(self) -> None:
        self.successResultOf(ensureDeferred(self.service.lock_config(self.a, False, None)))
        before = self.service.config_store.serial_no
        serial = self.successResultOf(self.write(self.a, self.renamed(), unlock=True))
        self.assertGreater(serial, before)
        self.assertEqual(self.read().cluster.candidate_pool_size, 2)
        # durable through the journal at once; config.data catches up
        self.assertEqual(self.storage.journal[-1]["s"], serial)
        self.assertEqual(self.storage.journal[-1]["full"]["cluster"]["candidate_pool_size"], 2)
        self.clock.advance(1)
        self.assertEqual(ConfigData.from_json(self.storage.config).serial_no, serial)
        self.assertEqual(self.owned(self.a), [])  # unlock released the config lock
        self.assertEqual(self.service.try_update(self.b, [("instance/web.example.test", "exclusive")]), [])
        self.assertRaises(errors.LockError, self.service.try_update, job(3), [(LOCK1, "exclusive")])

    def test_changes_after_a_whole_config_write_survive_a_crash_before_the_checkpoint(self) -> None:
        """The replaced config is journalled, so later records replay onto it."""
        self.successResultOf(ensureDeferred(self.service.lock_config(self.a, False, None)))
        self.successResultOf(self.write(self.a, self.renamed(), unlock=True))
        self.hold(self.b, "instance/web.example.test")
        inst = by_name(self.service.config_store, "instance", "web.example.test")
        data = attrs.evolve(inst, os="after-replace").to_dict()
        self.successResultOf(ensureDeferred(self.service.update_entity(self.b, "instance", data, [])))
        self.assertEqual(self.storage.config_writes, 0)  # crash now: config.data is the old one
        fresh = MemoryStorage(self.config.to_json())  # the old config.data, and the journal
        fresh.journal = list(self.storage.old_journal + self.storage.journal)
        restarted = make_service(storage=fresh)
        store = restarted.config_store
        self.assertEqual(store.cluster.candidate_pool_size, 2)
        self.assertEqual(by_name(store, "instance", "web.example.test").os, "after-replace")
        self.assertEqual(store.verify(), [])

    def test_write_config_that_fails_verification_keeps_the_old_config(self) -> None:
        self.successResultOf(ensureDeferred(self.service.lock_config(self.a, False, None)))
        before = self.service.config_store.snapshot()
        config = self.read()
        inst = by_name(config, "instance", INST1)
        broken = attrs.evolve(
            config, instances=dict(config.instances, **{inst.uuid: attrs.evolve(inst, primary_node="nowhere")})
        )
        failure = self.failureResultOf(self.write(self.a, broken), errors.ConfigVerifyError)
        self.assertIn("nowhere", str(failure.value))
        self.assertIs(self.service.config_store.snapshot(), before)
        self.assertEqual(self.storage.config_writes, 0)


class LockConfigTests(ServiceTestCase):
    def lock_config(self, owner: Owner, timeout: float | None = None) -> tuple[Deferred, FakeConnection]:
        connection = FakeConnection()
        self.service.attach(owner, connection)
        return ensureDeferred(self.service.lock_config(owner, False, timeout)), connection

    def test_lock_config_waits_for_the_holder_and_is_pushed_the_grant(self) -> None:
        first, _ = self.lock_config(self.a)
        data, serial = self.successResultOf(first)
        self.assertEqual((data, serial), self.service.read_config())
        second, connection = self.lock_config(self.b)
        self.assertNoResult(second)
        self.assertTrue(self.service.locks.has_pending(self.b))
        self.service.unlock_config(self.a)
        self.assertEqual(self.successResultOf(second), self.service.read_config())
        self.assertEqual(connection.granted, [self.b])
        self.assertEqual(self.owned(self.b), [CONFIG_LOCK])

    def test_lock_config_times_out_with_a_lock_error(self) -> None:
        """After C{timeout} the request is withdrawn and the caller gets LockError.

        (The timeout surfaced as Twisted's TimeoutError -- INTERNAL_ERROR on
        the wire -- and left the request queued, so the config lock was
        later granted to a caller that had given up.)
        """
        self.successResultOf(self.lock_config(self.a)[0])
        waiting, connection = self.lock_config(self.b, timeout=5)
        self.clock.advance(4.9)
        self.assertNoResult(waiting)
        self.clock.advance(0.1)
        failure = self.failureResultOf(waiting, errors.LockError)
        self.assertIn("timed out after 5", str(failure.value))
        self.assertFalse(self.service.locks.has_pending(self.b))
        self.service.unlock_config(self.a)
        self.assertEqual(self.owned(self.b), [])
        self.assertEqual(connection.granted, [])


class OpportunisticTests(ServiceTestCase):
    def test_opportunistic_with_timeout_returns_what_it_got(self) -> None:
        """Waiting for C{count} locks ends at the timeout with what was free.

        (The timeout escaped as Twisted's TimeoutError, an INTERNAL_ERROR on
        the wire, and the locks taken were not reported.)
        """
        self.hold(self.a, LOCK2)
        request = [(LOCK1, "exclusive"), (LOCK2, "exclusive")]
        d = ensureDeferred(self.service.opportunistic(self.b, request, 2, 10, False))
        self.assertNoResult(d)
        self.clock.advance(10)
        self.assertEqual(self.successResultOf(d), [LOCK1])
        self.assertEqual(self.owned(self.b), [LOCK1])

    def test_opportunistic_gets_more_when_locks_are_freed_before_the_timeout(self) -> None:
        self.hold(self.a, LOCK2)
        request = [(LOCK1, "exclusive"), (LOCK2, "exclusive")]
        d = ensureDeferred(self.service.opportunistic(self.b, request, 2, 10, False))
        self.assertNoResult(d)
        self.service.try_update(self.a, [(LOCK2, "release")])
        self.assertEqual(sorted(self.successResultOf(d)), [LOCK1, LOCK2])


class FullDiskStorage(MemoryStorage):
    """MemoryStorage on a disk the test fills: appends fail with ENOSPC, and
    C{room} says so while C{says_full}."""

    def __init__(self, config: bytes | None = None) -> None:
        super().__init__(config)
        self.fails = False
        self.says_full = False

    def append(self, record: dict[str, Any]) -> Deferred:
        import errno

        from ganeti.wconfd.storage import JournalWriteError

        if self.fails:
            return fail(JournalWriteError("config.journal", OSError(errno.ENOSPC, "No space left on device")))
        return super().append(record)

    def room(self) -> str | None:
        return "the data directory /var/lib/ganeti is full (12 KiB free)" if self.says_full else None


class FullDiskTests(ServiceTestCase):
    """Issue 23: a full data directory leaves no change half made."""

    def make_storage(self) -> MemoryStorage:
        return FullDiskStorage(self.config.to_json())

    def test_a_change_is_refused_before_it_is_applied_when_the_disk_is_full(self) -> None:
        storage: FullDiskStorage = self.storage
        self.hold(self.a, LOCK1)
        storage.says_full = True
        serial = self.service.config_store.serial_no
        refused = self.failureResultOf(self.change(self.a, os="debian"), errors.ConfigurationError)
        self.assertIn("the data directory /var/lib/ganeti is full", str(refused.value))
        self.assertIn("nothing changed", str(refused.value))
        self.assertEqual((self.instance().os, self.service.config_store.serial_no), ("noop", serial))
        storage.says_full = False
        self.successResultOf(self.change(self.a, os="debian"))
        self.assertEqual(self.instance().os, "debian")

    def test_a_change_whose_journal_write_fails_is_undone_and_changes_go_on(self) -> None:
        """The disk fills between the check and the write: the change is not
        kept in memory (queries showed it, the next config.data held it: a tag
        applied under an error status), and once there is room changes work."""
        storage: FullDiskStorage = self.storage
        self.hold(self.a, LOCK1)
        serial = self.service.config_store.serial_no
        storage.fails = True
        failed = self.failureResultOf(self.change(self.a, os="debian"), errors.ConfigurationError)
        self.assertIn("nothing changed", str(failed.value))
        self.assertEqual((self.instance().os, self.service.config_store.serial_no), ("noop", serial))
        self.assertIn(LOCK1, self.owned(self.a))
        storage.fails = False
        self.successResultOf(self.change(self.a, os="debian"))
        self.assertEqual((self.instance().os, self.service.config_store.serial_no), ("debian", serial + 1))
        self.assertEqual(storage.durable_config()[1][-1]["s"], serial + 1)

    def test_a_copy_holding_a_dropped_change_is_not_taken_for_the_change_given_its_serial(self) -> None:
        """A reader that read the config while a change that was then dropped
        was applied holds that serial; the next change gets the same serial,
        and the reader's copy (its mtime tells) is not taken for it."""
        storage: FullDiskStorage = self.storage
        self.hold(self.a, LOCK1)
        seen: list[ConfigData] = []
        real_append = storage.append

        def append(record: dict[str, Any]) -> Deferred:
            seen.append(ConfigData.from_json(self.service.config_store.snapshot()))  # a reader, meanwhile
            return real_append(record)

        self.patch(storage, "append", append)
        storage.fails = True
        self.failureResultOf(self.change(self.a, os="dropped"), errors.ConfigurationError)
        storage.fails = False
        self.clock.advance(1)
        self.successResultOf(self.change(self.a, os="kept"))
        dropped, store = seen[0], self.service.config_store
        self.assertEqual((dropped.serial_no, store.serial_no), (store.serial_no, store.serial_no))
        self.assertIsNone(store.changes_since(dropped.serial_no, dropped.mtime))
        kept = seen[1]
        self.assertEqual(store.changes_since(kept.serial_no, kept.mtime), [])
