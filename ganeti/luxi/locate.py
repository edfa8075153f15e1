"""Where the master's LuxiD is, for clients that ride through a failover (blocking).

    where = locate(paths, ask_confd=True)    # Target("node2.test", "127.0.1.2", 1817) or Target(me, None, ...)
    sock = open_tls(paths, where.address, where.port, timeout=5)

A client on the master talks LUXI over the master's Unix socket.  A client on
another node (a CLI whose node just stopped being master, RAPI on a
candidate whose master went away) talks LUXI to the master's LuxiD over
mutual TLS on its heartbeat port (L{ganeti.heartbeat.server}: a connection
whose first byte is C{"{"} is LUXI), with the cluster certificate, as node
RPC: only a node of the cluster can.

The master is found as NodeD's heartbeat finds it: this node's ssconf
(C{master_node}, C{node_primary_ips}); when that answer just failed, the
master candidates' confd (C{CLUSTER_MASTER}, signed with the cluster's HMAC
key; of the replies the highest serial wins), since ssconf may be stale.
Standard library, the confd wire format and ssconf only (every CLI command
may need it).
"""

from __future__ import annotations

import os
import select
import time

from ganeti import httpresponse
from ganeti.paths import Paths
from ganeti.plaintuple import plain_tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import ssl
    from typing import NamedTuple

#: environment variable naming the candidates' confd port (default 1814; tests run many clusters)
CONFD_PORT_ENV = "GANETI_CONFD_PORT"
#: seconds the candidates' confd have to name the master
CONFD_TIMEOUT = 1.0


if TYPE_CHECKING:

    class Target(NamedTuple):
        """Where to talk LUXI: C{address} C{None} means this node's Unix socket."""

        name: str
        address: str | None
        port: int

else:
    Target = plain_tuple("Target", ("name", "address", "port"), __name__,
                         "Where to talk LUXI: C{address} C{None} means this node's Unix socket.")


def own_identity(paths: Paths) -> dict[str, str]:
    """This node's identity file (C{name}, C{address}: where its NodeD listens), C{{}} if unreadable.

    Read here rather than through L{ganeti.daemons}, which imports Twisted: a command that only asks its
    own NodeD (C{gnt-cluster master-failover}) would spend more on that import than on its request."""
    from ganeti import lightjson

    try:
        with open(os.path.join(paths.data_dir, "node.json")) as handle:
            value = lightjson.loads(handle.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {key: str(value[key]) for key in ("name", "address") if value.get(key)}


def own_name(paths: Paths) -> str | None:
    """This node's name from its identity file, or C{None}."""
    return own_identity(paths).get("name")


def heartbeat_port() -> int:
    from ganeti.heartbeat.wire import heartbeat_port as port

    return port()


def from_ssconf(paths: Paths) -> tuple[str, str] | None:
    """C{(master name, its primary IP)} from this node's ssconf, or C{None}."""
    from ganeti import errors, ssconf

    try:
        store = ssconf.SimpleStore(paths)
        master = store.get_master_node()
        address = store.get_node_primary_ips().get(master, "")
    except (errors.GenericError, OSError, ValueError):
        return None
    return (master, address) if master else None


def from_confd(paths: Paths, timeout: float = CONFD_TIMEOUT, port: int | None = None) -> tuple[str, str] | None:
    """C{(master name, its primary IP)} as the master candidates' confd name it
    (the reply with the highest serial wins), or C{None}: no reply in C{timeout}."""
    from ganeti import ssconf
    from ganeti.confd import wire

    try:
        peers = ssconf.SimpleStore(paths).get_master_candidates_ips()
        with open(paths.hmac_key, "rb") as handle:
            key = handle.read()
    except Exception:  # no ssconf, no key: nobody to ask
        return None
    if port is None:
        try:
            port = int(os.environ.get(CONFD_PORT_ENV) or wire.PORT)
        except ValueError:
            port = wire.PORT
    query = {wire.REQQ_FIELDS: [wire.REQFIELD_NAME, wire.REQFIELD_MNODE_PIP]}
    salts: dict[str, str] = {}
    best: tuple[int, tuple[str, str]] | None = None
    import socket  # here: a command on the master asks no confd, and socket's import costs it 3-5 ms

    with socket.socket(socket.AF_INET6 if any(":" in p for p in peers) else socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for peer in peers:
            import uuid

            rsalt = str(uuid.uuid4())
            salts[rsalt] = peer
            try:
                sock.sendto(wire.pack_request(key, wire.request(wire.REQ_CLUSTER_MASTER, query, rsalt), time.time()),
                            (peer, port))
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + timeout
        while salts:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                break
            try:
                packet, addr = sock.recvfrom(65536)
                reply, salt = wire.unpack_reply(key, packet)
            except (OSError, wire.BadPacket):
                continue
            if salts.get(salt) != addr[0]:
                continue
            del salts[salt]
            answer = reply.get("answer")
            if reply["status"] != wire.REPL_STATUS_OK or not isinstance(answer, list) or len(answer) != 2:
                continue
            if all(isinstance(a, str) and a for a in answer):
                serial = int(reply.get("serial", 0))
                if best is None or serial > best[0]:
                    best = (serial, (answer[0], answer[1]))
    return best[1] if best is not None else None


def locate(paths: Paths, ask_confd: bool) -> Target | None:
    """Where the master is: this node's socket when ssconf (or, with
    C{ask_confd}, the candidates' confd) names this node (or this root has
    no node identity), else the master's heartbeat port; C{None} when
    neither names a master."""
    found = from_confd(paths) if ask_confd else None
    found = found or from_ssconf(paths)
    if found is None:
        return None
    name, address = found
    me = own_name(paths)
    if me is None or name == me or not address:  # a root that does not know its node: its own socket
        return Target(name, None, 0)
    return Target(name, address, heartbeat_port())


def tls_context(paths: Paths) -> tuple[ssl.SSLContext, bytes]:
    """A client context presenting the cluster certificate, and the DER form
    of that certificate, which the master must present (pinned: host names
    are not checked, nodes are addressed by IP as in node RPC)."""
    import ssl  # only to reach a master on another node

    with open(paths.server_pem) as handle:
        pem = handle.read()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.load_cert_chain(paths.server_pem)
    context.load_verify_locations(cadata=pem[pem.index("-----BEGIN CERTIFICATE-----"):])
    context.verify_mode = ssl.CERT_REQUIRED
    return context, ssl.PEM_cert_to_DER_cert(pem[pem.index("-----BEGIN CERTIFICATE-----"):])


def open_tls(paths: Paths, address: str, port: int, timeout: float) -> socket.socket:
    """A LUXI connection to the LuxiD at C{address}:C{port} (see the module docstring).

    @raise OSError: cannot connect (C{ConnectionRefusedError} ...), or the
        peer is not the cluster's master (C{ssl.SSLError})
    """
    import socket
    import ssl

    context, expected = tls_context(paths)
    raw = socket.create_connection((address, port), timeout=timeout)
    try:
        sock = context.wrap_socket(raw)
        if sock.getpeercert(binary_form=True) != expected:
            raise ssl.SSLError("the LuxiD at %s:%d does not present the cluster certificate" % (address, port))
        return sock
    except BaseException:
        raw.close()
        raise


def read_http_response(sock: socket.socket, limit: int = 16 * 1024 * 1024) -> tuple[int, bytes]:
    """The status and body of the HTTP/1.1 response to a request sent with C{Connection: close}, read to the
    end of the connection (L{ganeti.httpresponse}).

    @raise ValueError: not an HTTP response, a bad chunk, or more than C{limit} bytes
    """
    data = bytearray()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("an HTTP response of more than %d bytes" % limit)
    return httpresponse.parse(bytes(data))


__all__ = ["Target", "from_confd", "from_ssconf", "locate", "open_tls", "own_name", "read_http_response",
           "tls_context"]
