"""What OP_CLUSTER_VERIFY_GROUP checks of the instances on the nodes (pure).

L{running_problems} compares the instances each node runs (its answer to
C{instancelist}) with the configuration, as Ganeti does: an instance
marked up that does not run on its primary node is an error
(C{EINSTANCEDOWN}); one marked down or offline that runs on its primary
node an error too (C{EINSTANCEUNEXPECTEDLYRUNNING}, ours: Ganeti's
C{gnt-instance list} shows it as C{ERROR_up} but its verify is silent);
one running on another node an error
(C{EINSTANCEWRONGNODE}); one the configuration does not know an error of
the node (C{ENODEORPHANINSTANCE}).

L{disk_file_checks} gives each online node its C{disk-files} check for
C{node_verify} (see L{ganeti.noded.diskfiles}): the file disks it must
hold, the paths it may hold, and which storage directories it lists (every
node its file storage directory; one node, the master when online, the
shared one, as every node sees the same).  L{disk_file_problems} turns a
node's answer into verify lines: a missing disk file is an error of its
instance (Ganeti's C{EINSTANCEMISSINGDISK}) naming the disk and the node,
one whose size is not the recorded one an error too (C{EINSTANCEFAULTYDISK});
a file no disk of the configuration owns is a warning of the node
(C{ENODEORPHANLV}, Ganeti's code for an unknown volume): what a removal
with C{ignore_failures} could not delete, or a file someone put there.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from ganeti.objects import ConfigData, Disk, Node

CV_EINSTANCEMISSINGDISK = "EINSTANCEMISSINGDISK"
CV_EINSTANCEFAULTYDISK = "EINSTANCEFAULTYDISK"
CV_EINSTANCEDOWN = "EINSTANCEDOWN"
CV_EINSTANCEWRONGNODE = "EINSTANCEWRONGNODE"
CV_EINSTANCEUNEXPECTEDLYRUNNING = "EINSTANCEUNEXPECTEDLYRUNNING"
CV_ENODEORPHANINSTANCE = "ENODEORPHANINSTANCE"
CV_ENODEHV = "ENODEHV"
ADMIN_UP = "up"
CV_ENODEORPHANLV = "ENODEORPHANLV"
DT_FILE, DT_SHARED_FILE = "file", "sharedfile"


@attrs.frozen
class Problem:
    """One verify line: C{kind} (instance/node) C{item}: C{message}."""

    kind: str
    code: str
    item: str
    message: str
    warning: bool = False


@attrs.frozen
class _Owner:
    instance: str
    disk: str
    node: str
    size: Any


def _path(disk: Disk) -> str | None:
    lid = disk.logical_id
    if isinstance(lid, list) and len(lid) == 2 and isinstance(lid[1], str) and lid[1].startswith("/"):
        return lid[1]
    return None


def _disk_label(disk: Disk, index: int) -> str:
    return disk.iv_name or "disk/%d" % index


def _expected(cfg: ConfigData) -> tuple[dict[str, dict[str, _Owner]], set[str], dict[str, set[str]]]:
    """C{({node uuid: {path: owner}}, sharedfile paths, {node uuid: detached file paths})}."""
    present: dict[str, dict[str, _Owner]] = {}
    shared: set[str] = set()
    attached: set[str] = set()
    for inst in cfg.instances.values():
        for index, uuid in enumerate(inst.disks if isinstance(inst.disks, list) else []):
            disk = cfg.disks.get(uuid)
            if disk is None:
                continue
            attached.add(uuid)
            path = _path(disk)
            if path is None or disk.forthcoming or disk.dev_type not in (DT_FILE, DT_SHARED_FILE):
                continue
            if disk.dev_type == DT_SHARED_FILE:
                shared.add(path)
                nodes = [inst.primary_node or ""]
            else:
                nodes = list(disk.nodes or [inst.primary_node or ""])
            for node in nodes:
                if node in cfg.nodes:
                    name = cfg.nodes[node].name or node
                    present.setdefault(node, {})[path] = _Owner(inst.name or inst.uuid or "?",
                                                                _disk_label(disk, index), name, disk.size)
    detached: dict[str, set[str]] = {}
    for uuid, disk in cfg.disks.items():
        path = _path(disk)
        if uuid in attached or path is None:
            continue
        if disk.dev_type == DT_SHARED_FILE:
            shared.add(path)
        for node in disk.nodes or []:
            detached.setdefault(node, set()).add(path)
    return present, shared, detached


def shared_scanner(cfg: ConfigData, online: Iterable[Node]) -> str | None:
    """The node (uuid) that lists the shared file storage directory: the
    master when it is among the C{online} nodes, else the first of them."""
    uuids = [n.uuid for n in online]
    return cfg.cluster.master_node if cfg.cluster.master_node in uuids else (uuids[0] if uuids else None)


def disk_file_checks(cfg: ConfigData, online: Iterable[Node], scanner: str | None) -> dict[str, dict[str, Any]]:
    """C{{node name: its disk-files check}} for the C{online} nodes; the
    node C{scanner} also lists the shared file storage directory."""
    present, shared, detached = _expected(cfg)
    nodes = list(online)
    checks = {}
    for node in nodes:
        mine = sorted(present.get(node.uuid or "", {}))
        known = sorted((shared | detached.get(node.uuid or "", set())) - set(mine))
        scan = [DT_FILE, DT_SHARED_FILE] if node.uuid == scanner else [DT_FILE]
        checks[node.name or ""] = {"present": mine, "known": known, "scan": scan}
    return checks


def disk_file_problems(cfg: ConfigData, node: Node, answer: Any) -> list[Problem]:
    """The problems in C{answer}, C{node}'s reply to its disk-files check
    (nothing when the node did not answer that check)."""
    if not isinstance(answer, dict):
        return []
    owners = _expected(cfg)[0].get(node.uuid or "", {})
    name = node.name or node.uuid or "?"
    problems = []
    for path in answer.get("missing") or []:
        owner = owners.get(path)
        if owner is None:
            continue
        problems.append(Problem("instance", CV_EINSTANCEMISSINGDISK, owner.instance,
                                "disk %s (file %s) missing on node %s" % (owner.disk, path, owner.node)))
    sizes = answer.get("sizes")
    for path, size in sorted(sizes.items()) if isinstance(sizes, dict) else ():
        owner = owners.get(path)
        if owner is None or not isinstance(owner.size, int) or size == owner.size:
            continue
        problems.append(Problem("instance", CV_EINSTANCEFAULTYDISK, owner.instance,
                                "disk %s (file %s) on node %s is %s MiB, the configuration says %s MiB"
                                % (owner.disk, path, owner.node, size, owner.size)))
    for path in answer.get("orphans") or []:
        problems.append(Problem("node", CV_ENODEORPHANLV, name,
                                "disk file %s is unknown (no disk of the configuration owns it)" % path,
                                warning=True))
    return problems


def running_problems(cfg: ConfigData, answers: dict[str, Any]) -> list[Problem]:
    """The problems of the instances' run state.

    @param answers: C{{node uuid: its C{instancelist} answer}} for the
        online nodes that answered (a list of names, or an error message)
    """
    problems = []
    running: dict[str, set[str]] = {}
    for uuid, answer in answers.items():
        name = cfg.nodes[uuid].name or uuid if uuid in cfg.nodes else uuid
        if isinstance(answer, list):
            running[uuid] = {n for n in answer if isinstance(n, str)}
        elif answer is not None:
            problems.append(Problem("node", CV_ENODEHV, name, "cannot list the running instances: %s" % (answer,)))
    by_name = {inst.name: inst for inst in cfg.instances.values() if inst.name}
    for inst in sorted(by_name.values(), key=lambda i: i.name or ""):
        pnode = inst.primary_node or ""
        if inst.admin_state == ADMIN_UP and pnode in running and inst.name not in running[pnode]:
            problems.append(Problem("instance", CV_EINSTANCEDOWN, inst.name or "",
                                    "instance not running on its primary node %s" % cfg.nodes[pnode].name))
        elif inst.admin_state != ADMIN_UP and pnode in running and inst.name in running[pnode]:
            problems.append(Problem("instance", CV_EINSTANCEUNEXPECTEDLYRUNNING, inst.name or "",
                                    "instance is marked %s but runs on its primary node %s (stop it with"
                                    " gnt-instance shutdown, or mark it up with gnt-instance startup)"
                                    % (inst.admin_state or "down", cfg.nodes[pnode].name)))
    for uuid in sorted(running, key=lambda u: cfg.nodes[u].name or u if u in cfg.nodes else u):
        node_name = cfg.nodes[uuid].name or uuid if uuid in cfg.nodes else uuid
        for name in sorted(running[uuid]):
            found = by_name.get(name)
            if found is None:
                problems.append(Problem("node", CV_ENODEORPHANINSTANCE, node_name,
                                        "instance %s on node %s should not exist" % (name, node_name)))
            elif found.primary_node != uuid:
                problems.append(Problem("instance", CV_EINSTANCEWRONGNODE, name,
                                        "instance should not run on node %s" % node_name))
    return problems


# --- disks of the shared templates that live outside the nodes (rbd, ext, blockdev) ---------

#: the templates whose disks L{remote_disk_checks} asks the primary node about
REMOTE_TEMPLATES = ("rbd", "ext", "blockdev")
MIB = 1024 * 1024


@attrs.frozen
class RemoteDisk:
    """One disk a primary node must reach: its instance, label and record."""

    instance: str
    label: str
    disk: Disk

    def describe(self) -> str:
        """C{rbd image POOL/NAME}, C{ext volume NAME (provider P)}, C{block device PATH}."""
        lid = list(self.disk.logical_id or [])
        name = str(lid[1]) if len(lid) > 1 else "?"
        params = self.disk.params or {}
        if self.disk.dev_type == "rbd":
            return "rbd image %s/%s" % (params.get("pool") or "rbd", name)
        if self.disk.dev_type == "ext":
            return "ext volume %s (provider %s)" % (name, params.get("provider") or (lid[0] if lid else "?"))
        return "block device %s" % name


def remote_disk_checks(cfg: ConfigData, instances: Iterable[Any],
                       online: Iterable[Node]) -> dict[str, list[RemoteDisk]]:
    """C{{primary node uuid: [RemoteDisk, ...]}}: the rbd, ext and blockdev
    disks of C{instances} whose primary node is among C{online} (each is
    asked C{blockdev_getdimensions} for its disks)."""
    nodes = {n.uuid for n in online if n.vm_capable is not False}
    wanted: dict[str, list[RemoteDisk]] = {}
    for inst in sorted(instances, key=lambda i: i.name or ""):
        if inst.primary_node not in nodes:
            continue
        for index, uuid in enumerate(inst.disks if isinstance(inst.disks, list) else []):
            disk = cfg.disks.get(uuid)
            if disk is None or disk.forthcoming or disk.dev_type not in REMOTE_TEMPLATES:
                continue  # a forthcoming instance's disks are only reserved: none exists yet
            wanted.setdefault(inst.primary_node, []).append(RemoteDisk(inst.name or "", _disk_label(disk, index),
                                                                       disk))
    return wanted


def remote_disk_problems(cfg: ConfigData, node: Node, entries: list[RemoteDisk], answer: Any,
                         failure: str | None) -> list[Problem]:
    """The problems in C{node}'s C{blockdev_getdimensions} answer for C{entries}:
    a disk it cannot find is an error of its instance (missing), one whose size
    differs from the configuration's too (faulty); no answer is a node error."""
    name = node.name or node.uuid or "?"
    if failure is not None or not isinstance(answer, list) or len(answer) != len(entries):
        why = failure or "invalid answer %.100r" % (answer,)
        return [Problem("node", "ENODERPC", name, "cannot check the rbd/ext/blockdev disks of its instances: %s"
                        % why)]
    problems = []
    for entry, dimensions in zip(entries, answer):
        size = dimensions[0] if isinstance(dimensions, list) and dimensions else None
        if not isinstance(size, int) or isinstance(size, bool):
            problems.append(Problem("instance", CV_EINSTANCEMISSINGDISK, entry.instance,
                                    "disk %s (%s) missing or unreachable on node %s"
                                    % (entry.label, entry.describe(), name)))
        elif isinstance(entry.disk.size, int) and size // MIB != entry.disk.size:
            problems.append(Problem("instance", CV_EINSTANCEFAULTYDISK, entry.instance,
                                    "disk %s (%s) on node %s is %d MiB, the configuration says %d MiB"
                                    % (entry.label, entry.describe(), name, size // MIB, entry.disk.size)))
    return problems
