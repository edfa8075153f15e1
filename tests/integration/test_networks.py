"""Networks end to end on a real 2-node loopback cluster (fake hypervisor):
our gnt-network and gnt-instance, Ganeti 3.0.2's own gnt-network script
(LUXI Query and QueryNetworks), Ganeti's RAPI client, ssconf_networks on
the nodes, and config.data read by Ganeti's own objects and address pools.
Bad requests get a clear error and change nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import network as netpool
from ganeti import serializer
from ganeti.objects import Network
from ganeti.paths import Paths
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.ganeti_tools import GANETI_LIB, GanetiTools, unavailable_reason
from tests.integration.test_config_ganeti_loads import ganeti_load
from tests.integration.test_rapi_client import SYSTEM_PYTHON, _client_available

CHECKOUT = Path(__file__).resolve().parents[2]
N1, N2 = "node1.test", "node2.test"
USERS = "jack abc123 write\n"
needs_ganeti = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def refused(root: Paths, tool: str, *args: str) -> str:
    """C{tool ARGS}, which must fail and leave config.data's serial alone; its output.

    config.data is written shortly after a change is acknowledged: WConfD
    writes it out (flushconfig) before each reading."""
    ok(root, "gnt-debug", "wconfd", "flushconfig")
    before = json.loads(serializer.read_file(root.config_data))["serial_no"]
    done = gnt(root, tool, *args)
    assert done.returncode != 0, (args, done.stdout, done.stderr)
    ok(root, "gnt-debug", "wconfd", "flushconfig")
    assert json.loads(serializer.read_file(root.config_data))["serial_no"] == before, args
    return done.stdout + done.stderr


def listing(out: str) -> dict[str, list[str]]:
    return {row[0]: row[1:] for row in (line.split("|") for line in out.splitlines() if line)}


def ganeti_made_network() -> dict:
    """A network made by Ganeti 3.0.2's own code (tests/compat/ganeti_network_make.py)."""
    done = subprocess.run([sys.executable, str(CHECKOUT / "tests" / "compat" / "ganeti_network_make.py"), "gnet",
                           "10.20.0.0/28", "10.20.0.1", "10.20.0.9", "10.20.0.4,10.20.0.5"],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(GANETI_LIB)),
                          cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@needs_ganeti
def test_a_network_made_by_ganeti_reads_the_same_here() -> None:
    made = ganeti_made_network()
    net = Network.from_dict(made)
    assert net.to_dict() == dict(made, tags=[]), "kept as Ganeti wrote it"
    pool = netpool.Pool.of(net)
    assert pool.external_reservations() == ["10.20.0.0", "10.20.0.1", "10.20.0.9", "10.20.0.15"]
    assert pool.free_address() == "10.20.0.2"
    assert (pool.free_count(), pool.reserved_count()) == (10, 6)
    ours = netpool.Pool.initialize(Network(network="10.20.0.0/28", gateway="10.20.0.1"))
    ours.reserve("10.20.0.9", external=True)
    for ip in ("10.20.0.4", "10.20.0.5"):
        ours.reserve(ip)
    assert ours.apply(net) == net, "our pool code makes the same bit strings"


def rapi_calls(host: str, port: int, cafile: str, calls: list[list]) -> list[dict]:
    """Ganeti's RAPI client (python3-ganeti-rapi) making C{calls}, each
    C{[method, args, kwargs]}, waiting for each job; their results."""
    script = r'''
import json, sys
from ganeti.rapi import client as rapi
c = rapi.GanetiRapiClient(sys.argv[1], port=int(sys.argv[2]), username="jack", password="abc123",
                          curl_config_fn=rapi.GenericCurlConfig(cafile=sys.argv[4], timeout=60))
out = []
for method, args, kwargs in json.loads(sys.argv[3]):
    try:
        result = getattr(c, method)(*args, **kwargs)
        if method.startswith(("Create", "Delete", "Modify", "Connect", "Disconnect", "Add", "Remove")):
            c.WaitForJobCompletion(result)
            result = c.GetJobStatus(result)["status"]
        out.append({"ok": result})
    except rapi.GanetiApiError as e:
        out.append({"error": str(e), "code": e.code})
print(json.dumps(out))
'''
    done = subprocess.run([SYSTEM_PYTHON, "-c", script, host, str(port), json.dumps(calls), cafile],
                          capture_output=True,
                          text=True, timeout=300, cwd=tempfile.gettempdir(),
                          env={"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()})
    assert done.returncode == 0, done.stdout + done.stderr
    results: list[dict] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def check_our_cli(root: Paths) -> None:
    ok(root, "gnt-network", "add", "--network=10.30.0.0/28", "--gateway=10.30.0.1", "-m", "aa:30:00",
       "--add-reserved-ips=10.30.0.2", "--tags=t1", "net1")
    out = ok(root, "gnt-network", "list", "--no-headers", "--separator=|")
    assert listing(out) == {"net1": ["10.30.0.0/28", "10.30.0.1", "aa:30:00", "", "t1"]}, out
    assert "overlaps network 'net1'" in refused(root, "gnt-network", "add", "--network=10.30.0.8/29", "net2")
    assert "already exists" in refused(root, "gnt-network", "add", "--network=10.31.0.0/24", "net1")
    assert "at least a /30" in refused(root, "gnt-network", "add", "--network=10.31.0.0/31", "tiny")
    ok(root, "gnt-network", "connect", "-N", "mode=routed,link=rt30", "net1")  # every group
    out = ok(root, "gnt-network", "list", "--no-headers", "--separator=|", "-o", "name,group_list,group_cnt")
    assert listing(out) == {"net1": ["default (routed, rt30, )", "1"]}, out
    assert "still connected to node groups: default" in refused(root, "gnt-network", "remove", "net1")

    ok(root, "gnt-instance", "add", "-t", "diskless", "-n", N2, "-o", "noop", "-H", "fake", "-B", "memory=64M",
       "--no-name-check", "--no-ip-check", "--no-start", "--net", "0:network=net1,ip=pool", "web1.test")
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator=|", "-o",
             "name,nic.ip/0,nic.mode/0,nic.link/0,nic.network.name/0")
    assert listing(out) == {"web1.test": ["10.30.0.3", "routed", "rt30", "net1"]}, out
    assert "no mode or link" in refused(root, "gnt-instance", "add", "-t", "diskless", "-n", N2, "-o", "noop",
                                        "--no-name-check", "--no-ip-check", "--no-start",
                                        "--net", "0:network=net1,mode=bridged", "web2.test")
    info = ok(root, "gnt-network", "info", "net1")
    assert "  Subnet: 10.30.0.0/28\n" in info and "  Free: 11 (68.75%)\n" in info, info
    assert "     0 XXXX...........X" in info and "10.30.0.0, 10.30.0.1, 10.30.0.2, 10.30.0.15" in info, info
    assert "    default (mode:routed link:rt30 vlan:)\n" in info and "    web1.test: 0:10.30.0.3\n" in info, info
    assert "web1.test: nic0/10.30.0.3" in refused(root, "gnt-network", "disconnect", "net1")
    ok(root, "gnt-network", "modify", "--remove-reserved-ips=10.30.0.2", "--gateway6=fe80::1", "net1")
    ok(root, "gnt-network", "add-tags", "net1", "t2")
    assert ok(root, "gnt-network", "list-tags", "net1").split() == ["t1", "t2"]
    out = ok(root, "gnt-network", "list", "--no-headers", "--separator=|", "-o",
             "name,free_count,reserved_count,inst_list,gateway6,external_reservations")
    assert listing(out) == {"net1": ["12", "4", "web1.test", "fe80::1", "10.30.0.0, 10.30.0.1, 10.30.0.15"]}, out
    assert len(ok(root, "gnt-network", "list-fields", "--no-headers").splitlines()) == 19


def check_ganeti_gnt_network(tools: GanetiTools) -> None:
    tools.ok("gnt-network", "add", "--network=10.40.0.0/29", "--gateway=10.40.0.1", "--network6=2001:db8::/64",
             "gnet")
    tools.ok("gnt-network", "connect", "--nic-parameters=mode=bridged,link=br40", "gnet", "default")
    out = tools.ok("gnt-network", "list", "--no-headers", "--separator=|", "-o", "name,network,group_list", "gnet")
    assert out == "gnet|10.40.0.0/29|default (bridged, br40, )\n", out
    info = tools.ok("gnt-network", "info", "gnet")  # LUXI QueryNetworks
    assert "Network name: gnet\n" in info and "  IPv6 Subnet: 2001:db8::/64\n" in info, info
    assert "  not used by any instances\n" in info, info
    tools.ok("gnt-network", "modify", "--mac-prefix=aa:40:00", "--add-reserved-ips=10.40.0.5", "gnet")
    out = tools.ok("gnt-network", "list", "--no-headers", "--separator=|", "-o", "mac_prefix,map", "gnet")
    assert out == "aa:40:00|XX...X.X\n", out
    # Ganeti's gnt-instance: a NIC on the network, its address from the pool
    tools.ok("gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", N2, "--no-name-check", "--no-ip-check",
             "--no-start", "-B", "memory=64", "--net", "0:network=gnet,ip=pool", "gweb.test")
    info = tools.ok("gnt-network", "info", "gnet")
    assert "  used by 1 instances:\n    gweb.test: 0:10.40.0.2\n" in info, info
    out = tools.ok("gnt-instance", "list", "--no-headers", "--separator=|", "-o", "nic.ip/0,nic.mode/0,nic.link/0",
                   "gweb.test")
    assert out == "10.40.0.2|bridged|br40\n", out
    tools.ok("gnt-instance", "remove", "-f", "gweb.test")
    tools.ok("gnt-network", "add-tags", "gnet", "gtag")
    assert tools.ok("gnt-network", "list-tags", "gnet") == "gtag\n"
    tools.ok("gnt-network", "remove-tags", "gnet", "gtag")
    failed = tools.run("gnt-network", "remove", "gnet")
    assert failed.returncode != 0 and "still connected" in failed.stdout + failed.stderr, failed
    tools.ok("gnt-network", "disconnect", "gnet", "default")
    tools.ok("gnt-network", "remove", "gnet")
    assert "gnet" not in tools.ok("gnt-network", "list", "--no-headers")
    fields = tools.ok("gnt-network", "list-fields", "--no-headers")
    assert len(fields.splitlines()) == 19, fields


@pytest_twisted.ensureDeferred
async def test_networks_with_our_and_ganetis_tools(root):
    workdir = tempfile.mkdtemp(prefix="gntn")
    try:
        async with LoopbackCluster(reactor, root, loopback_config(2), rapi_users=USERS, prefix="gntn") as cluster:
            await threads.deferToThread(check_our_cli, root)
            net1 = next(n for n in json.loads(serializer.read_file(root.config_data))["networks"].values())
            # ssconf on every node: "<uuid> <name>"
            for paths in cluster.roots:
                await cluster.until(lambda p=paths: os.path.exists(p.ssconf("networks"))
                                    and open(p.ssconf("networks")).read() == "%s net1\n" % net1["uuid"], timeout=30)
            if unavailable_reason() is None:
                loaded = await threads.deferToThread(ganeti_load, root.config_data)
                assert loaded["networks"]["net1"]["external"] == ["10.30.0.0", "10.30.0.1", "10.30.0.15"], loaded
                assert loaded["networks"]["net1"]["map"] == "XX.X...........X", loaded
                assert loaded["group_networks"]["default"] == {
                    net1["uuid"]: {"mode": "routed", "link": "rt30", "vlan": ""}}, loaded
                tools = GanetiTools.for_root(root.root, N1, workdir)
                await threads.deferToThread(check_ganeti_gnt_network, tools)
            ok(root, "gnt-instance", "remove", "-f", "web1.test")
            out = ok(root, "gnt-network", "list", "--no-headers", "--separator=|", "-o", "name,free_count,inst_cnt")
            assert out == "net1|13|0\n", "the address went back to the pool: %s" % out
            await cluster.until(lambda: json.loads(serializer.read_file(root.config_data))["networks"][net1["uuid"]]
                                ["reservations"] == "0" * 16, timeout=30)
            ok(root, "gnt-network", "disconnect", "net1", "default")
            ok(root, "gnt-network", "remove", "net1")
            if _client_available():
                rapi = cluster.rapi
                assert rapi is not None
                results = await threads.deferToThread(rapi_calls, rapi.host, rapi.port, rapi.paths.rapi_pem, [
                    ["CreateNetwork", ["rnet", "10.50.0.0/29"], {"gateway": "10.50.0.1", "tags": "r1"}],
                    ["ConnectNetwork", ["rnet", "default", "openvswitch", "ovs0"], {}],
                    ["GetNetworks", [], {"bulk": True}],
                    ["GetNetwork", ["rnet"], {}],
                    ["ModifyNetwork", ["rnet"], {"add_reserved_ips": ["10.50.0.3"]}],
                    ["GetNetworkTags", ["rnet"], {}],
                    ["DeleteNetwork", ["rnet"], {}],
                    ["DisconnectNetwork", ["rnet", "default"], {}],
                    ["DeleteNetwork", ["rnet"], {}],
                    ["GetNetworks", [], {}],
                    ["GetNetwork", ["rnet"], {}],
                ])
                assert [r.get("ok") for r in results[:2]] == ["success", "success"], results
                (bulk,) = results[2]["ok"]
                assert bulk["name"] == "rnet" and bulk["group_list"] == [["default", "openvswitch", "ovs0", ""]]
                assert bulk["free_count"] == 5 and bulk["tags"] == ["r1"], bulk
                assert results[3]["ok"]["external_reservations"] == "10.50.0.0, 10.50.0.1, 10.50.0.7", results[3]
                assert results[4]["ok"] == "success" and results[5]["ok"] == ["r1"], results
                assert results[6]["ok"] == "error", "still connected"
                assert [r.get("ok") for r in results[7:10]] == ["success", "success", []], results
                assert results[10]["code"] == 404, results[10]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
