"""Three real confd daemons on loopback (127.0.1.1-3) with different config serials."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from typing import Any, Iterator

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import serializer
from ganeti.confd import wire
from ganeti.confd.client import ConfdClient, ConfdTimeout
from ganeti.config.bootstrap import grow, initial_config
from ganeti.daemons import free_port
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config

KEY = b"00112233445566778899aabbccddeeff00112233\n"
PEERS = ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
SERIALS = [10, 11, 12]
CLI = os.path.join(os.path.dirname(sys.executable), "gnt-confd-query")


def config(serial: int) -> ConfigData:
    cfg = grow(initial_config("cluster.test", "node1.test", "127.0.1.1"), nodes=4, instances=4)
    return attrs.evolve(cfg, serial_no=serial, cluster=attrs.evolve(cfg.cluster, serial_no=serial))


def raw_query(address: str, port: int, qtype: int, query: Any = None, key: bytes = KEY, timeout: float = 0.5) -> dict[str, Any] | None:
    """One blocking request/reply; None on timeout."""
    rsalt = str(uuid.uuid4())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(wire.pack_request(key, wire.request(qtype, query, rsalt), time.time()), (address, port))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return None
    rep, salt = wire.unpack_reply(KEY, data)
    assert salt == rsalt
    return rep


def wait_ready(daemon: Daemon, address: str, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while raw_query(address, port, wire.REQ_PING, timeout=0.2) is None:
        assert daemon.process is not None
        if daemon.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("confd on %s did not start:\n%s" % (address, daemon.output()))


class Cluster:
    def __init__(self) -> None:
        self.port = free_port(udp=True)
        self.roots: list[Paths] = []
        self.daemons: list[Daemon] = []
        for address, serial in zip(PEERS, SERIALS):
            root = make_root("gcfd")
            seed_config(root, config(serial))
            with open(root.hmac_key, "wb") as handle:
                handle.write(KEY)
            serializer.write_file(root.ssconf("master_candidates_ips"), "\n".join(PEERS) + "\n")
            self.roots.append(root)
            self.daemons.append(Daemon(root, "ganeti-confd", "--bind", address, "--port", str(self.port), "--check-interval", "1"))

    def start(self, n: int) -> None:
        self.daemons[n].start()
        wait_ready(self.daemons[n], PEERS[n], self.port)

    def client(self, key: bytes = KEY, **kwargs: Any) -> ConfdClient:
        return ConfdClient(reactor, key, PEERS, port=self.port, **kwargs)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    nodes = Cluster()
    try:
        for n in range(3):
            nodes.start(n)
        yield nodes
    finally:
        for daemon in nodes.daemons:
            daemon.stop()
        for root in nodes.roots:
            remove_root(root)


@pytest_twisted.ensureDeferred
async def test_newest_answer_wins(cluster: Cluster) -> None:
    client = cluster.client(timeout=5)
    try:
        result = await client.query(wire.REQ_CLUSTER_MASTER, wait="all")
        assert (result.answer, result.serial, result.peer) == ("node1.test", 12, "127.0.1.3")
        assert sorted(r.serial for r in result.replies) == SERIALS
        assert not result.timed_out
        pointed = await client.query(wire.REQ_CONFIG_QUERY, "/serial_no", wait="all")
        assert (pointed.answer, pointed.serial) == (12, 12)
        role = await client.query(wire.REQ_NODE_ROLE_BYNAME, "node1", wait="all")
        assert role.answer == wire.NODE_ROLE_MASTER
        pips = await client.query(wire.REQ_NODE_PIP_LIST)
        assert len(pips.answer) == 5
    finally:
        client.close()


def test_every_type_answered(cluster: Cluster) -> None:
    for qtype, query in [(0, None), (1, "node2"), (2, {"1": "10.0.0.1"}), (3, {"3": [0, 1, 2]}), (4, None), (5, None),
                         (6, None), (7, "node1.test"), (8, "node1.test"), (9, "inst1.example.test"),
                         (10, "/cluster/cluster_name"), (11, None), (12, None)]:
        rep = raw_query(PEERS[0], cluster.port, qtype, query)
        assert rep is not None, qtype
        assert rep["protocol"] == 1


def test_no_tls_libraries_loaded(cluster: Cluster) -> None:
    """confd signs with HMAC and never speaks TLS: pyOpenSSL and the
    cryptography it loads (~14 MiB of RSS) stay out of the process."""
    process = cluster.daemons[0].process
    assert process is not None and process.poll() is None
    with open("/proc/%d/maps" % process.pid) as handle:
        maps = handle.read()
    assert "cryptography" not in maps
    assert raw_query(PEERS[0], cluster.port, wire.REQ_PING) is not None


def test_wrong_key_gets_nothing(cluster: Cluster) -> None:
    assert raw_query(PEERS[0], cluster.port, wire.REQ_CLUSTER_MASTER, key=b"ffffffffffffffffffffffffffffffffffffffff\n") is None
    stale = wire.pack_request(KEY, wire.request(wire.REQ_PING, None, "x"), time.time() - 1000)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.5)
        sock.sendto(stale, (PEERS[0], cluster.port))
        with pytest.raises(socket.timeout):
            sock.recv(65536)


@pytest_twisted.ensureDeferred
async def test_wrong_key_client_times_out(cluster: Cluster) -> None:
    client = cluster.client(key=b"ffffffffffffffffffffffffffffffffffffffff\n")
    try:
        with pytest.raises(ConfdTimeout):
            await client.query(wire.REQ_CLUSTER_MASTER, timeout=1)
    finally:
        client.close()


def test_flood_of_bad_packets(cluster: Cluster) -> None:
    """Bad packets sent as fast as one socket can while good queries go on.

    UDP has no flow control: the kernel drops what does not fit into the
    daemon's receive buffer, good and bad alike, so a good query may need a
    retry; most must be answered, and the daemon survives.
    """
    import threading

    good_key_bad_time = wire.pack_request(KEY, wire.request(0, None, "x"), 1)
    junk = [b"plj0{", b"\x00" * 1000, b"plj0" + b"x" * 5000, good_key_bad_time,
            wire.pack_request(b"bad\n", wire.request(0, None, "x"), time.time())]
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        # ~20,000 bad packets a second (Ganeti's own confd answers 3,300 good
        # ones): unpaced, the kernel would drop good and bad alike and the
        # outcome would measure the machine's load, not the daemon
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            while not stop.is_set():
                for _ in range(200):
                    sock.sendto(junk[sent[0] % len(junk)], (PEERS[1], cluster.port))
                    sent[0] += 1
                time.sleep(0.01)

    thread = threading.Thread(target=flood)
    thread.start()
    try:
        time.sleep(0.3)  # the flood is under way
        answered = 0
        for _ in range(20):
            time.sleep(0.02)  # good queries spread over the flood
            rep = raw_query(PEERS[1], cluster.port, wire.REQ_CLUSTER_MASTER, timeout=0.3)
            if rep is not None:
                assert rep["answer"] == "node1.test"
                answered += 1
    finally:
        stop.set()
        thread.join()
    assert sent[0] > 5000
    assert answered >= 10, (answered, sent[0])
    rep = None
    for _ in range(10):
        rep = raw_query(PEERS[1], cluster.port, wire.REQ_CLUSTER_MASTER, timeout=0.5)
        if rep is not None:
            break
    assert rep is not None and rep["answer"] == "node1.test"
    assert cluster.daemons[1].process is not None and cluster.daemons[1].process.poll() is None


def test_reload_on_change(cluster: Cluster) -> None:
    root = cluster.roots[0]
    seed_config(root, config(30))
    deadline = time.monotonic() + 5
    while True:
        rep = raw_query(PEERS[0], cluster.port, wire.REQ_CLUSTER_MASTER)
        if rep is not None and rep["serial"] == 30:
            break
        assert time.monotonic() < deadline, rep
        time.sleep(0.05)
    with open(root.config_data, "wb") as handle:  # a half-written file in place
        handle.write(config(31).to_json()[:100])
    time.sleep(1.5)
    rep = raw_query(PEERS[0], cluster.port, wire.REQ_CLUSTER_MASTER)
    assert rep is not None and rep["serial"] == 30
    seed_config(root, config(SERIALS[0]))


def test_cli(cluster: Cluster) -> None:
    out = subprocess.run([CLI, "--root", cluster.roots[0].root, "--port", str(cluster.port), "--all", "-v", "cluster_master"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == '"node1.test"'
    assert "serial 12" in out.stdout
    bad = subprocess.run([CLI, "--root", cluster.roots[0].root, "--port", str(cluster.port), "node_role_byname", "nosuch"],
                         capture_output=True, text=True, timeout=120)
    assert (bad.returncode, bad.stdout) == (1, "0\n")


@pytest_twisted.ensureDeferred
async def test_one_candidate_down(cluster: Cluster) -> None:
    """Last: stops the newest daemon; the other two still answer."""
    cluster.daemons[2].stop()
    client = cluster.client(timeout=1)
    try:
        result = await client.query(wire.REQ_CLUSTER_MASTER)  # majority of 3 = 2
        assert (result.answer, result.serial, result.timed_out) == ("node1.test", 11, False)
        everyone = await client.query(wire.REQ_CLUSTER_MASTER, wait="all")
        assert everyone.timed_out and len(everyone.replies) == 2 and everyone.serial == 11
    finally:
        client.close()
    cluster.start(2)
