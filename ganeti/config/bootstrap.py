"""A new cluster's first config.data, and synthetic configs of any size.

C{initial_config} is what C{gnt-cluster init} writes: one node group, the
master node, Ganeti's default cluster parameters.  C{grow} adds nodes and
instances to a config, for tests and benchmarks that need 10,000 instances.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

import attrs

from ganeti import CONFIG_VERSION
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup, new_uuid, now

DEFAULT_BEPARAMS = {
    "minmem": 128,
    "maxmem": 128,
    "vcpus": 1,
    "auto_balance": True,
    "always_failover": False,
    "spindle_use": 1,
}
DEFAULT_NICPARAMS = {"mode": "bridged", "link": "br0", "vlan": ""}
DEFAULT_NDPARAMS = {
    "oob_program": "",
    "spindle_count": 1,
    "exclusive_storage": False,
    "ovs": False,
    "ovs_name": "switch1",
    "ovs_link": "",
    "ssh_port": 22,
    "cpu_speed": 1,
}
_SPEC_MIN = {"memory-size": 128, "disk-size": 1024, "disk-count": 1, "cpu-count": 1, "nic-count": 1, "spindle-use": 1}
_SPEC_MAX = {
    "memory-size": 32768,
    "disk-size": 1048576,
    "disk-count": 16,
    "cpu-count": 8,
    "nic-count": 8,
    "spindle-use": 12,
}
DEFAULT_HVPARAMS: dict[str, dict[str, Any]] = {
    "fake": {"migration_mode": "live"},
    "kvm": {
        "acpi": True,
        "boot_order": "disk",
        "disk_type": "paravirtual",
        "kernel_path": "",
        "kvm_path": "/usr/bin/qemu-system-x86_64",
        "migration_bandwidth": 32,
        "migration_downtime": 30,
        "migration_mode": "live",
        "migration_port": 8102,
        "nic_type": "paravirtual",
        "serial_console": True,
        "serial_speed": 38400,
        "vnc_bind_address": "",
    },
}

#: Ganeti's data collectors that MonD has here, active from the start.  Ganeti's C{drbd} and C{lv}
#: (and the Xen ones) are left out: this project has no DRBD, LVM nor Xen, so they would be listed
#: active with nothing behind them.
DATA_COLLECTORS = ("cpu-avg-load", "diskstats")


def initial_config(
    cluster_name: str,
    master_name: str,
    master_ip: str,
    *,
    cluster_ip: str | None = None,
    master_netdev: str = "none",
    master_netmask: int = 32,
    enabled_hypervisors: Iterable[str] = ("fake",),
    enabled_disk_templates: Iterable[str] = ("diskless", "file", "sharedfile"),
    file_storage_dir: str = "/srv/ganeti/file-storage",
    shared_file_storage_dir: str = "/srv/ganeti/shared-file-storage",
    candidate_pool_size: int = 10,
    mac_prefix: str = "aa:00:00",
    candidate_cert: str | None = None,
) -> ConfigData:
    """The config of a one-node cluster whose master is C{master_name}."""
    when = now()
    stamp = {"serial_no": 1, "ctime": when, "mtime": when}
    group_uuid, node_uuid = new_uuid(), new_uuid()
    group = NodeGroup(
        name="default",
        uuid=group_uuid,
        alloc_policy="preferred",
        **stamp,  # type: ignore[arg-type]
    )
    node = Node(
        name=master_name,
        uuid=node_uuid,
        primary_ip=master_ip,
        secondary_ip=master_ip,
        master_candidate=True,
        offline=False,
        drained=False,
        group=group_uuid,
        master_capable=True,
        vm_capable=True,
        powered=True,
        **stamp,  # type: ignore[arg-type]
    )
    hypervisors = list(enabled_hypervisors)
    templates = list(enabled_disk_templates)
    cluster = Cluster(
        cluster_name=cluster_name,
        uuid=new_uuid(),
        master_node=node_uuid,
        master_ip=cluster_ip or master_ip,
        master_netdev=master_netdev,
        master_netmask=master_netmask,
        use_external_mip_script=False,
        primary_ip_family=6 if ":" in master_ip else 2,
        mac_prefix=mac_prefix,
        highest_used_port=11000,
        tcpudp_port_pool=[],
        file_storage_dir=file_storage_dir,
        shared_file_storage_dir=shared_file_storage_dir,
        gluster_storage_dir="/var/run/ganeti/gluster",
        enabled_hypervisors=hypervisors,
        hvparams={hv: copy.deepcopy(DEFAULT_HVPARAMS.get(hv, {})) for hv in hypervisors},
        beparams={"default": dict(DEFAULT_BEPARAMS)},
        nicparams={"default": dict(DEFAULT_NICPARAMS)},
        ndparams=dict(DEFAULT_NDPARAMS),
        diskparams={t: {} for t in templates},
        ipolicy={
            "minmax": [{"min": dict(_SPEC_MIN), "max": dict(_SPEC_MAX)}],
            "std": dict(_SPEC_MIN),
            "spindle-ratio": 32,
            "vcpu-ratio": 4,
            "disk-templates": templates,
        },
        candidate_pool_size=candidate_pool_size,
        modify_etc_hosts=False,
        modify_ssh_setup=False,
        maintain_node_health=False,
        uid_pool=[],
        default_iallocator="",
        enabled_disk_templates=templates,
        candidate_certs={node_uuid: candidate_cert} if candidate_cert else {},
        max_running_jobs=20,
        max_tracked_jobs=25,
        install_image="",
        instance_communication_network="",
        zeroing_image="",
        compression_tools=["gzip", "gzip-fast", "gzip-slow"],
        enabled_user_shutdown=False,
        data_collectors={name: {"active": True, "interval": 5000000} for name in DATA_COLLECTORS},
        ssh_key_type="rsa",
        ssh_key_bits=2048,
        prealloc_wipe_disks=False,
        **stamp,  # type: ignore[arg-type]
    )
    return ConfigData(
        version=CONFIG_VERSION,
        cluster=cluster,
        nodes={node_uuid: node},
        nodegroups={group_uuid: group},
        serial_no=1,
        ctime=when,
        mtime=when,
    )


def grow(config: ConfigData, *, nodes: int = 0, instances: int = 0, disks_per_instance: int = 1) -> ConfigData:
    """Add C{nodes} nodes and C{instances} instances (spread over the nodes)."""
    when = now()
    stamp = {"serial_no": 1, "ctime": when, "mtime": when}
    group = next(iter(config.nodegroups))
    new_nodes = dict(config.nodes)
    for index in range(nodes):
        uuid = new_uuid()
        new_nodes[uuid] = Node(
            name="node%d.example.test" % (len(new_nodes) + 1),
            uuid=uuid,
            primary_ip="127.1.%d.%d" % (index // 250, index % 250 + 2),
            secondary_ip="127.1.%d.%d" % (index // 250, index % 250 + 2),
            master_candidate=False,
            offline=False,
            drained=False,
            group=group,
            master_capable=True,
            vm_capable=True,
            powered=True,
            **stamp,  # type: ignore[arg-type]
        )
    node_uuids = list(new_nodes)
    new_instances = dict(config.instances)
    new_disks = dict(config.disks)
    for index in range(instances):
        uuid = new_uuid()
        name = "inst%d.example.test" % (len(new_instances) + 1)
        primary = node_uuids[index % len(node_uuids)]
        disk_uuids = []
        for number in range(disks_per_instance):
            disk = Disk(
                uuid=new_uuid(),
                dev_type="file",
                logical_id=["loop", "/srv/ganeti/file-storage/%s/disk%d" % (name, number)],
                nodes=[primary],
                iv_name="disk/%d" % number,
                size=1024,
                mode="rw",
                **stamp,  # type: ignore[arg-type]
            )
            new_disks[disk.uuid] = disk  # type: ignore[index]
            disk_uuids.append(disk.uuid)
        new_instances[uuid] = Instance(
            name=name,
            uuid=uuid,
            primary_node=primary,
            os="noop",
            hypervisor="fake",
            admin_state="down",
            admin_state_source="admin",
            disk_template="file" if disk_uuids else "diskless",
            disks_active=False,
            nics=[NIC(mac="aa:00:%02x:%02x:%02x:%02x" % ((index >> 24) & 255, (index >> 16) & 255, (index >> 8) & 255, index & 255), uuid=new_uuid())],
            disks=disk_uuids,  # type: ignore[arg-type]
            **stamp,  # type: ignore[arg-type]
        )
    return attrs.evolve(config, nodes=new_nodes, instances=new_instances, disks=new_disks)
