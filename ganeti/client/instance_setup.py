"""The options of each gnt-instance command (Ganeti's names and defaults).

Imported only when a command's parser is built (L{ganeti.client.gnt_instance});
the choices and defaults come from L{ganeti.client.instance_opts}.
"""

from __future__ import annotations

import argparse

from ganeti.client import instance_opts as iopts
from ganeti.client.instance_opts import (
    BY_CLUSTER,
    BY_NAME,
    BY_NODE,
    BY_NODE_TAGS,
    BY_PRIMARY,
    BY_PRIMARY_TAGS,
    BY_SECONDARY,
    BY_SECONDARY_TAGS,
    BY_TAGS,
    DEFAULT_SHUTDOWN_TIMEOUT,
    DISK_TEMPLATES,
    LIST_DEF_FIELDS,
    MIGRATION_MODES,
    REBOOT_TYPES,
)
from ganeti.client.options import (
    add_dry_run_option,
    add_force_option,
    add_list_options,
    add_priority_option,
    add_submit_options,
    yes_no,
)

FILE_DRIVERS = ("loop", "blktap", "blktap2")


def _job_options(parser: argparse.ArgumentParser, dry_run: bool = True) -> None:
    if dry_run:
        add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)


def _instance(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("instance", metavar="INSTANCE")


def _backend(
    parser: argparse.ArgumentParser, help: str = "Backend parameters (maxmem=, minmem=, memory=, vcpus=, ...)"
) -> None:
    parser.add_argument("-B", "--backend-parameters", dest="beparams", type=iopts.key_values, default={},
                        metavar="PARAM=VALUE,...", help=help)


def _os_params(parser: argparse.ArgumentParser, secret: bool = True) -> None:
    parser.add_argument("-O", "--os-parameters", dest="osparams", type=iopts.key_values, default={},
                        metavar="PARAM=VALUE,...", help="OS parameters")
    parser.add_argument("--os-parameters-private", dest="osparams_private", type=iopts.key_values, default={},
                        metavar="PARAM=VALUE,...",
                        help="Private OS parameters (stored, never shown or logged in clear)")
    if secret:
        parser.add_argument("--os-parameters-secret", dest="osparams_secret", type=iopts.key_values, default={},
                            metavar="PARAM=VALUE,...",
                            help="Secret OS parameters (given to the OS scripts of this job only, never stored)")


def _shutdown_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shutdown-timeout", type=int, default=DEFAULT_SHUTDOWN_TIMEOUT, metavar="SECONDS",
                        help="Maximum time to wait for the instance to shut down (default %d)"
                             % DEFAULT_SHUTDOWN_TIMEOUT)


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--target-node", dest="dst_node", metavar="NODE",
                        help="Target node (shared storage templates)")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the target node with this allocator")
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")


def _multi(parser: argparse.ArgumentParser) -> None:
    """Ganeti's instance selection options (default: the instances named)."""
    group = parser.add_mutually_exclusive_group()
    modes = (
        ("--instance", BY_NAME, "Arguments are instances (the default)"),
        ("--all", BY_CLUSTER, "Act on all instances (no arguments)"),
        ("--node", BY_NODE, "Arguments are nodes: their primary and secondary instances"),
        ("--primary", BY_PRIMARY, "Arguments are nodes: their primary instances"),
        ("--secondary", BY_SECONDARY, "Arguments are nodes: their secondary instances"),
        ("--tags", BY_TAGS, "Arguments are tags: instances with any of them"),
        ("--node-tags", BY_NODE_TAGS, "Arguments are tags: instances on nodes with any of them"),
        ("--pri-node-tags", BY_PRIMARY_TAGS, "Arguments are tags: primary instances of nodes with any of them"),
        ("--sec-node-tags", BY_SECONDARY_TAGS, "Arguments are tags: secondary instances of nodes with any of them"),
    )
    for flag, mode, text in modes:
        group.add_argument(flag, dest="multi_mode", action="store_const", const=mode, help=text)
    parser.set_defaults(multi_mode=None)
    parser.add_argument("--force-multiple", dest="force_multi", action="store_true",
                        help="Do not ask for confirmation when acting on several instances")
    parser.add_argument("names", nargs="*", metavar="NAME", help="instances (or nodes, or tags; see above)")


def setup_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--disk-template", choices=DISK_TEMPLATES, metavar="TEMPLATE",
                        help="Disk template (%s)" % ", ".join(DISK_TEMPLATES))
    parser.add_argument("--disk", dest="disks", action="append", type=iopts.ident_key_values, default=[],
                        metavar="N:size=SIZE[,mode=ro|rw,name=NAME,...]", help="Disk N (sizes like 512M, 10G)")
    parser.add_argument("-s", "--os-size", type=iopts.size_option, metavar="SIZE",
                        help="Shortcut for --disk 0:size=SIZE")
    parser.add_argument("--net", dest="nics", action="append", type=iopts.ident_key_values, default=[],
                        metavar="N:mac=MAC,ip=IP,mode=MODE,link=LINK,...", help="Network interface N")
    parser.add_argument("--no-nics", action="store_true", help="Create the instance without network interfaces")
    parser.add_argument("-n", "--node", metavar="PNODE[:SNODE]", help="Primary (and secondary) node")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the nodes with this allocator")
    parser.add_argument("-g", "--node-group", dest="nodegroup", metavar="GROUP", help="Node group to allocate in")
    parser.add_argument("-o", "--os-type", dest="os", metavar="OS", help="The OS (name+variant) to install")
    parser.add_argument("--force-variant", action="store_true", help="Accept an OS variant the OS does not list")
    _backend(parser)
    parser.add_argument("-H", "--hypervisor-parameters", dest="hypervisor", type=iopts.ident_key_values,
                        metavar="HYPERVISOR[:PARAM=VALUE,...]", help="Hypervisor and its parameters")
    _os_params(parser)
    parser.add_argument("--no-start", dest="start", action="store_false", help="Do not start the instance")
    parser.add_argument("--no-install", action="store_true", help="Do not install the OS (disks stay empty)")
    parser.add_argument("--no-name-check", dest="name_check", action="store_false",
                        help="Do not resolve the instance name (needs --no-ip-check too)")
    parser.add_argument("--no-ip-check", dest="ip_check", action="store_false",
                        help="Do not check that the instance's IP is unused")
    parser.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false",
                        help="Do not check for IP conflicts in networks")
    parser.add_argument("--no-wait-for-sync", dest="wait_for_sync", action="store_false",
                        help="Do not wait for the disks to sync")
    parser.add_argument("--opportunistic-locking", action="store_true",
                        help="With an allocator, use only the nodes no other job is using now")
    parser.add_argument("--tags", metavar="TAG,...", help="Tags of the new instance")
    parser.add_argument("--file-storage-dir", metavar="DIR", help="Directory of file disks (below the cluster's)")
    parser.add_argument("--file-driver", choices=FILE_DRIVERS, help="File disk driver")
    parser.add_argument("--identify-defaults", action="store_true",
                        help="Store parameters equal to the cluster defaults as defaults")
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")
    _communication(parser)
    parser.add_argument("--forthcoming", action="store_true",
                        help="Only reserve resources, but do not create the instance yet")
    parser.add_argument("--commit", action="store_true",
                        help="The instance is already reserved and should be committed now")
    parser.add_argument("--helper-startup-timeout", type=int, default=None, metavar="SECONDS",
                        help="Startup timeout of the helper VM of --install-image installs")
    parser.add_argument("--helper-shutdown-timeout", type=int, default=None, metavar="SECONDS",
                        help="Shutdown timeout of the helper VM of --install-image installs")
    _job_options(parser)
    _instance(parser)


def _communication(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--communication", dest="instance_communication", type=yes_no, default=None,
                        metavar="yes|no", help="Enable or disable the communication mechanism for an instance"
                        " (a NIC on the cluster's instance communication network)")


def setup_remove(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    parser.add_argument("--ignore-failures", action="store_true",
                        help="Remove the instance from the cluster even if removing its disks fails")
    _shutdown_timeout(parser)
    _job_options(parser)
    _instance(parser)


def setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS, units=True)
    parser.add_argument("-F", "--filter", dest="force_filter", action="store_true",
                        help="The argument is a filter expression, e.g. 'status == \"running\"'")
    parser.add_argument("names", nargs="*", metavar="NAME", help="instances (globs allowed) or one filter")


def setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", "--static", action="store_true",
                        help="Only show configuration data, not runtime data")
    parser.add_argument("--all", dest="show_all", action="store_true", help="Show info on all instances")
    parser.add_argument("--roman", dest="roman_integers", action="store_true",
                        help="Use roman numbers for positive integers")
    add_priority_option(parser)
    parser.add_argument("names", nargs="*", metavar="INSTANCE")


def setup_startup(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Start even if the instance's disks are degraded")
    parser.add_argument("-H", "--hypervisor-parameters", dest="hvparams", type=iopts.key_values, default={},
                        metavar="PARAM=VALUE,...", help="Hypervisor parameters for this start only")
    _backend(parser, "Backend parameters for this start only")
    parser.add_argument("--paused", dest="startup_paused", action="store_true", help="Start the instance paused")
    parser.add_argument("--no-remember", action="store_true",
                        help="Do not record the new state (the watcher will stop the instance again)")
    parser.add_argument("--ignore-offline", action="store_true", help="Ignore offline nodes")
    _job_options(parser)
    _multi(parser)


def setup_shutdown(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser)
    parser.add_argument("--timeout", type=int, default=DEFAULT_SHUTDOWN_TIMEOUT, metavar="SECONDS",
                        help="Seconds to wait for a clean shutdown before forcing it (default %d)"
                             % DEFAULT_SHUTDOWN_TIMEOUT)
    parser.add_argument("--no-remember", action="store_true",
                        help="Do not record the new state (the watcher will start the instance again)")
    parser.add_argument("--ignore-offline", action="store_true", help="Ignore offline nodes")
    _job_options(parser)
    _multi(parser)


def setup_reboot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--type", dest="reboot_type", choices=REBOOT_TYPES, default="hard",
                        help="soft: inside the instance; hard: restart the hypervisor process (default);"
                             " full: shutdown and startup")
    parser.add_argument("--ignore-secondaries", action="store_true",
                        help="Ignore errors from secondary nodes (full reboot)")
    _shutdown_timeout(parser)
    _job_options(parser)
    _multi(parser)


def setup_modify(parser: argparse.ArgumentParser) -> None:
    _backend(parser)
    parser.add_argument("-H", "--hypervisor-parameters", dest="hvparams", type=iopts.key_values, default={},
                        metavar="PARAM=VALUE,...", help="Hypervisor parameters (PARAM=default resets one)")
    _os_params(parser, secret=False)
    parser.add_argument("--disk", dest="disks", action="append", type=iopts.ident_key_values, default=[],
                        metavar="{add:size=S|N:remove|N:PARAM=VALUE}", help="Add, remove or change a disk")
    parser.add_argument("--net", dest="nics", action="append", type=iopts.ident_key_values, default=[],
                        metavar="{add[:PARAM=VALUE]|N:remove|N:PARAM=VALUE}", help="Add, remove or change a NIC")
    state = parser.add_mutually_exclusive_group()
    state.add_argument("--offline", dest="offline_inst", action="store_true",
                       help="Mark the (stopped) instance offline")
    state.add_argument("--online", dest="online_inst", action="store_true", help="Mark the instance online again")
    parser.add_argument("-o", "--os-type", dest="os", metavar="OS", help="Change the OS (without reinstalling)")
    parser.add_argument("--force-variant", action="store_true", help="Accept an OS variant the OS does not list")
    parser.add_argument("-t", "--disk-template", choices=DISK_TEMPLATES, metavar="TEMPLATE",
                        help="Convert the disks to this template")
    parser.add_argument("-n", "--node", metavar="NODE", help="The new secondary node (conversion to drbd)")
    parser.add_argument("--new-primary", dest="new_primary_node", metavar="NODE", help="Change the primary node")
    parser.add_argument("-m", "--runtime-memory", dest="runtime_mem", type=iopts.size_option, metavar="SIZE",
                        help="Change the memory of the running instance")
    parser.add_argument("--file-storage-dir", metavar="DIR",
                        help="Directory of the file disks of a conversion to file or sharedfile (below the cluster's)")
    parser.add_argument("--file-driver", choices=FILE_DRIVERS,
                        help="File disk driver of a conversion to file or sharedfile")
    parser.add_argument("--no-wait-for-sync", dest="wait_for_sync", action="store_false",
                        help="Do not wait for the disks to sync")
    parser.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false",
                        help="Do not check for IP conflicts in networks")
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")
    hotplug = parser.add_mutually_exclusive_group()
    hotplug.add_argument("--hotplug", dest="hotplug", action="store_const", const=True, default=None,
                         help="Hotplug disk and NIC changes")
    hotplug.add_argument("--no-hotplug", dest="hotplug", action="store_const", const=False,
                         help="Apply disk and NIC changes at the next start only")
    parser.add_argument("--hotplug-if-possible", action="store_true",
                        help="Hotplug if the hypervisor can, else change at the next start")
    _communication(parser)
    parser.add_argument("-e", "--ext-params", dest="ext_params", type=iopts.key_values, default={},
                        metavar="provider=PROVIDER[,PARAM=VALUE,...]",
                        help="Provider and parameters of a conversion to the ext template (-t ext)")
    parser.add_argument("-I", "--iallocator", metavar="NAME",
                        help="Choose the new secondary node with this allocator (conversion to drbd; refused here)")
    add_force_option(parser)
    _job_options(parser)
    _instance(parser)


def setup_rename(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-name-check", dest="name_check", action="store_false",
                        help="Do not resolve the new name (needs --no-ip-check too)")
    parser.add_argument("--no-ip-check", dest="ip_check", action="store_false",
                        help="Do not check that the new IP is unused")
    add_force_option(parser, help="Do not ask for confirmation with --no-name-check")
    _job_options(parser)
    _instance(parser)
    parser.add_argument("new_name", metavar="NEW_NAME")


def setup_reinstall(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--os-type", dest="os", metavar="OS", help="Install this OS (default: the current)")
    _os_params(parser)
    parser.add_argument("--force-variant", action="store_true", help="Accept an OS variant the OS does not list")
    parser.add_argument("--select-os", action="store_true",
                        help="Interactive OS reinstall, lists available OS templates for selection")
    add_force_option(parser, help="Do not ask for confirmation (one instance)")
    _job_options(parser)
    _multi(parser)


def setup_grow_disk(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-wait-for-sync", dest="wait_for_sync", action="store_false",
                        help="Don't wait for the disks to sync")
    parser.add_argument("--absolute", action="store_true",
                        help="AMOUNT is the new size of the disk, not the growth")
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")
    _job_options(parser)
    _instance(parser)
    parser.add_argument("disk", metavar="DISK", help="The index of the disk (0 is the first)")
    parser.add_argument("amount", metavar="AMOUNT", help="The growth, or the new size with --absolute"
                        " (MiB, or with a unit: 512M, 10G, 1T)")


def setup_activate_disks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ignore-size", action="store_true",
                        help="Ignore the current recorded size of the disks (useful for forcing activation"
                        " when the recorded size is wrong)")
    parser.add_argument("--wait-for-sync", action="store_true",
                        help="Wait for the disks to synchronize")
    _job_options(parser, dry_run=False)
    _instance(parser)


def setup_deactivate_disks(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Shut the disks down even if the instance runs")
    _job_options(parser)
    _instance(parser)


def setup_recreate_disks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--disk", dest="disks", action="append", type=iopts.ident_key_values, default=[],
                        metavar="N[:size=S,mode=M,spindles=P]",
                        help="Recreate only disk N, optionally with a new size or mode (repeatable; default:"
                        " every disk)")
    parser.add_argument("-n", "--node", metavar="NODE[:SNODE]",
                        help="Recreate the disks on this node, which becomes the primary (all disks)")
    parser.add_argument("-I", "--iallocator", metavar="NAME",
                        help="Let this allocator choose the new node (all disks)")
    _job_options(parser)
    _instance(parser)


def setup_failover(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    parser.add_argument("--ignore-consistency", action="store_true",
                        help="Fail over even if the disks are not consistent on the target")
    parser.add_argument("--cleanup", action="store_true",
                        help="Accepted as Ganeti's (a failed migration's cleanup); a failover has nothing to clean")
    _target(parser)
    _shutdown_timeout(parser)
    _job_options(parser)
    _instance(parser)


def setup_move(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    parser.add_argument("-n", "--node", "--target-node", dest="node", required=True, metavar="NODE", help="Target node")
    parser.add_argument("--compress", default="none", metavar="TOOL",
                        help="Compression of the disk data on the wire (none, gzip, gzip-fast, gzip-slow)")
    parser.add_argument("--ignore-consistency", action="store_true", help="Ignore the consistency of the disks")
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")
    _shutdown_timeout(parser)
    _job_options(parser)
    _instance(parser)


def setup_change_group(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the new node with this allocator")
    parser.add_argument("--to", action="append", default=[], metavar="GROUP",
                        help="Target group (repeatable; default: every other group)")
    parser.add_argument("--early-release", action="store_true", help="Release the locks as early as possible")
    _job_options(parser)
    _instance(parser)


def setup_migrate(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    parser.add_argument("--non-live", action="store_true", help="Stop the instance while its memory is copied")
    parser.add_argument("--migration-mode", choices=MIGRATION_MODES, help="live or non-live (default: hvparams)")
    parser.add_argument("--cleanup", action="store_true", help="Recover from a failed migration")
    parser.add_argument("--allow-failover", action="store_true", help="Fail over if the instance cannot migrate")
    parser.add_argument("--no-runtime-changes", dest="allow_runtime_changes", action="store_false",
                        help="Do not change the instance's memory to make it fit on the target")
    parser.add_argument("--ignore-hvversions", action="store_true",
                        help="Migrate even if the hypervisor versions differ")
    _target(parser)
    _job_options(parser)
    _instance(parser)


def setup_console(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--show-cmd", dest="show_command", action="store_true",
                        help="Print the command that connects to the console instead of running it")
    parser.add_argument("--attach", action="store_true",
                        help="Attach to a kvm serial console even when not on a terminal (input from stdin, "
                             "then its output for half a second more); the console's socket must be on this "
                             "machine (ours)")
    add_priority_option(parser)  # as Ganeti's: accepted, the console is a query
    _instance(parser)
