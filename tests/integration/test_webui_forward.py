"""The web console through a master candidate: node2's RAPI forwards /ui/ to
the master's like any RAPI request.  A login on node2 gets a session cookie;
the session, a write with its CSRF token and the browser's Origin naming
node2 (C{X-Forwarded-Host} lets the master check it), and the event stream
(its first event arrives through the relay) all work there; a cross-site
Origin is refused.  The serial console of a real kvm guest (a WebSocket, which
node2 relays to the master's RAPI: L{ganeti.rapi.wsforward}) opens at node2, and
a command typed into it is answered; a session without the write right is
refused there.  Plain HTTPS and WebSocket (wsproto) from the test, no browser.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import tempfile
import time
from urllib.parse import urlencode

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons
from ganeti.testing import guest, guest_cluster
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok, serial_of
from tests.integration.test_failover import gnt_cluster, master_of, stop_master_daemons, with_identities
from tests.integration.test_rapi_forward import rapi_up

USERS = "jack {CLEARTEXT}abc123 write\nviewer {CLEARTEXT}view read\n"
QEMU = shutil.which("qemu-system-x86_64")
CONSOLE = "console1.test"


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


def login(host: str, port: int, user: str = "jack", password: str = "abc123") -> dict[str, str]:
    """A new session at C{host}: its cookie and the headers of a write."""
    origin = "https://%s:%d" % (host, port)
    conn = connect(host, port)
    conn.request("POST", "/ui/login", urlencode({"user": user, "password": password}),
                 {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin})
    answer = conn.getresponse()
    answer.read()
    cookie = (answer.getheader("set-cookie") or "").split(";")[0]
    conn.request("GET", "/ui/session", headers={"Cookie": cookie})
    csrf = json.loads(conn.getresponse().read())["csrf"]
    conn.close()
    return {"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": origin}


def request(host: str, port: int, method: str, path: str, headers: dict[str, str]) -> int:
    conn = connect(host, port)
    try:
        conn.request(method, path, headers=headers)
        answer = conn.getresponse()
        answer.read()
        return answer.status
    finally:
        conn.close()


def nonce_of(session: dict[str, str]) -> str:
    import base64

    encoded = session["Cookie"].split("=", 1)[1].split(".")[0]
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode().split("\n")[2]


def revoked_at(paths) -> dict:
    try:
        with open(paths.ui_revoked) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


@pytest_twisted.ensureDeferred
async def test_a_logout_stays_a_logout_after_a_master_failover(root, monkeypatch):
    """A session logged out on the master is refused by the new master's RAPI after a failover
    (the revocation was pushed to the candidate); a session still open goes on working there; a
    logout on the new master reaches the old one, a candidate now."""
    port = daemons.free_port("127.0.1.1")
    monkeypatch.setenv(daemons.RAPI_PORT_ENV, str(port))
    config = loopback_config(3, candidate_pool_size=2, candidates=["node2.test"])
    async with LoopbackCluster(reactor, root, config, rapi_users=USERS, prefix="gntv") as cluster:
        roots = cluster.roots
        n1, n2, _ = cluster.nodes.values()
        try:
            with_identities(cluster)
            await cluster.until(lambda: serial_of(roots[1]) and all(master_of(p) == "node1.test" for p in roots)
                                and all(os.path.exists(p.rapi_pem) and os.path.exists(p.rapi_users)
                                        for p in roots[:2]), timeout=30)
            cluster.rapi.stop()
            for paths in roots[:2]:  # as a NodeD starts them: knowing the node daemons' port
                assert daemons.start(paths, ["ganeti-rapi"], out=lambda _line: None,
                                     options={"ganeti-rapi": ["--rpc-port", str(cluster.rpc_port)]}) == 0
            await cluster.until(lambda: rapi_up(roots[0], n1, port) and rapi_up(roots[1], n2, port), timeout=30)

            gone = await threads.deferToThread(login, n1, port)
            kept = await threads.deferToThread(login, n1, port)
            assert await threads.deferToThread(request, n1, port, "POST", "/ui/logout", gone) == 200
            assert await threads.deferToThread(request, n1, port, "GET", "/ui/session", gone) == 401
            await cluster.until(lambda: nonce_of(gone) in revoked_at(roots[1]), timeout=30)  # pushed to node2

            done = gnt_cluster(cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert master_of(roots[1]) == "node2.test"
            for host in (n2, n1):  # the new master's RAPI, and the old one's (forwarding to it now)
                assert await threads.deferToThread(request, host, port, "GET", "/ui/session", gone) == 401, host
                assert await threads.deferToThread(request, host, port, "GET", "/ui/session", kept) == 200, host

            # a logout on the new master reaches the old master, a candidate now
            at_n2 = {**kept, "Origin": "https://%s:%d" % (n2, port)}
            assert await threads.deferToThread(request, n2, port, "POST", "/ui/logout", at_n2) == 200
            await cluster.until(lambda: nonce_of(kept) in revoked_at(roots[0]), timeout=30)
            assert nonce_of(gone) in revoked_at(roots[0])
        finally:
            for paths in roots:
                stop_master_daemons(paths)


def serial_console(host: str, port: int, session: dict[str, str], name: str) -> tuple[int, bytes]:
    """Open C{name}'s serial console at C{host} as a browser would (the session's cookie, its Origin),
    wait for the guest's ready line, type L{guest_cluster.COMMAND}: the status of the handshake
    and the console's bytes up to the answer (or up to the refusal)."""
    import socket

    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, RejectConnection, Request

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection((host, port), timeout=60)
    sock = context.wrap_socket(raw)
    ws = WSConnection(ConnectionType.CLIENT)
    sock.sendall(ws.send(Request(host="%s:%d" % (host, port), target="/ui/instances/%s/console" % name,
                                 extra_headers=[(b"cookie", session["Cookie"].encode()),
                                                (b"origin", session["Origin"].encode())])))
    status, seen, typed = 0, b"", False
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    status = 101
                elif isinstance(event, RejectConnection):
                    return event.status_code, seen
                elif isinstance(event, BytesMessage):
                    seen += bytes(event.data)
                elif isinstance(event, CloseConnection):
                    return status, seen
            if not typed and guest.READY_LINE.encode() in seen:
                sock.sendall(ws.send(BytesMessage(data=guest_cluster.COMMAND)))
                typed = True
            if any(line.startswith(guest_cluster.ANSWER.encode()) for line in seen.replace(b"\r", b"").split(b"\n")):
                sock.sendall(ws.send(CloseConnection(code=1000)))
                return status, seen
        return status, seen
    finally:
        sock.close()


@pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64 is not installed (scripts/install-qemu)")
@pytest_twisted.ensureDeferred
async def test_serial_console_through_a_candidate(root, monkeypatch):
    try:
        kernel = guest.kernel_image()
    except guest.GuestFilesMissing as e:
        pytest.fail(str(e))
    port = daemons.free_port("127.0.1.1")
    monkeypatch.setenv(daemons.RAPI_PORT_ENV, str(port))
    scratch = tempfile.mkdtemp(prefix="webui-fwd-console-")
    config = loopback_config(2, candidate_pool_size=2, candidates=["node2.test"])
    async with LoopbackCluster(reactor, root, config, rapi_users=USERS, prefix="gntw") as cluster:
        roots = cluster.roots
        n1, n2 = cluster.nodes.values()
        try:
            with_identities(cluster)
            await cluster.until(lambda: serial_of(roots[1]) and all(master_of(p) == "node1.test" for p in roots)
                                and all(os.path.exists(p.rapi_pem) and os.path.exists(p.rapi_users)
                                        for p in roots), timeout=30)
            initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
            ok(roots[0], "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake", "-H", "kvm:kvm_path=%s" % QEMU)
            ok(roots[0], "gnt-instance", "add", "-t", "diskless", "-n", "node1.test", "-o", "noop", "--no-nics",
               "-B", "memory=128M", "--no-name-check", "--no-ip-check", "-H",
               "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s"
               % (kernel, initrd, guest.KERNEL_ARGS), CONSOLE)
            cluster.rapi.stop()
            for paths in roots:
                assert daemons.start(paths, ["ganeti-rapi"], out=lambda _line: None) == 0
            await cluster.until(lambda: rapi_up(roots[0], n1, port) and rapi_up(roots[1], n2, port), timeout=30)

            session = await threads.deferToThread(login, n2, port)
            status, seen = await threads.deferToThread(serial_console, n2, port, session, CONSOLE)
            text = seen.replace(b"\r", b"").decode("utf-8", "replace")
            assert status == 101, (status, text[-2000:])
            assert guest.READY_LINE in text, text[-2000:]
            assert any(line.startswith(guest_cluster.ANSWER) for line in text.split("\n")), text[-2000:]

            # the master authorises, through the relay: a read user is refused before the WebSocket opens
            viewer = await threads.deferToThread(login, n2, port, "viewer", "view")
            status, seen = await threads.deferToThread(serial_console, n2, port, viewer, CONSOLE)
            assert status == 403 and seen == b"", (status, seen)
        finally:
            guest_cluster.kill_qemus(roots)
            for paths in roots:
                stop_master_daemons(paths)
            guest_cluster.kill_qemus(roots)
            shutil.rmtree(scratch, ignore_errors=True)
