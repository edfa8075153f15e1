"""NICs on networks, for instance creation and modification (as Ganeti's
C{LUInstanceCreate} and C{LUInstanceSetParams} treat them).

A NIC with a network takes its mode, link and vlan from the network's
connection to the node group of the instance's primary node; C{ip=pool}
draws the lowest free address of the network's pool; an explicit address
must lie in the network and be free.  WConfD reserves the addresses with
the instance change itself (and refuses one taken meanwhile with
L{ganeti.errors.IpInUse}, after which the LU draws again).

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ganeti import errors
from ganeti import network as netpool
from ganeti.objects import ConfigData

#: C{ip=pool}: draw an address from the network's pool
IP_POOL = "pool"


def _net_name(cfg: ConfigData, uuid: str) -> str:
    net = cfg.networks.get(uuid)
    return (net.name if net is not None else None) or uuid


def group_netparams(cfg: ConfigData, network: str, pnode: str) -> dict[str, Any]:
    """The NIC parameters of C{network}'s connection to C{pnode}'s group.

    @raise errors.OpPrereqError: not connected (Ganeti's "No netparams found").
    """
    params = netpool.connected_netparams(cfg, network, pnode)
    if params is None:
        node = cfg.nodes.get(pnode)
        raise errors.OpPrereqError(
            "No netparams found for network %s. Probably not connected to node's %s nodegroup"
            % (_net_name(cfg, network), node.name if node is not None else pnode), errors.ECODE_INVAL)
    return params


def check_explicit_ip(cfg: ConfigData, network: str, ip: str, conflicts_check: bool, index: int,
                      own: Iterable[tuple[str, str]] = ()) -> None:
    """An explicit address of NIC C{index} on C{network}: inside it, not used
    by another NIC (C{own}: the instance's current addresses, which it may
    keep) and, with C{conflicts_check}, not externally reserved."""
    net = cfg.networks.get(network)
    if net is None:
        raise errors.OpPrereqError("NIC %d: network '%s' not found" % (index, network), errors.ECODE_NOENT)
    pool = netpool.Pool.of(net)
    taken = (pool.contains(ip) and pool.is_reserved(ip) and (network, ip) not in set(own)) or (
        conflicts_check and pool.contains(ip) and pool.is_reserved(ip, external=True))
    if not pool.contains(ip) or taken:
        raise errors.OpPrereqError("IP address %s already in use or does not belong to network %s"
                                   % (ip, net.name), errors.ECODE_NOTUNIQUE)


def check_conflicting_ip(cfg: ConfigData, ip: str | None, pnode: str) -> None:
    """Ganeti's C{CheckForConflictingIp}: an address of a NIC without a
    network must not lie in a network connected to C{pnode}'s group."""
    if not ip:
        return
    net = netpool.network_containing(cfg, ip, pnode)
    if net is not None:
        raise errors.OpPrereqError("The requested IP address (%s) belongs to network %s, but the target NIC does"
                                   " not." % (ip, net.name), errors.ECODE_STATE)


def fill_nics(cfg: ConfigData, nics: list[dict[str, Any]], pnode: str, conflicts_check: bool) -> list[dict[str, Any]]:
    """C{nics} (checked NIC dicts of a creation) for primary node C{pnode}:
    the network's connection parameters copied in, explicit addresses
    checked.  C{ip=pool} stays for L{draw_pool_ips}."""
    out = []
    for index, nic in enumerate(nics):
        nic = dict(nic)
        network = nic.get("network")
        if network:
            nic["nicparams"] = group_netparams(cfg, network, pnode)
            ip = nic.get("ip")
            if ip and ip != IP_POOL:
                check_explicit_ip(cfg, network, ip, conflicts_check, index)
        elif conflicts_check:
            check_conflicting_ip(cfg, nic.get("ip"), pnode)
        out.append(nic)
    return out


def draw_pool_ips(cfg: ConfigData, wanted: Mapping[int, str], keep: Iterable[tuple[str, str]] = ()) -> dict[int, str]:
    """An address for each NIC index of C{wanted} (index -> network uuid):
    the lowest free ones of each pool, distinct.

    @param keep: C{(network, ip)} pairs not to hand out again (the
        instance's other NICs).
    @raise errors.OpPrereqError: a pool is full (C{ECODE_STATE}).
    """
    taken: dict[str, set[str]] = {}
    for network, ip in keep:
        taken.setdefault(network, set()).add(ip)
    out: dict[int, str] = {}
    for index in sorted(wanted):
        network = wanted[index]
        net = cfg.networks.get(network)
        if net is None:
            raise errors.OpPrereqError("NIC %d: network '%s' not found" % (index, network), errors.ECODE_NOENT)
        skip = taken.setdefault(network, set())
        try:
            ip = netpool.Pool.of(net).free_address(skip=skip)
        except netpool.AddressPoolError:
            raise errors.OpPrereqError("Unable to get a free IP for NIC %d from the address pool (network %s is"
                                       " full)" % (index, net.name), errors.ECODE_STATE) from None
        skip.add(ip)
        out[index] = ip
    return out
