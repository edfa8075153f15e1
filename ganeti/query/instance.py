"""Instance query fields (Ganeti's C{Query.Instance}).

Pure: no Twisted, no I/O.  Live fields read C{ctx.live} (see
L{fields.QueryContext}); without live data for the primary node they
answer C{RS_NODATA} (C{RS_OFFLINE} when that node is offline), and
C{status} falls back to the admin state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from ganeti.objects import Disk, Instance
from ganeti.query import common
from ganeti.query.common import PP_DEFAULT, fill, index, known, ordinal, present
from ganeti.query.fields import (
    NEED_CONSOLE,
    NEED_LIVE_INSTANCES,
    QFF_HOSTNAME,
    QFT_BOOL,
    QFT_NUMBER,
    QFT_OTHER,
    QFT_TEXT,
    QFT_UNIT,
    FieldDef,
    NoData,
    Offline,
    QueryContext,
    Unavail,
    field_table,
)

MAX_DISKS = 16
MAX_NICS = 8
#: space DRBD metadata takes per disk (MiB), for disk_usage
DRBD_META_SIZE = 128

# --- parameter tables (name -> (kind, title or None for "<prefix>/<name>")) -----

BE_PARAMS: dict[str, tuple[str, str | None]] = {
    "always_failover": (QFT_BOOL, None),
    "auto_balance": (QFT_BOOL, "Auto_balance"),
    "maxmem": (QFT_UNIT, "ConfigMaxMem"),
    "minmem": (QFT_UNIT, "ConfigMinMem"),
    "spindle_use": (QFT_NUMBER, None),
    "vcpus": (QFT_NUMBER, "ConfigVCPUs"),
}

_HV_BOOL = (
    "acpi pae serial_console spice_playback_compression spice_use_tls spice_use_vdagent use_bootloader"
    " use_chroot use_guest_agent use_localtime user_shutdown vhost_net viridian vnc_tls vnc_x509_verify vnet_hdr"
)
_HV_INT = (
    "cpu_cap cpu_cores cpu_sockets cpu_threads cpu_weight kvm_pci_reservations migration_bandwidth"
    " migration_downtime migration_port num_ttys serial_speed spice_ip_version startup_timeout virtio_net_queues"
)
_HV_TEXT = (
    "blockdev_prefix boot_order bootloader_args bootloader_path cdrom2_image_path cdrom_disk_type"
    " cdrom_image_path cpu_mask cpu_type cpuid device_model devices disk_aio disk_cache disk_discard disk_type"
    " drop_capabilities extra_cgroups extra_config floppy_image_path init_script initrd_path kernel_args"
    " kernel_path keymap kvm_extra kvm_flag kvm_path machine_version mem_path migration_caps migration_mode"
    " nic_type pci_pass reboot_behavior root_path scsi_controller_type security_domain security_model soundhw"
    " spice_bind spice_image_compression spice_jpeg_wan_compression spice_password_file spice_streaming_video"
    " spice_tls_ciphers spice_zlib_glz_wan_compression usb_devices usb_mouse vga vif_script vif_type"
    " vnc_bind_address vnc_password_file vnc_x509_path xen_cmd"
)
HV_PARAM_KINDS: dict[str, str] = {
    **{name: QFT_BOOL for name in _HV_BOOL.split()},
    **{name: QFT_NUMBER for name in _HV_INT.split()},
    **{name: QFT_OTHER for name in _HV_TEXT.split()},
}
HV_PARAM_TITLES = {
    "acpi": "ACPI",
    "boot_order": "Boot_order",
    "cdrom_image_path": "CDROM_image_path",
    "cpu_type": "cpu_type",
    "disk_type": "Disk_type",
    "initrd_path": "Initrd_path",
    "kernel_path": "Kernel_path",
    "nic_type": "NIC_type",
    "pae": "PAE",
    "pci_pass": "pci_pass",
    "vnc_bind_address": "VNC_bind_address",
}
#: cluster-wide hypervisor parameters, left out of instance hvparams
HV_GLOBALS = frozenset({"migration_bandwidth", "migration_mode", "migration_port", "xen_cmd"})

# --- instance states -------------------------------------------------------------
ADMIN_UP = "up"
ADMIN_DOWN = "down"
ADMIN_OFFLINE = "offline"

ST_RUNNING = "running"
ST_ADMIN_DOWN = "ADMIN_down"
ST_ADMIN_OFFLINE = "ADMIN_offline"
ST_USER_DOWN = "USER_down"
ST_WRONG_NODE = "ERROR_wrongnode"
ST_ERROR_UP = "ERROR_up"
ST_ERROR_DOWN = "ERROR_down"
ST_NODE_DOWN = "ERROR_nodedown"
ST_NODE_OFFLINE = "ERROR_nodeoffline"

_STATUS_DOC = (
    'Instance status; "running" if instance is set to be running and actually is,'
    ' "ADMIN_down" if instance is stopped and is not running,'
    ' "ERROR_wrongnode" if instance running, but not on its designated primary node,'
    ' "ERROR_up" if instance should be stopped, but is actually running,'
    ' "ERROR_down" if instance should run, but doesn\'t,'
    ' "ERROR_nodedown" if instance\'s primary node is down,'
    ' "ERROR_nodeoffline" if instance\'s primary node is marked offline,'
    ' "ADMIN_offline" if instance is offline and does not use dynamic resources'
)


# --- config helpers ----------------------------------------------------------------


def _pnode(inst: Instance, ctx: QueryContext) -> Any:
    node = ctx.config.nodes.get(inst.primary_node or "")
    if node is None:
        raise NoData()
    return node


def _pgroup(inst: Instance, ctx: QueryContext) -> Any:
    group = common.node_group(ctx.config, _pnode(inst, ctx))
    if group is None:
        raise NoData()
    return group


def _snodes(inst: Instance, ctx: QueryContext) -> list[Any]:
    _pnode(inst, ctx)
    nodes = ctx.config.nodes
    return [nodes[u] for u in index(ctx).inst_nodes.get(inst.uuid or "", [])[1:] if u in nodes]


def _disks(inst: Instance, ctx: QueryContext) -> list[Disk]:
    disks = index(ctx).inst_disks.get(inst.uuid or "")
    if disks is None:
        raise NoData()
    return disks


def disk_template(inst: Instance, ctx: QueryContext) -> str:
    """C{diskless}, the template all disks share, or C{mixed}."""
    kinds = []
    for disk in _disks(inst, ctx):
        if disk.dev_type and disk.dev_type not in kinds:
            kinds.append(disk.dev_type)
    if not kinds:
        return "diskless"
    return kinds[0] if len(kinds) == 1 else "mixed"


def _disk_usage(inst: Instance, ctx: QueryContext) -> int:
    total = 0
    for disk in _disks(inst, ctx):
        if disk.dev_type in ("diskless", "blockdev"):
            continue
        total += (disk.size or 0) + (DRBD_META_SIZE if disk.dev_type == "drbd" else 0)
    return total


def filled_beparams(inst: Instance, ctx: QueryContext) -> dict[str, Any]:
    default = ctx.config.cluster.beparams.get(PP_DEFAULT)
    if default is None:
        raise NoData()
    return fill(default, inst.beparams)


def filled_hvparams(inst: Instance, ctx: QueryContext) -> dict[str, Any]:
    """Cluster, then per-OS, then instance hypervisor parameters, globals left out."""
    cluster = ctx.config.cluster
    hv = inst.hypervisor or ""
    os_hvp = (cluster.os_hvp.get(inst.os or "") or {}).get(hv)
    params = fill(fill(cluster.hvparams.get(hv), os_hvp), inst.hvparams)
    for name in HV_GLOBALS:
        params.pop(name, None)
    return params


def _filled_osparams(inst: Instance, ctx: QueryContext) -> dict[str, Any]:
    base = (inst.os or "").split("+", 1)[0]
    return fill(ctx.config.cluster.osparams.get(base), inst.osparams)


def _nic_params(inst: Instance, ctx: QueryContext) -> list[dict[str, Any]]:
    """The filled parameters of each NIC, computed once per instance and query (do not modify)."""
    per_query = ctx.memo("nic-params", _new_dict)
    found = per_query.get(id(inst))
    if found is None:
        default = ctx.config.cluster.nicparams.get(PP_DEFAULT) or {}
        found = per_query[id(inst)] = [fill(default, nic.nicparams) for nic in inst.nics]
    return found


def _new_dict(ctx: QueryContext) -> dict[Any, Any]:
    return {}


def _bridge(params: Mapping[str, Any]) -> Any:
    return params.get("link") if params.get("mode") == "bridged" else None


def _vlan(params: Mapping[str, Any]) -> Any:
    return params.get("vlan") if params.get("mode") == "openvswitch" else None


def _network_name(ctx: QueryContext, uuid: Any) -> Any:
    net = ctx.config.networks.get(uuid) if isinstance(uuid, str) else None
    return net.name if net is not None else None


# --- live data ---------------------------------------------------------------------


def _is_mapping(value: Any) -> bool:
    # a dict first: isinstance() against the Mapping ABC costs ten times more, per instance
    return type(value) is dict or isinstance(value, Mapping)


def _live_reports(ctx: QueryContext) -> dict[Any, list[tuple[Any, Mapping[str, Any]]]]:
    """Instance name -> C{[(node name, info), ...]}: where the nodes in C{ctx.live} see it running."""
    reports: dict[Any, list[tuple[Any, Mapping[str, Any]]]] = {}
    for node_name, data in ctx.live.items():
        running = data.get("instances") if _is_mapping(data) else None
        if running is None or not _is_mapping(running):
            continue
        for name, info in running.items():
            if _is_mapping(info):
                found = reports.get(name)
                if found is None:
                    reports[name] = [(node_name, info)]
                else:
                    found.append((node_name, info))
    return reports


def _live_info(inst: Instance, ctx: QueryContext) -> tuple[Mapping[str, Any] | None, bool]:
    """C{(info, on_primary)} of a live instance, C{(None, False)} if it runs nowhere.

    The report of the primary node wins over any other node's.  C{info} is
    the report itself: do not modify it.  Found once per instance and query
    (a listing asks it for each of its live fields: status, memory, vCPUs).

    @raise Offline: the primary node is offline.
    @raise NoData: there is no live data from the primary node.
    """
    known = ctx.memo("live-info", _new_memo)
    key = id(inst)
    found: Any = known.get(key)
    if found is None:
        try:
            found = _find_live_info(inst, ctx)
        except (Offline, NoData) as e:
            found = type(e)
        known[key] = found
    if type(found) is tuple:
        return found
    raise found()


def _new_memo(_ctx: QueryContext) -> dict[int, Any]:
    return {}


def _find_live_info(inst: Instance, ctx: QueryContext) -> tuple[Mapping[str, Any] | None, bool]:
    pnode = _pnode(inst, ctx)
    if pnode.offline:
        raise Offline()
    if not _is_mapping(ctx.live.get(pnode.name or "")):
        raise NoData()
    found = ctx.memo("live-reports", _live_reports).get(inst.name)
    if not found:
        return None, False
    for node_name, info in found:
        if node_name == pnode.name:
            return info, True
    return found[0][1], False


def _allow_user_down(inst: Instance, ctx: QueryContext) -> bool:
    if not ctx.config.cluster.enabled_user_shutdown:
        return False
    return inst.hypervisor != "kvm" or filled_hvparams(inst, ctx).get("user_shutdown") is True


def _dead_status(inst: Instance, ctx: QueryContext) -> str:
    if inst.admin_state == ADMIN_UP:
        return ST_ERROR_DOWN
    if inst.admin_state == ADMIN_OFFLINE:
        return ST_ADMIN_OFFLINE
    if inst.admin_state_source == "user" and ctx.config.cluster.enabled_user_shutdown:
        return ST_USER_DOWN
    return ST_ADMIN_DOWN


def instance_status(inst: Instance, ctx: QueryContext) -> str:
    """Ganeti's instance status (C{running}, C{ADMIN_down}, C{ERROR_up}, ...).

    @raise NoData: an instance that should run, without live data.
    """
    try:
        info, on_primary = _live_info(inst, ctx)
    except Offline:
        return ST_NODE_OFFLINE
    except NoData:
        if inst.admin_state == ADMIN_UP:
            raise
        return _dead_status(inst, ctx)
    if info is None:
        return _dead_status(inst, ctx)
    if not on_primary:
        return ST_WRONG_NODE
    if info.get("state", "running") == "running":
        return ST_RUNNING if inst.admin_state == ADMIN_UP else ST_ERROR_UP
    if inst.admin_state == ADMIN_UP:
        return ST_USER_DOWN if _allow_user_down(inst, ctx) else ST_ERROR_DOWN
    return ST_ADMIN_DOWN


def _oper_state(inst: Instance, ctx: QueryContext) -> bool:
    return _live_info(inst, ctx)[0] is not None


def _live_value(key: str) -> Callable[[Instance, QueryContext], Any]:
    def get(inst: Instance, ctx: QueryContext) -> Any:
        info = _live_info(inst, ctx)[0]
        if info is None:
            raise Unavail()
        return known(info.get(key))

    return get


def _console(inst: Instance, ctx: QueryContext) -> Any:
    info = _live_info(inst, ctx)[0]
    return known((info or {}).get("console"))


# --- field builders ------------------------------------------------------------------

_LIVE = frozenset({NEED_LIVE_INSTANCES})
_CONSOLE = frozenset({NEED_LIVE_INSTANCES, NEED_CONSOLE})


def _param_fields() -> list[FieldDef]:
    out = []
    for name, (kind, title) in BE_PARAMS.items():

        def be(inst: Instance, ctx: QueryContext, name: str = name) -> Any:
            params = filled_beparams(inst, ctx)
            if name not in params:
                raise NoData()
            return params[name]

        out.append(common.param_field("be", "backend", name, kind, title, be))
    for name in sorted(set(HV_PARAM_KINDS) - HV_GLOBALS):

        def hv(inst: Instance, ctx: QueryContext, name: str = name) -> Any:
            params = filled_hvparams(inst, ctx)
            if name not in params:
                raise Unavail()
            return params[name]

        out.append(common.param_field("hv", "hypervisor", name, HV_PARAM_KINDS[name], HV_PARAM_TITLES.get(name), hv))
    return out


def _indexed(items: Callable[[Instance, QueryContext], list[Any]], index_: int, value: Callable[..., Any]) -> Any:
    def get(inst: Instance, ctx: QueryContext) -> Any:
        found = items(inst, ctx)
        if index_ >= len(found):
            raise Unavail()
        return present(value(found[index_], ctx))

    return get


def _disk_fields() -> list[FieldDef]:
    out = [
        FieldDef(
            "disk_usage",
            "DiskUsage",
            QFT_UNIT,
            "Total disk space used by instance on each of its nodes; this is not the disk size"
            " visible to the instance, but the usage on the node",
            _disk_usage,
        ),
        FieldDef("disk.count", "Disks", QFT_NUMBER, "Number of disks", lambda i, c: len(i.disks)),
        FieldDef("disk.sizes", "Disk_sizes", QFT_OTHER, "List of disk sizes", lambda i, c: [d.size for d in _disks(i, c)]),
        FieldDef(
            "disk.spindles",
            "Disk_spindles",
            QFT_OTHER,
            "List of disk spindles",
            lambda i, c: [d.spindles for d in _disks(i, c)],
        ),
        FieldDef("disk.names", "Disk_names", QFT_OTHER, "List of disk names", lambda i, c: [d.name for d in _disks(i, c)]),
        FieldDef("disk.uuids", "Disk_UUIDs", QFT_OTHER, "List of disk UUIDs", lambda i, c: [d.uuid for d in _disks(i, c)]),
        FieldDef("disk_template", "Disk_template", QFT_TEXT, "Instance disk template", disk_template),
    ]
    for n in range(MAX_DISKS):
        nth = ordinal(n + 1)
        out += [
            FieldDef(
                "disk.size/%d" % n, "Disk/%d" % n, QFT_UNIT, "Disk size of %s disk" % nth,
                _indexed(_disks, n, lambda d, c: d.size),
            ),
            FieldDef(
                "disk.spindles/%d" % n, "DiskSpindles/%d" % n, QFT_NUMBER, "Spindles of %s disk" % nth,
                _indexed(_disks, n, lambda d, c: d.spindles),
            ),
            FieldDef(
                "disk.name/%d" % n, "DiskName/%d" % n, QFT_TEXT, "Name of %s disk" % nth,
                _indexed(_disks, n, lambda d, c: d.name),
            ),
            FieldDef(
                "disk.uuid/%d" % n, "DiskUUID/%d" % n, QFT_TEXT, "UUID of %s disk" % nth,
                _indexed(_disks, n, lambda d, c: d.uuid),
            ),
        ]
    return out


_NIC_LIST = "List containing each network interface's "


def _nics(inst: Instance, ctx: QueryContext) -> list[Any]:
    return list(inst.nics)


def _nic_fields() -> list[FieldDef]:
    out = [
        FieldDef("nic.count", "NICs", QFT_NUMBER, "Number of network interfaces", lambda i, c: len(i.nics)),
        FieldDef("nic.macs", "NIC_MACs", QFT_OTHER, _NIC_LIST + "MAC address", lambda i, c: [n.mac for n in i.nics]),
        FieldDef("nic.ips", "NIC_IPs", QFT_OTHER, _NIC_LIST + "IP address", lambda i, c: [n.ip for n in i.nics]),
        FieldDef("nic.names", "NIC_Names", QFT_OTHER, _NIC_LIST + "name", lambda i, c: [n.name for n in i.nics]),
        FieldDef("nic.uuids", "NIC_UUIDs", QFT_OTHER, _NIC_LIST + "UUID", lambda i, c: [n.uuid for n in i.nics]),
        FieldDef(
            "nic.modes", "NIC_modes", QFT_OTHER, _NIC_LIST + "mode",
            lambda i, c: [p.get("mode") for p in _nic_params(i, c)],
        ),
        FieldDef(
            "nic.vlans", "NIC_VLANs", QFT_OTHER, _NIC_LIST + "VLAN",
            lambda i, c: [_vlan(p) for p in _nic_params(i, c)],
        ),
        FieldDef(
            "nic.bridges", "NIC_bridges", QFT_OTHER, _NIC_LIST + "bridge",
            lambda i, c: [_bridge(p) for p in _nic_params(i, c)],
        ),
        FieldDef(
            "nic.links", "NIC_links", QFT_OTHER, _NIC_LIST + "link",
            lambda i, c: [p.get("link") for p in _nic_params(i, c)],
        ),
        FieldDef(
            "nic.networks", "NIC_networks", QFT_OTHER, "List containing each interface's network",
            lambda i, c: [n.network for n in i.nics],
        ),
        FieldDef(
            "nic.networks.names", "NIC_networks_names", QFT_OTHER,
            "List containing the name of each interface's network",
            lambda i, c: [_network_name(c, n.network) for n in i.nics],
        ),
    ]
    for n in range(MAX_NICS):
        suffix = " of %s network interface" % ordinal(n + 1)
        out += [
            FieldDef("nic.ip/%d" % n, "NicIP/%d" % n, QFT_TEXT, "IP address" + suffix, _indexed(_nics, n, lambda x, c: x.ip)),
            FieldDef(
                "nic.uuid/%d" % n, "NicUUID/%d" % n, QFT_TEXT, "UUID address" + suffix,
                _indexed(_nics, n, lambda x, c: x.uuid),
            ),
            FieldDef(
                "nic.mac/%d" % n, "NicMAC/%d" % n, QFT_TEXT, "MAC address" + suffix,
                _indexed(_nics, n, lambda x, c: x.mac),
            ),
            FieldDef(
                "nic.name/%d" % n, "NicName/%d" % n, QFT_TEXT, "Name address" + suffix,
                _indexed(_nics, n, lambda x, c: x.name),
            ),
            FieldDef(
                "nic.network/%d" % n, "NicNetwork/%d" % n, QFT_TEXT, "Network" + suffix,
                _indexed(_nics, n, lambda x, c: x.network),
            ),
            FieldDef(
                "nic.mode/%d" % n, "NicMode/%d" % n, QFT_TEXT, "Mode" + suffix,
                _indexed(_nic_params, n, lambda p, c: p.get("mode")),
            ),
            FieldDef(
                "nic.link/%d" % n, "NicLink/%d" % n, QFT_TEXT, "Link" + suffix,
                _indexed(_nic_params, n, lambda p, c: p.get("link")),
            ),
            FieldDef("nic.vlan/%d" % n, "NicVLAN/%d" % n, QFT_TEXT, "VLAN" + suffix, _indexed(_nic_params, n, lambda p, c: _vlan(p))),
            FieldDef(
                "nic.network.name/%d" % n, "NicNetworkName/%d" % n, QFT_TEXT, "Network name" + suffix,
                _indexed(_nics, n, lambda x, c: _network_name(c, x.network)),
            ),
            FieldDef(
                "nic.bridge/%d" % n, "NicBridge/%d" % n, QFT_TEXT, "Bridge" + suffix,
                _indexed(_nic_params, n, lambda p, c: _bridge(p)),
            ),
        ]
    return out


def _instance_fields() -> list[FieldDef]:
    out = [
        FieldDef("admin_state", "InstanceState", QFT_TEXT, "Desired state of instance", lambda i, c: known(i.admin_state)),
        FieldDef(
            "admin_state_source", "InstanceStateSource", QFT_TEXT,
            "Who last changed the desired state of the instance",
            lambda i, c: known(i.admin_state_source),
        ),
        FieldDef(
            "admin_up", "Autostart", QFT_BOOL, "Desired state of instance",
            lambda i, c: known(i.admin_state) == ADMIN_UP,
        ),
        FieldDef("disks_active", "DisksActive", QFT_BOOL, "Desired state of instance disks", lambda i, c: known(i.disks_active)),
        FieldDef("name", "Instance", QFT_TEXT, "Instance name", lambda i, c: known(i.name), QFF_HOSTNAME),
        FieldDef("hypervisor", "Hypervisor", QFT_TEXT, "Hypervisor name", lambda i, c: known(i.hypervisor)),
        FieldDef(
            "network_port", "Network_port", QFT_OTHER,
            "Instance network port if available (e.g. for VNC console)",
            lambda i, c: present(i.network_port),
        ),
        FieldDef("os", "OS", QFT_TEXT, "Operating system", lambda i, c: known(i.os)),
        FieldDef("pnode", "Primary_node", QFT_TEXT, "Primary node", lambda i, c: _pnode(i, c).name, QFF_HOSTNAME),
        FieldDef("pnode.group", "PrimaryNodeGroup", QFT_TEXT, "Primary node's group", lambda i, c: _pgroup(i, c).name),
        FieldDef(
            "pnode.group.uuid", "PrimaryNodeGroupUUID", QFT_TEXT, "Primary node's group UUID",
            lambda i, c: _pgroup(i, c).uuid,
        ),
        FieldDef(
            "snodes", "Secondary_Nodes", QFT_OTHER, "Secondary nodes; usually this will just be one node",
            lambda i, c: [n.name for n in _snodes(i, c)],
        ),
        FieldDef(
            "snodes.group", "SecondaryNodesGroups", QFT_OTHER, "Node groups of secondary nodes",
            lambda i, c: [g.name for g in _sgroups(i, c)],
        ),
        FieldDef(
            "snodes.group.uuid", "SecondaryNodesGroupsUUID", QFT_OTHER, "Node group UUIDs of secondary nodes",
            lambda i, c: [g.uuid for g in _sgroups(i, c)],
        ),
        FieldDef("hvparams", "HypervisorParameters", QFT_OTHER, "Hypervisor parameters (merged)", filled_hvparams),
        FieldDef("beparams", "BackendParameters", QFT_OTHER, "Backend parameters (merged)", filled_beparams),
        FieldDef("osparams", "OpSysParameters", QFT_OTHER, "Operating system parameters (merged)", _filled_osparams),
        FieldDef(
            "custom_hvparams", "CustomHypervisorParameters", QFT_OTHER, "Custom hypervisor parameters",
            lambda i, c: dict(i.hvparams),
        ),
        FieldDef(
            "custom_beparams", "CustomBackendParameters", QFT_OTHER, "Custom backend parameters",
            lambda i, c: dict(i.beparams),
        ),
        FieldDef(
            "custom_osparams", "CustomOpSysParameters", QFT_OTHER, "Custom operating system parameters",
            lambda i, c: dict(i.osparams),
        ),
        FieldDef(
            "custom_nicparams", "CustomNicParameters", QFT_OTHER, "Custom network interface parameters",
            lambda i, c: [dict(n.nicparams) for n in i.nics],
        ),
    ]
    out += _param_fields() + _disk_fields() + _nic_fields()
    out += [
        FieldDef("status", "Status", QFT_TEXT, _STATUS_DOC, instance_status, needs=_LIVE),
        FieldDef("oper_state", "Running", QFT_BOOL, "Actual state of instance", _oper_state, needs=_LIVE),
        FieldDef("console", "Console", QFT_OTHER, "Instance console information", _console, needs=_CONSOLE),
        FieldDef(
            "oper_ram", "Memory", QFT_UNIT, "Actual memory usage as seen by hypervisor", _live_value("memory"),
            needs=_LIVE,
        ),
        FieldDef(
            "oper_vcpus", "VCPUs", QFT_NUMBER, "Actual number of VCPUs as seen by hypervisor", _live_value("vcpus"),
            needs=_LIVE,
        ),
        FieldDef(
            "forthcoming", "Forthcoming", QFT_BOOL, "Whether the Instance is forthcoming",
            lambda i, c: bool(i.forthcoming),
        ),
    ]
    out += common.common_fields("Instance")
    return out


def _sgroups(inst: Instance, ctx: QueryContext) -> list[Any]:
    groups = []
    for node in _snodes(inst, ctx):
        group = common.node_group(ctx.config, node)
        if group is not None:
            groups.append(group)
    return groups


#: Ganeti's instance field aliases
ALIASES = [
    ("vcpus", "be/vcpus"),
    ("be/memory", "be/maxmem"),
    ("sda_size", "disk.size/0"),
    ("sdb_size", "disk.size/1"),
    ("ip", "nic.ip/0"),
    ("mac", "nic.mac/0"),
    ("bridge", "nic.bridge/0"),
    ("nic_mode", "nic.mode/0"),
    ("nic_link", "nic.link/0"),
    ("nic_network", "nic.network/0"),
]

INSTANCE_FIELDS = field_table(_instance_fields(), ALIASES)


def instances(ctx: QueryContext) -> list[Instance]:
    return common.by_name(ctx.config.instances.values())


def find_instance(ctx: QueryContext, name: Any) -> Instance | None:
    return common.find_in(ctx, "instances", ctx.config.instances, name)
