"""Crash trials on a real 3-node loopback cluster: the harness of the chaos suite.

A trial runs a stream of jobs over LUXI (L{JobStream}, L{Ledger}), kills
one or more daemons with SIGKILL at a random moment (L{FAULTS}), restarts
them the way an admin does, in Ganeti's order, measures how long until each
answers again, then checks what an admin cares about
(L{ganeti.testing.chaos_checks}, run by L{ganeti.testing.chaos_run.run_trial}):
every acknowledged job ended, none ran
twice, no lock is left held, every candidate holds the master's config
serial and job files, C{gnt-cluster verify} passes, no instance is
half-removed::

    async with ChaosCluster(reactor, root) as cluster:
        result = await chaos_run.run_trial(cluster, "wconfd", random.Random(seed))
        assert not result.violations, result.describe()

The integration tests, C{scripts/chaos} and C{scripts/bench chaos} share it.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import socket
import ssl
import threading
import time
import uuid
from typing import Any, Iterable

import attrs
import orjson
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from ganeti import errors
from ganeti.confd import wire as confd_wire
from ganeti.daemons import free_port
from ganeti.jobs import lifecycle
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.rpc import procedures
from ganeti.testing import procs
from ganeti.testing.cluster import LoopbackCluster, loopback_config, serial_of
from ganeti.testing.daemons import Daemon
from ganeti.wconfd.client import WConfdClient

NODE1, NODE2, NODE3 = "node1.test", "node2.test", "node3.test"
#: the nodes jobs touch: never the master, so that killing its NodeD fails no job
WORK_NODES = (NODE2, NODE3)
FINAL = lifecycle.FINALIZED
RAPI_USERS = "chaos {CLEARTEXT}chaos-secret write\n"

#: every fault a trial can inject, by name: the daemons killed together
FAULTS: dict[str, tuple[str, ...]] = {
    "wconfd": ("wconfd",),
    "luxid": ("luxid",),
    "noded-master": ("noded1",),
    "noded-candidate": ("noded2",),
    "confd": ("confd1",),
    "rapi": ("rapi",),
    "job": ("job",),
    "wconfd+luxid": ("wconfd", "luxid"),
    "master": ("noded1", "confd1", "wconfd", "rapi", "luxid"),
}
#: Ganeti's start order; a restart follows it
START_ORDER = ("noded1", "noded2", "noded3", "confd1", "confd2", "confd3", "wconfd", "rapi", "luxid")
#: faults after which a job may fail: only those the fault took the ground from
#: (a job process killed: that job; a candidate's NodeD: jobs working on it)
MAY_FAIL_JOBS = frozenset({"noded-candidate", "job"})


class RestartFailed(Exception):
    """A daemon restarted as an admin does did not answer again."""


def tail(text: str, lines: int = 8) -> str:
    """The last C{lines} lines of a daemon's output, on one line each."""
    return " | ".join(text.strip().splitlines()[-lines:])


def fd_count(pid: int) -> int:
    """How many file descriptors process C{pid} holds (Linux C{/proc})."""
    return len(os.listdir("/proc/%d/fd" % pid))


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process C{pid} has used."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_processes(pid: int) -> list[str]:
    """C{pid}'s child processes, each as its pid and command line."""
    found = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                children = f.read().split()
        except OSError:
            continue
        for child in children:
            argv = procs.argv(child)
            if argv:
                found.append("%s %s" % (child, " ".join(argv)))
    return found


def _quad(hexed: str) -> tuple[str, int]:
    address, port = hexed.split(":")
    return ".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)), int(port, 16)


def tcp_sockets(pid: int) -> dict[int, tuple[tuple[str, int], tuple[str, int]]]:
    """Socket inode -> ((local IPv4 address, port), (remote address, port)) of
    process C{pid}'s TCP sockets."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    found = {}
    try:
        with open("/proc/%d/net/tcp" % pid) as handle:
            rows = handle.read().splitlines()[1:]
    except OSError:
        return {}
    for row in rows:
        fields = row.split()
        inode = int(fields[9])
        if inode in inodes:
            found[inode] = (_quad(fields[1]), _quad(fields[2]))
    return found


def tcp_peers(pid: int) -> dict[int, tuple[str, int]]:
    """Socket inode -> (remote IPv4 address, port) of process C{pid}'s TCP sockets."""
    return {inode: remote for inode, (_local, remote) in tcp_sockets(pid).items()}


def queue_files_count(paths: Paths) -> int:
    """How many job files a node holds (queue and archive)."""
    return sum(1 for _base, _dirs, files in os.walk(paths.queue_dir) for name in files if name.startswith("job-"))


def rss_kib(pid: int) -> int:
    """The resident set size of process C{pid}, in KiB (Linux C{/proc})."""
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# --- the cluster ------------------------------------------------------------------------------


class ChaosCluster:
    """A L{LoopbackCluster} of 3 nodes, all master candidates, with
    sharedfile storage, RAPI and a confd on every node; daemons by name
    (C{wconfd}, C{luxid}, C{rapi}, C{nodedN}, C{confdN})."""

    def __init__(self, reactor: Any, root: Paths, prefix: str = "gnch") -> None:
        config = loopback_config(3, candidate_pool_size=10, candidates=WORK_NODES)
        self.reactor = reactor
        self.cluster = LoopbackCluster(reactor, root, config, shared_file_storage=True, rapi_users=RAPI_USERS,
                                       prefix=prefix)
        self.confd_port = 0
        self.confds: list[Daemon] = []

    @property
    def master(self) -> Paths:
        return self.cluster.master

    @property
    def roots(self) -> list[Paths]:
        return self.cluster.roots

    @property
    def addresses(self) -> list[str]:
        return list(self.cluster.nodes.values())

    def daemon(self, name: str) -> Daemon:
        """The daemon called C{name} (see the class docstring)."""
        if name.startswith("noded"):
            return self.cluster.nodeds[int(name[5:]) - 1]
        if name.startswith("confd"):
            return self.confds[int(name[5:]) - 1]
        found = {"wconfd": self.cluster.wconfd, "luxid": self.cluster.luxid, "rapi": self.cluster.rapi}.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def pid(self, name: str) -> int:
        process = self.daemon(name).process
        assert process is not None and process.poll() is None, "%s is not running" % name
        return process.pid

    async def start(self) -> ChaosCluster:
        await self.cluster.start()
        try:
            self.confd_port = free_port(self.addresses[0], udp=True)
            for paths, address in zip(self.roots, self.addresses):
                self.confds.append(Daemon(paths, "ganeti-confd", "--bind", address, "--port", str(self.confd_port)))
            for n, paths in enumerate(self.roots):  # confd answers from the replicated config.data
                await self.cluster.until(lambda p=paths: serial_of(p) is not None and os.path.exists(p.hmac_key),
                                         timeout=30)
                await self.restart("confd%d" % (n + 1))
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        for daemon in self.confds:
            daemon.stop()
        await self.cluster.stop()

    async def __aenter__(self) -> ChaosCluster:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # --- killing and restarting --------------------------------------------------------------
    def kill(self, name: str) -> None:
        """SIGKILL one daemon (its process, as C{kill -9 $(cat pidfile)})."""
        self.daemon(name).kill(signal.SIGKILL)

    async def restart(self, *names: str, timeout: float = 30.0) -> dict[str, float]:
        """Start daemons again as C{ganeti-daemons start} does: in Ganeti's
        order, each once it listens; then wait until each answers a real
        request.  C{{daemon: seconds from the restart until it answered}};
        L{RestartFailed} if one exits or stays silent for C{timeout}."""
        started = time.monotonic()
        ordered = sorted(names, key=START_ORDER.index)
        for name in ordered:
            daemon = self.daemon(name)
            daemon.start()
            if not name.startswith("confd"):  # UDP: nothing to connect to
                try:
                    await daemon.ready(self.reactor, timeout=timeout)
                except RuntimeError as e:
                    raise RestartFailed("%s did not start again: %s" % (name, tail(str(e)))) from None
        recovery = {}
        for name in ordered:
            daemon = self.daemon(name)
            while not await self.answers(name):
                if daemon.process is not None and daemon.process.poll() is not None:
                    raise RestartFailed("%s exited after a restart (status %s): %s"
                                        % (name, daemon.process.returncode, tail(daemon.output())))
                if time.monotonic() > started + timeout:
                    raise RestartFailed("%s did not answer within %ss after a restart: %s"
                                        % (name, timeout, tail(daemon.output())))
                await deferLater(self.reactor, 0.05, lambda: None)
            recovery[name] = time.monotonic() - started
        return recovery

    async def answers(self, name: str) -> bool:
        """Whether daemon C{name} answers one good request now."""
        try:
            if name == "wconfd":
                client = await WConfdClient.connect(self.reactor, self.master.wconfd_socket, timeout=2)
                try:
                    return await client.echo("chaos") == "chaos"
                finally:
                    await client.close()
            if name.startswith("noded"):
                node = "node%s.test" % name[5:]
                answers = await self.cluster.rpc.run({node: self.cluster.nodes[node]}, procedures.version.call().within(3))
                return bool(answers[node].success)
            if name.startswith("confd"):
                address = self.addresses[int(name[5:]) - 1]
                return bool(await deferToThread(confd_ping, self.master, address, self.confd_port))
            if name == "luxid":
                return bool(await deferToThread(luxi_ping, self.master))
            if name == "rapi":
                return bool(await deferToThread(rapi_ping, self))
        except Exception:
            return False
        raise KeyError(name)

    # --- RAPI ------------------------------------------------------------------------------
    @property
    def rapi_address(self) -> tuple[str, int]:
        assert self.cluster.rapi is not None
        return self.cluster.rapi.host, self.cluster.rapi.port

    def rapi_context(self) -> ssl.SSLContext:
        """TLS trusting exactly RAPI's certificate (not checking its name)."""
        context = ssl.create_default_context(cadata=self.cluster.cert_pem.decode())
        context.check_hostname = False
        return context


def luxi_ping(paths: Paths, timeout: float = 3.0) -> bool:
    with LuxiClient(paths.luxi_socket, timeout=timeout, connect_timeout=timeout) as client:
        return bool(client.query_config_values(["cluster_name"]))


def confd_ping(paths: Paths, address: str, port: int, timeout: float = 1.0) -> dict[str, Any] | None:
    """One signed confd PING; the answer, or C{None} on a timeout."""
    with open(paths.hmac_key, "rb") as handle:
        key = handle.read()
    rsalt = str(uuid.uuid4())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        packet = confd_wire.pack_request(key, confd_wire.request(confd_wire.REQ_PING, None, rsalt), time.time())
        sock.sendto(packet, (address, port))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return None
    answer, salt = confd_wire.unpack_reply(key, data)
    return answer if salt == rsalt else None


def rapi_ping(cluster: ChaosCluster, timeout: float = 3.0) -> bool:
    """GET /2/info answers 200 with the cluster's name."""
    status, body = rapi_request(cluster, b"GET /2/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout)
    return status == 200 and b"cluster.test" in body


def rapi_request(cluster: ChaosCluster, raw: bytes, timeout: float = 5.0) -> tuple[int, bytes]:
    """Send raw bytes to RAPI over TLS; the HTTP status and body (0: no answer)."""
    with socket.create_connection(cluster.rapi_address, timeout=timeout) as plain:
        with cluster.rapi_context().wrap_socket(plain) as sock:
            sock.sendall(raw)
            chunks = []
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except (TimeoutError, ssl.SSLError, ConnectionResetError):
                pass
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        return int(head.split(b" ", 2)[1]), body
    except (IndexError, ValueError):
        return 0, data


# --- the job stream ------------------------------------------------------------------------


@attrs.define
class Submitted:
    """One job the stream submitted.

    @ivar kind: C{delay}, C{delay-nodes}, C{tag}, C{group} or C{instance}
    @ivar name: the unique name of its effect (tag, group, instance)
    @ivar job_id: the id LuxiD acknowledged (C{None}: not acknowledged)
    """

    kind: str
    name: str
    ops: list[dict[str, Any]]
    job_id: int | None = None
    refused: str = ""


class JobStream:
    """Generates the trial's jobs (pure): test delays on the master and on
    nodes, tags on the cluster and nodes, a group added and removed, an
    instance created, modified, stopped, started and removed.  Every name
    is unique, so a job that runs twice fails on its own first effect."""

    WEIGHTS = (("delay", 5), ("delay-nodes", 2), ("tag", 3), ("group", 2), ("instance", 2))

    def __init__(self, rng: random.Random, tag: str) -> None:
        self.rng = rng
        self.tag = tag  # unique per trial
        self.count = 0
        self._kinds = [kind for kind, weight in self.WEIGHTS for _ in range(weight)]

    def next(self) -> Submitted:
        self.count += 1
        kind = self.rng.choice(self._kinds)
        name = "chaos-%s-%d" % (self.tag, self.count)
        return Submitted(kind, name, getattr(self, "_" + kind.replace("-", "_"))(name))

    def _delay(self, name: str) -> list[dict[str, Any]]:
        # on no node (on_master off: the job process sleeps), so that no node's fault can fail it
        return [{"OP_ID": "OP_TEST_DELAY", "duration": round(self.rng.uniform(0.01, 0.6), 3), "repeat": 1,
                 "on_master": False}]

    def _delay_nodes(self, name: str) -> list[dict[str, Any]]:
        node = self.rng.choice(WORK_NODES)
        return [{"OP_ID": "OP_TEST_DELAY", "duration": round(self.rng.uniform(0.01, 0.3), 3), "repeat": 1,
                 "on_master": False, "on_nodes": [node], "no_locks": False}]

    def _tag(self, name: str) -> list[dict[str, Any]]:
        target = self.rng.choice(("", *WORK_NODES))
        op = {"OP_ID": "OP_TAGS_SET", "kind": "node" if target else "cluster", "tags": [name]}
        if target:
            op["name"] = target
        return [op]

    def _group(self, name: str) -> list[dict[str, Any]]:
        return [{"OP_ID": "OP_GROUP_ADD", "group_name": name}, {"OP_ID": "OP_GROUP_REMOVE", "group_name": name}]

    def _instance(self, name: str) -> list[dict[str, Any]]:
        instance = name + ".test"
        template = self.rng.choice(("diskless", "sharedfile"))
        return [
            {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": instance, "mode": "create", "disk_template": template,
             "disks": [{"size": 8}] if template == "sharedfile" else [], "nics": [], "os_type": "noop",
             "pnode": self.rng.choice(WORK_NODES), "name_check": False, "ip_check": False,
             "beparams": {"memory": 64}},
            {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": instance, "beparams": {"memory": 96}},
            {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": instance, "timeout": 5},
            {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": instance},
            {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": instance, "shutdown_timeout": 5},
        ]


class Ledger:
    """What the stream submitted and what a watcher saw of each job file.

    The watcher reads the master's job files while the stream runs and
    keeps, per job, every job-process lock file it showed with the job
    started (one per process that ran) and the first final state it showed: a second
    process, or a final state that changes, means the job ran twice.
    """

    def __init__(self) -> None:
        self.jobs: list[Submitted] = []
        self.processes: dict[int, set[str]] = {}
        self.first_final: dict[int, tuple[str, Any]] = {}
        self.final_changed: dict[int, str] = {}
        self.lock = threading.Lock()

    @property
    def acknowledged(self) -> dict[int, Submitted]:
        with self.lock:
            return {job.job_id: job for job in self.jobs if job.job_id is not None}

    def observe(self, job_id: int, data: dict[str, Any]) -> None:
        livelock = data.get("livelock") or ""
        # a process counts once it ran (the job started): LuxiD records a job
        # process's lock file before confirming it, and a LuxiD killed between
        # the two requeues the job, whose process exits without running it
        # ("not confirmed by LuxiD ... not running it" in jobs.log)
        if os.path.basename(livelock).startswith("job_") and started(data):
            self.processes.setdefault(job_id, set()).add(os.path.basename(livelock))
        status = job_status(data)
        if status in FINAL:
            state = (status, data.get("end_timestamp"))
            first = self.first_final.setdefault(job_id, state)
            if first != state:
                self.final_changed.setdefault(job_id, "first %r, later %r" % (first, state))
        elif job_id in self.first_final:
            self.final_changed.setdefault(job_id, "final %r, later %s" % (self.first_final[job_id], status))


def started(data: dict[str, Any]) -> bool:
    """Whether a job file shows its job started (by the process it names)."""
    return data.get("start_timestamp") is not None or any(
        op.get("status") not in (None, "queued") for op in data.get("ops", []))


def job_status(data: dict[str, Any]) -> str:
    """A job file's status, computed from its opcodes as Ganeti does."""
    statuses = [op.get("status") for op in data.get("ops", [])]
    if not statuses or all(s == "success" for s in statuses):
        return "success" if statuses else "queued"
    for status in ("error", "canceled"):
        if status in statuses:
            return status
    for status in ("canceling", "running", "waiting"):
        if status in statuses:
            return status
    return "queued"


def read_job_file(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as handle:
            data = orjson.loads(handle.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stream_jobs(paths: Paths, stream: JobStream, ledger: Ledger, stop: threading.Event, rate: float) -> None:
    """Submit C{rate} jobs a second over LUXI until C{stop} is set (a thread).

    A submission that fails (LuxiD down) is not retried: the next job
    goes when LuxiD is back; only acknowledged jobs count."""
    client = LuxiClient(paths.luxi_socket, timeout=30, connect_timeout=2)
    try:
        while not stop.is_set():
            began = time.monotonic()
            job = stream.next()
            try:
                job.job_id = client.submit_job(job.ops)
            except (errors.GenericError, OSError) as e:
                job.refused = "%s: %s" % (type(e).__name__, e)
                client.close()
                stop.wait(0.1)
            with ledger.lock:
                ledger.jobs.append(job)
            stop.wait(max(0.0, 1.0 / rate - (time.monotonic() - began)))
    finally:
        client.close()


def watch_jobs(paths: Paths, ledger: Ledger, stop: threading.Event, interval: float = 0.1) -> None:
    """Read the master's job files of unfinished jobs until C{stop} (a thread)."""
    while True:
        last = stop.is_set()
        for job_id in ledger.acknowledged:
            data = read_job_file(os.path.join(paths.queue_dir, "job-%d" % job_id))
            if data is not None:
                ledger.observe(job_id, data)
        if last:
            return
        stop.wait(interval)


# --- faults ---------------------------------------------------------------------------------


def running_job_process(paths: Paths, ledger: Ledger) -> tuple[int, int] | None:
    """C{(job id, pid)} of a job process that LuxiD confirmed and that runs now."""
    for job_id in sorted(ledger.acknowledged, reverse=True):
        data = read_job_file(os.path.join(paths.queue_dir, "job-%d" % job_id))
        if data is None or job_status(data) not in ("waiting", "running"):
            continue
        pid = data.get("process_id")
        if os.path.basename(data.get("livelock") or "").startswith("job_") and isinstance(pid, int):
            return job_id, pid
    return None


async def kill_job_process(cluster: ChaosCluster, ledger: Ledger, timeout: float = 10.0) -> int | None:
    """SIGKILL a running job's process; its job id (C{None}: none ran)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = running_job_process(cluster.master, ledger)
        if found is not None:
            job_id, pid = found
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as e:
                if e.errno != errno.ESRCH:
                    raise
                continue  # it ended just now: take another
            return job_id
        await deferLater(cluster.reactor, 0.02, lambda: None)
    return None


async def inject(cluster: ChaosCluster, fault: str, ledger: Ledger, rng: random.Random) -> tuple[dict[str, float], int | None]:
    """Kill what C{fault} names, wait a moment, restart it in Ganeti's
    order; C{({daemon: seconds until it answered}, killed job id)}."""
    names = FAULTS[fault]
    if names == ("job",):
        return {}, await kill_job_process(cluster, ledger)
    for name in names:
        cluster.kill(name)
    await deferLater(cluster.reactor, rng.uniform(0.0, 0.5), lambda: None)
    return await cluster.restart(*names), None


# --- a trial ---------------------------------------------------------------------------------


@attrs.define
class TrialResult:
    """What one trial saw; C{violations} are the broken promises."""

    fault: str
    seed: int
    acknowledged: int = 0
    lost: list[int] = attrs.Factory(list)
    ran_twice: dict[int, str] = attrs.Factory(dict)
    failed: dict[int, str] = attrs.Factory(dict)
    killed_job: int | None = None
    locks_left: list[Any] = attrs.Factory(list)
    stale_replicas: list[str] = attrs.Factory(list)
    serials: dict[str, int | None] = attrs.Factory(dict)
    verify: str = ""
    half_removed: list[str] = attrs.Factory(list)
    effects: list[str] = attrs.Factory(list)
    recovery: dict[str, float] = attrs.Factory(dict)
    violations: list[str] = attrs.Factory(list)
    broken: bool = False  # the cluster did not come back: later trials need a new one

    @property
    def failed_by_fault(self) -> int:
        return len(self.failed)

    def describe(self) -> str:
        lines = ["fault %s (seed %d): %d acknowledged, %d lost, %d ran twice, %d failed"
                 % (self.fault, self.seed, self.acknowledged, len(self.lost), len(self.ran_twice), len(self.failed))]
        lines += ["  " + v for v in self.violations]
        return "\n".join(lines)


# --- accounting ------------------------------------------------------------------------------


@attrs.define
class FaultSummary:
    """The sum of the trials of one fault (one row of the table)."""

    fault: str
    trials: int = 0
    acknowledged: int = 0
    lost: int = 0
    ran_twice: int = 0
    failed: int = 0
    locks_left: int = 0
    stale_replicas: int = 0
    violations: int = 0
    recovery: list[float] = attrs.Factory(list)

    def add(self, result: TrialResult) -> None:
        self.trials += 1
        self.acknowledged += result.acknowledged
        self.lost += len(result.lost)
        self.ran_twice += len(result.ran_twice)
        self.failed += result.failed_by_fault
        self.locks_left += len(result.locks_left)
        self.stale_replicas += len(result.stale_replicas)
        self.violations += len(result.violations)
        if result.recovery:
            self.recovery.append(max(result.recovery.values()))


def summarize(results: Iterable[TrialResult]) -> dict[str, FaultSummary]:
    summaries: dict[str, FaultSummary] = {}
    for result in results:
        summaries.setdefault(result.fault, FaultSummary(result.fault)).add(result)
    return summaries


TABLE_HEADER = "%-16s %6s %6s %5s %6s %7s %6s %6s %6s %9s" % (
    "fault", "trials", "acked", "lost", "twice", "failed", "locks", "stale", "broken", "answer s")


def table_row(s: FaultSummary) -> str:
    answer = "%.2f" % max(s.recovery) if s.recovery else "-"
    return "%-16s %6d %6d %5d %6d %7d %6d %6d %6d %9s" % (
        s.fault, s.trials, s.acknowledged, s.lost, s.ran_twice, s.failed, s.locks_left, s.stale_replicas,
        s.violations, answer)


def totals(results: list[TrialResult]) -> dict[str, Any]:
    """The figures of the JSON line of C{scripts/bench chaos}."""
    restart_faults = {f for f, names in FAULTS.items() if {"wconfd", "luxid"} & set(names)}
    return {
        "trials": len(results),
        "acknowledged_jobs": sum(r.acknowledged for r in results),
        "lost_jobs": sum(len(r.lost) for r in results),
        "duplicate_jobs": sum(len(r.ran_twice) for r in results),
        "jobs_failed_by_fault": sum(r.failed_by_fault for r in results),
        "jobs_failed_by_wconfd_restart": sum(r.failed_by_fault for r in results if r.fault in restart_faults),
        "locks_left": sum(len(r.locks_left) for r in results),
        "stale_replicas": sum(len(r.stale_replicas) for r in results),
        "verify_failures": sum(1 for r in results if r.verify),
        "half_removed_instances": sum(len(r.half_removed) for r in results),
        "violations": sum(len(r.violations) for r in results),
        "max_seconds_to_answer": max((max(r.recovery.values()) for r in results if r.recovery), default=0.0),
    }


__all__ = ["FAULTS", "ChaosCluster", "JobStream", "Ledger", "TrialResult", "fd_count", "rss_kib", "tcp_peers",
           "tcp_sockets", "summarize", "totals"]
