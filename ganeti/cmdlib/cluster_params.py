"""The cluster parameters of OP_CLUSTER_SET_PARAMS beyond the basic ones
(L{ganeti.cmdlib.cluster.LUClusterSetParams} checks and applies them here):
the user-id pool, the cluster's instance policy, the static hypervisor and
disk state, the LVM/DRBD names, the master netmask, images, compression
tools, private OS parameters and the instance communication network.

Ganeti's semantics: the uid pool as L{ganeti.uidpool} reads and changes it; the cluster's policy is complete (the
standard spec within one of the min/max pairs, its disk templates enabled);
images are absolute paths or URLs; C{gzip} must stay among the compression
tools.  The same checks serve C{gnt-cluster init}
(L{ganeti.client.cluster_opts}), which writes config.data itself.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from ganeti import errors
from ganeti.cmdlib import group_params
from ganeti.uidpool import check_uid_pool, uid_pool_changed

#: Ganeti's instance communication network: address, MAC prefix, and how groups connect it
COMMUNICATION_NETWORK4 = "169.254.0.0/16"
COMMUNICATION_MAC_PREFIX = "52:54:00"
COMMUNICATION_MODE, COMMUNICATION_LINK = "routed", "communication_rt"
_TOOL = re.compile(r"^[-_a-zA-Z0-9]+$")
_URL = re.compile(r"^(https?|ftp)://\S+$")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


# --- instance policy ---------------------------------------------------------------------------


def check_cluster_ipolicy(policy: Any) -> dict[str, Any]:
    """The cluster policy's changes, typed: a group's keys plus C{std};
    C{default} is refused (there is nothing above the cluster)."""
    given = dict(group_params._dict(policy, "Instance policy"))
    std = given.pop(group_params.IPOLICY_STD, None)
    out = group_params.check_ipolicy(given)
    for key, value in out.items():
        if value is group_params.DEFAULT:
            raise _invalid("Instance policy '%s' has no default above the cluster's own value" % key)
    if std is not None:
        out[group_params.IPOLICY_STD] = group_params._check_spec(std, "standard instance spec")
    return out


def ipolicy_changed(current: Mapping[str, Any], changes: Mapping[str, Any],
                    enabled_templates: list[str]) -> dict[str, Any]:
    """The cluster's policy with C{changes}; checked whole as Ganeti does
    (the std spec, where given, completes to the current one).
    @raise errors.OpPrereqError: a standard spec outside every min/max pair,
        or disk templates the cluster has not enabled"""
    policy = dict(current)
    for key, value in changes.items():
        if key == group_params.IPOLICY_STD:
            policy[key] = dict(policy.get(key) or {}, **value)
        else:
            policy[key] = value
    std = policy.get(group_params.IPOLICY_STD) or {}
    pairs = policy.get(group_params.IPOLICY_MINMAX) or []
    if std and pairs and not any(all(pair["min"].get(k, v) <= v <= pair["max"].get(k, v) for k, v in std.items())
                                 for pair in pairs):
        raise _invalid("Invalid instance policy: Invalid std specifications")
    allowed = policy.get(group_params.IPOLICY_DTS) or []
    not_enabled = sorted(set(allowed) - set(enabled_templates))
    if not_enabled:
        raise _invalid("The following disk templates are allowed by the ipolicy, but not enabled on the cluster: %s"
                       % ", ".join(not_enabled))
    return policy


# --- the rest ---------------------------------------------------------------------------------


def check_compression_tools(tools: list[str]) -> list[str]:
    illegal = [t for t in tools if not _TOOL.match(t)]
    if illegal:
        raise _invalid("The tools '%s' contain illegal characters: only alphanumeric values, dashes, and"
                       " underscores are allowed" % ", ".join(illegal))
    if "gzip" not in tools:
        raise _invalid("For compatibility reasons, the gzip utility must be present among the compression tools")
    if "none" in tools:
        raise _invalid("none is a reserved value used for no compression, and cannot be used as the name of a tool")
    return list(tools)


def check_image(image: str | None, what: str) -> None:
    """An install or zeroing image: empty (none), an absolute path or a URL."""
    if image and not (image.startswith("/") or _URL.match(image)):
        raise _invalid("%s image must be an absolute path or a URL" % what)


def check_netmask(netmask: int, ip_family: int | None) -> None:
    limit = 128 if ip_family == 10 else 32
    if not 0 < netmask <= limit:
        raise _invalid("CIDR netmask (%s) not valid" % netmask)


def static_state(op: Any, cluster: Any) -> dict[str, Any]:
    """The cluster's C{hv_state_static} and C{disk_state_static} changes."""
    changes: dict[str, Any] = {}
    if op.hv_state:
        changes["hv_state_static"] = group_params.merged_nested(cluster.hv_state_static or {},
                                                                group_params.check_hv_state(op.hv_state))
    if op.disk_state:
        changes["disk_state_static"] = group_params.merged_disk_state(cluster.disk_state_static or {},
                                                                      group_params.check_disk_state(op.disk_state))
    return changes


def check_arguments(op: Any) -> None:
    """What can be checked from the opcode alone (before any lock)."""
    for pool in (op.uid_pool, op.add_uids, op.remove_uids):
        if pool:
            check_uid_pool(pool)
    if op.compression_tools is not None:
        check_compression_tools(op.compression_tools)
    check_image(op.install_image, "Install")
    check_image(op.zeroing_image, "Zeroing")
    for name in ("hv_state", "disk_state"):
        value = getattr(op, name)
        if value:
            (group_params.check_hv_state if name == "hv_state" else group_params.check_disk_state)(value)


def simple_changes(op: Any) -> dict[str, Any]:
    """The values stored as given (cluster field -> value)."""
    given = {
        "volume_group_name": op.vg_name, "drbd_usermode_helper": op.drbd_helper, "reserved_lvs": op.reserved_lvs,
        "use_external_mip_script": op.use_external_mip_script, "gluster_storage_dir": op.gluster_storage_dir,
        "default_iallocator_params": op.default_iallocator_params,
        "enabled_user_shutdown": op.enabled_user_shutdown, "install_image": op.install_image,
        "zeroing_image": op.zeroing_image, "compression_tools": op.compression_tools,
    }
    return {name: value for name, value in given.items() if value is not None}


def check_prereq(op: Any, cfg: Any, warn: Callable[[str], None]) -> None:
    """The checks against the configuration (Ganeti's CheckPrereq ones)."""
    cluster = cfg.cluster
    if op.master_netmask is not None:
        check_netmask(op.master_netmask, cluster.primary_ip_family)
    if op.vg_name == "":
        lvm = sorted({"plain", "drbd"} & set(cluster.enabled_disk_templates or []))
        if lvm:
            raise errors.OpPrereqError("Cannot disable lvm storage while lvm-based disk templates are enabled: %s"
                                       % ", ".join(lvm), errors.ECODE_INVAL)
    if op.drbd_helper == "" and "drbd" in (cluster.enabled_disk_templates or []):
        raise errors.OpPrereqError("Cannot disable drbd helper while drbd disk template is in use",
                                   errors.ECODE_STATE)
    if op.uid_pool or op.add_uids or op.remove_uids:
        uid_pool_changed(cluster.uid_pool, op.add_uids, op.remove_uids, op.uid_pool)
    name = op.instance_communication_network
    if name:
        network = next((n for n in cfg.networks.values() if n.name == name), None)
        if network is not None:
            if not network.network:
                raise errors.OpPrereqError("Supplied instance communication network '%s' must have an IPv4"
                                           " network address." % name, errors.ECODE_INVAL)
            for what, value, default in (("has an IPv4 gateway", network.gateway, None),
                                         ("has a non-standard IPv4 network address", network.network,
                                          COMMUNICATION_NETWORK4),
                                         ("has a non-standard MAC prefix", network.mac_prefix,
                                          COMMUNICATION_MAC_PREFIX)):
                if value != default:
                    warn("Supplied instance communication network '%s' %s '%s', this might pose a security"
                         " risk (default is '%s')." % (name, what, value, default))


def communication_jobs(cfg: Any, name: str) -> list[list[dict[str, Any]]]:
    """Ganeti's C{_EnsureInstanceCommunicationNetwork}: one job that adds
    the network (when it does not exist) and connects it to every group
    not connected yet."""
    network = next((n for n in cfg.networks.values() if n.name == name), None)
    ops: list[dict[str, Any]] = []
    if network is None:
        ops.append({"OP_ID": "OP_NETWORK_ADD", "network_name": name, "network": COMMUNICATION_NETWORK4,
                    "mac_prefix": COMMUNICATION_MAC_PREFIX, "conflicts_check": True,
                    "tags": []})
    for group in sorted(cfg.nodegroups.values(), key=lambda g: g.name or ""):
        if network is None or network.uuid not in (group.networks or {}):
            ops.append({"OP_ID": "OP_NETWORK_CONNECT", "group_name": group.name, "network_name": name,
                        "network_mode": COMMUNICATION_MODE, "network_link": COMMUNICATION_LINK,
                        "conflicts_check": True})
    return [ops] if ops else []


#: the name of an instance's communication NIC is this prefix and the instance's name (Ganeti's)
COMMUNICATION_NIC_PREFIX = "ganeti:communication:"


def communication_nic(cfg: Any, instance_name: str) -> dict[str, Any]:
    """The NIC C{--communication} adds (Ganeti's): on the cluster's instance
    communication network, an address from its pool, a generated MAC.
    @raise errors.OpPrereqError: the cluster has no such network"""
    network = cfg.cluster.instance_communication_network
    if not network:
        raise errors.OpPrereqError("Instance communication needs the cluster's instance communication network;"
                                   " set one with gnt-cluster modify --instance-communication-network NAME",
                                   errors.ECODE_INVAL)
    return {"name": COMMUNICATION_NIC_PREFIX + instance_name, "mac": "generate", "ip": "pool", "network": network}


def communication_mod(cfg: Any, wanted: bool, instance: Any) -> list[Any] | None:
    """Ganeti's C{_InstanceCommunicationDDM}: the NIC modification that adds
    (C{wanted}) or removes the instance's communication NIC; C{None} when
    it already is as wanted."""
    name = COMMUNICATION_NIC_PREFIX + (instance.name or "")
    present = any(nic.name == name for nic in instance.nics or [])
    if wanted and not present:
        return ["add", -1, communication_nic(cfg, instance.name or "")]
    if not wanted and present:
        return ["remove", name, {}]
    return None
