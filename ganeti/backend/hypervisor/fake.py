"""Ganeti's fake hypervisor: instances are JSON files, not processes.

A running instance is the file C{ROOT/var/run/ganeti/fake-hypervisor/NAME}
holding C{{"name", "memory", "vcpus", "state", "started", "disks"}}.  The
states are C{running}, C{paused} (started with C{startup_paused}) and
C{incoming} (accepted by a migration target, not yet finalized; not listed
as running).  A migration source also writes C{NAME.migration} naming the
target, so that its finalize can tell its role.

Several nodes on one machine each have their own root, so a migration
really moves the file from one root to the other, carried by the C{info}
the master passes between the nodes.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from zope.interface import implementer

from ganeti import serializer
from ganeti.backend import hypervisor as hv
from ganeti.paths import Paths

RUNNING = "running"
PAUSED = "paused"
INCOMING = "incoming"

_MIGRATION_SUFFIX = ".migration"


def _meminfo_total_mib() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4096


@implementer(hv.IHypervisor)
class FakeHypervisor:
    """The fake hypervisor of the node rooted at C{paths.root}.

    @param memory_total: MiB the node pretends to have (default: the
        machine's, as Ganeti's fake hypervisor reports).
    @param cpu_total: CPUs the node pretends to have (default: the machine's).
    """

    name = hv.HT_FAKE

    def __init__(
        self,
        paths: Paths,
        memory_total: int | None = None,
        cpu_total: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.paths = paths
        self.state_dir = os.path.join(paths.run_dir, "fake-hypervisor")
        self._memory_total = memory_total
        self._cpu_total = cpu_total
        self._clock = clock

    # --- files -------------------------------------------------------------
    def _file(self, name: str) -> str:
        if not name or "/" in name or name.startswith(".") or "\0" in name:
            raise hv.HypervisorError("Invalid instance name %r" % (name,))
        return os.path.join(self.state_dir, name)

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            record = serializer.read_json(self._file(name))
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise hv.HypervisorError("Corrupt state of instance %s: %s" % (name, exc)) from exc
        return record if isinstance(record, dict) else None

    def _write(self, name: str, record: dict[str, Any]) -> None:
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        serializer.write_json(self._file(name), record, durable=False)

    def _unlink(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def _names(self) -> list[str]:
        try:
            entries = os.listdir(self.state_dir)
        except FileNotFoundError:
            return []
        return sorted(
            e for e in entries if not e.startswith(".") and not e.endswith(_MIGRATION_SUFFIX)
        )

    def _running(self) -> dict[str, dict[str, Any]]:
        result = {}
        for name in self._names():
            record = self._read(name)
            if record is not None and record.get("state") in (RUNNING, PAUSED):
                result[name] = record
        return result

    def _info(self, record: dict[str, Any]) -> dict[str, Any]:
        started = float(record.get("started") or 0)
        return {
            "memory": int(record.get("memory") or 0),
            "vcpus": int(record.get("vcpus") or 0),
            "state": hv.STATE_RUNNING,
            "time": max(0, int(self._clock() - started)),
        }

    # --- lifecycle ---------------------------------------------------------
    def start_instance(self, instance: Any, block_devices: list[Any], startup_paused: bool) -> None:
        name = instance.name
        current = self._read(name)
        if current is not None and current.get("state") in (RUNNING, PAUSED):
            raise hv.HypervisorError("Instance %s is already running" % name)
        if current is not None and current.get("state") == INCOMING:
            raise hv.HypervisorError("Instance %s is being migrated here" % name)
        disks = []
        for device in block_devices or []:
            if isinstance(device, (list, tuple)) and len(device) >= 2:
                disks.append(device[1])
            elif isinstance(device, str):
                disks.append(device)
        self._write(
            name,
            {
                "name": name,
                "memory": hv.instance_memory(instance),
                "vcpus": hv.instance_vcpus(instance),
                "state": PAUSED if startup_paused else RUNNING,
                "started": self._clock(),
                "disks": disks,
            },
        )

    def stop_instance(self, instance: Any, force: bool = False, timeout: int | None = None) -> None:
        name = instance.name
        if name not in self._running():
            if force:
                return
            raise hv.HypervisorError("Failed to stop instance %s: not running" % name)
        self._unlink(self._file(name))
        self._unlink(self._file(name) + _MIGRATION_SUFFIX)

    def reboot_instance(self, instance: Any) -> None:
        record = self._running().get(instance.name)
        if record is None:
            raise hv.HypervisorError("Failed to reboot instance %s: not running" % instance.name)
        record["state"] = RUNNING
        record["started"] = self._clock()
        self._write(instance.name, record)

    def balloon_instance_memory(self, instance: Any, memory: int) -> None:
        """Give the running instance C{memory} MiB (its state file records it)."""
        record = self._running().get(instance.name)
        if record is None:
            raise hv.HypervisorError("Cannot balloon the memory of instance %s: not running" % instance.name)
        record["memory"] = int(memory)
        self._write(instance.name, record)

    def list_instances(self) -> list[str]:
        return sorted(self._running())

    def get_instance_info(self, name: str) -> dict[str, Any] | None:
        record = self._read(name)
        if record is None or record.get("state") not in (RUNNING, PAUSED):
            return None
        return self._info(record)

    def get_all_instances_info(self) -> dict[str, dict[str, Any]]:
        return {name: self._info(record) for name, record in self._running().items()}

    def get_console_info(self, instance: Any) -> dict[str, Any]:
        return {
            "instance": instance.name,
            "kind": hv.CONS_MESSAGE,
            "message": "Console not available for fake hypervisor",
        }

    # --- migration ---------------------------------------------------------
    def migration_info(self, instance: Any) -> dict[str, Any]:
        record = self._running().get(instance.name)
        if record is None:
            raise hv.HypervisorError("Instance %s is not running" % instance.name)
        return dict(record)

    def accept_instance(self, instance: Any, info: Any, target: str = "") -> None:
        name = instance.name
        if self._read(name) is not None:
            raise hv.HypervisorError("Instance %s already exists on this node" % name)
        record = dict(info) if isinstance(info, dict) else {}
        record.setdefault("memory", hv.instance_memory(instance))
        record.setdefault("vcpus", hv.instance_vcpus(instance))
        record.update({"name": name, "state": INCOMING, "source_state": record.get("state")})
        self._write(name, record)

    def migrate_instance(self, instance: Any, target: str) -> None:
        name = instance.name
        if name not in self._running():
            raise hv.HypervisorError("Instance %s is not running" % name)
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        serializer.write_json(
            self._file(name) + _MIGRATION_SUFFIX,
            {"target": target, "time": self._clock()},
            durable=False,
        )

    def get_migration_status(self, instance: Any) -> dict[str, Any]:
        """Source side: C{{"status": "completed"|"none"}}; fake migrations
        finish as soon as they are sent."""
        marker = self._file(instance.name) + _MIGRATION_SUFFIX
        return {"status": "completed" if os.path.exists(marker) else "none"}

    def finalize_migration(self, instance: Any, info: Any, success: bool) -> None:
        name = instance.name
        record = self._read(name)
        marker = self._file(name) + _MIGRATION_SUFFIX
        if record is not None and record.get("state") == INCOMING:
            # target side
            if success:
                record["state"] = record.pop("source_state", None) or RUNNING
                if record["state"] not in (RUNNING, PAUSED):
                    record["state"] = RUNNING
                self._write(name, record)
            else:
                self._unlink(self._file(name))
            return
        if os.path.exists(marker):
            # source side: the instance now lives on the target
            if success:
                self._unlink(self._file(name))
            self._unlink(marker)
            return
        if not success:
            return
        raise hv.HypervisorError("No migration of instance %s to finalize here" % name)

    # --- node --------------------------------------------------------------
    def get_node_info(self) -> dict[str, Any]:
        total = self._memory_total if self._memory_total is not None else _meminfo_total_mib()
        cpus = self._cpu_total if self._cpu_total is not None else (os.cpu_count() or 1)
        used = sum(int(r.get("memory") or 0) for r in self._running().values())
        incoming = 0
        for name in self._names():
            record = self._read(name)
            if record is not None and record.get("state") == INCOMING:
                incoming += int(record.get("memory") or 0)
        return {
            "memory_total": total,
            "memory_free": max(0, total - used - incoming),
            "memory_dom0": 0,
            "memory_hv": 0,
            "cpu_total": cpus,
            "cpu_nodes": 1,
            "cpu_sockets": 1,
            "cpu_dom0": 0,
        }
