"""Tests for L{ganeti.luxid.configseed}: the fork server's copy of the config,
brought forward before each fork and handed down to the child's WConfD link."""

from __future__ import annotations

import socket
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import wconfdlink
from ganeti.luxid import configseed
from ganeti.luxid.configseed import ConfigSeed, SeedError
from ganeti.objects import ConfigData
from ganeti.wconfd.store import ConfigStore
from tests.tempdirs import TempDirs
from tests.unit.test_wconfd_store import apply_changes
from tests.unit.wconfd_helpers import make_config


class FakeWConfD:
    """Answers as WConfD's C{ReadConfig} would, from a L{ConfigStore}; records what it was asked."""

    def __init__(self) -> None:
        self.store = ConfigStore(make_config(nodes=3, instances=3))
        self.asked: list[int | None] = []
        self.fail: Exception | None = None
        self.answer: dict[str, Any] | None = None

    def __call__(self, path: str, copy: ConfigData | None, timeout: float) -> dict[str, Any]:
        unless_serial = None if copy is None else copy.serial_no
        self.asked.append(unless_serial)
        if self.fail is not None:
            raise self.fail
        if self.answer is not None:
            return self.answer
        serial = self.store.serial_no
        if unless_serial is not None:
            changes = self.store.changes_since(unless_serial, copy.mtime)
            if changes is not None:
                return {"config": b"", "serial_no": serial, "changes": changes}
        return {"config": self.store.snapshot(), "serial_no": serial}


class SeedTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.now = 100.0
        self.wconfd = FakeWConfD()
        self.seed = ConfigSeed("/nowhere", clock=lambda: self.now, ask=self.wconfd)

    def current(self) -> Any:
        return ConfigData.from_json(self.wconfd.store.snapshot()).to_dict()

    def test_the_first_refresh_reads_the_whole_config_then_only_changes(self) -> None:
        self.seed.refresh()
        first = self.seed.config
        assert first is not None
        self.assertEqual((self.seed.serial, first.to_dict()), (self.wconfd.store.serial_no, self.current()))
        self.seed.refresh()
        self.assertIs(self.seed.config, first)  # nothing changed: the same copy
        start = self.wconfd.store.serial_no
        apply_changes(self.wconfd.store)
        self.seed.refresh()
        self.assertEqual(self.wconfd.asked, [None, start, start])
        assert self.seed.config is not None
        self.assertEqual((self.seed.serial, self.seed.config.to_dict()), (self.wconfd.store.serial_no, self.current()))

    def test_wconfd_not_answering_keeps_the_copy_and_is_left_alone_a_while(self) -> None:
        self.seed.refresh()
        copy, serial = self.seed.config, self.seed.serial
        self.wconfd.fail = SeedError("no answer within the timeout")
        self.seed.refresh()
        self.assertEqual((self.seed.config, self.seed.serial), (copy, serial))
        self.now += configseed.RETRY_AFTER - 1
        self.seed.refresh()
        self.assertEqual(len(self.wconfd.asked), 2)  # not asked again yet
        self.wconfd.fail = None
        self.now += 2
        self.seed.refresh()
        self.assertEqual(len(self.wconfd.asked), 3)

    def test_an_answer_that_does_not_apply_drops_the_copy_for_a_whole_read(self) -> None:
        self.seed.refresh()
        for junk in ({"config": b"", "serial_no": 99},  # a new serial without its changes
                     {"config": b"", "serial_no": 99, "changes": [{"s": 98, "t": 1.0, "c": []}]},  # ending elsewhere
                     {"config": b"", "serial_no": 99, "changes": [{"s": 99}]}):  # not a record
            self.seed.refresh()
            self.wconfd.answer = junk
            self.now += configseed.RETRY_AFTER
            self.seed.refresh()
            self.assertEqual((self.seed.config, self.seed.serial), (None, None), junk)
            self.wconfd.answer = None
            self.now += configseed.RETRY_AFTER
            self.seed.refresh()
            self.assertEqual(self.wconfd.asked[-1], None)  # the whole config again
            assert self.seed.config is not None
            self.assertEqual(self.seed.config.to_dict(), self.current())

    def test_anything_the_request_raises_leaves_the_fork_server_going(self) -> None:
        self.seed.refresh()
        copy = self.seed.config
        self.wconfd.fail = ValueError("Bad float value 1700000000")
        self.seed.refresh()  # (raises nothing)
        self.assertIs(self.seed.config, copy)

    def test_drop_forgets_the_copy(self) -> None:
        self.seed.refresh()
        self.seed.drop()
        self.assertEqual((self.seed.config, self.seed.serial), (None, None))


class FakeClient:
    def __init__(self) -> None:
        self.adopted: tuple[int, Any] | None = None
        self.cache_config = False

    def adopt_config(self, serial: int, config: Any) -> None:
        self.adopted = (serial, config)

    async def read_config(self) -> Any:
        return self.adopted


class HandDownTests(TempDirs, SynchronousTestCase):
    def tearDown(self) -> None:
        wconfdlink.inherit(None, None)

    def link_with(self, client: FakeClient) -> wconfdlink.WConfdLink:
        link = wconfdlink.WConfdLink.__new__(wconfdlink.WConfdLink)
        link.prefetched = []
        link.client = None
        link._connected(client)
        return link

    def test_the_link_of_a_forked_process_starts_from_the_copy_handed_down(self) -> None:
        config = make_config()
        wconfdlink.inherit(config.serial_no, config)
        client = FakeClient()
        self.link_with(client)
        self.assertEqual((client.adopted, client.cache_config), ((config.serial_no, config), True))

    def test_without_a_copy_the_link_reads_as_before(self) -> None:
        wconfdlink.inherit(None, None)
        client = FakeClient()
        self.link_with(client)
        self.assertIsNone(client.adopted)

    def test_the_fork_server_hands_down_its_copy_before_a_fork_and_drops_it_with_the_spare(self) -> None:
        from ganeti.luxid import forkserver
        from ganeti.paths import Paths

        fake = FakeWConfD()
        seed = ConfigSeed("/nowhere", ask=fake)
        spares = forkserver._Spares(Paths.from_option(self.mktemp()), 1811, [], seed=seed)
        spares.hand_down()
        self.assertEqual(wconfdlink._inherited, (fake.store.serial_no, seed.config))
        spares.pid, spares.sock = 12345, socket.socket()
        self.patch(forkserver, "_report", lambda message: None)
        spares.retire()
        self.assertEqual((wconfdlink._inherited, seed.config), (None, None))
