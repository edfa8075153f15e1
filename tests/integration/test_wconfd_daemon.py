"""WConfD as an admin runs it: twistd, its Unix socket, its files, its CLI."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import textwrap
import time

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import errors, serializer
from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import ConfigData
from ganeti.testing.daemons import TWISTD, Daemon, LiveOwner, seed_config
from ganeti.wconfd.client import WConfdClient

CLI = os.path.join(os.path.dirname(sys.executable), "ganeti-wconfd-client")


def small_config() -> ConfigData:
    return grow(initial_config("cluster.test", "node1.test", "127.0.1.1"), nodes=2, instances=4)


async def start(root, config=None) -> tuple[Daemon, WConfdClient]:
    seed_config(root, config or small_config())
    daemon = Daemon(root, "ganeti-wconfd")
    daemon.start()
    await daemon.ready(reactor)
    return daemon, await WConfdClient.connect(reactor, root.wconfd_socket)


def cli(root, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "--root", root.root, *args], capture_output=True, text=True, timeout=60)


@pytest_twisted.ensureDeferred
async def test_cli_talks_to_the_daemon(root):
    daemon, client = await start(root)
    try:
        assert cli(root, "echo", "hello").stdout == "hello\n"
        assert cli(root, "verify").stdout == "configuration is consistent\n"
        shown = cli(root, "show", "node", "node1.test")
        assert serializer.loads(shown.stdout)["primary_ip"] == "127.0.1.1"
        missing = cli(root, "show", "instance", "nope")
        assert missing.returncode == 1 and "'nope' is not known" in missing.stderr
        mode = stat.S_IMODE(os.stat(root.wconfd_socket).st_mode)
        assert mode == 0o600
    finally:
        await client.close()
        daemon.stop()
    assert "Server Shut Down." in daemon.output()


@pytest_twisted.ensureDeferred
async def test_second_daemon_on_the_same_root_refuses_to_start(root):
    daemon, client = await start(root)
    try:
        other = subprocess.run(
            [TWISTD, "-n", "--pidfile=", "ganeti-wconfd", "--root", root.root], capture_output=True, text=True, timeout=60
        )
        assert other.returncode != 0
        assert "already running" in other.stdout + other.stderr
        assert await client.echo("still here") == "still here"
    finally:
        await client.close()
        daemon.stop()


def test_missing_config_is_a_clear_error(root):
    result = subprocess.run(
        [TWISTD, "-n", "--pidfile=", "ganeti-wconfd", "--root", root.root], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "no configuration at" in result.stdout + result.stderr


@pytest_twisted.ensureDeferred
async def test_acknowledged_update_survives_sigkill(root):
    daemon, client = await start(root)
    job = LiveOwner(root, 17)
    try:
        config = await client.read_config()
        inst = next(iter(config.instances.values()))
        lock = "instance/" + inst.name
        assert await client.try_update_locks(job.owner, [("cluster/BGL", "shared"), (lock, "exclusive")]) == []
        updated = await client.update_instance(job.owner, attrs.evolve(inst, os="debian-image"), release=[lock])
        assert updated.serial_no == inst.serial_no + 1
        await client.close()
        daemon.kill()
        daemon.start()
        await daemon.ready(reactor)
        client = await WConfdClient.connect(reactor, root.wconfd_socket)
        again = await client.read_instance(inst.name)
        assert again.os == "debian-image" and again.serial_no == updated.serial_no
        # the lock released with the change stays released; BGL is still held
        assert await client.list_locks(job.owner) == [("cluster/BGL", "shared")]
        # config.data itself catches up (it is rewritten in the background)
        await client.flush_config()
        on_disk = ConfigData.from_json(serializer.read_file(root.config_data))
        assert on_disk.instances[inst.uuid].os == "debian-image"
    finally:
        await client.close()
        daemon.stop()


@pytest_twisted.ensureDeferred
async def test_twenty_megabyte_config_round_trips(root):
    config = grow(initial_config("big.test", "node1.test", "127.0.1.1"), nodes=50, instances=30000)
    daemon, client = await start(root, config)
    job = LiveOwner(root, 1)
    try:
        data, serial = await client.read_config_bytes()
        assert len(data) > 20 * 1024 * 1024
        read = ConfigData.from_json(data)
        assert len(read.instances) == 30000
        locked = await client.lock_config(job.owner, shared=False, timeout=10)
        changed = attrs.evolve(locked, cluster=attrs.evolve(locked.cluster, candidate_pool_size=3))
        new_serial = await client.write_config_and_unlock(job.owner, changed)
        assert new_serial > serial
        assert (await client.read_cluster()).candidate_pool_size == 3
        assert await client.list_locks(job.owner) == []
    finally:
        await client.close()
        daemon.stop()


CHILD = textwrap.dedent(
    """
    import sys
    from twisted.internet import defer, task
    from ganeti.paths import Paths
    from ganeti.testing.daemons import LiveOwner
    from ganeti.wconfd.client import WConfdClient

    async def main(reactor):
        paths = Paths(sys.argv[1])
        job = LiveOwner(paths, 99)
        client = await WConfdClient.connect(reactor, paths.wconfd_socket)
        blockers = await client.try_update_locks(job.owner, [("cluster/BGL", "exclusive")])
        assert blockers == [], blockers
        print("locked", flush=True)
        await defer.Deferred()  # hold the lock until killed

    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
    """
)


@pytest_twisted.ensureDeferred
async def test_locks_of_a_killed_job_process_go_to_the_waiter(root):
    daemon, client = await start(root)
    child = subprocess.Popen([sys.executable, "-c", CHILD, root.root], stdout=subprocess.PIPE, text=True)
    waiter = LiveOwner(root, 100)
    try:
        assert child.stdout is not None and child.stdout.readline() == "locked\n"
        owners = await client.list_all_locks_owners()
        assert owners[0][0] == "cluster/BGL" and owners[0][1][0][0][0] == 99
        pending = client.acquire(waiter.owner, [("cluster/BGL", "exclusive")], timeout=20)
        child.kill()
        killed = time.monotonic()
        await pending  # pushed by WConfD once it sees the lock file unlocked
        assert time.monotonic() - killed < 20
        assert await client.list_locks(waiter.owner) == [("cluster/BGL", "exclusive")]
        lockfiles = os.listdir(root.lock_dir)
        assert not any(name.startswith("owner-99-") for name in lockfiles), lockfiles
    finally:
        child.kill()
        child.wait()
        await client.close()
        daemon.stop()


@pytest_twisted.ensureDeferred
async def test_garbage_on_the_socket_leaves_others_served(root):
    daemon, client = await start(root)
    try:
        for junk in (b"\x00\x05hello\x00\x00", b"\xff" * 70000, b"not amp at all\r\n\r\n"):
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.connect(root.wconfd_socket)
            raw.sendall(junk)
            raw.close()
        # an AMP box naming an unknown command gets an error, not a crash
        with pytest.raises(Exception, match="Unhandled Command"):
            await client.protocol.callRemoteString(b"FormatAllDisks")
        with pytest.raises(errors.LockError, match="Order violation|does not exist"):
            job = LiveOwner(root, 5)
            await client.try_update_locks(job.owner, [("instance/missing", "exclusive")])
        assert await client.echo("alive") == "alive"
        assert daemon.process is not None and daemon.process.poll() is None
    finally:
        await client.close()
        daemon.stop()
