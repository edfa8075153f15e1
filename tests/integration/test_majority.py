"""What a client was told survives a failover: a config change is answered
only once a majority of the master candidates hold it, and a job's final
status is shown only once a majority hold its final file.

A real 3-node L{LoopbackCluster}, all three master candidates; a candidate's
ganeti-noded is frozen with SIGSTOP (its connections stay open, its answers
do not come) and thawed with SIGCONT.
"""

from __future__ import annotations

import signal

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import errors
from ganeti.luxi.client import LuxiClient
from ganeti.objects import NodeGroup
from ganeti.testing.cluster import LoopbackCluster, loopback_config, serial_of
from ganeti.testing.daemons import LiveOwner
from ganeti.testing.fdcount import quick_job
from ganeti.wconfd.client import WConfdClient
from tests.integration.test_queue_replicas import status_on

#: seconds WConfD waits for a majority before it refuses a change (short for the test)
MAJORITY_TIMEOUT = 4.0


def shown(client: LuxiClient, job_id: int) -> str:
    ((status,),) = client.query_jobs([job_id], ["status"])
    return status


@pytest_twisted.ensureDeferred
async def test_changes_and_final_statuses_wait_for_a_majority(root):
    config = loopback_config(3, candidate_pool_size=10, candidates=["node2.test", "node3.test"])
    cluster = LoopbackCluster(reactor, root, config, prefix="gntm",
                              wconfd_args=("--majority-timeout", str(MAJORITY_TIMEOUT)))
    async with cluster:
        roots, nodeds = cluster.roots, cluster.nodeds
        owner = LiveOwner(roots[0], 1).owner
        client = await WConfdClient.connect(reactor, cluster.master.wconfd_socket)
        luxi = LuxiClient(roots[0].luxi_socket, timeout=60)
        frozen = []

        def freeze(index: int) -> None:
            nodeds[index].process.send_signal(signal.SIGSTOP)
            frozen.append(index)

        def thaw() -> None:
            while frozen:
                nodeds[frozen.pop()].process.send_signal(signal.SIGCONT)

        def group(name: str) -> NodeGroup:
            return NodeGroup(name=name, alloc_policy="preferred")

        try:
            # every candidate answers: when the change is acknowledged, a majority holds it already
            await client.add(owner, "nodegroup", group("rack2"))
            serial = await client.read_serial()
            assert [serial_of(r) is not None and serial_of(r) >= serial for r in roots[1:]].count(True) >= 1

            # node3 frozen: node1 and node2 are a majority, changes and jobs go on
            freeze(2)
            await client.add(owner, "nodegroup", group("rack3"))  # (refused after MAJORITY_TIMEOUT otherwise)
            assert serial_of(roots[1]) >= await client.read_serial()
            ((ok, quick),) = await threads.deferToThread(luxi.submit_many_jobs, [quick_job()])
            assert ok
            await cluster.until(lambda: shown(luxi, quick) == "success", timeout=30)

            # a job runs when node2 freezes too: no majority any more
            ((ok, slow),) = await threads.deferToThread(luxi.submit_many_jobs, [quick_job(2.0)])
            assert ok
            await cluster.until(lambda: shown(luxi, slow) == "running", timeout=30)
            freeze(1)
            before = await client.read_serial()
            with pytest.raises(errors.ConfigurationError, match="not acknowledged: only 1 of 3 master candidates"):
                await client.add(owner, "nodegroup", group("rack4"))
            assert "config writes wait" in cluster.wconfd.output() or "not acknowledged" in cluster.wconfd.output()
            # the job finished on the master meanwhile; clients do not see it final
            await cluster.until(lambda: status_on(roots[0], slow) == "success", timeout=30)
            assert shown(luxi, slow) == "running"
            assert status_on(roots[1], slow) != "success"

            # thawed: the candidates catch up, the job shows its end, changes are acknowledged again
            thaw()
            await cluster.until(lambda: shown(luxi, slow) == "success", timeout=40)
            assert status_on(roots[1], slow) == "success" or status_on(roots[2], slow) == "success"
            newest = await client.read_serial()
            assert newest > before  # the refused change stays on the master ...
            await cluster.until(lambda: all(serial_of(r) == newest for r in roots[1:]), timeout=40)  # ... and spreads
            await client.add(owner, "nodegroup", group("rack5"))
        finally:
            thaw()
            luxi.close()
            await client.close()
