"""Helpers of the automatic failover's tests and benchmark.

L{enable_auto_failover} writes the HA parameters on every node (what
C{gnt-cluster modify --auto-failover} replicates); L{kill_root} is
C{kill -9} of every process of one node's root (its daemons and the job
processes LuxiD started); L{TagStream} submits one cluster-tag job after
another to whichever node is master, so that a job reported successful can
be checked for its effect (its tag in the config) afterwards.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from ganeti.ha import params as ha_params
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths

REASON = [["gnt:client:failover-test", "", 0]]


def enable_auto_failover(roots: list[Paths], timeout: float) -> None:
    """Automatic failover on with C{timeout} seconds, on every node."""
    params = ha_params.HaParams().changed(auto_failover=True, failover_timeout=timeout)
    for paths in roots:
        ha_params.write(paths, params)


def root_pids(paths: Paths) -> list[int]:
    """Every process whose command line names C{paths.root} (a unique temporary directory)."""
    found = []
    wanted = paths.root.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if any(arg == wanted or arg.startswith(wanted + b"/") for arg in argv):
            found.append(int(entry))
    return found


def kill_root(paths: Paths) -> list[int]:
    """C{kill -9} every process of C{paths}' root (by pid); the pids killed."""
    pids = root_pids(paths)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def tag_job(tag: str) -> list[dict[str, Any]]:
    """A job adding the cluster tag C{tag}."""
    return [{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag], "reason": REASON}]


class TagStream:
    """Submits one tag job after another to the current master (a thread).

    @ivar master: where to submit (the caller moves it after a failover;
        C{None}: pause)
    @ivar acknowledged: C{{job id: tag}} of every job a master acknowledged
    @ivar ids: every id answered, in order (a repeated one was given twice)
    @param interval: seconds between two submissions
    """

    def __init__(self, master: Paths | None, prefix: str = "stream", interval: float = 0.02) -> None:
        self.master = master
        self.prefix = prefix
        self.interval = interval
        self.acknowledged: dict[int, str] = {}
        self.ids: list[int] = []
        self.refused = 0
        self.stopped = threading.Event()
        self._count = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self.stopped.is_set():
            master = self.master
            if master is None:
                time.sleep(0.05)
                continue
            self._count += 1
            tag = "%s%d" % (self.prefix, self._count)
            try:
                client = LuxiClient(master.luxi_socket, timeout=10)
                try:
                    answers = client.submit_many_jobs([tag_job(tag)])
                finally:
                    client.close()
            except Exception:  # no master right now: not acknowledged
                self.refused += 1
                time.sleep(0.05)
                continue
            for ok, job_id in answers:
                if ok:
                    self.acknowledged[int(job_id)] = tag
                    self.ids.append(int(job_id))
                else:
                    self.refused += 1
            time.sleep(self.interval)


def try_submit(paths: Paths, tag: str = "probe") -> int | None:
    """Submit a job adding C{tag} to C{paths}' LuxiD; its id, or C{None} (refused, or no LuxiD)."""
    try:
        client = LuxiClient(paths.luxi_socket, timeout=5)
        try:
            answers = client.submit_many_jobs([tag_job(tag)])
        finally:
            client.close()
    except Exception:  # no master there (yet)
        return None
    ok, job_id = answers[0]
    return int(job_id) if ok else None


__all__ = ["TagStream", "enable_auto_failover", "kill_root", "root_pids", "tag_job", "try_submit"]
