"""The cluster parameter options of C{gnt-cluster init} and C{modify}
beyond the basic ones (L{ganeti.client.cluster_init}): the instance policy
(C{--ipolicy-*}, and C{--specs-*} at init), the user-id pool, static
hypervisor and disk state, the LVM/DRBD names, images, compression tools,
the master netmask and the instance communication network.

C{init} writes config.data itself: L{init_changes} gives the cluster
fields to set, checked by the same code OP_CLUSTER_SET_PARAMS uses
(L{ganeti.cmdlib.cluster_params}).  C{modify} sends the opcode fields
L{modify_params} returns.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

from ganeti import errors

#: C{--specs-NAME} options and the instance spec parameter each sets
SPLIT_SPECS = (("mem-size", "memory-size"), ("cpu-count", "cpu-count"), ("disk-count", "disk-count"),
               ("disk-size", "disk-size"), ("nic-count", "nic-count"))
_SIZES = ("memory-size", "disk-size")


def _value(text: str) -> Any:
    """Ganeti-style parameter values: numbers, yes/no/true/false, else text."""
    lowered = text.lower()
    if lowered in ("yes", "true"):
        return True
    if lowered in ("no", "false"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_keyval(text: str) -> dict[str, Any]:
    """C{key=val,key2=val2} (Ganeti's -B/-N syntax) as a dict."""
    result: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError("expected key=value, got %r" % item)
        result[key.strip()] = _value(value.strip())
    return result


def parse_hvparams(text: str) -> dict[str, dict[str, Any]]:
    """C{hv:key=val,...} (Ganeti's -H syntax)."""
    hv, sep, rest = text.partition(":")
    if not sep or not hv:
        raise argparse.ArgumentTypeError("expected hypervisor:key=value,..., got %r" % text)
    return {hv: parse_keyval(rest)}


def _keyval(text: str) -> dict[str, Any]:
    return parse_keyval(text)


def state(text: str) -> tuple[str, Any]:
    from ganeti.client.gnt_group import _state as state

    return state(text)


def _bounds(text: str) -> list[dict[str, Any]]:
    from ganeti.client.policy_info import bounds_specs

    return bounds_specs(text)


def _int(value: Any, what: str) -> int:
    from ganeti.client.instance_opts import parse_size

    try:
        return parse_size(value) if what in _SIZES else int(value)
    except (TypeError, ValueError) as e:
        raise errors.OpPrereqError("Invalid value %r of %s in the instance policy: %s" % (value, what, e),
                                   errors.ECODE_INVAL) from None


def std_spec(given: dict[str, Any]) -> dict[str, int]:
    """C{--ipolicy-std-specs}: known parameters, sizes with units allowed."""
    from ganeti.client.policy_info import ISPEC_PARAMETERS

    unknown = sorted(set(given) - set(ISPEC_PARAMETERS))
    if unknown:
        raise errors.OpPrereqError("Invalid parameter(s) %s in std instance specs (known: %s)"
                                   % (", ".join(unknown), ", ".join(ISPEC_PARAMETERS)), errors.ECODE_INVAL)
    return {key: _int(value, key) for key, value in given.items()}


def _ratio(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number, got %r" % text) from None


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ipolicy-bounds-specs", type=_bounds, default=None,
                        metavar="min:PARAM=VALUE,.../max:PARAM=VALUE,...[//...]",
                        help="Complete instance specs limits (minimum and maximum of each pair)")
    parser.add_argument("--ipolicy-std-specs", type=_keyval, default=None, metavar="PARAM=VALUE,...",
                        help="Complete standard instance specs")
    parser.add_argument("--ipolicy-disk-templates", default=None, metavar="TEMPLATE,...",
                        help="Comma-separated list of the disk templates the policy allows")
    parser.add_argument("--ipolicy-vcpu-ratio", type=_ratio, default=None, metavar="RATIO",
                        help="The maximum allowed vcpu-to-cpu ratio")
    parser.add_argument("--ipolicy-spindle-ratio", type=_ratio, default=None, metavar="RATIO",
                        help="The maximum allowed instances to spindle ratio")


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Options C{init} and C{modify} both have (and the basic parser lacks)."""
    add_policy_options(parser)
    parser.add_argument("--uid-pool", default=None, metavar="UID[-UID],...",
                        help="A list of user-ids or user-id ranges separated by commas")
    parser.add_argument("--hypervisor-state", dest="hv_state", type=state, action="append", default=[],
                        metavar="HYPERVISOR:PARAM=VALUE,...", help="Static hypervisor state")
    parser.add_argument("--disk-state", dest="disk_state", type=state, action="append", default=[],
                        metavar="STORAGE_TYPE/NAME:PARAM=VALUE,...", help="Static disk state")
    parser.add_argument("--vg-name", default=None, metavar="VG",
                        help="LVM volume group of plain/drbd disks (\"\" disables LVM; none here)")
    parser.add_argument("--drbd-usermode-helper", dest="drbd_helper", default=None, metavar="PATH",
                        help="Usermode helper for DRBD (stored; this project has no DRBD)")
    parser.add_argument("--use-external-mip-script", type=_yes_no, default=None, metavar="yes|no",
                        help="Run a user-provided script to turn the master IP up and down")
    parser.add_argument("--user-shutdown", dest="enabled_user_shutdown", type=_yes_no, default=None,
                        metavar="yes|no", help="Whether user shutdown (from inside an instance) is enabled")
    parser.add_argument("--compression-tools", default=None, metavar="TOOL,...",
                        help="Compression tools Ganeti may use for exports (gzip must be one)")
    parser.add_argument("--install-image", default=None, metavar="IMAGE",
                        help="The OS image used to run the OS scripts safely (absolute path or URL)")
    parser.add_argument("--zeroing-image", default=None, metavar="IMAGE",
                        help="The OS image used to zero instance disks (absolute path or URL)")
    parser.add_argument("--default-iallocator-params", type=_keyval, default=None, metavar="PARAM=VALUE,...",
                        help="Parameters of the default instance allocator")


def _yes_no(text: str) -> bool:
    from ganeti.client.options import yes_no

    return yes_no(text)


def add_init_options(parser: argparse.ArgumentParser) -> None:
    """The rest of Ganeti's C{gnt-cluster init} options."""
    add_common_options(parser)
    for option, _key in SPLIT_SPECS:
        parser.add_argument("--specs-%s" % option, dest="specs_%s" % option.replace("-", "_"), type=_keyval,
                            default=None, metavar="min=N,max=N,std=N",
                            help="%s specs of the instance policy" % option.replace("-", " ").capitalize())
    parser.add_argument("-B", "--backend-parameters", dest="beparams", type=_keyval, default=None,
                        metavar="PARAM=VALUE,...", help="Default backend parameters of instances")
    parser.add_argument("-N", "--nic-parameters", dest="nicparams", type=_keyval, default=None,
                        metavar="PARAM=VALUE,...", help="Default NIC parameters")
    parser.add_argument("--node-parameters", dest="ndparams", type=_keyval, default=None,
                        metavar="PARAM=VALUE,...", help="Default node parameters")
    parser.add_argument("-H", "--hypervisor-parameters", dest="hvparams", action="append", default=[],
                        type=_hvparams, metavar="HYPERVISOR:PARAM=VALUE,...", help="Hypervisor parameters")
    parser.add_argument("-I", "--default-iallocator", default=None, metavar="NAME",
                        help="Allocator used when none is named")
    parser.add_argument("--maintain-node-health", type=_yes_no, default=None, metavar="yes|no",
                        help="Shut down instances unknown to the cluster on the nodes")
    parser.add_argument("--prealloc-wipe-disks", type=_yes_no, default=None, metavar="yes|no",
                        help="Wipe new disks before use")
    parser.add_argument("--primary-ip-version", type=int, choices=(4, 6), default=None, metavar="4|6",
                        help="Cluster-wide IP version of primary IPs (default: that of --primary-ip)")
    parser.add_argument("-s", "--secondary-ip", default=None, metavar="ADDRESS",
                        help="The master's secondary IP (default: its primary IP)")
    parser.add_argument("--gluster-storage-dir", default=None, metavar="DIR",
                        help="Directory (cluster-wide) where Gluster file systems are mounted")
    parser.add_argument("--ssh-key-type", choices=("rsa", "dsa", "ecdsa"), default=None,
                        help="Type of SSH key Ganeti would deploy (stored; nodes use the cluster's TLS)")
    parser.add_argument("--ssh-key-bits", type=int, default=None, metavar="BITS",
                        help="Length of SSH keys Ganeti would generate, in bits (stored)")


def add_modify_options(parser: argparse.ArgumentParser) -> None:
    """The rest of Ganeti's C{gnt-cluster modify} options."""
    add_common_options(parser)
    parser.add_argument("--add-uids", default=None, metavar="UID[-UID],...",
                        help="User-ids or ranges separated by commas, added to the user-id pool")
    parser.add_argument("--remove-uids", default=None, metavar="UID[-UID],...",
                        help="User-ids or ranges separated by commas, removed from the user-id pool")
    parser.add_argument("--reserved-lvs", default=None, metavar="LV,...",
                        help="Comma-separated logical volume names cluster verify ignores")
    parser.add_argument("--master-netmask", type=int, default=None, metavar="NETMASK",
                        help="The netmask (prefix length) of the master IP")
    parser.add_argument("--modify-etc-hosts", type=_yes_no, default=None, metavar="yes|no",
                        help="Whether the cluster keeps the nodes' /etc/hosts in sync (accepted, stored)")
    parser.add_argument("--instance-communication-network", default=None, metavar="NETWORK",
                        help="The network of instance communication NICs (created and connected if missing)")
    parser.add_argument("--dry-run", action="store_true", help="Only check the parameters, change nothing")
    parser.add_argument("-f", "--force", action="store_true", help="Force the change (as Ganeti's --force)")


def _hvparams(text: str) -> dict[str, dict[str, Any]]:
    return parse_hvparams(text)


def _uid_pool(text: str | None) -> list[list[int]] | None:
    from ganeti.uidpool import check_uid_pool, parse_uid_pool

    return None if text is None else check_uid_pool(parse_uid_pool(text))


def states(opts: argparse.Namespace) -> dict[str, Any]:
    """The C{hv_state} and C{disk_state} opcode fields of C{--hypervisor-state} and C{--disk-state}."""
    out: dict[str, Any] = {}
    if opts.hv_state:
        out["hv_state"] = {hypervisor: dict(values) for hypervisor, values in opts.hv_state}
    if opts.disk_state:
        state: dict[str, dict[str, Any]] = {}
        for ident, values in opts.disk_state:
            kind, _, unit = ident.partition("/")
            if not kind or not unit:
                raise errors.OpPrereqError("Invalid disk state '%s': give STORAGE_TYPE/NAME:PARAM=VALUE,..."
                                           % ident, errors.ECODE_INVAL)
            state.setdefault(kind, {})[unit] = dict(values)
        out["disk_state"] = state
    return out


def policy_changes(opts: argparse.Namespace) -> dict[str, Any]:
    """The instance policy keys the C{--ipolicy-*} options give (Ganeti's
    C{CreateIPolicyFromOpts} without the C{--specs-*} ones)."""
    from ganeti.client import instance_opts as iopts

    policy: dict[str, Any] = {}
    if opts.ipolicy_bounds_specs is not None:
        policy["minmax"] = opts.ipolicy_bounds_specs
    if opts.ipolicy_std_specs is not None:
        policy["std"] = std_spec(opts.ipolicy_std_specs)
    if opts.ipolicy_disk_templates is not None:
        policy["disk-templates"] = [t for t in iopts.split_escaped(opts.ipolicy_disk_templates) if t]
    for key, value in (("vcpu-ratio", opts.ipolicy_vcpu_ratio), ("spindle-ratio", opts.ipolicy_spindle_ratio)):
        if value is not None:
            policy[key] = value
    return policy


def _common_params(opts: argparse.Namespace) -> dict[str, Any]:
    """Opcode fields of the options both commands have."""
    params: dict[str, Any] = {}
    policy = policy_changes(opts)
    if policy:
        params["ipolicy"] = policy
    uid_pool = _uid_pool(opts.uid_pool)
    if uid_pool is not None:
        params["uid_pool"] = uid_pool
    params.update(states(opts))
    for name in ("vg_name", "drbd_helper", "use_external_mip_script", "enabled_user_shutdown", "install_image",
                 "zeroing_image", "default_iallocator_params"):
        value = getattr(opts, name)
        if value is not None:
            params[name] = value
    if opts.compression_tools is not None:
        params["compression_tools"] = [t for t in opts.compression_tools.split(",") if t]
    return params


def modify_params(opts: argparse.Namespace) -> dict[str, Any]:
    """The OP_CLUSTER_SET_PARAMS fields of the options this module adds."""
    params = _common_params(opts)
    for name in ("add_uids", "remove_uids"):
        pool = _uid_pool(getattr(opts, name))
        if pool is not None:
            params[name] = pool
    if opts.reserved_lvs is not None:
        params["reserved_lvs"] = [lv for lv in opts.reserved_lvs.split(",") if lv]
    for name in ("master_netmask", "modify_etc_hosts", "instance_communication_network"):
        value = getattr(opts, name)
        if value is not None:
            params[name] = value
    return params


def _split_specs(opts: argparse.Namespace, policy: dict[str, Any]) -> None:
    """The C{--specs-*} options into C{policy} (Ganeti's
    C{_InitISpecsFromSplitOpts} with C{fill_all}): each gives some of
    min, max and std of one parameter; the rest stay the defaults."""
    given = {key: getattr(opts, "specs_%s" % option.replace("-", "_")) for option, key in SPLIT_SPECS}
    given = {key: values for key, values in given.items() if values}
    if not given:
        return
    if opts.ipolicy_bounds_specs is not None or opts.ipolicy_std_specs is not None:
        raise errors.OpPrereqError("A --specs-xxx option cannot be specified together with any --ipolicy-xxx-specs"
                                   " option", errors.ECODE_INVAL)
    pair = copy.deepcopy((policy.get("minmax") or [{"min": {}, "max": {}}])[0])
    std = dict(policy.get("std") or {})
    for key, values in given.items():
        for which, value in values.items():
            if which not in ("min", "max", "std"):
                raise errors.OpPrereqError("Invalid key '%s' in the %s specs (known: min, max, std)" % (which, key),
                                           errors.ECODE_INVAL)
            (std if which == "std" else pair[which])[key] = _int(value, key)
    policy["minmax"] = [pair]
    policy["std"] = std


def init_changes(opts: argparse.Namespace, cluster: Any) -> dict[str, Any]:
    """The fields of the new cluster object the options set (defaults
    merged as Ganeti's init does), checked as OP_CLUSTER_SET_PARAMS checks
    them.  @raise errors.OpPrereqError: a bad value"""
    from ganeti.cmdlib import cluster_params as cp
    from ganeti.cmdlib import group_params, instance_params

    changes: dict[str, Any] = {}
    params = _common_params(opts)
    policy = dict(cluster.ipolicy)
    _split_specs(opts, policy)
    if "ipolicy" in params:
        policy = cp.ipolicy_changed(policy, cp.check_cluster_ipolicy(params.pop("ipolicy")),
                                    list(cluster.enabled_disk_templates))
    changes["ipolicy"] = cp.ipolicy_changed(policy, {}, list(cluster.enabled_disk_templates))
    if "uid_pool" in params:
        changes["uid_pool"] = params.pop("uid_pool")
    if "hv_state" in params:
        changes["hv_state_static"] = group_params.check_hv_state(params.pop("hv_state"))
    if "disk_state" in params:
        changes["disk_state_static"] = group_params.check_disk_state(params.pop("disk_state"))
    if "compression_tools" in params:
        cp.check_compression_tools(params["compression_tools"])
    cp.check_image(params.get("install_image"), "Install")
    cp.check_image(params.get("zeroing_image"), "Zeroing")
    renamed = {"vg_name": "volume_group_name", "drbd_helper": "drbd_usermode_helper"}
    changes.update({renamed.get(key, key): value for key, value in params.items()})
    if opts.beparams:
        given = instance_params.check_beparams(opts.beparams, allow_default=False)
        changes["beparams"] = {"default": dict(cluster.beparams.get("default", {}), **given)}
    if opts.nicparams:
        given = instance_params.check_nicparams(opts.nicparams, allow_default=False)
        changes["nicparams"] = {"default": dict(cluster.nicparams.get("default", {}), **given)}
    if opts.ndparams:
        changes["ndparams"] = dict(cluster.ndparams, **group_params.check_ndparams(opts.ndparams))
    if opts.hvparams:
        wanted: dict[str, dict[str, Any]] = {}
        for item in opts.hvparams:
            for hv, values in item.items():
                wanted.setdefault(hv, {}).update(values)
        unknown = sorted(set(wanted) - set(cluster.enabled_hypervisors))
        if unknown:
            raise errors.OpPrereqError("Parameters given for hypervisor(s) not enabled: %s" % ", ".join(unknown),
                                       errors.ECODE_INVAL)
        checked = instance_params.check_hvparams_by_hypervisor(wanted, allow_default=False)
        changes["hvparams"] = {hv: dict(cluster.hvparams.get(hv, {}), **checked.get(hv, {}))
                               for hv in cluster.hvparams}
    for name in ("default_iallocator", "maintain_node_health", "prealloc_wipe_disks", "gluster_storage_dir",
                 "ssh_key_type", "ssh_key_bits"):
        value = getattr(opts, name)
        if value is not None:
            changes[name] = value
    if opts.ssh_key_bits is not None and opts.ssh_key_bits <= 0:
        raise errors.OpPrereqError("Invalid SSH key length %s" % opts.ssh_key_bits, errors.ECODE_INVAL)
    family = 10 if ":" in opts.primary_ip else 2
    if opts.primary_ip_version is not None and {4: 2, 6: 10}[opts.primary_ip_version] != family:
        raise errors.OpPrereqError("The primary IP %s is not an IPv%d address" % (opts.primary_ip,
                                                                              opts.primary_ip_version),
                                   errors.ECODE_INVAL)
    return changes
