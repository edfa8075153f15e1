"""scripts/bench backup: export and import of a 1 GiB disk against a plain copy.

A real 2-node loopback cluster (L{ganeti.testing.cluster.LoopbackCluster}:
free ports, temporary roots), an instance with one 1 GiB C{file} disk
filled with incompressible data on node1 (OS C{noop}, whose export and
import scripts dump and restore the raw disk):

  - plain copy: C{cp} of the disk file on the same machine, in this run
    (the physical limit: the best of two copies);
  - export: C{gnt-backup export -n node2} (no compression), wall time of the
    whole command (job, OS export script, TLS stream, fsync of the dump);
  - import: the instance removed, C{gnt-backup import -n node1} from that
    export, wall time of the command (job, disk creation, TLS stream, OS
    import script).

The transfer rates the nodes measured (bytes / elapsed of the stream alone)
are reported too, and a copy made durable (C{cp}, then C{sync} of the
copy), since an export fsyncs its dumps and C{cp} alone does not: the
target is export and import at 70 % of that durable copy
(C{export_ratio_durable}, C{import_ratio_durable}).  Prints a table, then one JSON line.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from typing import Any

import orjson
from twisted.internet import defer, task

from ganeti.paths import Paths
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, ok

SIZE_MIB = 1024
N1, N2 = "node1.test", "node2.test"
TARGET = 0.70


def fill(path: str, mib: int) -> None:
    block = os.urandom(16 * 1024 * 1024)
    with open(path, "r+b") as handle:
        for _ in range(mib // 16):
            handle.write(block)
        handle.flush()
        os.fsync(handle.fileno())


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its reaped children (a NodeD: its transfer threads and OS scripts)."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(*argv: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(list(argv), capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit("%s failed:\n%s%s" % (" ".join(argv), done.stdout, done.stderr))
    return took, done.stdout


def copy_rate(source: str, scratch: str) -> float:
    best = None
    for attempt in range(2):
        target = os.path.join(scratch, "copy%d" % attempt)
        took, _ = timed("cp", source, target)
        os.unlink(target)
        best = took if best is None else min(best, took)
    assert best is not None
    return SIZE_MIB / best


def durable_copy_rate(source: str, scratch: str) -> float:
    """C{cp} then C{sync} of the copy (an fsync of that file): what an export
    (whose dump is fsynced) or an import (whose disk is) does at best; the
    best of two."""
    best = None
    for attempt in range(2):
        target = os.path.join(scratch, "copy-durable%d" % attempt)
        took, _ = timed("sh", "-c", 'cp "$0" "$1" && sync "$1"', source, target)
        os.unlink(target)
        best = took if best is None else min(best, took)
    assert best is not None
    return SIZE_MIB / best


def stream_rate(output: str) -> float | None:
    """The rate the job log reported for disk/0 (C{disk/0: done, 1.0G at 512.3 MiB/s})."""
    found = re.search(r"disk/0: done, \S+ at ([0-9.]+) MiB/s", output)
    return float(found.group(1)) if found else None


async def run(reactor: Any) -> None:
    load_before = os.getloadavg()[0]
    root = Paths(tempfile.mkdtemp(prefix="gntbench-backup-"))
    cluster = await LoopbackCluster(reactor, root, loopback_config(2), prefix="gntbb").start()
    try:
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=%dM" % SIZE_MIB, "-n", N1, "-o", "noop",
           "-H", "fake", "-B", "memory=64M", "--no-name-check", "--no-ip-check", "--no-start", "big.test")
        disk = node_path(cluster.roots[0].root, "/srv/ganeti/file-storage/big.test/disk0")
        fill(disk, SIZE_MIB)
        plain = copy_rate(disk, os.path.dirname(disk))
        cpu0 = children_cpu()
        durable = durable_copy_rate(disk, os.path.dirname(disk))
        durable_cpu = (children_cpu() - cpu0) / 2
        pids = [d.process.pid for d in cluster.nodeds if d.process is not None]

        def nodes_cpu() -> float:
            return sum(tree_cpu(pid) for pid in pids)

        cpu0 = nodes_cpu()
        export_s, out = timed(os.path.join(BIN, "gnt-backup"), "--root", root.root, "export", "-n", N2, "big.test")
        export_stream = stream_rate(out)
        export_cpu = nodes_cpu() - cpu0
        ok(root, "gnt-instance", "remove", "-f", "big.test")
        cpu0 = nodes_cpu()
        import_s, out = timed(os.path.join(BIN, "gnt-backup"), "--root", root.root, "import", "-n", N1,
                              "--src-node", N2, "--src-dir", "big.test", "--no-name-check", "--no-ip-check",
                              "--no-start", "big.test")
        import_stream = stream_rate(out)
        import_cpu = nodes_cpu() - cpu0
        plain_after = copy_rate(disk, os.path.dirname(disk))
        durable_after = durable_copy_rate(disk, os.path.dirname(disk))
        load_after = os.getloadavg()[0]
    finally:
        await cluster.stop()
        shutil.rmtree(root.root, ignore_errors=True)
    plain = max(plain, plain_after)
    durable = max(durable, durable_after)
    results = {
        "size_mib": SIZE_MIB,
        "plain_copy_mb_s": round(plain, 1),
        "export_mb_s": round(SIZE_MIB / export_s, 1),
        "import_mb_s": round(SIZE_MIB / import_s, 1),
        "export_ratio": round(SIZE_MIB / export_s / plain, 3),
        "import_ratio": round(SIZE_MIB / import_s / plain, 3),
        "plain_copy_fsync_mb_s": round(durable, 1),
        "export_ratio_durable": round(SIZE_MIB / export_s / durable, 3),
        "import_ratio_durable": round(SIZE_MIB / import_s / durable, 3),
        "plain_copy_fsync_cpu_s": round(durable_cpu, 2),
        "export_nodes_cpu_s": round(export_cpu, 2),
        "import_nodes_cpu_s": round(import_cpu, 2),
        "load_1min": [round(load_before, 2), round(load_after, 2)],
        "export_stream_mb_s": export_stream,
        "import_stream_mb_s": import_stream,
        "target_ratio": TARGET,
    }
    print("%-52s %12s" % ("measurement (1 GiB, no compression)", "MiB/s"))
    print("%-52s %12.1f" % ("plain copy (cp, same machine, best)", plain))
    print("%-52s %12.1f" % ("plain copy made durable (cp; sync)", durable))
    print("%-52s %12.1f  (%.0f%% of cp; %.0f%% of cp + fsync, target %.0f%%)" % (
        "gnt-backup export, whole command", results["export_mb_s"], 100 * results["export_ratio"],
        100 * results["export_ratio_durable"], 100 * TARGET))
    print("%-52s %12.1f  (%.0f%% of cp; %.0f%% of cp + fsync, target %.0f%%)" % (
        "gnt-backup import, whole command", results["import_mb_s"], 100 * results["import_ratio"],
        100 * results["import_ratio_durable"], 100 * TARGET))
    print("%-52s %12s" % ("export stream alone (node's figure)", export_stream))
    print("%-52s %12s" % ("import stream alone (node's figure)", import_stream))
    print("%-52s %12s" % ("CPU: cp + fsync / export / import (both NodeDs, scripts)",
                          "%.2f / %.2f / %.2f s" % (durable_cpu, export_cpu, import_cpu)))
    print("%-52s %12s" % ("load average (1 min), before / after", "%.2f / %.2f" % (load_before, load_after)))
    print(orjson.dumps(results).decode())


def main() -> None:
    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


if __name__ == "__main__":
    main()
