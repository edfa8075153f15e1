"""Every procedure noded serves: the node RPC contract (stdlib and attrs only).

Each stub below declares one procedure (see L{ganeti.rpc.contract}): its
name, its time limit class, whether it is idempotent (C{idempotent=True}:
running it twice has the effect of running it once, so a job's RPC client
sends it again after a lost connection while the node's NodeD restarts;
any other procedure is sent again only when it cannot have reached the
node), its positional arguments in wire order with their types (a default
makes an argument optional on the wire), its payload type and, in its
docstring, what it does.  A call is C{rpc.run(nodes,
procedures.NAME.call(...))}; noded refuses a request that does not fit the
declaration before the handler runs, and L{ganeti.noded.dispatch} finds the
handler (a method of the same name marked C{@handler(procedures.NAME)}, which mypy
checks against the stub).  Adding a procedure
is one stub here and one handler in noded.

Where the wire shapes are described: C{INST_DICT} and disk paths in
L{ganeti.rpc.instances}, C{COMPRESS} and C{FILE_DETAILS} in
L{ganeti.rpc.wire}, the transfer specs in L{ganeti.noded.impexp}.  An
instance argument (C{inst}) is an C{INST_DICT}, a disk argument a
C{Disk.to_dict()}.
"""

# mypy: disable-error-code="empty-body"
# (the stubs are declarations: their bodies are never run)

from __future__ import annotations

from typing import Any

from ganeti.rpc.contract import Call, ContractError, Procedure, Table

__all__ = ["Call", "ContractError", "Procedure", "TABLE", "TMO_URGENT", "TMO_FAST", "TMO_NORMAL", "TMO_SLOW", "TMO_1DAY"]

#: Time limit classes, seconds (Ganeti's C{RPC_TMO_*}).
TMO_URGENT = 60
TMO_FAST = 300
TMO_NORMAL = 900
TMO_SLOW = 3600
TMO_1DAY = 86400

#: Every procedure noded serves, by name.
TABLE = Table()
declare = TABLE.declare

#: the shapes of the common arguments
Inst = dict[str, Any]
DiskDict = dict[str, Any]
#: a boolean flag; C{None} reads as false
Flag = bool | None
#: Ganeti's reason trail: C{[[source, reason, timestamp], ...]}
Reason = list[Any] | None


# --- node and cluster -------------------------------------------------------------------


@declare(TMO_URGENT, idempotent=True)
def version() -> int:
    """The node RPC protocol version of the node."""


@declare(TMO_URGENT, idempotent=True)
def master_node_name() -> str:
    """The master's name in this node's ssconf."""


@declare(TMO_URGENT, idempotent=True)
def node_info(storage_units: list[Any], hv_specs: list[Any]) -> list[Any]:
    """C{[boot_id, [storage info...], [hypervisor info...]]} of the node;
    C{storage_units} are C{[type, key, params]}, C{hv_specs} C{[name, hvparams]}."""


@declare(TMO_URGENT, idempotent=True)
def node_verify(checkdict: dict[str, Any], cluster_name: str, all_hvparams: Any = None) -> dict[str, Any]:
    """The checks named in C{checkdict} (see the handler for each)."""


@declare(TMO_URGENT)
def node_leave_cluster(modify_ssh_setup: Flag = False) -> None:
    """Forget the cluster (config, ssconf, queue, secrets), stop RAPI, then noded."""


@declare(TMO_URGENT, idempotent=True)
def test_delay(duration: float) -> None:
    """Answer after C{duration} seconds."""


# --- files ------------------------------------------------------------------------------


@declare(TMO_URGENT, idempotent=True)
def upload_file(details: list[Any]) -> None:
    """Replace an allowed file atomically: C{FILE_DETAILS}
    (C{[path, COMPRESS data, mode, owner, group, atime, mtime]})."""


@declare(TMO_URGENT, idempotent=True)
def upload_file_single(vpath: str, data: list[Any], mode: int, owner: str | int | None, group: str | int | None,
                       atime: float | None, mtime: float | None) -> None:
    """L{upload_file} with the details as separate arguments (Ganeti 2.16+)."""


@declare(TMO_URGENT)
def config_delta(base: int, records: list[dict[str, Any]]) -> int:
    """Bring config.data from serial C{base} forward by the master's change
    records (serials C{base+1..}); the serial held afterwards.  Refused
    ("config_delta refused: ...", nothing changed) when the node does not
    hold C{base}: the master then sends the whole file (ours, not Ganeti's)."""


@declare(TMO_URGENT, idempotent=True)
def write_ssconf_files(values: dict[str, Any]) -> None:
    """Write ssconf files: C{{key: text or [lines]}}."""


@declare(TMO_URGENT, idempotent=True)
def ha_params_store(record: Any) -> list[Any]:
    """Keep the master's HA parameters unless the node holds newer ones:
    C{[stored, the record the node holds now]}."""


# --- job queue replication --------------------------------------------------------------


@declare(TMO_URGENT, idempotent=True)
def jobqueue_update(file_name: str, content: list[Any]) -> None:
    """Write a job queue file (virtual path, C{COMPRESS} content)."""


@declare(TMO_URGENT, idempotent=True)
def jobqueue_update_many(entries: list[list[Any]], durable: bool = True) -> None:
    """Write several job queue files C{[[virtual path, COMPRESS content], ...]}
    in one call, each atomically and, with C{durable}, fsynced before the
    answer (ours, not Ganeti's: the master batches what changed since its
    last push; versions of running jobs need no fsync)."""


@declare(TMO_URGENT)
def jobqueue_rename(pairs: list[list[str]]) -> list[str | None]:
    """Rename queue files C{[[old, new], ...]}: per pair C{None} or an error."""


@declare(TMO_URGENT, idempotent=True)
def jobqueue_purge() -> None:
    """Remove everything in the queue directory but its lock file."""


@declare(TMO_URGENT, idempotent=True)
def jobqueue_set_drain_flag(flag: bool) -> None:
    """Create (true) or remove (false) the queue's drain file."""


@declare(TMO_URGENT, idempotent=True)
def jobqueue_list() -> dict[str, list[Any]]:
    """C{{name in the queue dir: [sha1, job status or null]}} (ours)."""


@declare(TMO_URGENT, idempotent=True)
def jobqueue_remove(names: list[str]) -> None:
    """Remove queue files (virtual paths); missing ones are fine (ours)."""


# --- instances --------------------------------------------------------------------------


@declare(TMO_NORMAL, idempotent=True)
def instance_start(inst: Inst, startup_paused: Flag = False, reason: Reason = None) -> None:
    """Start the instance; one already running is left alone."""


@declare(TMO_NORMAL, idempotent=True)
def instance_shutdown(inst: Inst, timeout: int | None = 120, reason: Reason = None) -> None:
    """Stop the instance within C{timeout} seconds; one not running is fine."""


@declare(TMO_NORMAL)
def instance_reboot(inst: Inst, reboot_type: str, shutdown_timeout: int | None = 120, reason: Reason = None) -> None:
    """Reboot a running instance: C{soft}/C{hard} in place, C{full} stops and starts."""


@declare(TMO_NORMAL, idempotent=True)
def instance_balloon_memory(inst: Inst, memory: int) -> None:
    """Give the running instance C{memory} MiB."""


@declare(TMO_URGENT, idempotent=True)
def instance_list(hypervisor_names: list[str], hvparams_by_hv: dict[str, Any] | None = None) -> list[str]:
    """The names of the instances running on the node."""


@declare(TMO_URGENT, idempotent=True)
def instance_info(name: str, hypervisor: str, hvparams: dict[str, Any] | None = None) -> dict[str, Any]:
    """C{{"memory", "vcpus", "state", "time"}} of a running instance, C{{}} if it does not run."""


@declare(TMO_URGENT, idempotent=True)
def all_instances_info(hypervisor_names: list[str], hvparams_by_hv: dict[str, Any] | None = None,
                       ) -> dict[str, dict[str, Any]]:
    """C{{name: {"memory", "vcpus", "state", "time"}}} of the running instances."""


@declare(TMO_URGENT, idempotent=True)
def instance_console_info(inst: Inst) -> dict[str, Any]:
    """How to reach the instance's console."""


@declare(TMO_1DAY)
def instance_os_add(inst: Inst, reinstall: Flag = False, debug: int | bool = 0) -> None:
    """Run the OS's create script for the instance."""


@declare(TMO_SLOW)
def instance_run_rename(inst: Inst, old_name: str, debug: int | bool = 0) -> None:
    """Run the OS's rename script (the instance has its new name already)."""


@declare(TMO_URGENT, idempotent=True)
def os_diagnose() -> list[list[Any]]:
    """C{[[name, path, status, diagnose, variants, parameters, api_versions, trusted], ...]}."""


# --- migration --------------------------------------------------------------------------


@declare(TMO_NORMAL, idempotent=True)
def migration_info(inst: Inst) -> Any:
    """On the source: what the target needs to accept the instance (opaque)."""


@declare(TMO_NORMAL)
def accept_instance(inst: Inst, info: Any, target_ip: str) -> None:
    """On the target: get ready to receive the instance; its disks must be here."""


@declare(TMO_SLOW)
def instance_migrate(cluster_name: str, inst: Inst, target_ip: str, live: Flag = True) -> None:
    """On the source: send the running instance to C{target_ip}."""


@declare(TMO_URGENT, idempotent=True)
def instance_get_migration_status(inst: Inst) -> dict[str, Any]:
    """On the source: C{{"status": "completed"|"active"|"failed"|"none", ...}}."""


@declare(TMO_NORMAL)
def instance_finalize_migration_dst(inst: Inst, info: Any, success: Flag) -> None:
    """On the target: take the instance over, or clean up after a failure."""


@declare(TMO_NORMAL)
def instance_finalize_migration_src(inst: Inst, success: Flag, live: Flag = True) -> None:
    """On the source: clean up, or recover the instance after a failure."""


# --- block devices ----------------------------------------------------------------------


@declare(TMO_NORMAL)
def blockdev_create(disk: DiskDict, size: int, owner: str | None = None, on_primary: Flag = True,
                    info: str | None = "", exclusive_storage: Flag = False) -> str:
    """Create a disk of C{size} MiB; its path on the node."""


@declare(TMO_NORMAL, idempotent=True)
def blockdev_remove(disk: DiskDict) -> None:
    """Remove a disk; one already gone succeeds."""


@declare(TMO_NORMAL)
def blockdev_snapshot(disk: DiskDict, snap_name: str | None = None, snap_size: int | None = None) -> list[Any]:
    """Snapshot a disk (rbd: C{rbd snap create IMAGE@snap_name}); Ganeti's C{[driver, snapshot name]}."""


@declare(TMO_NORMAL)
def blockdev_snapshot_remove(disk: DiskDict, snap_name: str) -> None:
    """Remove the snapshot C{snap_name} of a disk (rbd: C{rbd snap rm}); one already gone succeeds (ours:
    Ganeti removes its LVM snapshots as disks)."""


@declare(TMO_NORMAL)
def blockdev_grow(disk: DiskDict, amount: int, dryrun: Flag = False, backingstore: Flag = True,
                  exclusive_storage: Flag = False) -> None:
    """Grow a disk by C{amount} MiB (a file disk in the C{backingstore} step only)."""


@declare(TMO_SLOW)
def blockdev_convert(bdev_src: DiskDict, bdev_dest: DiskDict) -> None:
    """Copy the data of disk C{bdev_src} onto disk C{bdev_dest}, both made before (a disk template
    conversion): each is assembled on the node for the copy and released after it."""


@declare(TMO_NORMAL, idempotent=True)
def blockdev_setinfo(disk: DiskDict, info: str) -> None:
    """Store C{info} (Ganeti's C{originstname+NAME}) as the disk's metadata: an ext volume's C{setinfo}
    script; nothing for the other templates (as Ganeti's)."""


@declare(TMO_NORMAL, idempotent=True)
def blockdev_assemble(disk: DiskDict, inst: Inst, on_primary: Flag, idx: int) -> list[Any]:
    """Make disk C{idx} of C{inst} usable on the node.  On the primary: C{[device path, link, uri]}
    (the path C{None} for a volume the hypervisor opens itself, which has a C{uri}; the link is
    C{<run dir>/instance-disks/<instance>:<idx>}, C{None} without a path); elsewhere C{[True, True]}."""


@declare(TMO_NORMAL)
def hotplug_device(inst: Inst, action: str, dev_type: str, device: dict[str, Any], extra: Any, seq: int) -> None:
    """Hotplug into the running C{inst}: C{action} C{hotadd}/C{hotremove}/C{hotmod} of a C{disk}
    (a C{Disk.to_dict()}, assembled first for an add) or a C{nic} (a NIC dict) C{device}; C{extra}
    and C{seq} as in Ganeti (the disk's C{[link, uri]}, the device's index), not needed here."""


@declare(TMO_URGENT, idempotent=True)
def hotplug_supported(inst: Inst) -> None:
    """Succeed if devices can be hotplugged into C{inst} here (it runs, its hypervisor can)."""


@declare(TMO_NORMAL, idempotent=True)
def blockdev_shutdown(disk: DiskDict) -> None:
    """Undo C{blockdev_assemble} on the node (an ext volume is detached, a kernel rbd mapping
    removed, and the links to their device); nothing to do for file, sharedfile, blockdev and
    userspace rbd disks."""


@declare(TMO_NORMAL, idempotent=True)
def blockdev_getdimensions(disks: list[DiskDict]) -> list[list[Any] | None]:
    """C{[size in bytes, spindles]} of each disk, C{None} for one not on the node."""


@declare(TMO_NORMAL, idempotent=True)
def storage_list(su_name: str, su_args: list[Any], name: str | None, fields: list[str]) -> list[list[Any]]:
    """The storage units of type C{su_name} (C{file}, C{sharedfile}: C{su_args = [[directory]]};
    C{rados}: C{[[pool]]}), only the one called C{name} if given: one row of C{fields} (among
    C{name size used free allocatable}, MiB) each (L{ganeti.noded.storage_units})."""


@declare(TMO_URGENT, idempotent=True)
def bdev_sizes(devices: list[str]) -> dict[str, int]:
    """C{{path: size in MiB}} of the C{devices} that are block devices under C{/dev/} (others left out)."""


@declare(TMO_FAST, idempotent=True)
def extstorage_diagnose() -> list[list[Any]]:
    """The node's ExtStorage providers: C{[[name, path, ok, diagnose, [[param, help], ...]], ...]}."""


# --- transfers and exports --------------------------------------------------------------


@declare(TMO_NORMAL)
def impexp_listen(spec: dict[str, Any]) -> dict[str, Any]:
    """Listen for one transfer into C{spec["dest"]}: C{{"id", "port", "token"}}."""


@declare(TMO_NORMAL)
def impexp_send(spec: dict[str, Any]) -> dict[str, Any]:
    """Send C{spec["source"]} to a listener: C{{"id"}}."""


@declare(TMO_NORMAL, idempotent=True)
def impexp_status(ids: list[str], wait: float = 0) -> list[dict[str, Any] | None]:
    """The transfers' status; with C{wait}, once one ends or after C{wait} seconds."""


@declare(TMO_NORMAL, idempotent=True)
def impexp_abort(ids: list[str]) -> None:
    """Abort transfers."""


@declare(TMO_NORMAL, idempotent=True)
def impexp_cleanup(ids: list[str]) -> None:
    """Forget finished transfers."""


@declare(TMO_FAST)
def export_start(name: str) -> None:
    """Start a new export of instance C{name} (its disks follow as transfers)."""


@declare(TMO_FAST)
def export_finalize(name: str, config_text: str) -> None:
    """Complete an export with its C{config.ini}: it replaces the previous one."""


@declare(TMO_FAST, idempotent=True)
def export_discard(name: str) -> None:
    """Drop an unfinished export."""


@declare(TMO_NORMAL, idempotent=True)
def export_list() -> list[str]:
    """The names of the exports on the node."""


@declare(TMO_NORMAL, idempotent=True)
def export_info(name: str) -> str:
    """The C{config.ini} of an export."""


@declare(TMO_FAST)
def export_remove(name: str) -> None:
    """Remove an export."""


@declare(TMO_NORMAL)
def x509_cert_create(validity: int) -> list[str]:
    """A new key and certificate valid C{validity} seconds: C{[name, PEM]}."""


@declare(TMO_NORMAL, idempotent=True)
def x509_cert_remove(name: str) -> None:
    """Remove a key made by L{x509_cert_create}."""


# --- crypto tokens (see L{ganeti.noded.crypto_tokens}) -----------------------------------


@declare(TMO_SLOW)
def node_crypto_tokens(token_requests: list[Any]) -> list[Any]:
    """Ganeti's crypto tokens: C{[[type, action, options], ...]} with type C{ssl}, action C{get} (the SHA1
    digest of the node's C{client.pem}) or C{create} (a new C{client.pem}, signed by the node's cluster
    certificate, then its digest); the answer C{[[type, digest], ...]}."""


# --- commands and files (gnt-cluster command/copyfile; see L{ganeti.noded.commands}) -----


@declare(TMO_FAST)
def node_run_command(command: list[str], timeout: float, max_output: int, user: str) -> dict[str, Any]:
    """Run C{command} (an argv; C{["/bin/sh", "-c", text]} for a shell line) on the node within
    C{timeout} seconds: C{{"exit_code", "output", "truncated", "timed_out"}}; logged in C{commands.log}."""


@declare(TMO_FAST)
def node_copy_file(path: str, data: list[Any], mode: int, sha256: str, user: str) -> dict[str, Any]:
    """Write C{data} (C{COMPRESS}) to the absolute C{path} on the node, atomically, with C{mode}:
    C{{"path", "size", "sha256"}}; logged in C{commands.log}."""


# --- master role and failover -----------------------------------------------------------


@declare(TMO_URGENT)
def node_stop_master() -> list[str]:
    """Stop LuxiD and WConfD on the node; RAPI keeps running."""


@declare(TMO_URGENT)
def node_start_master_daemons(no_voting: bool) -> list[str]:
    """Start WConfD, RAPI and LuxiD on the node."""


@declare(TMO_URGENT)
def node_activate_master_ip(master_params: Any, use_external_mip_script: Flag) -> None:
    """Add the master IP to the master network device."""


@declare(TMO_URGENT)
def node_deactivate_master_ip(master_params: Any, use_external_mip_script: Flag) -> None:
    """Remove the master IP from the master network device."""


@declare(TMO_URGENT)
def node_promote_to_mc() -> list[str]:
    """Start RAPI: the node is a master candidate now."""


@declare(TMO_URGENT)
def node_demote_from_mc() -> list[str]:
    """Stop RAPI: the node is no longer a master candidate."""


@declare(TMO_FAST)
def master_failover(no_voting: bool) -> list[list[str]]:
    """Make the node the master: the steps of C{gnt-cluster master-failover}
    (L{ganeti.ha.takeover.failover}), run by the node's NodeD for the command
    on that node; C{[[kind, text], ...]} of what they reported (C{step},
    C{warn}, C{fail}), then C{["done", "yes" or "no"]}."""


@declare(TMO_URGENT)
def epoch_claim(epoch: int, holder: str) -> int:
    """Record master epoch C{epoch} for the new master C{holder} (once per epoch)."""


@declare(TMO_URGENT, idempotent=True)
def failover_status() -> dict[str, Any]:
    """C{{"epoch", "config_serial", "config_epoch", "queue_serial", "jobs"}} of the node."""


@declare(TMO_NORMAL, idempotent=True)
def failover_read(names: list[str]) -> dict[str, Any]:
    """C{{name: COMPRESS content or null}} of config.data and job queue files."""


# --- automatic failover (see L{ganeti.ha.election}) ----------------------------------------


@declare(TMO_URGENT, idempotent=True)
def election_status(candidate: Any) -> dict[str, Any]:
    """The node's view (L{ganeti.ha.election.NodeView} as a dict) as seen by
    C{candidate}, a node name the handler checks."""


@declare(TMO_URGENT)
def election_vote(epoch: int, candidate: str, config_serial: int, queue_serial: int, config_epoch: int = 0) -> int:
    """Vote for C{candidate} as master for C{epoch} (once per epoch, durably), or refuse saying why;
    C{config_epoch}: the epoch of the master that wrote the candidate's config (0: none recorded)."""


# --- out-of-band management --------------------------------------------------------


@declare(TMO_NORMAL)
def run_oob(oob_program: str, command: str, remote_node: str, timeout: int) -> Any:
    """Run C{oob_program command remote_node} here (the master), killed after
    C{timeout} seconds: its standard output, JSON-decoded (nothing: null);
    a non-zero exit fails with the output (L{ganeti.oob})."""


@declare(TMO_NORMAL)
def node_powercycle(hypervisor: str, hvparams: dict[str, Any] | None = None) -> str:
    """Hard powercycle this node 5 seconds after answering (the sysrq reboot,
    else C{reboot -n -f}); refused on a node whose root is not C{/} (it shares
    its machine with other nodes)."""
# --- hooks (see L{ganeti.cmdlib.hooks} and L{ganeti.noded.hooks}) ---------------------------


@declare(TMO_NORMAL)
def hooks_runner(hpath: str, phase: str, env: dict[str, str]) -> list[list[Any]]:
    """Run the node's hook scripts C{<hooks dir>/<hpath>-<phase>.d/*} with
    the environment C{env} (and nothing else): C{[[script, status, output],
    ...]}, status C{HKR_SKIP} 0, C{HKR_FAIL} 1 or C{HKR_SUCCESS} 2."""


# --- checks, validation and small node tasks (L{ganeti.noded.checks}, L{ganeti.noded.restricted}) --------


@declare(TMO_NORMAL, idempotent=True)
def node_verify_light(checkdict: dict[str, Any], cluster_name: str, hvparams: Any = None) -> dict[str, Any]:
    """L{node_verify}'s checks (Ganeti runs it on a node about to be added)."""


@declare(TMO_URGENT, idempotent=True)
def bridges_exist(bridges_list: list[str]) -> None:
    """Fails ("Missing bridges A, B") unless the node has every bridge given (Ganeti's C{BridgesExist})."""


@declare(TMO_FAST, idempotent=True)
def node_has_ip_address(address: str) -> bool:
    """Whether one of this node's interfaces holds C{address}."""


@declare(TMO_FAST, idempotent=True)
def get_file_info(file_path: str) -> list[Any]:
    """C{[true, {"size": bytes}]} of a file under the node's root, C{[false, {}]} if absent."""


@declare(TMO_URGENT, idempotent=True)
def get_watcher_pause() -> int | None:
    """Until when (epoch) the watcher is paused on this node, C{None}: not paused."""


@declare(TMO_URGENT, idempotent=True)
def set_watcher_pause(until: float | None) -> None:
    """Pause the watcher until C{until} (epoch), or end the pause (C{None})."""


@declare(TMO_FAST, idempotent=True)
def os_validate(required: bool, name: str, checks: list[str], params: dict[str, Any],
                force_variant: Flag = False) -> bool:
    """Validate OS C{name} (C{os+variant}) and its C{params} here: C{checks} among
    C{parameters}; the OS's C{verify} script runs with them.  False: the OS is
    absent and not C{required}."""


@declare(TMO_NORMAL, idempotent=True)
def hypervisor_validate_params(hvname: str, hvfull: dict[str, Any]) -> None:
    """Check the (filled) hypervisor parameters C{hvfull} on this node."""


@declare(TMO_NORMAL, idempotent=True)
def instance_migratable(inst: Inst) -> None:
    """Fails unless the instance runs here (so it can be migrated away)."""


@declare(TMO_NORMAL)
def storage_modify(su_name: str, su_args: list[Any], name: str, changes: dict[str, Any]) -> None:
    """Change fields of a storage unit (Ganeti: lvm-pv's C{allocatable}); the
    types here have no changeable field: refused, nothing changed."""


@declare(TMO_NORMAL)
def storage_execute(su_name: str, su_args: list[Any], name: str, op: str) -> Any:
    """Run operation C{op} on a storage unit (Ganeti: lvm-vg's C{fix-consistency});
    the types here have none: refused, nothing changed."""


@declare(TMO_FAST, idempotent=True)
def file_storage_dir_create(file_storage_dir: str) -> None:
    """Create a directory under the node's file or sharedfile storage directory."""


@declare(TMO_FAST)
def file_storage_dir_remove(file_storage_dir: str) -> None:
    """Remove such a directory if it is empty (absent: nothing to do)."""


@declare(TMO_FAST)
def file_storage_dir_rename(old_file_storage_dir: str, new_file_storage_dir: str) -> None:
    """Rename such a directory (already renamed: nothing to do)."""


@declare(TMO_SLOW)
def restricted_command(cmd: str) -> str:
    """Run the executable C{cmd} of the node's restricted-commands directory: its output."""


def procedure(name: str) -> Procedure[Any, Any]:
    """The declaration of procedure C{name}.

    @raise ContractError: no procedure has that name
    """
    found = TABLE.get(name)
    if found is None:
        raise ContractError("Unknown procedure %r" % (name,))
    return found


def untyped(name: str, args: list[Any] | tuple[Any, ...]) -> Call[Any]:
    """A call of procedure C{name} with a positional list, checked against
    its declaration (for callers that choose the procedure at run time).

    @raise ContractError: unknown procedure or arguments that do not fit
    """
    declared = procedure(name)
    declared.check(args)
    return Call(name, tuple(args), declared.timeout)
