"""Fuzzing every socket of a running cluster (see L{ganeti.testing.chaos}).

Each C{*_cases} function yields C{(label, bytes)} cases for one socket,
random (from a seeded C{random.Random}) and targeted; each C{send_*}
function delivers one case and returns what came back, never waiting
longer than its timeout.  L{Guard} takes what must not change (config
serial, job count, drain flag, watcher pause) and a daemon's file
descriptors and memory before a batch, and says what changed after it::

    guard = await Guard.take(cluster, "luxid")
    for label, data in luxi_cases(rng, 50):
        send_unix(cluster.master.luxi_socket, data)
    assert await guard.problems(cluster) == []
"""

from __future__ import annotations

import json
import os
import random
import socket
import ssl
import struct
import time
import uuid
from collections import Counter
from typing import Any, Iterator

import attrs
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from ganeti.confd import wire as confd_wire
from ganeti.luxi.client import LuxiClient
from ganeti.rpc.client import MAX_PERSISTENT_PER_HOST
from ganeti.testing.chaos import (
    ChaosCluster,
    child_processes,
    fd_count,
    queue_files_count,
    rss_kib,
    tcp_peers,
    tcp_sockets,
)
from ganeti.testing.cluster import serial_of
from ganeti.wconfd.client import WConfdClient

ETX = b"\x03"
Case = tuple[str, bytes]
#: how much a daemon's resident memory may grow over a fuzz run
RSS_BOUND_KIB = 64 * 1024


# --- what must not change ----------------------------------------------------------------


@attrs.frozen
class State:
    """What bad input must leave alone."""

    serial: int
    jobs: int
    drain: bool
    watcher_pause: Any
    ssconf: tuple[int, ...]  # per node: how many ssconf files
    #: per node: config serial and job files; they follow the master's
    #: asynchronously, so L{Guard.problems} compares them after a while
    replicas: tuple[tuple[int | None, int], ...] = attrs.field(eq=False)

    @classmethod
    async def of(cls, cluster: ChaosCluster) -> State:
        client = await WConfdClient.connect(cluster.reactor, cluster.master.wconfd_socket, timeout=10)
        try:
            serial = await client.read_serial()
        finally:
            await client.close()

        def luxi() -> tuple[bool, Any]:
            with LuxiClient(cluster.master.luxi_socket, timeout=10) as luxi:
                drain, pause = luxi.query_config_values(["drain_flag", "watcher_pause"])
            return drain, pause

        drain, pause = await deferToThread(luxi)
        replicas = tuple((serial_of(paths), queue_files_count(paths)) for paths in cluster.roots)
        ssconf = tuple(_ssconf_count(paths) for paths in cluster.roots)
        return cls(serial, queue_files_count(cluster.master), drain, pause, ssconf, replicas)


def _ssconf_count(paths: Any) -> int:
    try:
        return sum(1 for name in os.listdir(paths.data_dir) if name.startswith("ssconf_"))
    except OSError:
        return 0


def state_change(before: State, after: State) -> str:
    """The fields of two states that differ, as C{name: old -> new}."""
    return ", ".join("%s: %r -> %r" % (field.name, getattr(before, field.name), getattr(after, field.name))
                     for field in attrs.fields(State)
                     if field.eq and getattr(before, field.name) != getattr(after, field.name))


async def restore(cluster: ChaosCluster, state: State) -> None:
    """Put back what a good client can: the drain flag and the watcher pause
    (so one changed flag does not hide what later cases do)."""
    def luxi() -> None:
        with LuxiClient(cluster.master.luxi_socket, timeout=10) as client:
            drain, pause = client.query_config_values(["drain_flag", "watcher_pause"])
            if drain != state.drain:
                client.set_drain_flag(bool(state.drain))
            if pause != state.watcher_pause:
                client.set_watcher_pause(state.watcher_pause)

    await deferToThread(luxi)


def _cluster_endpoints(cluster: ChaosCluster, pid: int) -> set[tuple[str, int]]:
    """The local TCP endpoints of the cluster's other daemons."""
    endpoints: set[tuple[str, int]] = set()
    for name in ["wconfd", "luxid", "rapi"] + ["noded%d" % (n + 1) for n in range(len(cluster.roots))]:
        process = cluster.daemon(name).process
        if process is None or process.poll() is not None or process.pid == pid:
            continue
        try:
            endpoints.update(local for local, _remote in tcp_sockets(process.pid).values())
        except OSError:  # it went away meanwhile
            continue
    return endpoints


def _pooled(cluster: ChaosCluster, pid: int) -> list[int]:
    """The inodes of C{pid}'s node RPC connections that a connection pool
    keeps: its own to a NodeD, and one of another daemon's of the cluster to it."""
    port = cluster.cluster.rpc_port
    sockets = tcp_sockets(pid)
    inbound = [inode for inode, (local, _remote) in sockets.items() if local[1] == port]
    others = _cluster_endpoints(cluster, pid) if inbound else set()
    return [inode for inode, (local, remote) in sockets.items()
            if remote[1] == port or (local[1] == port and remote in others)]


def own_fds(cluster: ChaosCluster, pid: int) -> int:
    """C{pid}'s open fds but its idle node RPC connections, which the
    connection pools keep (up to L{MAX_PERSISTENT_PER_HOST} per node, checked
    apart), its own to other NodeDs and the cluster's daemons' to it: how many
    a burst of concurrent calls leaves open is no leak; nor are the pipes to a
    warm launcher NodeD keeps (L{ganeti.noded.warm}, started when its checks say)."""
    return fd_count(pid) - len(_pooled(cluster, pid)) - len(_launcher_pipes(pid))


def _launcher_pipes(pid: int) -> list[str]:
    """C{pid}'s descriptors that are pipes shared with a child running C{ganeti.warmstart}."""
    shared: set[str] = set()
    for child in child_processes(pid):
        if "ganeti.warmstart" not in child:
            continue
        shared.update(_links(int(child.split()[0])))
    return [link for link in _links(pid) if link.startswith("pipe:") and link in shared]


def _links(pid: int) -> list[str]:
    """What C{pid}'s descriptors point to (C{pipe:[N]}, paths, C{socket:[N]})."""
    found = []
    try:
        names = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return []
    for fd in names:
        try:
            found.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            continue
    return found


def describe_fds(cluster: ChaosCluster, pid: int) -> str:
    """What C{pid}'s file descriptors are (pooled connections left out), for a report."""
    pooled = {"socket:[%d]" % inode for inode in _pooled(cluster, pid)}
    sockets = tcp_sockets(pid)
    found = []
    for fd in sorted(os.listdir("/proc/%d/fd" % pid), key=int):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link in pooled:
            continue
        if link.startswith("socket:[") and int(link[8:-1]) in sockets:
            (laddr, lport), (raddr, rport) = sockets[int(link[8:-1])]
            link += " tcp %s:%d->%s:%d" % (laddr, lport, raddr, rport)
        found.append("%s: %s" % (fd, link))
    return "; ".join(found + ["child %s" % child for child in child_processes(pid)])


#: seconds more a daemon's file descriptors may take to come back while it runs a program
CHILD_WAIT = 60.0


@attrs.define
class Guard:
    """The state and one daemon's resources before a fuzz batch."""

    daemon: str
    pid: int
    state: State
    fds: int
    rss: int

    @classmethod
    async def take(cls, cluster: ChaosCluster, daemon: str) -> Guard:
        pid = cluster.pid(daemon)
        # one good request first: connections a daemon keeps (RAPI's to LuxiD) are in the baseline
        assert await cluster.answers(daemon), "%s does not answer before the fuzzing" % daemon
        if daemon.startswith("noded"):  # its heartbeat connection (and the watch it keeps) is in the baseline
            port = cluster.cluster.heartbeat_port
            await cluster.cluster.until(lambda: any(remote[1] == port for _local, remote in tcp_sockets(pid).values()),
                                        timeout=30)
            from ganeti.noded import warm

            if warm.wanted(cluster.roots[int(daemon[5:]) - 1]):  # so is a candidate's warm launcher (its child and
                # two pipes, which its NodeD starts at its next look at the node's role, up to 5 s after it starts)
                await cluster.cluster.until(
                    lambda: any(" -m ganeti.warmstart " in child for child in child_processes(pid)), timeout=30)
        return cls(daemon, pid, await State.of(cluster), own_fds(cluster, pid), rss_kib(pid))

    async def problems(self, cluster: ChaosCluster, fd_timeout: float = 10.0) -> list[str]:
        """What went wrong since L{take}: the daemon gone or silent, the
        state changed, file descriptors not back to where they were,
        memory grown beyond L{RSS_BOUND_KIB}."""
        found = []
        process = cluster.daemon(self.daemon).process
        if process is None or process.poll() is not None or process.pid != self.pid:
            return ["%s died: %s" % (self.daemon, cluster.daemon(self.daemon).output()[-1500:])]
        if not await cluster.answers(self.daemon):
            found.append("%s does not answer a good request any more" % self.daemon)
        state = await State.of(cluster)
        if state != self.state:
            found.append("bad input changed the state: %s" % state_change(self.state, state))
        deadline = time.monotonic() + fd_timeout
        while any(replica != (state.serial, state.jobs) for replica in state.replicas) and time.monotonic() < deadline:
            await deferLater(cluster.reactor, 0.2, lambda: None)
            state = await State.of(cluster)
        for name, replica in zip(cluster.cluster.nodes, state.replicas):
            if replica != (state.serial, state.jobs):
                found.append("%s holds config serial %s and %d job files, the master %d and %d"
                             % (name, replica[0], replica[1], state.serial, state.jobs))
        deadline = time.monotonic() + fd_timeout
        # a program the daemon runs for a request (an OS script, a hook) holds its pipes until it ends
        while own_fds(cluster, self.pid) > self.fds and (
                time.monotonic() < deadline or (child_processes(self.pid) and time.monotonic() < deadline + CHILD_WAIT)):
            await deferLater(cluster.reactor, 0.1, lambda: None)
        fds = own_fds(cluster, self.pid)
        if fds > self.fds:
            found.append("%s holds %d file descriptors, %d before (not counting pooled node RPC connections): %s"
                         % (self.daemon, fds, self.fds, describe_fds(cluster, self.pid)))
        pooled = Counter(address for address, port in tcp_peers(self.pid).values() if port == cluster.cluster.rpc_port)
        for address, count in sorted(pooled.items()):
            if count > MAX_PERSISTENT_PER_HOST:
                found.append("%s holds %d connections to the NodeD of %s, more than its pool keeps (%d)"
                             % (self.daemon, count, address, MAX_PERSISTENT_PER_HOST))
        rss = rss_kib(self.pid)
        if rss - self.rss > RSS_BOUND_KIB:
            found.append("%s grew from %d KiB to %d KiB" % (self.daemon, self.rss, rss))
        return found


# --- random values ---------------------------------------------------------------------------


def random_json(rng: random.Random, depth: int = 3, booleans: bool = True) -> Any:
    """A random JSON value (no booleans unless C{booleans})."""
    kinds = ["int", "float", "str", "null", "list", "dict"] + (["bool"] if booleans else [])
    kind = rng.choice(kinds if depth > 0 else kinds[:4])
    if kind == "int":
        return rng.choice([0, -1, 1, 2**31, -(2**63), 2**70, rng.randint(-1000, 1000)])
    if kind == "float":
        return rng.choice([0.5, -1e308, 1e308, rng.uniform(-1e6, 1e6)])
    if kind == "str":
        return rng.choice(["", "x" * rng.randint(1, 300), "\u00e9\u4e2d", "../../etc/passwd", "%s%n", "\\u0000"])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [random_json(rng, depth - 1, booleans) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["a", "OP_ID", "name", "", "args"]): random_json(rng, depth - 1, booleans)
            for _ in range(rng.randint(0, 4))}


def garbage(rng: random.Random, size: int | None = None) -> bytes:
    return rng.randbytes(size if size is not None else rng.randint(1, 2048))


# --- LUXI -----------------------------------------------------------------------------------

#: LUXI methods and the types of their arguments (spec/luxi.md section 3)
LUXI_METHODS: dict[str, list[str]] = {
    "SubmitJob": ["ops"], "SubmitJobToDrainedQueue": ["ops"], "SubmitManyJobs": ["jobs"],
    "WaitForJobChange": ["int", "list", "any", "any", "num"], "CancelJob": ["int", "bool"],
    "ArchiveJob": ["int"], "AutoArchiveJobs": ["num", "num"], "ChangeJobPriority": ["int", "int"],
    "Query": ["str", "list", "any"], "QueryFields": ["str", "list"], "QueryJobs": ["list", "list"],
    "QueryInstances": ["list", "list", "bool"], "QueryNodes": ["list", "list", "bool"],
    "QueryGroups": ["list", "list", "bool"], "QueryNetworks": ["list", "list", "bool"],
    "QueryExports": ["list", "bool"], "QueryClusterInfo": [], "QueryConfigValues": ["list"],
    "QueryTags": ["str", "str"], "SetDrainFlag": ["bool"], "SetWatcherPause": ["num"], "PickupJob": ["int"],
    "QueryFilters": ["list", "list"], "ReplaceFilter": ["str", "int", "list", "any", "list"], "DeleteFilter": ["str"],
}
#: methods whose arguments, if right by chance, change state: only wrong types for them (the right values of
#: ReplaceFilter and DeleteFilter are refused too: "cluster" is no filter uuid, None no action)
LUXI_CHANGING = {"SetDrainFlag", "SetWatcherPause", "CancelJob", "ArchiveJob", "AutoArchiveJobs", "ChangeJobPriority",
                 "ReplaceFilter", "DeleteFilter"}
_BAD_OPS: list[Any] = [
    1, "x", None, {}, [1], [None], ["OP_TEST_DELAY"], [{"OP_ID": "OP_NO_SUCH_OPCODE"}], [{"duration": 0}],
    [{"OP_ID": "OP_TEST_DELAY"}], [{"OP_ID": "OP_TEST_DELAY", "duration": -1}],
    [{"OP_ID": "OP_TEST_DELAY", "duration": "soon"}], [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "priority": 1000}],
    [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "repeat": -3}], [{"OP_ID": "OP_GROUP_ADD"}],
    [{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": "not-a-list"}], [{"OP_ID": 7}],
]
#: values of the wrong type, by the type expected
WRONG: dict[str, list[Any]] = {
    "int": ["1", 1.5, None, [], {}, "x" * 10, [1]],
    "bool": [1, 0, "yes", "no", "false", "", None, [], {}, [True], {"a": 1}],
    "str": [1, None, [], {}, 2.5, ["cluster"]],
    "list": [1, "x", None, {}, 2.5],
    "num": ["1", None, [], {}, "inf", [0]],
    "ops": _BAD_OPS,
    "jobs": [1, "x", None, {}, [1], [None]] + [[ops] for ops in _BAD_OPS if isinstance(ops, list)],
    "any": [],
}
#: right values for the other arguments while one is wrong (changing nothing)
RIGHT = {"int": 1, "bool": False, "str": "cluster", "list": [], "num": 0, "any": None}


def luxi_frame(method: Any, args: Any) -> bytes:
    return json.dumps({"method": method, "args": args}).encode() + ETX


def luxi_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """Targeted cases (every method with each argument of each wrong type,
    wrong counts, framing abuse), then C{count} random ones."""
    yield "empty frame", ETX
    yield "not JSON", b"this is not json" + ETX
    yield "JSON list", b"[1, 2, 3]" + ETX
    yield "JSON null", b"null" + ETX
    yield "no method", b'{"args": []}' + ETX
    yield "no args", b'{"method": "QueryClusterInfo"}' + ETX
    yield "args not a list", luxi_frame("QueryClusterInfo", {"a": 1})
    yield "method not a string", luxi_frame(17, [])
    yield "unknown method", luxi_frame("NoSuchMethod", [])
    yield "bad UTF-8", b'{"method": "\xff\xfe", "args": []}' + ETX
    yield "deep nesting", b"[" * 200000 + b"]" * 200000 + ETX
    yield "huge number", b'{"method": "ArchiveJob", "args": [' + b"9" * 5000 + b"]}" + ETX
    yield "truncated frame", b'{"method": "QueryClusterInfo", "ar'
    yield "huge frame, no end", b"x" * (17 * 1024 * 1024)
    yield "huge argument", luxi_frame("QueryTags", ["cluster", "x" * (4 * 1024 * 1024)])
    yield "two frames at once", luxi_frame("NoSuchMethod", []) + luxi_frame("QueryClusterInfo", [])
    for method, types in sorted(LUXI_METHODS.items()):
        yield "%s with too many arguments" % method, luxi_frame(method, [RIGHT.get(t) for t in types] + [None, None])
        if types:
            yield "%s with no arguments" % method, luxi_frame(method, [])
        for position, kind in enumerate(types):
            for value in WRONG[kind]:
                args = [RIGHT.get(t) for t in types]
                args[position] = value
                yield "%s arg %d = %r" % (method, position, value), luxi_frame(method, args)
    quiet = sorted(set(LUXI_METHODS) - LUXI_CHANGING)
    for n in range(count):
        choice = rng.random()
        if choice < 0.3:
            yield "random bytes %d" % n, garbage(rng) + ETX
        elif choice < 0.8:
            method = rng.choice(quiet)
            args = [random_json(rng, booleans=False) for _ in range(rng.randint(0, 5))]
            yield "random %s %d" % (method, n), luxi_frame(method, args)
        else:
            yield "random method %d" % n, luxi_frame(random_json(rng, 1), random_json(rng))


# --- WConfD AMP ---------------------------------------------------------------------------


def amp_box(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """An AMP box by hand (C{key length, key, value length, value}, then 0 0),
    with lengths as given: longer values than AMP allows are the point."""
    out = b""
    for key, value in pairs:
        out += struct.pack("!H", len(key) & 0xFFFF) + key + struct.pack("!H", len(value) & 0xFFFF) + value
    return out + b"\x00\x00"


def wconfd_commands() -> dict[str, list[str]]:
    """Every WConfD command and its argument names."""
    from ganeti.wconfd import commands

    found = {}
    for value in vars(commands).values():
        if isinstance(value, type) and issubclass(value, commands.Command) and value is not commands.Command:
            found[value.commandName.decode()] = [name.decode() for name, _ in value.arguments]
    return found


def wconfd_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """Garbage, unknown commands, every command with wrong arguments,
    values beyond AMP's limits."""
    yield "garbage", garbage(rng, 4096)
    yield "zero box", b"\x00\x00"
    yield "unknown command", amp_box([(b"_ask", b"1"), (b"_command", b"NoSuchCommand")])
    yield "no command", amp_box([(b"_ask", b"2")])
    yield "ask not a number", amp_box([(b"_ask", b"\xff"), (b"_command", b"Echo"), (b"text", b"x")])
    yield "value over 64 KiB", (struct.pack("!H", 4) + b"_ask" + struct.pack("!H", 1) + b"3"
                                + struct.pack("!H", 4) + b"text" + struct.pack("!H", 0xFFFF) + b"x" * 200000)
    yield "key over 255", amp_box([(b"k" * 300, b"v")])
    yield "truncated box", amp_box([(b"_ask", b"4"), (b"_command", b"Echo")])[:-5]
    wrong = [b"", b"\xff\xfe", b"not json", b"[]", b"{}", b"null", b"-1", b"1.5", b'["x", "/nonexistent", -1]',
             b'[[1, 2], 3]', b"x" * 60000]
    ask = 100
    for name, arguments in sorted(wconfd_commands().items()):
        for value in wrong:
            ask += 1
            pairs = [(b"_ask", str(ask).encode()), (b"_command", name.encode())]
            pairs += [(arg.encode(), value) for arg in arguments]
            yield "%s all args %r" % (name, value[:20]), amp_box(pairs)
        if arguments:
            ask += 1
            yield "%s without arguments" % name, amp_box([(b"_ask", str(ask).encode()), (b"_command", name.encode())])
    names = sorted(wconfd_commands())
    for n in range(count):
        ask += 1
        pairs = [(b"_ask", str(ask).encode()), (b"_command", rng.choice(names).encode())]
        pairs += [(garbage(rng, rng.randint(1, 20)), garbage(rng, rng.randint(0, 200))) for _ in range(rng.randint(0, 4))]
        yield "random box %d" % n, amp_box(pairs) if rng.random() < 0.8 else garbage(rng)


# --- confd UDP -----------------------------------------------------------------------------


def confd_cases(rng: random.Random, key: bytes, count: int) -> Iterator[Case]:
    """Garbage, bad magic, bad HMAC, replayed and future timestamps,
    huge datagrams, signed requests of unknown types or bad queries."""
    now = time.time()

    def signed(request: Any, when: float = now, sign_key: bytes = key) -> bytes:
        return confd_wire.pack_request(sign_key, request, when)

    good = confd_wire.request(confd_wire.REQ_PING, None, str(uuid.uuid4()))
    yield "empty", b""
    yield "bad magic", b"xxxx" + signed(good)[4:]
    yield "magic only", b"plj0"
    yield "not JSON", b"plj0{not json"
    yield "bad HMAC", signed(good, sign_key=b"wrong key")
    yield "replayed (an hour old)", signed(good, now - 3600)
    yield "from the future (an hour)", signed(good, now + 3600)
    yield "huge datagram", b"plj0" + b"x" * 65000
    yield "unknown type", signed(confd_wire.request(999, None, "salt"))
    for qtype in range(0, 12):
        queries: tuple[Any, ...] = (None, 17, [], {"a": [1]}, "x" * 3000)
        for query in queries:
            yield "type %d query %r" % (qtype, str(query)[:10]), signed(confd_wire.request(qtype, query, "salt"))
    for n in range(count):
        yield "random %d" % n, (b"plj0" if rng.random() < 0.5 else b"") + garbage(rng, rng.randint(0, 8000))


# --- RAPI (HTTPS) -------------------------------------------------------------------------


def basic(user: str, password: str) -> bytes:
    import base64

    return b"Authorization: Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()) + b"\r\n"


GOOD_AUTH = basic("chaos", "chaos-secret")


def http(method: bytes, path: bytes, body: bytes = b"", headers: bytes = b"") -> bytes:
    return (method + b" " + path + b" HTTP/1.1\r\nHost: cluster.test\r\nConnection: close\r\n" + headers
            + b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def rapi_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """Garbage, bad methods, bad JSON bodies, huge headers and bodies, bad
    or missing authentication on changing requests."""
    yield "garbage", garbage(rng, 4096)
    yield "no request line", b"\r\n\r\n"
    yield "bad method", http(b"BREW", b"/2/info")
    yield "method not allowed", http(b"DELETE", b"/2/info", headers=GOOD_AUTH)
    yield "unknown resource", http(b"GET", b"/2/no/such/thing")
    yield "path traversal", http(b"GET", b"/../../etc/passwd")
    yield "huge header", http(b"GET", b"/2/info", headers=b"X-Big: " + b"a" * 200000 + b"\r\n")
    yield "many headers", http(b"GET", b"/2/info", headers=b"".join(b"X-%d: v\r\n" % i for i in range(5000)))
    yield "huge body", http(b"POST", b"/2/groups", b"[" * 3 * 1024 * 1024, GOOD_AUTH)
    yield "length lies", (b"POST /2/groups HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n" + GOOD_AUTH
                          + b"\r\n{\"group_name\": ")
    yield "negative length", b"POST /2/groups HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n" + GOOD_AUTH + b"\r\n"
    for body in (b"not json", b"[]", b"null", b"17", b'{"group_name": 5}', b'{"group_name": ""}', b"{",
                 b'{"group_name": "g", "alloc_policy": "never"}', b"\xff\xfe"):
        yield "POST /2/groups %r" % body[:20], http(b"POST", b"/2/groups", body, GOOD_AUTH)
    for body in (b"not json", b"[1]", b'{"OP_ID": "OP_NO_SUCH"}', b'{"duration": "x"}'):
        yield "PUT /2/modify %r" % body[:20], http(b"PUT", b"/2/modify", body, GOOD_AUTH)
    yield "tags without auth", http(b"PUT", b"/2/tags?tag=fuzz-noauth")
    yield "modify without auth", http(b"PUT", b"/2/modify", b'{"max_running_jobs": 3}')
    yield "tags, wrong password", http(b"PUT", b"/2/tags?tag=fuzz-badpw", headers=basic("chaos", "wrong"))
    yield "tags, unknown user", http(b"PUT", b"/2/tags?tag=fuzz-nouser", headers=basic("nobody", "x"))
    yield "malformed Basic", http(b"PUT", b"/2/tags?tag=fuzz-malformed", headers=b"Authorization: Basic %%%\r\n")
    yield "other scheme", http(b"PUT", b"/2/tags?tag=fuzz-bearer", headers=b"Authorization: Bearer x\r\n")
    methods = [b"GET", b"PUT", b"POST", b"DELETE", b"PATCH", b"\x00", b"G" * 100]
    paths = [b"/2/info", b"/2/groups", b"/2/jobs/1", b"/2/instances", b"/2/nodes/node2.test/tags", b"/version",
             b"/2/jobs/" + b"9" * 50, b"/2/groups/%00", b"/" + b"a" * 10000]
    for n in range(3):  # a request that never ends: the daemon must not wait for it forever
        yield "unfinished garbage %d" % n, garbage(rng).replace(b"\n", b"")
    for n in range(count):
        choice = rng.random()
        if choice < 0.25:
            yield "random bytes %d" % n, garbage(rng) + b"\r\n\r\n"
        else:
            # random bodies on changing methods never carry the credentials
            body = json.dumps(random_json(rng)).encode() if rng.random() < 0.8 else garbage(rng, 300)
            method = rng.choice(methods)
            auth = GOOD_AUTH if method == b"GET" else b""
            yield "random request %d" % n, http(method, rng.choice(paths), body, auth)


# --- NodeD (TLS) --------------------------------------------------------------------------

#: procedures not fuzzed with random arguments, as some of those would be
#: right ones (a boolean for node_leave_cluster, a number for test_delay)
NODED_SPARED = frozenset({"node_leave_cluster", "test_delay"})
_NODED_WRONG: list[Any] = [None, {"a": []}, [[]], {}, [None, None]]


def noded_procedures() -> list[str]:
    """Every procedure the node daemon serves."""
    from ganeti.rpc.procedures import TABLE

    return sorted(TABLE.names())


def noded_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """Garbage bodies, unknown procedures, every procedure with wrong
    argument types (never a string: a string could be a valid name)."""
    yield "garbage", garbage(rng, 4096)
    yield "empty body", http(b"POST", b"/version")
    yield "GET", http(b"GET", b"/version")
    yield "unknown procedure", http(b"POST", b"/no_such_procedure", b"[]")
    yield "bad procedure name", http(b"POST", b"/../../etc", b"[]")
    yield "body not JSON", http(b"POST", b"/version", b"{{{")
    yield "body not a list", http(b"POST", b"/version", b'{"a": 1}')
    yield "huge body", http(b"POST", b"/version", b"[" + b"1," * 4 * 1024 * 1024 + b"1]")
    names = [n for n in noded_procedures() if n not in NODED_SPARED]
    for name in names:
        for value in _NODED_WRONG:
            args = [value] * rng.randint(1, 5)
            yield "%s %r" % (name, args), http(b"POST", b"/" + name.encode(), json.dumps(args).encode())
    for n in range(count):
        args = [random_json(rng, 2, booleans=False) for _ in range(rng.randint(1, 5))]
        args = [a for a in args if not isinstance(a, (str, int, float))] or [None]
        yield "random %d" % n, http(b"POST", b"/" + rng.choice(names).encode(), json.dumps(args).encode())
    # last, as running one of these (node_leave_cluster the very last) may end the daemon
    for name in sorted(noded_procedures(), key=lambda n: n == "node_leave_cluster"):
        yield "%s empty body" % name, http(b"POST", b"/" + name.encode())


# --- delivery -----------------------------------------------------------------------------


def _read_all(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        while size < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if chunk.endswith(ETX):
                break
    except (TimeoutError, OSError, ssl.SSLError):
        pass
    return b"".join(chunks)


def send_unix(path: str, data: bytes, timeout: float = 5.0) -> bytes:
    """Send C{data} on a Unix stream socket, then read what comes back
    until the peer closes, an ETX, or C{timeout}."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # nothing more: the daemon may close once it answered
        except OSError:
            return b""  # the daemon closed on us mid-way: allowed
        return _read_all(sock)


def send_udp(address: str, port: int, data: bytes, timeout: float = 0.2) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(data, (address, port))
            return sock.recv(65536)
        except OSError:
            return b""


def send_tls(address: tuple[str, int], context: ssl.SSLContext, data: bytes, timeout: float = 5.0) -> bytes:
    """Send over TLS; what came back (C{b""}: refused or closed)."""
    try:
        plain = socket.create_connection(address, timeout=timeout)
    except OSError:
        return b""
    with plain:
        try:
            with context.wrap_socket(plain) as sock:
                sock.sendall(data)
                return _read_all(sock)
        except (ssl.SSLError, OSError):
            return b""


def noded_context(server_pem: str | None) -> ssl.SSLContext:
    """A TLS client context presenting C{server_pem} (none: no certificate);
    it does not check the node's certificate (the node checks ours)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if server_pem is not None:
        context.load_cert_chain(server_pem)
    return context


def http_status(answer: bytes) -> int:
    """The status code of an HTTP answer (0: none)."""
    try:
        return int(answer.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


__all__ = ["Guard", "State", "confd_cases", "luxi_cases", "noded_cases", "rapi_cases", "send_tls", "send_udp",
           "send_unix", "wconfd_cases"]
