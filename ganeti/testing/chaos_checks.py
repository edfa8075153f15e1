"""The checks after a crash trial (see L{ganeti.testing.chaos}).

Each check fills its part of a L{TrialResult} and adds a line to
C{result.violations} for every promise broken: a job acknowledged and
lost or never finished, a job that ran twice, a job failed by a fault that
took nothing from it, a lock left held, a candidate with another config
serial or another job file than the master, C{gnt-cluster verify}
failing, an instance half-removed, a job's effect missing.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from ganeti.luxi.client import LuxiClient
from ganeti.testing.chaos import FINAL, MAY_FAIL_JOBS, Ledger, Submitted, job_status, read_job_file
from ganeti.testing.cluster import gnt, serial_of
from ganeti.wconfd.client import WConfdClient

if TYPE_CHECKING:
    from ganeti.testing.chaos import ChaosCluster, TrialResult

#: an error that only a second run of a job with unique names can meet
_ALREADY = re.compile(r"already (exists|in the cluster|in use|defined)", re.I)
CONVERGE_TIMEOUT = 15.0


async def check_trial(cluster: ChaosCluster, ledger: Ledger, result: TrialResult, drain_timeout: float) -> None:
    """Every check that needs the cluster, in the order an admin would look."""
    acked = ledger.acknowledged
    result.acknowledged = len(acked)
    rows = await deferToThread(drain, cluster.master.luxi_socket, list(acked), drain_timeout)
    check_jobs(acked, rows, result)
    check_job_logs(cluster, acked, result)
    await check_locks(cluster, result)
    await check_serials(cluster, result)
    await check_replicas(cluster, result, min(acked, default=0))
    await repair_killed_job(cluster, acked, result)
    await check_verify(cluster, result)
    await check_instances(cluster, result)
    await deferToThread(check_effects, cluster, acked, rows, result)


def drain(socket_path: str, job_ids: list[int], timeout: float) -> dict[int, Any]:
    """Wait until every job (and every other job of the queue) ended, or
    C{timeout}; C{{job id: [status, opresult] or None (unknown)}}."""
    deadline = time.monotonic() + timeout
    rows: dict[int, Any] = {}
    with LuxiClient(socket_path, timeout=30) as client:
        while True:
            answer = client.query_jobs(job_ids, ["status", "opresult"]) if job_ids else []
            rows = dict(zip(job_ids, answer))
            queue = client.query_jobs(None, ["id", "status"])
            busy = [r for r in rows.values() if r is not None and r[0] not in FINAL]
            busy += [r for r in queue if r is not None and r[1] not in FINAL]
            if not busy or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)


def error_text(opresult: Any) -> str:
    """The message of the first failed opcode's result."""
    for item in opresult or []:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list):
            return "%s: %s" % (item[0], " ".join(str(x) for x in item[1][:1]))
    return repr(opresult)[:200]


def check_jobs(acked: dict[int, Submitted], rows: dict[int, Any], result: TrialResult) -> None:
    """Lost or unfinished jobs; jobs that failed, and why."""
    for job_id, job in sorted(acked.items()):
        row = rows.get(job_id)
        if row is None:
            result.lost.append(job_id)
            result.violations.append("job %d (%s) was acknowledged and is lost" % (job_id, job.kind))
            continue
        status, opresult = row
        if status not in FINAL:
            result.lost.append(job_id)
            result.violations.append("job %d (%s) never finished: still %s" % (job_id, job.kind, status))
            continue
        if status == "success":
            continue
        why = error_text(opresult)
        if job.kind in ("group", "instance") and _ALREADY.search(why):
            result.ran_twice[job_id] = why
            result.violations.append("job %d (%s) ran twice: its unique %s %s" % (job_id, job.kind, job.name, why))
            continue
        if result.fault == "job" and job_id == result.killed_job:
            continue  # the job whose process was killed: failing is its right
        result.failed[job_id] = "%s: %s" % (status, why)
        if result.fault not in MAY_FAIL_JOBS:
            result.violations.append("job %d (%s) failed by the %s fault: %s %s"
                                     % (job_id, job.kind, result.fault, status, why))
        elif result.fault == "job":
            result.violations.append("job %d (%s) failed though only job %s was killed: %s"
                                     % (job_id, job.kind, result.killed_job, why))


def job_file_of(paths: Any, job_id: int) -> str | None:
    """Where a job's file is on a node (live queue or archive)."""
    live = os.path.join(paths.queue_dir, "job-%d" % job_id)
    if os.path.exists(live):
        return live
    archived = os.path.join(paths.queue_dir, "archive", str(job_id // 10000), "job-%d" % job_id)
    return archived if os.path.exists(archived) else None


def check_job_logs(cluster: ChaosCluster, acked: dict[int, Submitted], result: TrialResult) -> None:
    """A log line an opcode wrote twice: its job ran twice (each opcode of
    the stream writes each of its messages once)."""
    for job_id in sorted(acked):
        path = job_file_of(cluster.master, job_id)
        data = read_job_file(path) if path else None
        if data is None:
            continue
        for index, op in enumerate(data.get("ops", [])):
            messages = Counter(str(entry[3]) for entry in op.get("log") or [] if isinstance(entry, list) and len(entry) > 3)
            twice = [m for m, n in messages.items() if n > 1]
            if twice and job_id not in result.ran_twice:
                result.ran_twice[job_id] = "op %d logged %r %d times" % (index, twice[0], messages[twice[0]])
                result.violations.append("job %d ran twice: %s" % (job_id, result.ran_twice[job_id]))


def check_ledger(ledger: Ledger, result: TrialResult) -> None:
    """What the watcher saw: two job processes, or a final state that changed."""
    for job_id, processes in sorted(ledger.processes.items()):
        if len(processes) > 1 and job_id not in result.ran_twice:
            result.ran_twice[job_id] = "%d job processes: %s" % (len(processes), sorted(processes))
            result.violations.append("job %d ran twice: %s" % (job_id, result.ran_twice[job_id]))
    for job_id, change in sorted(ledger.final_changed.items()):
        if job_id not in result.ran_twice:
            result.ran_twice[job_id] = "its final state changed: %s" % change
            result.violations.append("job %d ran twice: %s" % (job_id, result.ran_twice[job_id]))


async def _wconfd(cluster: ChaosCluster) -> WConfdClient:
    return await WConfdClient.connect(cluster.reactor, cluster.master.wconfd_socket, timeout=10)


async def check_locks(cluster: ChaosCluster, result: TrialResult, timeout: float = 10.0) -> None:
    """No owner holds a lock once every job ended (dead owners are freed
    within a fraction of a second)."""
    client = await _wconfd(cluster)
    try:
        deadline = time.monotonic() + timeout
        while True:
            held = await client.list_all_locks_owners()
            if not held or time.monotonic() > deadline:
                break
            await deferLater(cluster.reactor, 0.2, lambda: None)
    finally:
        await client.close()
    result.locks_left = list(held)
    if held:
        result.violations.append("locks left held after every job ended: %r" % (held[:10],))


async def check_serials(cluster: ChaosCluster, result: TrialResult) -> None:
    """Every candidate's config.data has WConfD's serial (after convergence)."""
    client = await _wconfd(cluster)
    try:
        serial = await client.read_serial()
    finally:
        await client.close()
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    while True:
        result.serials = {name: serial_of(paths) for name, paths in zip(cluster.cluster.nodes, cluster.roots)}
        if all(s == serial for s in result.serials.values()) or time.monotonic() > deadline:
            break
        await deferLater(cluster.reactor, 0.2, lambda: None)
    if any(s != serial for s in result.serials.values()):
        result.violations.append("config serial differs from WConfD's %d after %ss: %r"
                                 % (serial, CONVERGE_TIMEOUT, result.serials))


def job_summary(data: dict[str, Any] | None) -> Any:
    """What must be equal between a job file and its replica."""
    if data is None:
        return None
    return (job_status(data), data.get("end_timestamp"), [op.get("status") for op in data.get("ops", [])])


def queue_files(paths: Any) -> dict[str, str]:
    """C{{relative name: path}} of every job file in the queue and its archive."""
    found = {}
    for base, _dirs, files in os.walk(paths.queue_dir):
        for name in files:
            if name.startswith("job-"):
                found[os.path.relpath(os.path.join(base, name), paths.queue_dir)] = os.path.join(base, name)
    return found


def _job_id(name: str) -> int:
    return int(os.path.basename(name)[4:])


def stale_replicas(cluster: ChaosCluster, since: int = 0) -> list[str]:
    """Job files from job C{since} on that a candidate lacks or holds
    with another status than the master (earlier jobs belong to earlier
    trials on the same cluster, which counted them)."""
    master = {name: job_summary(read_job_file(path)) for name, path in queue_files(cluster.master).items()
              if _job_id(name) >= since}
    stale = []
    for node, paths in list(zip(cluster.cluster.nodes, cluster.roots))[1:]:
        theirs = queue_files(paths)
        for name, mine in sorted(master.items()):
            replica = job_summary(read_job_file(theirs[name])) if name in theirs else None
            if replica != mine:
                stale.append("%s on %s: master %r, replica %r" % (name, node, mine, replica))
    return stale


async def check_replicas(cluster: ChaosCluster, result: TrialResult, since: int) -> None:
    """Every candidate holds the master's job files of this trial, statuses
    equal (after convergence)."""
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    while True:
        stale = await deferToThread(stale_replicas, cluster, since)
        if not stale or time.monotonic() > deadline:
            break
        await deferLater(cluster.reactor, 0.5, lambda: None)
    result.stale_replicas = stale
    if stale:
        result.violations.append("%d job replicas differ from the master's after %ss, e.g. %s"
                                 % (len(stale), CONVERGE_TIMEOUT, stale[:3]))


async def check_verify(cluster: ChaosCluster, result: TrialResult) -> None:
    done = await deferToThread(gnt, cluster.master, "gnt-cluster", "verify")
    if done.returncode != 0:
        result.verify = (done.stdout + done.stderr)[-1500:]
        result.violations.append("gnt-cluster verify exited %d: %s" % (done.returncode, result.verify))


async def repair_killed_job(cluster: ChaosCluster, acked: dict[int, Submitted], result: TrialResult) -> None:
    """A job process killed between two steps of an instance job may leave
    the instance between two states (the LUs' crash-safe order): down with
    disks missing (a removal killed after the disks), or marked down while
    it still runs (a shutdown killed after its config change, before its
    RPC; a startup killed after its RPC, before its config change).  The
    promise is that C{gnt-cluster verify} reports missing disks and that an
    admin's re-run of the stream's last step (C{gnt-instance remove}, which
    skips missing disks and stops the instance first) repairs it: check
    both, so the later checks see the repaired cluster."""
    killed = acked.get(result.killed_job) if result.killed_job is not None else None
    if killed is None or killed.kind != "instance":
        return
    name = instance_of(killed)
    with LuxiClient(cluster.master.luxi_socket, timeout=30) as client:
        rows = await deferToThread(client.query_instances, [], ["name", "disk_template", "disk.count"], False)
    row = next((r for r in rows if r and r[0] == name), None)
    if row is None:
        return
    shared = cluster.master.shared_file_storage_dir
    missing = ([i for i in range(row[2] or 0) if not os.path.exists(os.path.join(shared, name, "disk%d" % i))]
               if row[1] == "sharedfile" else [])
    done = await deferToThread(gnt, cluster.master, "gnt-cluster", "verify")
    reported = done.returncode != 0 and "instance %s" % name in done.stdout
    if missing and not reported:
        result.violations.append("killed job %s left instance %s without its disks %s and verify did not"
                                 " report it" % (killed.job_id, name, missing))
    # re-run the removal whatever verify said: a startup killed after its RPC left the node starting the
    # instance, which may run (marked down) only after this verify looked
    removed = await deferToThread(gnt, cluster.master, "gnt-instance", "remove", "-f", name)
    if removed.returncode != 0:
        result.violations.append("re-running the removal of %s (killed job %s) did not repair it: %s"
                                 % (name, killed.job_id, (removed.stdout + removed.stderr)[-500:]))


def instance_of(job: Submitted) -> str:
    """The instance an C{instance} job of the stream makes (its name is the job's short one)."""
    return str(job.ops[0]["instance_name"])


async def check_instances(cluster: ChaosCluster, result: TrialResult) -> None:
    """No instance half-removed: each one in the config has its disks and
    runs nowhere but on its primary node; no disk and no running instance
    without an instance in the config."""
    with LuxiClient(cluster.master.luxi_socket, timeout=30) as client:
        rows = await deferToThread(client.query_instances, [], ["name", "pnode", "disk_template", "disk.count"], False)
    known = {row[0]: row for row in rows}
    running = await cluster.cluster.running()
    shared = cluster.master.shared_file_storage_dir
    on_disk = set(os.listdir(shared)) if os.path.isdir(shared) else set()
    half = []
    for name, (_, pnode, template, disks) in sorted(known.items()):
        if template == "sharedfile":
            missing = [i for i in range(disks or 0) if not os.path.exists(os.path.join(shared, name, "disk%d" % i))]
            if missing:
                half.append("instance %s lacks its disks %s" % (name, missing))
        elsewhere = [node for node, names in running.items() if name in names and node != pnode]
        if elsewhere:
            half.append("instance %s (primary %s) runs on %s" % (name, pnode, elsewhere))
    for name in sorted(on_disk - set(known)):
        half.append("disk directory %s without an instance" % name)
    for node, names in sorted(running.items()):
        for name in sorted(set(names) - set(known)):
            half.append("%s runs %s, an instance not in the config" % (node, name))
    result.half_removed = half
    result.violations += ["half-removed: " + h for h in half]


def check_effects(cluster: ChaosCluster, acked: dict[int, Submitted], rows: dict[int, Any],
                  result: TrialResult) -> None:
    """A successful job's effect is there: its tag set, its group and
    instance gone again (each job added and removed them)."""
    with LuxiClient(cluster.master.luxi_socket, timeout=30) as client:
        groups = {row[0] for row in client.query_groups([], ["name"], False)}
        instances = {row[0] for row in client.query_instances([], ["name"], False)}
        tags: dict[tuple[str, str], set[str]] = {}
        for job_id, job in sorted(acked.items()):
            if (rows.get(job_id) or [None])[0] != "success" or job_id in result.ran_twice:
                continue
            if job.kind == "tag":
                op = job.ops[0]
                key = (op["kind"], op.get("name", ""))
                if key not in tags:
                    tags[key] = set(client.query_tags(*key))
                if job.name not in tags[key]:
                    result.effects.append("job %d succeeded but tag %s is not on %s" % (job_id, job.name, key))
            elif job.kind == "group" and job.name in groups:
                result.effects.append("job %d succeeded but group %s is still there" % (job_id, job.name))
            elif job.kind == "instance" and instance_of(job) in instances:
                result.effects.append("job %d succeeded but instance %s is still there" % (job_id, instance_of(job)))
    result.violations += result.effects
