"""Parsers of the kernel's text files: pure functions of their contents."""

from __future__ import annotations

from typing import Any

#: /proc/diskstats columns after major, minor, name, with Ganeti's JSON names
DISKSTATS_FIELDS = ("readsNum", "mergedReads", "secRead", "timeRead", "writes", "mergedWrites", "secWritten",
                    "timeWrite", "ios", "timeIO", "wIOmillis")


def parse_stat_cpus(text: str) -> list[tuple[str, int, int]]:
    """C{[(name, busy jiffies, idle jiffies), ...]} of the C{cpu} lines of
    /proc/stat, the aggregate C{cpu} line first.

    Busy is what Ganeti counts: user, nice, system, iowait, irq, softirq,
    steal, guest and guest_nice; idle is the idle column.
    """
    cpus = []
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        fields = line.split()
        try:
            values = [int(v) for v in fields[1:]]
        except ValueError:
            raise ValueError("bad /proc/stat line: %r" % line) from None
        if len(values) < 4:
            raise ValueError("bad /proc/stat line: %r" % line)
        values += [0] * (10 - len(values))
        user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice = values[:10]
        busy = user + nice + system + iowait + irq + softirq + steal + guest + guest_nice
        cpus.append((fields[0], busy, idle))
    if not cpus or cpus[0][0] != "cpu":
        raise ValueError("/proc/stat has no aggregate cpu line")
    return cpus


def parse_diskstats(text: str) -> list[dict[str, Any]]:
    """The devices of /proc/diskstats in Ganeti's diskstats format."""
    disks = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 14:
            continue
        try:
            numbers = [int(v) for v in fields[3:14]]
            entry: dict[str, Any] = {"major": int(fields[0]), "minor": int(fields[1]), "name": fields[2]}
        except ValueError:
            raise ValueError("bad /proc/diskstats line: %r" % line) from None
        entry.update(zip(DISKSTATS_FIELDS, numbers))
        disks.append(entry)
    return disks


def parse_meminfo(text: str) -> dict[str, int]:
    """C{{field: bytes}} of /proc/meminfo (kB values turned into bytes)."""
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        try:
            number = int(parts[0])
        except ValueError:
            continue
        values[name.strip()] = number * 1024 if len(parts) > 1 and parts[1] == "kB" else number
    return values


def parse_net_dev(text: str) -> list[dict[str, Any]]:
    """The interfaces of /proc/net/dev: bytes, packets, errors, drops each way."""
    nics = []
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        fields = rest.split()
        if len(fields) < 16:
            continue
        try:
            v = [int(f) for f in fields[:16]]
        except ValueError:
            continue
        nics.append({
            "name": name.strip(),
            "rx_bytes": v[0], "rx_packets": v[1], "rx_errors": v[2], "rx_dropped": v[3],
            "tx_bytes": v[8], "tx_packets": v[9], "tx_errors": v[10], "tx_dropped": v[11],
        })
    return nics


#: file systems that hold no disk space worth reporting
PSEUDO_FILESYSTEMS = frozenset((
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "securityfs", "pstore", "debugfs", "tracefs",
    "mqueue", "hugetlbfs", "configfs", "fusectl", "bpf", "autofs", "binfmt_misc", "rpc_pipefs", "nsfs", "efivarfs",
    "selinuxfs", "ramfs",
))


#: file systems whose statvfs may hang when their server does: MonD leaves them out
NETWORK_FILESYSTEMS = frozenset((
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "9p", "afs", "sshfs", "fuse.sshfs",
    "fuse.glusterfs", "fuse.ceph", "lustre", "ocfs2", "gfs2",
))


def parse_mounts(text: str) -> list[tuple[str, str, str]]:
    """C{[(device, mount point, type)]} of /proc/mounts without pseudo and
    network file systems."""
    mounts = []
    seen = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[2] in PSEUDO_FILESYSTEMS or fields[2] in NETWORK_FILESYSTEMS:
            continue
        point = fields[1].replace("\\040", " ")
        if point in seen:
            continue
        seen.add(point)
        mounts.append((fields[0], point, fields[2]))
    return mounts


def parse_pid_stat(text: str) -> dict[str, int]:
    """utime, stime (jiffies), starttime (jiffies after boot), rss (pages) of /proc/PID/stat."""
    close = text.rfind(")")
    if close < 0:
        raise ValueError("bad /proc/PID/stat")
    fields = text[close + 2:].split()
    # fields[0] is the state (field 3); utime is field 14, stime 15, starttime 22, rss 24
    try:
        return {"utime": int(fields[11]), "stime": int(fields[12]), "starttime": int(fields[19]),
                "rss": int(fields[21])}
    except (IndexError, ValueError):
        raise ValueError("bad /proc/PID/stat") from None


def parse_btime(text: str) -> int:
    """The boot time (seconds since the epoch) of /proc/stat."""
    for line in text.splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    raise ValueError("/proc/stat has no btime")
