"""MonD's C{/metrics}: the cached reports in the Prometheus text format (pure).

Names follow Prometheus' conventions: a C{ganeti_} prefix, base units in
the name (C{_bytes}, C{_seconds}, C{_ratio}), C{_total} for counters.
"""

from __future__ import annotations

from typing import Any, Iterable

from ganeti.promtext import Exposition

SECTOR_BYTES = 512


def render(entries: Iterable[Any], stale: str, source: str) -> bytes:
    """The metrics of C{entries} (L{ganeti.mond.service.Entry} values)."""
    out = Exposition()
    _declare(out)
    for entry in entries:
        name = entry.collector.name
        data = entry.report.get("data")
        status = data.get("status") if isinstance(data, dict) else None
        out.sample("ganeti_mond_collector_last_run_timestamp_seconds", entry.when, collector=name)
        if isinstance(status, dict) and isinstance(status.get("code"), int):
            out.sample("ganeti_mond_collector_status_code", status["code"], collector=name)
        if not entry.ok:
            continue
        handler = _HANDLERS.get(name)
        if handler is None:
            if name.startswith("inst-status-"):
                handler = _instances
            elif name.startswith("storage-"):
                handler = _storage
            elif entry.collector.category == "daemon":
                handler = _daemon
        if handler is not None:
            handler(out, name, data)
    out.sample("ganeti_mond_config_stale", 1 if stale else 0)
    out.sample("ganeti_mond_config_source_info", 1, source=source)
    return out.render()


def _declare(out: Exposition) -> None:
    for name, kind, text in (
        ("ganeti_node_cpus", "gauge", "CPUs of the node."),
        ("ganeti_node_cpu_load_ratio", "gauge",
         "Average busy fraction of one CPU over cpu-avg-load's window (cpu=\"total\": of all CPUs together)."),
        ("ganeti_node_memory_total_bytes", "gauge", "Memory of the node."),
        ("ganeti_node_memory_free_bytes", "gauge", "Unused memory of the node."),
        ("ganeti_node_memory_available_bytes", "gauge", "Memory available to new programs."),
        ("ganeti_node_filesystem_size_bytes", "gauge", "Size of a file system."),
        ("ganeti_node_filesystem_free_bytes", "gauge", "Space of a file system available to programs."),
        ("ganeti_node_network_receive_bytes_total", "counter", "Bytes received on an interface."),
        ("ganeti_node_network_transmit_bytes_total", "counter", "Bytes sent on an interface."),
        ("ganeti_node_disk_reads_completed_total", "counter", "Reads completed by a block device."),
        ("ganeti_node_disk_writes_completed_total", "counter", "Writes completed by a block device."),
        ("ganeti_node_disk_read_bytes_total", "counter", "Bytes read from a block device."),
        ("ganeti_node_disk_written_bytes_total", "counter", "Bytes written to a block device."),
        ("ganeti_node_disk_io_time_seconds_total", "counter", "Time a block device spent doing I/O."),
        ("ganeti_instance_up", "gauge", "Whether the instance runs on this node."),
        ("ganeti_instance_admin_up", "gauge", "Whether the configuration wants the instance running."),
        ("ganeti_instance_memory_bytes", "gauge", "Memory of the instance."),
        ("ganeti_instance_vcpus", "gauge", "Virtual CPUs of the instance."),
        ("ganeti_instance_uptime_seconds", "gauge", "Time since the instance started."),
        ("ganeti_instance_status_code", "gauge", "Ganeti status code of the instance (0 ok, 1, 2, 4 bad)."),
        ("ganeti_instance_accel_info", "gauge",
         "The accelerator a running kvm instance uses (accel=\"kvm\": hardware, \"tcg\": software emulation)."),
        ("ganeti_node_kvm_accel_info", "gauge",
         "The accelerator new kvm instances get on this node, as its probe found (accel=\"kvm\" or \"tcg\")."),
        ("ganeti_storage_size_bytes", "gauge", "Size of the file system of a storage directory."),
        ("ganeti_storage_used_bytes", "gauge", "Used space of the file system of a storage directory."),
        ("ganeti_storage_free_bytes", "gauge", "Free space of the file system of a storage directory."),
        ("ganeti_daemon_up", "gauge", "Whether the Ganeti daemon runs."),
        ("ganeti_daemon_resident_memory_bytes", "gauge", "Resident memory of the daemon."),
        ("ganeti_daemon_cpu_seconds_total", "counter", "CPU time the daemon used."),
        ("ganeti_daemon_cpu_ratio", "gauge", "CPU the daemon used since the previous sample (1 = one CPU)."),
        ("ganeti_daemon_open_fds", "gauge", "Open file descriptors of the daemon."),
        ("ganeti_daemon_start_time_seconds", "gauge", "When the daemon started (seconds since the epoch)."),
        ("ganeti_mond_collector_status_code", "gauge", "Status code of a collector's last report."),
        ("ganeti_mond_collector_last_run_timestamp_seconds", "gauge", "When the collector's report was made."),
        ("ganeti_mond_config_stale", "gauge", "1 while MonD works from a cached cluster configuration."),
        ("ganeti_mond_config_source_info", "gauge", "Where MonD's cluster view comes from."),
    ):
        out.family(name, kind, text)


def _cpu(out: Exposition, name: str, data: Any) -> None:
    if not isinstance(data, dict) or "cpus" not in data:
        return
    out.sample("ganeti_node_cpu_load_ratio", float(data["cpu_total"]), cpu="total")
    for number, load in enumerate(data["cpus"]):
        out.sample("ganeti_node_cpu_load_ratio", float(load), cpu=str(number))


def _diskstats(out: Exposition, name: str, data: Any) -> None:
    for disk in data if isinstance(data, list) else []:
        device = str(disk.get("name"))
        out.sample("ganeti_node_disk_reads_completed_total", disk.get("readsNum", 0), device=device)
        out.sample("ganeti_node_disk_writes_completed_total", disk.get("writes", 0), device=device)
        out.sample("ganeti_node_disk_read_bytes_total", disk.get("secRead", 0) * SECTOR_BYTES, device=device)
        out.sample("ganeti_node_disk_written_bytes_total", disk.get("secWritten", 0) * SECTOR_BYTES, device=device)
        out.sample("ganeti_node_disk_io_time_seconds_total", disk.get("timeIO", 0) / 1000.0, device=device)


def _node(out: Exposition, name: str, data: Any) -> None:
    if not isinstance(data, dict):
        return
    out.sample("ganeti_node_cpus", data.get("cpus", 0))
    memory = data.get("memory") or {}
    out.sample("ganeti_node_memory_total_bytes", memory.get("total", 0))
    out.sample("ganeti_node_memory_free_bytes", memory.get("free", 0))
    out.sample("ganeti_node_memory_available_bytes", memory.get("available", 0))
    for fs in data.get("filesystems") or []:
        labels = {"mountpoint": str(fs["mountpoint"]), "fstype": str(fs["type"])}
        out.sample("ganeti_node_filesystem_size_bytes", fs["size"], **labels)
        out.sample("ganeti_node_filesystem_free_bytes", fs["free"], **labels)
    for nic in data.get("nics") or []:
        out.sample("ganeti_node_network_receive_bytes_total", nic["rx_bytes"], device=str(nic["name"]))
        out.sample("ganeti_node_network_transmit_bytes_total", nic["tx_bytes"], device=str(nic["name"]))


def _instances(out: Exposition, name: str, data: Any) -> None:
    for inst in (data or {}).get("instances") or []:
        labels = {"instance_name": str(inst["name"]), "hypervisor": str(inst.get("hypervisor", ""))}
        up = inst["actual_state"] == "running"
        out.sample("ganeti_instance_up", 1 if up else 0, **labels)
        out.sample("ganeti_instance_admin_up", 1 if inst["admin_state"] == "up" else 0, **labels)
        out.sample("ganeti_instance_memory_bytes", int(inst.get("memory") or 0) * 1024 * 1024, **labels)
        out.sample("ganeti_instance_vcpus", int(inst.get("vcpus") or 0), **labels)
        out.sample("ganeti_instance_uptime_seconds", int(inst["uptime"]) if inst.get("uptime") else 0, **labels)
        out.sample("ganeti_instance_status_code", inst["status"]["code"], **labels)
        if inst.get("accel"):
            out.sample("ganeti_instance_accel_info", 1, accel=str(inst["accel"]), **labels)


def _storage(out: Exposition, name: str, data: Any) -> None:
    labels = {"storage_type": str(data["type"]), "path": str(data["path"])}
    out.sample("ganeti_storage_size_bytes", data["size"], **labels)
    out.sample("ganeti_storage_used_bytes", data["used"], **labels)
    out.sample("ganeti_storage_free_bytes", data["free"], **labels)


def _daemon(out: Exposition, name: str, data: Any) -> None:
    out.sample("ganeti_daemon_up", 1 if data.get("running") else 0, daemon=name)
    if not data.get("running"):
        return
    out.sample("ganeti_daemon_resident_memory_bytes", data["memory"], daemon=name)
    out.sample("ganeti_daemon_cpu_seconds_total", float(data["cpu_seconds"]), daemon=name)
    out.sample("ganeti_daemon_cpu_ratio", float(data["cpu_percent"]) / 100.0, daemon=name)
    out.sample("ganeti_daemon_open_fds", data["open_fds"], daemon=name)
    out.sample("ganeti_daemon_start_time_seconds", float(data["start_time"]), daemon=name)


def _kvm_accel(out: Exposition, name: str, data: Any) -> None:
    if isinstance(data, dict) and data.get("accel"):
        out.sample("ganeti_node_kvm_accel_info", 1, accel=str(data["accel"]))


_HANDLERS = {"cpu-avg-load": _cpu, "diskstats": _diskstats, "node-resources": _node, "hv-kvm": _kvm_accel}
