"""The directory watcher: event masks, names handed to callbacks, one notifier for all directories."""

from __future__ import annotations

from typing import Any

from twisted.internet import inotify
from twisted.python.filepath import FilePath
from twisted.trial.unittest import SynchronousTestCase

from ganeti.dirwatch import CREATED, REMOVED, WRITTEN, DirectoryWatcher, WatchUnavailable, event_mask


class FakeNotifier:
    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.reading = False
        self.closed = False
        self.watches: list[tuple[FilePath[Any], int, list[Any]]] = []

    def startReading(self) -> None:
        self.reading = True

    def watch(self, path: FilePath[Any], mask: int, callbacks: list[Any]) -> None:
        if path.path == self.fail_on:
            raise OSError(2, "No such file or directory")
        self.watches.append((path, mask, callbacks))

    def loseConnection(self) -> None:
        self.closed = True


class EventMaskTests(SynchronousTestCase):
    def test_masks_match_the_kernel_bits(self) -> None:
        self.assertEqual(event_mask([WRITTEN]), inotify.IN_CLOSE_WRITE | inotify.IN_MOVED_TO)
        self.assertEqual(event_mask([CREATED]), inotify.IN_CREATE)
        self.assertEqual(event_mask([REMOVED]), inotify.IN_DELETE | inotify.IN_MOVED_FROM)
        self.assertEqual(event_mask([WRITTEN, CREATED]), inotify.IN_CLOSE_WRITE | inotify.IN_MOVED_TO | inotify.IN_CREATE)

    def test_unknown_or_no_events_are_refused(self) -> None:
        self.assertRaises(ValueError, event_mask, ["modified"])
        self.assertRaises(ValueError, event_mask, [])
        self.assertRaises(ValueError, DirectoryWatcher, None, print, events=["modified"])


class DirectoryWatcherTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.notifiers: list[FakeNotifier] = []
        self.names: list[str] = []
        self.fail_on: str | None = None

    def factory(self, _reactor: Any) -> FakeNotifier:
        notifier = FakeNotifier(self.fail_on)
        self.notifiers.append(notifier)
        return notifier

    def make(self, callback: Any = None, events: Any = (WRITTEN,)) -> DirectoryWatcher:
        return DirectoryWatcher(object(), callback or self.names.append, events=events, notifier_factory=self.factory)

    def test_one_notifier_serves_every_directory(self) -> None:
        watcher = self.make(events=(WRITTEN, REMOVED))
        self.assertFalse(watcher.active)
        watcher.watch("/a")
        watcher.watch("/b")
        self.assertTrue(watcher.active)
        self.assertEqual(len(self.notifiers), 1)
        notifier = self.notifiers[0]
        self.assertTrue(notifier.reading)
        self.assertEqual([w[0].path for w in notifier.watches], ["/a", "/b"])
        self.assertEqual({w[1] for w in notifier.watches}, {event_mask([WRITTEN, REMOVED])})

    def test_callback_gets_the_file_name_as_text(self) -> None:
        watcher = self.make()
        watcher.watch("/q")
        callback = self.notifiers[0].watches[0][2][0]
        callback(None, FilePath(b"/q/job-7"), inotify.IN_CLOSE_WRITE)
        callback(None, FilePath("/q/config.data"), inotify.IN_MOVED_TO)
        self.assertEqual(self.names, ["job-7", "config.data"])

    def test_a_failing_callback_does_not_stop_the_watch(self) -> None:
        calls: list[str] = []

        def callback(name: str) -> None:
            calls.append(name)
            raise RuntimeError("boom")

        watcher = self.make(callback)
        watcher.watch("/q")
        event = self.notifiers[0].watches[0][2][0]
        event(None, FilePath("/q/a"), 0)
        event(None, FilePath("/q/b"), 0)
        self.assertEqual(calls, ["a", "b"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 2)

    def test_a_directory_that_cannot_be_watched_leaves_nothing_open(self) -> None:
        self.fail_on = "/missing"
        watcher = self.make()
        with self.assertRaises(WatchUnavailable):
            watcher.watch("/missing")
        self.assertFalse(watcher.active)
        self.assertTrue(self.notifiers[0].closed)

    def test_a_later_failure_keeps_earlier_directories(self) -> None:
        self.fail_on = "/missing"
        watcher = self.make()
        watcher.watch("/a")
        self.assertRaises(WatchUnavailable, watcher.watch, "/missing")
        self.assertTrue(watcher.active)
        self.assertFalse(self.notifiers[0].closed)

    def test_stop_closes_the_notifier_once(self) -> None:
        watcher = self.make()
        watcher.watch("/a")
        watcher.stop()
        watcher.stop()
        self.assertTrue(self.notifiers[0].closed)
        self.assertFalse(watcher.active)

    def test_no_inotify_is_reported_as_unavailable(self) -> None:
        def no_inotify(_reactor: Any) -> Any:
            raise WatchUnavailable("no inotify on this system")

        watcher = DirectoryWatcher(object(), print, notifier_factory=no_inotify)
        self.assertRaises(WatchUnavailable, watcher.watch, "/a")
        self.assertFalse(watcher.active)
