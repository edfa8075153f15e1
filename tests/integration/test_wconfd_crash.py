"""SIGKILL WConfD at random instants during a stream of update-and-release
calls; after every restart each acknowledged change is there, and no lock
that shows as released has lost the change it was released with."""

from __future__ import annotations

import random

import attrs
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.task import deferLater

from ganeti import serializer
from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import ConfigData
from ganeti.testing.daemons import Daemon, LiveOwner, seed_config
from ganeti.wconfd.client import WConfdClient

ITERATIONS = 15
WRITERS = 4


def version_of(os_name: str | None) -> int:
    if not os_name or not os_name.startswith("v"):
        return 0  # the generated config's "noop": nothing written yet
    return int(os_name[1:])


@pytest_twisted.ensureDeferred
async def test_kill_at_random_points_loses_no_acknowledged_change(root):
    rng = random.Random(20261122)
    config = grow(initial_config("crash.test", "node1.test", "127.0.1.1"), nodes=3, instances=WRITERS)
    seed_config(root, config)
    names = sorted(inst.name for inst in config.instances.values())
    jobs = {name: LiveOwner(root, 4242 + n) for n, name in enumerate(names)}  # one job per writer
    sent = {name: 0 for name in names}
    acked = {name: 0 for name in names}
    daemon = Daemon(root, "ganeti-wconfd")
    last_serial = 0
    kills_mid_stream = 0

    for iteration in range(ITERATIONS):
        daemon.start()
        await daemon.ready(reactor)
        client = await WConfdClient.connect(reactor, root.wconfd_socket)

        # --- after a restart: check what survived --------------------------
        held = {name: dict(await client.list_locks(jobs[name].owner)) for name in names}
        serial = await client.read_serial()
        assert serial >= last_serial, "config serial went backwards"
        last_serial = serial
        for name in names:
            value = version_of((await client.read_instance(name)).os)
            assert acked[name] <= value <= sent[name], (iteration, name, acked[name], value, sent[name])
            if "instance/" + name not in held[name]:
                assert value == sent[name], "lock of %s released but its change v%d was lost" % (name, sent[name])
            acked[name] = sent[name] = value
        assert await client.verify_config() == []

        # --- a stream of update-and-release calls, killed at random ---------
        for name in names:
            if "cluster/BGL" not in held[name]:
                assert await client.try_update_locks(jobs[name].owner, [("cluster/BGL", "shared")]) == []
        stop = False

        async def writer(name: str) -> None:
            lock, owner = "instance/" + name, jobs[name].owner
            while not stop:
                assert await client.try_update_locks(owner, [(lock, "exclusive")]) == []
                inst = await client.read_instance(name)
                sent[name] += 1
                await client.update_instance(owner, attrs.evolve(inst, os="v%d" % sent[name]), release=[lock])
                acked[name] = sent[name]

        running = [ensureDeferred(writer(name)) for name in names]
        flowing = sum(acked.values())
        for _ in range(2000):  # the stream is under way (the daemon may still be settling in)
            if sum(acked.values()) > flowing:
                break
            await deferLater(reactor, 0.005, lambda: None)
        await deferLater(reactor, rng.uniform(0.0, 0.2), lambda: None)
        # group commit moves the writers in lockstep: kill while updates are in flight
        for _ in range(2000):
            if any(sent[n] > acked[n] for n in names):
                break
            await deferLater(reactor, 0.001, lambda: None)
        before = sum(acked.values())
        daemon.kill()
        stop = True
        for d in running:
            try:
                await d
            except (ConnectionDone, ConnectionLost):
                pass  # the connection died with the daemon
        if sum(acked.values()) > before or any(sent[n] > acked[n] for n in names):
            kills_mid_stream += 1
        # config.data is complete and valid at every instant
        ConfigData.from_json(serializer.read_file(root.config_data))

    daemon.start()
    await daemon.ready(reactor)
    client = await WConfdClient.connect(reactor, root.wconfd_socket)
    for name in names:
        assert acked[name] <= version_of((await client.read_instance(name)).os) <= sent[name]
    await client.close()
    daemon.stop()
    assert sum(acked.values()) > ITERATIONS, "the stream made too little progress to test anything"
    assert kills_mid_stream >= ITERATIONS // 2
