"""WConfD pushes config.data to master candidates and ssconf to every node."""

from __future__ import annotations

import os
import shutil
import socket
import time

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti import crypto, errors, serializer
from ganeti.luxi.client import LuxiClient
from ganeti.config.bootstrap import initial_config
from ganeti.objects import ConfigData, Node, NodeGroup, new_uuid
from ganeti.daemons import free_port
from ganeti.testing.daemons import Daemon, LiveOwner, make_root, remove_root, seed_config
from ganeti.wconfd.client import WConfdClient


def three_node_config() -> ConfigData:
    config = initial_config("cluster.test", "node1.test", "127.0.1.1")
    group = next(iter(config.nodegroups))
    nodes = dict(config.nodes)
    for number, candidate in ((2, True), (3, False)):
        uuid = new_uuid()
        nodes[uuid] = Node(
            name="node%d.test" % number, uuid=uuid, primary_ip="127.0.1.%d" % number,
            secondary_ip="127.0.1.%d" % number, master_candidate=candidate, offline=False, drained=False,
            group=group, master_capable=True, vm_capable=True, powered=True, serial_no=1, ctime=1.0, mtime=1.0,
        )
    return attrs.evolve(config, nodes=nodes)


async def until(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await deferLater(reactor, 0.05, lambda: None)


def serial_of(paths) -> int | None:
    try:
        return ConfigData.from_json(serializer.read_file(paths.config_data)).serial_no
    except (OSError, ValueError):
        return None


def ssconf_of(paths, key: str) -> str | None:
    try:
        with open(paths.ssconf(key)) as handle:
            return handle.read()
    except OSError:
        return None


@pytest_twisted.ensureDeferred
async def test_config_reaches_candidates_and_ssconf_every_node(root):
    roots = [root, make_root("gntr2"), make_root("gntr3")]
    crypto.bootstrap_secrets(roots[0], "cluster.test", node_name="node1.test")
    for paths in roots[1:]:
        os.makedirs(paths.data_dir, exist_ok=True)
        shutil.copy(roots[0].server_pem, paths.server_pem)
    seed_config(roots[0], three_node_config())
    port = free_port()
    nodeds = [
        Daemon(paths, "ganeti-noded", "--bind", "127.0.1.%d" % n, "--port", str(port), tcp=("127.0.1.%d" % n, port))
        for n, paths in enumerate(roots, 1)
    ]
    wconfd = Daemon(roots[0], "ganeti-wconfd", "--rpc-port", str(port))
    luxid = Daemon(roots[0], "ganeti-luxid", "--rpc-port", str(port))
    client = None
    try:
        for daemon in nodeds:
            daemon.start()
        for daemon in nodeds:
            await daemon.ready(reactor)
        wconfd.start()
        await wconfd.ready(reactor)
        client = await WConfdClient.connect(reactor, roots[0].wconfd_socket)
        serial = await client.read_serial()
        # at start-up: node2 (candidate) gets config.data; everyone gets ssconf
        await until(lambda: serial_of(roots[1]) == serial)
        await until(lambda: ssconf_of(roots[2], "master_node") == "node1.test\n")
        assert serial_of(roots[2]) is None, "node3 is not a candidate: no config.data there"
        assert sorted((ssconf_of(roots[1], "master_candidates") or "").split()) == ["node1.test", "node2.test"]
        for paths in roots[1:]:  # the cluster-wide secrets reach every node once
            with open(paths.hmac_key, "rb") as theirs, open(roots[0].hmac_key, "rb") as ours:
                assert theirs.read() == ours.read()

        job = LiveOwner(roots[0], 1)
        uuid = await client.add(job.owner, "nodegroup", NodeGroup(name="rack2", alloc_policy="preferred"))
        serial = await client.read_serial()
        await until(lambda: serial_of(roots[1]) == serial)
        await until(lambda: (ssconf_of(roots[2], "nodegroups") or "").find(uuid + " rack2") >= 0)

        # a candidate that is down catches up when it returns
        nodeds[1].stop()
        await client.add(job.owner, "nodegroup", NodeGroup(name="rack3", alloc_policy="preferred"))
        newest = await client.read_serial()
        await deferLater(reactor, 1.0, lambda: None)
        assert serial_of(roots[1]) != newest
        nodeds[1].start()
        await nodeds[1].ready(reactor)
        await until(lambda: serial_of(roots[1]) == newest, timeout=30)
        assert "node2.test missed config serial" in wconfd.output()

        # job files: on a majority of the candidates (node1 itself + node2) before the id comes back
        luxid.start()
        await luxid.ready(reactor)
        luxi = LuxiClient(roots[0].luxi_socket)
        job_id = luxi.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "reason": []}])
        assert os.path.exists(os.path.join(roots[1].queue_dir, "job-%d" % job_id)), "replicated before the answer"
        assert not os.path.exists(os.path.join(roots[2].queue_dir, "job-%d" % job_id)), "node3 is no candidate"
        nodeds[1].stop()  # now only 1 of 2 candidates can hold a new job: no majority
        with pytest.raises(errors.JobQueueError, match="majority"):
            luxi.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "reason": []}])
        luxi.close()
    finally:
        luxid.stop()
        if client is not None:
            await client.close()
        wconfd.stop()
        for daemon in nodeds:
            daemon.stop()
        for paths in roots[1:]:
            remove_root(paths)
