"""A deposed master's daemons, started again, say why they do not serve.

After a failover the old master's ssconf still names it master (it was down
or cut off); its WConfD and LuxiD lose the start-up vote.  The admin who
restarts them reads the reason ("Voting cannot be won ..."), not a
traceback.
"""

from __future__ import annotations

import os

import attrs
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons
from ganeti.testing.cluster import LoopbackCluster, loopback_config


def deposed(cluster: LoopbackCluster) -> None:
    """The other nodes believe node2 is the master now."""
    for paths in cluster.roots[1:]:
        os.chmod(paths.ssconf("master_node"), 0o644)
        with open(paths.ssconf("master_node"), "w") as handle:
            handle.write("node2.test\n")


@pytest_twisted.ensureDeferred
async def test_restarted_daemons_of_a_deposed_master_print_the_reason(root):
    config = loopback_config(3, candidate_pool_size=10, candidates=["node2.test", "node3.test"])
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))
    async with LoopbackCluster(reactor, root, config, prefix="gntd") as cluster:
        # every node has its ssconf (the master's first distribution) before the master goes
        await cluster.until(lambda: all(os.path.exists(p.ssconf("master_node")) for p in cluster.roots), timeout=60)
        cluster.luxid.stop()
        cluster.wconfd.stop()
        deposed(cluster)
        for daemon in (cluster.wconfd, cluster.luxid):
            offset = os.path.getsize(daemon.log_path)
            daemon.start()
            await threads.deferToThread(daemon.process.wait, 120)
            with open(daemon.log_path, "rb") as handle:
                handle.seek(offset)
                output = handle.read().decode(errors="replace")
            assert "Voting cannot be won" in output, output
            assert "Traceback" not in output and "CancelledError" not in output, output
        # the init-script way (ganeti-daemon-util start): its one line is the reason
        lines: list[str] = []
        await threads.deferToThread(daemons.start, root, ["ganeti-wconfd"], 120, lines.append,
                                   {"ganeti-wconfd": ["--rpc-port", str(cluster.rpc_port)]})
        assert any("Voting cannot be won" in line for line in lines), lines
        assert not any("CancelledError" in line or "Traceback" in line for line in lines), lines
