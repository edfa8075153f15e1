"""Modules put in sys.modules without running them (L{ganeti.leanimports.defer_module})."""

from __future__ import annotations

import sys
import threading

from twisted.trial.unittest import SynchronousTestCase

from ganeti import leanimports

#: a standard module nothing in the test process imports
NAME = "colorsys"


class DeferModuleTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.addCleanup(sys.modules.pop, NAME, None)
        if NAME in sys.modules:
            self.skipTest("%s is imported already" % NAME)

    def test_runs_when_an_attribute_is_asked_for(self) -> None:
        self.assertTrue(leanimports.defer_module(NAME))
        import colorsys

        self.assertNotIn("rgb_to_hsv", vars(colorsys))  # imported, not run
        self.assertEqual(colorsys.rgb_to_hsv(1.0, 0.0, 0.0), (0.0, 1.0, 1.0))
        self.assertIs(sys.modules[NAME], colorsys)

    def test_from_import_runs_it(self) -> None:
        leanimports.defer_module(NAME)
        from colorsys import hls_to_rgb

        self.assertEqual(hls_to_rgb(0.0, 0.5, 1.0), (1.0, 0.0, 0.0))

    def test_threads_asking_at_once_get_the_run_module(self) -> None:
        leanimports.defer_module(NAME)
        module = sys.modules[NAME]
        found: list[object] = []
        threads = [threading.Thread(target=lambda: found.append(module.rgb_to_yiq(0.0, 0.0, 0.0)))
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(found, [(0.0, 0.0, 0.0)] * 8)

    def test_a_missing_attribute_is_still_an_attribute_error(self) -> None:
        leanimports.defer_module(NAME)
        import colorsys

        self.assertRaises(AttributeError, getattr, colorsys, "no_such_function")
        self.assertFalse(hasattr(colorsys, "__no_such_dunder__"))

    def test_not_twice(self) -> None:
        self.assertTrue(leanimports.defer_module(NAME))
        self.assertFalse(leanimports.defer_module(NAME))
        self.assertFalse(leanimports.defer_module("no_such_module_anywhere"))
