"""ganeti-mond on a real 3-node loopback cluster: Ganeti's API, every
collector, verbose reports, settings changed through gnt-cluster modify,
plugin collectors (good, failing, hanging, garbage), bad requests, and a
MonD restarted while confd is down.

node1 is the master and the only candidate (it runs confd); node2 and
node3 learn everything through confd.  Every MonD refreshes its view every
half second, so changes show within a second or two.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti.daemons import free_port
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.mond import ConfdDaemon, MondDaemon

FILE_DIR = "/srv/ganeti/file-storage"
N1, N2, N3 = "node1.test", "node2.test", "node3.test"
ENVELOPE = {"name", "version", "format_version", "timestamp", "category", "kind", "data"}

GOOD_PLUGIN = """#!/bin/sh
echo '{"category": "storage", "kind": 1, "version": "2", "data": {"answer": 42, "status": {"code": 0, "message": ""}}}'
"""
FAILING_PLUGIN = "#!/bin/sh\necho 'disk on fire' >&2\nexit 3\n"
HANGING_PLUGIN = "#!/bin/sh\nexec sleep 60\n"
GARBAGE_PLUGIN = "#!/bin/sh\necho 'this is not json'\n"


async def until(cluster: LoopbackCluster, check: Any, timeout: float = 30.0) -> None:
    def safe() -> Any:
        try:
            return check()
        except (AssertionError, KeyError, IndexError, OSError, ValueError):
            return False
    await cluster.until(safe, timeout=timeout)


def names(mond: MondDaemon) -> list[str]:
    return [entry[0] for entry in mond.json("/1/list/collectors")]


def report(mond: MondDaemon, category: str, name: str, verbose: bool = False) -> dict[str, Any]:
    return mond.json("/1/report/%s/%s%s" % (category, name, "?verbose=1" if verbose else ""))


def raw_request(mond: MondDaemon, data: bytes) -> bytes:
    with socket.create_connection((mond.address, mond.port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return answer
            answer += chunk


def write_plugin(mond: MondDaemon, name: str, text: str) -> None:
    os.makedirs(mond.plugin_dir, exist_ok=True)
    path = os.path.join(mond.plugin_dir, name)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.chmod(path + ".tmp", 0o755)
    os.rename(path + ".tmp", path)


@pytest_twisted.ensureDeferred
async def test_mond_on_three_nodes(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntmd") as cluster:
        for paths in cluster.roots:
            os.makedirs(node_path(paths.root, FILE_DIR), exist_ok=True)
        confd = ConfdDaemon(cluster.master, "127.0.1.1", free_port("127.0.1.1", udp=True))
        monds = [MondDaemon(paths, name, address, free_port(address), confd.port, "--config-interval", "0.5",
                            "--plugin-timeout", "1")
                 for paths, (name, address) in zip(cluster.roots, cluster.nodes.items())]
        try:
            confd.start()
            await confd.ready(reactor)
            for mond in monds:
                mond.start()
            for mond in monds:
                await mond.ready(reactor)
            await _api(cluster, monds)
            await _settings(cluster, monds)
            await _instances(cluster, monds)
            await _plugins(cluster, monds[2])
            await _bad_requests(monds[1])
            await _confd_down(cluster, confd, monds[1])
        finally:
            for mond in monds:
                mond.stop()
            confd.stop()


async def _api(cluster: LoopbackCluster, monds: list[MondDaemon]) -> None:
    master, other, _third = monds
    for mond in monds:
        assert mond.json("/") == [1]
        assert mond.json("/1") is None
    await until(cluster, lambda: all("storage-file" in names(m) for m in monds))
    listing = master.json("/1/list/collectors")
    assert ["cpu-avg-load", None, 0] in listing and ["diskstats", "storage", 0] in listing
    assert ["inst-status-fake", "instance", 1] in listing and ["ganeti-wconfd", "daemon", 1] in listing
    assert "inst-status-kvm" not in names(master)  # kvm is not enabled
    assert "ganeti-wconfd" not in names(other) and "ganeti-noded" in names(other)  # master daemons: master only
    now = time.time()
    reports = master.json("/1/report/all")
    assert [r["name"] for r in reports] == names(master)
    for item in reports:
        assert set(item) == ENVELOPE, item
        assert item["version"] == "B" and item["format_version"] == 1
        assert abs(item["timestamp"] / 1e9 - now) < 60, item
        if item["kind"] == 1:
            assert item["data"]["status"]["code"] in (0, 1, 2, 4)
    for name, category, kind in listing:
        for verbose in ("", "?verbose=1", "?verbose=0"):
            one = master.json("/1/report/%s/%s%s" % (category or "default", name, verbose))
            assert (one["name"], one["category"], one["kind"]) == (name, category, kind)
            assert set(one) == ENVELOPE
    disks = report(master, "storage", "diskstats")["data"]
    assert disks and {"major", "minor", "name", "readsNum", "secWritten", "timeIO"} <= set(disks[0])
    node = report(master, "default", "node-resources")["data"]
    assert node["cpus"] >= 1 and node["memory"]["total"] > 0 and node["filesystems"] and node["nics"]
    storage = report(other, "storage", "storage-file")["data"]
    assert storage["path"] == node_path(other.paths.root, FILE_DIR)
    assert storage["size"] >= storage["free"] > 0 and storage["status"]["code"] == 0
    noded = report(other, "daemon", "ganeti-noded")["data"]
    assert noded["running"] and noded["status"]["code"] == 0
    assert noded["memory"] > 1 << 20 and noded["open_fds"] > 2 and noded["uptime"] >= 0
    assert noded["pid"] == cluster.nodeds[1].process.pid
    # confd runs on the master and the candidates only, as in Ganeti: a plain node does not report it missing
    assert "ganeti-confd" not in names(other)
    assert other.get("/1/report/daemon/ganeti-confd")[0] == 404
    assert report(master, "daemon", "ganeti-confd")["data"]["status"]["code"] == 0


async def _settings(cluster: LoopbackCluster, monds: list[MondDaemon]) -> None:
    master = monds[0]
    ok(cluster.master, "gnt-cluster", "modify", "--enabled-data-collectors", "diskstats=false")
    await until(cluster, lambda: all("diskstats" not in names(m) for m in monds), timeout=10)
    assert master.get("/1/report/storage/diskstats")[0] == 404
    ok(cluster.master, "gnt-cluster", "modify", "--enabled-data-collectors", "diskstats=true",
       "--data-collector-interval", "cpu-avg-load=0.5,ganeti-noded=0.5")
    await until(cluster, lambda: all("diskstats" in names(m) for m in monds), timeout=10)
    # cpu-avg-load now samples twice a second: it has an average soon, and fresh timestamps
    await until(cluster, lambda: "cpu_total" in report(master, "default", "cpu-avg-load")["data"], timeout=10)
    load = report(master, "default", "cpu-avg-load")["data"]
    assert load["cpu_number"] == len(load["cpus"]) >= 1 and load["cpu_total"] >= 0
    stamps = set()
    deadline = time.monotonic() + 5
    while len(stamps) < 3 and time.monotonic() < deadline:
        stamps.add(report(monds[2], "daemon", "ganeti-noded")["timestamp"])
        await deferLater(reactor, 0.1, lambda: None)
    assert len(stamps) >= 3, "ganeti-noded's report did not follow its 0.5 s interval"
    # bad values change nothing
    for bad in (["--data-collector-interval", "diskstats=0"], ["--enabled-data-collectors", "diskstats=maybe"],
                ["--enabled-data-collectors", "bad name=true"]):
        done = gnt(cluster.master, "gnt-cluster", "modify", *bad)
        assert done.returncode != 0, bad
    assert "diskstats" in names(master)


async def _instances(cluster: LoopbackCluster, monds: list[MondDaemon]) -> None:
    node2 = monds[1]
    for name in ("vm1.test", "vm2.test"):
        ok(cluster.master, "gnt-instance", "add", "-t", "diskless", "-o", "noop", "--no-nics", "--no-name-check",
           "--no-ip-check", "-B", "memory=96,vcpus=2", "-n", N2, name)
    ok(cluster.master, "gnt-instance", "shutdown", "vm2.test")

    def statuses() -> dict[str, dict[str, Any]]:
        return {i["name"]: i for i in report(node2, "instance", "inst-status-fake")["data"]["instances"]}

    # the admin state comes from the config, the actual one from the node's next look: both change
    await until(cluster, lambda: (statuses()["vm2.test"]["admin_state"], statuses()["vm2.test"]["actual_state"])
                == ("down", "shutdown"), timeout=15)
    data = report(node2, "instance", "inst-status-fake")["data"]
    vm1, vm2 = statuses()["vm1.test"], statuses()["vm2.test"]
    assert set(vm1) == {"name", "uuid", "admin_state", "actual_state", "uptime", "mtime", "state_reason", "status"}
    assert (vm1["admin_state"], vm1["actual_state"], vm1["status"]["code"]) == ("up", "running", 0)
    assert (vm2["admin_state"], vm2["actual_state"], vm2["uptime"]) == ("down", "shutdown", None)
    assert vm1["uuid"] and int(vm1["uptime"]) >= 0 and data["status"]["code"] == 0
    verbose = {i["name"]: i for i in report(node2, "instance", "inst-status-fake", True)["data"]["instances"]}
    assert (verbose["vm1.test"]["memory"], verbose["vm1.test"]["vcpus"]) == (96, 2)
    assert report(monds[2], "instance", "inst-status-fake")["data"]["instances"] == []
    # the instance dies behind Ganeti's back: bad (4) once the change is not recent any more
    # (the watcher paused, or LuxiD would start it again at once)
    ok(cluster.master, "gnt-cluster", "watcher", "pause", "1h")
    os.unlink(os.path.join(node2.paths.run_dir, "fake-hypervisor", "vm1.test"))
    await until(cluster, lambda: statuses()["vm1.test"]["status"]["code"] == 4, timeout=30)
    data = report(node2, "instance", "inst-status-fake")["data"]
    assert data["status"]["code"] == 4 and "vm1.test" in data["status"]["message"]
    assert statuses()["vm1.test"]["status"]["message"] == "The instance is not running, but it should be"


async def _plugins(cluster: LoopbackCluster, mond: MondDaemon) -> None:
    write_plugin(mond, "good", GOOD_PLUGIN)
    write_plugin(mond, "failing", FAILING_PLUGIN)
    write_plugin(mond, "hanging", HANGING_PLUGIN)
    write_plugin(mond, "garbage", GARBAGE_PLUGIN)
    await until(cluster, lambda: report(mond, "storage", "good")["data"]["answer"] == 42, timeout=15)
    good = report(mond, "storage", "good")
    assert (good["version"], good["kind"], good["category"]) == ("2", 1, "storage")
    await until(cluster, lambda: "exited with status 3" in report(mond, "default", "failing")["data"]["status"]
                ["message"], timeout=15)
    failing = report(mond, "default", "failing")
    assert failing["kind"] == 1 and failing["data"]["status"]["code"] == 4
    assert "disk on fire" in failing["data"]["status"]["message"]
    await until(cluster, lambda: "no JSON object" in report(mond, "default", "garbage")["data"]["status"]["message"],
                timeout=15)
    await until(cluster, lambda: "longer than 1s" in report(mond, "default", "hanging")["data"]["status"]["message"],
                timeout=15)
    assert report(mond, "default", "hanging")["data"]["status"]["code"] == 4
    # a hanging plugin holds no request up, and the others still report
    started = time.monotonic()
    everything = mond.json("/1/report/all")
    assert time.monotonic() - started < 1.0
    assert {"good", "failing", "hanging", "garbage", "cpu-avg-load"} <= {r["name"] for r in everything}
    for name in ("failing", "hanging", "garbage"):
        os.unlink(os.path.join(mond.plugin_dir, name))
    await until(cluster, lambda: "hanging" not in names(mond), timeout=10)


async def _bad_requests(mond: MondDaemon) -> None:
    for path in ("/nope", "/2", "/1/list", "/1/list/nope", "/1/nothing/here", "/metricsx"):
        assert mond.get(path)[0::2] == (404, b"Resource not found"), path
    for path in ("/1/report", "/1/report/nope/diskstats", "/1/report/storage/cpu-avg-load",
                 "/1/report/default/nope", "/1/report/all/extra", "/1/report/a/b/c"):
        assert mond.get(path)[0::2] == (404, b"Unable to produce a report for the requested resource"), path
    for method in ("POST", "PUT", "DELETE"):
        status, headers, _body = mond.get("/1/report/all", method=method)
        assert status == 405 and headers["allow"] == "GET, HEAD", method
    assert raw_request(mond, b"\x00\xffgarbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert mond.json("/") == [1]  # still serving


async def _confd_down(cluster: LoopbackCluster, confd: ConfdDaemon, mond: MondDaemon) -> None:
    ok(cluster.master, "gnt-cluster", "modify", "--enabled-data-collectors", "node-resources=false")
    await until(cluster, lambda: "node-resources" not in names(mond), timeout=10)
    confd.stop()
    mond.stop()
    mond.start()  # node2 has no config.data: only MonD's own cache of confd's answers
    await mond.ready(reactor)

    def stale_message() -> str:
        return report(mond, "instance", "inst-status-fake")["data"]["status"]["message"]

    await until(cluster, lambda: "confd did not answer" in stale_message(), timeout=15)
    assert "node-resources" not in names(mond) and "diskstats" in names(mond)  # the settings it had
    assert "vm1.test" in [i["name"] for i in report(mond, "instance", "inst-status-fake")["data"]["instances"]]
    assert "ganeti_mond_config_stale 1" in mond.get("/metrics")[2].decode()
    assert "using the copy of" in stale_message()
    confd.start()
    await confd.ready(reactor)
    await until(cluster, lambda: "cached" not in stale_message() and "confd" not in stale_message(), timeout=15)
    assert "ganeti_mond_config_stale 0" in mond.get("/metrics")[2].decode()
    assert json.loads(mond.get("/1/list/collectors")[2])
