"""One node daemon port, passed explicitly: LuxiD's C{--rpc-port} reaches
its job processes (directly spawned or forked by the fork server), their
logical units, its live queries and the failover commands."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import ports
from ganeti.client import gnt_cluster
from ganeti.cmdlib.base import OpContext
from ganeti.jobs import process
from ganeti.luxid import forkserver
from ganeti.luxid.forkclient import ForkServer
from ganeti.luxid.live import LiveData
from ganeti.luxid.spawner import JobChannel, job_argv, spawn_direct
from ganeti.paths import Paths
from tests.unit.queue_helpers import temp_root


class FakeProcess:
    pid = 4242


class SpawningReactor(Clock):
    """A clock that records the processes it is asked to start."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[list[str]] = []

    def spawnProcess(self, protocol: Any, executable: str, args: list[str], env: Any = None,
                     childFDs: Any = None, **kwargs: Any) -> FakeProcess:
        self.spawned.append(list(args))
        return FakeProcess()


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


class JobProcessPortTests(SynchronousTestCase):
    def test_job_command_line_names_the_port(self) -> None:
        argv = job_argv(Paths("/r"), 7, 4711)
        self.assertEqual(option(argv, "--rpc-port"), "4711")
        self.assertEqual(option(job_argv(Paths("/r"), 7), "--rpc-port"), str(ports.NODED))

    def test_job_process_hands_its_port_to_run(self) -> None:
        calls: list[dict[str, Any]] = []
        self.patch(process, "run", lambda job_id, paths, **kw: calls.append(dict(kw, job_id=job_id)) or 0)
        process.main(["7", "--root", "/r", "--rpc-port", "4711"])
        process.main(["8", "--root", "/r"])
        self.assertEqual([(c["job_id"], c["rpc_port"]) for c in calls], [(7, 4711), (8, ports.NODED)])

    def test_direct_spawn_passes_the_port(self) -> None:
        paths = temp_root(self, "gntport")
        reactor = SpawningReactor()
        channel = JobChannel(7, paths, reactor, lambda *args: None)
        spawn_direct(reactor, paths, channel, lambda exit: None, 4711)
        self.assertEqual(option(reactor.spawned[0], "--rpc-port"), "4711")

    def test_fork_server_gets_the_port_and_passes_it_on(self) -> None:
        paths = temp_root(self, "gntport")
        reactor = SpawningReactor()
        server = ForkServer(reactor, paths, lambda exit: None, rpc_port=4711)
        server.start()
        self.addCleanup(server.stop)
        self.assertEqual(option(reactor.spawned[0], "--rpc-port"), "4711")
        served: list[tuple[Any, int]] = []
        self.patch(forkserver, "serve", lambda paths, rpc_port, **_: served.append((paths.root, rpc_port)) or 0)
        forkserver.main(["--root", "/r", "--rpc-port", "4711"])
        self.assertEqual(served, [("/r", 4711)])


class ConsumerTests(SynchronousTestCase):
    def test_logical_units_use_the_job_port(self) -> None:
        self.assertEqual(OpContext(None, None, Clock(), rpc_port=4711).rpc_port, 4711)
        self.assertEqual(OpContext(None, None, Clock()).rpc_port, ports.NODED)

    def test_live_queries_use_the_given_port(self) -> None:
        made: list[int] = []

        class FakeClient:
            @classmethod
            def from_paths(cls, reactor: Any, paths: Any, port: int) -> str:
                made.append(port)
                return "client"

        import ganeti.rpc

        self.patch(ganeti.rpc, "RpcClient", FakeClient)
        self.assertEqual(LiveData.for_node(Clock(), Paths("/r"), port=4711).rpc(), "client")
        self.assertEqual(made, [4711])

    def test_failover_commands_take_the_port(self) -> None:
        import argparse

        for name in ("master-failover", "activate-master-ip", "deactivate-master-ip"):
            parser = argparse.ArgumentParser()
            gnt_cluster.COMMANDS[name].setup(parser)
            self.assertEqual(parser.parse_args(["--rpc-port", "4711"]).rpc_port, 4711)
            self.assertEqual(parser.parse_args([]).rpc_port, ports.NODED)
            with self.assertRaises(SystemExit):
                parser.parse_args(["--rpc-port", "70000"])
