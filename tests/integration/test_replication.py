"""WConfD pushes config.data to master candidates and ssconf to every node."""

from __future__ import annotations

import os

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti import errors
from ganeti.luxi.client import LuxiClient
from ganeti.objects import NodeGroup
from ganeti.testing.cluster import LoopbackCluster, loopback_config, serial_of, ssconf_of
from ganeti.testing.daemons import LiveOwner
from ganeti.wconfd.client import WConfdClient


@pytest_twisted.ensureDeferred
async def test_config_reaches_candidates_and_ssconf_every_node(root):
    # node2 is a candidate, node3 is not; LuxiD starts late, for the job files
    config = loopback_config(3, candidate_pool_size=10, candidates=["node2.test"])
    cluster = LoopbackCluster(reactor, root, config, luxid=False, prefix="gntr", wconfd_args=("--majority-timeout", "2"))
    client = None
    try:
        await cluster.start()
        roots, nodeds, wconfd, luxid = cluster.roots, cluster.nodeds, cluster.wconfd, cluster.luxid
        client = await WConfdClient.connect(reactor, cluster.master.wconfd_socket)
        serial = await client.read_serial()
        # at start-up: node2 (candidate) gets config.data; everyone gets ssconf
        await cluster.until(lambda: serial_of(roots[1]) == serial)
        await cluster.until(lambda: ssconf_of(roots[2], "master_node") == "node1.test\n")
        assert serial_of(roots[2]) is None, "node3 is not a candidate: no config.data there"
        # each ssconf file is written on its own: node2's candidates list may come a moment later
        await cluster.until(lambda: sorted((ssconf_of(roots[1], "master_candidates") or "").split())
                            == ["node1.test", "node2.test"])
        for paths in roots[1:]:  # the cluster-wide secrets reach every node once
            with open(paths.hmac_key, "rb") as theirs, open(roots[0].hmac_key, "rb") as ours:
                assert theirs.read() == ours.read()

        job = LiveOwner(roots[0], 1)
        uuid = await client.add(job.owner, "nodegroup", NodeGroup(name="rack2", alloc_policy="preferred"))
        serial = await client.read_serial()
        await cluster.until(lambda: serial_of(roots[1]) == serial)
        await cluster.until(lambda: (ssconf_of(roots[2], "nodegroups") or "").find(uuid + " rack2") >= 0)

        # a candidate that is down catches up when it returns; meanwhile (1 of 2
        # candidates) a change is not acknowledged, but kept on the master
        nodeds[1].stop()
        with pytest.raises(errors.ConfigurationError, match="not acknowledged"):
            await client.add(job.owner, "nodegroup", NodeGroup(name="rack3", alloc_policy="preferred"))
        newest = await client.read_serial()
        await deferLater(reactor, 1.0, lambda: None)
        assert serial_of(roots[1]) != newest
        await cluster.start_daemon(nodeds[1])
        await cluster.until(lambda: serial_of(roots[1]) == newest, timeout=30)
        assert "node2.test missed config serial" in wconfd.output()

        # job files: on a majority of the candidates (node1 itself + node2) before the id comes back
        await cluster.start_daemon(luxid)
        luxi = LuxiClient(roots[0].luxi_socket)
        job_id = luxi.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "reason": []}])
        assert os.path.exists(os.path.join(roots[1].queue_dir, "job-%d" % job_id)), "replicated before the answer"
        assert not os.path.exists(os.path.join(roots[2].queue_dir, "job-%d" % job_id)), "node3 is no candidate"
        nodeds[1].stop()  # now only 1 of 2 candidates can hold a new job: no majority
        with pytest.raises(errors.JobQueueError, match="majority"):
            luxi.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "reason": []}])
        luxi.close()
    finally:
        if client is not None:
            await client.close()
        await cluster.stop()
