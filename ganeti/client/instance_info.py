"""What C{gnt-instance info} prints of an OP_INSTANCE_QUERY_DATA result.

The opcode answers C{{name: data}} with Ganeti's keys: C{name}, C{uuid},
C{serial_no}, C{ctime}, C{mtime}, C{config_state}, C{run_state} (C{None}
with C{--static}), C{pnode}, C{pnode_group_name}/C{_uuid}, C{snodes} (and
their groups), C{os}, C{os_instance}/C{os_actual}, C{hypervisor},
C{hv_instance}/C{hv_actual}, C{be_instance}/C{be_actual}, C{network_port},
C{nics}, C{disk_template}, C{disks}, C{tags}; and ours, C{accel}.  A parameter the instance
does not set itself shows as C{default (<value>)}.  NICs may come as
Ganeti's tuples C{(name, uuid, ip, mac, mode, link, vlan, network,
netinfo)} or as dicts; disks as Ganeti's disk status dicts.  Keys that are
missing are left out of the output, so partial answers still print.

Standard library only; the layout is L{ganeti.client.format_generic_info}'s.
"""

from __future__ import annotations

from typing import Any, Mapping

from ganeti.client.formatting import format_time, format_unit, to_roman

#: the first port of VNC displays (display N listens on 5900 + N)
VNC_BASE_PORT = 5900
_ANY_ADDRESSES = ("0.0.0.0", "::")
_ACCEL_TEXT = {"kvm": "kvm (hardware virtualization)", "tcg": "tcg (software emulation)"}
_NIC_TUPLE = ("name", "uuid", "ip", "mac", "mode", "link", "vlan", "network", "netinfo")


def params_info(own: Any, actual: Any, roman: bool = False) -> dict[str, Any]:
    """Each parameter of C{actual}: the instance's own value, else C{default (value)}
    (integers in Roman numerals with C{roman})."""
    own = own if isinstance(own, Mapping) else {}
    actual = actual if isinstance(actual, Mapping) else {}
    out: dict[str, Any] = {}
    for key in sorted(set(actual) | set(own)):
        out[key] = to_roman(own[key], roman) if key in own else "default (%s)" % (to_roman(actual[key], roman),)
    return out


def _state(data: Mapping[str, Any]) -> str:
    text = "configured to be %s" % data.get("config_state")
    if data.get("run_state"):
        text += ", actual state is %s" % data["run_state"]
    return text


def _nodes(data: Mapping[str, Any]) -> list[Any]:
    primary: list[Any] = [("primary", data.get("pnode"))]
    if data.get("pnode_group_name") is not None or data.get("pnode_group_uuid") is not None:
        primary.append(("group", "%s (UUID %s)" % (data.get("pnode_group_name"), data.get("pnode_group_uuid"))))
    snodes = list(data.get("snodes") or [])
    groups = list(data.get("snodes_group_names") or [])
    uuids = list(data.get("snodes_group_uuids") or [])
    described = []
    for index, name in enumerate(snodes):
        if index < len(groups):
            uuid = uuids[index] if index < len(uuids) else None
            described.append("%s (group %s, group UUID %s)" % (name, groups[index], uuid))
        else:
            described.append(str(name))
    return [primary, [("secondaries", ", ".join(described))]]


def _vnc_console(data: Mapping[str, Any]) -> str | None:
    """Where the instance's VNC console listens, if its hypervisor has one."""
    hv_actual = data.get("hv_actual") if isinstance(data.get("hv_actual"), Mapping) else {}
    bind = hv_actual.get("vnc_bind_address") if hv_actual else None
    port = data.get("network_port")
    if not bind or not isinstance(port, int):
        return None
    display = port - VNC_BASE_PORT
    if bind in _ANY_ADDRESSES:
        return "%s:%s (display %s)" % (data.get("pnode"), port, display)
    if bind.startswith("/"):
        return "%s:%s" % (data.get("pnode"), bind)
    return "%s:%s (node %s) (display %s)" % (bind, port, data.get("pnode"), display)


def nic_info(index: int, nic: Any) -> list[Any]:
    if isinstance(nic, (list, tuple)):
        nic = dict(zip(_NIC_TUPLE, nic))
    if not isinstance(nic, Mapping):
        return [("nic/%d" % index, str(nic))]
    netinfo = nic.get("netinfo")
    network = netinfo.get("name") if isinstance(netinfo, Mapping) else nic.get("network_name", nic.get("network"))
    given = nic.get("nicparams")
    nicparams: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    return [
        ("nic/%d" % index, ""),
        ("MAC", str(nic.get("mac"))),
        ("IP", str(nic.get("ip"))),
        ("mode", str(nic.get("mode", nicparams.get("mode")))),
        ("link", str(nic.get("link", nicparams.get("link")))),
        ("vlan", str(nic.get("vlan", nicparams.get("vlan")))),
        ("network", str(network)),
        ("UUID", str(nic.get("uuid"))),
        ("name", str(nic.get("name"))),
    ]


def _device_status(status: Any) -> str:
    """A disk's status on a node: C{(path, major, minor, sync%, eta, degraded, ldisk)}."""
    if isinstance(status, Mapping):
        return ", ".join("%s=%s" % item for item in sorted(status.items()))
    if not isinstance(status, (list, tuple)) or not status:
        return str(status)
    fields = list(status) + [None] * (7 - len(status))
    path, major, minor, sync, eta, degraded, ldisk = fields[:7]
    text = str(path) if path else "(no path)"
    if major is not None and minor is not None:
        text += " (%s:%s)" % (major, minor)
    if isinstance(sync, (int, float)) and not isinstance(sync, bool):
        text += " *RECOVERING* %.2f%%" % sync + (", ETA %ss" % eta if eta is not None else "")
    elif degraded:
        text += " *DEGRADED*"
    elif len(status) > 3:
        text += " in sync"
    if ldisk not in (None, "ok", 1):
        text += ", status %s" % ldisk
    return text


def _logical_id(dev: Mapping[str, Any]) -> list[Any]:
    logical_id = dev.get("logical_id")
    if dev.get("dev_type") in ("file", "sharedfile", "gluster") and isinstance(logical_id, (list, tuple)) \
            and len(logical_id) == 2:
        return [("driver", logical_id[0]), ("path", logical_id[1])]
    if dev.get("dev_type") == "plain" and isinstance(logical_id, (list, tuple)) and len(logical_id) == 2:
        return [("logical_id", "%s/%s" % tuple(logical_id))]
    if isinstance(logical_id, (list, tuple)):
        return [("logical_id", ", ".join(str(part) for part in logical_id))]
    return [("logical_id", str(logical_id))]


def disk_info(index: int, dev: Any, top_level: bool = True) -> list[Any]:
    if not isinstance(dev, Mapping):
        return [("disk/%d" % index, str(dev))]
    if top_level:
        label = dev.get("iv_name") or "disk/%d" % index
    else:
        label = "child %d" % index
    size = dev.get("size")
    nice_size = format_unit(size, "h") if isinstance(size, int) and not isinstance(size, bool) else str(size)
    out: list[Any] = [(label, "%s, size %s" % (dev.get("dev_type"), nice_size))]
    if top_level:
        if dev.get("spindles") is not None:
            out.append(("spindles", dev["spindles"]))
        out.append(("access mode", dev.get("mode")))
    if dev.get("logical_id") is not None:
        out.extend(_logical_id(dev))
    if dev.get("pstatus"):
        out.append(("on primary", _device_status(dev["pstatus"])))
    if dev.get("sstatus"):
        out.append(("on secondary", _device_status(dev["sstatus"])))
    if "name" in dev:
        out.append(("name", dev.get("name")))
    if "uuid" in dev:
        out.append(("UUID", dev.get("uuid")))
    children = dev.get("children") or []
    if children:
        out.append(("child devices", [disk_info(n, child, False) for n, child in enumerate(children)]))
    return out


def instance_info(data: Mapping[str, Any], roman: bool = False) -> list[Any]:
    """The L{format_generic_info} tree of one instance (C{roman}: Ganeti's
    C{--roman}, integers in Roman numerals)."""
    info: list[Any] = [("Instance name", data.get("name"))]
    for key, label in (("uuid", "UUID"), ("serial_no", "Serial number")):
        if key in data:
            info.append((label, str(to_roman(data[key], roman and key == "serial_no"))))
    for key, label in (("ctime", "Creation time"), ("mtime", "Modification time")):
        if key in data:
            info.append((label, format_time(data[key])))
    info.append(("State", _state(data)))
    info.append(("Nodes", _nodes(data)))
    info.append(("Operating system", data.get("os")))
    if "os_actual" in data or "os_instance" in data:
        info.append(("Operating system parameters", params_info(data.get("os_instance"), data.get("os_actual"))))
    if data.get("network_port") is not None:
        info.append(("Allocated network port", str(to_roman(data["network_port"], roman))))
    info.append(("Hypervisor", data.get("hypervisor")))
    if data.get("accel"):
        accel = str(data["accel"])
        info.append(("Acceleration", _ACCEL_TEXT.get(accel, accel)))
    vnc = _vnc_console(data)
    if vnc:
        info.append(("VNC console", vnc))
    info.append(("Hypervisor parameters", params_info(data.get("hv_instance"), data.get("hv_actual"), roman)))
    info.append(("Back-end parameters", params_info(data.get("be_instance"), data.get("be_actual"), roman)))
    info.append(("NICs", [nic_info(n, nic) for n, nic in enumerate(data.get("nics") or [])]))
    info.append(("Disk template", data.get("disk_template")))
    info.append(("Disks", [disk_info(n, dev) for n, dev in enumerate(data.get("disks") or [])]))
    if "tags" in data:
        info.append(("Tags", ", ".join(str(tag) for tag in data.get("tags") or []) or "(none)"))
    return info
