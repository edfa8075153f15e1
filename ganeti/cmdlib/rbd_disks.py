"""The master's side of the rbd disk template (Ceph images; node side in
L{ganeti.backend.storage.rbd} and L{ganeti.noded.rbd}).

An rbd disk is named C{<fresh UUID>.rbd.disk<N>} (N the disk's index), has
C{logical_id = ["rbd", name]} and no nodes of its own (C{Disk.nodes = []}:
every node of the cluster reaches the pool, so the instance moves by
migration or failover without copying).  Its C{params} hold the pool and
access mode it was created with: the disk's own C{access} (C{--disk
N:access=...}) over the node group's and then the cluster's disk
parameters (C{-D rbd:pool=...,access=...}) over Ganeti's defaults
(C{pool=rbd}, C{access=kernelspace}).  Ganeti stores only a given
C{access} and fills the rest on every RPC; we store the pool too, so that a
later change of the cluster's C{pool} does not lose the images already
made (they stay where they are).

C{access=userspace} (qemu opens the image through librbd) is accepted with
the kvm hypervisor, as in Ganeti, and with the fake one (which stands in for
it in tests); C{kernelspace} needs the kernel rbd module on the node, which
the node checks before it creates anything.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti import rbd_params as rbd
from ganeti.objects import ConfigData, Disk, new_uuid

DT_RBD = rbd.DT_RBD
#: the hypervisors that can open a userspace disk themselves
USERSPACE_HYPERVISORS = ("kvm", "fake")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def check_cluster_params(params: Any) -> None:
    """Refuse bad values among C{-D rbd:...} (the keys and types are checked
    with every template's, in L{ganeti.cmdlib.group_params}).
    @raise errors.OpPrereqError: a bad pool name or access mode
    """
    if not isinstance(params, dict):
        return
    values = {k: v for k, v in params.items() if k in rbd.DEFAULTS and isinstance(v, str) and v != "default"}
    try:
        rbd.disk_params(values)
    except rbd.RbdError as exc:
        raise _invalid(str(exc)) from None


def filled_params(cfg: ConfigData, group_uuid: str | None, own: dict[str, Any]) -> dict[str, Any]:
    """The pool and access of a new rbd disk (see the module docstring).
    @raise errors.OpPrereqError: a bad value at any level
    """
    group = cfg.nodegroups.get(group_uuid or "")
    layers = [rbd.DEFAULTS, (cfg.cluster.diskparams or {}).get(DT_RBD) or {},
              ((group.diskparams or {}).get(DT_RBD) or {}) if group is not None else {}, own]
    filled: dict[str, Any] = {}
    for layer in layers:
        filled.update({k: v for k, v in layer.items() if k in rbd.DEFAULTS and v is not None})
    try:
        pool, access = rbd.disk_params(filled)
    except rbd.RbdError as exc:
        raise _invalid(str(exc)) from None
    return {rbd.PARAM_POOL: pool, rbd.PARAM_ACCESS: access}


def check_access(spec: dict[str, Any], index: int) -> dict[str, Any]:
    """The disk's own rbd parameters from its C{--disk} spec (only C{access})."""
    access = spec.get(rbd.PARAM_ACCESS)
    if access is None:
        return {}
    if access not in rbd.ACCESS_MODES:
        raise _invalid("Disk %d: invalid access mode %r (one of %s)" % (index, access, ", ".join(rbd.ACCESS_MODES)))
    return {rbd.PARAM_ACCESS: access}


def new_disks(cfg: ConfigData, group_uuid: str | None, hypervisor: str, specs: list[dict[str, Any]],
              base_index: int = 0) -> list[Disk]:
    """The records of new rbd disks C{specs} (size, mode, name, access).
    @raise errors.OpPrereqError: bad parameters, or userspace access with a
        hypervisor that cannot use it
    """
    disks = []
    for offset, spec in enumerate(specs):
        index = base_index + offset
        params = filled_params(cfg, group_uuid, check_access(spec, index))
        if params[rbd.PARAM_ACCESS] == rbd.ACCESS_USER and hypervisor not in USERSPACE_HYPERVISORS:
            raise _invalid("Disk %d: rbd access 'userspace' is not supported with hypervisor %s (only %s)"
                           % (index, hypervisor, ", ".join(USERSPACE_HYPERVISORS)))
        disks.append(Disk(
            uuid=new_uuid(), name=spec.get("name"), dev_type=DT_RBD,
            logical_id=[rbd.DRIVER, "%s.rbd.disk%d" % (new_uuid(), index)], nodes=[],
            iv_name="disk/%d" % index, size=spec["size"], mode=spec.get("mode") or "rw", params=params,
        ))
    return disks
