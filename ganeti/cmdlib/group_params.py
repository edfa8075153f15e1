"""Checking the parameters OP_GROUP_SET_PARAMS changes (pure, no I/O).

Each C{check_*} takes what the opcode says and returns it typed, the value
C{"default"} turned into L{DEFAULT} ("remove the group's own value");
the C{merged*} functions apply such changes to the group's current
values.  Errors are L{errors.OpPrereqError} (C{ECODE_INVAL}) naming the
key and the value.

  - node parameters (L{ND_TYPES}), e.g. C{{"ssh_port": "2222"}};
  - disk parameters: C{{template: {key: value}}} for known templates,
    scalar values;
  - instance policy: C{minmax} (a list of C{{"min": spec, "max": spec}}),
    C{disk-templates}, the ratios (L{IPOLICY_RATIOS}); C{std} belongs to
    the cluster only;
  - static hypervisor state C{{hypervisor: {key: int}}} and disk state
    C{{storage type: {name: {key: int}}}}.
"""

from __future__ import annotations

from typing import Any, Mapping

from ganeti import errors, opcodes
from ganeti.cmdlib.instance_params import (
    DEFAULT,
    T_BOOL,
    T_FLOAT,
    T_INT,
    T_STR,
    VALUE_DEFAULT,
    check_typed,
    merged,
    parse_float,
    parse_int,
)

__all__ = [
    "DEFAULT", "check_diskparams", "check_disk_state", "check_hv_state", "check_ipolicy", "check_ndparams",
    "merged", "merged_disk_state", "merged_ipolicy", "merged_nested",
]

#: node parameters and their types (Ganeti's names)
ND_TYPES: dict[str, str] = {
    "oob_program": T_STR,
    "spindle_count": T_INT,
    "exclusive_storage": T_BOOL,
    "ovs": T_BOOL,
    "ovs_name": T_STR,
    "ovs_link": T_STR,
    "ssh_port": T_INT,
    "cpu_speed": T_FLOAT,
}
#: the keys of an instance spec (C{min}, C{max} of C{minmax})
ISPEC_KEYS = ("memory-size", "cpu-count", "disk-count", "disk-size", "nic-count", "spindle-use")
IPOLICY_MINMAX = "minmax"
IPOLICY_STD = "std"
IPOLICY_DTS = "disk-templates"
IPOLICY_RATIOS = ("vcpu-ratio", "spindle-ratio", "memory-ratio")
#: static hypervisor state keys (all integers)
HV_STATE_KEYS = ("mem_total", "mem_node", "mem_hv", "cpu_total", "cpu_node")
#: static disk state keys (all integers) and the storage types that have one
DISK_STATE_KEYS = ("disk_total", "disk_reserved", "disk_overhead")
STORAGE_TYPES = ("lvm-pv", "lvm-vg", "file", "sharedfile", "diskless", "ext", "rbd", "gluster")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def _is_default(value: Any) -> bool:
    return bool(value == VALUE_DEFAULT or value == [VALUE_DEFAULT])


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid("%s must be a dict, not %r" % (what, value))
    return value


# --- node and disk parameters -------------------------------------------------------------


def check_ndparams(params: Any) -> dict[str, Any]:
    """Node parameters, typed (L{ND_TYPES})."""
    out = check_typed(_dict(params, "Node parameters"), ND_TYPES, "node parameter")
    for key in ("ssh_port", "spindle_count"):
        value = out.get(key)
        if isinstance(value, int) and value < (1 if key == "ssh_port" else 0):
            raise _invalid("Invalid node parameter '%s': %s" % (key, value))
    return out


_DRBD_DISK_PARAMS: dict[str, str] = {
    **{key: T_INT for key in ("c-delay-target", "c-fill-target", "c-max-rate", "c-min-rate", "c-plan-ahead",
                              "data-stripes", "meta-stripes", "resync-rate")},
    **{key: T_STR for key in ("disk-barriers", "disk-custom", "metavg", "net-custom", "protocol")},
    "dynamic-resync": T_BOOL,
    "meta-barriers": T_BOOL,
}
#: the disk parameters of each disk template and their types (Ganeti's)
DISK_PARAM_TYPES: dict[str, dict[str, str]] = {
    "diskless": {}, "file": {}, "sharedfile": {}, "blockdev": {},
    "plain": {"stripes": T_INT},
    "drbd": _DRBD_DISK_PARAMS,
    "rbd": {"access": T_STR, "pool": T_STR},
    "ext": {"access": T_STR},
    "gluster": {"access": T_STR, "host": T_STR, "port": T_INT, "volume": T_STR},
}


def check_diskparams(params: Any) -> dict[str, dict[str, Any]]:
    """C{{template: {key: value}}}: known templates, each key one its
    template has (L{DISK_PARAM_TYPES}), typed."""
    out: dict[str, dict[str, Any]] = {}
    for template, values in _dict(params, "Disk parameters").items():
        if template not in opcodes.DISK_TEMPLATES:
            raise _invalid("Invalid disk template '%s' in the disk parameters (known: %s)"
                           % (template, ", ".join(opcodes.DISK_TEMPLATES)))
        types = DISK_PARAM_TYPES.get(template, {})
        values = {key: VALUE_DEFAULT if _is_default(value) else value
                  for key, value in _dict(values, "Disk parameters of %s" % template).items()}
        out[template] = check_typed(values, types, "disk parameter", owner=" for disk template '%s'" % template)
    return out


def merged_nested(current: Mapping[str, Any], changes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """C{current} (a dict of dicts) with each inner dict of C{changes} merged in."""
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in current.items()}
    for key, inner in changes.items():
        base = out.get(key)
        out[key] = merged(base if isinstance(base, dict) else {}, inner)
    return out


# --- instance policy ---------------------------------------------------------------------------


def _check_spec(spec: Any, what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in _dict(spec, what).items():
        if key not in ISPEC_KEYS:
            raise _invalid("Invalid key '%s' in %s (known: %s)" % (key, what, ", ".join(ISPEC_KEYS)))
        number = parse_int(value, "%s '%s'" % (what, key))
        if number < 0:
            raise _invalid("Invalid %s '%s': %s" % (what, key, number))
        out[key] = number
    return out


def _check_minmax(value: Any) -> list[dict[str, dict[str, int]]]:
    if not isinstance(value, list) or not value:
        raise _invalid("Invalid instance policy 'minmax' %r: a non-empty list of {\"min\": ..., \"max\": ...}"
                       % (value,))
    out = []
    for index, pair in enumerate(value):
        pair = _dict(pair, "minmax entry %d" % index)
        if set(pair) != {"min", "max"}:
            raise _invalid("Invalid minmax entry %d: it needs exactly the keys 'min' and 'max', not %s"
                           % (index, ", ".join(sorted(map(str, pair))) or "none"))
        low = _check_spec(pair["min"], "minimum instance spec %d" % index)
        high = _check_spec(pair["max"], "maximum instance spec %d" % index)
        if set(low) != set(high):
            raise _invalid("Minmax entry %d: the minimum and maximum specs must have the same keys" % index)
        for key in low:
            if low[key] > high[key]:
                raise _invalid("Minmax entry %d: minimum %s %d is above the maximum %d"
                               % (index, key, low[key], high[key]))
        out.append({"min": low, "max": high})
    return out


def check_ipolicy(policy: Any) -> dict[str, Any]:
    """A group's instance policy changes, typed (C{std} is refused)."""
    out: dict[str, Any] = {}
    for key, value in _dict(policy, "Instance policy").items():
        if key == IPOLICY_STD:
            raise _invalid("The standard instance spec ('%s') cannot appear in a group's instance policy" % key)
        if key not in (IPOLICY_MINMAX, IPOLICY_DTS) + IPOLICY_RATIOS:
            raise _invalid("Invalid instance policy key '%s' (known: %s)"
                           % (key, ", ".join((IPOLICY_MINMAX, IPOLICY_DTS) + IPOLICY_RATIOS)))
        if _is_default(value) or value is None:
            out[key] = DEFAULT
        elif key in IPOLICY_RATIOS:
            ratio = parse_float(value, "instance policy '%s'" % key)
            if not ratio > 0:
                raise _invalid("Invalid instance policy '%s': %s (must be positive)" % (key, value))
            out[key] = ratio
        elif key == IPOLICY_DTS:
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise _invalid("Invalid instance policy '%s' %r: a list of disk templates" % (key, value))
            unknown = [t for t in value if t not in opcodes.DISK_TEMPLATES]
            if unknown:
                raise _invalid("Invalid disk template(s) in the instance policy: %s" % ", ".join(unknown))
            out[key] = list(dict.fromkeys(value))
        else:
            out[key] = _check_minmax(value)
    return out


def merged_ipolicy(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """The group's own instance policy after C{changes}."""
    return merged(current, changes)


# --- static state -------------------------------------------------------------------------------


def _check_state(values: Any, keys: tuple[str, ...], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in _dict(values, what).items():
        if key not in keys:
            raise _invalid("Invalid key '%s' in %s (known: %s)" % (key, what, ", ".join(keys)))
        out[key] = DEFAULT if _is_default(value) else parse_int(value, "%s '%s'" % (what, key))
    return out


def check_hv_state(state: Any) -> dict[str, dict[str, Any]]:
    """C{{hypervisor: {key: int}}}."""
    out = {}
    for hypervisor, values in _dict(state, "Hypervisor state").items():
        if hypervisor not in opcodes.HYPERVISORS:
            raise _invalid("Invalid hypervisor '%s' in the hypervisor state (known: %s)"
                           % (hypervisor, ", ".join(opcodes.HYPERVISORS)))
        out[hypervisor] = _check_state(values, HV_STATE_KEYS, "hypervisor state of %s" % hypervisor)
    return out


def check_disk_state(state: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """C{{storage type: {storage unit name: {key: int}}}}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, units in _dict(state, "Disk state").items():
        if kind not in STORAGE_TYPES:
            raise _invalid("Invalid storage type '%s' in the disk state (known: %s)"
                           % (kind, ", ".join(STORAGE_TYPES)))
        out[kind] = {name: _check_state(values, DISK_STATE_KEYS, "disk state of %s/%s" % (kind, name))
                     for name, values in _dict(units, "Disk state of %s" % kind).items()}
    return out


def merged_disk_state(current: Mapping[str, Any], changes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """C{current} disk state with C{changes} merged in, unit by unit."""
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in current.items()}
    for kind, units in changes.items():
        base = out.get(kind)
        out[kind] = merged_nested(base if isinstance(base, dict) else {}, units)
    return out
