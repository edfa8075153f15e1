"""LuxiD with WConfD under twistd: the job queue as LUXI clients see it."""

from __future__ import annotations

import io
import os
import signal
import socket
import time

import pytest
import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti import errors
from ganeti.client import gnt_job as gnt_job_module
from ganeti.client import runner
from ganeti.config.bootstrap import initial_config
from ganeti.lockfile import is_free as owner_is_dead
from ganeti.luxi.client import LuxiClient
from ganeti.testing.daemons import Daemon, MasterNoded, seed_config

FINAL = ("success", "error", "canceled")


def delay(duration: float = 0.01, **extra) -> dict:
    op = {"OP_ID": "OP_TEST_DELAY", "duration": duration, "reason": [["gnt:client:test", "", 0]]}
    op.update(extra)
    return op


class Cluster:
    """NodeD (test delays sleep there), WConfD + LuxiD of one node root."""

    def __init__(self, root, *luxid_args: str) -> None:
        self.root = root
        seed_config(root, initial_config("cluster.test", "node1.test", "127.0.1.1"))
        self.noded = MasterNoded(root)
        self.wconfd = Daemon(root, "ganeti-wconfd")
        self.luxid = Daemon(root, "ganeti-luxid", *self.noded.luxid_args, *luxid_args, env=self.noded.env)

    async def start(self) -> Cluster:
        await self.noded.start(reactor)
        self.wconfd.start()
        await self.wconfd.ready(reactor)
        self.luxid.start()
        await self.luxid.ready(reactor)
        return self

    def client(self) -> LuxiClient:
        return LuxiClient(self.root.luxi_socket, timeout=60)

    def stop(self) -> None:
        self.luxid.stop()
        self.wconfd.stop()
        self.noded.stop()


async def in_thread(fn, *args):
    return await threads.deferToThread(fn, *args)


def wait_job(client: LuxiClient, job_id: int, timeout: float = 60) -> str:
    """Follow a job with WaitForJobChange until it ends; returns its status."""
    deadline = time.monotonic() + timeout
    prev, serial = None, None
    while time.monotonic() < deadline:
        answer = client.wait_for_job_change(job_id, ["status"], prev, serial, 10)
        if answer == "nochange":
            continue
        prev, logs = answer
        if logs:
            serial = logs[-1][0]
        if prev[0] in FINAL:
            return prev[0]
    raise AssertionError("job %s did not finish" % job_id)


def gnt_job(root, *argv: str) -> tuple[int, str]:
    """Run gnt-job in this process (blocking: call it in a thread); its exit code and output."""
    out, err = io.StringIO(), io.StringIO()
    code = runner.run("gnt-job", gnt_job_module.COMMANDS, ["--root", root.root, *argv],
                                  stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


def job_row(client: LuxiClient, job_id: int, *fields: str):
    return client.query_jobs([job_id], list(fields))[0]


@pytest_twisted.ensureDeferred
async def test_submit_follow_and_query_a_job(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        job_id = await in_thread(client.submit_job, [delay(0.01, repeat=2)])
        assert os.path.exists(os.path.join(root.queue_dir, "job-%d" % job_id)), "durable before the answer"
        assert await in_thread(wait_job, client, job_id) == "success"
        status, result, log, summary = job_row(client, job_id, "status", "opresult", "oplog", "summary")
        assert (status, result) == ("success", [None])
        assert [entry[3] for entry in log[0]] == [" - INFO: Test delay iteration 0/2", " - INFO: Test delay iteration 1/2"] or len(log[0]) == 2
        assert summary == ["TEST_DELAY(1.0e-2)"]
        info = client.query_cluster_info()
        assert info["name"] == "cluster.test" and info["master"] == "node1.test"
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_priorities_cancel_and_dependencies(root):
    cluster = await Cluster(root, "--max-running-jobs", "1").start()
    try:
        client = cluster.client()
        blocker = client.submit_job([delay(1.0)])
        low = client.submit_job([delay(0.01, priority=10)])
        high = client.submit_job([delay(0.01, priority=-10)])
        doomed = client.submit_job([delay(0.01)])
        assert client.cancel_job(doomed)[0] is True
        failing = client.submit_job([{"OP_ID": "OP_GROUP_REMOVE", "group_name": "no-such-group", "reason": []}])
        after_fail = client.submit_job([dict(delay(0.01), depends=[[failing, ["success"]]])])
        for job_id in (blocker, low, high, failing, after_fail):
            await in_thread(wait_job, client, job_id)
        starts = {j: job_row(client, j, "start_ts")[0] for j in (low, high)}
        assert starts[high] < starts[low], "the high-priority job starts first"
        assert job_row(client, doomed, "status")[0] == "canceled"
        assert job_row(client, failing, "status")[0] == "error"
        status, result = job_row(client, after_fail, "status", "opresult")
        assert status == "error" and "finished with status 'error'" in str(result)
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_drain_archive_and_errors(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        assert client.set_drain_flag(True) is True
        with pytest.raises(errors.JobQueueDrainError, match="Queue drained"):
            client.submit_job([delay()])
        job_id = client.call("SubmitJobToDrainedQueue", [delay()])
        client.set_drain_flag(False)
        assert await in_thread(wait_job, client, job_id) == "success"
        assert client.archive_job(job_id) is True
        assert os.path.exists(os.path.join(root.queue_dir, "archive", "0", "job-%d" % job_id))
        assert job_row(client, job_id, "status")[0] == "success"
        # gnt-job sees the archived job as Ganeti's does
        code, info = await in_thread(gnt_job, root, "info", str(job_id))
        assert code == 0 and "Job ID: %d" % job_id in info and "Status: success" in info, info
        code, listed = await in_thread(gnt_job, root, "list", "--archived", "--no-headers", "-o", "id,status")
        assert code == 0 and listed.split() == [str(job_id), "success", "Y"], listed
        code, listed = await in_thread(gnt_job, root, "list", "--no-headers", "-o", "id,status")
        assert code == 0 and listed.split() == [], listed
        with pytest.raises(errors.JobLost):
            client.wait_for_job_change(99999, ["status"], None, None, 1)
        with pytest.raises(errors.LuxiError, match="Unknown method"):
            client.call("FormatEverything")
        with pytest.raises(errors.OpPrereqError):
            client.submit_job("not a list of opcodes")
        with pytest.raises(errors.OpPrereqError, match="parameter 'duration' is required"):
            client.submit_job([{"OP_ID": "OP_TEST_DELAY", "reason": []}])  # refused whole: no job
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(root.luxi_socket)
        raw.sendall(b"{this is not json\x03")
        assert b"Failed to parse request" in raw.recv(4096)
        raw.close()
        assert client.query_config_values(["cluster_name"]) == ["cluster.test"]
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_killed_job_process_fails_its_job_and_frees_its_locks(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        hog = client.submit_job([delay(60, no_locks=False)])
        pid = None
        for _ in range(200):
            status, pid = job_row(client, hog, "status")[0], _pid_of(root, hog)
            if status == "running" and pid:
                break
            await deferLater(reactor, 0.05, lambda: None)
        assert pid, "the job never started"
        os.kill(pid, signal.SIGKILL)
        assert await in_thread(wait_job, client, hog) == "error"
        assert "killed by signal 9" in str(job_row(client, hog, "opresult")[0])
        follower = client.submit_job([delay(0.01, no_locks=False)])
        assert await in_thread(wait_job, client, follower) == "success"
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_luxid_killed_mid_run_keeps_following_its_jobs(root):
    cluster = await Cluster(root, "--max-running-jobs", "2").start()
    try:
        client = cluster.client()
        running = client.submit_job([delay(0.4, repeat=4)])
        queued = [client.submit_job([delay(0.01)]) for _ in range(4)]
        for _ in range(200):
            if job_row(client, running, "status")[0] == "running":
                break
            await deferLater(reactor, 0.02, lambda: None)
        cluster.luxid.kill()
        cluster.luxid.start()
        await cluster.luxid.ready(reactor)
        client = cluster.client()
        for job_id in [running] + queued:
            assert await in_thread(wait_job, client, job_id) == "success"
        log = [entry for op_log in job_row(client, running, "oplog")[0] for entry in op_log]
        assert [entry[0] for entry in log] == [1, 2, 3, 4], "each iteration logged once: the job ran once"
        second = Daemon(root, "ganeti-luxid")
        second.start()
        assert second.process is not None and second.process.wait(timeout=60) != 0
        assert "another ganeti-luxid" in second.output() or "already running" in second.output()
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_two_hundred_conflicting_jobs_all_finish_by_priority(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        jobs = []
        for n in range(200):
            prio = (-10, 0, 10)[n % 3]
            jobs.append([delay(0.001, no_locks=False, priority=prio)])
        answers = client.submit_many_jobs(jobs)
        ids = [job_id for ok, job_id in answers if ok]
        assert len(ids) == 200
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            rows = client.query_jobs(ids, ["status"])
            if all(row[0] in FINAL for row in rows):
                break
            await deferLater(reactor, 0.2, lambda: None)
        rows = client.query_jobs(ids, ["status", "ops", "end_ts"])
        assert [row[0] for row in rows] == ["success"] * 200
        by_prio = {}  # by the priority each job was submitted with (waits may raise it)
        for _status, ops, end in rows:
            by_prio.setdefault(ops[0]["priority"], []).append(end[0] + end[1] / 1e6)
        assert sorted(by_prio[-10])[len(by_prio[-10]) // 2] <= sorted(by_prio[10])[len(by_prio[10]) // 2]
    finally:
        cluster.stop()


async def until(client: LuxiClient, job_id: int, status: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while job_row(client, job_id, "status")[0] != status and time.monotonic() < deadline:
        await deferLater(reactor, 0.02, lambda: None)


def _pid_of(root, job_id: int) -> int | None:
    import orjson

    try:
        with open(os.path.join(root.queue_dir, "job-%d" % job_id), "rb") as handle:
            data = orjson.loads(handle.read())
    except (OSError, ValueError):
        return None
    lockfile = data.get("livelock") or ""
    if "job_" not in lockfile or owner_is_dead(lockfile):
        return None
    return data.get("process_id")


@pytest_twisted.ensureDeferred
async def test_cancel_a_job_waiting_for_locks_and_reorder_the_queue(root):
    cluster = await Cluster(root, "--max-running-jobs", "2").start()
    try:
        client = cluster.client()
        hog = client.submit_job([delay(1.0, no_locks=False)])  # holds the master node lock
        await until(client, hog, "running")
        waiter = client.submit_job([delay(0.01, no_locks=False)])
        await until(client, waiter, "waiting")
        assert job_row(client, waiter, "status")[0] == "waiting", "the second job waits for the lock"
        assert client.cancel_job(waiter)[0] is True
        assert await in_thread(wait_job, client, waiter) == "canceled"
        # the two slots are busy (hog + a second hog): later jobs queue; priority reorders them
        hog2 = client.submit_job([delay(0.5, no_locks=False)])
        first = client.submit_job([delay(0.01)])
        second = client.submit_job([delay(0.01)])
        assert client.change_job_priority(second, -10)[0] is True
        for job_id in (hog, hog2, first, second):
            assert await in_thread(wait_job, client, job_id) == "success"
        starts = {j: job_row(client, j, "start_ts")[0] for j in (first, second)}
        assert starts[second] <= starts[first], "the re-prioritised job started first"
    finally:
        cluster.stop()
