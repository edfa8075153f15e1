"""The instance procedures of node RPC: what the master sends, what noded answers.

This module holds the shapes the instance procedures exchange between the
logical units (master side, which use the encoders below) and noded (node
side, L{ganeti.noded.instances}).

Instance encoding (spec/noderpc.md, C{INST_DICT})
=================================================
L{encode_instance} gives C{Instance.to_dict()} with:
  - C{hvparams}: cluster C{hvparams[hv]}, then C{os_hvp[os][hv]}, then the
    instance's own, then the per-call override;
  - C{beparams}: cluster C{beparams["default"]}, the instance's, the override;
  - C{osparams}: cluster C{osparams[os name without variant]}, then
    C{osparams[os]}, the instance's, the override (private ones likewise
    into C{osparams_private});
  - each NIC's C{nicparams} filled from cluster C{nicparams["default"]};
  - C{secondary_nodes}: C{[]} (no mirrored templates here);
  - C{disks_info}: the instance's disks in order, each C{Disk.to_dict()}.
noded reads it back with L{decode_instance}: an L{Instance} (unknown keys
land in C{extra}) and its L{Disk} records.

Disk paths
==========
A C{file} or C{sharedfile} disk has C{logical_id = [driver, path]}, with
C{path} absolute as the cluster sees it: C{<dir>/<instance name>/disk<N>}
under the cluster's C{file_storage_dir} / C{shared_file_storage_dir} (see
L{disk_path}).  A node under root R keeps it at C{R + path} (the same path
when R is C{/}); noded refuses a path outside its storage directory.  On
one machine the nodes' C{shared-file-storage} directories are one directory
(symlinks), so a sharedfile disk is visible on every node, as on a SAN.

Procedures
==========
The instance procedures (arguments in wire order, types, payloads, time
limits) are declared with every other one in L{ganeti.rpc.procedures}.
Starting an instance that runs already, stopping one that does not run
and removing a disk that is gone succeed; C{instance_reboot} of C{full}
type stops and starts, C{soft}/C{hard} reboot in place; C{accept_instance}
is refused unless the instance's disks exist on the target.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ganeti.objects import ConfigData, Disk, Instance

#: file name of disk N inside the instance's directory
DISK_FILE_FORMAT = "disk%d"


def _merge(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            out.update(layer)
    return out


def filled_hvparams(cfg: ConfigData, inst: Instance, override: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The hypervisor parameters C{inst} runs with."""
    cluster = cfg.cluster
    hv = inst.hypervisor or ""
    os_hvp = (cluster.os_hvp or {}).get(inst.os or "", {}) or {}
    return _merge((cluster.hvparams or {}).get(hv), os_hvp.get(hv), inst.hvparams, override)


def filled_beparams(cfg: ConfigData, inst: Instance, override: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The backend parameters (memory, vcpus, ...) C{inst} runs with."""
    return _merge((cfg.cluster.beparams or {}).get("default"), inst.beparams, override)


def filled_osparams(cfg: ConfigData, inst: Instance, override: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The OS parameters of C{inst}: cluster (OS name, then name+variant), own."""
    osparams = cfg.cluster.osparams or {}
    name = inst.os or ""
    return _merge(osparams.get(name.split("+", 1)[0]), osparams.get(name) if "+" in name else None, inst.osparams, override)


def filled_osparams_private(cfg: ConfigData, inst: Instance) -> dict[str, Any]:
    """The private OS parameters of C{inst}: the cluster's (C{gnt-os modify
    --os-parameters-private}; OS name, then name+variant), its own."""
    private = cfg.cluster.osparams_private_cluster or {}
    name = inst.os or ""
    return _merge(private.get(name.split("+", 1)[0]), private.get(name) if "+" in name else None,
                  inst.osparams_private)


def instance_disks(cfg: ConfigData, inst: Instance) -> list[Disk]:
    """The disk records of C{inst}, in order."""
    return [cfg.disks[uuid] for uuid in inst.disks if uuid in cfg.disks]


def encode_instance(
    cfg: ConfigData,
    inst: Instance,
    *,
    hvp: Mapping[str, Any] | None = None,
    bep: Mapping[str, Any] | None = None,
    osp: Mapping[str, Any] | None = None,
    disks: list[Disk] | None = None,
) -> dict[str, Any]:
    """The C{INST_DICT} of C{inst} (see the module docstring).

    @param disks: the disk records to send (default: from C{cfg}); an LU
        creating an instance passes the disks it has not stored yet.
    """
    data = inst.to_dict()
    data["hvparams"] = filled_hvparams(cfg, inst, hvp)
    data["beparams"] = filled_beparams(cfg, inst, bep)
    data["osparams"] = filled_osparams(cfg, inst, osp)
    data["osparams_private"] = filled_osparams_private(cfg, inst)
    default_nic = (cfg.cluster.nicparams or {}).get("default") or {}
    for nic in data.get("nics") or []:
        nic["nicparams"] = _merge(default_nic, nic.get("nicparams"))
        network = cfg.networks.get(nic.get("network") or "")
        if network is not None:  # as Ganeti: the NIC's network travels with it
            nic["netinfo"] = network.to_dict()
    data["secondary_nodes"] = []
    data["disks_info"] = [disk_dict(cfg, d, inst) for d in (disks if disks is not None else instance_disks(cfg, inst))]
    return data


#: the templates whose disks travel with their disk parameters filled in
FILLED_PARAM_TEMPLATES = ("rbd", "ext")


def disk_dict(cfg: ConfigData, disk: Disk, inst: Instance | None = None) -> dict[str, Any]:
    """C{disk.to_dict()}, for an rbd or ext disk with its C{params} filled as
    Ganeti's RPC annotation does: the cluster's disk parameters of its
    template, then its node group's (the primary's), then its own."""
    data = disk.to_dict()
    if disk.dev_type not in FILLED_PARAM_TEMPLATES:
        return data
    template = disk.dev_type or ""
    node = cfg.nodes.get(inst.primary_node or "") if inst is not None else None
    group = cfg.nodegroups.get(node.group or "") if node is not None else None
    data["params"] = _merge((cfg.cluster.diskparams or {}).get(template),
                            ((group.diskparams or {}).get(template) if group is not None else None), disk.params)
    return data


def decode_instance(data: Any) -> tuple[Instance, list[Disk]]:
    """noded's side of L{encode_instance}.

    @raise ValueError: C{data} is not an instance dict with a name
    """
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        raise ValueError("not an instance description: %r" % (str(data)[:100],))
    body = dict(data)
    disks_info = body.pop("disks_info", None) or []
    body.pop("secondary_nodes", None)
    if not isinstance(disks_info, list) or not all(isinstance(d, dict) for d in disks_info):
        raise ValueError("disks_info of instance %s is not a list of disks" % data["name"])
    return Instance.from_dict(body), [Disk.from_dict(d) for d in disks_info]


def disk_path(storage_dir: str, instance_name: str, index: int) -> str:
    """Where disk C{index} of C{instance_name} lives, cluster-wide."""
    return os.path.join(storage_dir, instance_name, DISK_FILE_FORMAT % index)


def node_path(root: str, path: str) -> str:
    """A cluster-wide absolute C{path} as seen by the node rooted at C{root}."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))
