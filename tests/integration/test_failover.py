"""gnt-cluster master-failover on a real 3-node loopback cluster.

node1 is the master, node2 and node3 are master candidates; the cluster
runs one job at a time so that jobs stay queued while one runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons, serializer
from ganeti.ha import epoch
from ganeti.jobs import replicas
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, serial_of, ssconf_of
from ganeti.testing.fdcount import quick_job, wait_final

CANDIDATES = ["node2.test", "node3.test"]
CHECKOUT = Path(__file__).resolve().parents[2]
GANETI_LIB = CHECKOUT / ".venv" / "ganeti-3.0" / "usr" / "share" / "ganeti" / "3.0"


def ganeti_getmaster(paths: Paths) -> str | None:
    """What Ganeti 3.0.2's own gnt-cluster getmaster prints on this node
    (None when its Python package is not installed here)."""
    if not (GANETI_LIB / "ganeti" / "cli.py").exists():
        return None
    done = subprocess.run([sys.executable, str(CHECKOUT / "tests" / "compat" / "ganeti_getmaster.py"),
                           paths.data_dir], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(GANETI_LIB)), cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def cluster_config(count: int = 3, candidates: list[str] = CANDIDATES) -> object:
    config = loopback_config(count, candidate_pool_size=10, candidates=candidates)
    return attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))


def with_identities(cluster: LoopbackCluster) -> None:
    """Each root knows which node it is (what gnt-cluster init / a join writes)."""
    for paths, (name, address) in zip(cluster.roots, cluster.nodes.items()):
        daemons.write_node_identity(paths, name, address)


def gnt_cluster(cluster: LoopbackCluster, paths: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    """Run gnt-cluster on C{paths}; the commands that talk to node daemons get the cluster's port."""
    if args and args[0] in ("master-failover", "activate-master-ip", "deactivate-master-ip"):
        args = (args[0], "--rpc-port", str(cluster.rpc_port), *args[1:])
    return subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, *args], capture_output=True,
                          text=True, timeout=180)


def master_of(paths: Paths) -> str | None:
    value = ssconf_of(paths, "master_node")
    return value.strip() if value else None


def liveness_on(paths: Paths) -> dict[str, str]:
    """C{gnt-node list -o name,liveness} on C{paths}' LuxiD."""
    done = subprocess.run([os.path.join(BIN, "gnt-node"), "--root", paths.root, "list", "--no-headers",
                           "--separator=|", "-o", "name,liveness"], capture_output=True, text=True, timeout=60)
    return dict(line.split("|")[:2] for line in done.stdout.splitlines() if "|" in line)


def job_status(paths: Paths, job_id: int) -> str | None:
    try:
        with open(os.path.join(paths.queue_dir, "job-%d" % job_id), "rb") as handle:
            return replicas.job_status(handle.read())
    except FileNotFoundError:
        return None


def job_process(paths: Paths, job_id: int) -> int:
    """The pid of the process running C{job_id} on C{paths}' node (its job file)."""
    pid = serializer.read_json(os.path.join(paths.queue_dir, "job-%d" % job_id))["process_id"]
    assert isinstance(pid, int) and pid > 1
    return pid


def alive(pid: int) -> bool:
    """Whether process C{pid} runs (a zombie no longer does)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


async def submit(client: LuxiClient, jobs: list) -> list[int]:
    answers = await threads.deferToThread(client.submit_many_jobs, jobs)
    assert all(ok for ok, _ in answers), answers
    return [job_id for _ok, job_id in answers]


async def ready_cluster(cluster: LoopbackCluster) -> None:
    with_identities(cluster)
    await cluster.until(lambda: all(master_of(p) == "node1.test" and serial_of(p) for p in cluster.roots[1:3]),
                        timeout=30)


def stop_master_daemons(paths: Paths) -> None:
    daemons.stop(paths, ["ganeti-luxid", "ganeti-rapi", "ganeti-wconfd"], out=lambda _line: None)


@pytest_twisted.ensureDeferred
async def test_manual_failover_with_jobs_in_flight(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            old = LuxiClient(roots[0].luxi_socket, timeout=60)
            running = await submit(old, [quick_job(30.0)])
            await cluster.until(lambda: job_status(roots[0], running[0]) == "running")
            queued = await submit(old, [quick_job(0.2) for _ in range(4)])
            # acknowledged once a majority holds them: node2 may be the candidate still writing
            await cluster.until(lambda: all(job_status(roots[1], j) == "queued" for j in queued), timeout=30)

            process = job_process(roots[0], running[0])
            done = gnt_cluster(cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            # the old master's job process does not go on running a job the new master ended
            await cluster.until(lambda: not alive(process), timeout=30)

            for paths in roots:
                assert master_of(paths) == "node2.test"
                assert epoch.read_epoch(paths) == 1
                assert ganeti_getmaster(paths) in ("node2.test", None)  # Ganeti's own getmaster agrees
            # the old master's daemons are stopped
            assert cluster.luxid.process.wait(timeout=30) is not None
            assert cluster.wconfd.process.wait(timeout=30) is not None

            new = LuxiClient(roots[1].luxi_socket, timeout=60)
            statuses = await threads.deferToThread(wait_final, new, running + queued, 120)
            assert statuses == {running[0]: "error", **{j: "success" for j in queued}}
            # one ending: nowhere does the job that ran on the old master end otherwise
            assert {job_status(p, running[0]) for p in roots} <= {"error", "running"}
            (result,) = await threads.deferToThread(new.query_jobs, [running[0]], ["opresult"])
            assert "master failover" in str(result)
            # job ids are never reused
            (later,) = await submit(new, [quick_job()])
            assert later > max(queued)
            await threads.deferToThread(wait_final, new, [later], 60)
            # one config serial everywhere
            await cluster.until(lambda: len({serial_of(p) for p in roots}) == 1, timeout=30)
            # every NodeD's heartbeats found the new master (ssconf)
            await cluster.until(lambda: liveness_on(roots[1]) == {"node1.test": "up", "node2.test": "up",
                                                                   "node3.test": "up"}, timeout=30)
            info = gnt_cluster(cluster, roots[1], "info")
            assert "Master node: node2.test" in info.stdout and "Master epoch (this node): 1" in info.stdout
            assert "  Last failover: " in info.stdout and ", to node2.test from node1.test (epoch 1)\n" in info.stdout
            assert gnt_cluster(cluster, roots[1], "master-ping").returncode == 0
            assert gnt_cluster(cluster, roots[0], "master-ping").returncode == 1
            # the old master's WConfD, started again, loses the start-up vote and does not serve
            cluster.wconfd.start()
            assert cluster.wconfd.process.wait(timeout=60) is not None
            assert "Voting cannot be won" in cluster.wconfd.output()
        finally:
            for paths in roots[1:]:
                stop_master_daemons(paths)


@pytest_twisted.ensureDeferred
async def test_refusals(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots = cluster.roots
        await ready_cluster(cluster)
        # on the master itself, and on a node that is not a candidate
        done = gnt_cluster(cluster, roots[0], "master-failover")
        assert done.returncode == 1 and "node1.test is already the master" in done.stderr
        with open(roots[2].ssconf("master_candidates"), "w") as handle:
            handle.write("node1.test\nnode2.test\n")
        done = gnt_cluster(cluster, roots[2], "master-failover")
        assert done.returncode == 1 and "not among the nodes marked as master candidates" in done.stderr
        # outvoted: this node believes in another master than the others
        with open(roots[2].ssconf("master_candidates"), "w") as handle:
            handle.write("node1.test\nnode2.test\nnode3.test\n")
        os.chmod(roots[2].ssconf("master_node"), 0o644)
        with open(roots[2].ssconf("master_node"), "w") as handle:
            handle.write("node2.test\n")
        done = gnt_cluster(cluster, roots[2], "master-failover")
        assert done.returncode == 1
        assert "I believe the master is node2.test but the other nodes voted node1.test" in done.stderr
        # nothing changed: same master, no new epoch
        assert master_of(roots[1]) == "node1.test"
        assert all(epoch.read_epoch(p) == 0 for p in roots)


def cluster_tags(paths: Paths) -> list[str]:
    done = subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, "list-tags"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest_twisted.ensureDeferred
async def test_a_stale_candidate_catches_up_before_it_takes_over(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots, nodeds = cluster.roots, cluster.nodeds
        try:
            await ready_cluster(cluster)
            nodeds[2].stop()  # node3 misses what follows
            client = LuxiClient(roots[0].luxi_socket, timeout=60)
            done = await submit(client, [quick_job() for _ in range(3)])
            await threads.deferToThread(wait_final, client, done, 60)
            tagged = subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", roots[0].root, "add-tags",
                                     "while-node3-was-down"], capture_output=True, text=True, timeout=60)
            assert tagged.returncode == 0, tagged.stderr
            await cluster.until(lambda: all(job_status(roots[1], j) == "success" for j in done))
            await cluster.until(lambda: b"while-node3-was-down" in _config_bytes(roots[1]))
            assert serial_of(roots[2]) < serial_of(roots[1])
            # the master dies; node3 comes back and takes over: it must not start from its old state
            for daemon in (cluster.luxid, cluster.wconfd, nodeds[0]):
                daemon.kill()
            await cluster.start_daemon(nodeds[2])
            failover = gnt_cluster(cluster, roots[2], "master-failover")
            assert failover.returncode == 0, (failover.stdout, failover.stderr)
            assert "Fetched the newer config.data" in failover.stdout
            assert "while-node3-was-down" in cluster_tags(roots[2])
            new = LuxiClient(roots[2].luxi_socket, timeout=60)
            statuses = await threads.deferToThread(wait_final, new, done, 30)
            assert set(statuses.values()) == {"success"}
            (later,) = await submit(new, [quick_job()])
            assert later > max(done)
        finally:
            stop_master_daemons(roots[2])


@pytest_twisted.ensureDeferred
async def test_no_voting_on_a_two_node_cluster(root):
    async with LoopbackCluster(reactor, root, cluster_config(2, ["node2.test"]), prefix="gntf") as cluster:
        roots = cluster.roots
        try:
            with_identities(cluster)
            await cluster.until(lambda: master_of(roots[1]) == "node1.test" and serial_of(roots[1]), timeout=30)
            for daemon in (cluster.luxid, cluster.wconfd, cluster.nodeds[0]):
                daemon.kill()
            refused = gnt_cluster(cluster, roots[1], "master-failover")
            assert refused.returncode == 1 and "Unhealthy nodes: ['node1.test']" in refused.stderr
            assert master_of(roots[1]) == "node1.test" and epoch.read_epoch(roots[1]) == 0
            done = gnt_cluster(cluster, roots[1], "master-failover", "--no-voting", "--yes-do-it")
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert "The old master node1.test did not answer" in done.stderr
            assert master_of(roots[1]) == "node2.test" and epoch.read_epoch(roots[1]) == 1
            new = LuxiClient(roots[1].luxi_socket, timeout=60)
            assert (await threads.deferToThread(new.query_config_values, ["master_node"])) == ["node2.test"]
            # jobs need a majority of candidates: node1 returns as a plain node (its daemons stay down)
            await cluster.start_daemon(cluster.nodeds[0])
            await cluster.until(lambda: master_of(roots[0]) == "node2.test", timeout=30)
            assert epoch.read_epoch(roots[0]) == 1
            job = await submit(new, [quick_job()])
            assert await threads.deferToThread(wait_final, new, job, 60) == {job[0]: "success"}
        finally:
            stop_master_daemons(roots[1])


@pytest_twisted.ensureDeferred
async def test_a_revived_old_master_is_refused_and_stops(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots = cluster.roots
        frozen = [cluster.nodeds[0], cluster.wconfd, cluster.luxid]
        try:
            await ready_cluster(cluster)
            old = LuxiClient(roots[0].luxi_socket, timeout=20)
            before = await submit(old, [quick_job()])
            await threads.deferToThread(wait_final, old, before, 60)
            for daemon in frozen:
                daemon.process.send_signal(signal.SIGSTOP)
            done = gnt_cluster(cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            for daemon in frozen:
                daemon.process.send_signal(signal.SIGCONT)
            # the old LuxiD still believes it is the master: what it writes is refused
            answers = await threads.deferToThread(_try_submit, old)
            assert not any(ok for ok, _ in answers), answers
            assert cluster.luxid.process.wait(timeout=30) is not None
            assert cluster.wconfd.process.wait(timeout=30) is not None
            assert epoch.read_epoch(roots[0]) == 1
            assert "another node took over; stopping" in cluster.luxid.output() + cluster.wconfd.output()
            # nothing of it reached the candidates; the new master works
            await cluster.until(lambda: master_of(roots[0]) == "node2.test", timeout=30)
            new = LuxiClient(roots[1].luxi_socket, timeout=60)
            (job,) = await submit(new, [quick_job()])
            assert await threads.deferToThread(wait_final, new, [job], 60) == {job: "success"}
            assert job == before[0] + 1
        finally:
            for daemon in frozen:
                if daemon.process is not None and daemon.process.poll() is None:
                    daemon.process.send_signal(signal.SIGCONT)
            stop_master_daemons(roots[1])


@pytest_twisted.ensureDeferred
async def test_taking_over_again_kills_the_job_process_a_past_mastership_left(root):
    """node1, the master, is paused with one of its job processes; node2
    takes over (node1's NodeD cannot be asked to stop anything).  The
    daemons of node1, resumed, stop (fenced), but the job process, still
    paused, lives on holding its job lock.  When node1 becomes master again,
    its take-over kills that process before its daemons start: it would
    otherwise reconnect to the new WConfD and LuxiD, which never gave it its
    locks, and could end a job the new master settled."""
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots = cluster.roots
        frozen = [cluster.nodeds[0], cluster.wconfd, cluster.luxid]
        orphan = None
        try:
            await ready_cluster(cluster)
            old = LuxiClient(roots[0].luxi_socket, timeout=20)
            (job,) = await submit(old, [quick_job(300.0)])
            await cluster.until(lambda: job_status(roots[0], job) == "running", timeout=60)
            orphan = job_process(roots[0], job)
            os.kill(orphan, signal.SIGSTOP)  # cut off with its master; it stays so
            for daemon in frozen:
                daemon.process.send_signal(signal.SIGSTOP)
            done = gnt_cluster(cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            for daemon in frozen:
                daemon.process.send_signal(signal.SIGCONT)
            assert cluster.luxid.process.wait(timeout=30) is not None
            assert cluster.wconfd.process.wait(timeout=30) is not None
            assert alive(orphan)  # the old master's daemons stopped; its job process did not
            await cluster.until(lambda: master_of(roots[0]) == "node2.test"
                                and serial_of(roots[0]) == serial_of(roots[1]), timeout=60)

            done = gnt_cluster(cluster, roots[0], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert ("job %d: its process (pid %d), left running by an earlier mastership of this node, killed"
                    % (job, orphan)) in done.stderr
            assert not alive(orphan)
            new = LuxiClient(roots[0].luxi_socket, timeout=60)
            assert await threads.deferToThread(wait_final, new, [job], 60) == {job: "error"}
            (later,) = await submit(new, [quick_job()])
            assert await threads.deferToThread(wait_final, new, [later], 60) == {later: "success"}
        finally:
            if orphan is not None and alive(orphan):
                os.kill(orphan, signal.SIGKILL)
            for daemon in frozen:
                if daemon.process is not None and daemon.process.poll() is None:
                    daemon.process.send_signal(signal.SIGCONT)
            for paths in roots:
                stop_master_daemons(paths)


def _config_bytes(paths: Paths) -> bytes:
    try:
        with open(paths.config_data, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return b""


def _try_submit(client: LuxiClient) -> list:
    try:
        return client.submit_many_jobs([quick_job()])
    except Exception as e:  # the old master may refuse or close the connection while it stops
        return [(False, str(e))]
