"""Small node procedures of Ganeti's backend: checks, validation, files.

  - C{node_verify_light}: L{NodeProcedures.node_verify}'s checks, as Ganeti
    (it is the call for a node about to join);
  - C{bridges_exist}: fails naming the bridges the node lacks (Ganeti's
    C{BridgesExist}: a bridge is a device with a C{bridge} directory in
    C{/sys/class/net}, as seen from the node's network namespace);
  - C{node_has_ip_address}: whether an interface here holds the address
    (it can be bound, as Ganeti's C{IPAddress.Own});
  - C{get_file_info}: C{[exists, {"size": bytes}]} of a path under the root;
  - C{get_watcher_pause} / C{set_watcher_pause}: the node's C{watcher.pause}
    file (L{ganeti.heartbeat.pause});
  - C{os_validate}: an OS definition, its variant and parameters, and its
    C{verify} script run with C{OSP_*} variables (Ganeti's C{ValidateOS});
  - C{hypervisor_validate_params}: parameter types, what the hypervisor
    does not support, and the files the parameters name on this node;
  - C{instance_migratable}: the instance runs here;
  - C{storage_modify} / C{storage_execute}: no storage type here has a
    changeable field or an operation (Ganeti's only are lvm-pv's
    C{allocatable} and lvm-vg's C{fix-consistency}): refused, changing nothing;
  - C{file_storage_dir_create/remove/rename}: directories below the node's
    file or sharedfile storage directory only (Ganeti's
    C{CheckFileStoragePath}).
"""

from __future__ import annotations

import errno
import os
import socket
import time
from typing import Any, Callable

from ganeti import errors, hvconstants
from ganeti.asyncutil import Network, ProgramTimeout
from ganeti.backend import osapi
from ganeti.heartbeat import pause as watcher_pause
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.noded.instances import decode
from ganeti.noded.storage_units import TYPES as STORAGE_TYPES
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.rpc import procedures, wire
from ganeti.rpc.instances import node_path

#: The checks C{os_validate} knows (Ganeti's C{OS_VALIDATE_CALLS}).
OS_CHECKS = ("parameters",)
#: Seconds an OS's verify script may run.
OS_VERIFY_TIMEOUT = 300.0
#: Hypervisor parameters naming a file that must exist on the node when set
#: (Ganeti's C{REQ_FILE_CHECK}/C{OPT_FILE_CHECK} of the kvm hypervisor).
HV_FILE_PARAMS = ("kernel_path", "initrd_path", "cdrom_image_path", "cdrom2_image_path", "vnc_password_file",
                  "kvm_path")


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
}
_TYPE_NAMES = {"bool": "a boolean", "int": "an integer", "string": "a string"}


#: where Linux shows the network devices of the namespace (a bridge has a C{bridge} directory)
SYSFS_NET = "/sys/class/net"


def missing_bridges(bridges: Any, sysfs_net: str = SYSFS_NET) -> list[str]:
    """The bridges of C{bridges} that do not exist (Ganeti's C{utils.BridgeExists});
    a name that cannot be a device's counts as missing."""
    _check(isinstance(bridges, list) and all(isinstance(b, str) for b in bridges),
           "bridges_list must be a list of bridge names")
    return [bridge for bridge in bridges
            if not (bridge and "/" not in bridge and bridge not in (".", "..")
                    and os.path.isdir(os.path.join(sysfs_net, bridge, "bridge")))]


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RpcFailure(message)


class CheckProcedures:
    """The procedures above for the node rooted at C{paths}.

    @param node: the node's other procedures (L{ganeti.noded.procedures.NodeProcedures}:
        C{node_verify}, the instances)
    """

    def __init__(self, paths: Paths, reactor: IReactor, node: Any) -> None:
        self.paths = paths
        self._reactor = reactor
        self._node = node
        self.clock = time.time
        self.sysfs_net = SYSFS_NET

    @handler(procedures.node_verify_light)
    async def node_verify_light(self, checkdict: Any, cluster_name: Any, hvparams: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._node.node_verify(checkdict, cluster_name, hvparams)
        return result

    @handler(procedures.bridges_exist)
    def bridges_exist(self, bridges_list: Any) -> None:
        missing = missing_bridges(bridges_list, self.sysfs_net)
        if missing:
            raise RpcFailure("Missing bridges %s" % ", ".join(missing))

    @handler(procedures.node_has_ip_address)
    def node_has_ip_address(self, address: Any) -> bool:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        try:
            socket.inet_pton(family, address)
        except OSError:
            raise RpcFailure("Invalid IP address %.100r" % (address,)) from None
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind((address, 0))
            except OSError as e:
                if e.errno == errno.EADDRNOTAVAIL:
                    return False
                raise RpcFailure("Cannot check address %s: %s" % (address, e)) from None
        return True

    @handler(procedures.get_file_info)
    def get_file_info(self, file_path: Any) -> list[Any]:
        try:
            real = wire.localize(self.paths.root, file_path)
        except wire.RpcWireError as e:
            raise RpcFailure(str(e)) from None
        try:
            return [True, {"size": os.stat(real).st_size}]
        except OSError:
            return [False, {}]

    # --- the watcher's pause ------------------------------------------------------------

    @handler(procedures.get_watcher_pause)
    def get_watcher_pause(self) -> int | None:
        until = watcher_pause.read_pause(watcher_pause.pause_file(self.paths.data_dir), self.clock())
        return None if until is None else int(until)

    @handler(procedures.set_watcher_pause)
    def set_watcher_pause(self, until: Any) -> None:
        _check(until is None or (isinstance(until, (int, float)) and not isinstance(until, bool)),
               "Duration must be numeric")
        watcher_pause.write_pause(watcher_pause.pause_file(self.paths.data_dir), until)

    # --- validation ---------------------------------------------------------------------

    @handler(procedures.os_validate)
    async def os_validate(self, required: Any, name: Any, checks: Any, params: Any,
                          force_variant: Any = False) -> bool:
        unknown = sorted(set(checks) - set(OS_CHECKS))
        _check(not unknown, "Unknown checks required for OS %s: %s" % (name, ", ".join(map(str, unknown))))
        _check(all(isinstance(key, str) for key in params), "OS parameters must have string names")
        os_name, variant = osapi.split_name(name)
        try:
            definition, chosen = osapi.find(self.paths, os_name)
        except osapi.InvalidOS as e:
            if required:
                raise RpcFailure(str(e)) from None
            return False
        variants = definition.variants if definition.api_version >= osapi.API_VARIANTS else ()
        if not force_variant:
            if not variants:
                _check(not variant, "OS '%s' does not support variants ('%s' passed)" % (os_name, variant))
            else:
                _check(bool(variant), "OS name '%s' must include a variant" % name)
                _check(variant in variants, "OS '%s' does not support variant '%s'" % (os_name, variant))
        chosen = variant or chosen
        if definition.api_version < osapi.API_PARAMETERS:
            return True
        if "parameters" in checks:
            supported = {p[0] for p in definition.parameters}
            extra = sorted(set(params) - supported)
            _check(not extra, "The following parameters are not supported by the OS %s: %s"
                   % (definition.name, ", ".join(extra)))
        verify = definition.scripts.get(osapi.SCRIPT_VERIFY)
        if verify is None:
            return True
        env = {"PATH": osapi.SCRIPT_PATH, "OS_API_VERSION": str(definition.api_version), "OS_NAME": definition.name,
               "OS_VARIANT": chosen or variant, "DEBUG_LEVEL": "0"}
        for key, value in params.items():
            env["OSP_" + key.upper().replace("-", "_")] = "" if value is None else str(value)
        try:
            out, err, code = await Network(self._reactor).run(verify, list(checks), OS_VERIFY_TIMEOUT, env=env,
                                                              path=definition.path)
        except ProgramTimeout:
            raise RpcFailure("OS validation script of %s ran longer than %d seconds" % (name, OS_VERIFY_TIMEOUT)) \
                from None
        if code != 0:
            output = (out + err).decode("utf-8", "replace").strip()[-2000:]
            raise RpcFailure("OS validation script failed (exited with exit code %d), output: %s" % (code, output))
        return True

    @handler(procedures.hypervisor_validate_params)
    def hypervisor_validate_params(self, hvname: Any, hvfull: Any) -> None:
        types = hvconstants.HV_PARAMETER_TYPES.get(hvname)
        if types is None:
            raise RpcFailure("Hypervisor '%s' is not supported" % (hvname,))
        for key, value in hvfull.items():
            _check(key in types, "Unknown hypervisor parameter '%s' for hypervisor '%s'" % (key, hvname))
            _check(value is None or _TYPE_CHECKS[types[key]](value),
                   "Hypervisor parameter '%s' for hypervisor '%s' must be %s, got %r"
                   % (key, hvname, _TYPE_NAMES[types[key]], value))
        params = dict(hvfull)
        self._node.instances.hypervisor(hvname)  # known and usable on this node
        if hvname != "kvm":
            return
        from ganeti.backend.hypervisor import kvm_cmdline

        try:
            kvm_cmdline._refuse_unsupported(params)
        except errors.GenericError as e:
            raise RpcFailure(str(e)) from None
        for key in HV_FILE_PARAMS:
            value = params.get(key)
            if not value:
                continue
            _check(isinstance(value, str) and value.startswith("/"),
                   "Parameter '%s' must be an absolute path, not %r" % (key, value))
            _check(os.path.isfile(node_path(self.paths.root, value)),
                   "Parameter '%s' fails validation: not a file: %s" % (key, value))

    @handler(procedures.instance_migratable)
    async def instance_migratable(self, inst: Any) -> None:
        instance, _disks = decode(inst)
        running = await self._node.instances.instance_list([instance.hypervisor or "fake"])
        _check(instance.name in running, "Instance %s is not running" % instance.name)

    # --- storage units ------------------------------------------------------------------

    def _storage_type(self, su_name: Any) -> None:
        _check(su_name in STORAGE_TYPES,
               "Unknown storage type %.100r (here: %s)" % (su_name, ", ".join(STORAGE_TYPES)))

    @handler(procedures.storage_modify)
    def storage_modify(self, su_name: Any, su_args: Any, name: Any, changes: Any) -> None:
        self._storage_type(su_name)
        raise RpcFailure("Storage units of type '%s' can not be modified" % su_name)

    @handler(procedures.storage_execute)
    def storage_execute(self, su_name: Any, su_args: Any, name: Any, op: Any) -> Any:
        self._storage_type(su_name)
        raise RpcFailure("Operation '%s' is not supported on storage units of type '%s'" % (op, su_name))

    # --- file storage directories -------------------------------------------------------

    def _storage_dir(self, path: Any) -> str:
        """The real path of C{path}, a directory below one of the node's
        file storage directories."""
        _check(isinstance(path, str) and path.startswith("/") and "\0" not in path,
               "File storage directory must be an absolute path, not %.100r" % (path,))
        real = node_path(self.paths.root, os.path.normpath(path))
        bases = [os.path.normpath(base) for base in self._node.instances.storage_dirs() if base]
        _check(any(real.startswith(base + "/") for base in bases),
               "File storage directory '%s' is not below the node's file storage directories" % path)
        return real

    @handler(procedures.file_storage_dir_create)
    def file_storage_dir_create(self, file_storage_dir: Any) -> None:
        real = self._storage_dir(file_storage_dir)
        if os.path.exists(real):
            _check(os.path.isdir(real), "Specified storage dir '%s' is not a directory" % file_storage_dir)
            return
        try:
            os.makedirs(real, 0o750)
        except OSError as e:
            raise RpcFailure("Cannot create file storage directory '%s': %s" % (file_storage_dir, e)) from None

    @handler(procedures.file_storage_dir_remove)
    def file_storage_dir_remove(self, file_storage_dir: Any) -> None:
        real = self._storage_dir(file_storage_dir)
        if not os.path.exists(real):
            return
        _check(os.path.isdir(real), "Specified Storage directory '%s' is not a directory" % file_storage_dir)
        try:
            os.rmdir(real)
        except OSError as e:
            raise RpcFailure("Cannot remove file storage directory '%s': %s" % (file_storage_dir, e)) from None

    @handler(procedures.file_storage_dir_rename)
    def file_storage_dir_rename(self, old_file_storage_dir: Any, new_file_storage_dir: Any) -> None:
        old, new = self._storage_dir(old_file_storage_dir), self._storage_dir(new_file_storage_dir)
        if os.path.exists(new):
            _check(not os.path.exists(old), "Cannot rename '%s' to '%s': both locations exist"
                   % (old_file_storage_dir, new_file_storage_dir))
            return
        _check(os.path.isdir(old), "Specified storage dir '%s' is not a directory" % old_file_storage_dir)
        try:
            os.rename(old, new)
        except OSError as e:
            raise RpcFailure("Cannot rename '%s' to '%s': %s" % (old_file_storage_dir, new_file_storage_dir, e)) \
                from None
