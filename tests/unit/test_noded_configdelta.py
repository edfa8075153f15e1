"""Tests for C{config_delta} on a master candidate (L{ganeti.noded.configdelta}).

The records are real journal records of a L{ConfigStore} (the master's
side); the candidate's config.data lives in a temporary root.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import attrs
import orjson
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import serializer
from ganeti.noded.configdelta import REWRITE_DELAY, ConfigFollower, DeltaRefused, check_records, held_serial
from ganeti.noded.failure import RpcFailure
from ganeti.noded.procedures import NodeProcedures
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.wconfd.store import ConfigStore
from tests.unit.wconfd_helpers import by_name, make_config


class FollowerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="gntdelta"))
        self.addCleanup(shutil.rmtree, self.paths.root, True)
        self.paths.ensure_dirs()
        config = make_config(nodes=2, instances=4)
        serializer.write_file(self.paths.config_data, config.to_json(), mode=0o640)
        self.master = ConfigStore(config)  # the master's config, from which the records come
        self.follower = ConfigFollower(self.paths)

    def change(self, os_name: str, instance: str = "inst1.example.test") -> dict[str, Any]:
        inst = by_name(self.master, "instance", instance)
        _stored, record = self.master.update("instance", attrs.evolve(inst, os=os_name).to_dict())
        return orjson.loads(orjson.dumps(record))  # as it crosses the wire

    def on_disk(self) -> ConfigData:
        """config.data once the journal is written into it."""
        self.follower.flush()
        self.assertFalse(os.path.exists(self.follower.journal))
        return ConfigData.from_json(serializer.read_file(self.paths.config_data))

    def restarted(self) -> ConfigFollower:
        """The follower of a NodeD started again (killed before: nothing in memory)."""
        return ConfigFollower(self.paths)

    def test_records_bring_config_data_forward(self) -> None:
        base = self.master.serial_no
        records = [self.change("one"), self.change("two", "inst2.example.test")]
        self.assertEqual(self.follower.apply(base, records), base + 2)
        disk = self.on_disk()
        self.assertEqual(disk.serial_no, base + 2)
        self.assertEqual(by_name(disk, "instance", "inst1.example.test").os, "one")
        self.assertEqual(by_name(disk, "instance", "inst2.example.test").os, "two")
        # the same file the master would write
        self.assertEqual(serializer.read_file(self.paths.config_data), self.master.snapshot())
        self.assertEqual(self.follower.pending, 0)
        # and on from there
        self.assertEqual(self.follower.apply(base + 2, [self.change("three")]), base + 3)
        self.assertEqual(by_name(self.on_disk(), "instance", "inst1.example.test").os, "three")

    def test_another_base_is_refused_and_changes_nothing(self) -> None:
        before = serializer.read_file(self.paths.config_data)
        base = self.master.serial_no
        self.change("skipped")
        with self.assertRaisesRegex(DeltaRefused, "holds config serial %d, not %d" % (base, base + 1)):
            self.follower.apply(base + 1, [self.change("two")])
        self.assertEqual(serializer.read_file(self.paths.config_data), before)

    def test_never_goes_back(self) -> None:
        base = self.master.serial_no
        first = self.change("one")
        self.follower.apply(base, [first])
        with self.assertRaises(DeltaRefused):
            self.follower.apply(base - 1, [dict(first, s=base)])  # an older run
        self.assertEqual(self.on_disk().serial_no, base + 1)

    def test_malformed_records_are_refused_and_change_nothing(self) -> None:
        before = serializer.read_file(self.paths.config_data)
        base = self.master.serial_no
        good = self.change("one")
        for bad_base, bad in [
            (base, []),
            (base, [dict(good, s=base + 2)]),  # a gap
            (base, [good, dict(good, s=base + 3)]),
            (base, ["not a record"]),
            (base, [{"s": base + 1, "t": 1.0}]),  # no changes
            (-1, [good]),
            (base, [{"s": base + 1, "t": 1.0, "c": [["frobnicator", "uuid-x", {}]]}]),  # no such kind
        ]:
            with self.assertRaises(DeltaRefused):
                self.follower.apply(bad_base, bad)
            self.assertEqual(serializer.read_file(self.paths.config_data), before)
        # nothing half-applied stays behind: the good record still applies
        self.assertEqual(self.follower.apply(base, [good]), base + 1)

    def test_a_whole_file_written_meanwhile_is_read_again(self) -> None:
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        # the master sends the whole file (e.g. after its restart), newer by two changes
        self.change("two")
        self.change("three")
        whole = self.master.snapshot()
        self.follower.locked(lambda: serializer.write_file(self.paths.config_data, whole, mode=0o640), whole)
        four = self.change("four")
        with self.assertRaises(DeltaRefused):
            self.follower.apply(base + 1, [four])  # the old base is gone
        self.assertEqual(self.follower.serial(), base + 3)
        self.assertEqual(self.follower.apply(base + 3, [four]), base + 4)
        self.assertEqual(by_name(self.on_disk(), "instance", "inst1.example.test").os, "four")

    def test_a_file_written_behind_its_back_is_read_again(self) -> None:
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        self.change("two")
        serializer.write_file(self.paths.config_data, self.master.snapshot(), mode=0o640)  # e.g. a failover fetch
        self.assertEqual(self.follower.serial(), base + 2)
        self.assertEqual(self.follower.apply(base + 2, [self.change("three")]), base + 3)

    def test_acknowledged_records_survive_a_kill_before_the_rewrite(self) -> None:
        before = serializer.read_file(self.paths.config_data)
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        self.follower.apply(base + 1, [self.change("two")])
        # durable in the journal, config.data not rewritten yet
        self.assertEqual(serializer.read_file(self.paths.config_data), before)
        self.assertEqual(self.follower.pending, 2)
        self.assertEqual(held_serial(self.paths), base + 2)  # what this node acknowledged, as tests read it
        follower = self.restarted()
        self.assertEqual(follower.serial(), base + 2)  # replayed
        follower.flush()  # as NodeD does at its start
        self.assertEqual(serializer.read_file(self.paths.config_data), self.master.snapshot())
        self.assertFalse(os.path.exists(follower.journal))
        self.assertEqual(follower.apply(base + 2, [self.change("three")]), base + 3)

    def test_a_kill_between_the_rewrite_and_the_journal_removal(self) -> None:
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        journal = serializer.read_file(self.follower.journal)
        self.follower.flush()
        serializer.write_file(self.follower.journal, journal)  # as if the kill came before its removal
        follower = self.restarted()
        self.assertEqual(follower.serial(), base + 1)  # the record already in config.data is not applied twice
        self.assertEqual(follower.apply(base + 1, [self.change("two")]), base + 2)
        follower.flush()
        self.assertEqual(serializer.read_file(self.paths.config_data), self.master.snapshot())

    def test_a_torn_last_record_was_never_acknowledged(self) -> None:
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        two = self.change("two")
        with open(self.follower.journal, "ab") as handle:
            handle.write(orjson.dumps(two)[:40])  # killed mid-append
        follower = self.restarted()
        self.assertEqual(follower.serial(), base + 1)
        self.assertEqual(follower.apply(base + 1, [two]), base + 2)  # appended after the cut, not after garbage
        self.assertEqual(self.restarted().serial(), base + 2)

    def test_a_journal_of_another_config_data_is_not_replayed(self) -> None:
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        # config.data replaced behind the follower's back by another config of the same serial
        other = ConfigStore(make_config(nodes=2, instances=4))
        other.serial_no = base
        serializer.write_file(self.paths.config_data, other.snapshot(), mode=0o640)
        self.assertEqual(held_serial(self.paths), base)
        follower = self.restarted()
        self.assertEqual(follower.serial(), base)
        self.assertFalse(os.path.exists(follower.journal))
        self.assertEqual(serializer.read_file(self.paths.config_data), other.snapshot())

    def test_a_whole_file_upload_writes_the_journal_in_first(self) -> None:
        base = self.master.serial_no
        self.follower.apply(base, [self.change("one")])
        seen = []
        self.follower.locked(lambda: seen.append(ConfigData.from_json(serializer.read_file(self.paths.config_data))))
        self.assertEqual(seen[0].serial_no, base + 1)
        self.assertFalse(os.path.exists(self.follower.journal))

    def test_a_failed_first_append_leaves_a_journal_that_still_gets_its_base(self) -> None:
        base = self.master.serial_no
        one = self.change("one")
        real_fsync = os.fsync
        os.fsync = self._crash
        try:
            with self.assertRaises(OSError):
                self.follower.apply(base, [one])
        finally:
            os.fsync = real_fsync
        self.assertEqual(self.follower.apply(base, [one]), base + 1)
        self.assertEqual(self.restarted().serial(), base + 1)

    @staticmethod
    def _crash(_fd: int) -> None:
        raise OSError("killed")

    def test_killed_mid_write_leaves_the_old_file(self) -> None:
        before = serializer.read_file(self.paths.config_data)
        base = self.master.serial_no
        record = self.change("one")

        def crash(_fd: int) -> None:
            raise OSError("killed")

        real_fsync = os.fsync
        os.fsync = crash
        try:
            with self.assertRaises(OSError):
                self.follower.apply(base, [record])
        finally:
            os.fsync = real_fsync
        self.assertEqual(serializer.read_file(self.paths.config_data), before)
        self.assertEqual(self.follower.apply(base, [record]), base + 1)
        self.follower.flush()
        self.assertEqual(serializer.read_file(self.paths.config_data), self.master.snapshot())


class CheckRecordsTests(SynchronousTestCase):
    def test_consecutive_runs_only(self) -> None:
        ok = [{"s": 4, "t": 1.0, "c": []}, {"s": 5, "full": {}}]
        self.assertEqual(check_records(3, ok), ok)
        for base, records in [(True, ok), (3, ok[1:]), (3, {}), (3, [{"s": True, "t": 1.0, "c": []}]),
                              (3, [{"s": 4, "full": []}])]:
            with self.assertRaises(DeltaRefused):
                check_records(base, records)


class ProcedureTests(SynchronousTestCase):
    """NodeD's C{config_delta}: journalled at once, config.data rewritten after a pause."""

    def test_config_data_is_rewritten_after_the_deltas(self) -> None:
        paths = Paths(tempfile.mkdtemp(prefix="gntdelta"))
        self.addCleanup(shutil.rmtree, paths.root, True)
        paths.ensure_dirs()
        config = make_config(nodes=2, instances=4)
        serializer.write_file(paths.config_data, config.to_json(), mode=0o640)
        master = ConfigStore(config)
        clock = Clock()
        procedures = NodeProcedures(paths, clock)
        base = master.serial_no
        for n in range(3):
            inst = by_name(master, "instance", "inst1.example.test")
            _stored, record = master.update("instance", attrs.evolve(inst, os="os%d" % n).to_dict())
            self.assertEqual(self.successResultOf(procedures.config_delta(base + n, [orjson.loads(orjson.dumps(record))])),
                             base + n + 1)
        self.assertEqual(ConfigData.from_json(serializer.read_file(paths.config_data)).serial_no, base)
        clock.advance(REWRITE_DELAY)
        self.assertEqual(serializer.read_file(paths.config_data), master.snapshot())
        self.assertFalse(os.path.exists(procedures.config_follower.journal))
        # a refusal is an RPC failure naming what this node holds
        failure = self.failureResultOf(procedures.config_delta(base, [dict(record, s=base + 1)]), RpcFailure)
        self.assertIn("config_delta refused: this node holds config serial %d" % (base + 3), str(failure.value))
