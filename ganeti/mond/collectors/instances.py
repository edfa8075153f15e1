"""Instance status collectors, one per hypervisor (C{inst-status-fake},
C{inst-status-kvm}), in the field set of Ganeti's C{inst-status-xen}.

Each instance of the node (from the cluster view: confd, the node's
config replica, or MonD's cache of them) and each instance the hypervisor
runs here unknown to the configuration gets::

    {"name", "uuid", "admin_state", "actual_state", "uptime", "mtime",
     "state_reason", "status": {"code", "message"}}

C{verbose=1} adds C{memory} (MiB), C{vcpus} and C{hypervisor}, and for a
kvm instance C{accel} (C{kvm} or C{tcg}).

C{hv-kvm} (ours, category C{hypervisor}) reports the node's KVM
acceleration probe (L{ganeti.backend.hypervisor.kvm_accel}) as cached for
this boot: C{{"accel": "kvm"|"tcg"|None, "reason", "binary", "probe_seconds"}}
(C{None}: no kvm instance has started since the node booted).
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet.defer import maybeDeferred

from ganeti.mond.collectors import ClusterView, Collector, CollectorError
from ganeti.mond.report import (
    CATEGORY_HYPERVISOR,
    CATEGORY_INSTANCE,
    KIND_PERF,
    KIND_STATUS,
    STATUS_BAD,
    STATUS_OK,
    STATUS_TEMP_BAD,
    STATUS_UNKNOWN,
    status,
    worst,
)

ADMIN_UP = "up"
#: Ganeti's fields of one instance (verbose adds L{DETAILS})
FIELDS = ("name", "uuid", "admin_state", "actual_state", "uptime", "mtime", "state_reason", "status")
DETAILS = ("memory", "vcpus", "hypervisor")
#: a config change this recent may not have reached the hypervisor yet
SETTLE_INTERVALS = 2


def instance_statuses(hypervisor: str, configured: list[dict[str, Any]], running: dict[str, dict[str, Any]],
                      now: float, interval: float, stale: str = "") -> dict[str, Any]:
    """The data of an instance status report (pure).

    @param configured: the node's instances of C{hypervisor} in the view
    @param running: C{{name: hypervisor info}} of what runs here
    @param interval: the collector's interval: a mismatch newer than
        L{SETTLE_INTERVALS} of them is temporarily bad (1), not bad (4)
    @param stale: why the configuration may be out of date ("" : it is not)
    """
    items = []
    for inst in sorted(configured, key=lambda i: i.get("name") or ""):
        name = inst.get("name") or ""
        info = running.get(name)
        admin = inst.get("admin_state") or "down"
        up = info is not None
        mtime = float(inst.get("mtime") or 0.0)
        if (admin == ADMIN_UP) == up:
            code, message = STATUS_OK, ""
        else:
            recent = now - mtime < SETTLE_INTERVALS * interval
            code = STATUS_TEMP_BAD if recent else STATUS_BAD
            message = ("The instance is not running, but it should be" if admin == ADMIN_UP
                       else "The instance is running, but it should not be")
        items.append(_item(inst, name, admin, info, mtime, hypervisor, code, message))
    known = {i.get("name") for i in configured}
    for name in sorted(set(running) - known):
        items.append(_item({"name": name}, name, "unknown", running[name], 0.0, hypervisor, STATUS_BAD,
                           "The instance runs on this node but the configuration does not place it here"))
    code = worst([i["status"]["code"] for i in items])
    bad = [i["name"] for i in items if i["status"]["code"] != STATUS_OK]
    message = "" if not bad else "instance(s) not as configured: %s" % ", ".join(bad)
    if stale:
        code = worst([code, STATUS_TEMP_BAD])
        message = "; ".join(m for m in (message, "admin states from cached configuration: %s" % stale) if m)
    return {"instances": items, "status": status(code, message)}


def _item(inst: dict[str, Any], name: str, admin: str, info: dict[str, Any] | None, mtime: float,
          hypervisor: str, code: int, message: str) -> dict[str, Any]:
    reason = inst.get("state_reason") or []
    item = {
        "name": name,
        "uuid": inst.get("uuid") or "",
        "admin_state": admin,
        "actual_state": "running" if info is not None else "shutdown",
        "uptime": str(int(info.get("time") or 0)) if info is not None else None,
        "mtime": mtime,
        "state_reason": reason,
        "status": status(code, message),
        "memory": int((info or {}).get("memory") or inst.get("memory") or 0),
        "vcpus": int((info or {}).get("vcpus") or inst.get("vcpus") or 0),
        "hypervisor": hypervisor,
    }
    accel = (info or {}).get("accel")
    if isinstance(accel, str) and accel:
        item["accel"] = accel      # ours (kvm): the accelerator the running instance uses
    return item


def fake_running(paths: Any, now: float) -> dict[str, dict[str, Any]]:
    """What the fake hypervisor runs on the node: C{{name: {"memory",
    "vcpus", "time"}}}, from its state files (the format of
    L{ganeti.backend.hypervisor.fake}, read here without importing the
    hypervisor layer and the config objects it needs, to keep MonD small)."""
    import os

    from ganeti import serializer

    directory = os.path.join(paths.run_dir, "fake-hypervisor")
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return {}
    running = {}
    for name in names:
        if name.startswith(".") or name.endswith(".migration"):
            continue
        try:
            record = serializer.read_json(os.path.join(directory, name))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("state") in ("running", "paused"):
            running[name] = {"memory": int(record.get("memory") or 0), "vcpus": int(record.get("vcpus") or 0),
                             "time": max(0, int(now - float(record.get("started") or 0)))}
    return running


class InstanceStatus(Collector):
    """C{inst-status-<hypervisor>}: active when the hypervisor is enabled."""

    category = CATEGORY_INSTANCE
    kind = KIND_STATUS

    def __init__(self, hypervisor: str, running: Callable[[], Any], clock: Callable[[], float]) -> None:
        """@param running: C{{name: info}} of the instances the hypervisor runs here (or a Deferred)"""
        self.hypervisor = hypervisor
        self.name = "inst-status-%s" % hypervisor
        self._running = running
        self._clock = clock

    def available(self, view: ClusterView) -> bool:
        return self.hypervisor in view.hypervisors

    def collect(self, view: ClusterView) -> Any:
        configured = [i for i in view.instances if (i.get("hypervisor") or self.hypervisor) == self.hypervisor]

        def done(running: Any) -> dict[str, Any]:
            if not isinstance(running, dict):
                raise CollectorError("the %s hypervisor gave no instance list" % self.hypervisor, STATUS_UNKNOWN)
            return instance_statuses(self.hypervisor, configured, running, self._clock(), view.interval, view.stale)

        def failed(failure: Any) -> Any:
            if failure.check(CollectorError):
                return failure
            raise CollectorError("cannot list the %s instances: %s" % (self.hypervisor, failure.value),
                                 STATUS_UNKNOWN)

        return maybeDeferred(self._running).addCallbacks(done, failed)

    def present(self, data: Any, verbose: bool) -> Any:
        if verbose or not isinstance(data, dict) or "instances" not in data:
            return data
        return dict(data, instances=[{k: i[k] for k in FIELDS} for i in data["instances"]])


def kvm_accel_state(paths: Any, boot_id: str) -> dict[str, Any]:
    """The node's cached KVM acceleration probe (see the module docstring),
    read from its file without importing the hypervisor layer."""
    import os

    from ganeti import serializer

    try:
        record = serializer.read_json(os.path.join(paths.run_dir, "kvm-hypervisor", "accel.json"))
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or record.get("boot_id") != boot_id:
        return {"accel": None, "reason": "not probed since the node booted", "binary": None, "probe_seconds": None}
    return {"accel": record.get("accel"), "reason": record.get("reason") or "", "binary": record.get("binary"),
            "probe_seconds": record.get("probe_seconds")}


class KvmAccel(Collector):
    """C{hv-kvm}: whether kvm instances here get hardware acceleration."""

    name = "hv-kvm"
    category = CATEGORY_HYPERVISOR
    kind = KIND_PERF

    def __init__(self, paths: Any, boot_id: Callable[[], str]) -> None:
        self._paths, self._boot_id = paths, boot_id

    def available(self, view: ClusterView) -> bool:
        return "kvm" in view.hypervisors

    def collect(self, view: ClusterView) -> Any:
        return kvm_accel_state(self._paths, self._boot_id())
