"""A real multi-node cluster on loopback, for tests and benchmarks.

Node C{n} is C{node<n>.test} on 127.0.1.C{n}, with its own root; the roots
share the cluster certificate (copied, as an installer would) and, with
C{shared_file_storage}, one sharedfile directory (as nodes on a SAN
would).  Every node runs ganeti-noded on one free port, which WConfD and
LuxiD are given (C{--rpc-port}; LuxiD hands it to its job processes); the master also
runs WConfD, LuxiD and, given C{rapi_users}, ganeti-rapi.  A RAPI that a
NodeD starts (a node promoted to master candidate) listens on the cluster's
own free port (C{$GANETI_RAPI_PORT}, the caller's if set), its confd on
another (C{$GANETI_CONFD_PORT}), and L{stop} stops them, as every daemon a
NodeD started, and kills what still runs with a node's root::

    async with LoopbackCluster(reactor, root, loopback_config(3)) as cluster:
        ok(cluster.master, "gnt-node", "list")
        await cluster.until(lambda: serial_of(cluster.roots[1]) is not None)
        assert await cluster.running() == {"node1.test": [], ...}
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Iterable

import attrs
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

from ganeti import crypto
from ganeti.config.bootstrap import initial_config
from ganeti.daemons import CONFD_PORT_ENV, RAPI_PORT_ENV, free_port, write_node_identity
from ganeti.noded.configdelta import held_serial
from ganeti.objects import ConfigData, Node, new_uuid
from ganeti.paths import Paths
from ganeti.rapi.testing import RapiDaemon
from ganeti.reactors import IReactor
from ganeti.rpc import RpcClient, procedures
from ganeti.testing import warmcli
from ganeti.testing.daemons import (
    Daemon,
    make_root,
    remove_root,
    seed_config,
    share_file_storage,
    stop_root,
)

CLUSTER_NAME = "cluster.test"
BIN = os.path.dirname(sys.executable)
_STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}


def node_addresses(count: int) -> dict[str, str]:
    """C{{"node1.test": "127.0.1.1", ...}} for C{count} nodes."""
    return {"node%d.test" % n: "127.0.1.%d" % n for n in range(1, count + 1)}


def loopback_config(count: int, *, candidate_pool_size: int = 1, candidates: Iterable[str] = (),
                    **initial: Any) -> ConfigData:
    """The config of C{count} nodes (L{node_addresses}) of one group:
    node1 the master, the other nodes master candidates only if named in
    C{candidates}.  C{initial}: more arguments of L{initial_config} (such
    as C{enabled_hypervisors})."""
    addresses = node_addresses(count)
    master = "node1.test"
    cfg = initial_config(CLUSTER_NAME, master, addresses[master], candidate_pool_size=candidate_pool_size,
                         **initial)
    group = next(iter(cfg.nodegroups))
    nodes = dict(cfg.nodes)
    for name, address in list(addresses.items())[1:]:
        uuid = new_uuid()
        nodes[uuid] = Node(name=name, uuid=uuid, primary_ip=address, secondary_ip=address,
                           master_candidate=name in candidates, offline=False, drained=False, group=group,
                           master_capable=True, vm_capable=True, powered=True, **_STAMP)  # type: ignore[arg-type]
    return attrs.evolve(cfg, nodes=nodes)


class LoopbackCluster:
    """The daemons of C{nodes} loopback nodes (see the module docstring).

    @ivar nodes: C{{node name: address}} of every node, node1 first
    @ivar roots: each node's root, the master's (the given one) first
    @ivar nodeds: each node's ganeti-noded, in the same order
    @ivar rpc_port: the port of every ganeti-noded
    @ivar rapi: ganeti-rapi of the master (C{None} without C{rapi_users});
        C{url} and C{cert_pem} say where it is and whom to trust
    """

    def __init__(self, reactor: IReactor, root: Paths, config: ConfigData, nodes: int | None = None, *,
                 shared_file_storage: bool = False, rapi_users: str | None = None, luxid: bool = True,
                 prefix: str = "gntc", wconfd_args: Iterable[str] = (), noded_args: Iterable[str] = (),
                 rapi_args: Iterable[str] = ()) -> None:
        """@param nodes: how many nodes run (default: those of C{config};
            more for nodes the test adds)
        @param wconfd_args: more options of the master's ganeti-wconfd
        @param noded_args: more options of every ganeti-noded
        @param rapi_args: more options of the master's ganeti-rapi (with C{rapi_users})
        @param luxid: whether L{start} starts LuxiD (else the caller does,
            with L{start_daemon})
        @param prefix: of the other nodes' roots under /tmp (removed by
            L{stop}; the master's root is the caller's)"""
        self.reactor = reactor
        self.config = config
        self.nodes = node_addresses(nodes if nodes is not None else len(config.nodes))
        self.shared_file_storage = shared_file_storage
        self.rapi_users = rapi_users
        self.start_luxid = luxid
        self.prefix = prefix
        self.noded_args = list(noded_args)
        self.rapi_args = list(rapi_args)
        self.rpc_port = free_port()
        #: the heartbeat port of LuxiD and every NodeD
        self.heartbeat_port = free_port()
        #: the port of the RAPI a NodeD starts on a candidate
        self.rapi_port = int(os.environ.get(RAPI_PORT_ENV) or free_port())
        #: the UDP port of the confd a NodeD starts on a candidate
        self.confd_port = int(os.environ.get(CONFD_PORT_ENV) or free_port(udp=True))
        self.roots = [root]
        # inherited by LuxiD's job processes
        env = {"GANETI_HEARTBEAT_PORT": str(self.heartbeat_port)}
        self.wconfd = Daemon(root, "ganeti-wconfd", "--rpc-port", str(self.rpc_port), *wconfd_args)
        self.luxid = Daemon(root, "ganeti-luxid", "--rpc-port", str(self.rpc_port), env=env)
        self.nodeds: list[Daemon] = []
        self.rapi: RapiDaemon | None = None
        self.url = ""
        self.cert_pem = b""
        self._rpc: RpcClient | None = None

    @property
    def master(self) -> Paths:
        return self.roots[0]

    @property
    def rpc(self) -> RpcClient:
        """A node RPC client of the master (once started)."""
        assert self._rpc is not None, "the cluster is not started"
        return self._rpc

    def _prepare(self) -> None:
        """The roots: secrets, certificate copies, storage, config, RAPI files."""
        master = self.master
        self.roots += [make_root("%s%d" % (self.prefix, n)) for n in range(2, len(self.nodes) + 1)]
        crypto.bootstrap_secrets(master, CLUSTER_NAME, node_name=next(iter(self.nodes)))
        for paths in self.roots[1:]:
            os.makedirs(paths.data_dir, exist_ok=True)
            shutil.copy(master.server_pem, paths.server_pem)
        if self.shared_file_storage:
            share_file_storage(self.roots)
        seed_config(master, self.config)
        if self.rapi_users is not None:
            key_pem, self.cert_pem = crypto.generate_key_and_cert(CLUSTER_NAME)
            crypto.write_pem_file(master.rapi_pem, key_pem, self.cert_pem)
            os.makedirs(os.path.dirname(master.rapi_users), exist_ok=True)
            with open(master.rapi_users, "w") as handle:
                handle.write(self.rapi_users)
            host = "127.0.0.1"
            self.rapi = RapiDaemon(master, host, free_port(host), "--rpc-port", str(self.rpc_port), *self.rapi_args)
            self.url = "https://%s:%d" % (host, self.rapi.port)
        for paths, (name, address) in zip(self.roots, self.nodes.items()):
            write_node_identity(paths, name, address)
        port = self.rpc_port
        env = {"GANETI_HEARTBEAT_PORT": str(self.heartbeat_port), RAPI_PORT_ENV: str(self.rapi_port),
               CONFD_PORT_ENV: str(self.confd_port)}
        self.nodeds = [Daemon(paths, "ganeti-noded", "--bind", address, "--port", str(port), *self.noded_args,
                              tcp=(address, port), env=env)
                       for paths, address in zip(self.roots, self.nodes.values())]

    async def start(self) -> LoopbackCluster:
        """Prepare the roots, start every node daemon, then the master's;
        if one does not start, L{stop} what did and raise."""
        try:
            self._prepare()
            # a connection per call: tests block the reactor (gnt-* commands run
            # synchronously) past NodeD's idle timeout, and a kept-alive connection
            # NodeD closed meanwhile would be handed out before its close is read
            self._rpc = RpcClient.from_paths(self.reactor, self.master, port=self.rpc_port, persistent=False)
            for daemon in self.nodeds:
                daemon.start()
            for daemon in self.nodeds:
                await daemon.ready(self.reactor)
            for optional in (self.wconfd, self.luxid if self.start_luxid else None, self.rapi):
                if optional is not None:
                    await self.start_daemon(optional)
        except BaseException:
            await self.stop()
            raise
        return self

    async def start_daemon(self, daemon: Daemon) -> None:
        """(Re)start one daemon and wait until it accepts connections."""
        daemon.start()
        await daemon.ready(self.reactor)

    async def stop(self) -> None:
        """Stop every daemon (the master's first), remove the other roots;
        stopping twice does no harm."""
        if self._rpc is not None:
            await self._rpc.close()
        for daemon in (self.rapi, self.luxid, self.wconfd, *self.nodeds):
            if daemon is not None:
                daemon.stop()
        # what the NodeDs started (confd and RAPI on candidates, a failover's master daemons, MonD), the job
        # processes, a warm launcher: stopped, and what does not stop killed
        stop_root(self.master)
        for paths in self.roots[1:]:
            remove_root(paths)

    async def __aenter__(self) -> LoopbackCluster:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def until(self, check: Callable[[], object], timeout: float = 60.0) -> None:
        """Wait until C{check()} is true (e.g. a change has reached a node)."""
        await until(self.reactor, check, timeout)

    async def running(self, hypervisor: str = "fake") -> dict[str, list[str]]:
        """What C{hypervisor} runs on each node: C{{node name: [instance, ...]}}."""
        answers = await self.rpc.run(self.nodes, procedures.instance_list.call([hypervisor], {}).within(30))
        assert all(r.success for r in answers.values()), answers
        return {name: sorted(answers[name].payload) for name in self.nodes}


async def until(reactor: IReactorTime, check: Callable[[], object], timeout: float = 60.0) -> None:
    """Poll C{check} every 50 ms until it is true; AssertionError after C{timeout} s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await deferLater(reactor, 0.05, lambda: None)


# --- the gnt-* commands ---------------------------------------------------------------------


def gnt(root: Paths, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run C{tool} (C{gnt-node}, ...) of this installation on C{root} (forked warm: L{warmcli})."""
    argv = [os.path.join(BIN, tool), "--root", root.root, *args]
    done = warmcli.run(argv, timeout=120)
    return done if done is not None else subprocess.run(argv, capture_output=True, text=True, timeout=120)


def ok(root: Paths, tool: str, *args: str) -> str:
    """L{gnt}, which must succeed; its output."""
    done = gnt(root, tool, *args)
    assert done.returncode == 0, (tool, args, done.stdout, done.stderr, _master_output(root, done.stderr))
    return done.stdout


def file_tail(path: str, size: int = 3000) -> str | None:
    """The last C{size} characters of the file at C{path} (for a failure's message), or C{None} without one."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")[-size:]
    except OSError:
        return None


def _master_output(root: Paths, stderr: str) -> str:
    """When a command could not reach LuxiD: the end of what LuxiD said (its C{.out} file in the root)."""
    if "master daemon" not in stderr:
        return ""
    said = file_tail(os.path.join(root.root, "ganeti-luxid.out"))
    return "no output of ganeti-luxid" if said is None else "ganeti-luxid said: " + said


# --- what has reached a node ----------------------------------------------------------------


def serial_of(paths: Paths) -> int | None:
    """The config serial the node holds: its config.data's, or newer with the
    config deltas it journalled (L{ganeti.noded.configdelta}; C{None}: it has
    no config.data)."""
    return held_serial(paths)


def ssconf_of(paths: Paths, key: str) -> str | None:
    """The node's ssconf file C{key} (C{None}: it has none)."""
    try:
        with open(paths.ssconf(key)) as handle:
            return handle.read()
    except OSError:
        return None


__all__ = ["LoopbackCluster", "gnt", "loopback_config", "node_addresses", "ok", "serial_of", "ssconf_of", "until"]
