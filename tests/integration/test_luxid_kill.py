"""Killing running jobs (CancelJob with kill, gnt-job cancel --kill) and
submissions refused whole, against real WConfD and LuxiD daemons; also with
Ganeti 3.0.2's own gnt-job and gnt-debug code when it is available."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti import errors
from ganeti.jobs.processor import KILLED_RESULT
from ganeti.luxi.client import LuxiClient
from tests.integration.test_luxid import Cluster, _pid_of, delay, in_thread, job_row, until, wait_job
from tests.unit.test_luxid_submit import _invalid_request

CHECKOUT = Path(__file__).resolve().parents[2]
GANETI_LIB = CHECKOUT / ".venv" / "ganeti-3.0" / "usr" / "share" / "ganeti" / "3.0"


def lock_owners(client: LuxiClient) -> set[str]:
    """The job ids that own a lock now."""
    response = client.call("Query", "lock", ["name", "owner"], None)
    return {str(owner) for row in response["data"] for owner in (row[1][1] or [])}


async def running_pid(client: LuxiClient, root, job_id: int) -> int:
    await until(client, job_id, "running")
    for _ in range(200):
        pid = _pid_of(root, job_id)
        if pid:
            return pid
        await deferLater(reactor, 0.02, lambda: None)
    raise AssertionError("job %d has no process" % job_id)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest_twisted.ensureDeferred
async def test_kill_a_running_job_frees_its_slot_and_locks(root):
    cluster = await Cluster(root, "--max-running-jobs", "1").start()
    try:
        client = cluster.client()
        hog = client.submit_job([delay(3600, no_locks=False), delay(0.01)])
        pid = await running_pid(client, root, hog)
        assert str(hog) in lock_owners(client), "the running job holds locks"
        follower = client.submit_job([delay(0.01, no_locks=False)])
        ok, message = client.cancel_job(hog)
        assert not ok and "cannot be canceled" in message, "a plain cancel leaves a running job alone (as Ganeti)"
        started = time.monotonic()
        ok, message = await in_thread(client.cancel_job, hog, True)
        assert ok, message
        assert time.monotonic() - started < 4.5, "SIGTERM was enough: no wait for the SIGKILL grace period"
        assert message == "Job %d killed (SIGTERM), status canceled" % hog
        status, result, log = job_row(client, hog, "status", "opresult", "oplog")
        assert status == "canceled"
        assert result == [KILLED_RESULT, KILLED_RESULT]
        assert KILLED_RESULT in [entry[3] for entry in log[0]]
        assert gone(pid)
        assert str(hog) not in lock_owners(client)
        assert await in_thread(wait_job, client, follower, 30) == "success", "the slot and the locks are free"
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_kill_a_job_that_ignores_sigterm(root):
    """A stopped job process cannot act on SIGTERM: SIGKILL after the grace
    period, LuxiD records the job canceled, WConfD frees its locks."""
    cluster = await Cluster(root, "--max-running-jobs", "1").start()
    try:
        client = cluster.client()
        hog = client.submit_job([delay(3600, no_locks=False)])
        pid = await running_pid(client, root, hog)
        os.kill(pid, signal.SIGSTOP)
        follower = client.submit_job([delay(0.01, no_locks=False)])
        started = time.monotonic()
        ok, message = await in_thread(client.cancel_job, hog, True)
        assert ok and "SIGKILL after 5s" in message, message
        assert 4.5 < time.monotonic() - started < 15
        status, result = job_row(client, hog, "status", "opresult")
        assert status == "canceled"
        assert result == ["Job canceled by request (killed: the job process killed by signal 9)"]
        assert await in_thread(wait_job, client, follower, 30) == "success", "WConfD freed the dead job's locks"
        assert str(hog) not in lock_owners(client)
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_invalid_submissions_create_no_job(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        first = client.submit_job([delay(0.01)])
        bad = [
            [{"OP_ID": "OP_NOPE"}],
            [delay(1e308)],
            [{"OP_ID": "OP_TEST_DELAY", "reason": []}],
            [delay(0.01, priority=5)],
            [delay(0.01, bogus=1)],
        ]
        for ops in bad:
            with pytest.raises(errors.OpPrereqError):
                client.submit_job(ops)
        rng = random.Random(5)
        for _ in range(300):
            method, args = _invalid_request(rng)
            with pytest.raises(errors.OpPrereqError):
                client.call(method, *args)
        with pytest.raises(errors.OpPrereqError, match="Job 1: opcode 0: OP_TEST_DELAY: parameter 'duration'"):
            client.call("SubmitManyJobs", [[delay(0.01)], [delay(-1)]])
        with pytest.raises(errors.OpPrereqError, match="must be a boolean"):
            client.set_drain_flag("false")
        assert client.query_config_values(["drain_flag"]) == [False]
        second = client.submit_job([delay(0.01)])
        assert second == first + 1, "no job id was spent on the 306 refused submissions"
        assert sorted(n for n in os.listdir(root.queue_dir) if n.startswith("job-")) == ["job-%d" % first, "job-%d" % second]
        assert await in_thread(wait_job, client, second) == "success"
    finally:
        cluster.stop()


@pytest.mark.skipif(not (GANETI_LIB / "ganeti" / "luxi.py").exists(), reason="Ganeti 3.0.2's Python package is not available")
@pytest_twisted.ensureDeferred
async def test_ganeti_gnt_job_cancel_kill_and_test_jobqueue_checks(root):
    cluster = await Cluster(root).start()
    try:
        client = cluster.client()
        hog = client.submit_job([delay(3600, no_locks=False)])
        await running_pid(client, root, hog)
        env = dict(os.environ, PYTHONPATH=str(GANETI_LIB))
        script = str(CHECKOUT / "tests" / "compat" / "ganeti_cancel.py")

        def run() -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, script, root.luxi_socket, str(hog)],
                capture_output=True, text=True, timeout=120, env=env, cwd="/",
            )

        result = await in_thread(run)
        assert result.returncode == 0, result.stdout + result.stderr
        out = json.loads(result.stdout.strip().splitlines()[-1])
        assert out["submission"] == "ok", out
        assert out["dependency"] == "ok", out
        assert out["kill_unconfirmed"] == "The --kill option must be confirmed with --yes-do-it"
        assert out["plain_exit"] == 1 and "cannot be canceled" in out["plain"][0]
        assert out["kill_exit"] == 0 and "killed (SIGTERM), status canceled" in out["kill"][0], out
        assert job_row(client, hog, "status")[0] == "canceled"
    finally:
        cluster.stop()
