"""Collectors of the node itself: cpu-avg-load, diskstats, node-resources.

They read the kernel's files under a C{proc} directory (C{/proc}; tests
give a temporary one) through L{Host}.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable

from ganeti.mond.collectors import ClusterView, Collector, CollectorError, proc
from ganeti.mond.report import CATEGORY_STORAGE, KIND_PERF

#: Ganeti's CPUAVGLOAD_BUFFER_SIZE and CPUAVGLOAD_WINDOW_SIZE (seconds)
BUFFER_SIZE = 150
WINDOW_SIZE = 600.0


class Host:
    """The node's kernel files and clocks."""

    def __init__(self, proc_dir: str = "/proc", clock: Callable[[], float] = time.time,
                 statvfs: Callable[[str], Any] = os.statvfs) -> None:
        self.proc_dir = proc_dir
        self.clock = clock
        self.statvfs = statvfs
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.page_size = os.sysconf("SC_PAGE_SIZE")

    def read(self, name: str) -> str:
        """The text of C{proc_dir/name}; L{CollectorError} if unreadable."""
        try:
            with open(os.path.join(self.proc_dir, name)) as handle:
                return handle.read()
        except OSError as e:
            raise CollectorError("cannot read %s: %s" % (os.path.join(self.proc_dir, name), e.strerror or e)) from e


class CpuAvgLoad(Collector):
    """Ganeti's cpu-avg-load: /proc/stat sampled every interval, averaged
    over the samples of the last L{WINDOW_SIZE} seconds (at most
    L{BUFFER_SIZE} of them), as a fraction of one CPU per CPU."""

    name = "cpu-avg-load"

    def __init__(self, host: Host) -> None:
        self.host = host
        self.samples: collections.deque[tuple[float, list[int]]] = collections.deque(maxlen=BUFFER_SIZE + 1)

    def collect(self, view: ClusterView) -> Any:
        text = self.host.read("stat")
        try:
            cpus = proc.parse_stat_cpus(text)
        except ValueError as e:
            raise CollectorError(str(e)) from e
        now = self.host.clock()
        self.samples.append((now, [busy for _name, busy, _idle in cpus]))
        return average_load(list(self.samples), now, self.host.ticks)


def average_load(samples: list[tuple[float, list[int]]], now: float, ticks: int,
                 window: float = WINDOW_SIZE) -> dict[str, Any]:
    """The report data of cpu-avg-load from C{(time, [busy jiffies of cpu,
    cpu0, cpu1, ...])} samples, oldest first."""
    recent = [s for s in samples if s[0] > now - window]
    if len(recent) < 2 or recent[-1][0] <= recent[0][0]:
        return {"error": "Time covered by data is not sufficient. The window considered is %d s" % window}
    (t_old, old), (t_new, new) = recent[0], recent[-1]
    overall = (t_new - t_old) * ticks
    loads = [(n - o) / overall for n, o in zip(new, old)]
    return {"cpu_number": len(loads) - 1, "cpus": loads[1:], "cpu_total": loads[0]}


class DiskStats(Collector):
    """Ganeti's diskstats: /proc/diskstats, one object per device."""

    name = "diskstats"
    category = CATEGORY_STORAGE
    kind = KIND_PERF

    def __init__(self, host: Host) -> None:
        self.host = host

    def collect(self, view: ClusterView) -> Any:
        try:
            return proc.parse_diskstats(self.host.read("diskstats"))
        except ValueError as e:
            raise CollectorError(str(e)) from e


class NodeResources(Collector):
    """The node's CPUs, memory, file systems and network interfaces."""

    name = "node-resources"

    def __init__(self, host: Host) -> None:
        self.host = host

    def collect(self, view: ClusterView) -> Any:
        host = self.host
        memory = proc.parse_meminfo(host.read("meminfo"))
        cpus = [name for name, _busy, _idle in proc.parse_stat_cpus(host.read("stat"))[1:]]
        filesystems = []
        for device, point, fstype in proc.parse_mounts(host.read("mounts")):
            try:
                st = host.statvfs(point)
            except OSError:
                continue
            if not st.f_blocks:
                continue
            filesystems.append({
                "device": device, "mountpoint": point, "type": fstype,
                "size": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize,
                "used": (st.f_blocks - st.f_bfree) * st.f_frsize,
            })
        return {
            "cpus": len(cpus),
            "memory": {
                "total": memory.get("MemTotal", 0), "free": memory.get("MemFree", 0),
                "available": memory.get("MemAvailable", memory.get("MemFree", 0)),
                "buffers": memory.get("Buffers", 0), "cached": memory.get("Cached", 0),
                "swap_total": memory.get("SwapTotal", 0), "swap_free": memory.get("SwapFree", 0),
            },
            "filesystems": filesystems,
            "nics": proc.parse_net_dev(host.read("net/dev")),
        }
