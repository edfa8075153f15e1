"""Checking what opcodes say about an instance: parameters, disks, NICs, MACs.

Pure: no I/O.  Every check raises L{errors.OpPrereqError} (C{ECODE_INVAL})
naming the offending key and value.  Parameter values arrive as JSON (and
as strings from command lines): they are converted to their type here, and
the value C{"default"} means "remove the instance's own value" (L{DEFAULT}
in the result).
"""

from __future__ import annotations

import ipaddress
import random
import re
from typing import Any, Callable, Iterable, Mapping

from ganeti import errors, hvconstants
from ganeti.objects import ConfigData

#: the value that removes an instance's own setting (Ganeti's C{VALUE_DEFAULT})
VALUE_DEFAULT = "default"


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: marks a key to remove, in the dicts returned by the checks
DEFAULT: Any = _Default()

T_BOOL, T_INT, T_SIZE, T_STR, T_FLOAT = "bool", "int", "size", "string", "float"

#: backend parameters and their types (C{memory} is the old name of both sizes)
BE_TYPES: dict[str, str] = {
    "maxmem": T_SIZE,
    "minmem": T_SIZE,
    "memory": T_SIZE,
    "vcpus": T_INT,
    "auto_balance": T_BOOL,
    "always_failover": T_BOOL,
    "spindle_use": T_INT,
}

_MIGRATION_MODES = ("live", "non-live")

#: hypervisor parameters each hypervisor takes, with their types (L{ganeti.hvconstants})
HV_TYPES: dict[str, dict[str, str]] = hvconstants.HV_PARAMETER_TYPES

NIC_MODES = ("bridged", "routed", "openvswitch")
DISK_MODES = ("rw", "ro")
MAC_AUTO, MAC_GENERATE = "auto", "generate"
_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_PREFIX_RE = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mgtMGT]?)\s*(?:i?[bB])?\s*$")
_UNITS = {"": 1, "m": 1, "g": 1024, "t": 1024 * 1024}

#: keys of a disk of the opcodes we take, and those of other templates we ignore
DISK_KEYS = ("size", "mode", "name")
_DISK_IGNORED = ("vg", "metavg", "spindles")
_DISK_REFUSED = {"adopt": "disk adoption", "provider": "ExtStorage providers", "dev_type": "per-disk templates"}
NIC_KEYS = ("mac", "ip", "mode", "link", "vlan", "network", "name", "bridge")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


# --- typed values ------------------------------------------------------------------


def parse_size(value: Any, what: str) -> int:
    """MiB from an int or a string such as C{"512"}, C{"512M"}, C{"2G"}."""
    if isinstance(value, bool):
        raise _invalid("Invalid %s %r: not a size" % (what, value))
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    raise _invalid("Invalid %s %r: not a size (MiB, or a number with unit M, G or T)" % (what, value))


def parse_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "no", "off", "0"):
        return False
    raise _invalid("Invalid %s %r: not a boolean" % (what, value))


def parse_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise _invalid("Invalid %s %r: not an integer" % (what, value))
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value)
    raise _invalid("Invalid %s %r: not an integer" % (what, value))


def parse_float(value: Any, what: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _invalid("Invalid %s %r: not a number" % (what, value))


def parse_str(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _invalid("Invalid %s %r: not a string" % (what, value))


_PARSERS: dict[str, Callable[[Any, str], Any]] = {T_BOOL: parse_bool, T_INT: parse_int, T_SIZE: parse_size,
                                                  T_STR: parse_str, T_FLOAT: parse_float}


#: how an error names the type each parser expects
_TYPE_NAMES: dict[str, str] = {
    T_BOOL: "a boolean", T_INT: "an integer", T_SIZE: "a size (MiB, or a number with unit M, G or T)",
    T_STR: "a string", T_FLOAT: "a number",
}


def check_typed(params: Any, types: Mapping[str, str], kind: str, allow_default: bool = True,
                owner: str = "") -> dict[str, Any]:
    """C{params} with known keys and values of the right type (L{DEFAULT} kept).

    @param kind: what a key is, for errors (C{"backend parameter"})
    @param owner: appended to the error about an unknown key
        (C{" for hypervisor 'fake'"})
    @raise errors.OpPrereqError: (C{ECODE_INVAL}) an unknown key, or a value
        not of its type; both name the parameter
    """
    if not isinstance(params, dict):
        raise _invalid("%s%s must be a dict, not %r" % (kind[:1].upper() + kind[1:], "s" if kind else "", params))
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in types:
            raise _invalid("Unknown %s '%s'%s (known: %s)" % (kind, key, owner, ", ".join(sorted(types)) or "none"))
        if allow_default and value == VALUE_DEFAULT:
            out[key] = DEFAULT
            continue
        try:
            out[key] = _PARSERS[types[key]](value, "%s '%s'" % (kind, key))
        except errors.OpPrereqError:
            raise _invalid("%s '%s'%s must be %s, got %r"
                           % (kind[:1].upper() + kind[1:], key, owner, _TYPE_NAMES[types[key]], value)) from None
    return out


def check_beparams(params: Any, allow_default: bool = True) -> dict[str, Any]:
    """Backend parameters, typed; C{memory} becomes C{maxmem} and C{minmem}."""
    out = check_typed(params, BE_TYPES, "backend parameter", allow_default)
    if "memory" in out:
        memory = out.pop("memory")
        out.setdefault("maxmem", memory)
        out.setdefault("minmem", memory)
    for key in ("maxmem", "minmem", "vcpus", "spindle_use"):
        value = out.get(key)
        if value is not None and value is not DEFAULT and value < (0 if key == "spindle_use" else 1):
            raise _invalid("Invalid backend parameter '%s': %s" % (key, value))
    maxmem, minmem = out.get("maxmem"), out.get("minmem")
    if isinstance(maxmem, int) and isinstance(minmem, int) and minmem > maxmem:
        raise _invalid("Minimum memory (%s) is greater than maximum memory (%s)" % (minmem, maxmem))
    return out


def check_hvparams(hypervisor: str, params: Any, allow_default: bool = True) -> dict[str, Any]:
    """Hypervisor parameters of C{hypervisor}, typed."""
    types = HV_TYPES.get(hypervisor)
    if types is None:
        raise _invalid("Hypervisor '%s' is not supported" % hypervisor)
    out = check_typed(params, types, "hypervisor parameter", allow_default, owner=" for hypervisor '%s'" % hypervisor)
    mode = out.get("migration_mode")
    if isinstance(mode, str) and mode not in _MIGRATION_MODES:
        raise _invalid("Invalid migration_mode %r (one of %s)" % (mode, ", ".join(_MIGRATION_MODES)))
    return out


def check_hvparams_by_hypervisor(params: Any, allow_default: bool = True) -> dict[str, dict[str, Any]]:
    """C{{hypervisor: {key: value}}} (the cluster's C{-H hv:key=value,...}), each checked."""
    if not isinstance(params, dict):
        raise _invalid("Hypervisor parameters must be a dict of hypervisor: parameters, not %r" % (params,))
    return {hypervisor: check_hvparams(hypervisor, values, allow_default) for hypervisor, values in params.items()}


#: NIC parameters (C{nicparams}: the cluster's defaults and each NIC's own)
NIC_TYPES: dict[str, str] = {"mode": T_STR, "link": T_STR, "vlan": T_STR}
_VLAN_RE = re.compile(r"^[.:]?\d+(:\d+)*$")


def check_nicparams(params: Any, allow_default: bool = True) -> dict[str, Any]:
    """NIC parameters, typed: C{mode} one of L{NIC_MODES}, C{vlan} Ganeti's syntax."""
    out = check_typed(params, NIC_TYPES, "NIC parameter", allow_default)
    mode = out.get("mode")
    if isinstance(mode, str) and mode not in NIC_MODES:
        raise _invalid("Invalid NIC parameter 'mode' %r (one of %s)" % (mode, ", ".join(NIC_MODES)))
    vlan = out.get("vlan")
    if isinstance(vlan, str) and vlan and not _VLAN_RE.match(vlan):
        raise _invalid("Invalid NIC parameter 'vlan' %r" % (vlan,))
    return out


def check_osparams(params: Any, known: Iterable[str] | None = None, allow_default: bool = True) -> dict[str, Any]:
    """OS parameters: string values; keys among C{known} when the OS declares them."""
    if not isinstance(params, dict):
        raise _invalid("OS parameters must be a dict, not %r" % (params,))
    allowed = None if known is None else set(known)
    out: dict[str, Any] = {}
    for key, value in params.items():
        if not isinstance(key, str) or not key:
            raise _invalid("Invalid OS parameter name %r" % (key,))
        if allowed is not None and key not in allowed:
            raise _invalid("Unknown OS parameter '%s' (the OS takes: %s)" % (key, ", ".join(sorted(allowed)) or "none"))
        out[key] = DEFAULT if allow_default and value == VALUE_DEFAULT else parse_str(value, "OS parameter '%s'" % key)
    return out


def merged(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """C{current} with C{changes} applied (L{DEFAULT} removes a key)."""
    out = dict(current)
    for key, value in changes.items():
        if value is DEFAULT:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def without_defaults(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Ganeti's C{identify_defaults}: drop values equal to the cluster's."""
    return {k: v for k, v in params.items() if k not in defaults or defaults[k] != v}


# --- disks -----------------------------------------------------------------------------


def check_disk(params: Any, index: int, require_size: bool = True) -> dict[str, Any]:
    """One disk of an opcode: C{{"size", "mode", "name"}} (only those given besides size)."""
    if not isinstance(params, dict):
        raise _invalid("Disk %d must be a dict, not %r" % (index, params))
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in _DISK_REFUSED:
            raise _invalid("Disk %d: %s ('%s') is not supported" % (index, _DISK_REFUSED[key], key))
        if key in _DISK_IGNORED:
            continue
        if key == "access":  # used by the rbd template (ganeti.cmdlib.rbd_disks), ignored by the others
            if value is not None:
                out["access"] = value
            continue
        if key not in DISK_KEYS:
            raise _invalid("Disk %d: unknown parameter '%s'" % (index, key))
        if key == "size":
            size = parse_size(value, "size of disk %d" % index)
            if size <= 0:
                raise _invalid("Disk %d: invalid size %s MiB" % (index, size))
            out["size"] = size
        elif key == "mode":
            if value not in DISK_MODES:
                raise _invalid("Disk %d: invalid access mode %r (one of %s)" % (index, value, ", ".join(DISK_MODES)))
            out["mode"] = value
        elif key == "name":
            if value is not None and (not isinstance(value, str) or value.lower() == "none"):
                raise _invalid("Disk %d: invalid name %r" % (index, value))
            if value is not None:
                out["name"] = value
    if require_size and "size" not in out:
        raise _invalid("Disk %d: missing size" % index)
    return out


# --- NICs and MACs -------------------------------------------------------------------


def valid_mac(mac: Any) -> bool:
    return isinstance(mac, str) and bool(_MAC_RE.match(mac.lower()))


def normalize_mac(mac: str) -> str:
    return mac.lower()


def generate_mac(prefix: str, used: set[str], rng: random.Random | None = None) -> str:
    """A MAC under C{prefix} (C{aa:bb:cc}) not in C{used} (which gets it)."""
    rng = rng or random.SystemRandom()
    prefix = (prefix or "aa:00:00").lower()
    if not _PREFIX_RE.match(prefix):
        raise errors.OpPrereqError("Invalid MAC prefix %r in the configuration" % prefix, errors.ECODE_STATE)
    for _attempt in range(1000):
        mac = "%s:%02x:%02x:%02x" % (prefix, rng.randrange(256), rng.randrange(256), rng.randrange(256))
        if mac not in used:
            used.add(mac)
            return mac
    raise errors.OpPrereqError("Cannot generate a unique MAC address under prefix %s" % prefix, errors.ECODE_NORES)


def used_macs(cfg: ConfigData, skip_instance: str | None = None) -> set[str]:
    """Every NIC MAC of the config (lower case), but those of C{skip_instance}."""
    return {
        normalize_mac(nic.mac)
        for inst in cfg.instances.values()
        if inst.uuid != skip_instance
        for nic in inst.nics
        if nic.mac
    }


def check_nic(cfg: ConfigData, params: Any, index: int, modify: bool = False) -> dict[str, Any]:
    """One NIC of an opcode, checked; keys: C{mac} (C{auto}/C{generate} or an
    address), C{ip}, C{network} (a uuid), C{name}, C{nicparams} (mode, link, vlan).

    With C{modify}, only the keys given are in the result.
    """
    if not isinstance(params, dict):
        raise _invalid("NIC %d must be a dict, not %r" % (index, params))
    for key in params:
        if key not in NIC_KEYS:
            raise _invalid("NIC %d: unknown parameter '%s'" % (index, key))
    out: dict[str, Any] = {}
    nicparams: dict[str, Any] = {}
    if "mac" in params or not modify:
        mac = params.get("mac") or MAC_AUTO
        if not isinstance(mac, str):
            raise _invalid("NIC %d: invalid MAC address %r" % (index, mac))
        mac = mac.lower()
        if mac not in (MAC_AUTO, MAC_GENERATE) and not valid_mac(mac):
            raise _invalid("NIC %d: invalid MAC address %r" % (index, mac))
        if mac not in (MAC_AUTO, MAC_GENERATE) and int(mac[:2], 16) & 1:
            raise _invalid("NIC %d: MAC address %s is a multicast address" % (index, mac))
        out["mac"] = mac
    if "ip" in params:
        ip = params["ip"]
        if ip is None or (isinstance(ip, str) and ip.lower() in ("none", "")):
            out["ip"] = None
        elif isinstance(ip, str) and ip.lower() == "pool":
            out["ip"] = "pool"  # drawn from the network's pool once the node is known
        else:
            try:
                out["ip"] = str(ipaddress.ip_address(ip))
            except (TypeError, ValueError):
                raise _invalid("NIC %d: invalid IP address %r" % (index, ip)) from None
    if "network" in params:
        net = params["network"]
        if net is None or (isinstance(net, str) and net.lower() in ("none", "")):
            out["network"] = None
        else:
            found = None
            for uuid, network in cfg.networks.items():
                if net in (uuid, network.name):
                    found = uuid
            if found is None:
                raise errors.OpPrereqError("NIC %d: network '%s' not found" % (index, net), errors.ECODE_NOENT)
            out["network"] = found
    if "name" in params:
        name = params["name"]
        if name is not None and (not isinstance(name, str) or name.lower() == "none"):
            raise _invalid("NIC %d: invalid name %r" % (index, name))
        out["name"] = name
    mode = params.get("mode")
    if mode is not None:
        if mode not in NIC_MODES:
            raise _invalid("NIC %d: invalid mode %r (one of %s)" % (index, mode, ", ".join(NIC_MODES)))
        nicparams["mode"] = mode
    link = params.get("link")
    bridge = params.get("bridge")
    if link is not None and bridge is not None and link != bridge:
        raise _invalid("NIC %d: give either link or bridge, not both" % index)
    if bridge is not None:
        if mode not in (None, "bridged"):
            raise _invalid("NIC %d: a bridge needs mode bridged" % index)
        link = bridge
    if link is not None:
        nicparams["link"] = parse_str(link, "link of NIC %d" % index)
    if params.get("vlan") is not None:
        vlan = parse_str(params["vlan"], "vlan of NIC %d" % index)
        if vlan and not _VLAN_RE.match(vlan):
            raise _invalid("NIC %d: invalid vlan %r" % (index, vlan))
        nicparams["vlan"] = vlan
    if out.get("network") and ("mode" in nicparams or "link" in nicparams):
        raise _invalid("NIC %d: if network is given, no mode or link is allowed to be passed" % index)
    if not modify and out.get("ip") == "pool" and not out.get("network"):
        raise _invalid("NIC %d: if ip=pool, parameter network must be passed too" % index)
    if nicparams or not modify:
        out["nicparams"] = nicparams
    return out


def check_nic_mode(cfg: ConfigData, nic: Mapping[str, Any], index: int) -> None:
    """A routed NIC needs an IP address."""
    default = (cfg.cluster.nicparams or {}).get("default") or {}
    mode = (nic.get("nicparams") or {}).get("mode") or default.get("mode")
    if mode == "routed" and not nic.get("ip") and not nic.get("network"):
        raise _invalid("NIC %d: routed mode needs an IP address" % index)


def mac_prefix(cfg: ConfigData, network: str | None) -> str:
    """The MAC prefix for a NIC on C{network} (its own, else the cluster's)."""
    if network is not None:
        net = cfg.networks.get(network)
        if net is not None and net.mac_prefix:
            return net.mac_prefix
    return cfg.cluster.mac_prefix or "aa:00:00"


# --- modification lists (OP_INSTANCE_SET_PARAMS) -----------------------------------------

MOD_ADD, MOD_ATTACH, MOD_MODIFY, MOD_REMOVE, MOD_DETACH = "add", "attach", "modify", "remove", "detach"


def upgrade_mods(mods: Any, what: str) -> list[tuple[str, Any, dict[str, Any]]]:
    """C{[(op, index or name, params)]} from both formats of the opcode.

    The legacy C{[op_or_index, params]}: C{add}/C{remove} act on the last
    item (index -1), an index modifies that item.
    """
    out: list[tuple[str, Any, dict[str, Any]]] = []
    legacy_changes = 0
    for item in mods or []:
        if len(item) == 2:
            head, params = item
            if head in (MOD_ADD, MOD_REMOVE, MOD_ATTACH, MOD_DETACH):
                legacy_changes += 1
                if legacy_changes > 1:  # as Ganeti: in this format only one at a time
                    raise _invalid("Only one %s add/attach/remove/detach operation is supported at a time" % what)
                out.append((head, -1, params))
            else:
                try:
                    index = int(head)
                except (TypeError, ValueError):
                    raise _invalid("Invalid %s modification %r" % (what, head)) from None
                out.append((MOD_MODIFY, index, params))
        else:
            op, ident, params = item
            if op not in (MOD_ADD, MOD_ATTACH, MOD_MODIFY, MOD_REMOVE, MOD_DETACH):
                raise _invalid("Invalid %s operation %r" % (what, op))
            if isinstance(ident, str) and re.match(r"^-?\d+$", ident):
                ident = int(ident)
            out.append((op, ident, params))
    return out


def find_item(items: list[Any], ident: Any, what: str, names: Callable[[Any], Iterable[str]]) -> int:
    """The position of C{ident} (an index, -1 for the last, or a name/uuid) in C{items}."""
    if isinstance(ident, int):
        if ident == -1 and items:
            return len(items) - 1
        if 0 <= ident < len(items):
            return ident
        raise _invalid("Invalid %s index %s (there are %d)" % (what, ident, len(items)))
    for position, item in enumerate(items):
        if ident in names(item):
            return position
    raise errors.OpPrereqError("No %s named '%s'" % (what, ident), errors.ECODE_NOENT)
