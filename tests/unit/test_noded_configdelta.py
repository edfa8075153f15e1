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
from twisted.trial.unittest import SynchronousTestCase

from ganeti import serializer
from ganeti.noded.configdelta import ConfigFollower, DeltaRefused, check_records
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
        return ConfigData.from_json(serializer.read_file(self.paths.config_data))

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
        self.assertEqual(self.follower.serial(), base)  # read again from the file: nothing half-applied
        self.assertEqual(self.follower.apply(base, [record]), base + 1)


class CheckRecordsTests(SynchronousTestCase):
    def test_consecutive_runs_only(self) -> None:
        ok = [{"s": 4, "t": 1.0, "c": []}, {"s": 5, "full": {}}]
        self.assertEqual(check_records(3, ok), ok)
        for base, records in [(True, ok), (3, ok[1:]), (3, {}), (3, [{"s": True, "t": 1.0, "c": []}]),
                              (3, [{"s": 4, "full": []}])]:
            with self.assertRaises(DeltaRefused):
                check_records(base, records)
