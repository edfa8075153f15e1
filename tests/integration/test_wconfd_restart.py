"""WConfD is killed with SIGKILL and restarted while LuxiD runs a stream of
jobs: the job processes and LuxiD ride it out (no job fails, no change is
applied twice, no lock is left behind).  And an owner is tied to the process
that holds its lock file: naming LuxiD's lock file gets nothing."""

from __future__ import annotations

import glob
import os
import random
import subprocess
import sys
import textwrap
import time

import pytest
import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti import errors
from ganeti.config.bootstrap import initial_config
from ganeti.locking import Owner
from ganeti.luxi.client import LuxiClient
from ganeti.testing.daemons import Daemon, LiveOwner, MasterNoded, seed_config
from ganeti.wconfd.client import WConfdClient

FINAL = ("success", "error", "canceled")
REASON = [["gnt:client:test", "", 0]]
KILLS = 3
IMPOSTOR = textwrap.dedent(
    """
    import sys
    from twisted.internet import defer, task
    from ganeti import errors
    from ganeti.locking import Owner
    from ganeti.paths import Paths
    from ganeti.wconfd.client import WConfdClient

    async def main(reactor):
        client = await WConfdClient.connect(reactor, Paths(sys.argv[1]).wconfd_socket)
        try:
            await client.free_locks(Owner("tool", sys.argv[2], 1))
            print("accepted")
        except errors.LockError as e:
            print("refused: %s" % e)
        await client.close()

    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
    """
)


def delay(duration: float) -> dict:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, "no_locks": False, "reason": REASON}


def add_tag(tag: str) -> dict:
    return {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag], "reason": REASON}


def group(op_id: str, name: str) -> dict:
    return {"OP_ID": op_id, "group_name": name, "reason": REASON}


async def sleep(seconds: float) -> None:
    await deferLater(reactor, seconds, lambda: None)


def statuses(client: LuxiClient, ids: list[int]) -> list[str]:
    return [row[0] for row in client.query_jobs(ids, ["status"])]


@pytest_twisted.ensureDeferred
async def test_jobs_ride_out_wconfd_kills(root):
    rng = random.Random(20261124)
    seed_config(root, initial_config("restart.test", "node1.test", "127.0.1.1"))
    noded = MasterNoded(root, cluster_name="restart.test")  # the test delays sleep there
    await noded.start(reactor)
    wconfd = Daemon(root, "ganeti-wconfd")
    luxid = Daemon(root, "ganeti-luxid", "--max-running-jobs", "8", *noded.luxid_args, env=noded.env)
    wconfd.start()
    await wconfd.ready(reactor)
    luxid.start()
    await luxid.ready(reactor)
    try:
        reader = await WConfdClient.connect(reactor, root.wconfd_socket)
        first_serial = await reader.read_serial()
        await reader.close()
        client = LuxiClient(root.luxi_socket, timeout=60)
        jobs: list[list[dict]] = []
        for n in range(48):
            kind = n % 4
            if kind == 0:
                jobs.append([delay(0.05)])
            elif kind == 1:
                jobs.append([add_tag("tag%02d" % n), delay(0.02)])
            elif kind == 2:
                jobs.append([group("OP_GROUP_ADD", "g%02d" % n), group("OP_GROUP_REMOVE", "g%02d" % n)])
            else:
                jobs.append([add_tag("tag%02d" % n)])
        submitted = await threads.deferToThread(client.submit_many_jobs, jobs)
        ids = [job_id for ok, job_id in submitted if ok]
        assert len(ids) == len(jobs), submitted

        kills = 0
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            done = statuses(client, ids)
            if all(s in FINAL for s in done):
                break
            if kills < KILLS and "running" in done:
                await sleep(rng.uniform(0.05, 0.3))
                wconfd.kill()
                kills += 1
                # a query that needs WConfD, asked while it is down, waits for it
                query = threads.deferToThread(LuxiClient(root.luxi_socket, timeout=60).query_cluster_info)
                await sleep(rng.uniform(0.1, 0.5))  # jobs and LuxiD are cut off meanwhile
                wconfd.start()
                await wconfd.ready(reactor)
                assert (await query)["name"] == "restart.test"
            await sleep(0.1)
        assert kills == KILLS, "the stream ended before WConfD was killed %d times" % KILLS

        rows = client.query_jobs(ids, ["status", "opresult"])
        failed = [(job_id, row) for job_id, row in zip(ids, rows) if row[0] != "success"]
        assert failed == [], failed

        wconfd_client = await WConfdClient.connect(reactor, root.wconfd_socket)
        try:
            config = await wconfd_client.read_config()
            expected = sorted("tag%02d" % n for n in range(48) if n % 4 in (1, 3))
            assert sorted(config.cluster.tags) == expected
            assert sorted(g.name for g in config.nodegroups.values()) == ["default"]
            # one config change per tag job and per group opcode: none applied twice
            assert config.serial_no == first_serial + 24 + 2 * 12
            assert await wconfd_client.verify_config() == []
            for _ in range(50):  # the last jobs' processes may still be exiting
                held = [(lock, holders) for lock, holders in await wconfd_client.list_all_locks_owners() if holders]
                if not held:
                    break
                await sleep(0.1)
            assert held == []
        finally:
            await wconfd_client.close()
        assert "Traceback" not in luxid.output()
    finally:
        luxid.stop()
        wconfd.stop()
        noded.stop()


@pytest_twisted.ensureDeferred
async def test_an_owner_naming_luxids_lock_file_is_refused(root):
    seed_config(root, initial_config("restart.test", "node1.test", "127.0.1.1"))
    wconfd = Daemon(root, "ganeti-wconfd")
    luxid = Daemon(root, "ganeti-luxid")
    wconfd.start()
    await wconfd.ready(reactor)
    luxid.start()
    await luxid.ready(reactor)
    client = await WConfdClient.connect(reactor, root.wconfd_socket)
    mine = LiveOwner(root, "tool")
    try:
        # LuxiD takes its lock file as it connects to WConfD, which may come after its socket listens
        deadline = time.monotonic() + 60
        while not glob.glob(os.path.join(root.lock_dir, "luxi-daemon_*")) and time.monotonic() < deadline:
            await deferLater(reactor, 0.1, lambda: None)
        (livelock,) = glob.glob(os.path.join(root.lock_dir, "luxi-daemon_*"))
        impostor = Owner("fz7", livelock, 1)
        with pytest.raises(errors.LockError, match="does not hold its lock file"):
            await client.try_update_locks(impostor, [("cluster/BGL", "exclusive")])
        with pytest.raises(errors.LockError, match="does not hold its lock file"):
            await client.add_locks(impostor, ["nodegroup/evil"])
        assert [holders for lock, holders in await client.list_all_locks_owners() if holders] == []
        # an ad-hoc owner whose lock file this process holds works as before
        assert await client.try_update_locks(mine.owner, [("cluster/BGL", "exclusive")]) == []
        # another process naming that owner gets nothing
        answer = await threads.deferToThread(
            subprocess.run, [sys.executable, "-c", IMPOSTOR, root.root, mine.path], capture_output=True, text=True
        )
        assert "refused: " in answer.stdout and "does not hold its lock file" in answer.stdout, answer
        assert await client.list_locks(mine.owner) == [("cluster/BGL", "exclusive")]
        await client.free_locks(mine.owner)
    finally:
        mine.die()
        await client.close()
        luxid.stop()
        wconfd.stop()
