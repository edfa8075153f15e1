"""Forthcoming instances: the checks of C{gnt-instance add --forthcoming}
and C{--commit} (L{ganeti.cmdlib.instance.LUInstanceCreate}); pure.

A forthcoming instance is recorded in the configuration as Ganeti records
it: the instance and its disks carry C{forthcoming: true}, its name, uuid,
nodes, MAC addresses, pool addresses and disk names (file paths, rbd images,
ExtStorage volumes) are reserved, but no disk exists and nothing runs.

C{--commit} turns it into a real instance: the same name and uuid, on the
nodes it was reserved on, with the disks it reserved (created now); its
other parameters (OS, NICs, back-end and hypervisor parameters, tags) come
from the commit's opcode, as Ganeti's, which builds the instance afresh.
A NIC left at C{mac=auto} keeps the MAC reserved for that NIC, and one on the
same network with C{ip=pool} (or the reserved address) keeps its reserved
address, so that a reservation holds what it reserved.  The disk template
and the disks' count and sizes must be those reserved.
"""

from __future__ import annotations

from typing import Any, Iterable

from ganeti import errors
from ganeti.objects import ConfigData, Instance

#: NIC values that ask for a generated MAC or a pool address
MAC_AUTO = ("auto", "generate")
IP_POOL = "pool"


def check_flags(forthcoming: bool, commit: bool, mode: str) -> None:
    """Refuse C{forthcoming} with C{commit}, and either with an import."""
    if forthcoming and commit:
        raise errors.OpPrereqError("Forthcoming generation and committing are mutually exclusive",
                                   errors.ECODE_INVAL)
    if (forthcoming or commit) and mode != "create":
        raise errors.OpPrereqError("Forthcoming instances can only be created, not imported (mode %s)" % mode,
                                   errors.ECODE_INVAL)


def _find(cfg: ConfigData, name: str) -> Instance | None:
    inst = cfg.instances.get(name) or cfg.find_instance(name)
    if inst is not None:
        return inst
    short = [i for i in cfg.instances.values() if i.name and i.name.split(".")[0] == name]
    return short[0] if len(short) == 1 else None


def reserved_instance(cfg: ConfigData, name: str) -> Instance:
    """The forthcoming instance called C{name} (or with that uuid, or that
    short name), which a commit turns into a real one."""
    inst = _find(cfg, name)
    if inst is None:
        raise errors.OpPrereqError("Instance %s unknown: --commit needs an instance made with --forthcoming"
                                   % name, errors.ECODE_NOENT)
    if not inst.forthcoming:
        raise errors.OpPrereqError("Instance %s (with uuid %s) not forthcoming but --commit was passed"
                                   % (inst.name, inst.uuid), errors.ECODE_STATE)
    return inst


def still_reserved(cfg: ConfigData, uuid: str, name: str, owned_nodes: Iterable[str]) -> Instance:
    """The forthcoming instance C{uuid} once its locks are held: still there,
    still forthcoming, on nodes whose locks the commit holds."""
    inst = cfg.instances.get(uuid)
    if inst is None:
        raise errors.OpPrereqError("Instance %s disappeared from the cluster while waiting for locks" % name,
                                   errors.ECODE_STATE)
    if not inst.forthcoming:
        raise errors.OpPrereqError("Instance %s (with uuid %s) is no longer forthcoming" % (inst.name, uuid),
                                   errors.ECODE_STATE)
    owned = set(owned_nodes)
    if not set(instance_nodes(cfg, inst)) <= owned:
        raise errors.OpPrereqError("Forthcoming instance %s nodes changed since locks were acquired; retry the"
                                   " operation" % inst.name, errors.ECODE_STATE)
    return inst


def instance_nodes(cfg: ConfigData, inst: Instance) -> list[str]:
    """The primary node of C{inst} and its disks' nodes, primary first."""
    nodes = [inst.primary_node or ""]
    for uuid in inst.disks or []:
        disk = cfg.disks.get(uuid)
        for node in (disk.nodes if disk is not None else None) or []:
            if node not in nodes:
                nodes.append(node)
    return nodes


def check_primary(cfg: ConfigData, inst: Instance, pnode: str | None) -> None:
    """A commit's C{pnode}, if given, must be the node C{inst} was reserved on."""
    if not pnode:
        return
    primary = cfg.nodes.get(inst.primary_node or "")
    if pnode in (inst.primary_node, primary.name if primary else None):
        return
    raise errors.OpPrereqError("Forthcoming instance %s is reserved on node %s, not on %s: commit it there"
                               " (or fail it over first)" % (inst.name, primary.name if primary else "?", pnode),
                               errors.ECODE_INVAL)


def check_spec(cfg: ConfigData, inst: Instance, template: str | None, disks: list[dict[str, Any]]) -> None:
    """The commit's disk template and disks must be those reserved."""
    if template != inst.disk_template:
        raise errors.OpPrereqError("Forthcoming instance %s was reserved with disk template %s, not %s"
                                   % (inst.name, inst.disk_template, template), errors.ECODE_INVAL)
    reserved = [cfg.disks[u].size for u in inst.disks or [] if u in cfg.disks]
    if len(disks) != len(reserved):
        raise errors.OpPrereqError("Forthcoming instance %s has %d reserved disks, not %d"
                                   % (inst.name, len(reserved), len(disks)), errors.ECODE_INVAL)
    given = [d.get("size") for d in disks]
    if template != "blockdev" and given != reserved:  # adopted devices: their own size
        raise errors.OpPrereqError(
            "Forthcoming instance %s has reserved disks of %s MiB, not %s: give the same disks"
            % (inst.name, ", ".join(str(s) for s in reserved), ", ".join(str(s) for s in given)),
            errors.ECODE_INVAL)


def kept_addresses(inst: Instance, nics: list[dict[str, Any]]) -> dict[int, str]:
    """NIC index -> the address reserved for it that the commit keeps: the
    NIC is on the same network as the reserved one, and asks for a pool
    address or for that very address."""
    kept: dict[int, str] = {}
    for index, nic in enumerate(nics):
        if index >= len(inst.nics):
            break
        old = inst.nics[index]
        if old.ip and nic.get("network") == old.network and nic.get("ip") in (IP_POOL, old.ip):
            kept[index] = old.ip
    return kept


def kept_macs(inst: Instance, nics: list[dict[str, Any]]) -> dict[int, str]:
    """NIC index -> the MAC reserved for it, for NICs left at C{mac=auto}."""
    kept: dict[int, str] = {}
    for index, nic in enumerate(nics):
        mac = inst.nics[index].mac if index < len(inst.nics) else None
        if mac and nic.get("mac") in MAC_AUTO:
            kept[index] = mac
    return kept
