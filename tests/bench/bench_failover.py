"""scripts/bench failover [--rounds N] [--long-job S] [--faults N] [--kinds K,...] [--failover-timeout S]: master failovers under a job stream.

Anchors: Ganeti 3.0 has manual failover only (an admin must notice; its
watcher runs every 5 minutes); Proxmox VE HA relocates in about 2 minutes;
Kubernetes notices a dead node in 40-50 s.  Targets (issue 23) on a 3-node
cluster: C{gnt-cluster master-failover} completes in at most 3 s; with
automatic failover and the default 10 s timeout, from the fault to the new
master accepting a job at most 13 s, for every kind of fault; no
acknowledged job lost, none given twice, no job whose reported success
lacks its effect, no error seen by the job stream's clients.

A 3-node cluster (every node a master candidate; each node in a network
namespace of its own when namespaces can be made, else on loopback without
the partition fault) runs a stream of cluster-tag jobs (one tag per job)
from a client on every node (L{ganeti.testing.jobstream}: a
L{ganeti.luxi.master.MasterClient}, which finds the master and rides through
a failover as the CLI does; every error it raises is an error a user saw;
the client on the node a fault hits is paused for that fault).  First the
master role goes round the nodes C{--rounds} times by C{gnt-cluster
master-failover}, each while a job of C{--long-job} seconds (default 30)
runs on the master (it must end in error, "master failover", and hold
nothing up); then, with automatic failover on (C{--failover-timeout},
default 10 s), C{--faults} faults of each kind of C{--kinds}, taken in turn:

 - C{kill}: C{kill -9} of every process of the master's root; its NodeD is
   started again (a plain node now) before the next fault;
 - C{stop}: C{SIGSTOP} of every process of the master's root (its kernel
   keeps its connections open), C{SIGCONT} once a new master serves;
 - C{stuck}: C{SIGSTOP} of the master's LuxiD alone (its NodeD answers
   on), C{SIGCONT} once a new master serves;
 - C{partition}: the master's link cut, restored once a new master serves.

The time from the fault until another node accepts a job is what each
fault measures; after it the old master must hold the new master's config
before the next fault.  Afterwards every acknowledged job must be known to
the last master and final, no job id given twice, and every job reported
successful must have its tag in the config.  Prints a table, then one JSON
line.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti import daemons
from ganeti.ha import params as ha_params
from ganeti.ha.epoch import read_config_epoch
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.auto_failover import enable_auto_failover, kill_root, root_pids, try_submit
from ganeti.testing.chaos import child_processes, cpu_seconds
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, serial_of, ssconf_of
from ganeti.testing.daemons import make_root, remove_root
from ganeti.testing.jobstream import JobStream
from ganeti.testing.netns import Namespaces, NetnsCluster

NODES = ["node1.test", "node2.test", "node3.test"]
KINDS = ("kill", "stop", "partition", "stuck")
FINAL = ("success", "error", "canceled")
#: seconds between two submissions of the stream (one cluster tag each: keep below Ganeti's tag limit)
STREAM_INTERVAL = 0.1


class Streams:
    """One stream of tag jobs per node (L{ganeti.testing.jobstream}): a
    client on that node (a L{ganeti.luxi.master.MasterClient}, in the
    node's namespace) that finds the master itself and rides through
    failovers, as a user's client does; every error it raises is an error
    the user saw.  The stream of the node a fault hits is paused for the
    fault (a user's shell on a dead node is no client that can ride through)."""

    def __init__(self, cluster: LoopbackCluster, interval: float = STREAM_INTERVAL) -> None:
        env = {"GANETI_HEARTBEAT_PORT": str(cluster.heartbeat_port)}
        spaces = cluster.spaces.nodes if isinstance(cluster, NetnsCluster) else [None] * len(cluster.roots)
        count = len(cluster.roots)
        self.streams = [JobStream(paths, "bench%d-" % (n + 1), interval=interval * count, env=env, netns=netns)
                        for n, (paths, netns) in enumerate(zip(cluster.roots, spaces))]

    def start(self) -> None:
        for stream in self.streams:
            stream.start()

    def stop(self) -> None:
        for stream in self.streams:
            stream.stop()

    def kill(self) -> None:
        for stream in self.streams:
            stream.kill()

    @property
    def acknowledged(self) -> dict[int, str]:
        return {job: tag for stream in self.streams for job, tag in stream.acknowledged.items()}

    @property
    def ids(self) -> list[int]:
        return [job for stream in self.streams for job in stream.ids]

    @property
    def errors(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for stream in self.streams:
            for message, count in stream.errors.items():
                found[message] = found.get(message, 0) + count
        return found

    @property
    def error_count(self) -> int:
        return sum(stream.error_count for stream in self.streams)


def _cpu_now(pid: int) -> float | None:
    try:
        return cpu_seconds(pid)
    except OSError:
        return None


async def warm_launchers_ready(reactor: Any, cluster: LoopbackCluster, timeout: float = 120.0) -> float:
    """Wait until every node's NodeD keeps a warm launcher of the master daemons (every node here is a master
    candidate: L{ganeti.noded.warm}) done with its imports (its CPU time still for 0.5 s), as on a cluster
    that has run for a while; the seconds it took."""
    began = time.monotonic()
    while True:
        launchers = []
        for daemon in cluster.nodeds:
            process = daemon.process
            found = [int(child.split()[0]) for child in (child_processes(process.pid) if process is not None else ())
                     if "ganeti.warmstart" in child]
            launchers.append(found[0] if found else None)
        if all(pid is not None for pid in launchers):
            before = [_cpu_now(pid) for pid in launchers if pid is not None]
            await task.deferLater(reactor, 0.5, lambda: None)
            if before == [_cpu_now(pid) for pid in launchers if pid is not None]:
                return time.monotonic() - began
        else:
            await task.deferLater(reactor, 0.2, lambda: None)
        if time.monotonic() - began > timeout:
            raise SystemExit("no settled warm launcher on every node after %.0f s" % timeout)


def failover(cluster: LoopbackCluster, index: int) -> tuple[float, subprocess.CompletedProcess[str]]:
    argv = [os.path.join(BIN, "gnt-cluster"), "--root", cluster.roots[index].root, "master-failover",
            "--rpc-port", str(cluster.rpc_port)]
    if isinstance(cluster, NetnsCluster):
        argv = ["ip", "netns", "exec", cluster.spaces.nodes[index], *argv]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return time.monotonic() - start, done


async def long_job(reactor: Any, master: Paths, seconds: float) -> int:
    """Submit a job sleeping C{seconds} to C{master}; its id once it runs."""
    client = LuxiClient(master.luxi_socket, timeout=60)
    job = [{"OP_ID": "OP_TEST_DELAY", "duration": seconds, "on_master": False, "reason": [["bench:failover", "", 0]]}]
    ((ok, job_id),) = await threads.deferToThread(client.submit_many_jobs, [job])
    if not ok:
        raise SystemExit("the long job was refused: %s" % job_id)
    for _ in range(1200):
        ((status,),) = await threads.deferToThread(client.query_jobs, [job_id], ["status"])
        if status != "queued" and status != "waiting":
            return int(job_id)
        await task.deferLater(reactor, 0.05, lambda: None)
    raise SystemExit("the long job %s did not start within a minute" % job_id)


def wait_final(client: LuxiClient, ids: list[int], timeout: float = 300) -> dict[int, Any]:
    deadline = time.monotonic() + timeout
    found: dict[int, Any] = {}
    while True:
        pending = [i for i in ids if found.get(i) not in FINAL]
        for start in range(0, len(pending), 500):
            rows = client.query_jobs(pending[start:start + 500], ["id", "status"])
            found.update({row[0]: row[1] for row in rows if row is not None})
        if all(found.get(i) in FINAL for i in ids) or time.monotonic() > deadline:
            return {i: found.get(i) for i in ids}
        time.sleep(0.2)


def cluster_tags(paths: Paths) -> set[str]:
    done = subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, "list-tags"], capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit("gnt-cluster list-tags failed: %s" % done.stderr)
    return set(done.stdout.split())


def explain_no_effect(client: LuxiClient, cluster: LoopbackCluster, ids: list[int], acked: dict[int, str]) -> None:
    """What the last master knows of each job whose success lacks its effect, and which node's config holds its tag."""
    fields = ["id", "status", "received_ts", "start_ts", "end_ts", "opresult", "oplog"]
    for row in client.query_jobs(ids, fields):
        tag = acked[row[0]]
        holders = [NODES[n] for n, paths in enumerate(cluster.roots) if tag in config_text(paths)]
        print("  no effect: job %s tag %s %s received %s start %s end %s result %s log %s; tag in: %s"
              % (row[0], tag, row[1], row[2], row[3], row[4], row[5], row[6], holders or "no node"), flush=True)


def config_text(paths: Paths) -> str:
    text = ""
    for name in (paths.config_data, paths.config_journal):
        try:
            with open(name, errors="replace") as f:
                text += f.read()
        except OSError:
            pass
    return text


def master_name(paths: Paths) -> str | None:
    value = ssconf_of(paths, "master_node")
    return value.strip() if value else None


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def luxid_pid(paths: Paths) -> list[int]:
    """The pid of C{paths}' LuxiD (from its pid file: a LuxiD started warm has the launcher's command line)."""
    pid = daemons.running_pid(paths, daemons.spec_by_name("ganeti-luxid"))
    return [] if pid is None else [pid]


class Fault:
    """One fault of C{kind} on node C{index} (the master), and its repair."""

    def __init__(self, cluster: LoopbackCluster, kind: str, index: int) -> None:
        self.cluster, self.kind, self.index = cluster, kind, index
        self.paused: list[int] = []

    def inject(self) -> None:
        paths = self.cluster.roots[self.index]
        if self.kind == "kill":
            kill_root(paths)
        elif self.kind == "stop":
            self.paused = root_pids(paths)
            signal_all(self.paused, signal.SIGSTOP)
        elif self.kind == "stuck":
            self.paused = luxid_pid(paths)
            if not self.paused:
                raise SystemExit("no LuxiD runs on %s to stop" % NODES[self.index])
            signal_all(self.paused, signal.SIGSTOP)
        elif self.kind == "partition":
            assert isinstance(self.cluster, NetnsCluster)
            self.cluster.spaces.cut(self.index)
        else:
            raise ValueError(self.kind)

    async def repair(self) -> None:
        """Undo the fault: the node runs again (a plain node now)."""
        if self.kind == "kill":
            await self.cluster.start_daemon(self.cluster.nodeds[self.index])
        elif self.kind in ("stop", "stuck"):
            signal_all(self.paused, signal.SIGCONT)
        elif self.kind == "partition":
            assert isinstance(self.cluster, NetnsCluster)
            self.cluster.spaces.heal(self.index)

    def undo_now(self) -> None:
        """On the way out: nothing left stopped or cut."""
        if self.kind in ("stop", "stuck"):
            signal_all(self.paused, signal.SIGCONT)
        elif self.kind == "partition" and isinstance(self.cluster, NetnsCluster):
            self.cluster.spaces.heal(self.index)


async def fault_and_wait(reactor: Any, cluster: LoopbackCluster, fault: Fault, limit: float) -> tuple[float, int]:
    """Inject C{fault}; the seconds until another node accepts a job, and that node's index."""
    roots = cluster.roots
    print("%s %s of %s at %.3f" % (time.strftime("%H:%M:%S"), fault.kind, NODES[fault.index], time.time()), flush=True)
    fault.inject()
    began = time.monotonic()
    others = [i for i in range(len(roots)) if i != fault.index]
    while True:
        for i in others:
            if await threads.deferToThread(try_submit, roots[i]) is not None:
                return time.monotonic() - began, i
        if time.monotonic() - began > limit:
            raise SystemExit("no new master %.0f s after the %s of %s" % (limit, fault.kind, NODES[fault.index]))
        await task.deferLater(reactor, 0.05, lambda: None)


#: what NodeD and LuxiD log about losing a master and electing the next
ELECTION_WORDS = ("vote", "elect", "take-over", "master", "epoch", "step", "liveness", "lost")


def election_lines(cluster: LoopbackCluster, since: float, limit: int = 60) -> str:
    """Every node's NodeD and LuxiD log lines about the election since C{since} (a time.time())."""
    import datetime

    out = []
    for name, paths in zip(NODES, cluster.roots):
        for daemon in ("ganeti-noded", "ganeti-luxid"):
            try:
                with open(os.path.join(paths.root, daemon + ".out"), errors="replace") as handle:
                    lines = handle.read().splitlines()
            except OSError:
                continue
            for line in lines:
                try:
                    when = datetime.datetime.fromisoformat(line[:24]).timestamp()
                except ValueError:
                    continue
                if when >= since and any(word in line.lower() for word in ELECTION_WORDS):
                    out.append("  %s %s: %s" % (name, daemon, line[:300]))
    out.sort(key=lambda line: line.split(": ", 1)[1][:24])
    return "\n".join(out[-limit:]) or "  (nothing logged)"


async def converged(cluster: LoopbackCluster, index: int, master: int) -> None:
    """Wait until node C{index} holds the new master's config: the same serial
    written under the same master epoch (a replaced master may hold other
    changes at the same serial numbers, written under its own epoch)."""
    roots = cluster.roots
    await cluster.until(lambda: master_name(roots[index]) == NODES[master]
                        and serial_of(roots[index]) == serial_of(roots[master])
                        and read_config_epoch(roots[index]) == read_config_epoch(roots[master]), timeout=180)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench failover")
    parser.add_argument("--rounds", type=int, default=10, help="manual failovers (default %(default)s)")
    parser.add_argument("--faults", type=int, default=10,
                        help="faults of each kind with automatic failover (default %(default)s)")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="kinds of fault, comma-separated, of %s (default all; partition only where"
                             " network namespaces can be made)" % ", ".join(KINDS))
    parser.add_argument("--long-job", type=float, default=30.0, metavar="SECONDS",
                        help="a job of that many seconds runs on the master at each manual failover; it must end"
                             " in error (\"master failover\"); 0: none (default %(default)s)")
    parser.add_argument("--failover-timeout", type=float, default=ha_params.DEFAULT_FAILOVER_TIMEOUT,
                        help="the automatic failover's timeout (default %(default)s s)")
    options = parser.parse_args(argv)
    options.kinds = [k for k in options.kinds.split(",") if k]
    unknown = sorted(set(options.kinds) - set(KINDS))
    if unknown:
        parser.error("unknown kind of fault: %s (known: %s)" % (", ".join(unknown), ", ".join(KINDS)))
    return options


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    return "median %.2f s, max %.2f s (%d)" % (statistics.median(values), max(values), len(values))


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def bench(reactor: Any, options: argparse.Namespace) -> None:
    why = Namespaces.unavailable()
    kinds = list(options.kinds)
    if why is not None and "partition" in kinds:
        print("no partition faults: %s" % why, flush=True)
        kinds.remove("partition")
    config = loopback_config(3, candidate_pool_size=10, candidates=NODES[1:])
    root = make_root("gntbf")
    spaces = None
    if why is None:
        spaces = Namespaces.create("gntbf%d" % os.getpid(), 3)
        cluster: LoopbackCluster = NetnsCluster(reactor, root, config, spaces, prefix="gntbf")
    else:
        cluster = LoopbackCluster(reactor, root, config, prefix="gntbf")
    manual: list[float] = []
    to_job: list[float] = []  # from the command's start to the new master accepting a job
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    stream: Streams | None = None
    fault: Fault | None = None
    try:
        await cluster.start()
        await cluster.until(lambda: all(serial_of(p) for p in cluster.roots), timeout=120)
        # measured on a cluster that has settled, as an admin's has: the candidates' launchers warm
        print("warm launchers ready on every node after %.1f s" % await warm_launchers_ready(reactor, cluster),
              flush=True)
        stream = Streams(cluster)
        stream.start()
        await task.deferLater(reactor, 1.0, lambda: None)
        master = 0
        long_jobs: dict[int, str | None] = {}
        for number in range(options.rounds):
            target = (master + 1) % 3
            if options.long_job > 0:  # what an admin's master often has: a long job running
                long_jobs[await long_job(reactor, cluster.roots[master], options.long_job)] = None
            elapsed, done = await threads.deferToThread(failover, cluster, target)
            if done.returncode != 0:
                raise SystemExit("failover %d failed:\n%s%s" % (number + 1, done.stdout, done.stderr))
            master = target
            manual.append(elapsed)
            began = time.monotonic()  # the command's end until the new master accepts a job (its LuxiD serves)
            while await threads.deferToThread(try_submit, cluster.roots[master]) is None:
                if time.monotonic() - began > 120:
                    raise SystemExit("%s does not accept jobs 120 s after its master-failover" % NODES[master])
                await task.deferLater(reactor, 0.02, lambda: None)
            to_job.append(elapsed + time.monotonic() - began)
            print("manual %2d: %s is master after %.2f s, accepts a job after %.2f s" % (
                number + 1, NODES[master], elapsed, to_job[-1]), flush=True)
            await task.deferLater(reactor, 1.0, lambda: None)
        enable_auto_failover(cluster.roots, options.failover_timeout)
        for number in range(options.faults):
            for kind in kinds:
                await task.deferLater(reactor, 1.5, lambda: None)  # jobs flowing to this master
                fault = Fault(cluster, kind, master)
                await threads.deferToThread(stream.streams[master].pause)
                elapsed, new = await fault_and_wait(reactor, cluster, fault, options.failover_timeout + 120)
                times[kind].append(elapsed)
                print("%-9s %2d: %s failed, %s accepts jobs after %.2f s" % (kind, number + 1, NODES[master],
                                                                            NODES[new], elapsed), flush=True)
                if elapsed > options.failover_timeout + 3:  # over the target: where the seconds went
                    print(election_lines(cluster, since=time.time() - elapsed - 1), flush=True)
                await fault.repair()
                await converged(cluster, master, new)
                stream.streams[master].resume()
                fault, master = None, new
        await threads.deferToThread(stream.stop)
        final = LuxiClient(cluster.roots[master].luxi_socket, timeout=120)
        long_jobs = await threads.deferToThread(wait_final, final, sorted(long_jobs))
        acknowledged = sorted(stream.acknowledged)  # every client's
        statuses = await threads.deferToThread(wait_final, final, acknowledged)
        tags = await threads.deferToThread(cluster_tags, cluster.roots[master])
        lost = sorted(i for i, s in statuses.items() if s is None)
        duplicates = len(stream.ids) - len(set(stream.ids))
        failed = sorted(i for i, s in statuses.items() if s == "error")
        acked = stream.acknowledged
        no_effect = sorted(i for i, s in statuses.items() if s == "success" and acked[i] not in tags)
        if no_effect:
            await threads.deferToThread(explain_no_effect, final, cluster, no_effect, acked)
        faults = sum(len(v) for v in times.values())
        print("%-44s %s" % ("gnt-cluster master-failover", summary(manual)))
        print("%-44s %s" % ("  its start to the new master accepting a job", summary(to_job)))
        for kind in kinds:
            print("%-44s %s" % ("%s to a new master accepting a job" % kind, summary(times[kind])))
        print("%-44s %g s" % ("failover timeout", options.failover_timeout))
        print("%-44s %d" % ("jobs acknowledged", len(acknowledged)))
        print("%-44s %d" % ("acknowledged jobs lost", len(lost)))
        print("%-44s %d" % ("job ids given twice", duplicates))
        print("%-44s %d" % ("reported success without its effect", len(no_effect)))
        print("%-44s %d (ran on a failed master)" % ("jobs ended in error", len(failed)))
        print("%-44s %d" % ("errors the stream's clients saw", stream.error_count))
        print("%-44s %s" % ("long jobs running at a manual failover, ended",
                            ", ".join("%s %d" % (status, list(long_jobs.values()).count(status))
                                      for status in sorted({str(v) for v in long_jobs.values()})) or "-"))
        for message, count in sorted(stream.errors.items(), key=lambda item: -item[1])[:5]:
            print("    %5d  %s" % (count, message))

        def worst(kind: str) -> float | None:
            return max(times[kind]) if times.get(kind) else None

        def median(kind: str) -> float | None:
            return statistics.median(times[kind]) if times.get(kind) else None

        print(orjson.dumps({
            "manual_failover_s_max": rounded(max(manual)) if manual else None,
            "manual_failover_s": rounded(statistics.median(manual)) if manual else None,
            "manual_failover_to_job_s_max": rounded(max(to_job)) if to_job else None,
            "failovers": len(manual),
            "failover_timeout_s": options.failover_timeout,
            "auto_failover_kill_s_max": rounded(worst("kill")),
            "auto_failover_kill_s": rounded(median("kill")),
            "auto_failover_stop_s_max": rounded(worst("stop")),
            "auto_failover_stop_s": rounded(median("stop")),
            "auto_failover_partition_s_max": rounded(worst("partition")),
            "auto_failover_partition_s": rounded(median("partition")),
            "auto_failover_stuck_s_max": rounded(worst("stuck")),
            "auto_failover_stuck_s": rounded(median("stuck")),
            "faults": faults,
            "jobs": len(acknowledged),
            "lost_jobs": len(lost),
            "duplicate_jobs": duplicates,
            "success_without_effect": len(no_effect),
            "failed_jobs": len(failed),
            "client_errors": stream.error_count,
            "long_jobs_not_in_error": sum(1 for status in long_jobs.values() if status != "error"),
        }).decode())
    finally:
        if stream is not None:
            stream.kill()
        if fault is not None:
            fault.undo_now()
        await cluster.stop()
        if os.environ.get("GANETI_BENCH_KEEP"):
            print("kept the cluster's files in %s" % root.root)
        else:
            remove_root(root)
        if spaces is not None:
            spaces.destroy()


def main() -> None:
    options = parse_args(sys.argv[1:])
    task.react(lambda reactor: defer.ensureDeferred(bench(reactor, options)))


if __name__ == "__main__":
    main()
