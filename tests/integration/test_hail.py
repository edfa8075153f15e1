"""Ganeti's own iallocator, C{hail} (Debian's ganeti-htools-3.0, extracted by
scripts/install-htools), reads our iallocator input and answers every
request mode sanely; on a 3-node loopback cluster, C{-I hail} places a new
instance and a failover with it moves the instance, while without a hail
under the master's root C{-I hail} is refused.

Skipped, with the reason, when the extracted hail is missing or does not run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred

from ganeti import errors
from ganeti.cmdlib import allocator, iallocator
from ganeti.config.bootstrap import grow, initial_config
from ganeti.luxi.client import LuxiClient
from ganeti.objects import NIC, ConfigData, Disk, Instance, NodeGroup
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from tests.integration.test_instances import NODES, create, instances, op, run_jobs
from tests.integration.test_luxid import in_thread

CHECKOUT = Path(__file__).resolve().parents[2]
HAIL = CHECKOUT / ".venv" / "htools-3.0" / "hail"


def _hail_problem() -> str | None:
    if not os.access(HAIL, os.X_OK):
        return "no hail at %s (scripts/install-htools extracts Debian's ganeti-htools-3.0)" % HAIL
    try:
        done = subprocess.run([str(HAIL), "--version"], capture_output=True, timeout=30, check=False)
    except OSError as e:
        return "hail does not run: %s" % e
    if done.returncode != 0:
        return "hail does not run: %s" % done.stderr.decode("utf-8", "replace")[-300:]
    return None


_PROBLEM = _hail_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=_PROBLEM or "")

N1, N2, N3, N4, N5 = ("node%d.example.test" % n for n in range(1, 6))


def config() -> ConfigData:
    """5 nodes: 1-3 in group "default", 4 and 5 in group "other"; two sharedfile
    instances (512 MiB, one 2 GiB disk, one bridged NIC) on node 2."""
    cfg = grow(initial_config("cluster.example.test", N1, "192.0.2.1"), nodes=4)
    other = NodeGroup(name="other", uuid="group-other", alloc_policy="preferred")
    nodes = {u: (attrs.evolve(n, group="group-other") if n.name in (N4, N5) else n)
             for u, n in cfg.nodes.items()}
    cfg = attrs.evolve(cfg, nodes=nodes, nodegroups=dict(cfg.nodegroups, **{"group-other": other}))
    node2 = next(u for u, n in cfg.nodes.items() if n.name == N2)
    insts, disks = {}, {}
    for index in (1, 2):
        disks["disk-%d" % index] = Disk(uuid="disk-%d" % index, dev_type="sharedfile", size=2048, mode="rw",
                                        nodes=[node2])
        insts["inst-%d" % index] = Instance(
            name="inst%d.example.test" % index, uuid="inst-%d" % index, primary_node=node2,
            disk_template="sharedfile", disks=["disk-%d" % index], hypervisor="fake", os="noop", admin_state="up",
            beparams={"maxmem": 512, "minmem": 512, "vcpus": 1},
            nics=[NIC(mac="aa:00:00:00:00:0%d" % index, nicparams={"mode": "bridged", "link": "br0"})])
    return attrs.evolve(cfg, instances=insts, disks=disks)


def nodes(cfg: ConfigData, free: dict[str, int] | None = None) -> list[allocator.NodeState]:
    """Every node with 8 GiB (or C{free}) free of 16 GiB, 100 GiB of 200 GiB free disk, 8 CPUs."""
    return [allocator.NodeState(u, n.name or "", free_memory=(free or {}).get(n.name or "", 8192),
                                total_memory=16384, free_disk=102400, total_disk=204800, total_cpus=8)
            for u, n in cfg.nodes.items()]


def ask(cfg: ConfigData, request: iallocator.Request, states: list[allocator.NodeState]) -> Any:
    """Run hail on C{request}; its result (hail runs synchronously without a reactor)."""
    d = ensureDeferred(allocator.run_request(cfg, "hail", str(HAIL), request, states))
    results: list[Any] = []
    d.addBoth(results.append)
    (result,) = results
    if isinstance(result, Exception) or hasattr(result, "raiseException"):
        result.raiseException()
    return result


def test_allocate() -> None:
    cfg = config()
    request = iallocator.AllocateRequest(name="new.example.test", memory=1024, vcpus=1, disk_template="sharedfile",
                                         disks=[{"size": 4096, "mode": "rw"}], hypervisor="fake", os="noop",
                                         nics=[{"mac": "auto", "ip": None, "network": None, "name": None,
                                                "nicparams": {"mode": "bridged", "link": "br0"}}])
    # node 3 has the most memory of the default group, the preferred one
    (chosen,) = iallocator.node_names("hail", ask(cfg, request, nodes(cfg, {N3: 12000})), 1)
    assert chosen in (N1, N3), chosen
    # the node white list restricts it
    restricted = attrs.evolve(request, restrict_to=[N1])
    assert ask(cfg, restricted, nodes(cfg, {N3: 12000})) == [N1]
    # too big for every node: a failure with hail's reason, not a placement
    with pytest.raises(errors.OpPrereqError) as failed:
        ask(cfg, attrs.evolve(request, memory=30000), nodes(cfg))
    assert "Can't compute nodes using iallocator 'hail'" in str(failed.value)


def test_relocate() -> None:
    cfg = config()
    result = ask(cfg, iallocator.RelocateRequest("inst1.example.test", [N2]), nodes(cfg))
    (target,) = iallocator.node_names("hail", result, 1)
    assert target in (N1, N3), "another node of the same group: %s" % target


def test_node_evacuate() -> None:
    cfg = config()
    request = iallocator.NodeEvacRequest(["inst1.example.test", "inst2.example.test"], "primary-only")
    evacuation = iallocator.evacuation("hail", ask(cfg, request, nodes(cfg)))
    assert evacuation.failed == []
    assert sorted(name for name, _, _ in evacuation.moved) == ["inst1.example.test", "inst2.example.test"]
    for _name, group, targets in evacuation.moved:
        assert group == "default" and targets[0] in (N1, N3), (group, targets)


def test_change_group() -> None:
    cfg = config()
    request = iallocator.ChangeGroupRequest(["inst1.example.test"], ["group-other"])
    evacuation = iallocator.evacuation("hail", ask(cfg, request, nodes(cfg)))
    assert evacuation.failed == []
    ((name, group, targets),) = evacuation.moved
    assert (name, group) == ("inst1.example.test", "other") and targets[0] in (N4, N5), evacuation


@pytest_twisted.ensureDeferred
async def test_create_and_failover_with_hail(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), shared_file_storage=True, prefix="ghail") as cluster:
        client = LuxiClient(cluster.master.luxi_socket, timeout=60)

        async def one(opcode: dict[str, Any]) -> tuple[str, Any]:
            ((status, result),) = await in_thread(run_jobs, client, [opcode])
            return status, result

        # sizes within Ganeti's default instance policy, which hail enforces
        sized = {"disk_template": "sharedfile", "disks": [{"size": 1024}], "beparams": {"memory": 128},
                 "iallocator": "hail"}
        status, result = await one(create("early.test", **sized))
        assert status == "error" and "Can't find allocator 'hail'" in result[1][0], result
        assert "early.test" not in await in_thread(instances, client)

        directory = os.path.join(cluster.master.root, "usr/lib/ganeti/iallocators")
        os.makedirs(directory, exist_ok=True)
        shutil.copy(HAIL, os.path.join(directory, "hail"))
        status, placed = await one(create("hailed.test", **sized))
        assert status == "success", placed
        assert placed[0] in NODES
        assert (await in_thread(instances, client))["hailed.test"][0] == placed[0]

        status, result = await one(op("FAILOVER", "hailed.test", iallocator="hail", ignore_consistency=False))
        assert status == "success", result
        moved_to = (await in_thread(instances, client))["hailed.test"][0]
        assert moved_to in NODES and moved_to != placed[0]
