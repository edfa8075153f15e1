"""A real LuxiD (ganeti-twistd, as every start path runs it) forks its job fork server at its start.

The fork server shares LuxiD's imported pages (ganeti.forkseed):
jobs run through it; it ends with LuxiD; when it dies LuxiD still runs
jobs (directly, as for any fork server that died).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import AsyncIterator

import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti import forkseed
from ganeti.config.bootstrap import initial_config
from ganeti.luxi.client import LuxiClient
from ganeti.luxid import forkclient
from ganeti.luxid.forkclient import recorded_pid
from ganeti.paths import Paths
from ganeti.testing import procs
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config
from ganeti.testing.fdcount import quick_job, run_jobs, wait_final


def wait_for(what, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("not within %ss: %s" % (timeout, what))
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def describe(pid: int) -> tuple[str, list[str]]:
    with open("/proc/%d/comm" % pid) as handle:
        name = handle.read().strip()
    return name, procs.argv(pid)


@contextlib.asynccontextmanager
async def luxid_running(*luxid_args: str) -> AsyncIterator[tuple[Paths, Daemon]]:
    """WConfD and LuxiD of a fresh one-node root, started as every start path runs them (ganeti-twistd)."""
    paths = make_root("gntseed")
    seed_config(paths, initial_config("seed.test", "node1.test", "127.0.1.1"))
    wconfd = Daemon(paths, "ganeti-wconfd")
    luxid = Daemon(paths, "ganeti-luxid", *luxid_args)
    try:
        wconfd.start()
        await wconfd.ready(reactor)
        luxid.start()
        await luxid.ready(reactor)
        yield paths, luxid
    finally:
        luxid.stop()
        wconfd.stop()
        remove_root(paths)


@pytest_twisted.ensureDeferred
async def test_luxid_runs_jobs_on_the_fork_server_it_forked_and_without_it_once_it_died():
    async with luxid_running() as (paths, luxid):

        def check() -> int:
            seed = wait_for(lambda: recorded_pid(paths))
            name, argv = describe(seed)
            assert name == forkseed.NAME, (name, argv)
            assert "ganeti.luxid.forkserver" not in argv, argv  # forked, not run anew
            with LuxiClient(paths.luxi_socket, timeout=60) as client:
                assert run_jobs(client, 6, batch=3) == {"success": 6}
                os.kill(seed, signal.SIGKILL)
                wait_for(lambda: recorded_pid(paths) is None)  # LuxiD saw it end
                assert run_jobs(client, 3, batch=3) == {"success": 3}  # started directly
                time.sleep(forkclient.COMEBACK_AFTER)  # then a next job starts a new one (LuxiD's wait may end late
                deadline = time.monotonic() + 60        # on a loaded machine: jobs until it has)
                while recorded_pid(paths) is None and time.monotonic() < deadline:
                    assert run_jobs(client, 1, batch=1) == {"success": 1}
                again = wait_for(lambda: recorded_pid(paths))
                assert again != seed and describe(again)[0] == forkseed.NAME
            return seed

        killed = await threads.deferToThread(check)
        assert not alive(killed)
        with open(luxid.log_path, encoding="utf-8", errors="replace") as handle:
            assert "fork server died" in handle.read()


@pytest_twisted.ensureDeferred
async def test_an_idle_fork_server_is_retired_and_the_next_job_starts_a_new_one():
    async with luxid_running("--forkserver-idle", "2") as (paths, luxid):

        def check() -> tuple[int, int]:
            seed = wait_for(lambda: recorded_pid(paths))
            with LuxiClient(paths.luxi_socket, timeout=60) as client:
                assert run_jobs(client, 2, batch=2) == {"success": 2}
                spares = wait_for(lambda: children(seed))
                wait_for(lambda: recorded_pid(paths) is None)  # retired 2 s after the last job
                wait_for(lambda: not alive(seed) and not any(alive(pid) for pid in spares))  # its spare too
                assert run_jobs(client, 3, batch=3) == {"success": 3}
                new = wait_for(lambda: recorded_pid(paths))
                name, argv = describe(new)
                assert name == forkseed.NAME and "ganeti.luxid.forkserver" not in argv, (name, argv)  # forked
                held = open_files(new)
                assert luxid.log_path not in held and paths.luxi_socket not in held, held  # none of LuxiD's
                assert run_jobs(client, 3, batch=3) == {"success": 3}
            return seed, new

        seed, new = await threads.deferToThread(check)
        assert seed != new
        with open(luxid.log_path, encoding="utf-8", errors="replace") as handle:
            log = handle.read()
        assert "fork server retired after 2.0s without a job" in log
        assert "fork server started (pid %d, forked from LuxiD)" % new in log
        assert "fork server died" not in log and "Traceback" not in log


@pytest_twisted.ensureDeferred
async def test_luxid_killed_as_a_job_wakes_its_retired_fork_server_loses_no_job():
    """SIGKILL at moments from before to after the new fork server was forked for a job (LuxiD on
    --forkserver-idle 0.5), and LuxiD started again each time: every acknowledged job succeeds, and no
    fork server of a killed LuxiD is left behind."""
    async with luxid_running("--forkserver-idle", "0.5") as (paths, luxid):
        job_ids = []
        for delay in (0.0, 0.01, 0.03, 0.1, 0.3):
            await deferLater(reactor, 1.0, lambda: None)  # (retired by now)
            job_ids.append(await threads.deferToThread(submit_one, paths))
            await deferLater(reactor, delay, lambda: None)
            luxid.kill()
            luxid.start()
            await luxid.ready(reactor)

        def check() -> dict[int, str]:
            with LuxiClient(paths.luxi_socket, timeout=60) as client:
                statuses = wait_final(client, job_ids, timeout=120)
                longer = int(client.submit_job(quick_job(2.0)))
                wait_for(lambda: fork_servers(paths))  # (seen while it runs: the check below can fail)
                wait_final(client, [longer], timeout=60)
            wait_for(lambda: not fork_servers(paths), timeout=30)  # none of a killed LuxiD; the last one retired
            return statuses

        statuses = await threads.deferToThread(check)
        assert statuses == {job_id: "success" for job_id in job_ids}, statuses


def submit_one(paths: Paths) -> int:
    with LuxiClient(paths.luxi_socket, timeout=60) as client:
        return int(client.submit_job(quick_job()))


def fork_servers(paths: Paths) -> list[int]:
    """The processes forked for C{paths}' LuxiD (fork servers, spares, jobs: named so, writing to its jobs log)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            name, _argv = describe(int(entry))
            if name == forkseed.NAME and paths.log_file("jobs") in open_files(int(entry)) and alive(int(entry)):
                found.append(int(entry))
    return found


@pytest_twisted.ensureDeferred
async def test_the_fork_server_ends_with_luxid():
    async with luxid_running() as (paths, luxid):
        seed = await threads.deferToThread(wait_for, lambda: recorded_pid(paths))
        spares = await threads.deferToThread(wait_for, lambda: children(seed))
        luxid.stop()
        await threads.deferToThread(wait_for, lambda: not alive(seed) and not any(alive(p) for p in spares))


def open_files(pid: int) -> list[str]:
    """What the descriptors of process C{pid} lead to."""
    found = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        with contextlib.suppress(OSError):
            found.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
    return found


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    if handle.read().rsplit(")", 1)[1].split()[1] == str(pid):
                        found.append(int(entry))
            except OSError:
                pass
    return found

