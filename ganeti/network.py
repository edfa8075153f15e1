"""The IPv4 address pools of networks, kept in config.data as Ganeti keeps them.

A network's C{reservations} (addresses of instance NICs) and
C{ext_reservations} (network and broadcast address, gateway, node and
master IPs, addresses an admin reserved) are strings of C{'0'} and C{'1'},
one character per address of the IPv4 network: index 0 is the network
address, index i the network address plus i.  An address is taken when
either string has a C{'1'} there.  A missing string is all zeros.

Pure: no Twisted, no I/O.  A L{Pool} is a mutable working copy of one
network's two strings; L{Pool.apply} gives the changed record.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import attrs

from ganeti import errors
from ganeti.objects import Network

#: the smallest and largest IPv4 networks Ganeti pools (prefix lengths)
MIN_PREFIX = 16
MAX_PREFIX = 30

#: "none" in an opcode clears a gateway, IPv6 subnet or MAC prefix
VALUE_NONE = "none"

_MAC_PREFIX_RE = re.compile(r"^([0-9a-f]{2}:){2}[0-9a-f]{2}$")


class AddressPoolError(errors.GenericError):
    """An address cannot be reserved or released, or the pool is malformed."""


def parse_network(cidr: Any) -> ipaddress.IPv4Network:
    """The IPv4 network of C{cidr} (C{"192.0.2.0/24"}), within L{MIN_PREFIX}..L{MAX_PREFIX}.

    @raise AddressPoolError: not an IPv4 network in CIDR notation, host bits
        set, or too big or too small for a pool.
    """
    try:
        net = ipaddress.IPv4Network(str(cidr))
    except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError) as e:
        raise AddressPoolError("Invalid IPv4 network '%s': %s" % (cidr, e)) from None
    if net.prefixlen < MIN_PREFIX:
        raise AddressPoolError(
            "A big network with %d host(s) is currently not supported, please specify at most a /%d network"
            % (net.num_addresses, MIN_PREFIX)
        )
    if net.prefixlen > MAX_PREFIX:
        raise AddressPoolError(
            "A network with only %d host(s) is too small, please specify at least a /%d network"
            % (net.num_addresses, MAX_PREFIX)
        )
    return net


def normalize_mac_prefix(prefix: str) -> str:
    """C{prefix} as three lower-case octets C{aa:bb:cc}.

    @raise errors.OpPrereqError: (C{ECODE_INVAL}) anything else.
    """
    text = str(prefix).strip().lower()
    if not _MAC_PREFIX_RE.match(text):
        raise errors.OpPrereqError("Invalid MAC address prefix '%s': give three octets, e.g. aa:00:00" % prefix,
                                   errors.ECODE_INVAL)
    return text


def _bits(text: str | None, size: int, what: str) -> bytearray:
    if text is None or text == "":
        return bytearray(b"0" * size)
    if len(text) != size or text.strip("01"):
        raise AddressPoolError("The %s of the network are malformed (%d bits for %d addresses)" % (what, len(text), size))
    return bytearray(text.encode("ascii"))


@attrs.define
class Pool:
    """A working copy of a network's address pool."""

    net: ipaddress.IPv4Network
    reservations: bytearray
    ext_reservations: bytearray

    @classmethod
    def of(cls, network: Network) -> Pool:
        """The pool of C{network} (missing strings are all zeros)."""
        net = parse_network(network.network)
        size = net.num_addresses
        return cls(net, _bits(network.reservations, size, "reservations"),
                   _bits(network.ext_reservations, size, "external reservations"))

    @classmethod
    def initialize(cls, network: Network) -> Pool:
        """A fresh pool for C{network}: network and broadcast address and the
        gateway (if any) externally reserved."""
        pool = cls(parse_network(network.network), bytearray(), bytearray())
        size = pool.net.num_addresses
        pool.reservations = bytearray(b"0" * size)
        pool.ext_reservations = bytearray(b"0" * size)
        pool.reserve(str(pool.net[0]), external=True)
        pool.reserve(str(pool.net[-1]), external=True)
        if network.gateway:
            pool.reserve(network.gateway, external=True)
        return pool

    # --- reads ------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.net.num_addresses

    def contains(self, address: Any) -> bool:
        """Whether C{address} (an IPv4 address or C{None}) lies in the network."""
        if not address:
            return False
        try:
            return ipaddress.IPv4Address(address) in self.net
        except (ipaddress.AddressValueError, ValueError):
            return False

    def index(self, address: Any) -> int:
        try:
            addr = ipaddress.IPv4Address(address)
        except (ipaddress.AddressValueError, ValueError):
            raise AddressPoolError("'%s' is not a valid IPv4 address" % (address,)) from None
        if addr not in self.net:
            raise AddressPoolError("%s does not contain %s" % (self.net, addr))
        return int(addr) - int(self.net.network_address)

    def is_reserved(self, address: Any, external: bool = False) -> bool:
        bits = self.ext_reservations if external else self.reservations
        return bits[self.index(address)] == ord("1")

    def is_taken(self, address: Any) -> bool:
        """Reserved by an instance or externally."""
        return self.is_reserved(address) or self.is_reserved(address, external=True)

    def combined(self) -> bytes:
        """The OR of both strings, as C{b"0"}/C{b"1"} bytes (C{"0"} is 0x30 and
        C{"1"} 0x31, so a bytewise OR of the characters is the OR of the bits)."""
        size = len(self.reservations)
        return (int.from_bytes(self.reservations, "big") | int.from_bytes(self.ext_reservations, "big")).to_bytes(
            size, "big")

    def free_count(self) -> int:
        return self.combined().count(b"0")

    def reserved_count(self) -> int:
        return self.combined().count(b"1")

    def map(self) -> str:
        """C{X} for a taken address, C{.} for a free one (Ganeti's usage map)."""
        return self.combined().decode("ascii").replace("1", "X").replace("0", ".")

    def external_reservations(self) -> list[str]:
        base = int(self.net.network_address)
        return [str(ipaddress.IPv4Address(base + i)) for i, bit in enumerate(self.ext_reservations) if bit == ord("1")]

    def free_address(self, skip: frozenset[str] | set[str] = frozenset()) -> str:
        """The lowest free address not in C{skip}.

        @raise AddressPoolError: the network is full.
        """
        combined = self.combined()
        base = int(self.net.network_address)
        start = 0
        while True:
            index = combined.find(b"0", start)
            if index < 0:
                raise AddressPoolError("%s is full" % self.net)
            address = str(ipaddress.IPv4Address(base + index))
            if address not in skip:
                return address
            start = index + 1

    # --- changes ----------------------------------------------------------
    def reserve(self, address: Any, external: bool = False) -> None:
        """Mark C{address} taken (by an instance, or externally).

        @raise AddressPoolError: outside the network, or already reserved so.
        """
        index = self.index(address)
        bits = self.ext_reservations if external else self.reservations
        if bits[index] == ord("1"):
            if external:
                raise AddressPoolError("IP %s is already externally reserved" % address)
            raise AddressPoolError("IP %s is already used by an instance" % address)
        bits[index] = ord("1")

    def release(self, address: Any, external: bool = False) -> None:
        """Mark C{address} free again.

        @raise AddressPoolError: outside the network, or not reserved so.
        """
        index = self.index(address)
        bits = self.ext_reservations if external else self.reservations
        if bits[index] != ord("1"):
            if external:
                raise AddressPoolError("IP %s is not externally reserved" % address)
            raise AddressPoolError("IP %s is not used by an instance" % address)
        bits[index] = ord("0")

    def apply(self, network: Network) -> Network:
        """C{network} with this pool's strings."""
        return attrs.evolve(network, reservations=self.reservations.decode("ascii"),
                            ext_reservations=self.ext_reservations.decode("ascii"))


def stats(network: Network) -> tuple[int, int, str] | None:
    """C{(free, reserved, map)} of C{network}; C{None} when it lacks a pool
    (Ganeti shows 0, 0 and an empty map then)."""
    if not network.reservations or not network.ext_reservations:
        return None
    try:
        pool = Pool.of(network)
    except AddressPoolError:
        return None
    return pool.free_count(), pool.reserved_count(), pool.map()


def nic_addresses(nics: Any) -> set[tuple[str, str]]:
    """C{(network uuid, ip)} of every NIC with both (what the pools reserve)."""
    return {(nic.network, nic.ip) for nic in nics if nic.network and nic.ip}


def connected_netparams(cfg: Any, network_uuid: str, node_uuid: str) -> dict[str, Any] | None:
    """The NIC parameters of C{network_uuid}'s connection to the group of
    node C{node_uuid} (Ganeti's C{GetGroupNetParams}); C{None} if not connected."""
    node = cfg.nodes.get(node_uuid)
    group = cfg.nodegroups.get(node.group) if node is not None else None
    if group is None:
        return None
    params = (group.networks or {}).get(network_uuid)
    return dict(params) if params is not None else None


def network_containing(cfg: Any, address: str, node_uuid: str) -> Network | None:
    """A network connected to node C{node_uuid}'s group whose subnet holds C{address}."""
    node = cfg.nodes.get(node_uuid)
    group = cfg.nodegroups.get(node.group) if node is not None else None
    if group is None or not address:
        return None
    try:
        addr = ipaddress.IPv4Address(address)
    except (ipaddress.AddressValueError, ValueError):
        return None
    for uuid in group.networks or {}:
        net = cfg.networks.get(uuid)
        if net is None or not net.network:
            continue
        try:
            if addr in ipaddress.IPv4Network(net.network):
                return net  # type: ignore[no-any-return]
        except ValueError:
            continue
    return None
