"""The node's hotplug procedures: C{hotplug_supported} and C{hotplug_device}.

A disk to hot-add was assembled by the master first (C{blockdev_assemble});
its device path (or, for a volume the hypervisor opens itself, its URI) is
found here the way C{instance_start} finds it, so the running guest gets
the disk exactly as a fresh start would give it.  A disk to hot-remove is
found by that same path.  The hypervisor does the rest (the kvm one through
QMP, L{ganeti.backend.hypervisor.kvm_hotplug}); one without hotplug methods
(fake) refuses with a clear error.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.noded.instances import InstanceProcedures, decode, decode_disk
from ganeti.objects import NIC
from ganeti.rpc import procedures

ACTIONS = ("hotadd", "hotremove", "hotmod")
DEV_TYPES = ("disk", "nic")


class HotplugProcedures:
    """Hotplug into the running instances of the node of C{instances}."""

    log = Logger()

    def __init__(self, instances: InstanceProcedures) -> None:
        self.instances = instances

    def _hypervisor(self, instance: Any) -> Any:
        hyper = self.instances.hypervisor(instance.hypervisor)
        if not (hasattr(hyper, "hotplug_device") and hasattr(hyper, "hotplug_supported")):
            raise RpcFailure("Hotplug is not supported by hypervisor %s" % instance.hypervisor)
        return hyper

    @handler(procedures.hotplug_supported)
    async def hotplug_supported(self, inst: Any) -> None:
        instance, _disks = decode(inst)
        hyper = self._hypervisor(instance)
        try:
            await defer.maybeDeferred(hyper.hotplug_supported, instance)
        except errors.GenericError as exc:
            raise RpcFailure(str(exc)) from None
        return None

    @handler(procedures.hotplug_device)
    async def hotplug_device(self, inst: Any, action: Any, dev_type: Any, device: Any, extra: Any,
                             seq: Any) -> None:
        instance, _disks = decode(inst)
        if action not in ACTIONS:
            raise RpcFailure("Unknown hotplug action %.100r (one of %s)" % (action, ", ".join(ACTIONS)))
        if dev_type not in DEV_TYPES:
            raise RpcFailure("Unknown hotplug device type %.100r (one of %s)" % (dev_type, ", ".join(DEV_TYPES)))
        if not isinstance(device, dict):
            raise RpcFailure("The device to hotplug must be a dict, not %.100r" % (device,))
        hyper = self._hypervisor(instance)
        path: str | None = None
        if dev_type == "disk":
            disk = decode_disk(device, "the disk to hotplug")
            ((_disk, found, uri),) = self.instances.block_devices(instance, [disk])
            path = uri or found
            data = disk.to_dict()
        else:
            try:
                nic = NIC.from_dict(device)
            except (TypeError, ValueError, AttributeError) as exc:
                raise RpcFailure("Invalid NIC to hotplug: %s" % exc) from None
            if not isinstance(nic.mac, str) or not isinstance(nic.nicparams or {}, dict):
                raise RpcFailure("The NIC to hotplug needs a MAC and nicparams")
            data = nic.to_dict()
        await self.instances._hv_call("Could not hotplug (%s) a %s into instance %s" % (action, dev_type,
                                                                                       instance.name),
                                      hyper.hotplug_device, instance, action, dev_type, data, path)
        self.log.info("hotplug {action} of a {kind} into instance {name}: done", action=action, kind=dev_type,
                      name=instance.name)
        return None
