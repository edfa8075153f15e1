"""The master's side of the C{ext} (ExtStorage) and C{blockdev} (adopted)
disk templates; the node side is L{ganeti.noded.extstorage}.

C{ext}: every disk names its provider (C{--disk N:size=64M,provider=P,...});
its other keys that are not generic disk keys are the provider's parameters
(stored in the disk's C{params} with C{provider} and a given C{access}).
The disk is named C{<fresh UUID>.ext.disk<N>}, its C{logical_id} is
C{[provider, name]} and it has no nodes of its own (shared storage: every
node of the group reaches it).  Before anything is made the primary node's
C{extstorage_diagnose} must list the provider as valid and its
C{parameters.list} must know every parameter given.

C{blockdev}: every disk adopts an existing block device
(C{--disk N:adopt=/dev/...}); its size is the device's (C{bdev_sizes} on
the primary), C{logical_id = ["manual", path]}.  The cluster never creates,
grows or removes the device.  Ganeti wants the path under C{/dev/disk/}; we
accept any absolute path under C{/dev/} whose device the primary sees (tests
can make C{/dev/loopN} but not entries under the host's C{/dev/disk/}).  A
path that is missing, not a block device, given twice or already adopted by
an instance is refused before anything changes.  No adoption with an
allocator (as Ganeti).
"""

from __future__ import annotations

import re
from typing import Any

from ganeti import errors
from ganeti.cmdlib import instance_params as params
from ganeti.objects import ConfigData, Disk, new_uuid
from ganeti.rpc import procedures

DT_EXT = "ext"
DT_BLOCK = "blockdev"
TEMPLATES = (DT_EXT, DT_BLOCK)
BLOCKDEV_DRIVER = "manual"
PARAM_PROVIDER = "provider"
PARAM_ACCESS = "access"
ACCESS_MODES = ("kernelspace", "userspace")
#: Ganeti's generic disk keys (C{IDISK_PARAMS}): never provider parameters
GENERIC_KEYS = ("size", "spindles", "mode", "adopt", "vg", "metavg", "provider", "name", "access", "uuid")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_PARAM_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def check_disk(template: str | None, spec: Any, index: int) -> dict[str, Any]:
    """One disk of an instance creation (L{params.check_disk}, plus the
    C{ext} provider and parameters or the C{blockdev} adopted path)."""
    if template not in TEMPLATES or not isinstance(spec, dict):
        return params.check_disk(spec, index)
    if template == DT_EXT:
        provider = spec.get(PARAM_PROVIDER)
        if not isinstance(provider, str) or not _NAME_RE.match(provider):
            raise _invalid("Disk %d: template ext needs an ExtStorage provider (provider=NAME), not %r"
                           % (index, provider))
        if "adopt" in spec:
            raise _invalid("Disk %d: disk adoption ('adopt') is only possible with template blockdev" % index)
        access = spec.get(PARAM_ACCESS)
        if access is not None and access not in ACCESS_MODES:
            raise _invalid("Disk %d: invalid access mode %r (one of %s)" % (index, access, ", ".join(ACCESS_MODES)))
        ext_params = {}
        for key, value in spec.items():
            if key in GENERIC_KEYS:
                continue
            if not isinstance(key, str) or not _PARAM_RE.match(key):
                raise _invalid("Disk %d: invalid ExtStorage parameter name %r" % (index, key))
            if not isinstance(value, (str, int, float)) or isinstance(value, bool) or "\0" in str(value):
                raise _invalid("Disk %d: invalid value of ExtStorage parameter %s: %r" % (index, key, value))
            ext_params[key] = str(value)
        out = params.check_disk({k: v for k, v in spec.items() if k in GENERIC_KEYS and k not in
                                 (PARAM_PROVIDER, PARAM_ACCESS, "uuid")}, index)
        out[PARAM_PROVIDER] = provider
        out["ext_params"] = ext_params
        if access is not None:
            out[PARAM_ACCESS] = access
        return out
    adopt = spec.get("adopt")
    if not isinstance(adopt, str) or not adopt.startswith("/dev/") or ".." in adopt.split("/") or "\0" in adopt:
        raise _invalid("Disk %d: template blockdev needs the block device to adopt (adopt=/dev/...), not %r"
                       % (index, adopt))
    if PARAM_PROVIDER in spec:
        raise _invalid("Disk %d: an ExtStorage provider is only possible with template ext" % index)
    out = params.check_disk({k: v for k, v in spec.items() if k != "adopt"}, index, require_size=False)
    out["adopt"] = adopt
    return out


def generic_keys(mod: Any) -> Any:
    """The generic disk keys of a disk modification (the others may be
    ExtStorage parameters: L{modified_params}); not a dict: as it is (for
    the check's error)."""
    if not isinstance(mod, dict):
        return mod
    return {k: v for k, v in mod.items() if k in GENERIC_KEYS and k not in (PARAM_PROVIDER, PARAM_ACCESS)}


def modified_params(disk: Disk, mod: dict[str, Any], index: int
                    ) -> tuple[dict[str, Any], list[tuple[str, str]], dict[str, str]] | None:
    """Ganeti's C{--disk N:modify,KEY=VALUE} of an ext disk: its parameters
    after the change (C{default} removes one), the changes as shown, and
    the parameters set (for the provider's check); C{None} when C{mod}
    changes none.  Provider and access cannot change; a disk of another
    template takes no other keys.
    @raise errors.OpPrereqError: what is wrong (nothing changed then)"""
    others = sorted(k for k in mod if k not in GENERIC_KEYS or k in (PARAM_PROVIDER, PARAM_ACCESS))
    if not others:
        return None
    if disk.dev_type != DT_EXT:
        if PARAM_ACCESS in others and len(others) == 1:
            return None  # the rbd template's access (ganeti.cmdlib.instance_params.check_disk)
        raise _invalid("Disk %d: unknown parameter '%s' (only disks of template ext take ExtStorage parameters)"
                       % (index, others[0]))
    for key in (PARAM_ACCESS, PARAM_PROVIDER):
        if key in mod:
            raise _invalid("Disk '%s' parameter change is not possible" % key)
    stored = dict(disk.params or {})
    shown: list[tuple[str, str]] = []
    given: dict[str, str] = {}
    for key in others:
        value = mod[key]
        if not isinstance(key, str) or not _PARAM_RE.match(key):
            raise _invalid("Disk %d: invalid ExtStorage parameter name %r" % (index, key))
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or "\0" in str(value):
            raise _invalid("Disk %d: invalid value of ExtStorage parameter %s: %r" % (index, key, value))
        if str(value).lower() == params.VALUE_DEFAULT:
            stored.pop(key, None)
            shown.append((key, params.VALUE_DEFAULT))
        else:
            stored[key] = given[key] = str(value)
            shown.append((key, str(value)))
    return stored, shown, given


async def check_params_on_node(lu: Any, node_uuid: str, changes: list[tuple[int, Disk, dict[str, str]]]) -> None:
    """Refuse parameters the disks' provider (as the node sees it) does not take."""
    specs = [{PARAM_PROVIDER: disk.logical_id[0] if isinstance(disk.logical_id, list) else None,
              "ext_params": given} for _index, disk, given in changes]
    await check_on_node(lu, node_uuid, DT_EXT, specs, indexes=[index for index, _disk, _given in changes])


async def check_on_node(lu: Any, node_uuid: str, template: str, specs: list[dict[str, Any]],
                        indexes: list[int] | None = None) -> None:
    """Refuse, before anything is made, an ext provider the node lacks or
    parameters it does not know, and adopted devices that are missing; fill
    in the sizes of adopted devices.
    @raise errors.OpPrereqError: what is wrong, naming the node
    """
    from ganeti.cmdlib import instance_utils as iu

    node = iu.node_name(lu.cfg, node_uuid)
    if template == DT_EXT:
        found = await iu.call_node(lu, node_uuid, procedures.extstorage_diagnose.call(),
                                   what="list the ExtStorage providers of node %s" % node)
        providers = {entry[0]: entry for entry in found or [] if isinstance(entry, list) and len(entry) == 5}
        for position, spec in enumerate(specs):
            index = indexes[position] if indexes is not None else position
            entry = providers.get(spec[PARAM_PROVIDER])
            if entry is None:
                raise errors.OpPrereqError("Disk %d: ExtStorage provider %s not found on node %s (found: %s)"
                                           % (index, spec[PARAM_PROVIDER], node, ", ".join(sorted(providers))
                                              or "none"), errors.ECODE_NOENT)
            _name, path, ok, why, supported = entry
            if not ok:
                raise errors.OpPrereqError("Disk %d: ExtStorage provider %s is invalid on node %s (%s): %s"
                                           % (index, spec[PARAM_PROVIDER], node, path, why), errors.ECODE_INVAL)
            names = [p[0] for p in supported]
            unknown = sorted(k for k in spec["ext_params"] if k not in names)
            if unknown:
                raise _invalid("Disk %d: ExtStorage provider %s does not take the parameter(s) %s (it takes: %s)"
                               % (index, spec[PARAM_PROVIDER], ", ".join(unknown), ", ".join(names) or "none"))
        return
    if template != DT_BLOCK:
        return
    wanted = [spec["adopt"] for spec in specs]
    if len(set(wanted)) != len(wanted):
        raise _invalid("The same block device is adopted twice")
    adopted = {d.logical_id[1] for d in lu.cfg.disks.values()
               if d.dev_type == DT_BLOCK and isinstance(d.logical_id, list) and len(d.logical_id) == 2}
    taken = sorted(set(wanted) & adopted)
    if taken:
        raise errors.OpPrereqError("Block device(s) already adopted by an instance: %s" % ", ".join(taken),
                                   errors.ECODE_NOTUNIQUE)
    sizes = await iu.call_node(lu, node_uuid, procedures.bdev_sizes.call(wanted),
                               what="get the sizes of block devices on node %s" % node)
    missing = [path for path in wanted if not isinstance((sizes or {}).get(path), int)]
    if missing:
        raise errors.OpPrereqError("Missing block device(s) on node %s (absent, or not a block device under"
                                   " /dev/): %s" % (node, ", ".join(missing)), errors.ECODE_NOENT)
    for spec in specs:
        spec["size"] = sizes[spec["adopt"]]


def new_disks(cfg: ConfigData, template: str, specs: list[dict[str, Any]], base_index: int = 0) -> list[Disk]:
    """The records of new ext or blockdev disks (see the module docstring)."""
    disks = []
    for offset, spec in enumerate(specs):
        index = base_index + offset
        if template == DT_EXT:
            stored = dict(spec["ext_params"], provider=spec[PARAM_PROVIDER])
            if spec.get(PARAM_ACCESS):
                stored[PARAM_ACCESS] = spec[PARAM_ACCESS]
            logical_id = [spec[PARAM_PROVIDER], "%s.ext.disk%d" % (new_uuid(), index)]
        else:
            stored, logical_id = {}, [BLOCKDEV_DRIVER, spec["adopt"]]
        disks.append(Disk(
            uuid=new_uuid(), name=spec.get("name"), dev_type=template, logical_id=logical_id, nodes=[],
            iv_name="disk/%d" % index, size=spec["size"], mode=spec.get("mode") or "rw", params=stored,
        ))
    return disks
