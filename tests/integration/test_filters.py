"""Job filter rules against real daemons: our gnt-filter, Ganeti 3.0.2's own
gnt-filter script and its RAPI client.

NodeD (test delays sleep there), WConfD and LuxiD of one node root (the
cluster of test_luxid), plus ganeti-rapi for the RAPI client.  Nothing is
timed: a paused job is shown to wait by a job submitted after it that
runs to its end while the paused one stays queued; a rate limit of 1 by
the start and end times of the two jobs it held.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti import crypto, daemons
from ganeti.luxi.client import LuxiClient
from ganeti.rapi.testing import RapiDaemon
from ganeti.testing.cluster import gnt, ok
from ganeti.testing.ganeti_tools import GANETI_LIB, GanetiTools, unavailable_reason
from tests.integration.test_config_ganeti_loads import ganeti_load
from tests.integration.test_luxid import Cluster, delay, in_thread, job_row, wait_job

HELD = [["gnt:user", "hold me", 0]]
REJECTED = [["gnt:user", "reject me", 0]]
LIMITED = [["gnt:user", "limited", 0]]


def by_reason(text: str) -> str:
    return json.dumps([["reason", ["=", "reason", text]]])


def held_while_another_runs(client: LuxiClient, held: int) -> None:
    """Job C{held} stays queued while a job submitted after it runs to its end."""
    other = client.submit_job([delay(0.01)])
    assert wait_job(client, other) == "success"
    assert job_row(client, held, "status")[0] == "queued"


async def config_data_holds(root, uuid: str, timeout: float = 60) -> None:
    """Wait until WConfD's background rewrite of config.data holds filter rule C{uuid}."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(root.config_data, "rb") as handle:
            if uuid in json.loads(handle.read()).get("filters", {}):
                return
        await deferLater(reactor, 0.2, lambda: None)
    raise AssertionError("config.data never held filter rule %s" % uuid)


def seconds(ts: list[int]) -> float:
    return ts[0] + ts[1] / 1e6


@pytest_twisted.ensureDeferred
async def test_pause_reject_rate_limit_with_our_cli(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        # PAUSE: the job waits, and runs once the rule is gone
        pause = ok(root, "gnt-filter", "add", "--predicates", by_reason("hold me"), "--action", "PAUSE",
                   "--reason", "maintenance").strip()
        held = client.submit_job([delay(0.01, reason=HELD)])
        await in_thread(held_while_another_runs, client, held)
        listed = ok(root, "gnt-filter", "list", "--no-headers", "--separator=|", "-o", "uuid,priority,action")
        assert listed == "%s|0|PAUSE\n" % pause
        info = ok(root, "gnt-filter", "info", pause)
        assert info.startswith("UUID: %s\n  Watermark: " % pause), info
        assert "  Action: PAUSE\n" in info and "['gnt:user', 'maintenance'," in info and "['luxid', ''," in info
        ok(root, "gnt-filter", "delete", pause)
        assert await in_thread(wait_job, client, held) == "success"
        assert ok(root, "gnt-filter", "list", "--no-headers") == ""

        # REJECT: the job is canceled, the rule named
        reject = ok(root, "gnt-filter", "add", "--predicates", by_reason("reject me"), "--action", "REJECT").strip()
        done = gnt(root, "gnt-debug", "delay", "--reason", "reject me", "0.01")
        assert done.returncode != 0 and "rejected by job filter rule %s" % reject in done.stdout + done.stderr, done
        rejected = client.submit_job([delay(0.01, reason=REJECTED)])
        assert await in_thread(wait_job, client, rejected) == "canceled"
        status, result = job_row(client, rejected, "status", "opresult")
        assert status == "canceled" and reject in str(result)
        ok(root, "gnt-filter", "remove", reject)  # (Ganeti's "delete", by another name)

        # RATE_LIMIT 1: two matching jobs run one after the other; others are not held
        limit = ok(root, "gnt-filter", "add", "--predicates", by_reason("limited"), "--action", "RATE_LIMIT 1").strip()
        first = client.submit_job([delay(1.0, reason=LIMITED)])
        second = client.submit_job([delay(1.0, reason=LIMITED)])
        free = client.submit_job([delay(0.01)])
        for job_id in (first, second, free):
            assert await in_thread(wait_job, client, job_id) == "success"
        spans = sorted((seconds(job_row(client, j, "start_ts")[0]), seconds(job_row(client, j, "end_ts")[0]))
                       for j in (first, second))
        assert spans[0][1] <= spans[1][0], "the two limited jobs overlapped: %r" % spans

        # a rule survives a restart of LuxiD and WConfD (it is in the config) and still holds jobs
        keep = ok(root, "gnt-filter", "add", "--predicates", by_reason("hold me"), "--action", "PAUSE").strip()
        await config_data_holds(root, keep)
        # ... as Ganeti stores them: Ganeti 3.0.2's own objects.ConfigData loads it
        loaded = ganeti_load(root.config_data)
        assert loaded["filters"] == {keep: [0, json.loads(by_reason("hold me")), "PAUSE"],
                                     limit: [0, json.loads(by_reason("limited")), ["RATE_LIMIT", 1]]}, loaded
        cluster.luxid.stop()
        cluster.wconfd.stop()
        for daemon in (cluster.wconfd, cluster.luxid):
            daemon.start()
            await daemon.ready(reactor)
        client = cluster.client()
        assert keep in ok(root, "gnt-filter", "list", "--no-headers", "-o", "uuid")
        held = client.submit_job([delay(0.01, reason=HELD)])
        await in_thread(held_while_another_runs, client, held)
        ok(root, "gnt-filter", "delete", keep)
        assert await in_thread(wait_job, client, held) == "success"

        # bad input: a clear error, nothing stored
        before = ok(root, "gnt-filter", "list", "--no-headers")
        for args, words in [(("add", "--predicates", '[["owner", ["=", "id", 1]]]'), "Unknown filter predicate 'owner'"),
                            (("add", "--action", "DROP"), "Unknown filter action"),
                            (("add", "--predicates", "[[jobid"), "not valid JSON"),
                            (("replace", "not-a-uuid"), "Unable to parse UUID"),
                            (("delete", "0f6c8a7e-1d2b-4c3d-9e8f-a1b2c3d4e5f6"), "does not exist")]:
            done = gnt(root, "gnt-filter", *args)
            assert done.returncode != 0 and words in done.stderr, (args, done.stdout, done.stderr)
        assert ok(root, "gnt-filter", "list", "--no-headers") == before
    finally:
        cluster.stop()


RAPI_SCRIPT = r'''
import json, sys
from ganeti.rapi import client as rapi

host, port = sys.argv[1], int(sys.argv[2])
c = rapi.GanetiRapiClient(host, port=port, username="jack", password="abc123")
out = {}
def attempt(name, fn, *args, **kwargs):
    try:
        out[name] = {"ok": fn(*args, **kwargs)}
    except rapi.GanetiApiError as e:
        out[name] = {"error": str(e), "code": e.code}
uuid = c.AddFilter(5, [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]], "PAUSE", [["gnt:user", "rapi", 1]])
out["added"] = uuid
out["uuids"] = c.GetFilters()
out["bulk"] = c.GetFilters(bulk=True)
out["one"] = c.GetFilter(uuid)
out["replaced"] = c.ReplaceFilter(uuid, 1, [], "ACCEPT")
out["after_replace"] = c.GetFilter(uuid)
attempt("bad_action", c.AddFilter, 0, [], "DROP")
attempt("bad_predicate", c.AddFilter, 0, [["owner", ["=", "id", 1]]], "PAUSE")
out["deleted"] = c.DeleteFilter(uuid)
attempt("missing", c.GetFilter, uuid)
out["left"] = c.GetFilters()
print(json.dumps(out))
'''


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
@pytest_twisted.ensureDeferred
async def test_ganeti_gnt_filter_and_rapi_client(root):
    cluster = await Cluster(root).start()
    key_pem, cert_pem = crypto.generate_key_and_cert("cluster.test")
    crypto.write_pem_file(root.rapi_pem, key_pem, cert_pem)
    os.makedirs(os.path.dirname(root.rapi_users), exist_ok=True)
    with open(root.rapi_users, "w") as handle:
        handle.write("jack abc123 write\n")
    port = daemons.free_port("127.0.0.1")
    rapi = RapiDaemon(root, "127.0.0.1", port)
    workdir = tempfile.mkdtemp(prefix="gntf")
    try:
        rapi.start()
        await rapi.ready(reactor, timeout=120)
        client = cluster.client()
        tools = GanetiTools.for_root(root.root, "node1.test", workdir)

        # Ganeti's gnt-filter: add, list, info, replace, delete
        uuid = tools.ok("gnt-filter", "add", "--priority=2", "--predicates=%s" % by_reason("hold me"),
                        "--action=PAUSE", "--reason=ganeti script").strip()
        held = client.submit_job([delay(0.01, reason=HELD)])
        held_while_another_runs(client, held)
        out = tools.ok("gnt-filter", "list", "--no-headers", "--separator=|", "-o", "uuid,priority,action")
        assert out == "%s|2|PAUSE\n" % uuid, out
        info = tools.ok("gnt-filter", "info", uuid)
        assert "UUID: %s\n" % uuid in info and "  Priority: 2\n" in info and "['gnt:user', 'ganeti script'," in info
        fields = tools.ok("gnt-filter", "list-fields", "--no-headers")
        assert sorted(line.split()[0] for line in fields.splitlines()) == sorted(
            ["action", "predicates", "priority", "reason_trail", "uuid", "watermark"])
        assert tools.ok("gnt-filter", "replace", "--action=RATE_LIMIT 3", uuid).strip() == uuid
        assert "['RATE_LIMIT', 3]" in tools.ok("gnt-filter", "info", uuid)
        assert wait_job(client, held) == "success"  # no longer paused
        refused = tools.run("gnt-filter", "add", '--predicates=[["owner", ["=", "id", 1]]]')
        assert refused.returncode != 0 and "Unknown filter predicate" in refused.stdout + refused.stderr, refused
        tools.ok("gnt-filter", "delete", uuid)
        assert tools.ok("gnt-filter", "list", "--no-headers") == ""
        missing = tools.run("gnt-filter", "delete", uuid)
        assert missing.returncode != 0 and "does not exist" in missing.stdout + missing.stderr, missing

        # Ganeti's RAPI client
        done = subprocess.run([sys.executable, "-c", RAPI_SCRIPT, "127.0.0.1", str(port)], capture_output=True,
                              text=True, timeout=120, cwd=tempfile.gettempdir(),
                              env=dict(os.environ, PYTHONPATH=str(GANETI_LIB)))
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        rapi.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    uuid = out["added"]
    assert out["uuids"] == [uuid]
    (bulk,) = out["bulk"]
    assert bulk["uuid"] == uuid and bulk["priority"] == 5 and bulk["action"] == "PAUSE"
    assert bulk["predicates"] == [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]
    assert [entry[0] for entry in bulk["reason_trail"]] == ["gnt:user", "gnt:client", "luxid"]
    assert out["one"] == bulk
    assert out["replaced"] == uuid and out["after_replace"]["action"] == "ACCEPT"
    assert out["after_replace"]["priority"] == 1
    assert out["bad_action"]["code"] == 400 and "Unknown filter action" in out["bad_action"]["error"]
    assert out["bad_predicate"]["code"] == 400 and "Unknown filter predicate" in out["bad_predicate"]["error"]
    assert out["deleted"] is None
    assert out["missing"]["code"] == 404
    assert out["left"] == []
