"""Daemon status collectors: one per Ganeti daemon the node runs
(C{/1/report/daemon/ganeti-noded}, ...).

A daemon runs while it holds its pid file locked (L{ganeti.daemons}); its
figures come from C{/proc/PID}: resident memory (bytes), CPU seconds and
the CPU percentage since the previous sample, uptime (seconds), open file
descriptors.  Status 0 when it runs, 4 when it does not, 2 when its
figures cannot be read.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ganeti.mond.collectors import ClusterView, Collector, CollectorError, proc
from ganeti.mond.collectors.host import Host
from ganeti.mond.report import CATEGORY_DAEMON, KIND_STATUS, STATUS_BAD, STATUS_OK, STATUS_UNKNOWN, status


def daemon_figures(stat: dict[str, int], btime: int, ticks: int, page_size: int, fds: int, now: float,
                   previous: tuple[float, float] | None) -> dict[str, Any]:
    """Memory, CPU and uptime of a process from its parsed /proc files (pure).

    @param previous: C{(time, cpu seconds)} of the previous sample, for the CPU %
    """
    cpu = (stat["utime"] + stat["stime"]) / ticks
    started = btime + stat["starttime"] / ticks
    percent = 0.0
    if previous is not None and now > previous[0]:
        percent = max(0.0, 100.0 * (cpu - previous[1]) / (now - previous[0]))
    return {
        "memory": stat["rss"] * page_size,
        "cpu_seconds": round(cpu, 3),
        "cpu_percent": round(percent, 2),
        "start_time": round(started, 2),
        "uptime": max(0, int(now - started)),
        "open_fds": fds,
    }


class DaemonStatus(Collector):
    """The status of one Ganeti daemon on this node."""

    category = CATEGORY_DAEMON
    kind = KIND_STATUS

    def __init__(self, daemon: str, master_only: bool, pid_of: Callable[[], int | None], host: Host,
                 on_candidates: bool = False) -> None:
        self.name = daemon
        self.master_only = master_only
        #: a master daemon that also runs on every master candidate (RAPI)
        self.on_candidates = on_candidates
        self._pid_of = pid_of
        self._host = host
        self._previous: dict[int, tuple[float, float]] = {}

    def available(self, view: ClusterView) -> bool:
        return view.master or not self.master_only or (self.on_candidates and view.candidate)

    def collect(self, view: ClusterView) -> Any:
        pid = self._pid_of()
        if pid is None:
            self._previous.clear()
            return {"daemon": self.name, "running": False, "pid": None,
                    "status": status(STATUS_BAD, "%s is not running" % self.name)}
        host = self._host
        try:
            stat = proc.parse_pid_stat(host.read("%d/stat" % pid))
            btime = proc.parse_btime(host.read("stat"))
            fds = len(os.listdir(os.path.join(host.proc_dir, str(pid), "fd")))
        except (CollectorError, OSError, ValueError) as e:
            raise CollectorError("%s (pid %d) runs, but its figures cannot be read: %s" % (self.name, pid, e),
                                 STATUS_UNKNOWN) from e
        now = host.clock()
        figures = daemon_figures(stat, btime, host.ticks, host.page_size, fds, now, self._previous.get(pid))
        self._previous = {pid: (now, figures["cpu_seconds"])}
        return dict({"daemon": self.name, "running": True, "pid": pid}, **figures, status=status(STATUS_OK))
