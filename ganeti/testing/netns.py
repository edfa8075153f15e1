"""Network namespaces for partition tests: one per node, joined by a bridge.

    spaces = Namespaces.create("gntp1234", 3)   # or skip: Namespaces.unavailable()
    spaces.cut(0) / spaces.heal(0)               # node 0 off / back on the bridge
    spaces.destroy()

Every namespace is created by the test and named after its prefix: a hub
namespace holding the bridge, and one namespace per node holding the
node's end of a veth pair (C{eth0}, address C{10.77.0.N/24}); the root
network namespace is never touched.  Cutting a node sets its veth down on
the hub side: its packets and those to it are dropped, as in a network
partition, while every process keeps running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import attrs

from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.testing.cluster import LoopbackCluster

SUBNET = "10.77.0"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise OSError("ip %s: %s" % (" ".join(args), done.stderr.strip()))


class Namespaces:
    """The namespaces of one partition test (see the module docstring)."""

    def __init__(self, prefix: str, count: int) -> None:
        self.prefix = prefix
        self.hub = "%sh" % prefix
        self.nodes = ["%sn%d" % (prefix, n + 1) for n in range(count)]
        #: each node's address, in node order
        self.addresses = ["%s.%d" % (SUBNET, n + 1) for n in range(count)]

    @staticmethod
    def unavailable() -> str | None:
        """Why namespaces cannot be made here (C{None}: they can)."""
        if shutil.which("ip") is None:
            return "iproute2 (ip) is not installed"
        probe = "gntprobe%d" % os.getpid()
        done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            return "cannot create a network namespace: %s" % done.stderr.strip()
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
        return None

    @classmethod
    def create(cls, prefix: str, count: int) -> Namespaces:
        spaces = cls(prefix, count)
        try:
            _ip("netns", "add", spaces.hub)
            _ip("-n", spaces.hub, "link", "set", "lo", "up")
            _ip("-n", spaces.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", spaces.hub, "link", "set", "br0", "up")
            for number, (name, address) in enumerate(zip(spaces.nodes, spaces.addresses)):
                _ip("netns", "add", name)
                _ip("-n", name, "link", "set", "lo", "up")
                _ip("-n", spaces.hub, "link", "add", spaces.port(number), "type", "veth", "peer", "name", "eth0",
                    "netns", name)
                _ip("-n", spaces.hub, "link", "set", spaces.port(number), "master", "br0")
                _ip("-n", spaces.hub, "link", "set", spaces.port(number), "up")
                _ip("-n", name, "address", "add", "%s/24" % address, "dev", "eth0")
                _ip("-n", name, "link", "set", "eth0", "up")
        except BaseException:
            spaces.destroy()
            raise
        return spaces

    @staticmethod
    def port(number: int) -> str:
        """The hub-side interface of node C{number}."""
        return "v%d" % number

    def cut(self, number: int) -> None:
        _ip("-n", self.hub, "link", "set", self.port(number), "down")

    def heal(self, number: int) -> None:
        _ip("-n", self.hub, "link", "set", self.port(number), "up")

    def destroy(self) -> None:
        """Delete every namespace (their interfaces go with them); twice does no harm."""
        for name in [*self.nodes, self.hub]:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)




class NetnsCluster(LoopbackCluster):
    """A L{LoopbackCluster} whose nodes live in C{spaces}: node N at
    C{spaces.addresses[N]}, its daemons (and the master daemons it starts)
    in its namespace; C{config} is rewritten to those addresses."""

    def __init__(self, reactor: IReactor, root: Paths, config: ConfigData, spaces: Namespaces, **kwargs: Any) -> None:
        names = sorted(node.name for node in config.nodes.values() if node.name)
        address_of = dict(zip(names, spaces.addresses))
        nodes = {uuid: attrs.evolve(node, primary_ip=address_of[node.name or ""],
                                    secondary_ip=address_of[node.name or ""])
                 for uuid, node in config.nodes.items()}
        config = attrs.evolve(config, nodes=nodes, cluster=attrs.evolve(config.cluster, master_ip=spaces.addresses[0]))
        super().__init__(reactor, root, config, **kwargs)
        self.spaces = spaces
        self.nodes = address_of
        self.wconfd.netns = self.luxid.netns = spaces.nodes[0]

    def _prepare(self) -> None:
        super()._prepare()
        for daemon, namespace in zip(self.nodeds, self.spaces.nodes):
            daemon.netns = namespace


__all__ = ["NetnsCluster", "Namespaces", "SUBNET"]
