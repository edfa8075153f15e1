"""Option values of gnt-instance, as Ganeti spells them, into opcode parameters.

    -B maxmem=1G,vcpus=2            {"maxmem": 1024, "vcpus": 2}
    -H kvm:kernel_path=,acpi=false  ("kvm", {"kernel_path": "", "acpi": False})
    --disk 0:size=10G,mode=ro       (0, {"size": 10240, "mode": "ro"})
    --net 0:mac=aa:00:00:11:22:33,link=br0
    --disk add:size=512M   --disk 1:remove   --net 0:ip=192.0.2.9

Key/value lists are comma-separated (C{\\,} is a literal comma); a bare
C{key} means C{True}, C{no_key} C{False} and C{-key} C{None} (reset).
Sizes take Ganeti's units (C{512}, C{512M}, C{1.5G}, C{2T}; default MiB)
and are rounded up to a multiple of 4 MiB.

Syntax errors are C{argparse.ArgumentTypeError} (usage, exit 2); values
that do not fit are L{errors.OpPrereqError} or L{TypeEnforcementError}
(printed as Ganeti prints them, exit 1).  Standard library plus
L{ganeti.errors}.
"""

from __future__ import annotations

import argparse
import math
import re

from ganeti import errors
from ganeti.disktemplates import CREATABLE_TEMPLATES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping

#: default fields of C{gnt-instance list}
LIST_DEF_FIELDS = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]
#: the templates offered (choices, help, completion): those the storage backends register, no others
DISK_TEMPLATES = CREATABLE_TEMPLATES
REBOOT_TYPES = ("soft", "hard", "full")
MIGRATION_MODES = ("live", "non-live")
DEFAULT_SHUTDOWN_TIMEOUT = 120

# how "startup" and friends choose their instances (Ganeti's --all, --node, ...)
BY_NAME, BY_CLUSTER, BY_NODE, BY_PRIMARY, BY_SECONDARY = "instances", "cluster", "node", "primary", "secondary"
BY_TAGS, BY_NODE_TAGS, BY_PRIMARY_TAGS, BY_SECONDARY_TAGS = "tags", "node-tags", "primary-tags", "secondary-tags"

VALUE_DEFAULT = "default"
DISK_MODES = ("rw", "ro")
NIC_MODES = ("bridged", "routed", "openvswitch")
NIC_PARAMS = ("mac", "ip", "mode", "link", "network", "name", "vlan", "bridge")
DISK_PARAMS = ("size", "spindles", "mode", "adopt", "vg", "metavg", "provider", "name", "access")
#: modification actions of C{--disk}/C{--net} (Ganeti's DDM_*)
MOD_ACTIONS = ("add", "attach", "remove", "detach", "modify")

K_SIZE, K_INT, K_BOOL, K_STR = "size", "int", "bool", "str"
#: backend parameter -> kind (C{memory} is the old name of maxmem=minmem)
BE_KINDS = {
    "memory": K_SIZE,
    "maxmem": K_SIZE,
    "minmem": K_SIZE,
    "vcpus": K_INT,
    "spindle_use": K_INT,
    "auto_balance": K_BOOL,
    "always_failover": K_BOOL,
}

#: compiled at the first size parsed (re.compile keeps it), not at every command's start
_SIZE = r"^([.\d]+)\s*([a-zA-Z]+)?$"
_UNITS = {"m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024, "t": 1024**2, "tb": 1024**2, "tib": 1024**2}


class TypeEnforcementError(errors.GenericError):
    """A parameter value of the wrong type (shown as "Parameter Error: ...")."""


# --- sizes -------------------------------------------------------------------------------
def parse_size(value: Any) -> int:
    """MiB from C{512}, C{512M}, C{1.5g}, C{2TiB}, ..., rounded up to a multiple of 4.

    @raise ValueError: not a size.
    """
    match = re.match(_SIZE, str(value).strip())
    amount = None
    if match is not None:
        try:
            amount = float(match.group(1))
        except ValueError:
            pass
    if match is None or amount is None:
        raise ValueError("not a number with an optional unit (M, G, T)")
    unit = match.group(2)
    factor = _UNITS.get((unit or "m").lower())
    if factor is None:
        raise ValueError("unknown unit %r" % unit)
    mib = int(math.ceil(amount * factor))
    return mib + (-mib) % 4


def size_option(text: str) -> int:
    """argparse type of a size option (C{-s 10G})."""
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError("invalid size %r: %s" % (text, e)) from None


# --- key=value lists ------------------------------------------------------------------------
def split_escaped(text: str, sep: str = ",") -> list[str]:
    """C{text} split at C{sep}; a backslash makes the next C{sep} (or backslash) literal."""
    parts, current, i = [], [], 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in (sep, "\\"):
            current.append(text[i + 1])
            i += 2
            continue
        if char == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def key_values(text: str) -> dict[str, Any]:
    """argparse type of C{-B}, C{-O}, startup's C{-H}: C{k=v,flag,no_flag,-reset}."""
    out: dict[str, Any] = {}
    if text == "":
        return out
    for item in split_escaped(text):
        value: str | bool | None
        if "=" in item:
            key, value = item.split("=", 1)
        elif item.startswith("no_") and len(item) > 3:
            key, value = item[3:], False
        elif item.startswith("-") and len(item) > 1:
            key, value = item[1:], None
        else:
            key, value = item, True
        if not key:
            raise argparse.ArgumentTypeError("missing parameter name in %r" % text)
        if key in out:
            raise argparse.ArgumentTypeError("parameter %r given twice in %r" % (key, text))
        out[key] = value
    return out


def ident_key_values(text: str) -> tuple[str, Any]:
    """argparse type of C{IDENT[:k=v,...]} (C{--disk}, C{--net}, add's C{-H}).

    C{no_IDENT} gives C{(IDENT, False)} and C{-IDENT} C{(IDENT, None)}
    (then no parameters may follow).
    """
    ident, sep, rest = text.partition(":")
    if ident.startswith("no_") or (ident.startswith("-") and not ident[1:2].isdigit()):
        if rest or sep:
            raise argparse.ArgumentTypeError("no parameters may follow %r" % ident)
        return (ident[3:], False) if ident.startswith("no_") else (ident[1:], None)
    if not ident or "=" in ident:
        raise argparse.ArgumentTypeError("%r: expected NAME_OR_INDEX:PARAM=VALUE,... (e.g. 0:size=1G)" % text)
    return ident, key_values(rest)


# --- typed parameters ------------------------------------------------------------------------
def force_types(params: Mapping[str, Any], kinds: Mapping[str, str], what: str,
                allow_reset: bool = False, strict: bool = True) -> dict[str, Any]:
    """C{params} with each value converted to its kind.

    @param allow_reset: (modify) C{-key} (C{None}) and C{key=default} pass.
    @param strict: reject parameters C{kinds} does not know.
    @raise TypeEnforcementError: an unknown parameter or a value of the wrong type.
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        kind = kinds.get(key)
        if kind is None and strict:
            raise TypeEnforcementError("Unknown %s parameter '%s'" % (what, key))
        if allow_reset and (value is None or (isinstance(value, str) and value.lower() == VALUE_DEFAULT)):
            out[key] = VALUE_DEFAULT if value is not None else None
            continue
        out[key] = _convert(key, value, kind or K_STR)
    return out


def _convert(key: str, value: Any, kind: str) -> Any:
    if value is None:
        raise TypeEnforcementError("'%s' cannot be reset here" % key)
    if kind == K_BOOL:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "yes"):
            return True
        if str(value).lower() in ("false", "no"):
            return False
        raise TypeEnforcementError("'%s' (value %s) is not a valid boolean" % (key, value))
    if isinstance(value, bool):
        if kind == K_STR and not value:
            return ""
        raise TypeEnforcementError("'%s' needs a value (%s=...)" % (key, key))
    if kind == K_SIZE:
        try:
            return parse_size(value)
        except ValueError as e:
            raise TypeEnforcementError("'%s' (value %s) is not a valid size: %s" % (key, value, e)) from None
    if kind == K_INT:
        try:
            return int(value)
        except ValueError:
            raise TypeEnforcementError("'%s' (value %s) is not a valid integer" % (key, value)) from None
    return value


def be_params(params: Mapping[str, Any], allow_reset: bool = False) -> dict[str, Any]:
    """Backend parameters (C{-B}) with their types."""
    return force_types(params, BE_KINDS, "backend", allow_reset)


def hv_params(params: Mapping[str, Any], allow_reset: bool = False) -> dict[str, Any]:
    """Hypervisor parameters (C{-H}) with the types of the query's hv/ fields;
    parameters it does not know stay strings (the hypervisor checks them)."""
    from ganeti.query.instance import HV_PARAM_KINDS

    kinds = {name: {"bool": K_BOOL, "number": K_INT}.get(kind, K_STR) for name, kind in HV_PARAM_KINDS.items()}
    return force_types(params, kinds, "hypervisor", allow_reset, strict=False)


# --- disks and NICs of a new instance -------------------------------------------------------
def _prereq(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def _index(ident: str, what: str) -> int:
    if not ident.isdigit():
        raise _prereq("Invalid %s index '%s': expected a number from 0" % (what, ident))
    return int(ident)


def _indexed(items: Iterable[tuple[str, Any]], what: str) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for ident, params in items:
        index = _index(ident, what)
        if not isinstance(params, dict):
            raise _prereq("Invalid %s/%d value: expected parameters, got %s" % (what, index, params))
        if index in found:
            raise _prereq("%s %d is given twice" % (what.capitalize(), index))
        found[index] = dict(params)
    return found


def _disk_params(params: dict[str, Any], where: str, template: str | None) -> dict[str, Any]:
    disk = dict(params)
    unknown = sorted(set(disk) - set(DISK_PARAMS))
    if unknown and template != "ext":
        raise _prereq("Unknown parameter(s) %s for %s" % (", ".join(unknown), where))
    for key, value in disk.items():
        if not isinstance(value, str) and key not in DISK_PARAMS:
            raise _prereq("Parameter '%s' of %s needs a value" % (key, where))
    if "size" in disk:
        try:
            disk["size"] = parse_size(disk["size"])
        except ValueError as e:
            raise _prereq("Invalid disk size for %s: %s" % (where, e)) from None
    if "spindles" in disk:
        try:
            disk["spindles"] = int(disk["spindles"])
        except (TypeError, ValueError):
            raise _prereq("Invalid spindles for %s: %r" % (where, disk["spindles"])) from None
    if "mode" in disk and disk["mode"] not in DISK_MODES:
        raise _prereq("Invalid access mode '%s' for %s (rw or ro)" % (disk["mode"], where))
    for key in ("name", "vg", "metavg", "adopt", "provider", "access"):
        if key in disk and not isinstance(disk[key], str):
            raise _prereq("Parameter '%s' of %s needs a value" % (key, where))
    return disk


def instance_disks(disk_opts: list[tuple[str, Any]], os_size: int | None, template: str | None) -> list[dict[str, Any]]:
    """The C{disks} of OP_INSTANCE_CREATE from C{--disk} and C{-s}."""
    if template == "diskless":
        if disk_opts or os_size is not None:
            raise _prereq("Diskless instance but disk information passed")
        return []
    if disk_opts and os_size is not None:
        raise _prereq("Please use either the '--disk' or '-s' option, not both")
    if os_size is not None:
        return [{"size": os_size}]
    if not disk_opts:
        raise _prereq("No disk information specified (use --disk N:size=SIZE, -s SIZE or -t diskless)")
    found = _indexed(disk_opts, "disk")
    disks = []
    for index in range(max(found) + 1):
        where = "disk %d" % index
        disk = _disk_params(found.get(index, {}), where, template)
        if "size" in disk and "adopt" in disk:
            raise _prereq("Only one of 'size' and 'adopt' allowed (%s)" % where)
        if "size" not in disk and "adopt" not in disk:
            raise _prereq("Missing size or adoption source for %s" % where)
        disks.append(disk)
    return disks


def _nic_params(params: dict[str, Any], where: str) -> dict[str, Any]:
    nic = dict(params)
    for key, value in nic.items():
        if key not in NIC_PARAMS:
            raise _prereq("Unknown parameter '%s' for %s (known: %s)" % (key, where, ", ".join(NIC_PARAMS)))
        if value is None or value is False:
            nic[key] = None
        elif not isinstance(value, str):
            raise _prereq("Parameter '%s' of %s needs a value" % (key, where))
    if nic.get("mode") is not None and nic["mode"] not in NIC_MODES:
        raise _prereq("Invalid mode '%s' for %s (%s)" % (nic["mode"], where, ", ".join(NIC_MODES)))
    return nic


def instance_nics(net_opts: list[tuple[str, Any]], no_nics: bool) -> list[dict[str, Any]]:
    """The C{nics} of OP_INSTANCE_CREATE: one default NIC unless C{--net} or C{--no-nics}."""
    if net_opts and no_nics:
        raise _prereq("Cannot use --net and --no-nics together")
    if no_nics:
        return []
    if not net_opts:
        return [{}]
    found = _indexed(net_opts, "nic")
    return [_nic_params(found.get(index, {}), "nic %d" % index) for index in range(max(found) + 1)]


def split_node(value: str | None) -> tuple[str | None, str | None]:
    """C{-n PNODE[:SNODE]}."""
    if not value:
        return None, None
    primary, _, secondary = value.partition(":")
    return primary or None, secondary or None


# --- modifications (gnt-instance modify) -----------------------------------------------------
def modifications(items: list[tuple[str, Any]], what: str) -> list[list[Any]]:
    """C{--disk}/C{--net} of modify as C{[[action, index or name, params], ...]}.

    C{add[:params]} adds at the end, C{remove} removes the last one,
    C{N:remove} / C{N:add,...} / C{N:params} act on index N (or a name).
    """
    out = []
    for ident, raw in items:
        if not isinstance(raw, dict):
            raise _prereq("Invalid %s modification '%s'" % (what, ident))
        params = dict(raw)
        target: Any
        if ident in MOD_ACTIONS and ident != "modify":
            action, target = ident, -1
        else:
            target = int(ident) if ident.isdigit() or ident == "-1" else ident
            chosen = [name for name in MOD_ACTIONS if name in params]
            for name in chosen:
                del params[name]
            if len(chosen) > 1:
                raise _prereq("Cannot do more than one of %s at once on %s %s" % (", ".join(chosen), what, ident))
            action = chosen[0] if chosen else "modify"
        where = "%s %s" % (what, ident)
        if action in ("remove", "detach") and params:
            raise _prereq("No parameters allowed when removing or detaching %s" % where)
        if what == "disk":
            # other keys: ExtStorage parameters of an ext disk (the logical unit refuses them for other templates)
            params = _disk_params(params, where, "ext" if action in ("attach", "add", "modify") else None)
            if action == "add" and "size" not in params and "adopt" not in params:  # blockdev: the device's size
                raise _prereq("Missing size of the new disk (%s)" % where)
        else:
            params = _nic_params(params, where)
        out.append([action, target, params])
    return out
