"""The fork server's copy of the config against real sockets: L{ask_config}'s
AMP exchange with a real WConfD (and with a server that misbehaves), and
L{ConfigSeed} following a real WConfD's changes."""

from __future__ import annotations

import os
import socket
import struct
import threading

import attrs
import pytest_twisted
from twisted.internet import reactor, threads
from twisted.trial.unittest import SynchronousTestCase

from ganeti.config.bootstrap import grow, initial_config
from ganeti.luxid.configseed import ConfigSeed, SeedError, ask_config
from ganeti.objects import ConfigData
from ganeti.testing.daemons import Daemon, LiveOwner, seed_config
from ganeti.wconfd.client import WConfdClient
from tests.tempdirs import TempDirs


@pytest_twisted.ensureDeferred
async def test_the_seed_follows_a_real_wconfd_by_its_changes(root):
    seed_config(root, grow(initial_config("cluster.test", "node1.test", "127.0.1.1"), nodes=2, instances=20))
    daemon = Daemon(root, "ganeti-wconfd")
    daemon.start()
    await daemon.ready(reactor)
    client = await WConfdClient.connect(reactor, root.wconfd_socket)
    try:
        seed = ConfigSeed(root.wconfd_socket)
        await threads.deferToThread(seed.refresh)
        whole, serial = await client.read_config_bytes()
        assert seed.config is not None and (seed.serial, seed.config.to_dict()) == (
            serial, ConfigData.from_json(whole).to_dict())
        owner = LiveOwner(root, 300).owner
        names = sorted(i.name for i in seed.config.instances.values())[:3]
        await client.try_update_locks(owner, [("cluster/BGL", "shared")] + [("instance/" + n, "exclusive") for n in names])
        for n in names:
            await client.update_instance(owner, attrs.evolve(await client.read_instance(n), os="changed"))
        answer = await threads.deferToThread(ask_config, root.wconfd_socket, ConfigData.from_json(whole))
        assert (answer["config"], [r["s"] for r in answer["changes"]]) == (b"", [serial + 1, serial + 2, serial + 3])
        await threads.deferToThread(seed.refresh)
        whole, serial = await client.read_config_bytes()
        assert (seed.serial, seed.config.to_dict()) == (serial, ConfigData.from_json(whole).to_dict())
        assert {seed.config.find_instance(n).os for n in names} == {"changed"}
    finally:
        await client.close()
        daemon.stop()


class AskTests(TempDirs, SynchronousTestCase):
    """L{ask_config} on a real Unix socket, against a server thread speaking AMP's framing."""

    def serve(self, reply: bytes) -> tuple[str, list[bytes]]:
        path = os.path.join(self.mktemp() + "-dir", "wconfd.sock")
        os.makedirs(os.path.dirname(path))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        received: list[bytes] = []

        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                received.append(conn.recv(65536))
                if reply:
                    conn.sendall(reply)
            listener.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        return path, received

    @staticmethod
    def box(**values: bytes) -> bytes:
        out = b""
        for key, value in values.items():
            out += struct.pack("!H", len(key)) + key.encode() + struct.pack("!H", len(value)) + value
        return out + b"\x00\x00"

    def test_the_request_and_a_chunked_answer(self) -> None:
        path, received = self.serve(self.box(_answer=b"1", config=b"2", **{"config.1": b'{"a"', "config.2": b":1}"},
                                             serial_no=b"7"))
        answer = ask_config(path, ConfigData(serial_no=5, mtime=2))  # (a whole number in a config.data)
        self.assertEqual((answer["config"], answer["serial_no"]), (b'{"a":1}', 7))
        request = received[0]
        for part in (b"ReadConfig", b"unless_serial", b"deltas", b"True", b"unless_mtime", b"2.0"):
            self.assertIn(part, request)

    def test_an_error_answer_raises(self) -> None:
        path, _ = self.serve(self.box(_error=b"1", _error_code=b"UNKNOWN", _error_description=b"broken"))
        self.assertIn("broken", str(self.assertRaises(SeedError, ask_config, path, None)))

    def test_a_closed_connection_raises(self) -> None:
        path, _ = self.serve(b"")
        self.assertRaises(SeedError, ask_config, path, None)

    def test_a_truncated_answer_raises(self) -> None:
        path, _ = self.serve(self.box(_answer=b"1", serial_no=b"7")[:-4])
        self.assertRaises(SeedError, ask_config, path, None, 2.0)

    def test_nobody_listening_raises(self) -> None:
        self.assertRaises(SeedError, ask_config, "/nonexistent/wconfd.sock", None)

    def test_no_answer_in_time_raises(self) -> None:
        path = os.path.join(self.mktemp() + "-dir", "wconfd.sock")
        os.makedirs(os.path.dirname(path))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        self.addCleanup(listener.close)
        self.assertIn("timed out", str(self.assertRaises(SeedError, ask_config, path, None, 0.05)))

