"""gnt-cluster init | destroy | getmaster | version | info.

C{init} makes this node (this root) the master of a new one-node cluster:
certificates and keys, the first config.data and ssconf files, the node's
identity, then the daemons (through L{ganeti.daemons}).  C{destroy} stops
the daemons and removes what C{init} created (logs stay); as Ganeti, it
refuses while instances or nodes other than the master are defined.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil

from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.client.formatting import format_time
from ganeti.client.jobs import follow_up_jobs, opcode, submit_or_send
from ganeti.client.options import add_priority_option, add_submit_options, yes_no
from ganeti.paths import Paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: cluster-wide storage directories (as Ganeti's defaults); node R keeps them at R + path
DEFAULT_FILE_STORAGE_DIR = "/srv/ganeti/file-storage"
DEFAULT_SHARED_FILE_STORAGE_DIR = "/srv/ganeti/shared-file-storage"


def _paths(ctx: Context) -> Paths:
    return Paths.from_option(ctx.root)


def init(ctx: Context, opts: argparse.Namespace) -> int:
    import socket

    import attrs  # (with the config model: init alone needs them, not info, version or modify)

    from ganeti import crypto, daemons, serializer, ssconf
    from ganeti.client import cluster_opts
    from ganeti.config.bootstrap import initial_config
    from ganeti.rpc.instances import node_path

    paths = _paths(ctx)
    if os.path.exists(paths.config_data):
        ctx.err("Failure: this node is already part of a cluster (%s exists)" % paths.config_data)
        return EXIT_FAILURE
    node_name = opts.node_name or socket.getfqdn()
    templates = [t for t in opts.enabled_disk_templates.split(",") if t]
    hypervisors = [h for h in opts.enabled_hypervisors.split(",") if h]
    # every option checked (a config of the same shape) before anything is written; a bad
    # value raises OpPrereqError, which the runner reports as Ganeti does
    diskparams = _diskparams(opts.diskparams)
    extra = cluster_opts.init_changes(opts, initial_config(
        opts.cluster_name, node_name, opts.primary_ip, enabled_hypervisors=hypervisors,
        enabled_disk_templates=templates).cluster)
    paths.ensure_dirs()
    crypto.bootstrap_secrets(paths, opts.cluster_name, node_name=node_name)
    config = initial_config(
        opts.cluster_name,
        node_name,
        opts.primary_ip,
        cluster_ip=opts.master_ip,
        master_netdev=opts.master_netdev,
        master_netmask=opts.master_netmask,
        enabled_hypervisors=hypervisors,
        enabled_disk_templates=templates,
        file_storage_dir=opts.file_storage_dir or DEFAULT_FILE_STORAGE_DIR,
        shared_file_storage_dir=opts.shared_file_storage_dir or DEFAULT_SHARED_FILE_STORAGE_DIR,
        candidate_pool_size=opts.candidate_pool_size,
        mac_prefix=opts.mac_prefix,
        candidate_cert=crypto.cluster_cert_digest(paths),
    )
    if diskparams:
        from ganeti.cmdlib.group_params import merged_nested

        config = attrs.evolve(config, cluster=attrs.evolve(
            config.cluster, diskparams=merged_nested(config.cluster.diskparams or {}, diskparams)))
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, **extra))
    if opts.secondary_ip:
        config = attrs.evolve(config, nodes={uuid: attrs.evolve(node, secondary_ip=opts.secondary_ip)
                                             for uuid, node in config.nodes.items()})
    serializer.write_file(paths.config_data, config.to_json(), mode=0o640)
    ssconf.write_files(paths, ssconf.compute(config), max_size=None)
    daemons.write_node_identity(paths, node_name, opts.primary_ip)
    for directory in (config.cluster.file_storage_dir, config.cluster.shared_file_storage_dir):
        # cluster-wide paths; this node keeps them under its root
        if directory:
            os.makedirs(node_path(paths.root, directory), exist_ok=True)
    ctx.out("Cluster %s initialised; master node %s (%s), root %s" % (opts.cluster_name, node_name, opts.primary_ip, paths.root))
    if opts.no_start:
        return EXIT_SUCCESS
    return daemons.start(paths, out=ctx.out)


def _diskparams(items: list[dict[str, dict[str, Any]]] | None) -> dict[str, dict[str, Any]]:
    """The C{-D template:k=v,...} options, merged and checked.
    @raise errors.OpPrereqError: an unknown template, key or bad value
    """
    from ganeti.cmdlib import group_params, rbd_disks

    wanted: dict[str, dict[str, Any]] = {}
    for item in items or []:
        for template, values in item.items():
            wanted.setdefault(template, {}).update(values)
    checked = group_params.check_diskparams(wanted)
    rbd_disks.check_cluster_params(checked.get(rbd_disks.DT_RBD))
    return checked


def destroy_refusal(config: Any) -> str | None:
    """Why the cluster of C{config} (config.data's dict) cannot be destroyed
    yet, as Ganeti's OP_CLUSTER_DESTROY refuses: other nodes or instances
    are still defined.  C{None}: it can."""
    if not isinstance(config, dict):
        raise ValueError("the configuration is not a JSON object")
    master = (config.get("cluster") or {}).get("master_node")
    others = [uuid for uuid in (config.get("nodes") or {}) if uuid != master]
    if others:
        return "There are still %d node(s) in this cluster." % len(others)
    if config.get("instances"):
        return "There are still %d instance(s) in this cluster." % len(config["instances"])
    return None


def destroy(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti import daemons, serializer

    if not opts.yes_do_it:
        ctx.err(
            "Destroying a cluster is irreversible. If you really want to destroy this cluster,"
            " supply the --yes-do-it option."
        )
        return EXIT_FAILURE
    paths = _paths(ctx)
    if not os.path.exists(paths.config_data):
        ctx.err("Failure: no cluster configuration at %s" % paths.config_data)
        return EXIT_FAILURE
    try:
        refusal = destroy_refusal(serializer.read_json(paths.config_data))
    except (OSError, ValueError) as e:
        ctx.err("Warning: cannot read %s (%s); destroying anyway" % (paths.config_data, e))
        refusal = None
    if refusal is not None:
        ctx.err("Failure: prerequisites not met for this operation:\n%s" % refusal)
        return EXIT_FAILURE
    daemons.stop(paths, out=ctx.out)
    for name in os.listdir(paths.data_dir):
        path = os.path.join(paths.data_dir, name)
        if name.startswith("ssconf_") or name in (
            "config.data", "config.journal", "config.journal.old", "locks.data", "locks.journal", "tempres.data",
            "server.pem", "client.pem", "rapi.pem", "hmac.key", "cluster-domain-secret", "node.json",
        ):
            os.unlink(path)
    shutil.rmtree(paths.queue_dir, ignore_errors=True)
    ctx.out("Cluster destroyed on root %s (logs kept in %s)" % (paths.root, paths.log_dir))
    return EXIT_SUCCESS


def getmaster(ctx: Context, opts: argparse.Namespace) -> int:
    """The master's name from this node's ssconf, as Ganeti's does, so that
    it answers on every node (after a failover too); LuxiD only where the
    node has no ssconf yet."""
    from ganeti import ssconf

    try:
        master = ssconf.SimpleStore(Paths.from_option(ctx.root)).get_master_node()
    except Exception:  # no ssconf: ask the master daemon
        (master,) = ctx.client().query_config_values(["master_node"])
    ctx.out(master)
    return EXIT_SUCCESS


def version(ctx: Context, opts: argparse.Namespace) -> int:
    info = ctx.client().query_cluster_info()
    ctx.out("Software version: %s" % info["software_version"])
    ctx.out("Internode protocol: %s" % info["protocol_version"])
    ctx.out("Configuration format: %s" % info["config_version"])
    ctx.out("OS api version: %s" % info["os_api_version"])
    ctx.out("Export interface: %s" % info["export_version"])
    ctx.out("VCS version: %s" % info["vcs_version"])
    return EXIT_SUCCESS


def _epoch(ctx: Context) -> Any:
    """The highest master epoch this node has seen (raised at every master failover)."""
    from ganeti.ha import epoch

    try:
        return epoch.read_epoch(_paths(ctx))
    except (OSError, ValueError) as e:
        return "unknown (%s)" % e


def _show_ha(ctx: Context, data: dict[str, Any]) -> None:
    """The "High availability" section: the HA parameters and the master's
    failover record (from the master daemon), this node's master epoch."""
    ctx.out("High availability:")
    if "ha_liveness_timeout" not in data:  # a master daemon that does not report them
        ctx.out("  Parameters: unknown (the master does not report them)")
    else:
        ctx.out("  Liveness timeout: %gs" % data["ha_liveness_timeout"])
        ctx.out("  Automatic failover: %s" % ("yes" if data["ha_auto_failover"] else "no"))
        ctx.out("  Failover timeout: %gs" % data["ha_failover_timeout"])
    ctx.out("  Master epoch (this node): %s" % _epoch(ctx))
    last = data.get("ha_last_failover")
    if isinstance(last, dict):
        ctx.out("  Last failover: %s, to %s from %s (epoch %s)" % (
            format_time(last.get("time")), last.get("node"), last.get("old_master") or "unknown", last.get("epoch")))
    else:
        ctx.out("  Last failover: none recorded")


def info(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.formatting import format_generic_info, grouped_params, to_roman

    data = ctx.client().query_cluster_info()
    roman = bool(getattr(opts, "roman_integers", False))
    lines: list[tuple[str, Any]] = [
        ("Cluster name", data["name"]),
        ("Cluster UUID", data["uuid"]),
        ("Creation time", format_time(data["ctime"])),
        ("Modification time", format_time(data["mtime"])),
        ("Master node", data["master"]),
        ("Architecture (this node)", "%s (%s)" % tuple(data["architecture"])),
        ("Tags", ", ".join(data["tags"]) or "(none)"),
        ("Default hypervisor", data["default_hypervisor"]),
        ("Enabled hypervisors", ", ".join(data["enabled_hypervisors"])),
        ("Enabled disk templates", ", ".join(data["enabled_disk_templates"])),
        ("Candidate pool size", to_roman(data["candidate_pool_size"], roman)),
        ("Master netdev", data["master_netdev"]),
        ("File storage path", data["file_storage_dir"]),
        ("Shared file storage path", data["shared_file_storage_dir"]),
        ("Maximum running jobs", to_roman(data["max_running_jobs"], roman)),
        ("Maximum tracked jobs", to_roman(data["max_tracked_jobs"], roman)),
    ]
    for key, value in lines:
        ctx.out("%s: %s" % (key, value))
    enabled = data["enabled_hypervisors"]
    sections: list[tuple[str, Any]] = [
        ("Hypervisor parameters", grouped_params({hv: p for hv, p in (data.get("hvparams") or {}).items()
                                                  if hv in enabled}, roman)),
        ("OS-specific hypervisor parameters", grouped_params(data.get("os_hvp") or {}, roman)),
        ("OS parameters", grouped_params(data.get("osparams") or {}, roman)),
        ("Hidden OSes", ", ".join(data.get("hidden_os") or [])),
        ("Blacklisted OSes", ", ".join(data.get("blacklisted_os") or [])),
    ]
    if "uid_pool" in data:  # a master daemon that reports the whole cluster (Ganeti's layout from here on)
        sections += _parameter_sections(data, roman)
    ctx.out(format_generic_info(sections))
    _show_ha(ctx, data)
    enabled = data.get("enabled_data_collectors") or {}
    intervals = data.get("data_collector_interval") or {}
    if enabled:
        ctx.out("Data collectors:")  # Ganeti's layout: seconds, three decimals
        for name in sorted(enabled):
            ctx.out("  %s:" % name)
            ctx.out("    active: %s" % enabled[name])
            interval = intervals.get(name)
            ctx.out("    interval: %s" % ("%.3fs" % (interval / 1e6) if isinstance(interval, (int, float)) else "-"))
    return EXIT_SUCCESS


def _parameter_sections(data: dict[str, Any], roman: bool) -> list[tuple[str, Any]]:
    """Ganeti's "Cluster parameters", defaults and policy sections of C{info}."""
    from ganeti.client.formatting import grouped_params, to_roman
    from ganeti.client.policy_info import policy_info
    from ganeti.uidpool import format_uid_pool

    get = data.get
    parameters = [
        ("master netmask", to_roman(get("master_netmask"), roman)),
        ("use external master IP address setup script", get("use_external_mip_script")),
        ("lvm volume group", get("volume_group_name")),
        ("lvm reserved volumes", ", ".join(get("reserved_lvs") or []) or "(none)"),
        ("drbd usermode helper", get("drbd_usermode_helper")),
        ("gluster storage path", get("gluster_storage_dir")),
        ("maintenance of node health", get("maintain_node_health")),
        ("uid pool", format_uid_pool(get("uid_pool"))),
        ("default instance allocator", get("default_iallocator")),
        ("default instance allocator parameters", get("default_iallocator_params")),
        ("primary ip version", to_roman(get("primary_ip_version"), roman)),
        ("preallocation wipe disks", get("prealloc_wipe_disks")),
        ("install image", get("install_image")),
        ("instance communication network", get("instance_communication_network")),
        ("zeroing image", get("zeroing_image")),
        ("compression tools", get("compression_tools")),
        ("enabled user shutdown", get("enabled_user_shutdown")),
        ("modify ssh setup", get("modify_ssh_setup")),
        ("ssh_key_type", get("ssh_key_type")),
        ("ssh_key_bits", to_roman(get("ssh_key_bits"), roman)),
    ]
    return [
        ("Cluster parameters", parameters),
        ("Default node parameters", grouped_params(get("ndparams") or {}, roman)),
        ("Default instance parameters", grouped_params(get("beparams") or {}, roman)),
        ("Default nic parameters", grouped_params(get("nicparams") or {}, roman)),
        ("Default disk parameters", grouped_params(get("diskparams") or {}, roman)),
        ("Instance policy - limits for instances", policy_info(get("ipolicy") or {}, get("ipolicy") or {}, True)),
    ]


def setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--roman", dest="roman_integers", action="store_true",
                        help="Use roman numbers for positive integers")


def setup_init(parser: argparse.ArgumentParser) -> None:
    from ganeti.client import cluster_opts

    parser.add_argument("cluster_name", metavar="CLUSTER_NAME")
    parser.add_argument("--primary-ip", required=True, help="this node's primary IP (e.g. 127.0.1.1 for a loopback cluster)")
    parser.add_argument("--node-name", help="this node's name (default: the host's FQDN)")
    parser.add_argument("--no-etc-hosts", dest="modify_etc_hosts", action="store_false",
                        help="Accepted as Ganeti's: /etc/hosts is never changed here")
    parser.add_argument("--no-ssh-init", dest="ssh_init", action="store_false",
                        help="Accepted as Ganeti's: no SSH keys are set up (nodes use the cluster's TLS)")
    parser.add_argument("--master-ip", help="the cluster's floating IP (default: the primary IP)")
    parser.add_argument("--master-netdev", default="none", help="interface of the master IP; 'none' for loopback clusters")
    parser.add_argument("--master-netmask", type=int, default=32, help="netmask (prefix length) of the master IP")
    parser.add_argument("--enabled-hypervisors", default="fake", help="comma-separated list (default: fake)")
    parser.add_argument(
        "--enabled-disk-templates", default="diskless,file,sharedfile", help="comma-separated list (default: %(default)s)"
    )
    parser.add_argument("--file-storage-dir", help="directory for file disks, cluster-wide; each node keeps it under its root (default: %s)" % DEFAULT_FILE_STORAGE_DIR)
    parser.add_argument("--shared-file-storage-dir", help="directory for sharedfile disks, shared by all nodes (default: %s)" % DEFAULT_SHARED_FILE_STORAGE_DIR)
    parser.add_argument("-C", "--candidate-pool-size", type=int, default=10, help="master candidates to keep (default 10)")
    parser.add_argument("--mac-prefix", default="aa:00:00", help="prefix of generated MAC addresses")
    parser.add_argument("--no-start", action="store_true", help="write the files but start no daemon")
    parser.add_argument("-D", "--disk-parameters", dest="diskparams", action="append", type=cluster_opts.parse_hvparams,
                        metavar="TEMPLATE:key=value,...", help="disk parameters, e.g. rbd:pool=rbd,access=userspace")
    cluster_opts.add_init_options(parser)


def setup_destroy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes-do-it", "--ya-rly", dest="yes_do_it", action="store_true",
                        help="really destroy the cluster")


def parse_collector_states(text: str) -> dict[str, bool]:
    """C{name=bool,...} of C{--enabled-data-collectors} (true/false, yes/no, 1/0)."""
    from ganeti.client.cluster_opts import parse_keyval

    states = {}
    for key, value in parse_keyval(text).items():
        word = str(value).lower()
        if word not in ("true", "false", "yes", "no", "1", "0"):
            raise argparse.ArgumentTypeError("%s=%s: expected true or false" % (key, value))
        states[key] = word in ("true", "yes", "1")
    return states


def parse_collector_intervals(text: str) -> dict[str, int]:
    """C{name=seconds,...} of C{--data-collector-interval}, in microseconds (as Ganeti stores them)."""
    from ganeti.client.cluster_opts import parse_keyval

    intervals = {}
    for key, value in parse_keyval(text).items():
        try:
            micro = int(1e6 * float(value))
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError("%s=%s: expected a number of seconds" % (key, value)) from None
        if micro <= 0:
            raise argparse.ArgumentTypeError("%s=%s: the interval must be above zero" % (key, value))
        intervals[key] = micro
    return intervals


def _seconds(text: str) -> float:
    """A number of seconds (C{--liveness-timeout}, C{--failover-timeout}); bounds are the opcode's."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, got %r" % text) from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError("expected a number of seconds, got %r" % text)
    return value


def modify(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client import cluster_opts

    params: dict[str, Any] = {}
    for name in (
        "candidate_pool_size", "max_running_jobs", "max_tracked_jobs", "file_storage_dir",
        "shared_file_storage_dir", "master_netdev", "mac_prefix", "maintain_node_health",
        "prealloc_wipe_disks", "default_iallocator", "beparams", "nicparams", "ndparams",
        "liveness_timeout", "auto_failover", "failover_timeout",
    ):
        value = getattr(opts, name)
        if value is not None:
            params[name] = value
    if opts.enabled_hypervisors is not None:
        params["enabled_hypervisors"] = [h for h in opts.enabled_hypervisors.split(",") if h]
    if opts.enabled_disk_templates is not None:
        params["enabled_disk_templates"] = [t for t in opts.enabled_disk_templates.split(",") if t]
    if opts.diskparams:
        disk: dict[str, dict[str, Any]] = {}
        for item in opts.diskparams:
            for template, values in item.items():
                disk.setdefault(template, {}).update(values)
        params["diskparams"] = disk
    if opts.hvparams:
        merged: dict[str, dict[str, Any]] = {}
        for item in opts.hvparams:
            for hv, values in item.items():
                merged.setdefault(hv, {}).update(values)
        params["hvparams"] = merged
    if opts.enabled_data_collectors:
        params["enabled_data_collectors"] = opts.enabled_data_collectors
    if opts.data_collector_interval:
        params["data_collector_interval"] = opts.data_collector_interval
    params.update(cluster_opts.modify_params(opts))
    if not params:
        ctx.err("Please give at least one of the parameters.")
        return EXIT_FAILURE
    if opts.force:
        params["force"] = True
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_CLUSTER_SET_PARAMS", **params))
    # as Ganeti's: the jobs the change submitted (the instance communication network's) are followed too
    bad = [value for ok, value in follow_up_jobs(ctx, result) if not ok]
    for value in bad:
        ctx.out("Job failed, result is '%s'." % (value,))
    if bad:
        ctx.out("%s job(s) failed." % (bad,))
        return EXIT_FAILURE
    return EXIT_SUCCESS


def setup_modify(parser: argparse.ArgumentParser) -> None:
    from ganeti.client import cluster_opts
    from ganeti.client.cluster_opts import parse_keyval

    parser.add_argument("-C", "--candidate-pool-size", type=int, help="master candidates to keep")
    parser.add_argument("--max-running-jobs", type=int, help="jobs run at once")
    parser.add_argument("--max-tracked-jobs", type=int, help="jobs tracked at once")
    parser.add_argument("--enabled-hypervisors", help="comma-separated list")
    parser.add_argument("--enabled-disk-templates", help="comma-separated list")
    parser.add_argument("-H", "--hypervisor-parameters", dest="hvparams", action="append", type=cluster_opts.parse_hvparams,
                        help="hypervisor:key=value,... (repeatable)")
    parser.add_argument("-B", "--backend-parameters", dest="beparams", type=parse_keyval, help="key=value,...")
    parser.add_argument("-D", "--disk-parameters", dest="diskparams", action="append", type=cluster_opts.parse_hvparams,
                        metavar="TEMPLATE:key=value,...", help="disk parameters, e.g. rbd:pool=rbd,access=userspace")
    parser.add_argument("-N", "--nic-parameters", dest="nicparams", type=parse_keyval, help="key=value,...")
    parser.add_argument("--node-parameters", dest="ndparams", type=parse_keyval, help="key=value,...")
    parser.add_argument("--file-storage-dir")
    parser.add_argument("--shared-file-storage-dir")
    parser.add_argument("--master-netdev")
    parser.add_argument("--mac-prefix")
    parser.add_argument("--maintain-node-health", type=yes_no, metavar="yes|no")
    parser.add_argument("--prealloc-wipe-disks", type=yes_no, metavar="yes|no")
    parser.add_argument("-I", "--default-iallocator",
                        help="allocator used when none is named: builtin, or one installed in"
                             " <root>/usr/{local/,}lib/ganeti/iallocators (e.g. hail)")
    parser.add_argument("--enabled-data-collectors", type=parse_collector_states, metavar="NAME=BOOL,...",
                        help="activate or deactivate MonD data collectors (e.g. diskstats=false)")
    parser.add_argument("--data-collector-interval", type=parse_collector_intervals, metavar="NAME=SECONDS,...",
                        help="how often MonD runs data collectors, in seconds")
    parser.add_argument("--liveness-timeout", type=_seconds, metavar="SECONDS",
                        help="seconds without a heartbeat before LuxiD marks a node unreachable (default 2)")
    parser.add_argument("--auto-failover", type=yes_no, metavar="yes|no",
                        help="elect a new master when the master is unreachable for --failover-timeout")
    parser.add_argument("--failover-timeout", type=_seconds, metavar="SECONDS",
                        help="seconds the master must be unreachable before an automatic failover (default 10)")
    cluster_opts.add_modify_options(parser)
    add_priority_option(parser)
    add_submit_options(parser)
