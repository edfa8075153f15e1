import time, signal
import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater
from ganeti.testing.cluster import LoopbackCluster, ok
from tests.integration.test_webui_browser import cluster_config, USERS, INSTANCE
from ganeti.luxi.client import LuxiClient
from ganeti.rapi.ui.events import INSTANCE_FIELDS, NODE_FIELDS, JOB_FIELDS

@pytest_twisted.ensureDeferred
async def test_dbg(root):
    async with LoopbackCluster(reactor, root, cluster_config(), rapi_users=USERS, prefix="gntd") as cluster:
        cluster.nodeds[2].kill(signal.SIGKILL)
        await deferLater(reactor, 5, lambda: None)
        print(ok(cluster.master, "gnt-instance", "startup", INSTANCE))
        c = LuxiClient(cluster.master.luxi_socket)
        for what, fields in (("node", NODE_FIELDS), ("instance", INSTANCE_FIELDS)):
            t = time.time()
            r = c.call("Query", what, fields, None)
            print(what, time.time() - t, r["data"])
        t = time.time()
        print(c.call("QueryJobs", None, JOB_FIELDS), time.time() - t)
