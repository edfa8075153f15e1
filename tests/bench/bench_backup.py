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
    import script, fsync of the disk).

The transfer rates the nodes measured (bytes / elapsed of the stream alone)
are reported too, and a copy made durable (C{cp}, then C{sync} of the
copy), since an export fsyncs its dumps and C{cp} alone does not: the
target is export and import at 70 % of that durable copy
(C{export_ratio_durable}, C{import_ratio_durable}).  The machine's load
changes from one minute to the next, so the durable copy runs before and
after every transfer, L{ROUNDS} rounds of export and import, and each
side counts its best run.  Prints a table, then one JSON line.

Every copy reads a source that is not in the page cache, as a transfer
does: an import reads a dump its export wrote with direct I/O, an export
after an import a disk written the same way, and a real one a dump or disk
nobody read lately.  Before each, the source's pages are written back and
dropped (C{posix_fadvise(DONTNEED)} on that file alone).  The durable copy
from the page cache is measured too (C{plain_copy_fsync_cached_mb_s}).
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
#: each transfer's runs, each between two durable copies
ROUNDS = 2


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


def evict(path: str) -> None:
    """Drop C{path}'s pages from the page cache (written back first): the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def evict_tree(directory: str) -> int:
    """L{evict} every file under C{directory}; how many there were."""
    count = 0
    for parent, _dirs, files in os.walk(directory):
        for name in files:
            evict(os.path.join(parent, name))
            count += 1
    return count


def durable_copy_time(source: str, scratch: str, cached: bool = False) -> float:
    """Seconds of C{cp} then C{sync} of the copy (an fsync of that file):
    what an export (whose dump is fsynced) or an import (whose disk is) does at best.
    The source is read from the disk (L{evict}) unless C{cached}: read once first."""
    if cached:
        subprocess.run(["cat", source], stdout=subprocess.DEVNULL, check=True)
    else:
        evict(source)
    target = os.path.join(scratch, "copy-durable")
    took, _ = timed("sh", "-c", 'cp "$0" "$1" && sync "$1"', source, target)
    os.unlink(target)
    return took


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
        # what the durable copies copy (the disk goes with the instance between export and import)
        scratch = os.path.dirname(os.path.dirname(disk))
        reference = os.path.join(scratch, "bench-source")
        shutil.copyfile(disk, reference)
        pids = [d.process.pid for d in cluster.nodeds if d.process is not None]
        instance_dir = os.path.dirname(disk)
        export_dir = os.path.join(cluster.roots[1].export_dir, "big.test")
        cached_s = [durable_copy_time(reference, scratch, cached=True)]

        def nodes_cpu() -> float:
            return sum(tree_cpu(pid) for pid in pids)

        # the machine's load changes from one minute to the next: each transfer runs between two durable
        # copies, ROUNDS times, and each side counts its best run
        durable_s: list[float] = []
        durable_cpu: list[float] = []
        export_s: list[float] = []
        import_s: list[float] = []
        export_cpu: list[float] = []
        import_cpu: list[float] = []
        export_stream: list[float] = []
        import_stream: list[float] = []

        def durable_copy() -> None:
            cpu0 = children_cpu()
            durable_s.append(durable_copy_time(reference, scratch))
            durable_cpu.append(children_cpu() - cpu0)

        for _round in range(ROUNDS):
            durable_copy()
            assert evict_tree(instance_dir), instance_dir  # the disk read from the disk, as the copy's source
            cpu0 = nodes_cpu()
            took, out = timed(os.path.join(BIN, "gnt-backup"), "--root", root.root, "export", "-n", N2, "big.test")
            export_s.append(took)
            export_cpu.append(nodes_cpu() - cpu0)
            export_stream.append(stream_rate(out) or 0.0)
            ok(root, "gnt-instance", "remove", "-f", "big.test")
            durable_copy()
            assert evict_tree(export_dir), export_dir  # the dump read from the disk
            cpu0 = nodes_cpu()
            took, out = timed(os.path.join(BIN, "gnt-backup"), "--root", root.root, "import", "-n", N1,
                              "--src-node", N2, "--src-dir", "big.test", "--no-name-check", "--no-ip-check",
                              "--no-start", "big.test")
            import_s.append(took)
            import_cpu.append(nodes_cpu() - cpu0)
            import_stream.append(stream_rate(out) or 0.0)
        durable_copy()
        cached_s.append(durable_copy_time(reference, scratch, cached=True))
        plain_after = copy_rate(reference, scratch)
        load_after = os.getloadavg()[0]
    finally:
        await cluster.stop()
        shutil.rmtree(root.root, ignore_errors=True)
    plain = max(plain, plain_after)
    durable = SIZE_MIB / min(durable_s)
    export_rate, import_rate = SIZE_MIB / min(export_s), SIZE_MIB / min(import_s)
    durable_runs = [round(SIZE_MIB / t, 1) for t in durable_s]
    export_runs = [round(SIZE_MIB / t, 1) for t in export_s]
    import_runs = [round(SIZE_MIB / t, 1) for t in import_s]
    cpu = [sum(v) / len(v) for v in (durable_cpu, export_cpu, import_cpu)]
    results: dict[str, Any] = {
        "size_mib": SIZE_MIB,
        "rounds": ROUNDS,
        "plain_copy_mb_s": round(plain, 1),
        "export_mb_s": round(export_rate, 1),
        "import_mb_s": round(import_rate, 1),
        "export_ratio": round(export_rate / plain, 3),
        "import_ratio": round(import_rate / plain, 3),
        "plain_copy_fsync_mb_s": round(durable, 1),
        "plain_copy_fsync_runs_mb_s": durable_runs,
        "plain_copy_fsync_cached_mb_s": round(SIZE_MIB / min(cached_s), 1),
        "export_runs_mb_s": export_runs,
        "import_runs_mb_s": import_runs,
        "export_ratio_durable": round(export_rate / durable, 3),
        "import_ratio_durable": round(import_rate / durable, 3),
        "plain_copy_fsync_cpu_s": round(cpu[0], 2),
        "export_nodes_cpu_s": round(cpu[1], 2),
        "import_nodes_cpu_s": round(cpu[2], 2),
        "load_1min": [round(load_before, 2), round(load_after, 2)],
        "export_stream_mb_s": max(export_stream),
        "import_stream_mb_s": max(import_stream),
        "target_ratio": TARGET,
    }
    print("%-52s %12s" % ("measurement (1 GiB, no compression)", "MiB/s"))
    print("%-52s %12.1f" % ("plain copy (cp from the page cache, no fsync, best)", plain))
    print("%-52s %12.1f  (runs: %s)" % ("plain copy made durable (cp; sync), best", durable,
                                       " ".join("%.0f" % r for r in durable_runs)))
    print("%-52s %12.1f" % ("  the same, its source in the page cache, best", results["plain_copy_fsync_cached_mb_s"]))
    print("%-52s %12.1f  (%.0f%% of cp; %.0f%% of cp + fsync, target %.0f%%)" % (
        "gnt-backup export, whole command, best", results["export_mb_s"], 100 * results["export_ratio"],
        100 * results["export_ratio_durable"], 100 * TARGET))
    print("%-52s %12.1f  (%.0f%% of cp; %.0f%% of cp + fsync, target %.0f%%)" % (
        "gnt-backup import, whole command, best", results["import_mb_s"], 100 * results["import_ratio"],
        100 * results["import_ratio_durable"], 100 * TARGET))
    print("%-52s %12s" % ("export runs / import runs", "%s / %s" % (
        " ".join("%.0f" % r for r in export_runs), " ".join("%.0f" % r for r in import_runs))))
    print("%-52s %12s" % ("export stream alone (node's figure, best)", results["export_stream_mb_s"]))
    print("%-52s %12s" % ("import stream alone (node's figure, best)", results["import_stream_mb_s"]))
    print("%-52s %12s" % ("CPU: cp + fsync / export / import (both NodeDs, scripts)", "%.2f / %.2f / %.2f s" % tuple(cpu)))
    print("%-52s %12s" % ("load average (1 min), before / after", "%.2f / %.2f" % (load_before, load_after)))
    print(orjson.dumps(results).decode())


def main() -> None:
    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


if __name__ == "__main__":
    main()
