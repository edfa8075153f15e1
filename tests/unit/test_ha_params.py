"""The HA parameters file: defaults, validation, replication order."""

from __future__ import annotations

import os
import tempfile

from twisted.trial.unittest import SynchronousTestCase

from ganeti.ha import params as ha_params
from ganeti.paths import Paths


class HaParamsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp())

    def test_missing_file_gives_defaults(self) -> None:
        params = ha_params.read(self.paths)
        self.assertEqual((params.liveness_timeout, params.auto_failover, params.failover_timeout), (2.0, False, 10.0))

    def test_change_write_read(self) -> None:
        new = ha_params.read(self.paths).changed(auto_failover=True, failover_timeout=15)
        ha_params.write(self.paths, new)
        got = ha_params.read(self.paths)
        self.assertEqual((got.auto_failover, got.failover_timeout, got.serial_no), (True, 15.0, 1))

    def test_bad_values_are_refused_with_the_parameter_named(self) -> None:
        base = ha_params.HaParams()
        for changes, word in [({"liveness_timeout": 0}, "liveness_timeout"),
                              ({"failover_timeout": "ten"}, "failover_timeout"),
                              ({"auto_failover": "yes"}, "auto_failover"),
                              ({"failover_timeout": 3, "liveness_timeout": 5}, "longer"),
                              ({"bogus": 1}, "bogus")]:
            with self.assertRaises(ha_params.HaParamsError) as caught:
                base.changed(**changes)
            self.assertIn(word, str(caught.exception))

    def test_damaged_copy_gives_defaults(self) -> None:
        os.makedirs(self.paths.data_dir, exist_ok=True)
        with open(ha_params.params_path(self.paths), "w") as handle:
            handle.write('{"liveness_timeout": -1')
        self.assertEqual(ha_params.read(self.paths), ha_params.HaParams())

    def test_an_older_replica_does_not_replace_a_newer_one(self) -> None:
        newer = ha_params.HaParams().changed(auto_failover=True).changed(failover_timeout=20)
        ha_params.write(self.paths, newer)
        self.assertFalse(ha_params.accept(self.paths, ha_params.HaParams().changed(auto_failover=False)))
        self.assertEqual(ha_params.read(self.paths).failover_timeout, 20.0)
        self.assertTrue(ha_params.accept(self.paths, newer.changed(liveness_timeout=3)))
        self.assertEqual(ha_params.read(self.paths).liveness_timeout, 3.0)
