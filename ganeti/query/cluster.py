"""LUXI C{QueryClusterInfo} and C{QueryConfigValues} (spec/luxi.md section 3).

Pure: no Twisted, no I/O (the architecture comes from C{platform}).
"""

from __future__ import annotations

import platform
import struct
from typing import Any

from ganeti import CONFIG_VERSION, GANETI_RELEASE
from ganeti.objects import ConfigData

#: Ganeti's PROTOCOL_VERSION: the internode protocol follows the config version
PROTOCOL_VERSION = CONFIG_VERSION
#: the highest OS API version Ganeti 3.0 speaks (max of OS_API_VERSIONS)
OS_API_VERSION = 20
#: import/export file format version
EXPORT_VERSION = 0
#: what C{gnt-cluster version} shows as "VCS version"
VCS_VERSION = "(ganeti) version v%s" % GANETI_RELEASE

#: QueryClusterInfo defaults for keys an older config may lack
MAX_RUNNING_JOBS = 20
MAX_TRACKED_JOBS = 25

_IP_VERSION = {2: 4, 10: 6}


def architecture() -> list[str]:
    """Ganeti's C{[word size, machine]}, e.g. C{["64bits", "x86_64"]}."""
    return ["%dbits" % (struct.calcsize("P") * 8), platform.machine()]


def cluster_info(config: ConfigData) -> dict[str, Any]:
    """The dict LUXI C{QueryClusterInfo} returns.

    Values come from the cluster record; keys it lacks get Ganeti's
    defaults.  C{master} is the master node's name (C{None} if the config
    does not name a known node).
    """
    cl = config.cluster
    collectors = cl.data_collectors or {}
    return {
        "software_version": GANETI_RELEASE,
        "protocol_version": PROTOCOL_VERSION,
        "config_version": CONFIG_VERSION,
        "os_api_version": OS_API_VERSION,
        "export_version": EXPORT_VERSION,
        "vcs_version": VCS_VERSION,
        "architecture": architecture(),
        "name": cl.cluster_name,
        "master": config.master_node_name(),
        "default_hypervisor": cl.enabled_hypervisors[0] if cl.enabled_hypervisors else cl.default_hypervisor,
        "enabled_hypervisors": list(cl.enabled_hypervisors),
        "hvparams": cl.hvparams,
        "os_hvp": cl.os_hvp,
        "beparams": cl.beparams,
        "osparams": cl.osparams,
        "ipolicy": cl.ipolicy,
        "nicparams": cl.nicparams,
        "ndparams": cl.ndparams,
        "diskparams": cl.diskparams,
        "candidate_pool_size": cl.candidate_pool_size,
        "max_running_jobs": _or(cl.max_running_jobs, MAX_RUNNING_JOBS),
        "max_tracked_jobs": _or(cl.max_tracked_jobs, MAX_TRACKED_JOBS),
        "mac_prefix": cl.mac_prefix,
        "master_netdev": cl.master_netdev,
        "master_netmask": cl.master_netmask,
        "use_external_mip_script": bool(cl.use_external_mip_script),
        "volume_group_name": cl.volume_group_name,
        "drbd_usermode_helper": cl.drbd_usermode_helper,
        "file_storage_dir": _or(cl.file_storage_dir, ""),
        "shared_file_storage_dir": _or(cl.shared_file_storage_dir, ""),
        "gluster_storage_dir": _or(cl.gluster_storage_dir, ""),
        "maintain_node_health": bool(cl.maintain_node_health),
        "ctime": cl.ctime,
        "mtime": cl.mtime,
        "uuid": cl.uuid,
        "tags": list(cl.tags),
        "uid_pool": cl.uid_pool,
        "default_iallocator": _or(cl.default_iallocator, ""),
        "default_iallocator_params": cl.default_iallocator_params,
        "reserved_lvs": cl.reserved_lvs,
        "primary_ip_version": _IP_VERSION.get(cl.primary_ip_family or 2, 4),
        "prealloc_wipe_disks": bool(cl.prealloc_wipe_disks),
        "hidden_os": cl.hidden_os,
        "blacklisted_os": cl.blacklisted_os,
        "enabled_disk_templates": cl.enabled_disk_templates,
        "install_image": _or(cl.install_image, ""),
        "instance_communication_network": _or(cl.instance_communication_network, ""),
        "zeroing_image": _or(cl.zeroing_image, ""),
        "compression_tools": _or(cl.compression_tools, []),
        "enabled_user_shutdown": bool(cl.enabled_user_shutdown),
        "enabled_data_collectors": {name: bool((c or {}).get("active", True)) for name, c in collectors.items()},
        "data_collector_interval": {name: (c or {}).get("interval") for name, c in collectors.items()},
        "modify_ssh_setup": bool(cl.modify_ssh_setup),
        "ssh_key_type": cl.ssh_key_type,
        "ssh_key_bits": cl.ssh_key_bits,
    }


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def config_values(config: ConfigData, names: list[str], drain_flag: bool, watcher_pause: float | None,
                  write_latency: Any = None) -> list[Any]:
    """The list LUXI C{QueryConfigValues(names)} returns; unknown names give C{None}.

    @param watcher_pause: epoch until which the watcher is paused, or
        C{None} (the caller decides whether a pause has expired)
    """
    cl = config.cluster
    known = {
        "cluster_name": lambda: cl.cluster_name,
        "master_node": config.master_node_name,
        "drain_flag": lambda: bool(drain_flag),
        "watcher_pause": lambda: watcher_pause,
        "modify_ssh_setup": lambda: bool(cl.modify_ssh_setup),
        "ssh_key_type": lambda: cl.ssh_key_type,
        "ssh_key_bits": lambda: cl.ssh_key_bits,
        # extensions (Ganeti answers None for them): for RAPI's /metrics
        "config_serial": lambda: config.serial_no,
        "config_write_latency": lambda: write_latency,
    }
    out = []
    for name in names:
        getter = known.get(name) if isinstance(name, str) else None
        out.append(getter() if getter is not None else None)
    return out
