"""A full disk on the master (issue 23): the master's root is a small
tmpfs, filled during a stream of jobs.

  - verify warns while free space is low (ENODEDATASPACE);
  - once it is full, every accepted job ends (none stays queued or running
    with a dead process), those that fail say the data directory is full,
    a failed tag job left no tag, and new submissions are refused saying so;
  - once there is room again, jobs run and the candidates hold the master's
    config serial.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import errors
from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok, serial_of
from ganeti.testing.daemons import make_root, remove_root
from ganeti.testing.fdcount import wait_final

FINAL = ("success", "error", "canceled")
MIB = 1024 * 1024


def tag_job(tag: str) -> list[dict]:
    return [{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "name": None, "tags": [tag]}]


def delay_job() -> list[dict]:
    return [{"OP_ID": "OP_TEST_DELAY", "duration": 0.5, "on_master": True}]


def fill(path: str, leave: int = 0) -> None:
    """Write zeros into C{path} until only C{leave} bytes are free (or none)."""
    try:  # (the jobs may have filled it already: even the open can find no room)
        with open(path, "ab") as handle:
            while True:
                st = os.statvfs(os.path.dirname(path))
                free = st.f_bavail * st.f_frsize
                if free <= leave:
                    break
                handle.write(b"\0" * min(MIB, max(4096, free - leave)))
                handle.flush()
    except OSError:
        pass


@pytest.fixture
def tmpfs_root():
    root = make_root("gfd")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m,mode=0755", "tmpfs", root.root],
                          capture_output=True, text=True)
    if done.returncode != 0:
        remove_root(root)
        pytest.skip("cannot mount a tmpfs here: %s" % done.stderr.strip())
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", root.root])
        remove_root(root)


def stream(client: LuxiClient, stop: threading.Event, jobs: list[tuple[str, int]], refusals: list[str]) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        tag = "t%d" % n
        try:
            jobs.append((tag, client.submit_job(tag_job(tag) if n % 2 else delay_job())))
        except errors.GenericError as e:
            refusals.append(str(e))
        stop.wait(0.05)


@pytest_twisted.ensureDeferred
async def test_a_full_master_disk_during_a_job_stream(tmpfs_root):
    root = tmpfs_root
    config = loopback_config(3, candidate_pool_size=10, candidates=["node2.test", "node3.test"])
    # one job at a time: jobs are queued when the disk fills
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))
    async with LoopbackCluster(reactor, root, config, prefix="gfd") as cluster:
        ballast = os.path.join(root.root, "ballast")
        # --- little room left: verify warns
        await threads.deferToThread(fill, ballast, 20 * MIB)
        done = gnt(root, "gnt-cluster", "verify", "--error-codes")
        assert "WARNING:ENODEDATASPACE:node:node1.test:free space in %s is low" % root.data_dir in done.stdout, \
            done.stdout + done.stderr

        # --- full during a stream of jobs
        client = LuxiClient(root.luxi_socket, timeout=60)
        stop, jobs, refusals = threading.Event(), [], []
        submitting = threads.deferToThread(stream, client, stop, jobs, refusals)
        try:
            await threads.deferToThread(time.sleep, 2)
            await threads.deferToThread(fill, ballast)
            await threads.deferToThread(time.sleep, 4)
        finally:
            stop.set()
            await submitting
        assert jobs, refusals
        assert refusals, "no submission was refused on a full disk"
        assert all("is full" in why for why in refusals), refusals
        ids = [job_id for _tag, job_id in jobs]
        # every accepted job ends, none waits for ever with a dead process
        statuses = await threads.deferToThread(wait_final, client, ids, 240)
        results = dict(await threads.deferToThread(
            lambda: [(row[0], row[1]) for row in client.query_jobs(ids, ["id", "opresult"])]))
        failed = {job_id: str(results[job_id]) for job_id, status in statuses.items() if status != "success"}
        assert failed, "the disk filled and no job failed: was it full?"
        unclear = {j: why for j, why in failed.items() if "full" not in why and "No space left" not in why}
        assert not unclear, unclear

        # --- room again: jobs run, a failed tag job left no tag, candidates catch up
        os.unlink(ballast)
        later = await threads.deferToThread(client.submit_job, tag_job("after"))
        assert (await threads.deferToThread(wait_final, client, [later], 120)) == {later: "success"}
        tags = set(ok(root, "gnt-cluster", "list-tags").split())
        for tag, job_id in jobs:
            if tag_job(tag) and job_id in failed and int(tag[1:]) % 2:
                assert tag not in tags, (tag, failed[job_id])
            elif int(tag[1:]) % 2:
                assert tag in tags, tag
        assert "after" in tags
        await cluster.until(lambda: len({serial_of(p) for p in cluster.roots}) == 1, timeout=60)
        client.close()
