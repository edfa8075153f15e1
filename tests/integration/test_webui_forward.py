"""The web console through a master candidate: node2's RAPI forwards /ui/ to
the master's like any RAPI request.  A login on node2 gets a session cookie;
the session, a write with its CSRF token and the browser's Origin naming
node2 (C{X-Forwarded-Host} lets the master check it), and the event stream
(its first event arrives through the relay) all work there; a cross-site
Origin is refused.  Plain HTTPS from the test, no browser.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
from urllib.parse import urlencode

import attrs
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons
from ganeti.testing.cluster import LoopbackCluster, loopback_config, serial_of
from tests.integration.test_failover import master_of, stop_master_daemons, with_identities
from tests.integration.test_rapi_forward import rapi_up

USERS = "jack {CLEARTEXT}abc123 write\n"


def connect(host: str, port: int) -> http.client.HTTPSConnection:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return http.client.HTTPSConnection(host, port, context=context, timeout=60)


def through_candidate(host: str, port: int) -> dict:
    """Log in, read the session, write, open the event stream, all at C{host}."""
    out: dict = {}
    origin = "https://%s:%d" % (host, port)
    conn = connect(host, port)
    conn.request("POST", "/ui/login", urlencode({"user": "jack", "password": "abc123"}),
                 {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin})
    answer = conn.getresponse()
    answer.read()
    out["login"] = (answer.status, answer.getheader("location"))
    cookie = (answer.getheader("set-cookie") or "").split(";")[0]
    conn.request("GET", "/ui/session", headers={"Cookie": cookie})
    answer = conn.getresponse()
    session = json.loads(answer.read())
    out["user"] = session.get("user")
    headers = {"Cookie": cookie, "X-CSRF-Token": session["csrf"], "Origin": origin}
    conn.request("PUT", "/ui/api/2/tags?tag=via-ui", headers=headers)
    answer = conn.getresponse()
    out["write"] = (answer.status, json.loads(answer.read()))
    conn.request("PUT", "/ui/api/2/tags?tag=evil", headers={**headers, "Origin": "https://evil.example"})
    answer = conn.getresponse()
    answer.read()
    out["cross_site"] = answer.status
    conn.close()
    stream = connect(host, port)
    stream.request("GET", "/ui/events", headers={"Cookie": cookie})
    answer = stream.getresponse()
    out["events_type"] = answer.getheader("content-type")
    data = b""
    while b"event: snapshot" not in data or not data.endswith(b"\n\n"):
        chunk = answer.read1(65536)
        if not chunk:
            break
        data += chunk
    snapshot = next(line for line in data.split(b"\n") if line.startswith(b"data: "))
    out["nodes"] = sorted(n["name"] for n in json.loads(snapshot[6:])["nodes"])
    stream.close()
    return out


@pytest_twisted.ensureDeferred
async def test_console_through_a_candidate(root, monkeypatch):
    port = daemons.free_port("127.0.1.1")
    monkeypatch.setenv(daemons.RAPI_PORT_ENV, str(port))
    config = loopback_config(3, candidate_pool_size=2, candidates=["node2.test"])
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))
    async with LoopbackCluster(reactor, root, config, rapi_users=USERS, prefix="gntu") as cluster:
        roots = cluster.roots
        n1, n2, _ = cluster.nodes.values()
        try:
            with_identities(cluster)
            await cluster.until(lambda: serial_of(roots[1]) and all(master_of(p) == "node1.test" for p in roots)
                                and all(os.path.exists(p.rapi_pem) and os.path.exists(p.rapi_users)
                                        for p in roots[:2]), timeout=30)
            cluster.rapi.stop()
            for paths in roots[:2]:
                assert daemons.start(paths, ["ganeti-rapi"], out=lambda _line: None) == 0
            await cluster.until(lambda: rapi_up(roots[0], n1, port) and rapi_up(roots[1], n2, port), timeout=30)
            seen = await threads.deferToThread(through_candidate, n2, port)
            assert seen["login"] == (303, "/ui/"), seen
            assert seen["user"] == "jack"
            assert seen["write"][0] == 200 and isinstance(seen["write"][1], int), seen
            assert seen["cross_site"] == 403
            assert seen["events_type"].startswith("text/event-stream"), seen
            assert seen["nodes"] == ["node1.test", "node2.test", "node3.test"]
        finally:
            for paths in roots:
                stop_master_daemons(paths)
